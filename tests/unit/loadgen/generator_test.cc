// Shape and determinism of the generated corpus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "codec/otlp.h"
#include "codec/otlp_encode.h"
#include "model/span_batch.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::loadgen {
namespace {

constexpr uint64_t kBase = 1'700'000'000'000'000'000ull;

SpanBatch Generate(uint64_t seed, int traces) {
  TraceGenerator gen(CorpusOptions{seed});
  SpanBatch b;
  for (int i = 0; i < traces; ++i) gen.AppendTrace(kBase + static_cast<uint64_t>(i) * 1000000, &b);
  return b;
}

std::string_view AttrValue(const SpanBatch& b, const AttrColumns& cols, Range r,
                           std::string_view key) {
  for (uint32_t a = r.begin; a < r.end; ++a) {
    if (b.Str(cols.key[a]) == key) return b.Str(cols.value[a]);
  }
  return {};
}

TEST(LoadgenGeneratorTest, SameSeedSameTraces) {
  const SpanBatch a = Generate(7, 300);
  const SpanBatch b = Generate(7, 300);
  std::string why;
  EXPECT_TRUE(a.LogicallyEquals(b, &why)) << why;

  // And the same for collector-shaped batches.
  TraceGenerator g1(CorpusOptions{7});
  TraceGenerator g2(CorpusOptions{7});
  SpanBatch c, d;
  g1.AppendTraces(kBase, 100000, 2000, &c);
  g2.AppendTraces(kBase, 100000, 2000, &d);
  EXPECT_TRUE(c.LogicallyEquals(d, &why)) << why;
}

TEST(LoadgenGeneratorTest, DifferentSeedDifferentTraces) {
  const SpanBatch a = Generate(7, 50);
  const SpanBatch b = Generate(8, 50);
  EXPECT_FALSE(a.LogicallyEquals(b));
  EXPECT_NE(a.spans.trace_id[0], b.spans.trace_id[0]);
}

TEST(LoadgenGeneratorTest, ShapeOverManyTraces) {
  constexpr int kTraces = 5000;
  const SpanBatch b = Generate(1, kTraces);
  const size_t n = b.span_count();

  std::map<TraceId, std::vector<uint32_t>> traces;
  for (uint32_t i = 0; i < n; ++i) traces[b.spans.trace_id[i]].push_back(i);
  EXPECT_EQ(traces.size(), static_cast<size_t>(kTraces)) << "trace ids must all be distinct";

  std::set<SpanId> span_ids(b.spans.span_id.begin(), b.spans.span_id.end());
  EXPECT_EQ(span_ids.size(), n) << "span ids must all be distinct";

  size_t min_spans = SIZE_MAX, max_spans = 0, error_traces = 0, kafka_traces = 0;
  std::set<std::string> routes;
  for (const auto& [tid, idx] : traces) {
    min_spans = std::min(min_spans, idx.size());
    max_spans = std::max(max_spans, idx.size());
    std::map<SpanId, uint32_t> by_id;
    for (uint32_t i : idx) by_id[b.spans.span_id[i]] = i;
    int roots = 0;
    bool error = false;
    for (uint32_t i : idx) {
      error = error || b.spans.status_code[i] == static_cast<uint8_t>(StatusCodeOtlp::kError);
      if (b.spans.kind[i] == static_cast<uint8_t>(SpanKind::kProducer)) ++kafka_traces;
      if (IsZero(b.spans.parent_span_id[i])) {
        ++roots;
        EXPECT_EQ(b.spans.kind[i], static_cast<uint8_t>(SpanKind::kServer));
        EXPECT_EQ(b.Str(b.resources.service_name[b.spans.resource[i]]), "api-gateway");
        routes.insert(std::string(b.Str(b.spans.name[i])));
        continue;
      }
      auto p = by_id.find(b.spans.parent_span_id[i]);
      ASSERT_NE(p, by_id.end()) << "span " << i << "'s parent is not in its trace";
      const uint32_t parent = p->second;
      EXPECT_LE(b.spans.start_ns[i], b.spans.end_ns[i]);
      if (b.spans.kind[i] != static_cast<uint8_t>(SpanKind::kConsumer)) {
        // Children lie inside their parent's time (a kafka consumer runs after its producer).
        EXPECT_GE(b.spans.start_ns[i], b.spans.start_ns[parent]);
        EXPECT_LE(b.spans.end_ns[i], b.spans.end_ns[parent]);
      } else {
        EXPECT_GE(b.spans.start_ns[i], b.spans.start_ns[parent]);
        ASSERT_EQ(b.spans.links[i].size(), 1u);
        EXPECT_EQ(b.links.span_id[b.spans.links[i].begin], b.spans.span_id[parent]);
      }
    }
    EXPECT_EQ(roots, 1);
    if (error) ++error_traces;
  }
  EXPECT_GE(min_spans, 3u);
  EXPECT_LE(max_spans, 30u);
  EXPECT_GE(routes.size(), 50u) << "about 60 routes";
  EXPECT_GT(kafka_traces, 0u);

  const double attrs_per_span = static_cast<double>(b.span_attrs.size()) / static_cast<double>(n);
  EXPECT_GE(attrs_per_span, 15.0);
  EXPECT_LE(attrs_per_span, 25.0);

  const double error_rate = static_cast<double>(error_traces) / kTraces;
  EXPECT_GE(error_rate, 0.003);
  EXPECT_LE(error_rate, 0.03);

  size_t with_events = 0;
  for (uint32_t i = 0; i < n; ++i) with_events += b.spans.events[i].size() > 0 ? 1 : 0;
  const double event_share = static_cast<double>(with_events) / static_cast<double>(n);
  EXPECT_GE(event_share, 0.05);
  EXPECT_LE(event_share, 0.2);

  std::set<std::string_view> users, skus, ips, orders, pods;
  for (uint32_t i = 0; i < n; ++i) {
    const Range r = b.spans.attrs[i];
    if (auto v = AttrValue(b, b.span_attrs, r, "app.user_id"); !v.empty()) users.insert(v);
    if (auto v = AttrValue(b, b.span_attrs, r, "app.sku"); !v.empty()) skus.insert(v);
    if (auto v = AttrValue(b, b.span_attrs, r, "client.address"); !v.empty()) ips.insert(v);
    if (auto v = AttrValue(b, b.span_attrs, r, "app.order_id"); !v.empty()) orders.insert(v);
  }
  for (size_t r = 0; r < b.resources.attrs.size(); ++r) {
    pods.insert(AttrValue(b, b.resource_attrs, b.resources.attrs[r], "k8s.pod.name"));
  }
  EXPECT_GE(users.size(), 3000u) << "user ids come from ~200k";
  EXPECT_GE(skus.size(), 1500u) << "skus come from ~20k";
  EXPECT_GE(ips.size(), 4900u) << "client IPs are random";
  EXPECT_GE(pods.size(), 250u) << "a few hundred pods";
  EXPECT_GT(orders.size(), 100u);
}

TEST(LoadgenGeneratorTest, ErrorTracesHaveExceptionEventsAnd500s) {
  const SpanBatch b = Generate(3, 3000);
  int errors = 0;
  int exceptions = 0;
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    if (b.spans.status_code[i] != static_cast<uint8_t>(StatusCodeOtlp::kError)) continue;
    ++errors;
    for (uint32_t e = b.spans.events[i].begin; e < b.spans.events[i].end; ++e) {
      if (b.Str(b.events.name[e]) != "exception") continue;
      ++exceptions;
      EXPECT_FALSE(AttrValue(b, b.event_attrs, b.events.attrs[e], "exception.type").empty());
      EXPECT_FALSE(AttrValue(b, b.event_attrs, b.events.attrs[e], "exception.stacktrace").empty());
      EXPECT_FALSE(b.Str(b.spans.status_message[i]).empty());
    }
    if (IsZero(b.spans.parent_span_id[i])) {
      EXPECT_EQ(AttrValue(b, b.span_attrs, b.spans.attrs[i], "http.response.status_code"), "500");
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(exceptions, 0);
  EXPECT_LT(exceptions, errors) << "one failing span per error trace, its ancestors follow";
}

TEST(LoadgenGeneratorTest, CollectorBatchesGroupSpansByResource) {
  TraceGenerator gen(CorpusOptions{5});
  SpanBatch b;
  const size_t added = gen.AppendTraces(kBase, 100000, 500, &b);
  EXPECT_GE(added, 500u);
  EXPECT_LE(added, 530u);
  EXPECT_EQ(added, b.span_count());
  for (size_t i = 1; i < b.span_count(); ++i) {
    EXPECT_GE(b.spans.resource[i], b.spans.resource[i - 1]);
  }
  // At most 3 pods per service: at most 36 resources.
  EXPECT_LE(b.resources.attrs.size(), 36u);
  // One ResourceSpans per resource on the wire.
  SpanBatch decoded;
  ASSERT_TRUE(codec::DecodeOtlpProto(codec::EncodeOtlpProto(b), decoded).ok());
  EXPECT_EQ(decoded.resources.attrs.size(), b.resources.attrs.size());
}

TEST(LoadgenGeneratorTest, RunIdTagsEveryResource) {
  TraceGenerator gen(CorpusOptions{5});
  gen.SetRunId("abc123");
  SpanBatch b;
  gen.AppendTraces(kBase, 100000, 300, &b);
  gen.AppendTrace(kBase, &b);
  for (size_t r = 0; r < b.resources.attrs.size(); ++r) {
    EXPECT_EQ(AttrValue(b, b.resource_attrs, b.resources.attrs[r], "loadgen.run_id"), "abc123");
  }
}

TEST(LoadgenEncodeTest, GeneratedBatchRoundTrips) {
  TraceGenerator gen(CorpusOptions{11});
  SpanBatch b;
  gen.AppendTraces(kBase, 100000, 3000, &b);
  for (int i = 0; i < 100; ++i) gen.AppendTrace(kBase + static_cast<uint64_t>(i) * 1000, &b);
  SpanBatch out;
  const Status st = codec::DecodeOtlpProto(codec::EncodeOtlpProto(b), out);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string why;
  EXPECT_TRUE(b.LogicallyEquals(out, &why)) << why;
}

}  // namespace
}  // namespace spanhouse::loadgen
