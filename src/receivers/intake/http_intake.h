// What the two HTTP receivers (OTLP/HTTP, Zipkin) share around the intake:
// their listener's options, the route check (one path, POST only) and the
// hand-over of a request's body with the answer deferred when the intake
// defers it (the durable queue's "always" fsync).
#pragma once

#include <functional>
#include <string_view>

#include "net/http_server.h"
#include "receivers/intake/intake.h"
#include "receivers/otlp_http/otlp_http_options.h"

namespace spanhouse::receivers {

// The intake's part of a listener's options.
IntakeOptions IntakeOptionsOf(const OtlpHttpOptions& o);
// The HTTP server's part.
net::HttpServerOptions ServerOptionsOf(std::string name, const OtlpHttpOptions& o);

// False (with `resp` the 404 or 405, counted as a request) unless `req` is
// a POST to `path`.
bool IsPostTo(std::string_view path, const net::HttpRequest& req, net::HttpResponse& resp,
              IntakeStats& stats);

// Gives `req`'s body (taken) to the intake and the result to `answer`,
// which writes it into an HTTP response: into `resp` at once, or into the
// deferred answer given later from the log's sync thread.
using HttpAnswer = std::function<void(const IntakeResult&, net::HttpResponse&)>;
void SubmitHttp(Intake& intake, pipeline::durable::BodyFormat format, net::HttpRequest& req,
                std::string_view content_encoding, net::HttpResponse& resp,
                net::HttpDeferral& later, HttpAnswer answer);

}  // namespace spanhouse::receivers
