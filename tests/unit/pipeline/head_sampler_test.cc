#include "pipeline/sampling/head_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "pipeline/sampling/trace_state.h"

namespace spanhouse::pipeline {
namespace {

constexpr uint64_t kHalf = 1ull << 55;  // the threshold of probability 1/2

TEST(TraceState, ReadsThresholdAndRandomness) {
  const OtTraceState ts = ParseOtTraceState("vendor=x, ot=th:8;rv:0123456789abcd;p:3 ,b=2");
  EXPECT_TRUE(ts.has_th);
  EXPECT_EQ(ts.th, kHalf);
  EXPECT_TRUE(ts.has_rv);
  EXPECT_EQ(ts.rv, 0x0123456789abcdull);
  EXPECT_FALSE(ts.malformed);

  EXPECT_FALSE(ParseOtTraceState("").has_th);
  EXPECT_FALSE(ParseOtTraceState("rot=th:8").has_th);  // another vendor's key
  const OtTraceState bad = ParseOtTraceState("ot=th:8G;rv:12");
  EXPECT_FALSE(bad.has_th);
  EXPECT_FALSE(bad.has_rv);  // rv needs exactly 14 digits
  EXPECT_TRUE(bad.malformed);
  EXPECT_FALSE(ParseOtTraceState("ot=th:123456789abcdef").has_th);  // 15 digits
}

TEST(TraceState, ThresholdsOfProbabilities) {
  EXPECT_EQ(ThresholdOf(1.0), 0u);
  EXPECT_EQ(ThresholdOf(0.5), kHalf);
  EXPECT_EQ(ThresholdOf(0.0), kMaxThreshold);
  EXPECT_EQ(EncodeThreshold(kHalf), "8");
  EXPECT_EQ(EncodeThreshold(0), "0");
  for (double p : {0.1, 0.01, 0.25, 0.999, 1e-6}) {
    const uint64_t th = ThresholdOf(p);
    EXPECT_NEAR(ProbabilityOf(th), p, p * 1e-3) << p;
    // What is written reads back as the same threshold.
    const OtTraceState back = ParseOtTraceState("ot=th:" + EncodeThreshold(th));
    ASSERT_TRUE(back.has_th) << p;
    EXPECT_EQ(back.th, th) << p;
  }
  EXPECT_EQ(EncodeThreshold(ThresholdOf(0.1)), "e666");  // 4 significant digits
}

TEST(TraceState, WritesTheThresholdFirstKeepingTheRest) {
  EXPECT_EQ(WithThreshold("", kHalf), "ot=th:8");
  EXPECT_EQ(WithThreshold("vendor=a,ot=rv:0123456789abcd;th:c", kHalf),
            "ot=th:8;rv:0123456789abcd,vendor=a");
  EXPECT_EQ(WithThreshold("a=1, b=2", ThresholdOf(0.1)), "ot=th:e666,a=1,b=2");
}

// Traces of `spans_per_trace` spans each, every span of service `service`
// (or, per span, services[s % size]).
struct Corpus {
  SpanBatch batch;
  uint32_t AddResource(const std::string& service) {
    const uint32_t r = batch.AddResource();
    batch.resources.service_name[r] = batch.AddString(service);
    return r;
  }
  void AddTrace(const TraceId& id, const std::vector<uint32_t>& resources,
                const std::string& tracestate = "") {
    const uint32_t scope = batch.AddScope();
    for (size_t s = 0; s < resources.size(); ++s) {
      const uint32_t i = batch.AddSpan(resources[s], scope);
      batch.spans.trace_id[i] = id;
      batch.spans.span_id[i] = SpanId{1, static_cast<uint8_t>(s + 1)};
      if (s > 0) batch.spans.parent_span_id[i] = SpanId{1, 1};
      batch.spans.trace_state[i] = batch.AddString(tracestate);
    }
  }
};

HeadSamplingOptions Opts(double p, std::vector<std::pair<std::string, double>> services = {}) {
  HeadSamplingOptions o;
  o.probability = p;
  o.services = std::move(services);
  return o;
}

TraceId RandomId(std::mt19937_64& rng) {
  TraceId id;
  for (auto& b : id) b = static_cast<uint8_t>(rng());
  return id;
}

// Per trace id: how many of its spans were kept and sampled out.
std::map<TraceId, std::pair<int, int>> Decisions(const SpanBatch& b) {
  std::map<TraceId, std::pair<int, int>> out;
  for (size_t i = 0; i < b.span_count(); ++i) {
    auto& d = out[b.spans.trace_id[i]];
    (b.spans.metrics_only[i] != 0 ? d.second : d.first)++;
  }
  return out;
}

TEST(HeadSampler, KeepsTheShareAskedWholeTracesOnly) {
  HeadSampler sampler(Opts(0.1));
  ASSERT_TRUE(sampler.active());
  std::mt19937_64 rng(7);
  Corpus c;
  const uint32_t r = c.AddResource("checkout");
  constexpr int kTraces = 100000;
  for (int t = 0; t < kTraces; ++t) c.AddTrace(RandomId(rng), {r, r, r});
  const size_t dropped = sampler.Apply(c.batch, true);
  size_t kept_traces = 0;
  for (const auto& [id, d] : Decisions(c.batch)) {
    ASSERT_TRUE(d.first == 0 || d.second == 0) << "a trace split: " << ToHex(id);
    kept_traces += d.first != 0 ? 1 : 0;
  }
  // Binomial: sd = sqrt(0.1 * 0.9 / 1e5) ~ 0.00095; 5 sd.
  EXPECT_NEAR(static_cast<double>(kept_traces) / kTraces, 0.1, 0.0048);
  EXPECT_EQ(dropped, 3 * (kTraces - kept_traces));
  EXPECT_EQ(sampler.stats().kept_traces.load(), kept_traces);
  EXPECT_EQ(sampler.stats().dropped_traces.load(), kTraces - kept_traces);
  EXPECT_EQ(sampler.stats().kept_spans.load(), 3 * kept_traces);
  // Kept spans carry the threshold that kept them; dropped ones are as they came.
  for (size_t i = 0; i < c.batch.span_count(); ++i) {
    const OtTraceState ts = ParseOtTraceState(c.batch.Str(c.batch.spans.trace_state[i]));
    EXPECT_EQ(ts.has_th, c.batch.spans.metrics_only[i] == 0);
    if (ts.has_th) {
      EXPECT_EQ(ts.th, ThresholdOf(0.1));
    }
  }
}

TEST(HeadSampler, DecidesATraceTheSameInEveryProcessAndAgain) {
  // Two processes (two samplers), each receiving some spans of each trace;
  // and a record read back after a restart, sampled again.
  HeadSampler a(Opts(0.3));
  HeadSampler b(Opts(0.3));
  std::mt19937_64 rng(11);
  Corpus ca;
  Corpus cb;
  const uint32_t ra = ca.AddResource("cart");
  const uint32_t rb = cb.AddResource("cart");
  std::vector<TraceId> ids;
  for (int t = 0; t < 5000; ++t) {
    ids.push_back(RandomId(rng));
    ca.AddTrace(ids.back(), {ra, ra});
    cb.AddTrace(ids.back(), {rb});
  }
  a.Apply(ca.batch, true);
  b.Apply(cb.batch, true);
  const auto da = Decisions(ca.batch);
  const auto db = Decisions(cb.batch);
  for (const TraceId& id : ids) {
    EXPECT_EQ(da.at(id).first != 0, db.at(id).first != 0) << ToHex(id);
  }
  // Sampled again (a replay): the same spans kept, tracestates unchanged.
  SpanBatch again;
  again.Append(ca.batch);
  for (auto& m : again.spans.metrics_only) m = 0;
  a.Apply(again, false);
  for (size_t i = 0; i < again.span_count(); ++i) {
    EXPECT_EQ(again.spans.metrics_only[i], ca.batch.spans.metrics_only[i]);
    EXPECT_EQ(again.Str(again.spans.trace_state[i]), ca.batch.Str(ca.batch.spans.trace_state[i]));
  }
  EXPECT_EQ(a.stats().kept_spans.load() + a.stats().dropped_spans.load(), 10000u);  // not twice
}

TEST(HeadSampler, ServiceProbabilitiesAreConsistent) {
  // A trace kept where the probability is low is kept where it is high.
  HeadSampler sampler(Opts(0.5, {{"low", 0.05}, {"all", 1.0}}));
  EXPECT_DOUBLE_EQ(sampler.ProbabilityOf("low"), ProbabilityOf(ThresholdOf(0.05)));
  EXPECT_DOUBLE_EQ(sampler.ProbabilityOf("other"), 0.5);
  std::mt19937_64 rng(3);
  Corpus c;
  const uint32_t low = c.AddResource("low");
  const uint32_t mid = c.AddResource("other");
  const uint32_t all = c.AddResource("all");
  constexpr int kTraces = 40000;
  for (int t = 0; t < kTraces; ++t) c.AddTrace(RandomId(rng), {mid, low, all});
  sampler.Apply(c.batch, true);
  int low_kept = 0;
  int mid_kept = 0;
  for (size_t i = 0; i < c.batch.span_count(); i += 3) {
    const bool m = c.batch.spans.metrics_only[i] == 0;
    const bool l = c.batch.spans.metrics_only[i + 1] == 0;
    EXPECT_EQ(c.batch.spans.metrics_only[i + 2], 0);  // probability 1
    if (l) {
      EXPECT_TRUE(m) << "kept at 5% but not at 50%";
    }
    low_kept += l ? 1 : 0;
    mid_kept += m ? 1 : 0;
  }
  EXPECT_NEAR(low_kept / double(kTraces), 0.05, 0.006);
  EXPECT_NEAR(mid_kept / double(kTraces), 0.5, 0.0125);
}

TEST(HeadSampler, HonoursTheSdksThresholdAndRandomness) {
  const uint64_t th10 = ThresholdOf(0.1);
  std::mt19937_64 rng(5);
  // The SDK sampled at 10%: a span it sent has R >= th10. Ours at 50% keeps
  // it (the threshold stays the SDK's); ours at 1% keeps it only if R >= th1.
  HeadSampler half(Opts(0.5));
  HeadSampler one(Opts(0.01));
  const uint64_t th1 = ThresholdOf(0.01);
  int seen = 0;
  int kept_at_one = 0;
  while (seen < 2000) {
    const TraceId id = RandomId(rng);
    const uint64_t r = RandomnessOf(id, {});
    if (r < th10) continue;  // the SDK did not send it
    seen++;
    for (HeadSampler* s : {&half, &one}) {
      Corpus c;
      c.AddTrace(id, {c.AddResource("svc")}, "ot=th:" + EncodeThreshold(th10) + ",x=y");
      s->Apply(c.batch, true);
      const bool kept = c.batch.spans.metrics_only[0] == 0;
      const OtTraceState ts = ParseOtTraceState(c.batch.Str(c.batch.spans.trace_state[0]));
      if (s == &half) {
        EXPECT_TRUE(kept);
        EXPECT_EQ(ts.th, th10);
      } else {
        EXPECT_EQ(kept, r >= th1);
        if (kept) {
          EXPECT_EQ(ts.th, th1);
          EXPECT_EQ(c.batch.Str(c.batch.spans.trace_state[0]),
                    "ot=th:" + EncodeThreshold(th1) + ",x=y");
        }
        kept_at_one += kept ? 1 : 0;
      }
    }
  }
  EXPECT_GT(kept_at_one, 0);
  EXPECT_LT(kept_at_one, 2000 / 5);
  // An explicit rv decides in place of the trace id.
  HeadSampler s(Opts(0.5));
  for (const char* rv : {"ffffffffffffff", "00000000000001"}) {
    Corpus c;
    TraceId id{};
    id[15] = 0xff;  // the id alone would say: R tiny, drop
    id[9] = 0xff;   // ... or huge, keep: rv must win either way
    c.AddTrace(id, {c.AddResource("svc")}, std::string("ot=rv:") + rv);
    s.Apply(c.batch, true);
    EXPECT_EQ(c.batch.spans.metrics_only[0] == 0, rv[0] == 'f') << rv;
  }
}

TEST(HeadSampler, ProbabilityOneChangesNothing) {
  HeadSampler s(Opts(1.0, {{"a", 1.0}}));
  EXPECT_FALSE(s.active());
  Corpus c;
  std::mt19937_64 rng(1);
  c.AddTrace(RandomId(rng), {c.AddResource("a")}, "ot=th:8");
  EXPECT_EQ(s.Apply(c.batch, true), 0u);
  EXPECT_EQ(c.batch.Str(c.batch.spans.trace_state[0]), "ot=th:8");
  HeadSampler none(Opts(0.0));
  Corpus d;
  d.AddTrace(RandomId(rng), {d.AddResource("a")});
  EXPECT_EQ(none.Apply(d.batch, true), 1u);
}

}  // namespace
}  // namespace spanhouse::pipeline
