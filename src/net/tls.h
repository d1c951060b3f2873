// TLS for a listener: a server certificate and key loaded once at start-up
// into an OpenSSL context that every connection of the listener shares.
// HttpServer does the handshakes and the encrypted reads and writes itself,
// on its non-blocking sockets (http_server.cc); this only owns the context.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX, kept out of includers

namespace spanhouse::net {

class TlsContext {
 public:
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Reads a PEM certificate chain (leaf first) and its PEM private key.
  // An unreadable file, a bad PEM or a key that does not match the
  // certificate is an error naming the file: start-up fails, not the first
  // handshake.
  static Status Load(const std::string& cert_path, const std::string& key_path,
                     std::shared_ptr<const TlsContext>* out);

  ssl_ctx_st* ctx() const { return ctx_; }

  // Handshakes that failed on the listeners using this context (counted by
  // HttpServer, shown on /metrics).
  void CountHandshakeFailure() const {
    handshake_failures_.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t handshake_failures() const { return handshake_failures_.load(); }

 private:
  explicit TlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
  mutable std::atomic<uint64_t> handshake_failures_{0};
};

}  // namespace spanhouse::net
