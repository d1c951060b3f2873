// net::HttpServer: a small HTTP/1.1 server written by hand against Linux epoll.
//
// Why not Boost.Beast/Asio (what this was before): every OTLP/HTTP request
// passes through here, typically ~400 KB of protobuf, and under load Beast's
// per-operation machinery — type-erased executor copies, a timerfd re-armed
// for every read, 64 KB read_some calls, then a copy from its flat_buffer
// into the string body — cost about a fifth of the server's CPU. Here a body
// with a Content-Length is received straight into the std::string the
// handler gets (sized once, then filled by as few recv() calls as the kernel
// allows), and timeouts are a sweep about once a second instead of a timer
// per operation.
//
// Threads: each I/O thread has its own epoll instance. The listening socket
// is in all of them with EPOLLEXCLUSIVE, so a new connection wakes one idle
// thread, and the thread that accepts a connection owns it until it closes:
// nothing on the data path is shared or locked. Handlers run synchronously on
// that thread. A thread leaves new connections to another that owns fewer
// (IoThread::Accept), so that a few busy connections do not share one core.
//
// Deferred answers (HttpDeferral): a handler that would otherwise block the
// thread (the OTLP receiver waiting for an fsync) returns at once with a
// responder, and the connection waits in kDeferred, reading nothing, while
// the thread serves its other connections. The responder may be completed
// on any thread: it posts the answer, tagged with the connection's id, to
// the thread's mailbox and wakes the thread through its eventfd, and the
// thread writes it. An id, not a pointer: a connection closed meanwhile (by
// its peer, the idle timeout or Stop) is simply not found, and its answer
// is dropped.
//
// A connection is a small state machine: a request being read (its head,
// then a body by length or by chunks: HttpRequestParser, http_parser.h, fed
// from the connection's input buffer or receiving the body in place), then
// the response being given and written. Connections are
// level-triggered in epoll, so a read may stop early (a short recv() means
// the socket is drained; a busy connection yields after a few reads) and
// epoll reports what is left. While a response is being written the
// connection does not read: pipelined requests wait in its input buffer or in
// the socket, and are parsed once the response is out.
//
// Limits: 64 KiB of request head (431), max_body_bytes of body, declared or
// de-chunked (413), and idle_timeout for a silent connection, for a request
// to arrive once begun and for a response write to make progress. A request
// that breaks the protocol gets a 400 and the connection is closed, since
// where the next request would begin is no longer known.
//
// TLS (HttpServerOptions::tls): the same state machine over OpenSSL on the
// same non-blocking socket. SSL_read does the handshake on the first read;
// SSL_read and SSL_write may each need the socket readable or writable
// (WANT_READ / WANT_WRITE, e.g. a handshake message or a TLS 1.3 key update),
// which the connection remembers for each direction apart: epoll then
// watches for what the blocked call needs *instead of* what its direction
// normally waits for (a read that must write stops watching for input, which
// would otherwise keep firing while the client's bytes sit unread, and spin
// the thread). SSL_read
// returns one record at a time, so a short read does not mean the socket is
// drained: a TLS connection reads until OpenSSL wants more from the socket.
// A handshake that fails (plain HTTP sent to the port, a client that rejects
// the certificate) closes that connection and is counted on the context.
//
// Files: this one starts and stops the server; io_thread.h/.cc the epoll
// loop, connections and reading; responder.cc handlers, deferred answers
// and writing; tls_io.cc the OpenSSL calls; http_parser.h/.cc the requests'
// syntax and limits.
#include "net/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>

#include "net/io_thread.h"

namespace spanhouse::net {

bool SplitHostPort(const std::string& s, std::string* host, uint16_t* port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = s.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  unsigned p = 0;
  const char* b = s.data() + colon + 1;
  const char* e = s.data() + s.size();
  auto res = std::from_chars(b, e, p);
  if (res.ec != std::errc() || res.ptr != e || b == e || p > 65535) return false;
  *host = h;
  *port = static_cast<uint16_t>(p);
  return true;
}

bool IsLoopbackAddress(const std::string& host_port) {
  std::string host;
  uint16_t port;
  if (!SplitHostPort(host_port, &host, &port)) return false;
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  return inet_pton(AF_INET6, host.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : HttpServer(std::move(options),
                 [handler = std::move(handler)](HttpRequest& req, HttpResponse& resp,
                                                HttpDeferral&) { handler(req, resp); }) {}

HttpServer::HttpServer(HttpServerOptions options, DeferringHttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(options);
  impl_->handler = std::move(handler);
}

const HttpServerStats& HttpServer::stats() const {
  return impl_->stats;
}

HttpServer::~HttpServer() {
  Stop(std::chrono::milliseconds(0));
}

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.listen_fd >= 0 || !s.threads.empty()) return Status::Internal("server already started");
  std::string host;
  uint16_t port;
  if (!SplitHostPort(s.opts.address, &host, &port)) {
    return Status::Invalid("bad listen address '" + s.opts.address + "' (want host:port)");
  }
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_storage addr{};
  socklen_t addr_len;
  if (host.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) != 1) {
      return Status::Invalid("bad listen host '" + host + "': not an IPv6 address");
    }
    addr_len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1) {
      return Status::Invalid("bad listen host '" + host + "': not an IP address");
    }
    addr_len = sizeof(sockaddr_in);
  }

  auto fail = [&](const std::string& what) {
    const std::string message =
        "cannot listen on " + s.opts.address + ": " + what + ": " + std::strerror(errno);
    s.threads.clear();
    if (s.listen_fd >= 0) close(s.listen_fd);
    s.listen_fd = -1;
    return Status::Unavailable(message);
  };
  s.listen_fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.listen_fd < 0) return fail("socket");
  const int one = 1;
  if (setsockopt(s.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return fail("SO_REUSEADDR");
  }
  if (bind(s.listen_fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0) {
    return fail("bind");
  }
  if (listen(s.listen_fd, SOMAXCONN) != 0) return fail("listen");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return fail("getsockname");
  }
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  for (int i = 0; i < std::max(1, s.opts.threads); ++i) {
    s.threads.push_back(std::make_unique<detail::IoThread>(s));
    if (!s.threads.back()->Init()) return fail("epoll");
  }
  s.accepting = true;
  s.stopping = false;
  for (size_t i = 0; i < s.threads.size(); ++i) s.threads[i]->Start(static_cast<int>(i));
  return Status::Ok();
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.stop_mu);
  if (s.threads.empty()) return;
  // Stop accepting: connects are refused from now on, and each thread takes
  // the listening socket out of its epoll when it wakes to the flag.
  s.accepting = false;
  shutdown(s.listen_fd, SHUT_RDWR);
  for (auto& t : s.threads) t->Wake();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (s.in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Each thread closes its connections on the way out.
  s.stopping = true;
  for (auto& t : s.threads) t->Wake();
  for (auto& t : s.threads) t->Join();
  s.threads.clear();
  close(s.listen_fd);
  s.listen_fd = -1;
}

}  // namespace spanhouse::net
