// TLS on a connection's non-blocking socket: the session's start and end,
// and SSL_read/SSL_write with what each waits for when it cannot go on
// (http_server.cc has the overview).
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include "net/io_thread.h"

namespace spanhouse::net::detail {

// A new connection's session; the first SSL_read does the handshake. False:
// it could not be made (logged; the caller closes the socket).
bool IoThread::StartTls(Conn& c) {
  c.ssl = SSL_new(srv_.opts.tls->ctx());
  if (c.ssl == nullptr || SSL_set_fd(c.ssl, c.fd) != 1) {
    spdlog::warn("{}: cannot start a TLS session", srv_.opts.name);
    ERR_clear_error();
    SSL_free(c.ssl);
    c.ssl = nullptr;
    return false;
  }
  SSL_set_accept_state(c.ssl);
  return true;
}

// Ends the session, with a close_notify if `notify` and the socket takes it
// now (no waiting for the client's), and frees it.
void IoThread::EndTls(Conn& c, bool notify) {
  ERR_clear_error();
  if (notify) SSL_shutdown(c.ssl);
  ERR_clear_error();
  SSL_free(c.ssl);
  c.ssl = nullptr;
}

ssize_t IoThread::ReceiveTls(Conn& c, char* dst, size_t want) {
  ERR_clear_error();  // SSL_get_error looks at this thread's error queue
  c.read_needs = TlsNeed::kNone;
  const int n = SSL_read(c.ssl, dst, static_cast<int>(std::min<size_t>(want, 1u << 30)));
  if (n > 0) return n;
  const ssize_t r = TlsRetry(c, n, "read", &c.read_needs);
  return r == -1 ? -1 : 0;
}

// After an SSL_read or SSL_write that returned n <= 0: -1 when it is to be
// retried once the socket is readable or writable (noted in *need for
// UpdateInterest), 0 when the client ended the session (close_notify), -2
// when the connection is broken.
ssize_t IoThread::TlsRetry(Conn& c, int n, const char* op, TlsNeed* need) {
  const int sys_errno = errno;  // what the failed recv/send said, for SSL_ERROR_SYSCALL
  const int err = SSL_get_error(c.ssl, n);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      *need = TlsNeed::kIn;
      return -1;
    case SSL_ERROR_WANT_WRITE:
      *need = TlsNeed::kOut;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    default:
      TlsFailed(c, op, n, err, sys_errno);
      return -2;
  }
}

// A fatal TLS error on one connection, which is then closed. A failed
// handshake is counted: it is what plain HTTP on an HTTPS port, a scanner
// or a client that distrusts the certificate looks like.
// A client that connects and leaves (a TCP health check, a port scan, one
// that resets the connection mid-handshake) is just gone, not a failure.
void IoThread::TlsFailed(Conn& c, const char* op, int ret, int err, int sys_errno) {
  c.tls_broken = true;
  const unsigned long code = ERR_peek_error();
  char reason[256] = "connection closed";
  if (code != 0) ERR_error_string_n(code, reason, sizeof(reason));
  ERR_clear_error();
  // A reset shows in errno, or (OpenSSL 3) as a system error on the queue.
  const auto is_reset = [](int e) { return e == ECONNRESET || e == EPIPE; };
  const bool reset =
      err == SSL_ERROR_SYSCALL &&
      (is_reset(sys_errno) || (ERR_GET_LIB(code) == ERR_LIB_SYS && is_reset(ERR_GET_REASON(code))));
  const bool gone = (err == SSL_ERROR_SYSCALL && ret == 0) || reset ||
                    (ERR_GET_LIB(code) == ERR_LIB_SSL &&
                     ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING);
  if (gone) return;
  if (!SSL_is_init_finished(c.ssl)) {
    srv_.opts.tls->CountHandshakeFailure();
    spdlog::debug("{}: TLS handshake failed: {}", srv_.opts.name, reason);
  } else {
    spdlog::debug("{}: TLS {} failed: {}", srv_.opts.name, op, reason);
  }
}

// A write goes from one string at a time (SSL_write has no iovec); after
// WANT_WRITE it is retried from the same offset, as OpenSSL requires.
ssize_t IoThread::TransmitTls(Conn& c) {
  const char* data;
  size_t len;
  if (c.out_sent < c.out_head.size()) {
    data = c.out_head.data() + c.out_sent;
    len = c.out_head.size() - c.out_sent;
  } else {
    const size_t off = c.out_sent - c.out_head.size();
    data = c.out_body.data() + off;
    len = c.out_body.size() - off;
  }
  ERR_clear_error();
  c.write_needs = TlsNeed::kNone;
  const int n = SSL_write(c.ssl, data, static_cast<int>(std::min<size_t>(len, 1u << 30)));
  if (n > 0) return n;
  const ssize_t r = TlsRetry(c, n, "write", &c.write_needs);
  return r == -1 ? -1 : -2;
}

}  // namespace spanhouse::net::detail
