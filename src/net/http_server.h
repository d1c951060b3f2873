// A small HTTP/1.1 server on Linux epoll shared by every listener (OTLP/HTTP
// receiver, query API). Handlers run on the server's I/O threads and must not
// block on anything slow: one that has to wait (the durable queue's fsync)
// defers its answer (HttpDeferral) and gives it later, from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>  // likewise
#include <utility>
#include <vector>

#include "common/status.h"
#include "net/http_parser.h"  // HttpRequest, AuthorizationHeader
#include "net/tls.h"

namespace spanhouse::net {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// The request is the handler's to consume: it may move the body (or any other
// field) out instead of copying it. A handler taking `const HttpRequest&`
// fits as well. Content-Length, Connection and Transfer-Encoding in the
// response are the server's; the handler sets status, content type, body and
// any other headers.
using HttpHandler = std::function<void(HttpRequest&, HttpResponse&)>;

// One request's answer, given later and from any thread (see HttpDeferral).
// Movable, not copyable; it answers once: Respond() empties it. Destroyed
// (or assigned over) without an answer, it answers 503 + Retry-After: the
// work behind it was abandoned (a shutdown, a bug), and a client may send
// the request again, which a 500 would tell it not to.
class HttpResponder {
 public:
  using Deliver = std::function<void(HttpResponse&&)>;
  HttpResponder() = default;  // empty: answers nothing
  // The server makes them (HttpDeferral::Defer); a test of a handler may
  // make one whose `deliver` keeps the answer.
  explicit HttpResponder(Deliver deliver) : deliver_(std::move(deliver)) {}
  HttpResponder(HttpResponder&& o) noexcept : deliver_(std::exchange(o.deliver_, nullptr)) {}
  HttpResponder& operator=(HttpResponder&& o) noexcept;
  HttpResponder(const HttpResponder&) = delete;
  HttpResponder& operator=(const HttpResponder&) = delete;
  ~HttpResponder();

  // Hands the answer over to be written; nothing on an empty responder. Safe
  // on any thread, and after the connection or the server is gone (the
  // answer is then dropped).
  void Respond(HttpResponse resp);
  bool valid() const { return deliver_ != nullptr; }

 private:
  void Abandon();  // answers 503 if nothing was answered
  Deliver deliver_;
};

// What a DeferringHttpHandler may use to answer later. Defer(), during the
// handler call: the server ignores `resp`, reads no further request on that
// connection (pipelined requests are answered in order) and writes what the
// responder is given once it is given. Not called: `resp` is the answer, as
// from an HttpHandler. A second call gets an empty responder.
class HttpDeferral {
 public:
  virtual HttpResponder Defer() = 0;

 protected:
  ~HttpDeferral() = default;
};
using DeferringHttpHandler = std::function<void(HttpRequest&, HttpResponse&, HttpDeferral&)>;

// Decides whether a request may proceed, from its head alone: it runs once
// method, target and headers are parsed and before the body is read, so a
// refused client never makes the server receive or buffer its body.
// `authorization` says how many Authorization headers the head had and the
// first one's value; the value points into the connection's input buffer and
// is only valid during the call, which is why it is not kept in HttpRequest
// (no copy per request). True: go on. False: `resp` is the answer, after
// which the connection is closed (a refused client gets no second try on
// it; a request's unread body is drained first so the answer arrives).
using HttpAuthorizer = std::function<bool(const HttpRequest& head,
                                          const AuthorizationHeader& authorization, HttpResponse&)>;

struct HttpServerOptions {
  std::string name;                   // for logs
  std::string address;                // host:port, port 0 picks a free one
  size_t max_body_bytes = 20u << 20;  // on the wire, before decompression
  int threads = 1;
  // A connection is closed when it has been silent between requests for
  // longer than this, has spent longer than this sending one request, has
  // waited this long for a deferred answer, or has read nothing of a pending
  // response for this long. Zero or less: never.
  // Checked about once a second (more often when shorter), not per read.
  std::chrono::milliseconds idle_timeout{60000};
  HttpAuthorizer authorize{};  // empty: every request proceeds
  // Set: the listener speaks HTTPS only. A failed handshake (plain HTTP
  // included) closes that connection and nothing else.
  std::shared_ptr<const TlsContext> tls{};
  // SO_SNDBUF of accepted connections; 0: the kernel's, auto-tuned. Tests
  // set a small one to reach back-pressure quickly.
  int send_buffer_bytes = 0;
};

// Requests the server answered itself, before any handler: bodies over
// max_body_bytes on the wire (413) and broken HTTP (400, 431).
struct HttpServerStats {
  std::atomic<uint64_t> refused_too_large{0};
  std::atomic<uint64_t> refused_malformed{0};
  // epoll events handled on connections, all threads together: a connection
  // that makes the loop spin shows as this growing without traffic (tests).
  std::atomic<uint64_t> connection_events{0};
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  // A handler that may answer later (HttpDeferral).
  HttpServer(HttpServerOptions options, DeferringHttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting; a bind failure is returned, not thrown.
  Status Start();
  // Stops accepting; lets requests in flight finish, deferred answers
  // included, for up to `grace`, then closes every connection and joins the
  // threads. An answer given after that is dropped.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  uint16_t port() const { return port_; }
  const HttpServerStats& stats() const;

  struct Impl;  // public so the I/O thread (io_thread.h) can name it

 private:
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// Splits "host:port"; false if it is not that.
bool SplitHostPort(const std::string& s, std::string* host, uint16_t* port);

// "127.0.0.1:4318", "[::1]:4318", "localhost:4318": only this machine can
// connect. False for anything else, wildcards (0.0.0.0, ::) included.
bool IsLoopbackAddress(const std::string& host_port);

}  // namespace spanhouse::net
