// The intake every receiver shares: what happens to a request once its
// receiver has its body and knows its format, whatever the protocol
// (OTLP/HTTP, OTLP/gRPC, Zipkin). In order:
//   1. memory: reserved from the budget in proportion to the body, before it
//      is decompressed and decoded (waiting up to memory_wait); with the
//      durable queue, a request the budget cannot take now is spilled (it
//      waits on disk, read back by each sink as its memory allows), and so
//      is every request while every sink has such a backlog; without it,
//      kResourceExhausted (429);
//   2. decompression (the Content-Encoding, if any) within max_body_bytes;
//   3. decoding (codec/body.h), at most max_spans_per_request spans;
//   4. the filter (partial success: its report goes back with the answer),
//      then the dedup index: spans an accepted request already had (a
//      retry) are dropped, counted, and named in the answer as a warning
//      (OTLP partial success with 0 rejected spans: accepted, not retried);
//      a request of nothing but such spans is accepted without a record;
//   5. the durable queue: one record before the answer (the receive time,
//      the body's format, and the body: a protobuf body as it came, a JSON
//      one encoded as OTLP protobuf), then the spans delivered to every sink;
//   6. the answer: at once, or with the "always" fsync policy once the
//      fdatasync that covers the record has run, given from the log's sync
//      thread (the receiver's thread is not held: see Submit's `later`).
// Each refusal is a Status code, which each receiver maps onto its protocol
// once (net/http_status.h; the gRPC receiver), and one counter in IntakeStats.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "codec/body.h"
#include "common/status.h"
#include "pipeline/dedup/dedup_index.h"
#include "pipeline/durable/durable_queue.h"

namespace spanhouse::receivers {

// Limits every receiver applies the same way (config: otlp_http.*, queue.wait_ms).
struct IntakeOptions {
  size_t max_body_bytes = 20u << 20;  // after decompression
  // More spans in one request: kTooLarge (the client should send smaller batches).
  size_t max_spans_per_request = 100000;
  // How long a request may wait for memory before it is refused (or spilled).
  std::chrono::milliseconds memory_wait{250};
  // Drops spans accepted before (null: none). Outlives the intake.
  pipeline::DedupIndex* dedup = nullptr;
  // Several nodes as one system (peers.nodes): the nodes up now (PeerRing::View), stamped
  // on each request and its record (SpanBatch::peer_view). Null: this node is alone.
  std::function<uint64_t()> peer_view;
};

// One receiver's counters (spanhouse_receiver_*{receiver=...}).
struct IntakeStats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> requests_accepted{0};
  std::atomic<uint64_t> spans_received{0};   // decoded, before the filter
  std::atomic<uint64_t> spans_accepted{0};   // queued
  std::atomic<uint64_t> spans_duplicate{0};  // accepted before (dedup): not queued again
  std::atomic<uint64_t> rejected_malformed{0};
  std::atomic<uint64_t> rejected_too_large{0};
  std::atomic<uint64_t> rejected_too_many_spans{0};
  std::atomic<uint64_t> rejected_media_type{0};
  std::atomic<uint64_t> rejected_queue_full{0};
  std::atomic<uint64_t> rejected_shutting_down{0};
  std::atomic<uint64_t> rejected_durable_full{0};     // the durable queue is full
  std::atomic<uint64_t> durable_errors{0};            // the log could not be written or synced
  std::atomic<uint64_t> rejected_unauthenticated{0};  // gRPC only (HTTP: the auth guard's own)
  std::atomic<uint64_t> requests_from_peers{0};       // forwarded by another node (gRPC)
};

// What became of a request, protocol-neutral.
struct IntakeResult {
  // kOk: accepted (delivered or spilled, and durable when the log asks).
  // Otherwise the refusal: kInvalidArgument (undecodable), kTooLarge (body
  // or span count over a cap), kUnsupportedMedia (unknown Content-Encoding),
  // kResourceExhausted (memory or the durable queue full: retry soon),
  // kUnavailable (shutting down, or the log failing: retry later).
  StatusCode code = StatusCode::kOk;
  // For a refusal: what to tell the client. Accepted: the filter's report as
  // text ("" when nothing was dropped or trimmed).
  std::string message;
  uint32_t rejected_spans = 0;  // accepted: spans the filter dropped
  int retry_after_s = 0;        // retryable refusals: when to come back
  bool ok() const { return code == StatusCode::kOk; }
};

class Intake {
 public:
  // Called with the result when it comes later (on the log's sync thread).
  using Answer = std::function<void(IntakeResult&&)>;
  // Called at most once, on Submit's thread and before Submit returns, when
  // the answer will come later; returns where to send it.
  using Later = std::function<Answer()>;

  // The queue (with its memory budget and filter) must outlive the intake.
  // `stats` is shared with answers given later (possibly after the receiver
  // is gone).
  Intake(IntakeOptions options, pipeline::durable::DurableQueue& queue,
         std::shared_ptr<IntakeStats> stats);

  // Takes one request: `body` (taken) of `format`, compressed by
  // `content_encoding` ("" or "identity": not). Counts it in stats.requests
  // and its outcome in the matching counter. Returns the result, unless the
  // answer must wait for the log's fsync: then it has called `later`, and
  // returns `deferred`; the result goes to the Answer `later` returned.
  struct Submitted {
    bool deferred = false;
    IntakeResult result;  // when not deferred
  };
  // `from_peer`: forwarded by another node (peers/peer_sink.h), so every span of it is
  // this node's (SpanBatch::kViewHere), never forwarded again.
  Submitted Submit(codec::BodyFormat format, std::string body, std::string_view content_encoding,
                   const Later& later, bool from_peer = false);

  // Spans this node took and must now hand on again under `view` (a peer down for longer
  // than peers.down_after_s: its spans go to the traces' owners among the nodes up, this
  // node included), as a new request: logged (columnar bytes, with the view), then
  // delivered, not filtered or deduplicated again. Not OK: not taken (retry later).
  Status Redirect(std::unique_ptr<SpanBatch> batch, uint64_t view);

  const IntakeOptions& options() const { return opts_; }
  const std::shared_ptr<IntakeStats>& stats() const { return stats_; }

 private:
  // A refusal, counted in `counter`.
  IntakeResult Refuse(const Status& st, std::atomic<uint64_t> IntakeStats::*counter);
  // Decompressed and decoded into `batch`, or the refusal.
  IntakeResult Decode(codec::BodyFormat format, std::string body, std::string_view content_encoding,
                      SpanBatch* batch);

  IntakeOptions opts_;
  pipeline::durable::DurableQueue& queue_;
  pipeline::SpanFilter* filter_;
  std::shared_ptr<IntakeStats> stats_;
};

// Whether a Content-Encoding value means a compressed body ("" and
// "identity", in any case, do not).
bool IsCompressed(std::string_view content_encoding);

}  // namespace spanhouse::receivers
