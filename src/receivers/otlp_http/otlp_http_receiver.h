// OTLP/HTTP trace receiver: POST /v1/traces, protobuf or JSON, plain, gzip
// or zstd. Decodes into a SpanBatch, hands it to the queue, and answers once
// the spans are queued (the writer inserts them later, in large batches)
// and, with the durable queue, once their record is durable in its log: by
// the interval fsync policy at once, by "always" after the fdatasync that
// covers it. That answer is deferred (net::HttpDeferral) and given by the
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
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "receivers/durable/spill_backlog.h"

namespace spanhouse::receivers {

struct OtlpHttpOptions {
  std::string address = "127.0.0.1:4318";
  size_t max_body_bytes = 20u << 20;  // after decompression
  // More spans in one request: 413 (the client should send smaller batches).
  size_t max_spans_per_request = 100000;
  int threads = 2;
  // How long a request may wait for memory before it is answered 429.
  std::chrono::milliseconds memory_wait{250};
  net::HttpAuthorizer authorize{};               // empty: no token needed
  std::shared_ptr<const net::TlsContext> tls{};  // set: HTTPS only
  // The durable queue (null: none). Each accepted request is appended to it
  // as one record before the 200, which waits for the record to be durable
  // by the log's fsync policy, for as long as that takes: there is no
  // timeout, since a 503 after one would make the client send again spans
  // that are queued and will be stored (duplicates). The sync failing, or
  // the log closing first, answers 503.
  pipeline::durable::SegmentLog* log = nullptr;
  // With the log: where a request goes once logged when the memory budget
  // is spent (or others already wait there), instead of a 429 (null: 429).
  SpillBacklog* spill = nullptr;
};

struct OtlpHttpStats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> requests_accepted{0};
  std::atomic<uint64_t> spans_received{0};  // decoded, before the filter
  std::atomic<uint64_t> spans_accepted{0};  // queued
  std::atomic<uint64_t> rejected_malformed{0};
  std::atomic<uint64_t> rejected_too_large{0};
  std::atomic<uint64_t> rejected_too_many_spans{0};
  std::atomic<uint64_t> rejected_media_type{0};
  std::atomic<uint64_t> rejected_queue_full{0};
  std::atomic<uint64_t> rejected_shutting_down{0};
  std::atomic<uint64_t> rejected_durable_full{0};  // 429: the durable queue is full
  std::atomic<uint64_t> durable_errors{0};         // 503: the log could not be written or synced
};

class OtlpHttpReceiver {
 public:
  // `filter` may be null (no filtering); it must outlive the receiver.
  OtlpHttpReceiver(OtlpHttpOptions options, pipeline::ShardedQueue& queue,
                   pipeline::MemoryBudget& budget, pipeline::SpanFilter* filter = nullptr);
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
  OtlpHttpOptions opts_;
  pipeline::ShardedQueue& queue_;
  pipeline::MemoryBudget& budget_;
  pipeline::SpanFilter* filter_;
  // Shared with deferred answers, which the log's sync thread may give
  // after the receiver is gone (a sync slower than the server's Stop).
  std::shared_ptr<OtlpHttpStats> stats_ = std::make_shared<OtlpHttpStats>();
  net::HttpServer server_;
};

}  // namespace spanhouse::receivers
