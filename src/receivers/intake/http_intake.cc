#include "receivers/intake/http_intake.h"

#include <memory>
#include <string>
#include <utility>

namespace spanhouse::receivers {

net::HttpServerOptions ServerOptionsOf(std::string name, const HttpListenerOptions& listener,
                                       const IntakeOptions& intake) {
  return {.name = std::move(name),
          .address = listener.address,
          .max_body_bytes = intake.max_body_bytes,
          .threads = listener.threads,
          .authorize = listener.authorize,
          .tls = listener.tls};
}

bool IsPostTo(std::string_view path, const net::HttpRequest& req, net::HttpResponse& resp,
              IntakeStats& stats) {
  if (req.path() != path) {
    stats.requests++;
    resp.status = 404;
    resp.body = "not found: this endpoint serves POST " + std::string(path) + "\n";
    return false;
  }
  if (req.method != "POST") {
    stats.requests++;
    resp.status = 405;
    resp.headers.emplace_back("Allow", "POST");
    resp.body = "method not allowed: use POST\n";
    return false;
  }
  return true;
}

void SubmitHttp(Intake& intake, codec::BodyFormat format, net::HttpRequest& req,
                std::string_view content_encoding, net::HttpResponse& resp,
                net::HttpDeferral& later, HttpAnswer answer) {
  // The answer may wait for the durable queue's fsync, but this I/O thread
  // does not: the log's sync thread answers, and the connection reads no
  // further request until then.
  Intake::Submitted done =
      intake.Submit(format, std::move(req.body), content_encoding, [&later, &answer] {
        auto responder = std::make_shared<net::HttpResponder>(later.Defer());
        return [responder, answer](IntakeResult&& r) {
          net::HttpResponse deferred;
          answer(r, deferred);
          responder->Respond(std::move(deferred));
        };
      });
  if (!done.deferred) answer(done.result, resp);
}

}  // namespace spanhouse::receivers
