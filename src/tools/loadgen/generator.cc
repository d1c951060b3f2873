// TraceGenerator: the builder (generator_builder.h) driven one trace at a
// time, or a collector's export at a time.
#include "tools/loadgen/generator.h"

#include "tools/loadgen/generator_builder.h"

namespace spanhouse::loadgen {

using corpus::kServiceCount;
using corpus::kServices;

const char* CorpusKindName(CorpusKind kind) {
  return kind == CorpusKind::kFresh ? "fresh" : "replay";
}

bool ParseCorpusKind(std::string_view text, CorpusKind* kind) {
  if (text == "replay") {
    *kind = CorpusKind::kReplay;
  } else if (text == "fresh") {
    *kind = CorpusKind::kFresh;
  } else {
    return false;
  }
  return true;
}

TraceGenerator::TraceGenerator(CorpusOptions options)
    : builder_(std::make_unique<corpus::TraceBuilder>(options)) {}

TraceGenerator::~TraceGenerator() = default;

size_t TraceGenerator::AppendTrace(uint64_t start_ns, SpanBatch* out) {
  corpus::TraceBuilder& m = *builder_;
  m.ClearScratch();
  for (auto& pool : m.pod_pool) pool.clear();
  m.BuildTrace(start_ns);
  return m.Emit(out);
}

size_t TraceGenerator::AppendTraces(uint64_t start_ns, uint64_t spacing_ns, size_t min_spans,
                                    SpanBatch* out) {
  corpus::TraceBuilder& m = *builder_;
  m.ClearScratch();
  for (int s = 0; s < kServiceCount; ++s) {
    auto& pool = m.pod_pool[s];
    pool.clear();
    const int n = kServices[s].pods;
    const int k = n < 3 ? n : 3;
    while (static_cast<int>(pool.size()) < k) {
      const auto p = static_cast<uint16_t>(m.rng.Below(static_cast<uint32_t>(n)));
      bool dup = false;
      for (uint16_t q : pool) dup = dup || q == p;
      if (!dup) pool.push_back(p);
    }
  }
  uint64_t t = start_ns;
  do {
    m.BuildTrace(t);
    t += spacing_ns;
  } while (m.spans.size() < min_spans);
  return m.Emit(out);
}

void TraceGenerator::SetRunId(std::string_view run_id) {
  builder_->run_id.assign(run_id);
}

void TraceGenerator::SetMarkShape(const MarkShape& shape) {
  builder_->shape = shape;
}

}  // namespace spanhouse::loadgen
