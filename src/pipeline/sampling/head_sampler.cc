#include "pipeline/sampling/head_sampler.h"

#include <algorithm>

#include "pipeline/sampling/trace_state.h"

namespace spanhouse::pipeline {

HeadSampler::HeadSampler(HeadSamplingOptions options)
    : opts_(std::move(options)),
      default_th_(pipeline::ThresholdOf(opts_.probability, opts_.precision)) {
  active_ = default_th_ != 0;
  for (const auto& [service, p] : opts_.services) {
    const uint64_t th = pipeline::ThresholdOf(p, opts_.precision);
    service_th_[service] = th;
    active_ |= th != 0;
  }
}

uint64_t HeadSampler::ThresholdOf(std::string_view service) const {
  if (service_th_.empty()) return default_th_;
  auto it = service_th_.find(std::string(service));
  return it == service_th_.end() ? default_th_ : it->second;
}

double HeadSampler::ProbabilityOf(std::string_view service) const {
  return pipeline::ProbabilityOf(ThresholdOf(service));
}

size_t HeadSampler::Apply(SpanBatch& batch, bool count) const {
  if (!active_) return 0;
  auto& s = batch.spans;
  const size_t n = batch.span_count();
  // The threshold of each resource's service, looked up once per resource.
  std::vector<uint64_t> res_th(batch.resources.service_name.size());
  for (size_t r = 0; r < res_th.size(); ++r) {
    res_th[r] = ThresholdOf(batch.Str(batch.resources.service_name[r]));
  }
  size_t dropped = 0;
  size_t kept = 0;
  size_t dropped_roots = 0;
  size_t kept_roots = 0;
  uint64_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s.metrics_only[i] != 0) continue;
    const bool root = IsZero(s.parent_span_id[i]);
    const uint64_t th = res_th[s.resource[i]];
    if (th == 0) {  // probability 1: kept as it came
      kept++;
      kept_roots += root ? 1 : 0;
      continue;
    }
    const std::string_view state = batch.Str(s.trace_state[i]);
    const OtTraceState ts = ParseOtTraceState(state);
    bad += ts.malformed ? 1 : 0;
    const uint64_t r = RandomnessOf(s.trace_id[i], ts);
    // A threshold the randomness contradicts is not believed (the spec's
    // rule: the span could not have been sampled with it).
    const uint64_t th_in = ts.has_th && r >= ts.th ? ts.th : 0;
    if (th >= kMaxThreshold || r < std::max(th, th_in)) {
      s.metrics_only[i] = 1;
      dropped++;
      dropped_roots += root ? 1 : 0;
      continue;
    }
    kept++;
    kept_roots += root ? 1 : 0;
    if (th > th_in) s.trace_state[i] = batch.AddString(WithThreshold(state, th));
  }
  if (count) {
    stats_.kept_spans += kept;
    stats_.dropped_spans += dropped;
    stats_.kept_traces += kept_roots;
    stats_.dropped_traces += dropped_roots;
    stats_.bad_tracestate += bad;
  }
  return dropped;
}

}  // namespace spanhouse::pipeline
