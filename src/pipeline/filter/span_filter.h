// The filter of unreasonable data: between the decoder and the queue, it
// drops spans no query could use (impossible times, all-zero ids) and trims
// what would bloat storage (attributes, events and links over a count,
// oversized keys and values, span names past a per-service cardinality cap).
//
// Works on the decoded SpanBatch in place: a dropped span's row is removed
// from the span columns by moving the kept rows down (its events, links and
// attributes stay behind in their columns, unreferenced: every reader goes
// through the spans' ranges); a trimmed list is a shorter range; a trimmed
// string a shorter slice. Nothing is copied or allocated per span, and a
// batch with nothing to drop is not moved at all.
//
// Every drop and trim is counted by reason, per request (FilterReport: what
// the receiver puts in the OTLP partial_success) and since start
// (FilterStats: /metrics). A dropped span counts once, under its first
// failing check in the order of RejectReason.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "model/span_batch.h"
#include "pipeline/filter/span_name_cap.h"
#include "pipeline/sampling/head_sampler.h"
#include "pipeline/sampling/tail_sampler.h"

namespace spanhouse::pipeline {

struct FilterLimits {
  // A span may start at most this far after the receiver's clock...
  uint64_t max_future_ns = 3600ull * 1000000000ull;
  // ...and at most this far before it (the storage retention: older spans
  // would be deleted at once).
  uint64_t max_age_ns = 7ull * 24 * 3600 * 1000000000ull;
  // Longest plausible duration (end - start).
  uint64_t max_duration_ns = 24ull * 3600 * 1000000000ull;
  // Per span; attributes also per event and per link. Extra ones are
  // dropped, the first ones kept, and the span's dropped_*_count raised, as
  // the OpenTelemetry SDKs' span limits do.
  uint32_t max_attributes = 128;
  uint32_t max_events = 128;
  uint32_t max_links = 128;
  // Attribute values and keys (span, resource, scope, event and link
  // attributes) longer than this are cut, at a UTF-8 character boundary
  // for text.
  uint32_t max_value_bytes = 64u << 10;
  uint32_t max_key_bytes = 256;
  // Distinct span names kept per service; 0: no cap.
  uint32_t max_span_names_per_service = 1000;
};

enum class RejectReason : uint8_t {
  kZeroTraceId,
  kZeroSpanId,
  kFutureStart,
  kTooOld,
  kNegativeDuration,
  kAbsurdDuration,
};
inline constexpr size_t kRejectReasons = 6;

enum class TrimReason : uint8_t {
  kAttributes,   // attributes dropped over the count
  kEvents,       // events dropped
  kLinks,        // links dropped
  kValueLength,  // values cut
  kKeyLength,    // keys cut
  kSpanName,     // span names replaced by kOtherSpanName
};
inline constexpr size_t kTrimReasons = 6;

// Metric labels and words of the partial-success message.
const char* ReasonName(RejectReason r);
const char* ReasonName(TrimReason r);

// What one Apply did.
struct FilterReport {
  std::array<uint32_t, kRejectReasons> rejected{};
  std::array<uint64_t, kTrimReasons> trimmed{};
  // Spans head sampling marked metrics_only: accepted, so neither rejected
  // nor a reason for a partial success.
  uint32_t sampled_out = 0;

  uint32_t rejected_spans() const;
  bool clean() const;
  // "" when clean; else e.g. "rejected 2 spans: 1 future_start (start time
  // more than 3600 s ahead), 1 zero_trace_id (all-zero trace id); trimmed: 3
  // attributes (over 128 per span, event or link; dropped)".
  std::string Message(const FilterLimits& limits) const;
};

// Since start; read by /metrics.
struct FilterStats {
  std::array<std::atomic<uint64_t>, kRejectReasons> rejected{};
  std::array<std::atomic<uint64_t>, kTrimReasons> trimmed{};
  void Add(const FilterReport& r);
};

class SpanFilter {
 public:
  explicit SpanFilter(const FilterLimits& limits);

  // Filters `batch` in place against the wall clock `now_ns` (Unix
  // nanoseconds); what it did goes to `report` (reset first) and, if
  // `count`, stats(). A request read back from the durable queue is filtered
  // again with the clock it was received at (same spans dropped, same
  // trims), not counted twice. Safe to call from several threads at once.
  // `record_lsn`: the durable-queue record a batch read back came from.
  // `tail` false: tail sampling's marks left for ApplyTail (a replay that
  // reads a record before its traces are decided, and marks it later).
  void Apply(SpanBatch& batch, uint64_t now_ns, FilterReport* report, bool count = true,
             uint64_t record_lsn = 0, bool tail = true);
  // Tail sampling's part of Apply on a batch read back (none without a tail
  // sampler; while it observes, its spans are only noted): the spans
  // sampled out.
  size_t ApplyTail(SpanBatch& batch, uint64_t record_lsn);

  // Head sampling as the last step of Apply (live and read back alike), so a
  // record read back from the queue is sampled as it was when it came;
  // null (the default): none. Set before the first Apply; not owned.
  void set_sampler(const HeadSampler* sampler) { sampler_ = sampler; }
  const HeadSampler* sampler() const { return sampler_; }
  // Tail sampling's decisions applied to records read back (count false):
  // live requests are marked by the tail window once decided. Not owned.
  void set_tail(TailSampler* tail) { tail_ = tail; }
  TailSampler* tail() const { return tail_; }

  const FilterLimits& limits() const { return limits_; }
  const FilterStats& stats() const { return stats_; }

 private:
  // Removes the spans that fail a check.
  void Reject(SpanBatch& batch, uint64_t now_ns, FilterReport* report) const;
  void TrimLists(SpanBatch& batch, FilterReport* report) const;
  void TrimStrings(SpanBatch& batch, FilterReport* report) const;

  const FilterLimits limits_;
  SpanNameCap names_;
  FilterStats stats_;
  const HeadSampler* sampler_ = nullptr;
  TailSampler* tail_ = nullptr;
};

}  // namespace spanhouse::pipeline
