// Tests for SpanBatch (model/span_batch.h): the string arena, Append,
// LogicallyEquals (one changed field at a time, each must be noticed and
// named), ResolveServiceName, the hex helpers and MemoryBytes.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../../testdata/sample_batch.h"
#include "model/span_batch.h"

namespace spanhouse {
namespace {

using testdata::MakeSpanId;
using testdata::MakeTraceId;
using testdata::SampleBatch;

// ---- an independent field-by-field comparison of span i of x and span j of y ----
// (written out here rather than through LogicallyEquals, which is under test too)

void ExpectSameAttrs(const SpanBatch& x, const AttrColumns& cx, Range rx, const SpanBatch& y,
                     const AttrColumns& cy, Range ry, const std::string& what) {
  ASSERT_EQ(rx.size(), ry.size()) << what;
  for (uint32_t k = 0; k < rx.size(); ++k) {
    EXPECT_EQ(x.Str(cx.key[rx.begin + k]), y.Str(cy.key[ry.begin + k])) << what << " key " << k;
    EXPECT_EQ(cx.type[rx.begin + k], cy.type[ry.begin + k]) << what << " type " << k;
    EXPECT_EQ(x.Str(cx.value[rx.begin + k]), y.Str(cy.value[ry.begin + k]))
        << what << " value " << k;
  }
}

void ExpectSameSpan(const SpanBatch& x, uint32_t i, const SpanBatch& y, uint32_t j) {
  const std::string at = "span " + std::to_string(i) + " vs " + std::to_string(j);
  const auto& a = x.spans;
  const auto& b = y.spans;
  EXPECT_EQ(a.trace_id[i], b.trace_id[j]) << at;
  EXPECT_EQ(a.span_id[i], b.span_id[j]) << at;
  EXPECT_EQ(a.parent_span_id[i], b.parent_span_id[j]) << at;
  EXPECT_EQ(x.Str(a.trace_state[i]), y.Str(b.trace_state[j])) << at;
  EXPECT_EQ(a.flags[i], b.flags[j]) << at;
  EXPECT_EQ(x.Str(a.name[i]), y.Str(b.name[j])) << at;
  EXPECT_EQ(a.kind[i], b.kind[j]) << at;
  EXPECT_EQ(a.start_ns[i], b.start_ns[j]) << at;
  EXPECT_EQ(a.end_ns[i], b.end_ns[j]) << at;
  EXPECT_EQ(a.status_code[i], b.status_code[j]) << at;
  EXPECT_EQ(x.Str(a.status_message[i]), y.Str(b.status_message[j])) << at;
  EXPECT_EQ(a.dropped_attributes_count[i], b.dropped_attributes_count[j]) << at;
  EXPECT_EQ(a.dropped_events_count[i], b.dropped_events_count[j]) << at;
  EXPECT_EQ(a.dropped_links_count[i], b.dropped_links_count[j]) << at;
  ExpectSameAttrs(x, x.span_attrs, a.attrs[i], y, y.span_attrs, b.attrs[j], at + " attrs");

  const uint32_t r = a.resource[i];
  const uint32_t ro = b.resource[j];
  ExpectSameAttrs(x, x.resource_attrs, x.resources.attrs[r], y, y.resource_attrs,
                  y.resources.attrs[ro], at + " resource attrs");
  EXPECT_EQ(x.resources.dropped_attributes_count[r], y.resources.dropped_attributes_count[ro])
      << at;
  EXPECT_EQ(x.Str(x.resources.schema_url[r]), y.Str(y.resources.schema_url[ro])) << at;
  EXPECT_EQ(x.Str(x.resources.service_name[r]), y.Str(y.resources.service_name[ro])) << at;

  const uint32_t s = a.scope[i];
  const uint32_t so = b.scope[j];
  EXPECT_EQ(x.Str(x.scopes.name[s]), y.Str(y.scopes.name[so])) << at;
  EXPECT_EQ(x.Str(x.scopes.version[s]), y.Str(y.scopes.version[so])) << at;
  ExpectSameAttrs(x, x.scope_attrs, x.scopes.attrs[s], y, y.scope_attrs, y.scopes.attrs[so],
                  at + " scope attrs");
  EXPECT_EQ(x.scopes.dropped_attributes_count[s], y.scopes.dropped_attributes_count[so]) << at;
  EXPECT_EQ(x.Str(x.scopes.schema_url[s]), y.Str(y.scopes.schema_url[so])) << at;

  ASSERT_EQ(a.events[i].size(), b.events[j].size()) << at;
  for (uint32_t k = 0; k < a.events[i].size(); ++k) {
    const uint32_t e1 = a.events[i].begin + k;
    const uint32_t e2 = b.events[j].begin + k;
    EXPECT_EQ(x.events.time_ns[e1], y.events.time_ns[e2]) << at;
    EXPECT_EQ(x.Str(x.events.name[e1]), y.Str(y.events.name[e2])) << at;
    EXPECT_EQ(x.events.dropped_attributes_count[e1], y.events.dropped_attributes_count[e2]) << at;
    ExpectSameAttrs(x, x.event_attrs, x.events.attrs[e1], y, y.event_attrs, y.events.attrs[e2],
                    at + " event attrs");
  }
  ASSERT_EQ(a.links[i].size(), b.links[j].size()) << at;
  for (uint32_t k = 0; k < a.links[i].size(); ++k) {
    const uint32_t l1 = a.links[i].begin + k;
    const uint32_t l2 = b.links[j].begin + k;
    EXPECT_EQ(x.links.trace_id[l1], y.links.trace_id[l2]) << at;
    EXPECT_EQ(x.links.span_id[l1], y.links.span_id[l2]) << at;
    EXPECT_EQ(x.Str(x.links.trace_state[l1]), y.Str(y.links.trace_state[l2])) << at;
    EXPECT_EQ(x.links.flags[l1], y.links.flags[l2]) << at;
    EXPECT_EQ(x.links.dropped_attributes_count[l1], y.links.dropped_attributes_count[l2]) << at;
    ExpectSameAttrs(x, x.link_attrs, x.links.attrs[l1], y, y.link_attrs, y.links.attrs[l2],
                    at + " link attrs");
  }
}

// Every index a span holds points inside its column.
void ExpectConsistent(const SpanBatch& b) {
  const size_t n = b.span_count();
  const auto& s = b.spans;
  for (const size_t col :
       {s.span_id.size(), s.parent_span_id.size(), s.trace_state.size(), s.flags.size(),
        s.name.size(), s.kind.size(), s.start_ns.size(), s.end_ns.size(), s.status_code.size(),
        s.status_message.size(), s.resource.size(), s.scope.size(), s.attrs.size(),
        s.dropped_attributes_count.size(), s.events.size(), s.dropped_events_count.size(),
        s.links.size(), s.dropped_links_count.size()}) {
    ASSERT_EQ(col, n);
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_LT(s.resource[i], b.resources.attrs.size());
    ASSERT_LT(s.scope[i], b.scopes.name.size());
    ASSERT_LE(s.attrs[i].end, b.span_attrs.size());
    ASSERT_LE(s.events[i].end, b.events.time_ns.size());
    ASSERT_LE(s.links[i].end, b.links.trace_id.size());
  }
}

// ---- strings ----

TEST(SpanBatch, AddStringSurvivesArenaGrowth) {
  SpanBatch b;
  std::vector<std::pair<StrRef, std::string>> added;
  const StrRef empty = b.AddString("");
  for (int i = 0; i < 5000; ++i) {
    std::string s =
        "s" + std::to_string(i) + std::string(static_cast<size_t>(i % 97), 'a' + i % 26);
    added.emplace_back(b.AddString(s), s);
    if (i == 100)
      added.emplace_back(b.AddString(std::string(100000, 'z')), std::string(100000, 'z'));
  }
  EXPECT_EQ(b.Str(empty), "");
  for (const auto& [ref, s] : added) {
    ASSERT_EQ(ref.len, s.size());
    EXPECT_EQ(b.Str(ref), s);
  }
  // Offsets are consecutive: each string starts where the last ended.
  for (size_t k = 1; k < added.size(); ++k) {
    EXPECT_EQ(added[k].first.off, added[k - 1].first.off + added[k - 1].first.len);
  }
}

TEST(SpanBatch, AddStringKeepsArbitraryBytes) {
  SpanBatch b;
  const std::string bytes("\x00\xff\x01\n\"", 5);
  StrRef r = b.AddString(bytes);
  EXPECT_EQ(b.Str(r), bytes);
  EXPECT_EQ(r.len, 5u);
}

TEST(SpanBatch, AddStringOfItsOwnArena) {
  // A view into the arena itself, added while the arena must grow.
  SpanBatch b;
  StrRef r = b.AddString("abcdef");
  for (int i = 0; i < 20; ++i) r = b.AddString(b.Str(r));
  EXPECT_EQ(b.Str(r), "abcdef");
}

TEST(SpanBatch, PiecewiseStrings) {
  SpanBatch b;
  StrRef before = b.AddString("before");
  uint32_t begin = b.BeginString();
  b.AppendToString("he");
  b.AppendToString("");
  b.AppendToString("llo");
  StrRef r = b.EndString(begin);
  EXPECT_EQ(b.Str(r), "hello");
  EXPECT_EQ(b.Str(before), "before");
  uint32_t e = b.BeginString();
  EXPECT_EQ(b.Str(b.EndString(e)), "");
}

// ---- rows ----

TEST(SpanBatch, NewRowsAreDefaulted) {
  SpanBatch b;
  EXPECT_TRUE(b.empty());
  uint32_t r = b.AddResource();
  uint32_t s = b.AddScope();
  uint32_t sp = b.AddSpan(r, s);
  EXPECT_EQ(sp, 0u);
  EXPECT_EQ(b.span_count(), 1u);
  EXPECT_FALSE(b.empty());
  EXPECT_TRUE(IsZero(b.spans.trace_id[sp]));
  EXPECT_TRUE(IsZero(b.spans.parent_span_id[sp]));
  EXPECT_EQ(b.spans.attrs[sp].size(), 0u);
  EXPECT_EQ(b.spans.events[sp].size(), 0u);
  EXPECT_EQ(b.spans.links[sp].size(), 0u);
  EXPECT_EQ(b.Str(b.spans.name[sp]), "");
  EXPECT_EQ(b.Str(b.resources.service_name[r]), "");  // until ResolveServiceName
  EXPECT_EQ(b.AddSpan(r, s), 1u);
  EXPECT_EQ(b.AddEvent(), 0u);
  EXPECT_EQ(b.AddLink(), 0u);
  ExpectConsistent(b);
}

TEST(SpanBatch, ClearEmptiesEverything) {
  SpanBatch b = SampleBatch(3);
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.span_count(), 0u);
  EXPECT_EQ(b.resources.attrs.size(), 0u);
  EXPECT_EQ(b.resource_attrs.size(), 0u);
  EXPECT_EQ(b.span_attrs.size(), 0u);
  EXPECT_EQ(b.events.time_ns.size(), 0u);
  EXPECT_EQ(b.links.trace_id.size(), 0u);
  EXPECT_EQ(b.BeginString(), 0u);
  // The columns are released; the string arena may keep its buffer (the
  // moved-from short string does not take it), which MemoryBytes reports.
  EXPECT_LE(b.MemoryBytes(), SampleBatch(3).MemoryBytes());
  EXPECT_TRUE(b.LogicallyEquals(SpanBatch()));
}

// ---- Append ----

TEST(SpanBatch, AppendIntoEmptyCopiesEveryField) {
  const SpanBatch src = SampleBatch(2);
  SpanBatch dst;
  dst.Append(src);
  ExpectConsistent(dst);
  ASSERT_EQ(dst.span_count(), src.span_count());
  for (uint32_t i = 0; i < src.span_count(); ++i) ExpectSameSpan(dst, i, src, i);
  std::string why;
  EXPECT_TRUE(dst.LogicallyEquals(src, &why)) << why;
  EXPECT_TRUE(src.LogicallyEquals(dst, &why)) << why;
}

TEST(SpanBatch, AppendTwoBatchesKeepsEveryField) {
  const SpanBatch a = SampleBatch(2, 1000);
  SpanBatch b = SampleBatch(1, 5000000000ull);
  // Make b distinguishable from a everywhere it matters.
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    b.spans.trace_id[i] = MakeTraceId(77);
    b.spans.name[i] = b.AddString("b-span-" + std::to_string(i));
  }
  b.scopes.version[0] = b.AddString("9.9.9");
  b.resource_attrs.value[0] = b.AddString("backend");
  b.ResolveServiceName(0);

  SpanBatch dst;
  dst.AddString("something already in the arena");
  dst.Append(a);
  dst.Append(b);
  ExpectConsistent(dst);
  ASSERT_EQ(dst.span_count(), a.span_count() + b.span_count());
  for (uint32_t i = 0; i < a.span_count(); ++i) ExpectSameSpan(dst, i, a, i);
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    ExpectSameSpan(dst, static_cast<uint32_t>(a.span_count()) + i, b, i);
  }
  // b's spans point at b's resources and scopes, not a's.
  const uint32_t first_b = static_cast<uint32_t>(a.span_count());
  EXPECT_EQ(dst.Str(dst.resources.service_name[dst.spans.resource[first_b]]), "backend");
  EXPECT_EQ(dst.Str(dst.scopes.version[dst.spans.scope[first_b]]), "9.9.9");
  EXPECT_EQ(dst.Str(dst.resources.service_name[dst.spans.resource[0]]), "frontend");
  EXPECT_EQ(dst.Str(dst.scopes.version[dst.spans.scope[0]]), "1.2.3");
}

TEST(SpanBatch, AppendEmptyBatchChangesNothing) {
  SpanBatch dst = SampleBatch(1);
  const SpanBatch before = dst;
  dst.Append(SpanBatch());
  std::string why;
  EXPECT_TRUE(dst.LogicallyEquals(before, &why)) << why;
  EXPECT_EQ(dst.span_count(), before.span_count());
}

TEST(SpanBatch, AppendToItself) {
  SpanBatch b = SampleBatch(1);
  const SpanBatch orig = b;
  b.Append(b);
  ExpectConsistent(b);
  ASSERT_EQ(b.span_count(), 2 * orig.span_count());
  for (uint32_t i = 0; i < orig.span_count(); ++i) {
    ExpectSameSpan(b, i, orig, i);
    ExpectSameSpan(b, static_cast<uint32_t>(orig.span_count()) + i, orig, i);
  }
}

// ---- LogicallyEquals ----

TEST(SpanBatch, LogicallyEqualsIgnoresArenaLayout) {
  const SpanBatch a = SampleBatch(2);
  SpanBatch b;
  b.AddString("padding that shifts every offset");
  b.Append(a);
  std::string why = "untouched";
  EXPECT_TRUE(a.LogicallyEquals(b, &why)) << why;
  EXPECT_TRUE(b.LogicallyEquals(a, nullptr));
  EXPECT_TRUE(a.LogicallyEquals(a));
  EXPECT_TRUE(SpanBatch().LogicallyEquals(SpanBatch()));
}

struct Mutation {
  const char* name;
  std::function<void(SpanBatch&)> apply;
  const char* why_contains;  // expected in the reason
};

// Span 1 has the events, span 2 the link; resource 0 and scope 0 are shared.
std::vector<Mutation> Mutations() {
  auto str = [](SpanBatch& b, StrRef& r, std::string_view s) { r = b.AddString(s); };
  return {
      {"span trace_id", [](SpanBatch& b) { b.spans.trace_id[0][3] ^= 1; }, "span 0 trace_id"},
      {"span span_id", [](SpanBatch& b) { b.spans.span_id[1][0] ^= 1; }, "span 1 span_id"},
      {"span parent", [](SpanBatch& b) { b.spans.parent_span_id[1] = {}; }, "parent_span_id"},
      {"span trace_state", [=](SpanBatch& b) { str(b, b.spans.trace_state[0], "vendor=y"); },
       "trace_state"},
      {"span flags", [](SpanBatch& b) { b.spans.flags[0] = 0; }, "span 0 flags"},
      {"span name", [=](SpanBatch& b) { str(b, b.spans.name[2], "SELECT cartz"); }, "span 2 name"},
      {"span kind", [](SpanBatch& b) { b.spans.kind[1] = 5; }, "span 1 kind"},
      {"span start", [](SpanBatch& b) { b.spans.start_ns[0] += 1; }, "span 0 start"},
      {"span end", [](SpanBatch& b) { b.spans.end_ns[0] -= 1; }, "span 0 end"},
      {"status code", [](SpanBatch& b) { b.spans.status_code[2] = 1; }, "status code"},
      {"status message",
       [=](SpanBatch& b) { str(b, b.spans.status_message[2], "deadlock\nDetected"); },
       "status message"},
      {"span attr value",
       [=](SpanBatch& b) { str(b, b.span_attrs.value[b.spans.attrs[1].begin + 1], "-201"); },
       "span 1 attr value"},
      {"span attr key",
       [=](SpanBatch& b) { str(b, b.span_attrs.key[b.spans.attrs[0].begin], "http.verb"); },
       "span 0 attr key"},
      {"span attr type",
       [](SpanBatch& b) { b.span_attrs.type[b.spans.attrs[0].begin + 1] = ValueType::kString; },
       "span 0 attr type"},
      {"span attr count", [](SpanBatch& b) { b.spans.attrs[0].end -= 1; }, "attribute count"},
      {"bytes attr value",
       [=](SpanBatch& b) {
         str(b, b.span_attrs.value[b.spans.attrs[0].begin + 4], std::string("\x00\xff\x02", 3));
       },
       "span 0 attr value"},
      {"dropped attrs", [](SpanBatch& b) { b.spans.dropped_attributes_count[2] = 9; },
       "dropped attrs"},
      {"dropped events", [](SpanBatch& b) { b.spans.dropped_events_count[1] = 0; },
       "dropped events"},
      {"dropped links", [](SpanBatch& b) { b.spans.dropped_links_count[2] = 0; }, "dropped links"},
      {"resource attr value", [=](SpanBatch& b) { str(b, b.resource_attrs.value[1], "16"); },
       "resource attr value"},
      {"resource attr key", [=](SpanBatch& b) { str(b, b.resource_attrs.key[1], "host.cpus"); },
       "resource attr key"},
      {"resource attr type", [](SpanBatch& b) { b.resource_attrs.type[3] = ValueType::kKvList; },
       "resource attr type"},
      {"resource dropped", [](SpanBatch& b) { b.resources.dropped_attributes_count[0] = 0; },
       "resource dropped"},
      {"resource schema_url",
       [=](SpanBatch& b) { str(b, b.resources.schema_url[1], "https://x/1.0"); },
       "resource schema_url"},
      {"service name", [=](SpanBatch& b) { str(b, b.resources.service_name[0], "front"); },
       "service name"},
      {"scope name", [=](SpanBatch& b) { str(b, b.scopes.name[0], "io.other"); }, "scope name"},
      {"scope version", [=](SpanBatch& b) { str(b, b.scopes.version[0], "1.2.4"); },
       "scope version"},
      {"scope attr value", [=](SpanBatch& b) { str(b, b.scope_attrs.value[0], "false"); },
       "scope attr value"},
      {"scope dropped", [](SpanBatch& b) { b.scopes.dropped_attributes_count[0] = 3; },
       "scope dropped"},
      {"scope schema_url", [=](SpanBatch& b) { str(b, b.scopes.schema_url[0], ""); },
       "scope schema_url"},
      {"event time", [](SpanBatch& b) { b.events.time_ns[1] += 1; }, "event 1 time"},
      {"event name", [=](SpanBatch& b) { str(b, b.events.name[0], "cache hit"); }, "event 0 name"},
      {"event attr value", [=](SpanBatch& b) { str(b, b.event_attrs.value[1], "4"); },
       "event 0 attr value"},
      {"event dropped", [](SpanBatch& b) { b.events.dropped_attributes_count[0] = 0; },
       "event 0 dropped"},
      {"event count", [](SpanBatch& b) { b.spans.events[1].end -= 1; }, "event count"},
      {"link trace_id", [](SpanBatch& b) { b.links.trace_id[0] = MakeTraceId(98); },
       "link 0 trace_id"},
      {"link span_id", [](SpanBatch& b) { b.links.span_id[0] = MakeSpanId(98); }, "link 0 span_id"},
      {"link trace_state", [=](SpanBatch& b) { str(b, b.links.trace_state[0], "other=2"); },
       "link 0 trace_state"},
      {"link flag", [](SpanBatch& b) { b.links.flags[0] = 1; }, "link 0 flags"},
      {"link attr value", [=](SpanBatch& b) { str(b, b.link_attrs.value[0], "stream"); },
       "link 0 attr value"},
      {"link dropped", [](SpanBatch& b) { b.links.dropped_attributes_count[0] = 6; },
       "link 0 dropped"},
      {"link count", [](SpanBatch& b) { b.spans.links[2].end = b.spans.links[2].begin; },
       "link count"},
      {"span count", [](SpanBatch& b) { b.AddSpan(0, 0); }, "span count"},
  };
}

TEST(SpanBatch, LogicallyEqualsNoticesEachKindOfChange) {
  const SpanBatch orig = SampleBatch(1);
  ASSERT_EQ(orig.span_count(), 3u);
  for (const Mutation& m : Mutations()) {
    SpanBatch changed = orig;
    std::string why;
    ASSERT_TRUE(changed.LogicallyEquals(orig, &why)) << m.name << ": copy differs: " << why;
    m.apply(changed);
    why.clear();
    EXPECT_FALSE(changed.LogicallyEquals(orig, &why)) << m.name << ": not noticed";
    EXPECT_NE(why.find(m.why_contains), std::string::npos)
        << m.name << ": reason '" << why << "' lacks '" << m.why_contains << "'";
    std::string why_back;
    EXPECT_FALSE(orig.LogicallyEquals(changed, &why_back)) << m.name << ": not symmetric";
    EXPECT_FALSE(why_back.empty()) << m.name;
    EXPECT_FALSE(orig.LogicallyEquals(changed)) << m.name << ": null why";
  }
}

TEST(SpanBatch, LogicallyEqualsReportsTheFirstDifference) {
  const SpanBatch orig = SampleBatch(1);
  SpanBatch changed = orig;
  changed.spans.flags[2] = 7;
  changed.spans.name[1] = changed.AddString("renamed");
  std::string why;
  ASSERT_FALSE(changed.LogicallyEquals(orig, &why));
  EXPECT_NE(why.find("span 1 name"), std::string::npos) << why;
  EXPECT_NE(why.find("renamed"), std::string::npos) << why;
}

// ---- ResolveServiceName ----

TEST(SpanBatch, ResolveServiceName) {
  SpanBatch b;
  auto attr = [&](std::string_view k, ValueType t, std::string_view v) {
    SpanBatch::AddAttr(b.resource_attrs, b.AddString(k), t, b.AddString(v));
  };
  // r0: service.name after another attribute.
  uint32_t r0 = b.AddResource();
  attr("host.name", ValueType::kString, "h1");
  attr("service.name", ValueType::kString, "checkout");
  b.resources.attrs[r0].end = static_cast<uint32_t>(b.resource_attrs.size());
  // r1: no service.name at all.
  uint32_t r1 = b.AddResource();
  attr("service.namespace", ValueType::kString, "shop");
  b.resources.attrs[r1].end = static_cast<uint32_t>(b.resource_attrs.size());
  // r2: service.name that is not a string, then a string one.
  uint32_t r2 = b.AddResource();
  attr("service.name", ValueType::kInt, "42");
  attr("service.name", ValueType::kString, "second");
  attr("service.name", ValueType::kString, "third");
  b.resources.attrs[r2].end = static_cast<uint32_t>(b.resource_attrs.size());
  // r3: only a non-string service.name.
  uint32_t r3 = b.AddResource();
  attr("service.name", ValueType::kArray, "[\"x\"]");
  b.resources.attrs[r3].end = static_cast<uint32_t>(b.resource_attrs.size());
  // r4: empty range, while other resources' attributes hold service.name.
  uint32_t r4 = b.AddResource();

  for (uint32_t r : {r0, r1, r2, r3, r4}) b.ResolveServiceName(r);
  EXPECT_EQ(b.Str(b.resources.service_name[r0]), "checkout");
  // Without a usable service.name, Jaeger's names; the first service.name decides.
  EXPECT_EQ(b.Str(b.resources.service_name[r1]), "missing-service-name");
  EXPECT_EQ(b.Str(b.resources.service_name[r2]), "service-name-wrong-type");
  EXPECT_EQ(b.Str(b.resources.service_name[r3]), "service-name-wrong-type");
  EXPECT_EQ(b.Str(b.resources.service_name[r4]), "missing-service-name");
}

TEST(SpanBatch, SampleBatchServiceNames) {
  const SpanBatch b = SampleBatch(1);
  EXPECT_EQ(b.Str(b.resources.service_name[0]), "frontend");
  EXPECT_EQ(b.Str(b.resources.service_name[1]), "db");
}

// ---- hex ----

TEST(SpanBatch, ToHex) {
  EXPECT_EQ(ToHex(nullptr, 0), "");
  const std::array<uint8_t, 4> bytes{0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(ToHex(bytes), "000fa0ff");
  TraceId t{};
  EXPECT_EQ(ToHex(t), std::string(32, '0'));
  SpanId s{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  EXPECT_EQ(ToHex(s), "0123456789abcdef");
}

TEST(SpanBatch, FromHexRoundTrip) {
  for (uint8_t seed : {0, 1, 7, 200}) {
    const TraceId t = MakeTraceId(seed);
    TraceId back{};
    ASSERT_TRUE(FromHex(ToHex(t), back.data(), back.size()));
    EXPECT_EQ(back, t);
  }
  SpanId s{};
  ASSERT_TRUE(FromHex("0123456789ABCDEF", s.data(), s.size()));  // uppercase
  EXPECT_EQ(ToHex(s), "0123456789abcdef");
  ASSERT_TRUE(FromHex("aBcDeF0123456789", s.data(), s.size()));  // mixed
  EXPECT_EQ(ToHex(s), "abcdef0123456789");
  EXPECT_TRUE(FromHex("", s.data(), 0));
}

TEST(SpanBatch, FromHexRejectsBadInput) {
  for (std::string_view bad :
       {std::string_view(""), std::string_view("0123456789abcde"),  // 15
        std::string_view("0123456789abcdef0"),                      // 17
        std::string_view("0123456789abcdeg"), std::string_view("0x23456789abcdef"),
        std::string_view("0123456789abcde "), std::string_view(" 123456789abcdef"),
        std::string_view("-123456789abcdef"), std::string_view("0123456789abcd\0f", 16),
        std::string_view("01234567 9abcdef"),
        std::string_view("\xff\xff\xff\xff\xff\xff\xff\xff"
                         "\xff\xff\xff\xff\xff\xff\xff\xff")}) {
    SpanId s{};
    EXPECT_FALSE(FromHex(bad, s.data(), s.size())) << "'" << bad << "'";
  }
}

TEST(SpanBatch, IsZero) {
  TraceId t{};
  EXPECT_TRUE(IsZero(t));
  t[15] = 1;
  EXPECT_FALSE(IsZero(t));
  EXPECT_FALSE(IsZero(MakeSpanId(0)));
}

// ---- MemoryBytes ----

TEST(SpanBatch, MemoryBytesGrowsWithContent) {
  SpanBatch b;
  const size_t empty = b.MemoryBytes();
  uint32_t r = b.AddResource();
  uint32_t s = b.AddScope();
  b.AddSpan(r, s);
  const size_t one_span = b.MemoryBytes();
  EXPECT_GT(one_span, empty);
  // Each span costs at least its fixed-size columns.
  const size_t per_span_min = sizeof(TraceId) + 2 * sizeof(SpanId) + 2 * sizeof(uint64_t);
  for (int i = 0; i < 1000; ++i) b.AddSpan(r, s);
  EXPECT_GE(b.MemoryBytes(), one_span + 1000 * per_span_min);

  const size_t before_string = b.MemoryBytes();
  b.AddString(std::string(1 << 20, 'x'));
  // The arena was empty (a short-string buffer of a few bytes): it now holds 1 MiB.
  EXPECT_GE(b.MemoryBytes(), before_string + (1u << 20) - 32);

  const size_t before_attrs = b.MemoryBytes();
  for (int i = 0; i < 1000; ++i) {
    SpanBatch::AddAttr(b.span_attrs, StrRef{}, ValueType::kEmpty, StrRef{});
  }
  EXPECT_GE(b.MemoryBytes(), before_attrs + 1000 * (2 * sizeof(StrRef) + sizeof(ValueType)));

  const size_t before_events = b.MemoryBytes();
  for (int i = 0; i < 100; ++i) {
    b.AddEvent();
    b.AddLink();
  }
  EXPECT_GT(b.MemoryBytes(), before_events);
}

TEST(SpanBatch, MemoryBytesCountsCapacityAndOfACopy) {
  const SpanBatch sample = SampleBatch(4);
  const size_t m = sample.MemoryBytes();
  EXPECT_GT(m, 0u);
  SpanBatch bigger = sample;
  bigger.Append(sample);
  EXPECT_GT(bigger.MemoryBytes(), m);
  // Reserving capacity counts even before it is used.
  SpanBatch reserved;
  const size_t base = reserved.MemoryBytes();
  reserved.spans.start_ns.reserve(10000);
  EXPECT_GE(reserved.MemoryBytes(), base + 10000 * sizeof(uint64_t));
}

TEST(SpanKindNames, JaegerAndOtlpSpellings) {
  EXPECT_EQ(SpanKindName(static_cast<uint8_t>(SpanKind::kServer)), "server");
  EXPECT_EQ(SpanKindName(static_cast<uint8_t>(SpanKind::kConsumer)), "consumer");
  EXPECT_EQ(SpanKindName(0), "");
  EXPECT_EQ(SpanKindName(200), "");
  uint8_t kind = 99;
  for (uint8_t k = 0; k <= 5; ++k) {
    ASSERT_TRUE(ParseSpanKind(SpanKindName(k), &kind)) << int{k};
    EXPECT_EQ(kind, k);
  }
  ASSERT_TRUE(ParseSpanKind("SPAN_KIND_CLIENT", &kind));
  EXPECT_EQ(kind, static_cast<uint8_t>(SpanKind::kClient));
  ASSERT_TRUE(ParseSpanKind("Producer", &kind));
  EXPECT_EQ(kind, static_cast<uint8_t>(SpanKind::kProducer));
  ASSERT_TRUE(ParseSpanKind("unspecified", &kind));
  EXPECT_EQ(kind, 0);
  for (std::string_view bad : {"serverx", "span_kind_", "SPAN_KIND_FOO", " server", "1"}) {
    EXPECT_FALSE(ParseSpanKind(bad, &kind)) << bad;
  }
}

}  // namespace
}  // namespace spanhouse

namespace spanhouse {
namespace {

TEST(SpanBatch, ACopySharesTheSourceAndOutlivesTheOriginal) {
  auto original = std::make_unique<SpanBatch>();
  std::string body = "service-a/GET /cart";
  ASSERT_TRUE(original->AdoptSource(body));
  const std::string_view src = original->source();
  const StrRef service = original->RefString(src.substr(0, 9));
  const StrRef route = original->RefString(src.substr(10));
  const StrRef elsewhere = original->RefString("not in the body");
  EXPECT_NE(service.off & SpanBatch::kSourceBit, 0u);
  EXPECT_EQ(elsewhere.off & SpanBatch::kSourceBit, 0u);
  SpanBatch copy = *original;
  EXPECT_EQ(copy.source().data(), src.data());  // shared, not copied
  original.reset();
  EXPECT_EQ(copy.Str(service), "service-a");
  EXPECT_EQ(copy.Str(route), "GET /cart");
  EXPECT_EQ(copy.Str(elsewhere), "not in the body");
  // A batch without a source refers to nothing in one, an empty string included.
  SpanBatch none;
  EXPECT_EQ(none.RefString(std::string_view()).off & SpanBatch::kSourceBit, 0u);
  std::string second = "x";
  EXPECT_FALSE(copy.AdoptSource(second));  // one source per batch
}

}  // namespace
}  // namespace spanhouse

namespace spanhouse {
namespace {

// What tells spans with the same ids apart is in the content key: its fields,
// its resource and how many attributes it has.
TEST(SpanContentKey, EveryFieldChangesIt) {
  const SpanBatch base = testdata::SampleBatch(1);
  std::vector<SpanContentKey> want;
  SpanContentKeys(base, &want);
  ASSERT_EQ(want.size(), 3u);
  EXPECT_NE(want[0].content, want[1].content);
  const std::vector<std::function<void(SpanBatch&)>> changes = {
      [](SpanBatch& b) { b.spans.kind[0] ^= 1; },
      [](SpanBatch& b) { b.spans.start_ns[0] += 1; },
      [](SpanBatch& b) { b.spans.end_ns[0] += 1; },
      [](SpanBatch& b) { b.spans.status_code[0] ^= 1; },
      [](SpanBatch& b) { b.spans.flags[0] ^= 1; },
      [](SpanBatch& b) { b.spans.parent_span_id[0][0] ^= 1; },
      [](SpanBatch& b) { b.spans.name[0] = b.AddString("other"); },
      [](SpanBatch& b) { b.spans.resource[0] = 1; },
      [](SpanBatch& b) { b.spans.attrs[0].end -= 1; },
      [](SpanBatch& b) { b.spans.status_message[0] = b.AddString("failed"); },
  };
  for (size_t c = 0; c < changes.size(); ++c) {
    SpanBatch b;
    b.Append(base);
    changes[c](b);
    std::vector<SpanContentKey> got;
    SpanContentKeys(b, &got);
    EXPECT_NE(got[0].content, want[0].content) << "change " << c;
    EXPECT_EQ(got[1], want[1]) << "change " << c;
  }
}

TEST(SpanBatch, DropRepeatedSpansKeepsOneOfEachAndBothHalvesOfASharedSpan) {
  const SpanBatch one = testdata::SampleBatch(2);
  SpanBatch b;
  b.Append(one);
  b.Append(one);
  b.Append(one);
  // A shared span: same ids as span 0, another kind.
  SpanBatch shared;
  shared.AppendSpans(one, nullptr, 1);
  shared.spans.kind[0] = static_cast<uint8_t>(SpanKind::kClient);
  b.Append(shared);
  EXPECT_EQ(DropRepeatedSpans(&b), 12u);
  ASSERT_EQ(b.span_count(), 7u);
  SpanBatch first;
  first.AppendSpans(b, nullptr, 6);
  std::string why;
  EXPECT_TRUE(first.LogicallyEquals(one, &why)) << why;  // the first copies, in order
  EXPECT_EQ(b.spans.kind[6], static_cast<uint8_t>(SpanKind::kClient));
  EXPECT_EQ(DropRepeatedSpans(&b), 0u);
}

}  // namespace
}  // namespace spanhouse
