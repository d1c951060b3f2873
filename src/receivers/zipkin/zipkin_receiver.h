// Zipkin v2 trace receiver: POST /api/v2/spans, a JSON list of spans
// (application/json, also when there is no Content-Type, as Zipkin itself
// assumes) or zipkin.proto3 ListOfSpans (application/x-protobuf), plain or
// with a Content-Encoding (gzip, deflate, zstd). The spans are mapped onto
// the OTLP model (codec/zipkin.h) and go through the shared intake
// (intake/intake.h): the same memory budget, limits, filter, durable queue
// and counters as OTLP (receiver="zipkin" in /metrics).
//
// Answers are Zipkin's: 202 Accepted, no body, once the spans are queued
// (and, with the durable queue's "always" fsync, durable: deferred like the
// OTLP/HTTP receiver's). Zipkin has no partial success: spans the filter
// drops are counted in spanhouse_filter_rejected_spans_total only. Errors are
// text: 400 bad data, 413 too large (after decompression, or too many spans),
// 415 an unknown Content-Type or Content-Encoding, 429 + Retry-After when the
// memory budget or the durable queue is full, 503 + Retry-After while
// shutting down or when the log cannot be written.
#pragma once

#include <memory>

#include "net/http_server.h"
#include "pipeline/durable/durable_queue.h"
#include "receivers/intake/http_intake.h"
#include "receivers/intake/intake.h"

namespace spanhouse::receivers {

// The same knobs as the OTLP/HTTP listener's; serve gives both the same
// limits, token guard and TLS.
class ZipkinReceiver {
 public:
  // The queue must outlive the receiver.
  ZipkinReceiver(const HttpListenerOptions& listener, const IntakeOptions& intake,
                 pipeline::durable::DurableQueue& queue);
  Status Start();
  void Stop();
  uint16_t port() const { return server_.port(); }
  const IntakeStats& stats() const { return *stats_; }
  const net::HttpServerStats& http_stats() const { return server_.stats(); }

  // The request handler, public for tests that bypass the socket.
  void Handle(net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later);

 private:
  std::shared_ptr<IntakeStats> stats_ = std::make_shared<IntakeStats>();
  Intake intake_;
  net::HttpServer server_;
};

}  // namespace spanhouse::receivers
