// The two corpora (generator.h): replay, unchanged byte for byte, and fresh,
// whose values vary where real traffic's do while its traces keep replay's
// shape.
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
#include "tools/loadgen/payload.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen {
namespace {

constexpr uint64_t kBase = 1'700'000'000'000'000'000ull;

uint64_t Fnv1a(uint64_t h, std::string_view s) {
  for (const unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

SpanBatch Generate(CorpusOptions o, int traces) {
  TraceGenerator gen(o);
  SpanBatch b;
  for (int i = 0; i < traces; ++i) gen.AppendTrace(kBase + static_cast<uint64_t>(i) * 1000000, &b);
  return b;
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3f);
    }
    // Overlong forms, surrogates and past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    i += n + 1;
  }
  return true;
}

TEST(LoadgenCorpusTest, Utf8CheckRejectsWhatItShould) {
  EXPECT_TRUE(ValidUtf8("plain [red\xc3\xbf \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(ValidUtf8("[red\xff"));
  EXPECT_FALSE(ValidUtf8("\xc3"));
  EXPECT_FALSE(ValidUtf8("\xc0\xaf"));
  EXPECT_FALSE(ValidUtf8("\xed\xa0\x80"));
}

// The corpus every benchmark figure so far was measured on: the bytes of
// payloads (markable ones too) and single traces as they were before the
// fresh corpus existed (digest taken then; libm's draws make it this
// platform's, as the generator's promise says).
TEST(LoadgenCorpusTest, ReplayCorpusIsUnchangedByteForByte) {
  EXPECT_EQ(CorpusOptions{}.kind, CorpusKind::kReplay);
  uint64_t h = 0xcbf29ce484222325ull;
  for (const Payload& p : BuildPayloads(1, "run", 8, 500, kBase)) h = Fnv1a(h, p.body);
  const MarkShape shape{true, 2'000'000'000};
  for (const Payload& p : BuildPayloads(3, "", 2, 500, kBase, shape)) h = Fnv1a(h, p.body);
  TraceGenerator gen(CorpusOptions{7});
  SpanBatch b;
  for (int i = 0; i < 2000; ++i) gen.AppendTrace(kBase + static_cast<uint64_t>(i) * 1000000, &b);
  h = Fnv1a(h, codec::EncodeOtlpProto(b));
  EXPECT_EQ(h, 0x74221d301a70b9c5ull);

  const std::vector<Payload> a =
      BuildPayloads(CorpusOptions{4, CorpusKind::kReplay}, "x", 2, 300, kBase);
  const std::vector<Payload> c = BuildPayloads(4, "x", 2, 300, kBase);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].body, c[i].body);
}

TEST(LoadgenCorpusTest, NamesParse) {
  CorpusKind k = CorpusKind::kReplay;
  EXPECT_TRUE(ParseCorpusKind("fresh", &k));
  EXPECT_EQ(k, CorpusKind::kFresh);
  EXPECT_STREQ(CorpusKindName(k), "fresh");
  EXPECT_TRUE(ParseCorpusKind("replay", &k));
  EXPECT_EQ(k, CorpusKind::kReplay);
  EXPECT_STREQ(CorpusKindName(k), "replay");
  EXPECT_FALSE(ParseCorpusKind("Fresh", &k));
  EXPECT_EQ(k, CorpusKind::kReplay);
}

// Keys whose values the fresh corpus changes; every other value, every key,
// type, span, time and status is the replay corpus's.
const std::set<std::string_view> kChangedKeys = {"url.full",          "url.query",
                                                 "db.statement",      "user_agent.original",
                                                 "exception.message", "exception.stacktrace",
                                                 "log.message"};

void ExpectSameShape(const SpanBatch& r, const SpanBatch& f, const AttrColumns& rc,
                     const AttrColumns& fc, Range rr, Range fr, std::set<std::string>* changed) {
  ASSERT_EQ(rr.size(), fr.size());
  for (uint32_t k = 0; k < rr.size(); ++k) {
    const std::string_view key = r.Str(rc.key[rr.begin + k]);
    ASSERT_EQ(key, f.Str(fc.key[fr.begin + k]));
    EXPECT_EQ(rc.type[rr.begin + k], fc.type[fr.begin + k]) << key;
    const std::string_view rv = r.Str(rc.value[rr.begin + k]);
    const std::string_view fv = f.Str(fc.value[fr.begin + k]);
    if (kChangedKeys.count(key) == 0) {
      EXPECT_EQ(rv, fv) << key;
    } else if (rv != fv) {
      changed->insert(std::string(key));
    }
  }
}

TEST(LoadgenCorpusTest, FreshCorpusKeepsTheReplayCorpusShape) {
  const SpanBatch r = Generate(CorpusOptions{3, CorpusKind::kReplay}, 2000);
  const SpanBatch f = Generate(CorpusOptions{3, CorpusKind::kFresh}, 2000);
  ASSERT_EQ(r.span_count(), f.span_count());
  ASSERT_EQ(r.events.time_ns.size(), f.events.time_ns.size());
  std::set<std::string> changed;
  for (uint32_t i = 0; i < r.span_count(); ++i) {
    ASSERT_EQ(r.spans.trace_id[i], f.spans.trace_id[i]);
    ASSERT_EQ(r.spans.span_id[i], f.spans.span_id[i]);
    EXPECT_EQ(r.spans.parent_span_id[i], f.spans.parent_span_id[i]);
    EXPECT_EQ(r.Str(r.spans.name[i]), f.Str(f.spans.name[i]));
    EXPECT_EQ(r.spans.kind[i], f.spans.kind[i]);
    EXPECT_EQ(r.spans.start_ns[i], f.spans.start_ns[i]);
    EXPECT_EQ(r.spans.end_ns[i], f.spans.end_ns[i]);
    EXPECT_EQ(r.spans.status_code[i], f.spans.status_code[i]);
    EXPECT_EQ(r.Str(r.spans.status_message[i]), f.Str(f.spans.status_message[i]));
    ExpectSameShape(r, f, r.span_attrs, f.span_attrs, r.spans.attrs[i], f.spans.attrs[i], &changed);
    ASSERT_EQ(r.spans.events[i].size(), f.spans.events[i].size());
    for (uint32_t e = r.spans.events[i].begin; e < r.spans.events[i].end; ++e) {
      EXPECT_EQ(r.Str(r.events.name[e]), f.Str(f.events.name[e]));
      ExpectSameShape(r, f, r.event_attrs, f.event_attrs, r.events.attrs[e], f.events.attrs[e],
                      &changed);
    }
  }
  EXPECT_EQ(changed.size(), kChangedKeys.size()) << "each of them changes somewhere";
  std::string why;
  EXPECT_TRUE(r.LogicallyEquals(Generate(CorpusOptions{3}, 2000), &why)) << why;
}

// Distinct values of `key` over spans and events, and their most common's count.
// `with`: how many contain `part`.
struct Distinct {
  size_t values = 0;
  size_t seen = 0;
  size_t top = 0;
  size_t with = 0;
};
Distinct Count(const SpanBatch& b, std::string_view key, std::string_view part = "\x01") {
  std::map<std::string_view, size_t> n;
  Distinct d;
  for (const AttrColumns* cols : {&b.span_attrs, &b.event_attrs}) {
    for (size_t a = 0; a < cols->key.size(); ++a) {
      if (b.Str(cols->key[a]) != key) continue;
      ++n[b.Str(cols->value[a])];
      d.with += b.Str(cols->value[a]).find(part) != std::string_view::npos ? 1 : 0;
    }
  }
  d.values = n.size();
  for (const auto& [v, c] : n) {
    d.seen += c;
    d.top = std::max(d.top, c);
  }
  return d;
}

TEST(LoadgenCorpusTest, FreshCorpusValuesVaryAsRealTrafficsDo) {
  constexpr int kTraces = 5000;
  const SpanBatch r = Generate(CorpusOptions{1, CorpusKind::kReplay}, kTraces);
  const SpanBatch f = Generate(CorpusOptions{1, CorpusKind::kFresh}, kTraces);

  // The gateway's URL to the frontend (one per trace) and the third party's.
  const Distinct url_r = Count(r, "url.full", "{"), url_f = Count(f, "url.full", "{");
  EXPECT_LE(url_r.values, 200u) << "route templates";
  EXPECT_GT(url_r.with, 0u);
  EXPECT_GE(url_f.values, 4000u) << "skus, order and user ids, cache busters";
  EXPECT_EQ(url_f.with, 0u) << "no template left";

  const Distinct sql_r = Count(r, "db.statement", "$1"), sql_f = Count(f, "db.statement", "$1");
  EXPECT_GE(sql_f.values, 8000u) << "literals";
  EXPECT_GE(sql_f.values, sql_r.values * 3 / 2);
  EXPECT_GT(sql_r.with, 1000u);
  EXPECT_EQ(sql_f.with, 0u) << "no placeholder left";

  const Distinct ex_r = Count(r, "exception.message"), ex_f = Count(f, "exception.message");
  ASSERT_GE(ex_f.seen, 25u) << "~1% of traces fail";
  EXPECT_LE(ex_r.values, 12u) << "fixed texts";
  EXPECT_EQ(ex_f.values, ex_f.seen) << "every message has its ids";
  const Distinct st_f = Count(f, "exception.stacktrace");
  EXPECT_EQ(st_f.values, st_f.seen);

  const Distinct log_r = Count(r, "log.message", "[request_id="),
                 log_f = Count(f, "log.message", "[request_id=");
  EXPECT_GE(log_f.values, log_f.seen * 95 / 100);
  EXPECT_EQ(log_r.with, 0u);
  EXPECT_EQ(log_f.with, log_f.seen) << "every line has its request id";

  // A population: thousands of agents, the common ones seen again and again.
  const Distinct ua_r = Count(r, "user_agent.original"), ua_f = Count(f, "user_agent.original");
  EXPECT_LE(ua_r.values, 12u);
  EXPECT_GE(ua_f.values, 2000u);
  EXPECT_LE(ua_f.values, ua_f.seen / 2) << "agents repeat";
  EXPECT_GE(ua_f.top, 20u) << "skewed: some agents are common";
}

// Every string the fresh corpus sends, patched with fresh values, is valid
// UTF-8 and decodes to the same schema; the replay corpus's one non-UTF-8
// byte (a redis statement's 0xff) is left as it was.
TEST(LoadgenCorpusTest, FreshPayloadsStayValidUtf8SendAfterSend) {
  const std::vector<Payload> ps =
      BuildPayloads(CorpusOptions{2, CorpusKind::kFresh}, "run", 6, 500, kBase);
  const std::vector<Payload> rs = BuildPayloads(2, "run", 6, 500, kBase);
  size_t fresh_sites = 0, replay_sites = 0, spans = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    fresh_sites += ps[i].values.size();
    replay_sites += rs[i].values.size();
    spans += ps[i].spans;
  }
  EXPECT_GE(fresh_sites, spans / 3);
  EXPECT_GE(fresh_sites, 2 * replay_sites) << "more digit runs for --fresh-values to rewrite";

  Rng rng(11);
  for (const Payload& p : ps) {
    const SpanBatch orig = [&] {
      SpanBatch b;
      EXPECT_TRUE(codec::DecodeOtlpProto(p.body, b).ok());
      return b;
    }();
    for (int send = 0; send < 3; ++send) {
      Patch patch = Patch::Random(rng, 0);
      patch.value_seed = rng.Next() | 1;
      std::string body;
      ApplyPatch(p, patch, &body);
      ASSERT_EQ(body.size(), p.body.size());
      SpanBatch b;
      const Status st = codec::DecodeOtlpProto(body, b);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_EQ(b.span_count(), orig.span_count());
      ASSERT_EQ(b.span_attrs.size(), orig.span_attrs.size());
      ASSERT_EQ(b.event_attrs.size(), orig.event_attrs.size());
      for (const AttrColumns* cols : {&b.span_attrs, &b.event_attrs, &b.resource_attrs}) {
        for (size_t a = 0; a < cols->key.size(); ++a) {
          EXPECT_TRUE(ValidUtf8(b.Str(cols->key[a])));
          EXPECT_TRUE(ValidUtf8(b.Str(cols->value[a])))
              << b.Str(cols->key[a]) << ": " << b.Str(cols->value[a]);
        }
      }
      for (size_t a = 0; a < b.span_attrs.size(); ++a) {
        EXPECT_EQ(b.Str(b.span_attrs.key[a]), orig.Str(orig.span_attrs.key[a]));
        EXPECT_EQ(b.span_attrs.type[a], orig.span_attrs.type[a]);
      }
      for (uint32_t i = 0; i < b.span_count(); ++i) {
        EXPECT_TRUE(ValidUtf8(b.Str(b.spans.name[i])));
        EXPECT_TRUE(ValidUtf8(b.Str(b.spans.status_message[i])));
      }
    }
  }
}

}  // namespace
}  // namespace spanhouse::loadgen
