#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace spanhouse::net {

namespace {

// The oldest error OpenSSL queued (usually the one that says what went
// wrong, e.g. "no start line"), and the queue emptied.
std::string TakeOpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

}  // namespace

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
}

Status TlsContext::Load(const std::string& cert_path, const std::string& key_path,
                        std::shared_ptr<const TlsContext>* out) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr)
    return Status::Internal("TLS: cannot create a context: " + TakeOpenSslError());
  // Owned from here, so every return below frees it.
  std::shared_ptr<const TlsContext> holder(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // No TLS 1.2 renegotiation: a client could otherwise make the server redo
  // handshakes (CPU) and turn an SSL_write into one that must read first.
  // Session tickets stay (resumption spares reconnecting clients a full
  // handshake); the server loop handles the writes they need.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  // Partial writes and a retried write from a moved buffer fit the server's
  // write loop, which resumes from an offset; released buffers keep an idle
  // keep-alive connection at a few KiB instead of ~34 KiB.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_path.c_str()) != 1) {
    return Status::Invalid("TLS certificate '" + cert_path +
                           "': cannot load a PEM certificate: " + TakeOpenSslError());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_path.c_str(), SSL_FILETYPE_PEM) != 1) {
    // A key for another certificate is found out here already.
    if (ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH) {
      return Status::Invalid("TLS key '" + key_path + "' does not match the certificate '" +
                             cert_path + "': " + TakeOpenSslError());
    }
    return Status::Invalid("TLS key '" + key_path +
                           "': cannot load a PEM private key: " + TakeOpenSslError());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return Status::Invalid("TLS key '" + key_path + "' does not match the certificate '" +
                           cert_path + "': " + TakeOpenSslError());
  }
  *out = std::move(holder);
  return Status::Ok();
}

}  // namespace spanhouse::net
