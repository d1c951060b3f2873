// What the two HTTP receivers (OTLP/HTTP, Zipkin) share around the intake:
// their listener's options, the route check (one path, POST only) and the
// hand-over of a request's body with the answer deferred when the intake
// defers it (the durable queue's "always" fsync).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "net/http_server.h"
#include "receivers/intake/intake.h"

namespace spanhouse::receivers {

// An HTTP receiver's listener (OTLP/HTTP, Zipkin).
struct HttpListenerOptions {
  std::string address;  // host:port; port 0 picks a free one
  int threads = 2;
  net::HttpAuthorizer authorize{};               // empty: no token needed
  std::shared_ptr<const net::TlsContext> tls{};  // set: HTTPS only
};

// The HTTP server's options for a listener whose bodies the intake takes
// (its cap on the wire is the intake's max_body_bytes).
net::HttpServerOptions ServerOptionsOf(std::string name, const HttpListenerOptions& listener,
                                       const IntakeOptions& intake);

// False (with `resp` the 404 or 405, counted as a request) unless `req` is
// a POST to `path`.
bool IsPostTo(std::string_view path, const net::HttpRequest& req, net::HttpResponse& resp,
              IntakeStats& stats);

// Gives `req`'s body (taken) to the intake and the result to `answer`,
// which writes it into an HTTP response: into `resp` at once, or into the
// deferred answer given later from the log's sync thread.
using HttpAnswer = std::function<void(const IntakeResult&, net::HttpResponse&)>;
void SubmitHttp(Intake& intake, codec::BodyFormat format, net::HttpRequest& req,
                std::string_view content_encoding, net::HttpResponse& resp,
                net::HttpDeferral& later, HttpAnswer answer);

}  // namespace spanhouse::receivers
