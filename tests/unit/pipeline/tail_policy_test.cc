#include "pipeline/sampling/tail_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "pipeline/sampling/trace_state.h"

namespace spanhouse::pipeline {
namespace {

constexpr uint64_t kMs = 1000000;

std::unique_ptr<TailPolicies> Policies(const std::string& text) {
  std::unique_ptr<TailPolicies> p;
  const Status st = TailPolicies::Parse(text, &p);
  EXPECT_TRUE(st.ok()) << text << ": " << st.message();
  return p;
}

TEST(TailPolicies, ParsesTheList) {
  auto p = Policies(
      "error; latency checkout/POST /pay 500ms ;attribute http.response.status_code=503;"
      "attribute retry; latency 2s; rate 2/s; rate cart 0.5/s; probability 0.1");
  const auto& v = p->policies();
  ASSERT_EQ(v.size(), 8u);
  EXPECT_EQ(v[0].kind, TailPolicy::Kind::kError);
  EXPECT_EQ(v[1].kind, TailPolicy::Kind::kLatency);
  EXPECT_EQ(v[1].service, "checkout");
  EXPECT_EQ(v[1].operation, "POST /pay");
  EXPECT_EQ(v[1].min_duration_ns, 500 * kMs);
  EXPECT_EQ(v[1].name, "latency checkout/POST /pay 500ms");
  EXPECT_EQ(v[2].key, "http.response.status_code");
  EXPECT_FALSE(v[2].any_value);
  EXPECT_EQ(v[2].value, "503");
  EXPECT_TRUE(v[3].any_value);
  EXPECT_EQ(v[4].service, "");
  EXPECT_EQ(v[4].min_duration_ns, 2000 * kMs);
  EXPECT_EQ(v[5].per_second, 2);
  EXPECT_EQ(v[6].service, "cart");
  EXPECT_EQ(v[7].threshold, ThresholdOf(0.1));
}

TEST(TailPolicies, RefusesWhatItCannotRead) {
  for (const char* bad :
       {"", " ; ", "latency", "latency checkout", "latency 5 parsecs", "rate 0/s", "rate x/s",
        "rate 5", "probability 2", "probability", "bogus", "error now", "attribute =x"}) {
    std::unique_ptr<TailPolicies> p;
    const Status st = TailPolicies::Parse(bad, &p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << bad << "' accepted";
  }
  std::unique_ptr<TailPolicies> p;
  const Status st = TailPolicies::Parse("error; latency checkout fast", &p);
  EXPECT_NE(st.message().find("'latency checkout fast'"), std::string::npos) << st.message();
}

// A trace of one span per (service, name, duration, error, attribute).
struct OneTrace {
  SpanBatch b;
  TraceVerdictState st;
  void Span(const std::string& service, const std::string& name, uint64_t dur_ns,
            bool error = false, bool root = false, const std::string& attr = "",
            const std::string& value = "") {
    const uint32_t r = b.AddResource();
    b.resources.service_name[r] = b.AddString(service);
    const uint32_t i = b.AddSpan(r, b.AddScope());
    b.spans.trace_id[i] = id;
    b.spans.span_id[i] = SpanId{1, static_cast<uint8_t>(i + 1)};
    if (!root) b.spans.parent_span_id[i] = SpanId{1, 1};
    b.spans.name[i] = b.AddString(name);
    b.spans.start_ns[i] = 1000;
    b.spans.end_ns[i] = 1000 + dur_ns;
    if (error) b.spans.status_code[i] = static_cast<uint8_t>(StatusCodeOtlp::kError);
    if (!attr.empty()) {
      SpanBatch::AddAttr(b.span_attrs, b.AddString(attr), ValueType::kString, b.AddString(value));
      b.spans.attrs[i].end = static_cast<uint32_t>(b.span_attrs.size());
    }
  }
  int Decide(TailPolicies& p, uint64_t now_ns) {
    for (uint32_t i = 0; i < b.span_count(); ++i) p.Observe(b, i, &st);
    return p.Decide(st, now_ns);
  }
  TraceId id{};
};

TEST(TailPolicies, FirstPolicyThatKeepsWins) {
  auto p = Policies(
      "error; latency checkout/pay 500ms; attribute http.response.status_code=503; rate 1/s; "
      "probability 0");
  constexpr uint64_t kNow = 100ull * 1000000000;
  {
    OneTrace t;  // an error deep in the trace, and slow: the error policy names it
    t.Span("frontend", "GET /", 10 * kMs, false, true);
    t.Span("checkout", "pay", 900 * kMs, true);
    EXPECT_EQ(t.Decide(*p, kNow), 0);
    EXPECT_EQ(t.st.service, "frontend");
  }
  {
    OneTrace t;  // slow, but not checkout's pay: not the latency policy
    t.Span("cart", "pay", 900 * kMs, false, true);
    t.Span("checkout", "refund", 900 * kMs);
    EXPECT_EQ(t.Decide(*p, kNow), 3);  // cart's first trace this second: the rate
  }
  {
    OneTrace t;
    t.Span("checkout", "pay", 500 * kMs, false, true);
    EXPECT_EQ(t.Decide(*p, kNow), 1);
  }
  {
    OneTrace t;
    t.Span("cart", "get", 1 * kMs, false, true, "http.response.status_code", "503");
    EXPECT_EQ(t.Decide(*p, kNow), 2);
  }
  {
    OneTrace t;  // cart's second trace in the same second: nothing keeps it
    t.Span("cart", "get", 1 * kMs, false, true, "http.response.status_code", "200");
    EXPECT_EQ(t.Decide(*p, kNow), kDropped);
  }
  {
    OneTrace t;  // a second later the rate has a token again; other services have their own
    t.Span("cart", "get", 1 * kMs, false, true);
    EXPECT_EQ(t.Decide(*p, kNow + 1000 * kMs), 3);
    OneTrace u;
    u.Span("search", "get", 1 * kMs, false, true);
    EXPECT_EQ(u.Decide(*p, kNow), 3);
  }
  EXPECT_EQ(p->kept(0), 1u);
  EXPECT_EQ(p->kept(1), 1u);
  EXPECT_EQ(p->kept(2), 1u);
  EXPECT_EQ(p->kept(3), 3u);
  EXPECT_EQ(p->dropped(), 1u);
}

TEST(TailPolicies, RateLimitKeepsAtMostItsBudget) {
  auto p = Policies("rate 50/s");
  int kept = 0;
  // 10 s of 1000 traces a second, one every millisecond.
  for (uint64_t t = 0; t < 10000; ++t) {
    OneTrace tr;
    tr.Span("svc", "op", kMs, false, true);
    kept += tr.Decide(*p, 1000000000ull + t * kMs) == 0 ? 1 : 0;
  }
  EXPECT_GE(kept, 50 * 10);
  EXPECT_LE(kept, 50 * 10 + 50);  // the first second's full bucket
}

TEST(TailPolicies, FloorProbabilityIsConsistentByTraceId) {
  auto p = Policies("probability 0.1");
  std::mt19937_64 rng(9);
  int kept = 0;
  constexpr int kTraces = 40000;
  for (int n = 0; n < kTraces; ++n) {
    OneTrace t;
    for (auto& byte : t.id) byte = static_cast<uint8_t>(rng());
    t.Span("svc", "op", kMs, false, true);
    t.Span("db", "q", kMs);
    const bool k = t.Decide(*p, 0) == 0;
    EXPECT_EQ(k, RandomnessOf(t.id, {}) >= ThresholdOf(0.1));
    kept += k ? 1 : 0;
  }
  EXPECT_NEAR(kept / double(kTraces), 0.1, 0.0075);  // 5 sd
}

}  // namespace
}  // namespace spanhouse::pipeline
