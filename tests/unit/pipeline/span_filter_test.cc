#include "pipeline/filter/span_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../testdata/sample_batch.h"

namespace spanhouse::pipeline {
namespace {

constexpr uint64_t kS = 1000000000ull;
// The clock the tests filter against; the sample batch's spans start here.
constexpr uint64_t kNow = 1800000000ull * kS;

SpanBatch Sample() {
  return testdata::SampleBatch(2, kNow);
}

size_t Rejected(const FilterReport& r, RejectReason why) {
  return r.rejected[static_cast<size_t>(why)];
}
uint64_t Trimmed(const FilterReport& r, TrimReason why) {
  return r.trimmed[static_cast<size_t>(why)];
}

// The sample batch through a filter with limits `l`.
struct Filtered {
  explicit Filtered(const FilterLimits& l) : filter(l), b(Sample()) { filter.Apply(b, kNow, &r); }
  SpanFilter filter;
  SpanBatch b;
  FilterReport r;
};

TEST(SpanFilter, PassesAReasonableBatchUntouched) {
  SpanFilter f(FilterLimits{});
  SpanBatch b = Sample();
  const SpanBatch before = Sample();
  FilterReport r;
  f.Apply(b, kNow, &r);
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.rejected_spans(), 0u);
  EXPECT_EQ(r.Message(f.limits()), "");
  std::string why;
  EXPECT_TRUE(b.LogicallyEquals(before, &why)) << why;
  for (const auto& c : f.stats().rejected) EXPECT_EQ(c.load(), 0u);
  for (const auto& c : f.stats().trimmed) EXPECT_EQ(c.load(), 0u);
}

struct RejectCase {
  const char* name;
  RejectReason why;
  void (*spoil)(SpanBatch&, size_t span);
};

const RejectCase kRejectCases[] = {
    {"zero trace id", RejectReason::kZeroTraceId,
     [](SpanBatch& b, size_t i) { b.spans.trace_id[i] = TraceId{}; }},
    {"zero span id", RejectReason::kZeroSpanId,
     [](SpanBatch& b, size_t i) { b.spans.span_id[i] = SpanId{}; }},
    {"start 2 h ahead", RejectReason::kFutureStart,
     [](SpanBatch& b, size_t i) {
       b.spans.start_ns[i] = kNow + 7200 * kS;
       b.spans.end_ns[i] = b.spans.start_ns[i] + 1;
     }},
    {"start 8 days back", RejectReason::kTooOld,
     [](SpanBatch& b, size_t i) {
       b.spans.start_ns[i] = kNow - 8 * 86400 * kS;
       b.spans.end_ns[i] = b.spans.start_ns[i] + 1;
     }},
    {"start 0 (missing)", RejectReason::kTooOld,
     [](SpanBatch& b, size_t i) { b.spans.start_ns[i] = 0; }},
    {"end before start", RejectReason::kNegativeDuration,
     [](SpanBatch& b, size_t i) { b.spans.end_ns[i] = b.spans.start_ns[i] - 1; }},
    {"end 0 (unfinished)", RejectReason::kNegativeDuration,
     [](SpanBatch& b, size_t i) { b.spans.end_ns[i] = 0; }},
    {"25 h long", RejectReason::kAbsurdDuration,
     [](SpanBatch& b, size_t i) { b.spans.end_ns[i] = b.spans.start_ns[i] + 25 * 3600 * kS; }},
};

TEST(SpanFilter, DropsEachUnreasonableSpanAndCountsWhy) {
  for (const RejectCase& c : kRejectCases) {
    SCOPED_TRACE(c.name);
    SpanFilter f(FilterLimits{});
    SpanBatch b = Sample();
    SpanBatch want = Sample();
    // Spans 1 and 4 are spoiled; the others must come out as they went in.
    c.spoil(b, 1);
    c.spoil(b, 4);
    const uint32_t keep[] = {0, 2, 3, 5};
    SpanBatch expected;
    expected.AppendSpans(want, keep, 4);

    FilterReport r;
    f.Apply(b, kNow, &r);
    EXPECT_EQ(r.rejected_spans(), 2u);
    EXPECT_EQ(Rejected(r, c.why), 2u);
    EXPECT_EQ(f.stats().rejected[static_cast<size_t>(c.why)].load(), 2u);
    ASSERT_EQ(b.span_count(), 4u);
    // The compacted batch, copied span by span, is the batch of the kept spans.
    SpanBatch got;
    got.AppendSpans(b, nullptr, b.span_count());
    std::string why;
    EXPECT_TRUE(got.LogicallyEquals(expected, &why)) << why;
    const std::string msg = r.Message(f.limits());
    EXPECT_NE(msg.find(std::string("rejected 2 spans: 2 ") + ReasonName(c.why)), std::string::npos)
        << msg;
  }
}

TEST(SpanFilter, LimitsAreInclusive) {
  SpanFilter f(FilterLimits{});
  SpanBatch b = Sample();
  b.spans.start_ns[0] = kNow + 3600 * kS;  // exactly max_future ahead
  b.spans.end_ns[0] = b.spans.start_ns[0];
  b.spans.start_ns[1] = kNow - 7 * 86400 * kS;               // exactly the retention back
  b.spans.end_ns[1] = b.spans.start_ns[1] + 24 * 3600 * kS;  // exactly max_duration
  FilterReport r;
  f.Apply(b, kNow, &r);
  EXPECT_EQ(r.rejected_spans(), 0u) << r.Message(f.limits());
  EXPECT_EQ(b.span_count(), 6u);
}

TEST(SpanFilter, ASpanFailingSeveralChecksCountsOnceUnderTheFirst) {
  SpanFilter f(FilterLimits{});
  SpanBatch b = Sample();
  b.spans.trace_id[0] = TraceId{};
  b.spans.span_id[0] = SpanId{};
  b.spans.start_ns[0] = 0;
  FilterReport r;
  f.Apply(b, kNow, &r);
  EXPECT_EQ(r.rejected_spans(), 1u);
  EXPECT_EQ(Rejected(r, RejectReason::kZeroTraceId), 1u);
  EXPECT_EQ(b.span_count(), 5u);
}

TEST(SpanFilter, EverySpanRejectedLeavesAnEmptyBatch) {
  SpanFilter f(FilterLimits{});
  SpanBatch b = Sample();
  for (size_t i = 0; i < b.span_count(); ++i) b.spans.start_ns[i] = kNow + 86400 * kS;
  FilterReport r;
  f.Apply(b, kNow, &r);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(Rejected(r, RejectReason::kFutureStart), 6u);
}

TEST(SpanFilter, TrimsAttributesEventsAndLinksOverTheirCounts) {
  FilterLimits l;
  l.max_attributes = 3;  // spans have 8, events 2 and 0, links 1
  l.max_events = 1;      // span 1 of each trace has 2
  l.max_links = 0;       // span 2 of each trace has 1
  Filtered run(l);
  const SpanBatch& b = run.b;
  const FilterReport& r = run.r;
  const SpanBatch before = Sample();
  EXPECT_EQ(r.rejected_spans(), 0u);
  EXPECT_EQ(Trimmed(r, TrimReason::kAttributes), 6u * 5);  // event and link attrs under 3
  EXPECT_EQ(Trimmed(r, TrimReason::kEvents), 2u);
  EXPECT_EQ(Trimmed(r, TrimReason::kLinks), 2u);
  for (size_t i = 0; i < b.span_count(); ++i) {
    EXPECT_EQ(b.spans.attrs[i].size(), 3u);
    EXPECT_EQ(b.spans.attrs[i].begin, before.spans.attrs[i].begin);  // the first ones kept
    EXPECT_EQ(b.spans.dropped_attributes_count[i], before.spans.dropped_attributes_count[i] + 5);
    EXPECT_LE(b.spans.events[i].size(), 1u);
    EXPECT_EQ(b.spans.dropped_events_count[i], before.spans.dropped_events_count[i] +
                                                   before.spans.events[i].size() -
                                                   b.spans.events[i].size());
    EXPECT_EQ(b.spans.links[i].size(), 0u);
    EXPECT_EQ(b.spans.dropped_links_count[i],
              before.spans.dropped_links_count[i] + before.spans.links[i].size());
  }
  EXPECT_EQ(run.filter.stats().trimmed[static_cast<size_t>(TrimReason::kAttributes)].load(), 30u);
  const std::string msg = r.Message(l);
  EXPECT_EQ(msg.find("rejected"), std::string::npos) << msg;
  EXPECT_NE(msg.find("trimmed: 30 attributes (over 3 per span, event or link; dropped)"),
            std::string::npos)
      << msg;
}

TEST(SpanFilter, EventAndLinkAttributesHaveTheSameCap) {
  FilterLimits l;
  l.max_attributes = 1;
  Filtered run(l);
  const SpanBatch& b = run.b;
  const FilterReport& r = run.r;
  // 6 spans x 7 extra, 2 "cache miss" events x 1 extra; links have 1.
  EXPECT_EQ(Trimmed(r, TrimReason::kAttributes), 6u * 7 + 2);
  const uint32_t e = b.spans.events[1].begin;
  EXPECT_EQ(b.events.attrs[e].size(), 1u);
  EXPECT_EQ(b.events.dropped_attributes_count[e], 2u + 1);
}

TEST(SpanFilter, CutsLongValuesAndKeysAtCharacterBoundaries) {
  FilterLimits l;
  l.max_value_bytes = 5;
  l.max_key_bytes = 4;
  SpanFilter f(l);
  SpanBatch b;
  const uint32_t res = b.AddResource();
  const uint32_t scope = b.AddScope();
  const uint32_t sp = b.AddSpan(res, scope);
  b.spans.trace_id[sp] = testdata::MakeTraceId(1);
  b.spans.span_id[sp] = testdata::MakeSpanId(1);
  b.spans.start_ns[sp] = kNow;
  b.spans.end_ns[sp] = kNow + 1;
  auto add = [&](std::string_view k, ValueType t, std::string_view v) {
    SpanBatch::AddAttr(b.span_attrs, b.AddString(k), t, b.AddString(v));
  };
  add("ok", ValueType::kString, "short");                 // at the limit: untouched
  add("utf8", ValueType::kString, "ab\xc3\xa9\xc3\xa9");  // "abéé": 6 bytes, é is 2
  add("list", ValueType::kArray, "[1,2,3,4]");
  add("blob", ValueType::kBytes, std::string("\x00\xff\x80\x80\x80\x80", 6));
  add("h\xc3\xa9llo", ValueType::kInt, "1");  // key "héllo": 6 bytes
  b.spans.attrs[sp] = {0, 5};
  FilterReport r;
  f.Apply(b, kNow, &r);
  const AttrColumns& a = b.span_attrs;
  EXPECT_EQ(b.Str(a.value[0]), "short");
  EXPECT_EQ(b.Str(a.value[1]), "ab\xc3\xa9");  // not cut inside the second é
  EXPECT_EQ(a.type[1], ValueType::kString);
  EXPECT_EQ(b.Str(a.value[2]), "[1,2,");  // cut JSON is no longer an array: text
  EXPECT_EQ(a.type[2], ValueType::kString);
  EXPECT_EQ(b.Str(a.value[3]), std::string("\x00\xff\x80\x80\x80", 5));  // bytes: anywhere
  EXPECT_EQ(a.type[3], ValueType::kBytes);
  EXPECT_EQ(b.Str(a.key[4]), "h\xc3\xa9l");
  EXPECT_EQ(b.Str(a.key[1]), "utf8");
  EXPECT_EQ(Trimmed(r, TrimReason::kValueLength), 3u);
  EXPECT_EQ(Trimmed(r, TrimReason::kKeyLength), 1u);
  EXPECT_EQ(b.span_count(), 1u);
}

TEST(SpanFilter, CutsResourceScopeEventAndLinkAttributesToo) {
  FilterLimits l;
  l.max_value_bytes = 3;
  Filtered run(l);
  const SpanBatch& b = run.b;
  const FilterReport& r = run.r;
  for (size_t a = 0; a < b.resource_attrs.size(); ++a) {
    EXPECT_LE(b.resource_attrs.value[a].len, 3u);
  }
  EXPECT_LE(b.scope_attrs.value[0].len, 3u);
  EXPECT_EQ(b.Str(b.event_attrs.value[b.events.attrs[b.spans.events[1].begin].begin]), "car");
  EXPECT_EQ(b.Str(b.link_attrs.value[b.links.attrs[b.spans.links[2].begin].begin]), "bat");
  EXPECT_GT(Trimmed(r, TrimReason::kValueLength), 0u);
}

SpanBatch NamedSpans(std::string_view service, const std::vector<std::string>& names) {
  SpanBatch b;
  const uint32_t res = b.AddResource();
  const uint32_t scope = b.AddScope();
  b.resources.service_name[res] = b.AddString(service);
  uint8_t seed = 1;
  for (const std::string& n : names) {
    const uint32_t sp = b.AddSpan(res, scope);
    b.spans.trace_id[sp] = testdata::MakeTraceId(seed);
    b.spans.span_id[sp] = testdata::MakeSpanId(seed++);
    b.spans.start_ns[sp] = kNow;
    b.spans.end_ns[sp] = kNow + 1;
    b.spans.name[sp] = b.AddString(n);
  }
  return b;
}

std::vector<std::string> Names(const SpanBatch& b) {
  std::vector<std::string> out;
  for (StrRef n : b.spans.name) out.emplace_back(b.Str(n));
  return out;
}

TEST(SpanFilter, RenamesSpanNamesPastTheCapPerService) {
  FilterLimits l;
  l.max_span_names_per_service = 2;
  SpanFilter f(l);
  FilterReport r;
  SpanBatch b = NamedSpans("shop", {"GET /a", "GET /a", "GET /b", "GET /c", "GET /a", "GET /d"});
  f.Apply(b, kNow, &r);
  EXPECT_EQ(Names(b), (std::vector<std::string>{"GET /a", "GET /a", "GET /b", "(other)", "GET /a",
                                                "(other)"}));
  EXPECT_EQ(Trimmed(r, TrimReason::kSpanName), 2u);
  EXPECT_EQ(r.rejected_spans(), 0u);
  EXPECT_NE(r.Message(l).find("2 span_name (names past 2 distinct per service; renamed "
                              "'(other)')"),
            std::string::npos)
      << r.Message(l);

  // Remembered across batches: the first names stay, new ones are renamed.
  SpanBatch again = NamedSpans("shop", {"GET /b", "GET /e"});
  f.Apply(again, kNow, &r);
  EXPECT_EQ(Names(again), (std::vector<std::string>{"GET /b", "(other)"}));

  // Another service has a cap of its own.
  SpanBatch other = NamedSpans("cart", {"GET /c", "GET /e"});
  f.Apply(other, kNow, &r);
  EXPECT_EQ(Names(other), (std::vector<std::string>{"GET /c", "GET /e"}));
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(f.stats().trimmed[static_cast<size_t>(TrimReason::kSpanName)].load(), 3u);
}

TEST(SpanFilter, NoNameCapWhenZero) {
  FilterLimits l;
  l.max_span_names_per_service = 0;
  SpanFilter f(l);
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) names.push_back("op " + std::to_string(i));
  SpanBatch b = NamedSpans("shop", names);
  FilterReport r;
  f.Apply(b, kNow, &r);
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(Names(b), names);
}

TEST(SpanFilter, MessageNamesEveryReasonWithItsCount) {
  FilterReport r;
  r.rejected[static_cast<size_t>(RejectReason::kFutureStart)] = 1;
  r.rejected[static_cast<size_t>(RejectReason::kZeroSpanId)] = 2;
  r.trimmed[static_cast<size_t>(TrimReason::kKeyLength)] = 4;
  EXPECT_EQ(r.rejected_spans(), 3u);
  EXPECT_EQ(r.Message(FilterLimits{}),
            "rejected 3 spans: 2 zero_span_id (all-zero span id), 1 future_start (start time "
            "more than 3600 s ahead); trimmed: 4 key_length (attribute keys over 256 bytes; cut)");
}

}  // namespace
}  // namespace spanhouse::pipeline
