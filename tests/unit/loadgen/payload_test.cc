// Pre-generated payloads and the per-send id / time patch.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codec/otlp.h"
#include "model/span_batch.h"
#include "net/http_client.h"
#include "tools/loadgen/histogram.h"
#include "tools/loadgen/payload.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen {
namespace {

constexpr uint64_t kBase = 1'700'000'000'000'000'000ull;

SpanBatch Decode(const std::string& body) {
  SpanBatch b;
  const Status st = codec::DecodeOtlpProto(body, b);
  EXPECT_TRUE(st.ok()) << st.message();
  return b;
}

TEST(LoadgenPayloadTest, PayloadsHoldWholeTracesOfAboutTheRequestedSize) {
  const std::vector<Payload> ps = BuildPayloads(1, "run", 8, 500, kBase);
  ASSERT_EQ(ps.size(), 8u);
  std::set<TraceId> seen;
  for (const Payload& p : ps) {
    EXPECT_GE(p.spans, 500u);
    EXPECT_LE(p.spans, 530u);
    const SpanBatch b = Decode(p.body);
    EXPECT_EQ(b.span_count(), p.spans);
    std::map<TraceId, int> roots;
    for (size_t i = 0; i < b.span_count(); ++i) {
      roots[b.spans.trace_id[i]] += IsZero(b.spans.parent_span_id[i]) ? 1 : 0;
    }
    for (const auto& [tid, n] : roots) {
      EXPECT_EQ(n, 1) << "every trace in a payload is whole";
      EXPECT_TRUE(seen.insert(tid).second) << "no trace in two payloads";
    }
  }
}

TEST(LoadgenPayloadTest, SameSeedSameBytes) {
  const std::vector<Payload> a = BuildPayloads(9, "x", 3, 200, kBase);
  const std::vector<Payload> b = BuildPayloads(9, "x", 3, 200, kBase);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].body, b[i].body);
  const std::vector<Payload> c = BuildPayloads(10, "x", 1, 200, kBase);
  EXPECT_NE(a[0].body, c[0].body);
}

TEST(LoadgenPayloadTest, PatchGivesFreshConsistentIdsAndShiftsTimes) {
  const std::vector<Payload> ps = BuildPayloads(4, "run", 4, 500, kBase);
  Rng rng(123);
  std::set<TraceId> all_traces;
  std::set<SpanId> all_spans;
  size_t total_spans = 0;
  size_t total_traces = 0;
  for (const Payload& p : ps) {
    const SpanBatch orig = Decode(p.body);
    std::set<TraceId> orig_traces(orig.spans.trace_id.begin(), orig.spans.trace_id.end());
    for (int send = 0; send < 3; ++send) {
      const int64_t delta = 3'600'000'000'000 * (send + 1);
      const Patch patch = Patch::Random(rng, delta);
      std::string body;
      ApplyPatch(p, patch, &body);
      ASSERT_EQ(body.size(), p.body.size());
      const SpanBatch b = Decode(body);
      ASSERT_EQ(b.span_count(), orig.span_count());

      std::map<SpanId, TraceId> ids;
      std::set<TraceId> traces;
      for (size_t i = 0; i < b.span_count(); ++i) {
        ids[b.spans.span_id[i]] = b.spans.trace_id[i];
        traces.insert(b.spans.trace_id[i]);
        EXPECT_EQ(orig_traces.count(b.spans.trace_id[i]), 0u) << "trace id not fresh";
        EXPECT_EQ(b.spans.start_ns[i], orig.spans.start_ns[i] + static_cast<uint64_t>(delta));
        EXPECT_EQ(b.spans.end_ns[i], orig.spans.end_ns[i] + static_cast<uint64_t>(delta));
        for (uint32_t e = b.spans.events[i].begin; e < b.spans.events[i].end; ++e) {
          EXPECT_EQ(b.events.time_ns[e], orig.events.time_ns[e] + static_cast<uint64_t>(delta));
        }
      }
      EXPECT_EQ(ids.size(), b.span_count()) << "span ids unique within the request";
      EXPECT_EQ(traces.size(), orig_traces.size());
      for (size_t i = 0; i < b.span_count(); ++i) {
        if (IsZero(b.spans.parent_span_id[i])) {
          EXPECT_TRUE(IsZero(orig.spans.parent_span_id[i]));
          continue;
        }
        auto it = ids.find(b.spans.parent_span_id[i]);
        ASSERT_NE(it, ids.end()) << "parent of span " << i << " lost";
        EXPECT_EQ(it->second, b.spans.trace_id[i]) << "parent in another trace";
        for (uint32_t l = b.spans.links[i].begin; l < b.spans.links[i].end; ++l) {
          auto target = ids.find(b.links.span_id[l]);
          ASSERT_NE(target, ids.end()) << "link of span " << i << " lost";
          EXPECT_EQ(target->second, b.links.trace_id[l]);
        }
      }
      for (const auto& [sid, tid] : ids) all_spans.insert(sid);
      all_traces.insert(traces.begin(), traces.end());
      total_spans += b.span_count();
      total_traces += traces.size();
    }
  }
  EXPECT_EQ(all_spans.size(), total_spans) << "span ids unique across sends";
  EXPECT_EQ(all_traces.size(), total_traces) << "trace ids unique across sends";
}

// Every attribute value of a span or event, by key ("key" -> values in
// order), events' attributes after the spans'.
std::map<std::string, std::vector<std::string>> ValuesByKey(const SpanBatch& b) {
  std::map<std::string, std::vector<std::string>> out;
  for (size_t a = 0; a < b.span_attrs.size(); ++a) {
    out[std::string(b.Str(b.span_attrs.key[a]))].emplace_back(b.Str(b.span_attrs.value[a]));
  }
  for (size_t a = 0; a < b.event_attrs.size(); ++a) {
    out[std::string(b.Str(b.event_attrs.key[a]))].emplace_back(b.Str(b.event_attrs.value[a]));
  }
  return out;
}

// `v` with every hex digit as '#': what fresh values never change.
std::string Shape(std::string v) {
  for (char& c : v) {
    if (std::isxdigit(static_cast<unsigned char>(c)) != 0) c = '#';
  }
  return v;
}

TEST(LoadgenPayloadTest, FreshValuesGiveEverySendNewIdsWhereRealTrafficHasThem) {
  const std::vector<Payload> ps = BuildPayloads(5, "run", 2, 500, kBase);
  Rng rng(7);
  for (const Payload& p : ps) {
    ASSERT_GT(p.values.size(), p.spans / 20) << "log lines, message ids";
    const auto orig = ValuesByKey(Decode(p.body));
    std::map<std::string, std::set<std::string>> seen;
    for (int send = 0; send < 3; ++send) {
      Patch patch = Patch::Random(rng, 0);
      patch.value_seed = rng.Next() | 1;
      std::string body;
      ApplyPatch(p, patch, &body);
      ASSERT_EQ(body.size(), p.body.size());
      const auto now = ValuesByKey(Decode(body));
      ASSERT_EQ(now.size(), orig.size());
      for (const auto& [key, values] : orig) {
        const auto& mine = now.at(key);
        ASSERT_EQ(mine.size(), values.size()) << key;
        for (size_t k = 0; k < values.size(); ++k) {
          if (!IsFreshValueKey(key)) {
            EXPECT_EQ(mine[k], values[k]) << key << ": not a fresh-values key";
          } else {
            EXPECT_EQ(Shape(mine[k]), Shape(values[k])) << key << ": only digits change";
            if (key == "exception.stacktrace") {
              EXPECT_EQ(mine[k], values[k]) << key << ": source lines stay";
            }
            seen[key].insert(mine[k]);
          }
        }
      }
    }
    // Keys whose values carry ids or numbers get about 3 times the distinct
    // values over 3 sends; the few without any keep theirs.
    for (const char* key : {"log.message", "messaging.message.id"}) {
      if (orig.count(key) == 0) continue;
      const std::set<std::string> once(orig.at(key).begin(), orig.at(key).end());
      EXPECT_GT(seen[key].size(), 2 * once.size()) << key;
    }
  }
}

TEST(LoadgenPayloadTest, PatchingTwiceRestoresTheBytes) {
  const std::vector<Payload> ps = BuildPayloads(4, "run", 1, 300, kBase);
  Rng rng(1);
  Patch patch = Patch::Random(rng, 5'000'000'000);
  std::string body;
  ApplyPatch(ps[0], patch, &body);
  EXPECT_NE(body, ps[0].body);
  patch.time_delta_ns = -patch.time_delta_ns;
  ApplyPatchInPlace(ps[0].offsets, patch, &body);
  EXPECT_EQ(body, ps[0].body);
}

TEST(LoadgenHistogramTest, PercentilesWithinBucketError) {
  LatencyHistogram h;
  for (uint64_t us = 1; us <= 100000; ++us) h.Record(us);
  EXPECT_EQ(h.Count(), 100000u);
  EXPECT_NEAR(h.PercentileUs(0.5), 50000, 50000 * 0.07);
  EXPECT_NEAR(h.PercentileUs(0.99), 99000, 99000 * 0.07);
  EXPECT_EQ(h.MaxUs(), 100000u);
  LatencyHistogram g;
  g.Record(7);
  g.Merge(h);
  EXPECT_EQ(g.Count(), 100001u);
  for (uint64_t v : {0ull, 1ull, 15ull, 16ull, 17ull, 1000ull, 123456789ull}) {
    const size_t i = LatencyHistogram::Index(v);
    EXPECT_LE(LatencyHistogram::Lower(i), v);
    EXPECT_GT(LatencyHistogram::Lower(i + 1), v);
  }
}

TEST(LoadgenUrlTest, ParsesHttpUrls) {
  net::HttpUrl u;
  std::string err;
  ASSERT_TRUE(net::ParseHttpUrl("http://127.0.0.1:4318/v1/traces", &u, &err)) << err;
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 4318);
  EXPECT_EQ(u.target, "/v1/traces");
  ASSERT_TRUE(net::ParseHttpUrl("http://collector", &u, &err));
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.target, "/");
  ASSERT_TRUE(net::ParseHttpUrl("http://[::1]:16686", &u, &err));
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 16686);
  EXPECT_EQ(u.host_header, "[::1]:16686");
  EXPECT_FALSE(net::ParseHttpUrl("https://x/v1/traces", &u, &err));
  EXPECT_FALSE(net::ParseHttpUrl("127.0.0.1:4318", &u, &err));
  EXPECT_FALSE(net::ParseHttpUrl("http://x:0/", &u, &err));
  EXPECT_FALSE(net::ParseHttpUrl("http://x:99999/", &u, &err));
  EXPECT_FALSE(net::ParseHttpUrl("http://:80/", &u, &err));
}

}  // namespace
}  // namespace spanhouse::loadgen
