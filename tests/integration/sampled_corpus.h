// Generated traces with spans sampled out (SpanBatch::Spans::metrics_only),
// for the tests that store them in one database and the same spans all kept
// in another: the RED tables, the catalog and the dependency edges must come
// out the same.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/span_batch.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::testdata {

struct SampledCorpus {
  // The spans in two batches (even and odd spans of `all` apart, so a parent
  // and its child are in different batches and inserts), with metrics_only
  // marks; `kept_*` the same spans with every mark cleared.
  SpanBatch first, second, kept_first, kept_second;
  size_t kept = 0;     // spans not sampled out
  size_t sampled = 0;  // spans sampled out
  // Parent-child pairs of spans where one end was sampled out and the
  // other kept: the parent kept and the child sampled out, and the other way.
  size_t kept_parent_sampled_child = 0;
  size_t sampled_parent_kept_child = 0;
};

// `traces` generated traces from `base_ns`, 250 ms apart (seed 11), and one
// trace of two services that only ever had spans sampled out ("ghost"
// calling "ghost-db", an error). Trace k: k % 4 == 0 all kept, 1 all
// sampled out, 2 the spans at odd depth sampled out, 3 those at even depth.
inline SampledCorpus MakeSampledCorpus(size_t traces, uint64_t base_ns) {
  constexpr size_t kGhost = ~size_t{0};  // the ghost trace: sampled out
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{11});
  SpanBatch all;
  std::vector<size_t> trace_of;  // per span
  for (size_t t = 0; t < traces; ++t) {
    const size_t n = gen.AppendTrace(base_ns + t * 250000000ull, &all);
    trace_of.insert(trace_of.end(), n, t);
  }
  {
    // The ghost trace, after the others.
    auto s = [&](std::string_view x) { return all.AddString(x); };
    const uint32_t sc = all.AddScope();
    all.scopes.name[sc] = s("ghost.scope");
    uint32_t parent = 0;
    for (int i = 0; i < 2; ++i) {
      const uint32_t r = all.AddResource();
      SpanBatch::AddAttr(all.resource_attrs, s("service.name"), ValueType::kString,
                         s(i == 0 ? "ghost" : "ghost-db"));
      all.resources.attrs[r] = {static_cast<uint32_t>(all.resource_attrs.size() - 1),
                                static_cast<uint32_t>(all.resource_attrs.size())};
      all.ResolveServiceName(r);
      const uint32_t sp = all.AddSpan(r, sc);
      all.spans.trace_id[sp] = TraceId{0x60, 0x57, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
      all.spans.span_id[sp] = SpanId{0x60, 0x57, 0, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)};
      if (i == 1) all.spans.parent_span_id[sp] = all.spans.span_id[parent];
      all.spans.name[sp] = s(i == 0 ? "GET /haunt" : "SELECT souls");
      all.spans.kind[sp] = static_cast<uint8_t>(i == 0 ? SpanKind::kServer : SpanKind::kClient);
      all.spans.start_ns[sp] = base_ns + 7000000000ull + static_cast<uint64_t>(i) * 1000000ull;
      all.spans.end_ns[sp] = all.spans.start_ns[sp] + 5000000ull - static_cast<uint64_t>(i);
      all.spans.status_code[sp] =
          static_cast<uint8_t>(i == 1 ? StatusCodeOtlp::kError : StatusCodeOtlp::kUnset);
      parent = sp;
      trace_of.push_back(kGhost);
    }
  }
  // Depth of every span in its trace.
  std::map<std::pair<TraceId, SpanId>, uint32_t> index;
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    index[{all.spans.trace_id[i], all.spans.span_id[i]}] = i;
  }
  std::vector<int> depth(all.span_count(), -1);
  auto depth_of = [&](uint32_t i, auto&& self) -> int {
    if (depth[i] >= 0) return depth[i];
    const auto parent = index.find({all.spans.trace_id[i], all.spans.parent_span_id[i]});
    depth[i] = parent == index.end() ? 0 : self(parent->second, self) + 1;
    return depth[i];
  };
  SampledCorpus c;
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    const size_t mode = trace_of[i] == kGhost ? 1 : trace_of[i] % 4;
    const int d = depth_of(i, depth_of);
    const bool out = mode == 1 || (mode == 2 && d % 2 == 1) || (mode == 3 && d % 2 == 0);
    all.spans.metrics_only[i] = out ? 1 : 0;
    (out ? c.sampled : c.kept)++;
  }
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    const auto parent = index.find({all.spans.trace_id[i], all.spans.parent_span_id[i]});
    if (parent == index.end()) continue;
    const bool parent_out = all.spans.metrics_only[parent->second] != 0;
    const bool child_out = all.spans.metrics_only[i] != 0;
    if (!parent_out && child_out) c.kept_parent_sampled_child++;
    if (parent_out && !child_out) c.sampled_parent_kept_child++;
  }
  std::vector<uint32_t> even;
  std::vector<uint32_t> odd;
  for (uint32_t i = 0; i < all.span_count(); ++i) (i % 2 == 0 ? even : odd).push_back(i);
  c.first.AppendSpans(all, even.data(), even.size());
  c.second.AppendSpans(all, odd.data(), odd.size());
  for (auto& m : all.spans.metrics_only) m = 0;
  c.kept_first.AppendSpans(all, even.data(), even.size());
  c.kept_second.AppendSpans(all, odd.data(), odd.size());
  return c;
}

}  // namespace spanhouse::testdata
