// Tests of the Zipkin v2 decoders (JSON and proto3) and their mapping onto the
// span model. Requests are written with testdata/zipkin_spans.h, which encodes
// one list of spans both ways, or by hand where the bytes matter.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "codec/zipkin.h"
#include "model/span_batch.h"
#include "testdata/attrs.h"
#include "testdata/pb.h"
#include "testdata/zipkin_spans.h"

namespace spanhouse::codec {
namespace {

using testdata::Attr;
using testdata::Attrs;
using testdata::Pb;
using testdata::ZAnnotation;
using testdata::ZEndpoint;
using testdata::ZipkinJson;
using testdata::ZipkinProto;
using testdata::ZSpan;

// ---- helpers ----

std::vector<Attr> SpanAttrs(const SpanBatch& b, uint32_t i) {
  return Attrs(b, b.span_attrs, b.spans.attrs[i]);
}

Attr S(std::string key, std::string value) {
  return {std::move(key), ValueType::kString, std::move(value)};
}
Attr I(std::string key, std::string value) {
  return {std::move(key), ValueType::kInt, std::move(value)};
}
Attr B(std::string key) {
  return {std::move(key), ValueType::kBool, "true"};
}

constexpr std::string_view kTrace = "5b8efff798038103d269b633813fc60c";
constexpr std::string_view kId = "eee19b7ec3c1b174";
constexpr uint64_t kStartUs = 1700000000123456;

ZSpan Minimal() {
  ZSpan s;
  s.trace_id = kTrace;
  s.id = kId;
  return s;
}

enum class Enc { kJson, kProto };

std::string Encode(Enc enc, const std::vector<ZSpan>& spans) {
  return enc == Enc::kJson ? ZipkinJson(spans) : ZipkinProto(spans);
}

Status Decode(Enc enc, std::string_view body, SpanBatch& b) {
  return enc == Enc::kJson ? DecodeZipkinJson(body, b) : DecodeZipkinProto(body, b);
}

// Every Range of the batch lies inside its child column, every index inside its table.
void ExpectConsistent(const SpanBatch& b) {
  auto in = [](Range r, size_t n) { return r.begin <= r.end && r.end <= n; };
  for (size_t i = 0; i < b.span_count(); ++i) {
    EXPECT_LT(b.spans.resource[i], b.resources.attrs.size());
    EXPECT_LT(b.spans.scope[i], b.scopes.attrs.size());
    EXPECT_TRUE(in(b.spans.attrs[i], b.span_attrs.size()));
    EXPECT_TRUE(in(b.spans.events[i], b.events.time_ns.size()));
    EXPECT_EQ(b.spans.links[i].size(), 0u);
  }
  for (size_t i = 0; i < b.resources.attrs.size(); ++i) {
    EXPECT_TRUE(in(b.resources.attrs[i], b.resource_attrs.size()));
  }
}

// The spans decoded from both encodings; the test fails unless they agree.
class ZipkinBoth : public ::testing::TestWithParam<Enc> {
 protected:
  SpanBatch Decoded(const std::vector<ZSpan>& spans) {
    SpanBatch b;
    const std::string body = Encode(GetParam(), spans);
    const Status st = Decode(GetParam(), body, b);
    EXPECT_TRUE(st.ok()) << st.message() << "\n" << body;
    ExpectConsistent(b);
    return b;
  }
  SpanBatch One(const ZSpan& s) {
    SpanBatch b = Decoded({s});
    EXPECT_EQ(b.span_count(), 1u);
    return b;
  }
};

INSTANTIATE_TEST_SUITE_P(Encodings, ZipkinBoth, ::testing::Values(Enc::kJson, Enc::kProto),
                         [](const auto& info) {
                           return std::string(info.param == Enc::kJson ? "Json" : "Proto");
                         });

// ---- the mapping, field by field, in both encodings ----

TEST_P(ZipkinBoth, EveryField) {
  const SpanBatch b = One(testdata::ZipkinFullSpan());

  EXPECT_EQ(ToHex(b.spans.trace_id[0]), kTrace);
  EXPECT_EQ(ToHex(b.spans.span_id[0]), kId);
  EXPECT_EQ(ToHex(b.spans.parent_span_id[0]), "eee19b7ec3c1b173");
  EXPECT_EQ(b.Str(b.spans.name[0]), "get /cart");
  EXPECT_EQ(b.spans.kind[0], static_cast<uint8_t>(SpanKind::kServer));
  EXPECT_EQ(b.spans.start_ns[0], kStartUs * 1000);
  EXPECT_EQ(b.spans.end_ns[0], (kStartUs + 2500) * 1000);
  EXPECT_EQ(b.spans.flags[0], 0u);
  EXPECT_EQ(b.Str(b.spans.trace_state[0]), "");
  EXPECT_EQ(b.spans.status_code[0], static_cast<uint8_t>(StatusCodeOtlp::kUnset));

  const uint32_t r = b.spans.resource[0];
  EXPECT_EQ(Attrs(b, b.resource_attrs, b.resources.attrs[r]),
            (std::vector<Attr>{S("service.name", "checkout")}));
  EXPECT_EQ(b.Str(b.resources.service_name[r]), "checkout");
  EXPECT_EQ(b.Str(b.scopes.name[b.spans.scope[0]]), "");

  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{
                                 S("http.method", "GET"),
                                 S("http.path", "/cart"),
                                 S("network.local.address", "10.0.0.1"),
                                 I("network.local.port", "8080"),
                                 S("service.peer.name", "frontend"),
                                 S("network.peer.address", "2001:db8::c001"),
                                 I("network.peer.port", "41234"),
                                 B("zipkin.debug"),
                                 B("zipkin.shared"),
                             }));

  const Range ev = b.spans.events[0];
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(b.events.time_ns[ev.begin], (kStartUs + 10) * 1000);
  EXPECT_EQ(b.Str(b.events.name[ev.begin]), "cache.miss");
  EXPECT_EQ(b.events.time_ns[ev.begin + 1], (kStartUs + 20) * 1000);
  EXPECT_EQ(b.Str(b.events.name[ev.begin + 1]), "ws");
  EXPECT_EQ(b.events.attrs[ev.begin].size(), 0u);
}

TEST_P(ZipkinBoth, Kinds) {
  const std::vector<std::pair<std::string, SpanKind>> cases = {
      {"CLIENT", SpanKind::kClient},     {"SERVER", SpanKind::kServer},
      {"PRODUCER", SpanKind::kProducer}, {"CONSUMER", SpanKind::kConsumer},
      {"", SpanKind::kInternal},  // absent: a local span
  };
  for (const auto& [kind, want] : cases) {
    ZSpan s = Minimal();
    s.kind = kind;
    const SpanBatch b = One(s);
    EXPECT_EQ(b.spans.kind[0], static_cast<uint8_t>(want)) << kind;
  }
}

TEST_P(ZipkinBoth, SpanKindTagWhenKindIsAbsent) {
  ZSpan s = Minimal();
  s.tags = {{"span.kind", "client"}};
  SpanBatch b = One(s);
  EXPECT_EQ(b.spans.kind[0], static_cast<uint8_t>(SpanKind::kClient));
  EXPECT_TRUE(SpanAttrs(b, 0).empty());

  s.kind = "SERVER";  // the kind field wins; the tag is still consumed
  b = One(s);
  EXPECT_EQ(b.spans.kind[0], static_cast<uint8_t>(SpanKind::kServer));
  EXPECT_TRUE(SpanAttrs(b, 0).empty());

  s.kind = "";
  s.tags = {{"span.kind", "sideways"}};  // not a kind: kept
  b = One(s);
  EXPECT_EQ(b.spans.kind[0], static_cast<uint8_t>(SpanKind::kInternal));
  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{S("span.kind", "sideways")}));
}

TEST_P(ZipkinBoth, Times) {
  ZSpan s = Minimal();
  s.timestamp = kStartUs;  // no duration: ends where it starts
  SpanBatch b = One(s);
  EXPECT_EQ(b.spans.start_ns[0], kStartUs * 1000);
  EXPECT_EQ(b.spans.end_ns[0], kStartUs * 1000);

  s.timestamp = 0;  // absent (incomplete span): start 0, as the collector does
  s.duration = 7;
  b = One(s);
  EXPECT_EQ(b.spans.start_ns[0], 0u);
  EXPECT_EQ(b.spans.end_ns[0], 7000u);

  s.timestamp = UINT64_MAX / 1000 - 1;  // the largest time that fits, in nanoseconds
  s.duration = 1;
  b = One(s);
  EXPECT_EQ(b.spans.end_ns[0], UINT64_MAX / 1000 * 1000);
}

TEST_P(ZipkinBoth, Ids64And128Bit) {
  ZSpan s = Minimal();
  s.trace_id = "463ac35c9f6413ad";  // 64-bit: left-padded to 128
  const SpanBatch b64 = One(s);
  EXPECT_EQ(ToHex(b64.spans.trace_id[0]), "0000000000000000463ac35c9f6413ad");

  s.trace_id = "0000000000000000463ac35c9f6413ad";  // the same id in 128 bits
  const SpanBatch b128 = One(s);
  std::string why;
  EXPECT_TRUE(b64.LogicallyEquals(b128, &why)) << why;

  s.trace_id = "48485a3953bb6124463ac35c9f6413ad";
  const SpanBatch full = One(s);
  EXPECT_EQ(ToHex(full.spans.trace_id[0]), "48485a3953bb6124463ac35c9f6413ad");
}

TEST_P(ZipkinBoth, ParentEqualToIdIsRoot) {
  ZSpan s = Minimal();
  s.parent_id = kId;
  const SpanBatch b = One(s);
  EXPECT_TRUE(IsZero(b.spans.parent_span_id[0]));
}

TEST_P(ZipkinBoth, SharedSpanKeepsItsIdAndIsMarked) {
  // B3 "shared span": the server side of an RPC reports the client's span id.
  ZSpan client = Minimal();
  client.kind = "CLIENT";
  client.parent_id = "0000000000000001";
  client.local = ZEndpoint{"frontend", "", "", 0};
  ZSpan server = client;
  server.kind = "SERVER";
  server.shared = true;
  server.local = ZEndpoint{"backend", "", "", 0};
  const SpanBatch b = Decoded({client, server});
  ASSERT_EQ(b.span_count(), 2u);
  EXPECT_EQ(b.spans.span_id[0], b.spans.span_id[1]);
  EXPECT_EQ(b.spans.parent_span_id[0], b.spans.parent_span_id[1]);
  EXPECT_TRUE(SpanAttrs(b, 0).empty());
  EXPECT_EQ(SpanAttrs(b, 1), (std::vector<Attr>{B("zipkin.shared")}));
  EXPECT_EQ(b.Str(b.resources.service_name[b.spans.resource[1]]), "backend");
}

TEST_P(ZipkinBoth, OneResourcePerServiceName) {
  std::vector<ZSpan> spans;
  for (const char* service : {"a", "b", "a", "", "b", ""}) {
    ZSpan s = Minimal();
    if (*service != '\0') s.local = ZEndpoint{service, "", "", 0};
    spans.push_back(s);
  }
  spans[3].local = ZEndpoint{"", "10.0.0.9", "", 0};  // an endpoint without a service name
  const SpanBatch b = Decoded(spans);
  ASSERT_EQ(b.span_count(), 6u);
  EXPECT_EQ(b.resources.attrs.size(), 3u);
  EXPECT_EQ(b.spans.resource[0], b.spans.resource[2]);
  EXPECT_EQ(b.spans.resource[1], b.spans.resource[4]);
  EXPECT_EQ(b.spans.resource[3], b.spans.resource[5]);
  EXPECT_NE(b.spans.resource[0], b.spans.resource[1]);
  // No service name: a resource without attributes, stored and listed as Jaeger names it.
  const uint32_t none = b.spans.resource[3];
  EXPECT_EQ(b.resources.attrs[none].size(), 0u);
  EXPECT_EQ(b.Str(b.resources.service_name[none]), "missing-service-name");
  EXPECT_EQ(b.Str(b.resources.service_name[b.spans.resource[1]]), "b");
}

TEST_P(ZipkinBoth, Endpoints) {
  ZSpan s = Minimal();
  s.local = ZEndpoint{"svc", "192.168.99.101", "2001:db8::1", 0};  // both: ipv4 wins; no port
  s.remote = ZEndpoint{"", "", "::ffff:10.1.2.3", -5};             // negative port: none
  SpanBatch b = One(s);
  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{S("network.local.address", "192.168.99.101"),
                                                S("network.peer.address", "::ffff:10.1.2.3")}));

  // A tag of the same key wins over the endpoint's value.
  s.remote = ZEndpoint{"db", "10.0.0.2", "", 5432};
  s.tags = {{"service.peer.name", "postgres"}, {"network.peer.port", "6432"}};
  b = One(s);
  EXPECT_EQ(SpanAttrs(b, 0),
            (std::vector<Attr>{S("service.peer.name", "postgres"), S("network.peer.port", "6432"),
                               S("network.local.address", "192.168.99.101"),
                               S("network.peer.address", "10.0.0.2")}));
}

TEST_P(ZipkinBoth, ErrorTag) {
  struct Case {
    std::string value;
    StatusCodeOtlp code;
    std::string message;
    bool kept;  // still an attribute
  };
  const std::vector<Case> cases = {
      {"true", StatusCodeOtlp::kError, "", false},
      {"", StatusCodeOtlp::kError, "", false},
      {"connection refused", StatusCodeOtlp::kError, "connection refused", false},
      {"500", StatusCodeOtlp::kError, "500", false},
      {"false", StatusCodeOtlp::kUnset, "", true},
  };
  for (const Case& c : cases) {
    ZSpan s = Minimal();
    s.tags = {{"error", c.value}, {"http.status_code", "500"}};
    const SpanBatch b = One(s);
    EXPECT_EQ(b.spans.status_code[0], static_cast<uint8_t>(c.code)) << c.value;
    EXPECT_EQ(b.Str(b.spans.status_message[0]), c.message) << c.value;
    std::vector<Attr> want;
    if (c.kept) want.push_back(S("error", c.value));
    want.push_back(S("http.status_code", "500"));
    EXPECT_EQ(SpanAttrs(b, 0), want) << c.value;
  }
}

TEST_P(ZipkinBoth, OtelStatusTags) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> tags;
    StatusCodeOtlp code;
    std::string message;
    std::vector<Attr> attrs;
  };
  const std::vector<Case> cases = {
      // What the OTel spec's Zipkin exporter writes for an ERROR status.
      {{{"otel.status_code", "ERROR"}, {"error", "timeout"}},
       StatusCodeOtlp::kError,
       "timeout",
       {}},
      {{{"otel.status_code", "OK"}}, StatusCodeOtlp::kOk, "", {}},
      {{{"otel.status_code", "UNSET"}}, StatusCodeOtlp::kUnset, "", {}},
      {{{"otel.status_description", "bad input"}, {"otel.status_code", "STATUS_CODE_ERROR"}},
       StatusCodeOtlp::kError,
       "bad input",
       {}},
      // The description wins over the error tag's value.
      {{{"otel.status_code", "ERROR"}, {"otel.status_description", "d"}, {"error", "e"}},
       StatusCodeOtlp::kError,
       "d",
       {}},
      // An error tag makes an OK status an error.
      {{{"otel.status_code", "OK"}, {"error", "true"}}, StatusCodeOtlp::kError, "", {}},
      // Unknown code: kept; a description without a code: kept (after the other tags).
      {{{"otel.status_code", "MAYBE"}, {"otel.status_description", "x"}, {"k", "v"}},
       StatusCodeOtlp::kUnset,
       "",
       {S("otel.status_code", "MAYBE"), S("k", "v"), S("otel.status_description", "x")}},
  };
  for (const Case& c : cases) {
    ZSpan s = Minimal();
    s.tags = c.tags;
    const SpanBatch b = One(s);
    EXPECT_EQ(b.spans.status_code[0], static_cast<uint8_t>(c.code)) << c.tags[0].second;
    EXPECT_EQ(b.Str(b.spans.status_message[0]), c.message) << c.tags[0].second;
    EXPECT_EQ(SpanAttrs(b, 0), c.attrs) << c.tags[0].second;
  }
}

TEST_P(ZipkinBoth, ScopeFromTags) {
  std::vector<ZSpan> spans(5, Minimal());
  spans[0].tags = {{"otel.scope.name", "io.opentelemetry.http"}, {"otel.scope.version", "1.2"}};
  spans[1].tags = {{"otel.library.name", "io.opentelemetry.http"},
                   {"otel.library.version", "1.2"}};  // the deprecated names: the same scope
  spans[2].tags = {{"otel.library.name", "old"}, {"otel.scope.name", "new"}};  // scope.* wins
  spans[4].tags = {{"otel.scope.name", "io.opentelemetry.http"}};              // no version
  const SpanBatch b = Decoded(spans);
  ASSERT_EQ(b.span_count(), 5u);
  auto name = [&](uint32_t i) { return std::string(b.Str(b.scopes.name[b.spans.scope[i]])); };
  auto version = [&](uint32_t i) { return std::string(b.Str(b.scopes.version[b.spans.scope[i]])); };
  EXPECT_EQ(name(0), "io.opentelemetry.http");
  EXPECT_EQ(version(0), "1.2");
  EXPECT_EQ(b.spans.scope[0], b.spans.scope[1]);
  EXPECT_EQ(name(2), "new");
  EXPECT_EQ(name(3), "");
  EXPECT_EQ(name(4), "io.opentelemetry.http");
  EXPECT_EQ(version(4), "");
  EXPECT_NE(b.spans.scope[4], b.spans.scope[0]);
  EXPECT_EQ(b.scopes.name.size(), 4u);
  for (uint32_t i = 0; i < 5; ++i) EXPECT_TRUE(SpanAttrs(b, i).empty()) << i;
}

TEST_P(ZipkinBoth, TraceStateTag) {
  ZSpan s = Minimal();
  s.tags = {{"w3c.tracestate", "rojo=00f067aa0ba902b7"}};
  const SpanBatch b = One(s);
  EXPECT_EQ(b.Str(b.spans.trace_state[0]), "rojo=00f067aa0ba902b7");
  EXPECT_TRUE(SpanAttrs(b, 0).empty());
}

TEST_P(ZipkinBoth, DuplicateTagsAreKept) {
  ZSpan s = Minimal();
  s.tags = {{"k", "1"}, {"k", "2"}, {"error", "first"}, {"error", "second"}};
  const SpanBatch b = One(s);
  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{S("k", "1"), S("k", "2")}));
  EXPECT_EQ(b.Str(b.spans.status_message[0]), "second");  // a special tag: the last counts
}

TEST_P(ZipkinBoth, EmptyList) {
  const SpanBatch b = Decoded({});
  EXPECT_EQ(b.span_count(), 0u);
}

TEST_P(ZipkinBoth, AppendsToABatchThatHoldsSpans) {
  ZSpan s = Minimal();
  s.local = ZEndpoint{"checkout", "", "", 0};
  s.tags = {{"k", "v"}};
  s.annotations = {{kStartUs, "a"}};
  SpanBatch alone = One(s);

  SpanBatch b = One(s);
  const std::string body = Encode(GetParam(), {s});
  ASSERT_TRUE(Decode(GetParam(), body, b).ok());
  ASSERT_EQ(b.span_count(), 2u);
  ExpectConsistent(b);
  SpanBatch twice = alone;
  twice.Append(alone);
  std::string why;
  EXPECT_TRUE(b.LogicallyEquals(twice, &why)) << why;
  EXPECT_NE(b.spans.resource[0], b.spans.resource[1]);  // each request its own resources
}

// ---- JSON and protobuf give the same spans ----

// Random spans over every field, with the mapping's special tags among the ordinary ones.
std::vector<ZSpan> RandomSpans(std::mt19937_64& rng) {
  auto pick = [&](auto... xs) {
    const std::vector<std::string> v = {xs...};
    return v[rng() % v.size()];
  };
  auto hex = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += "0123456789abcdef"[rng() % 16];
    return s;
  };
  auto endpoint = [&]() -> std::optional<ZEndpoint> {
    if (rng() % 3 == 0) return std::nullopt;
    ZEndpoint e;
    e.service_name = pick("", "checkout", "cart", "Frontend", "ünïcode");
    e.ipv4 = pick("", "10.0.0.1", "192.168.1.254", "0.0.0.0");
    e.ipv6 = pick("", "2001:db8::c001", "::1", "fe80::1:2:3:4", "::ffff:1.2.3.4");
    e.port = static_cast<int32_t>(rng() % 4 == 0 ? -1 : rng() % 70000 % 65536);
    return e;
  };
  std::vector<ZSpan> spans(rng() % 6);
  for (ZSpan& s : spans) {
    s.trace_id = hex(rng() % 2 == 0 ? 16 : 32);
    s.id = hex(16);
    s.parent_id = rng() % 3 == 0 ? "" : (rng() % 5 == 0 ? s.id : hex(16));
    s.kind = pick("", "CLIENT", "SERVER", "PRODUCER", "CONSUMER");
    s.name = pick("", "get", "post /api/{id}", "quote\"and\\slash", "tab\there");
    s.timestamp = rng() % 4 == 0 ? 0 : kStartUs + rng() % 1000000;
    s.duration = rng() % 100000;
    s.local = endpoint();
    s.remote = endpoint();
    for (uint64_t k = rng() % 4; k > 0; --k) {
      s.annotations.push_back({kStartUs + rng() % 1000, pick("", "ws", "wr", "retry")});
    }
    for (uint64_t k = rng() % 8; k > 0; --k) {
      const std::string key =
          pick("http.method", "error", "otel.status_code", "otel.status_description",
               "otel.scope.name", "otel.library.version", "w3c.tracestate", "span.kind",
               "network.peer.address", "service.peer.name", "k");
      const std::string value = pick("", "true", "false", "OK", "ERROR", "client", "x", "GET");
      s.tags.emplace_back(key, value);
    }
    s.debug = rng() % 4 == 0;
    s.shared = rng() % 4 == 0;
  }
  return spans;
}

TEST(ZipkinEncodings, SameSpansFromJsonAndProto) {
  std::mt19937_64 rng(20240611);
  for (int round = 0; round < 500; ++round) {
    const std::vector<ZSpan> spans = RandomSpans(rng);
    const std::string json = ZipkinJson(spans);
    SpanBatch from_json, from_proto;
    const Status sj = DecodeZipkinJson(json, from_json);
    const Status sp = DecodeZipkinProto(ZipkinProto(spans), from_proto);
    ASSERT_TRUE(sj.ok()) << sj.message() << "\n" << json;
    ASSERT_TRUE(sp.ok()) << sp.message() << "\n" << json;
    ASSERT_EQ(from_json.span_count(), spans.size());
    std::string why;
    ASSERT_TRUE(from_json.LogicallyEquals(from_proto, &why)) << why << "\n" << json;
  }
}

// ---- JSON specifics ----

SpanBatch DecodeJsonOk(std::string_view body) {
  SpanBatch b;
  const Status st = DecodeZipkinJson(body, b);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << body;
  return b;
}

TEST(ZipkinJson, ShortAndUppercaseIdsNullsAndUnknownMembers) {
  const SpanBatch b = DecodeJsonOk(R"([{
    "traceId": "ABC", "id": "1", "parentId": null, "name": null, "future": {"x": [1]},
    "localEndpoint": {"serviceName": "svc", "ipv4": "", "ipv6": "", "port": 0, "zone": "eu"},
    "annotations": [{"value": "no time"}, {"timestamp": 5}],
    "tags": {}
  }])");
  ASSERT_EQ(b.span_count(), 1u);
  EXPECT_EQ(ToHex(b.spans.trace_id[0]), "00000000000000000000000000000abc");
  EXPECT_EQ(ToHex(b.spans.span_id[0]), "0000000000000001");
  EXPECT_TRUE(IsZero(b.spans.parent_span_id[0]));
  EXPECT_TRUE(SpanAttrs(b, 0).empty());
  const Range ev = b.spans.events[0];
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(b.Str(b.events.name[ev.begin]), "no time");
  EXPECT_EQ(b.events.time_ns[ev.begin], 0u);
  EXPECT_EQ(b.Str(b.events.name[ev.begin + 1]), "");
  EXPECT_EQ(b.events.time_ns[ev.begin + 1], 5000u);
}

TEST(ZipkinJson, NumberAndBooleanTagValuesAreTheirText) {
  const SpanBatch b =
      DecodeJsonOk(R"([{"traceId":"1","id":"2","timestamp":1.5e3,"tags":{"a":200,"b":-1,"c":2.5,)"
                   R"("d":18446744073709551615,"e":true,"error":true}}])");
  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{S("a", "200"), S("b", "-1"), S("c", "2.5"),
                                                S("d", "18446744073709551615"), S("e", "true")}));
  EXPECT_EQ(b.spans.status_code[0], static_cast<uint8_t>(StatusCodeOtlp::kError));
  EXPECT_EQ(b.spans.start_ns[0], 1500000u);
}

TEST(ZipkinJson, AddressesAreStoredInCanonicalForm) {
  const SpanBatch b = DecodeJsonOk(
      R"([{"traceId":"1","id":"2","remoteEndpoint":{"ipv6":"2001:0DB8:0000:0000::0001"}}])");
  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{S("network.peer.address", "2001:db8::1")}));
}

// ---- bad input: a 400 with a message that says where ----

std::string ErrorOf(Enc enc, std::string_view body) {
  SpanBatch b;
  const Status st = Decode(enc, body, b);
  EXPECT_FALSE(st.ok()) << body;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << body;
  return st.message();
}

std::string JsonError(std::string_view body) {
  return ErrorOf(Enc::kJson, body);
}

// A one-span JSON request with the given members after traceId and id.
std::string JsonSpan(std::string_view members) {
  return R"([{"traceId":"5b8efff798038103d269b633813fc60c","id":"eee19b7ec3c1b174",)" +
         std::string(members) + "}]";
}

TEST(ZipkinJson, BadInput) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[", "invalid JSON"},
      {R"({"spans":[]})", "expected a JSON array of spans (Zipkin v2), got an object"},
      {R"([1])", "span 0: expected an object, got a number"},
      {R"([{"id":"1"}])", "span 0: missing traceId"},
      {R"([{"traceId":"1"}])", "span 0: missing id"},
      {R"([{"traceId":"1","id":"1"},{"traceId":"1"}])", "span 1: missing id"},
      {R"([{"traceId":"xyz","id":"1"}])", R"(span 0: traceId: "xyz" is not hex)"},
      {R"([{"traceId":"","id":"1"}])", "span 0: traceId: empty, expected up to 32 hex digits"},
      {R"([{"traceId":"0123456789abcdef0123456789abcdef0","id":"1"}])",
       "span 0: traceId: 33 characters, expected up to 32 hex digits"},
      {R"([{"traceId":"1","id":"0123456789abcdef0"}])",
       "span 0: id: 17 characters, expected up to 16 hex digits"},
      {R"([{"traceId":1,"id":"1"}])", "span 0: traceId: expected a string, got a number"},
      {JsonSpan(R"("parentId":"zz")"), R"(span 0: parentId: "zz" is not hex)"},
      {JsonSpan(R"("name":7)"), "span 0: name: expected a string, got a number"},
      {JsonSpan(R"("kind":"client")"),
       R"(span 0: kind: expected CLIENT, SERVER, PRODUCER or CONSUMER, got "client")"},
      {JsonSpan(R"("kind":1)"), "span 0: kind: expected a string, got a number"},
      {JsonSpan(R"("timestamp":-1)"), "span 0: timestamp: -1 is out of range 0.."},
      {JsonSpan(R"("timestamp":"1700000000000000")"),
       "span 0: timestamp: expected an integer, got a string"},
      {JsonSpan(R"("timestamp":1.5)"), "span 0: timestamp: expected an integer, got a number"},
      {JsonSpan(R"("timestamp":18446744073709552)"),
       "span 0: timestamp: 18446744073709552 is out of range 0..18446744073709551"},
      {JsonSpan(R"("timestamp":18446744073709551,"duration":1)"),
       "span 0: timestamp + duration is past the largest time"},
      {JsonSpan(R"("duration":1e300)"), "span 0: duration: integer out of range"},
      {JsonSpan(R"("debug":"true")"), "span 0: debug: expected true or false, got a string"},
      {JsonSpan(R"("localEndpoint":[])"),
       "span 0: localEndpoint: expected an object, got an array"},
      {JsonSpan(R"("localEndpoint":{"serviceName":1})"),
       "span 0: localEndpoint.serviceName: expected a string, got a number"},
      {JsonSpan(R"("localEndpoint":{"ipv4":"10.0.0.256"})"),
       R"(span 0: localEndpoint.ipv4: "10.0.0.256" is not an IPv4 address)"},
      {JsonSpan(R"("remoteEndpoint":{"ipv4":"::1"})"),
       R"(span 0: remoteEndpoint.ipv4: "::1" is not an IPv4 address)"},
      {JsonSpan(R"("remoteEndpoint":{"ipv6":"2001:db8::g"})"),
       R"(span 0: remoteEndpoint.ipv6: "2001:db8::g" is not an IPv6 address)"},
      {JsonSpan(R"("remoteEndpoint":{"port":70000})"),
       "span 0: remoteEndpoint.port: 70000 is out of range (at most 65535)"},
      {JsonSpan(R"("remoteEndpoint":{"port":"80"})"),
       "span 0: remoteEndpoint.port: expected an integer, got a string"},
      {JsonSpan(R"("annotations":{})"), "span 0: annotations: expected an array, got an object"},
      {JsonSpan(R"("annotations":["ws"])"),
       "span 0: annotations[0]: expected an object, got a string"},
      {JsonSpan(R"("annotations":[{"timestamp":1,"value":"a"},{"timestamp":"x"}])"),
       "span 0: annotations[1].timestamp: expected an integer, got a string"},
      {JsonSpan(R"("annotations":[{"value":["a"]}])"),
       "span 0: annotations[0].value: expected a string, got an array"},
      {JsonSpan(R"("tags":[])"), "span 0: tags: expected an object, got an array"},
      {JsonSpan(R"("tags":{"http.url":{"a":1}})"),
       R"(span 0: tags["http.url"]: expected a string, got an object)"},
      {JsonSpan(R"("tags":{"k":null})"), R"(span 0: tags["k"]: expected a string, got null)"},
  };
  for (const auto& [body, want] : cases) {
    const std::string got = JsonError(body);
    EXPECT_NE(got.find(want), std::string::npos)
        << body << "\n  got:  " << got << "\n  want: " << want;
  }
}

TEST(ZipkinJson, LongTextInMessagesIsCut) {
  const std::string key(200, 'k');
  const std::string got = JsonError(JsonSpan(R"("tags":{")" + key + R"(":[]})"));
  EXPECT_NE(got.find("tags[\"" + std::string(64, 'k') + "...\"]"), std::string::npos) << got;
  EXPECT_LT(got.size(), 150u);
}

// ---- protobuf specifics ----

std::string ProtoError(const Pb& span) {
  return ErrorOf(Enc::kProto, Pb().Msg(1, span).str());
}

Pb ProtoSpan() {
  return Pb()
      .Bytes(1, testdata::zipkin_detail::HexBytes(kTrace))
      .Bytes(3, testdata::zipkin_detail::HexBytes(kId));
}

TEST(ZipkinProto, FieldOrderDoesNotMatterAndUnknownFieldsAreSkipped) {
  const Pb span = Pb().Msg(11, Pb().Bytes(2, "v").Bytes(1, "k"))  // a map entry, value first
                      .Varint(99, 1)                              // unknown
                      .Msg(8, Pb().Varint(4, 80).Bytes(1, "svc").Varint(7, 1))
                      .Bytes(3, testdata::zipkin_detail::HexBytes(kId))
                      .Fixed64(6, kStartUs)
                      .Bytes(1, testdata::zipkin_detail::HexBytes(kTrace))
                      .Msg(8, Pb().Bytes(2, std::string("\x0a\x00\x00\x01", 4)));  // merges
  SpanBatch b;
  const Status st = DecodeZipkinProto(Pb().Msg(1, span).str(), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 1u);
  EXPECT_EQ(ToHex(b.spans.trace_id[0]), kTrace);
  EXPECT_EQ(b.spans.start_ns[0], kStartUs * 1000);
  EXPECT_EQ(b.Str(b.resources.service_name[b.spans.resource[0]]), "svc");
  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{S("k", "v"), S("network.local.address", "10.0.0.1"),
                                                I("network.local.port", "80")}));
}

TEST(ZipkinProto, BadInput) {
  const std::string tid = testdata::zipkin_detail::HexBytes(kTrace);
  const std::string sid = testdata::zipkin_detail::HexBytes(kId);
  const std::vector<std::pair<Pb, std::string>> cases = {
      {Pb().Bytes(3, sid), "span 0: missing trace_id"},
      {Pb().Bytes(1, tid), "span 0: missing id"},
      {Pb().Bytes(1, tid.substr(0, 12)).Bytes(3, sid),
       "span 0: trace_id must be 8 or 16 bytes, got 12"},
      {Pb().Bytes(1, tid).Bytes(3, sid + "x"), "span 0: id must be 8 bytes, got 9"},
      {ProtoSpan().Bytes(2, "abc"), "span 0: parent_id must be empty or 8 bytes, got 3"},
      {Pb().Varint(1, 5).Bytes(3, sid),
       "wrong wire type 0 for field 1 (trace_id) in Span, expected 2"},
      {ProtoSpan().Varint(4, 5), "span 0: kind 5 is not a valid Span.Kind (0-4)"},
      {ProtoSpan().Varint(4, UINT64_MAX), "span 0: kind -1 is not a valid Span.Kind (0-4)"},
      {ProtoSpan().Fixed64(6, UINT64_MAX / 1000 + 1),
       "span 0: timestamp 18446744073709552 microseconds is past the largest time"},
      {ProtoSpan().Fixed64(6, UINT64_MAX / 1000).Varint(7, 1),
       "span 0: timestamp + duration is past the largest time"},
      {ProtoSpan().Varint(6, 1), "wrong wire type 0 for field 6 (timestamp) in Span, expected 1"},
      {ProtoSpan().Msg(8, Pb().Bytes(2, "12345")),
       "span 0: local_endpoint.ipv4 must be empty or 4 bytes, got 5"},
      {ProtoSpan().Msg(9, Pb().Bytes(3, "1234")),
       "span 0: remote_endpoint.ipv6 must be empty or 16 bytes, got 4"},
      {ProtoSpan().Msg(9, Pb().Varint(4, 70000)),
       "span 0: remote_endpoint.port 70000 is out of range (at most 65535)"},
      {ProtoSpan().Msg(10, Pb().Fixed64(1, UINT64_MAX)),
       "span 0 annotation 0: timestamp 18446744073709551615 is past the largest time"},
      {ProtoSpan().Msg(11, Pb().Varint(1, 1)),
       "wrong wire type 0 for field 1 (key) in Span.TagsEntry, expected 2"},
      {ProtoSpan().Tag(12, 3),
       "invalid wire type 3 for field 12 in Span (groups are not supported)"},
      {ProtoSpan().Tag(5, 2).PutVarint(100), "length 100 of field 5 in Span"},
  };
  for (const auto& [span, want] : cases) {
    const std::string got = ProtoError(span);
    EXPECT_NE(got.find(want), std::string::npos) << "got:  " << got << "\nwant: " << want;
  }
  // Not a ListOfSpans at all.
  EXPECT_NE(ErrorOf(Enc::kProto, std::string("\x0a\x05"
                                             "ab"))
                .find("length 5 of field 1 in ListOfSpans"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Enc::kProto, Pb().Varint(1, 1).str()).find("(spans) in ListOfSpans"),
            std::string::npos);
  // The error names the span by its number in the request.
  EXPECT_NE(ErrorOf(Enc::kProto, Pb().Msg(1, ProtoSpan()).Msg(1, Pb().Bytes(3, sid)).str())
                .find("span 1: missing trace_id"),
            std::string::npos);
}

TEST(ZipkinProto, EmptyBodyIsAnEmptyList) {
  SpanBatch b;
  ASSERT_TRUE(DecodeZipkinProto("", b).ok());
  EXPECT_EQ(b.span_count(), 0u);
}

TEST(ZipkinProto, StringsPointIntoTheSourceWhenTheBatchOwnsTheBody) {
  ZSpan s = Minimal();
  s.name = "a name long enough to matter";
  s.tags = {{"key", "value"}};
  std::string body = ZipkinProto({s});
  SpanBatch b;
  ASSERT_TRUE(b.AdoptSource(body));
  ASSERT_TRUE(DecodeZipkinProto(b.source(), b).ok());
  EXPECT_NE(b.spans.name[0].off & SpanBatch::kSourceBit, 0u);
  EXPECT_EQ(b.Str(b.spans.name[0]), "a name long enough to matter");
  EXPECT_EQ(SpanAttrs(b, 0), (std::vector<Attr>{S("key", "value")}));
}

}  // namespace
}  // namespace spanhouse::codec
