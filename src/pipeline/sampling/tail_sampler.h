// Tail sampling's memory of traces: which are open (their spans still
// coming in, the policies' evidence gathered span by span) and which are
// decided (kept by a named policy, or dropped), and the marking of a batch's
// spans by those decisions.
//
// A trace's window opens with its first span (Observe) and closes
// decision_wait later (DecideDue): the policy list (tail_policy.h) decides
// it with what arrived. A batch is marked (Apply) only once its traces are
// decided: a dropped trace's spans become metrics_only (counted in the
// metrics, not stored), a kept trace's root span (every span, when no root
// had arrived by the decision) gets the attribute sampling.policy naming
// the policy that kept it. Late spans follow the decision.
//
// Every reading of a durable-queue record must mark the same spans (a block
// formed again after a crash is written with its old token). So each
// decision is logged (`persist`, a record of the durable queue) before a
// span is marked by it, and again after any record that uses it and was
// logged after it, so that the log, deleted oldest segment first, holds the
// decision as long as it holds a record that needs it, and a block record
// (logged after the marking) never outlives it. At start the decisions
// found in the log are loaded (Load). A record read back whose trace has no
// decision (it was spilled, or the process stopped before deciding) is
// decided at once with what is known of the trace.
//
// Memory: every trace known (open or decided) costs kTraceBytes of the
// memory budget. Observe refuses a batch whose new traces do not fit: the
// caller spills the request to the durable queue (never dropped), where it
// is decided when read back. Decided traces are forgotten keep_ns after
// their decision.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/memory_budget.h"
#include "model/span_batch.h"
#include "pipeline/sampling/tail_policy.h"

namespace spanhouse::pipeline {

struct TailSamplingOptions {
  uint64_t decision_wait_ns = 10ull * 1000000000ull;
  // How long a decision is remembered for late spans and records read back
  // (plus decision_wait_ns: a late span waits that long in the window).
  uint64_t keep_ns = 60ull * 1000000000ull;
};

// Since start; read by /metrics (traces: TailPolicies::kept/dropped).
struct TailSamplingStats {
  std::atomic<uint64_t> kept_spans{0};
  std::atomic<uint64_t> dropped_spans{0};
  std::atomic<uint64_t> late_spans{0};       // of a trace decided before they came
  std::atomic<uint64_t> late_requests{0};    // with late spans only: handed on at once
  std::atomic<uint64_t> decided_at_once{0};  // traces decided when read back
  std::atomic<uint64_t> refused_batches{0};  // no memory for their traces: spilled
  std::atomic<uint64_t> persist_errors{0};   // a decision record not written
};

class TailSampler {
 public:
  // What one trace costs the budget, open or decided (its table entry, the
  // table's share of buckets and its place in the time-ordered queue).
  static constexpr size_t kTraceBytes = 128;
  // The attribute a kept trace's root span carries.
  static constexpr std::string_view kPolicyAttribute = "sampling.policy";

  // `budget` must outlive the sampler.
  TailSampler(TailSamplingOptions options, std::unique_ptr<TailPolicies> policies,
              MemoryBudget* budget);
  ~TailSampler();

  // Where decisions are logged before they mark a span: the durable queue's
  // log. Returns the record's LSN, or 0 when it could not be written. Unset:
  // decisions are not logged. Set before the first span.
  using Persist = std::function<uint64_t(std::string_view payload)>;
  void set_persist(Persist persist) { persist_ = std::move(persist); }

  // Several nodes as one system: whether this node owns a trace under a
  // request's view (SpanBatch::peer_view; peers/ring.h). The spans of other
  // nodes' traces are neither noted nor marked here: their owners sample
  // them, so a trace is decided once, whole. Unset: every trace is this
  // node's. Set before the first span.
  using Owns = std::function<bool(const TraceId&, uint64_t view)>;
  void set_owns(Owns owns) { owns_ = std::move(owns); }

  // Notes the spans of `batch` (received at `now_ns`) in their traces. False,
  // and nothing noted, when the budget cannot take its new traces.
  // `*decided` (if given): every trace of the batch was decided already (its
  // spans are all late), so it need not wait.
  bool Observe(const SpanBatch& batch, uint64_t now_ns, bool* decided = nullptr);
  // Decides every open trace whose window closed by `now_ns` (every open
  // one when `all`), logging the decisions. Returns how many.
  size_t DecideDue(uint64_t now_ns, bool all = false);
  // Marks `batch`'s spans by their traces' decisions; `record_lsn` is the
  // durable-queue record the batch came from (0: none). A trace not decided
  // yet is decided now with what is known of it. Returns the spans marked
  // metrics_only. Counted in stats() when `count`.
  size_t Apply(SpanBatch& batch, uint64_t record_lsn, uint64_t now_ns, bool count);
  // At start, before the records are read back: while set, Apply only notes
  // the spans of undecided traces (DecideDue(all) decides them after), so a
  // trace whose spans lie in several records is decided with all of them.
  void set_observing(bool on) { observing_ = on; }
  // Forgets decisions older than keep_ns + decision_wait_ns.
  void Forget(uint64_t now_ns);
  // A decision record's payload (from the log at start).
  void Load(std::string_view payload, uint64_t lsn, uint64_t now_ns);

  const TailSamplingOptions& options() const { return opts_; }
  TailPolicies& policies() { return *policies_; }
  const TailPolicies& policies() const { return *policies_; }
  const TailSamplingStats& stats() const { return stats_; }
  size_t open_traces() const { return open_count_.load(std::memory_order_relaxed); }
  size_t decided_traces() const { return decided_count_.load(std::memory_order_relaxed); }
  size_t memory_bytes() const { return (open_traces() + decided_traces()) * kTraceBytes; }

 private:
  static constexpr int8_t kOpen = -2;
  enum Flags : uint8_t { kHasRoot = 1, kSeen = 2, kRootless = 4 };
  struct Entry {
    uint64_t matched = 0;
    uint64_t randomness = 0;
    uint64_t time_ns = 0;  // open: first seen; decided: when decided
    uint64_t lsn = 0;      // decided: its latest decision record
    uint32_t service = 0;  // index into services_
    int8_t decision = kOpen;
    uint8_t flags = 0;
  };
  using Table = std::unordered_map<TraceId, Entry, TraceIdHash>;

  // Under mu_.
  uint32_t ServiceIndex(std::string_view service);
  // ServiceIndex of each resource of `batch`.
  std::vector<uint32_t> ServicesOf(const SpanBatch& batch);
  // Per span of `batch`: 1 for another node's trace (empty: none is).
  std::vector<uint8_t> Foreign(const SpanBatch& batch) const;
  // Opens the traces of `batch`'s spans not known yet and notes the spans
  // of open ones (not `foreign` ones); spans of decided traces are counted
  // in `late`. Returns the traces opened.
  size_t Open(const SpanBatch& batch, uint64_t now_ns, uint64_t* late,
              const std::vector<uint8_t>& foreign);
  void Note(const SpanBatch& b, uint32_t i, Entry* e, uint32_t service);
  void DecideOne(const TraceId& id, Entry* e, uint64_t now_ns, std::string* record);
  // Logs `record` (decisions) and stamps their entries; false on failure.
  uint64_t Write(const std::string& record);
  static void AddToRecord(std::string* record, const TraceId& id, const Entry& e);

  const TailSamplingOptions opts_;
  std::unique_ptr<TailPolicies> policies_;
  MemoryBudget* budget_;
  Persist persist_;
  Owns owns_;
  TailSamplingStats stats_;

  std::mutex mu_;
  Table traces_;                                             // by mu_
  std::deque<std::pair<uint64_t, TraceId>> opened_;          // by mu_: first seen, in order
  std::deque<std::pair<uint64_t, TraceId>> decided_;         // by mu_: decided, in order
  std::vector<std::string> services_{""};                    // by mu_
  std::unordered_map<std::string, uint32_t> service_index_;  // by mu_
  std::atomic<bool> observing_{false};
  std::atomic<size_t> open_count_{0};
  std::atomic<size_t> decided_count_{0};
};

}  // namespace spanhouse::pipeline
