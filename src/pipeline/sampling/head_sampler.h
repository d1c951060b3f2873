// Head sampling: which spans to keep, decided as a request comes in, before
// the durable queue, from the trace id alone, so every spanhouse process
// (and the same process after a restart, reading its queue back) decides a
// trace the same way.
//
// OpenTelemetry's consistent probability sampling: a trace's randomness R
// (the tracestate's ot=rv, else the trace id's last 56 bits) is compared
// with a rejection threshold T = (1 - p) * 2^56: kept when R >= T. Under one
// probability a trace is kept or dropped whole; with per-service
// probabilities a trace kept at a lower one is kept wherever it is higher.
// A span the SDK already sampled (ot=th:T_in) is kept when R >= max(T, T_in)
// (it was sent, so R >= T_in); a kept span carries the threshold that kept
// it in its tracestate (ot=th:), so counts can be adjusted by 1 / p.
//
// A span sampled out is not removed: it is marked metrics_only, so the
// metrics (RED, dependency edges, the catalog) still count it and stay
// exact; only the span itself is not stored.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/span_batch.h"

namespace spanhouse::pipeline {

struct HeadSamplingOptions {
  double probability = 1.0;  // (0..1]; 0 keeps nothing
  // Per-service probabilities (by the resource's service.name) in place of
  // `probability`.
  std::vector<std::pair<std::string, double>> services;
  int precision = 4;  // significant hex digits of the thresholds written
};

// Since start; read by /metrics. Traces are counted by their root spans.
struct HeadSamplingStats {
  std::atomic<uint64_t> kept_spans{0};
  std::atomic<uint64_t> dropped_spans{0};
  std::atomic<uint64_t> kept_traces{0};
  std::atomic<uint64_t> dropped_traces{0};
  std::atomic<uint64_t> bad_tracestate{0};  // an ot entry not understood (ignored)
};

class HeadSampler {
 public:
  explicit HeadSampler(HeadSamplingOptions options);

  // False when every probability is 1: Apply changes nothing.
  bool active() const { return active_; }
  const HeadSamplingOptions& options() const { return opts_; }
  // The probability `service`'s spans are kept with.
  double ProbabilityOf(std::string_view service) const;

  // Marks the spans sampled out metrics_only and writes the threshold into
  // the kept ones' tracestate where it rose. A deterministic function of the
  // batch: a request read back from the queue is sampled the same. Returns
  // the spans sampled out; counted in stats() when `count`. Thread-safe.
  size_t Apply(SpanBatch& batch, bool count) const;

  const HeadSamplingStats& stats() const { return stats_; }

 private:
  uint64_t ThresholdOf(std::string_view service) const;

  HeadSamplingOptions opts_;
  uint64_t default_th_ = 0;
  std::unordered_map<std::string, uint64_t> service_th_;
  bool active_ = false;
  mutable HeadSamplingStats stats_;
};

}  // namespace spanhouse::pipeline
