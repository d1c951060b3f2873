// Tail sampling's policies: which traces to keep once their spans are in,
// as a list where the first policy that keeps a trace wins (and is named as
// the reason it was kept).
//
// Written as one line, policies split by ';':
//   error                          a span of the trace has status ERROR
//   latency [SERVICE[/OP]] DUR     a span (of that service, operation) lasts
//                                  at least DUR (500ms, 2s, 250us)
//   attribute KEY[=VALUE]          a span has the attribute (with that value,
//                                  as text: "503", "true")
//   rate [SERVICE] N/s             up to N traces a second per service (the
//                                  root span's, else the first span's); with
//                                  SERVICE for that service only
//   probability P                  a share P of the rest, consistent by trace
//                                  id (the head sampler's rule)
// e.g. "error; latency checkout 500ms; rate 20/s; probability 0.01".
//
// The span-level policies (error, latency, attribute) are checked span by
// span as a trace's spans arrive (Observe), into a bit mask per trace; Decide
// reads the mask once the trace's window has closed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::pipeline {

struct TailPolicy {
  enum class Kind : uint8_t { kError, kLatency, kAttribute, kRate, kProbability };
  Kind kind;
  std::string service;    // latency, rate: "" = any
  std::string operation;  // latency: "" = any
  uint64_t min_duration_ns = 0;
  std::string key;  // attribute
  bool any_value = true;
  std::string value;
  double per_second = 0;   // rate
  uint64_t threshold = 0;  // probability: keep when randomness >= threshold
  std::string name;        // its text, as /metrics and the stored spans name it
};

// What the policies need to know of one trace, filled span by span.
struct TraceVerdictState {
  uint64_t matched = 0;  // bit i: span-level policy i matched a span
  std::string service;   // the root span's service, else the first span's
  bool has_root = false;
  bool seen = false;        // a span was observed (randomness set)
  uint64_t randomness = 0;  // the trace's 56-bit randomness (tracestate rv, else the id)
};

// The kept trace's policy, or kDropped.
inline constexpr int kDropped = -1;

class TailPolicies {
 public:
  // Parses the policy line; an error names the policy that is wrong.
  static Status Parse(std::string_view text, std::unique_ptr<TailPolicies>* out);

  const std::vector<TailPolicy>& policies() const { return policies_; }

  // Notes span `i` of `b` in its trace's state.
  void Observe(const SpanBatch& b, uint32_t i, TraceVerdictState* st) const;
  // The span-level policies' bits `matched` gains from span `i` of `b`.
  uint64_t Matches(const SpanBatch& b, uint32_t i, uint64_t matched) const;
  // The first policy that keeps the trace (its index), or kDropped. A rate
  // policy spends its budget here: call once per trace. `now_ns`: the
  // decision's time (the rate's clock). Thread-safe.
  int Decide(const TraceVerdictState& st, uint64_t now_ns);

  // Several nodes as one system, each deciding the traces it owns: the share
  // of every `rate` this node keeps (1 / the nodes up), so that together
  // they keep the rate. Unset: 1. Set before the first decision.
  void set_rate_share(std::function<double()> share) { share_ = std::move(share); }

  // Since start, per policy: traces kept by it; and traces dropped.
  uint64_t kept(size_t policy) const { return kept_[policy]->load(); }
  uint64_t dropped() const { return dropped_.load(); }

 private:
  struct Bucket {
    double tokens = 0;
    uint64_t last_ns = 0;
  };
  bool TakeToken(size_t policy, const std::string& service, uint64_t now_ns);

  std::vector<TailPolicy> policies_;
  std::function<double()> share_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> kept_;
  std::atomic<uint64_t> dropped_{0};
  std::mutex mu_;                                                 // the rate buckets
  std::vector<std::unordered_map<std::string, Bucket>> buckets_;  // per policy, per service
};

}  // namespace spanhouse::pipeline
