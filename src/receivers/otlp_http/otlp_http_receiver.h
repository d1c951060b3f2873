// OTLP/HTTP trace receiver: POST /v1/traces, protobuf or JSON, plain, gzip
// or zstd. Content negotiation and status codes are its own; the rest is the
// shared intake (intake/intake.h). Decodes into a SpanBatch, hands it to the queue, and answers
// once the spans are queued (the writer inserts them later, in large batches) and, with the durable
// queue, once their record is durable in its log: by the interval fsync policy at once, by "always"
// after the fdatasync that covers it. That answer is deferred (net::HttpDeferral) and given by the
// log's sync thread, so the I/O thread serves other connections meanwhile.
//
// Answers follow the OTLP/HTTP specification: 200 with an
// ExportTraceServiceResponse in the request's encoding; 400 for bad data and
// 413 for an oversized body (neither retryable); 429 + Retry-After when the
// memory budget or the durable queue cannot take the request, and 503 +
// Retry-After while shutting down or when the log cannot be written (all
// retryable). Memory is reserved from the budget in proportion to the body
// *before* it is decompressed and decoded. A decoded request goes through
// the SpanFilter, when one is given, before it is queued: what it drops or
// trims is reported in the 200's partial_success.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "net/http_server.h"
#include "pipeline/durable/durable_queue.h"
#include "receivers/intake/http_intake.h"
#include "receivers/intake/intake.h"

namespace spanhouse::receivers {

// Its counters: the shared intake's (receiver="otlp_http" in /metrics).
using OtlpHttpStats = IntakeStats;

class OtlpHttpReceiver {
 public:
  // The queue must outlive the receiver.
  OtlpHttpReceiver(const HttpListenerOptions& listener, const IntakeOptions& intake,
                   pipeline::durable::DurableQueue& queue);
  Status Start();
  void Stop();
  uint16_t port() const { return server_.port(); }
  const OtlpHttpStats& stats() const { return *stats_; }
  // What the HTTP server refused before the handler (bodies over the cap on the wire).
  const net::HttpServerStats& http_stats() const { return server_.stats(); }

  // The request handler, public for tests that bypass the socket. With the
  // "always" fsync policy it defers every accepted request's answer.
  void Handle(net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later);

 private:
  // Shared with deferred answers, which the log's sync thread may give
  // after the receiver is gone (a sync slower than the server's Stop).
  std::shared_ptr<OtlpHttpStats> stats_ = std::make_shared<OtlpHttpStats>();
  Intake intake_;
  net::HttpServer server_;
};

}  // namespace spanhouse::receivers
