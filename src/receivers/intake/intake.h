// The intake every receiver shares: what happens to a request once its
// receiver has its body and knows its format, whatever the protocol
// (OTLP/HTTP, OTLP/gRPC, Zipkin). In order:
//   1. memory: reserved from the budget in proportion to the body, before it
//      is decompressed and decoded (waiting up to memory_wait); with the
//      durable queue, a request the budget cannot take now is spilled (it
//      waits on disk, spill_backlog.h), and so is every request while others
//      wait there; without it, kMemoryFull;
//   2. decompression (the Content-Encoding, if any) within max_body_bytes;
//   3. decoding (durable/logged_request.h: DecodeBody), at most
//      max_spans_per_request spans;
//   4. the filter (partial success: its report goes back with kAccepted);
//   5. the durable log: one kEncodedRequest record before the answer: the
//      receive time, the body's format and the body (a protobuf body as it
//      came, a JSON one encoded as OTLP protobuf);
//   6. the queue (or the spill backlog);
//   7. the answer: at once, or with the "always" fsync policy once the
//      fdatasync that covers the record has run, given from the log's sync
//      thread (the receiver's thread is not held: see Submit's `later`).
// Each step's refusal is one Outcome, which each receiver maps onto its
// protocol (HTTP status, gRPC status), and one counter in IntakeStats.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "pipeline/durable/request_record.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "receivers/durable/spill_backlog.h"

namespace spanhouse::receivers {

struct IntakeOptions {
  size_t max_body_bytes = 20u << 20;  // after decompression
  // More spans in one request: kTooManySpans (the client should send smaller batches).
  size_t max_spans_per_request = 100000;
  // How long a request may wait for memory before it is refused (or spilled).
  std::chrono::milliseconds memory_wait{250};
  // The durable queue (null: none). Each accepted request is appended to it
  // as one record before it is answered, which waits for the record to be
  // durable by the log's fsync policy, for as long as that takes: there is
  // no timeout, since a retryable refusal after one would make the client
  // send again spans that are queued and will be stored (duplicates). The
  // sync failing, or the log closing first, is kDurableError.
  pipeline::durable::SegmentLog* log = nullptr;
  // With the log: where a request goes once logged when the memory budget
  // is spent (or others already wait there), instead of kMemoryFull.
  SpillBacklog* spill = nullptr;
};

// One receiver's counters (spanhouse_receiver_*{receiver=...}).
struct IntakeStats {
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
  std::atomic<uint64_t> rejected_durable_full{0};     // the durable queue is full
  std::atomic<uint64_t> durable_errors{0};            // the log could not be written or synced
  std::atomic<uint64_t> rejected_unauthenticated{0};  // gRPC only (HTTP: the auth guard's own)
};

// What became of a request, protocol-neutral.
enum class Outcome {
  kAccepted,      // queued (or spilled), and durable when the log asks: report = the filter's
  kBadData,       // undecodable body or compression (not retryable)
  kTooLarge,      // over max_body_bytes after decompression (not retryable)
  kTooManySpans,  // over max_spans_per_request (not retryable)
  kUnsupported,   // an unknown Content-Encoding (not retryable)
  kMemoryFull,    // the memory budget or the queue cannot take it now (retryable)
  kDurableFull,   // the durable queue is full (retryable)
  kShuttingDown,  // the queue is closed (retryable, elsewhere or later)
  kDurableError,  // the log could not be written or synced (retryable)
};

struct IntakeResult {
  Outcome outcome = Outcome::kAccepted;
  // For a refusal: what to tell the client. For kAccepted: the filter's
  // report as text ("" when nothing was dropped or trimmed).
  std::string message;
  uint32_t rejected_spans = 0;  // kAccepted: spans the filter dropped
  int retry_after_s = 0;        // retryable refusals: when to come back
  bool ok() const { return outcome == Outcome::kAccepted; }
};

class Intake {
 public:
  // Called with the result when it comes later (on the log's sync thread).
  using Answer = std::function<void(IntakeResult&&)>;
  // Called at most once, on Submit's thread and before Submit returns, when
  // the answer will come later; returns where to send it.
  using Later = std::function<Answer()>;

  // `filter` may be null (no filtering); it, the queue, budget, log and
  // spill backlog must outlive the intake. `stats` is shared with answers
  // given later (possibly after the receiver is gone).
  Intake(IntakeOptions options, pipeline::ShardedQueue& queue, pipeline::MemoryBudget& budget,
         pipeline::SpanFilter* filter, std::shared_ptr<IntakeStats> stats);

  // Takes one request: `body` (taken) of `format`, compressed by
  // `content_encoding` ("" or "identity": not). Counts it in stats.requests
  // and its outcome in the matching counter. Returns the result, unless the
  // answer must wait for the log's fsync: then it has called `later`, and
  // returns `deferred`; the result goes to the Answer `later` returned.
  struct Submitted {
    bool deferred = false;
    IntakeResult result;  // when not deferred
  };
  Submitted Submit(pipeline::durable::BodyFormat format, std::string body,
                   std::string_view content_encoding, const Later& later);

  const IntakeOptions& options() const { return opts_; }
  const std::shared_ptr<IntakeStats>& stats() const { return stats_; }

 private:
  IntakeResult Refuse(Outcome outcome, std::string message);

  IntakeOptions opts_;
  pipeline::ShardedQueue& queue_;
  pipeline::MemoryBudget& budget_;
  pipeline::SpanFilter* filter_;
  std::shared_ptr<IntakeStats> stats_;
};

// The HTTP status both HTTP receivers answer an outcome with: 200 (the
// receiver may prefer 202), 400, 413, 415, 429 and 503.
int HttpStatusOf(Outcome outcome);

// Whether a Content-Encoding value means a compressed body ("" and
// "identity", in any case, do not).
bool IsCompressed(std::string_view content_encoding);

}  // namespace spanhouse::receivers
