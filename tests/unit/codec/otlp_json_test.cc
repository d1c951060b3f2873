// Tests of the OTLP/JSON decoder and the JSON export response.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "codec/otlp.h"
#include "model/span_batch.h"
#include "testdata/attrs.h"

namespace spanhouse::codec {
namespace {

using namespace std::string_literals;
using testdata::Attr;
using testdata::Attrs;

// ---- helpers ----

std::string Str(const SpanBatch& b, StrRef r) {
  return std::string(b.Str(r));
}

constexpr std::string_view kTraceId = "5b8efff798038103d269b633813fc60c";
constexpr std::string_view kSpanId = "eee19b7ec3c1b174";

// A request with one span whose attribute list is `attrs` (JSON array text).
std::string OneSpan(std::string_view attrs) {
  return R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":")" + std::string(kTraceId) +
         R"(","spanId":")" + std::string(kSpanId) + R"(","attributes":)" + std::string(attrs) +
         "}]}]}]}";
}

// A request with one span whose extra members are `fields` (JSON object members).
std::string SpanWith(std::string_view fields) {
  return R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":")" + std::string(kTraceId) +
         R"(","spanId":")" + std::string(kSpanId) + "\"" + (fields.empty() ? "" : ",") +
         std::string(fields) + "}]}]}]}";
}

// Decodes a one-attribute span and returns that attribute.
Attr OneAttr(std::string_view any_value) {
  SpanBatch b;
  std::string body = OneSpan(R"([{"key":"k","value":)" + std::string(any_value) + "}]");
  Status st = DecodeOtlpJson(body, b);
  EXPECT_TRUE(st.ok()) << any_value << ": " << st.message();
  if (!st.ok() || b.span_count() != 1) return {};
  auto attrs = Attrs(b, b.span_attrs, b.spans.attrs[0]);
  EXPECT_EQ(attrs.size(), 1u);
  return attrs.empty() ? Attr{} : attrs[0];
}

std::string ErrorOf(std::string_view body) {
  SpanBatch b;
  Status st = DecodeOtlpJson(body, b);
  EXPECT_FALSE(st.ok()) << body;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << body;
  return st.message();
}

std::string AttrError(std::string_view any_value) {
  return ErrorOf(OneSpan(R"([{"key":"k","value":)" + std::string(any_value) + "}]"));
}

constexpr std::string_view kAttrPath = "resourceSpans[0].scopeSpans[0].spans[0].attributes[0]";
constexpr std::string_view kSpanPath = "resourceSpans[0].scopeSpans[0].spans[0]";

// Every Range of the batch lies inside its child column.
void ExpectConsistent(const SpanBatch& b) {
  auto in = [](Range r, size_t n) { return r.begin <= r.end && r.end <= n; };
  for (size_t i = 0; i < b.resources.attrs.size(); ++i) {
    EXPECT_TRUE(in(b.resources.attrs[i], b.resource_attrs.size()));
  }
  for (size_t i = 0; i < b.scopes.attrs.size(); ++i) {
    EXPECT_TRUE(in(b.scopes.attrs[i], b.scope_attrs.size()));
  }
  for (size_t i = 0; i < b.span_count(); ++i) {
    EXPECT_LT(b.spans.resource[i], b.resources.attrs.size());
    EXPECT_LT(b.spans.scope[i], b.scopes.attrs.size());
    EXPECT_TRUE(in(b.spans.attrs[i], b.span_attrs.size()));
    EXPECT_TRUE(in(b.spans.events[i], b.events.time_ns.size()));
    EXPECT_TRUE(in(b.spans.links[i], b.links.trace_id.size()));
  }
  for (size_t i = 0; i < b.events.time_ns.size(); ++i) {
    EXPECT_TRUE(in(b.events.attrs[i], b.event_attrs.size()));
  }
  for (size_t i = 0; i < b.links.trace_id.size(); ++i) {
    EXPECT_TRUE(in(b.links.attrs[i], b.link_attrs.size()));
  }
}

// Every field of the message, camelCase, ints and enums as numbers.
constexpr std::string_view kFull = R"json({
  "resourceSpans": [{
    "resource": {
      "attributes": [
        {"key": "service.name", "value": {"stringValue": "checkout"}},
        {"key": "host.cores", "value": {"intValue": "8"}}
      ],
      "droppedAttributesCount": 1
    },
    "scopeSpans": [{
      "scope": {
        "name": "io.opentelemetry.http",
        "version": "1.2.3",
        "attributes": [{"key": "scope.attr", "value": {"boolValue": true}}],
        "droppedAttributesCount": 2
      },
      "spans": [{
        "traceId": "5B8EFFF798038103D269B633813FC60C",
        "spanId": "EEE19B7EC3C1B174",
        "traceState": "rojo=00f067aa0ba902b7",
        "parentSpanId": "eee19b7ec3c1b173",
        "flags": 257,
        "name": "GET /cart",
        "kind": 2,
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": 1544712661000000000,
        "attributes": [
          {"key": "s", "value": {"stringValue": "v\u00e9\"\n"}},
          {"key": "b", "value": {"boolValue": false}},
          {"key": "i", "value": {"intValue": "-9223372036854775808"}},
          {"key": "i2", "value": {"intValue": 9223372036854775807}},
          {"key": "d", "value": {"doubleValue": 2.5e-7}},
          {"key": "nan", "value": {"doubleValue": "NaN"}},
          {"key": "by", "value": {"bytesValue": "AAEC/w=="}},
          {"key": "arr", "value": {"arrayValue": {"values": [
            {"intValue": 1}, {"stringValue": "a"}, {"boolValue": true}, {"doubleValue": 2.5}, {}
          ]}}},
          {"key": "kv", "value": {"kvlistValue": {"values": [
            {"key": "x", "value": {"arrayValue": {"values": [
              {"bytesValue": "aGk="}, {"doubleValue": "-Infinity"}
            ]}}},
            {"key": "y"}
          ]}}},
          {"key": "empty", "value": {}}
        ],
        "droppedAttributesCount": 3,
        "events": [
          {"timeUnixNano": "1544712660500000000", "name": "retry",
           "attributes": [{"key": "attempt", "value": {"intValue": "2"}}],
           "droppedAttributesCount": 4},
          {"timeUnixNano": 1544712660600000000, "name": "done"}
        ],
        "droppedEventsCount": 5,
        "links": [{
          "traceId": "0af7651916cd43dd8448eb211c80319c",
          "spanId": "b7ad6b7169203331",
          "traceState": "congo=t61rcWkgMzE",
          "attributes": [{"key": "link.kind", "value": {"stringValue": "follows"}}],
          "droppedAttributesCount": 6,
          "flags": 1
        }],
        "droppedLinksCount": 7,
        "status": {"message": "boom", "code": 2}
      }],
      "schemaUrl": "https://opentelemetry.io/schemas/1.21.0"
    }],
    "schemaUrl": "https://opentelemetry.io/schemas/1.20.0"
  }]
})json";

// The same request: snake_case names, enums as names, other number forms,
// members reordered, null and unknown fields sprinkled in.
constexpr std::string_view kFullSnake = R"json({
  "unknown_top": {"x": [1, 2, {"y": null}]},
  "resource_spans": [{
    "scope_spans": [{
      "schema_url": "https://opentelemetry.io/schemas/1.21.0",
      "spans": [{
        "status": {"code": "STATUS_CODE_ERROR", "message": "boom", "deprecated_code": 1},
        "attributes": [
          {"value": {"string_value": "v\u00e9\"\n"}, "key": "s"},
          {"key": "b", "value": {"bool_value": false, "string_value": null}},
          {"key": "i", "value": {"int_value": -9223372036854775808}},
          {"key": "i2", "value": {"int_value": "9223372036854775807"}},
          {"key": "d", "value": {"double_value": "2.5e-7"}},
          {"key": "nan", "value": {"double_value": "NaN"}},
          {"key": "by", "value": {"bytes_value": "AAEC_w"}},
          {"key": "arr", "value": {"array_value": {"values": [
            {"int_value": "1"}, {"string_value": "a"}, {"bool_value": true},
            {"double_value": "2.5"}, {"string_value": null}
          ]}}},
          {"key": "kv", "value": {"kvlist_value": {"values": [
            {"key": "x", "value": {"array_value": {"values": [
              {"bytes_value": "aGk"}, {"double_value": "-Infinity"}
            ]}}},
            {"key": "y", "value": null}
          ]}}},
          {"key": "empty", "value": {"futureValue": 42}}
        ],
        "trace_id": "5b8efff798038103d269b633813fc60c",
        "span_id": "eee19b7ec3c1b174",
        "trace_state": "rojo=00f067aa0ba902b7",
        "parent_span_id": "EEE19B7EC3C1B173",
        "flags": "257",
        "name": "GET /cart",
        "kind": "SPAN_KIND_SERVER",
        "start_time_unix_nano": 1544712660000000000,
        "end_time_unix_nano": "1544712661000000000",
        "dropped_attributes_count": "3",
        "events": [
          {"time_unix_nano": 1544712660500000000, "name": "retry",
           "attributes": [{"key": "attempt", "value": {"int_value": 2}}],
           "dropped_attributes_count": 4},
          {"time_unix_nano": "1544712660600000000", "name": "done", "attributes": null}
        ],
        "dropped_events_count": 5,
        "links": [{
          "flags": 1,
          "trace_id": "0AF7651916CD43DD8448EB211C80319C",
          "span_id": "B7AD6B7169203331",
          "trace_state": "congo=t61rcWkgMzE",
          "attributes": [{"key": "link.kind", "value": {"string_value": "follows"}}],
          "dropped_attributes_count": 6
        }],
        "dropped_links_count": 7,
        "newer_field": {"a": [true]}
      }],
      "scope": {
        "dropped_attributes_count": 2,
        "attributes": [{"key": "scope.attr", "value": {"bool_value": true}}],
        "version": "1.2.3",
        "name": "io.opentelemetry.http"
      }
    }],
    "schema_url": "https://opentelemetry.io/schemas/1.20.0",
    "resource": {
      "dropped_attributes_count": 1,
      "attributes": [
        {"key": "service.name", "value": {"string_value": "checkout"}},
        {"key": "host.cores", "value": {"int_value": 8}}
      ]
    }
  }]
})json";

// ---- decoding: every field ----

TEST(OtlpJsonDecode, EveryFieldCamelCase) {
  SpanBatch b;
  Status st = DecodeOtlpJson(kFull, b);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectConsistent(b);
  ASSERT_EQ(b.span_count(), 1u);
  ASSERT_EQ(b.resources.attrs.size(), 1u);
  ASSERT_EQ(b.scopes.name.size(), 1u);

  EXPECT_EQ(Attrs(b, b.resource_attrs, b.resources.attrs[0]),
            (std::vector<Attr>{{"service.name", ValueType::kString, "checkout"},
                               {"host.cores", ValueType::kInt, "8"}}));
  EXPECT_EQ(b.resources.dropped_attributes_count[0], 1u);
  EXPECT_EQ(Str(b, b.resources.schema_url[0]), "https://opentelemetry.io/schemas/1.20.0");
  EXPECT_EQ(Str(b, b.resources.service_name[0]), "checkout");

  EXPECT_EQ(Str(b, b.scopes.name[0]), "io.opentelemetry.http");
  EXPECT_EQ(Str(b, b.scopes.version[0]), "1.2.3");
  EXPECT_EQ(Attrs(b, b.scope_attrs, b.scopes.attrs[0]),
            (std::vector<Attr>{{"scope.attr", ValueType::kBool, "true"}}));
  EXPECT_EQ(b.scopes.dropped_attributes_count[0], 2u);
  EXPECT_EQ(Str(b, b.scopes.schema_url[0]), "https://opentelemetry.io/schemas/1.21.0");

  const auto& sp = b.spans;
  EXPECT_EQ(ToHex(sp.trace_id[0]), kTraceId);
  EXPECT_EQ(ToHex(sp.span_id[0]), kSpanId);
  EXPECT_EQ(ToHex(sp.parent_span_id[0]), "eee19b7ec3c1b173");
  EXPECT_EQ(Str(b, sp.trace_state[0]), "rojo=00f067aa0ba902b7");
  EXPECT_EQ(sp.flags[0], 257u);
  EXPECT_EQ(Str(b, sp.name[0]), "GET /cart");
  EXPECT_EQ(sp.kind[0], static_cast<uint8_t>(SpanKind::kServer));
  EXPECT_EQ(sp.start_ns[0], 1544712660000000000u);
  EXPECT_EQ(sp.end_ns[0], 1544712661000000000u);
  EXPECT_EQ(sp.resource[0], 0u);
  EXPECT_EQ(sp.scope[0], 0u);
  EXPECT_EQ(Attrs(b, b.span_attrs, sp.attrs[0]),
            (std::vector<Attr>{
                {"s", ValueType::kString, "v\xC3\xA9\"\n"},
                {"b", ValueType::kBool, "false"},
                {"i", ValueType::kInt, "-9223372036854775808"},
                {"i2", ValueType::kInt, "9223372036854775807"},
                {"d", ValueType::kDouble, "2.5e-07"},
                {"nan", ValueType::kDouble, "NaN"},
                {"by", ValueType::kBytes, "\x00\x01\x02\xff"s},
                {"arr", ValueType::kArray, R"([1,"a",true,2.5,null])"},
                {"kv", ValueType::kKvList, R"({"x":["aGk=","-Infinity"],"y":null})"},
                {"empty", ValueType::kEmpty, ""},
            }));
  EXPECT_EQ(sp.dropped_attributes_count[0], 3u);
  EXPECT_EQ(sp.dropped_events_count[0], 5u);
  EXPECT_EQ(sp.dropped_links_count[0], 7u);
  EXPECT_EQ(sp.status_code[0], static_cast<uint8_t>(StatusCodeOtlp::kError));
  EXPECT_EQ(Str(b, sp.status_message[0]), "boom");

  ASSERT_EQ(sp.events[0].begin, 0u);
  ASSERT_EQ(sp.events[0].end, 2u);
  EXPECT_EQ(b.events.time_ns[0], 1544712660500000000u);
  EXPECT_EQ(Str(b, b.events.name[0]), "retry");
  EXPECT_EQ(Attrs(b, b.event_attrs, b.events.attrs[0]),
            (std::vector<Attr>{{"attempt", ValueType::kInt, "2"}}));
  EXPECT_EQ(b.events.dropped_attributes_count[0], 4u);
  EXPECT_EQ(b.events.time_ns[1], 1544712660600000000u);
  EXPECT_EQ(Str(b, b.events.name[1]), "done");
  EXPECT_EQ(b.events.attrs[1].size(), 0u);
  EXPECT_EQ(b.events.dropped_attributes_count[1], 0u);

  ASSERT_EQ(sp.links[0].begin, 0u);
  ASSERT_EQ(sp.links[0].end, 1u);
  EXPECT_EQ(ToHex(b.links.trace_id[0]), "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(ToHex(b.links.span_id[0]), "b7ad6b7169203331");
  EXPECT_EQ(Str(b, b.links.trace_state[0]), "congo=t61rcWkgMzE");
  EXPECT_EQ(b.links.flags[0], 1u);
  EXPECT_EQ(Attrs(b, b.link_attrs, b.links.attrs[0]),
            (std::vector<Attr>{{"link.kind", ValueType::kString, "follows"}}));
  EXPECT_EQ(b.links.dropped_attributes_count[0], 6u);
}

TEST(OtlpJsonDecode, SnakeCaseNamesEnumNamesReorderedNullsAndUnknownFields) {
  SpanBatch camel;
  SpanBatch snake;
  ASSERT_TRUE(DecodeOtlpJson(kFull, camel).ok());
  Status st = DecodeOtlpJson(kFullSnake, snake);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectConsistent(snake);
  std::string why;
  EXPECT_TRUE(camel.LogicallyEquals(snake, &why)) << why;
  EXPECT_EQ(Str(snake, snake.resources.service_name[0]), "checkout");
}

TEST(OtlpJsonDecode, EmptyRequests) {
  for (std::string_view body : {"{}", R"({"resourceSpans":[]})", R"({"resourceSpans":null})",
                                " {} ", R"({"resource_spans":[],"somethingElse":1})"}) {
    SpanBatch b;
    Status st = DecodeOtlpJson(body, b);
    EXPECT_TRUE(st.ok()) << body << ": " << st.message();
    EXPECT_EQ(b.span_count(), 0u) << body;
  }
  // A resource without spans still gets its row, like the protobuf decoder does.
  SpanBatch b;
  ASSERT_TRUE(DecodeOtlpJson(R"({"resourceSpans":[{"scopeSpans":[{}]}]})", b).ok());
  EXPECT_EQ(b.span_count(), 0u);
  EXPECT_EQ(b.resources.attrs.size(), 1u);
  EXPECT_EQ(b.scopes.name.size(), 1u);
}

TEST(OtlpJsonDecode, MinimalSpanDefaults) {
  SpanBatch b;
  Status st = DecodeOtlpJson(SpanWith(""), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 1u);
  EXPECT_TRUE(IsZero(b.spans.parent_span_id[0]));
  EXPECT_EQ(Str(b, b.spans.name[0]), "");
  EXPECT_EQ(b.spans.kind[0], 0u);
  EXPECT_EQ(b.spans.start_ns[0], 0u);
  EXPECT_EQ(b.spans.status_code[0], 0u);
  EXPECT_EQ(b.spans.attrs[0].size(), 0u);
  EXPECT_EQ(b.spans.events[0].size(), 0u);
  EXPECT_EQ(b.spans.links[0].size(), 0u);
  EXPECT_EQ(Str(b, b.resources.service_name[0]), "missing-service-name");
}

TEST(OtlpJsonDecode, ParentSpanIdEmptyNullOrAbsentIsRoot) {
  for (std::string_view f : {R"("parentSpanId":"")", R"("parentSpanId":null)",
                             R"("parent_span_id":"")", R"("name":"x")"}) {
    SpanBatch b;
    Status st = DecodeOtlpJson(SpanWith(f), b);
    ASSERT_TRUE(st.ok()) << f << ": " << st.message();
    EXPECT_TRUE(IsZero(b.spans.parent_span_id[0])) << f;
  }
}

TEST(OtlpJsonDecode, NullFieldsAreAbsent) {
  SpanBatch b;
  Status st =
      DecodeOtlpJson(SpanWith(R"("name":null,"kind":null,"flags":null,"startTimeUnixNano":null,)"
                              R"("attributes":null,"events":null,"links":null,"status":null,)"
                              R"("traceState":null,"droppedAttributesCount":null)"),
                     b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 1u);
  EXPECT_EQ(Str(b, b.spans.name[0]), "");
  EXPECT_EQ(b.spans.events[0].size(), 0u);

  SpanBatch b2;
  st = DecodeOtlpJson(
      R"({"resourceSpans":[{"resource":null,"schemaUrl":null,"scopeSpans":[)"
      R"({"scope":{"name":null,"version":null,"attributes":null},"schemaUrl":null,"spans":[)"
      R"({"traceId":")" +
          std::string(kTraceId) + R"(","spanId":")" + std::string(kSpanId) +
          R"(","status":{"code":null,"message":null}}]}]}]})",
      b2);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(b2.span_count(), 1u);
}

TEST(OtlpJsonDecode, KindsAsNumbersAndNames) {
  const char* names[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
                         "SPAN_KIND_CLIENT",      "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
  for (int k = 0; k <= 5; ++k) {
    SpanBatch by_num;
    SpanBatch by_name;
    ASSERT_TRUE(DecodeOtlpJson(SpanWith("\"kind\":" + std::to_string(k)), by_num).ok());
    ASSERT_TRUE(DecodeOtlpJson(SpanWith("\"kind\":\""s + names[k] + "\""), by_name).ok());
    EXPECT_EQ(by_num.spans.kind[0], k);
    EXPECT_EQ(by_name.spans.kind[0], k);
  }
}

TEST(OtlpJsonDecode, StatusCodesAsNumbersAndNames) {
  const char* names[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"};
  for (int c = 0; c <= 2; ++c) {
    SpanBatch by_num;
    SpanBatch by_name;
    ASSERT_TRUE(
        DecodeOtlpJson(SpanWith(R"("status":{"code":)" + std::to_string(c) + "}"), by_num).ok());
    ASSERT_TRUE(
        DecodeOtlpJson(SpanWith(R"("status":{"code":")"s + names[c] + "\"}"), by_name).ok());
    EXPECT_EQ(by_num.spans.status_code[0], c);
    EXPECT_EQ(by_name.spans.status_code[0], c);
  }
}

TEST(OtlpJsonDecode, TimesAsStringsAndNumbers) {
  struct Case {
    std::string json;
    uint64_t want;
  };
  for (const Case& c : std::vector<Case>{
           {R"("0")", 0},
           {"0", 0},
           {R"("18446744073709551615")", UINT64_MAX},
           {"18446744073709551615", UINT64_MAX},
           {"9223372036854775808", 9223372036854775808u},
           {"1e9", 1000000000u},
           {R"("1700000000123456789")", 1700000000123456789u},
           {"1700000000123456789", 1700000000123456789u},
       }) {
    SpanBatch b;
    Status st = DecodeOtlpJson(
        SpanWith(R"("startTimeUnixNano":)" + c.json + R"(,"end_time_unix_nano":)" + c.json), b);
    ASSERT_TRUE(st.ok()) << c.json << ": " << st.message();
    EXPECT_EQ(b.spans.start_ns[0], c.want) << c.json;
    EXPECT_EQ(b.spans.end_ns[0], c.want) << c.json;
  }
}

TEST(OtlpJsonDecode, HexIdsAnyCase) {
  SpanBatch b;
  Status st = DecodeOtlpJson(
      R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789ABCDEFabcdefABCDEF0123",)"
      R"("spanId":"FfFfFfFf00000000","parentSpanId":"aAbBcCdDeEfF0011"}]}]}]})",
      b);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ToHex(b.spans.trace_id[0]), "0123456789abcdefabcdefabcdef0123");
  EXPECT_EQ(ToHex(b.spans.span_id[0]), "ffffffff00000000");
  EXPECT_EQ(ToHex(b.spans.parent_span_id[0]), "aabbccddeeff0011");
}

// ---- attribute values ----

TEST(OtlpJsonValues, Strings) {
  EXPECT_EQ(OneAttr(R"({"stringValue":"hello"})"), (Attr{"k", ValueType::kString, "hello"}));
  EXPECT_EQ(OneAttr(R"({"stringValue":""})"), (Attr{"k", ValueType::kString, ""}));
  EXPECT_EQ(OneAttr(R"({"string_value":"a\"b\\c\u0001\t"})"),
            (Attr{"k", ValueType::kString, "a\"b\\c\x01\t"}));
  EXPECT_EQ(OneAttr(R"({"stringValue":"\u00e9\ud83d\ude00"})"),
            (Attr{"k", ValueType::kString, "\xC3\xA9\xF0\x9F\x98\x80"}));
  EXPECT_EQ(OneAttr(R"({"stringValue":"nul\u0000byte"})"),
            (Attr{"k", ValueType::kString, "nul\0byte"s}));
}

TEST(OtlpJsonValues, Bools) {
  EXPECT_EQ(OneAttr(R"({"boolValue":true})"), (Attr{"k", ValueType::kBool, "true"}));
  EXPECT_EQ(OneAttr(R"({"boolValue":false})"), (Attr{"k", ValueType::kBool, "false"}));
  EXPECT_EQ(OneAttr(R"({"bool_value":true})"), (Attr{"k", ValueType::kBool, "true"}));
}

TEST(OtlpJsonValues, Ints) {
  struct Case {
    const char* json;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"intValue":"123"})", "123"},
           {R"({"intValue":123})", "123"},
           {R"({"intValue":"-42"})", "-42"},
           {R"({"intValue":-42})", "-42"},
           {R"({"intValue":"0"})", "0"},
           {R"({"intValue":0})", "0"},
           {R"({"intValue":"-0"})", "0"},
           {R"({"intValue":"007"})", "7"},
           {R"({"intValue":"9223372036854775807"})", "9223372036854775807"},
           {R"({"intValue":9223372036854775807})", "9223372036854775807"},
           {R"({"intValue":"-9223372036854775808"})", "-9223372036854775808"},
           {R"({"intValue":-9223372036854775808})", "-9223372036854775808"},
           {R"({"intValue":1e3})", "1000"},
           {R"({"intValue":-2.0})", "-2"},
           {R"({"int_value":"5"})", "5"},
       }) {
    EXPECT_EQ(OneAttr(c.json), (Attr{"k", ValueType::kInt, c.want})) << c.json;
  }
}

TEST(OtlpJsonValues, Doubles) {
  struct Case {
    const char* json;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"doubleValue":1.5})", "1.5"},
           {R"({"doubleValue":0.1})", "0.1"},
           {R"({"doubleValue":-2.25})", "-2.25"},
           {R"({"doubleValue":3})", "3"},
           {R"({"doubleValue":1e300})", "1e+300"},
           {R"({"doubleValue":2.5E-7})", "2.5e-07"},
           {R"({"doubleValue":-0.0})", "-0"},
           {R"({"doubleValue":18446744073709551615})", "18446744073709551616"},
           {R"({"doubleValue":"1.25"})", "1.25"},
           {R"({"doubleValue":"-1e3"})", "-1000"},
           {R"({"doubleValue":"NaN"})", "NaN"},
           {R"({"doubleValue":"Infinity"})", "Infinity"},
           {R"({"doubleValue":"-Infinity"})", "-Infinity"},
           {R"({"double_value":0.5})", "0.5"},
       }) {
    EXPECT_EQ(OneAttr(c.json), (Attr{"k", ValueType::kDouble, c.want})) << c.json;
  }
}

TEST(OtlpJsonValues, Bytes) {
  EXPECT_EQ(OneAttr(R"({"bytesValue":"aGVsbG8="})"), (Attr{"k", ValueType::kBytes, "hello"}));
  EXPECT_EQ(OneAttr(R"({"bytesValue":"aGVsbG8"})"), (Attr{"k", ValueType::kBytes, "hello"}));
  EXPECT_EQ(OneAttr(R"({"bytesValue":"AAEC/w=="})"),
            (Attr{"k", ValueType::kBytes, "\x00\x01\x02\xff"s}));
  EXPECT_EQ(OneAttr(R"({"bytes_value":"AAEC_w"})"),
            (Attr{"k", ValueType::kBytes, "\x00\x01\x02\xff"s}));
  EXPECT_EQ(OneAttr(R"({"bytesValue":""})"), (Attr{"k", ValueType::kBytes, ""}));
}

TEST(OtlpJsonValues, ArrayWithMixedTypes) {
  EXPECT_EQ(OneAttr(R"({"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"a"},)"
                    R"({"boolValue":true},{"doubleValue":2.5},{}]}})"),
            (Attr{"k", ValueType::kArray, R"([1,"a",true,2.5,null])"}));
  EXPECT_EQ(OneAttr(R"({"arrayValue":{"values":[{"bytesValue":"AAEC_w"},)"
                    R"({"doubleValue":"NaN"},{"doubleValue":"Infinity"},{"intValue":-7},)"
                    R"({"doubleValue":1e21},{"stringValue":"q\"\u0001\n\u00e9"},)"
                    R"({"boolValue":false},{"stringValue":null}]}})"),
            (Attr{"k", ValueType::kArray,
                  "[\"AAEC/w==\",\"NaN\",\"Infinity\",-7,1e+21,\"q\\\"\\u0001\\n\xC3\xA9\","
                  "false,null]"}));
}

TEST(OtlpJsonValues, NegativeZeroInAnArrayKeepsItsSign) {
  // Found by tests/fuzz (corpus/otlp_json/crash-negative-zero-in-array.json): stored as "-0",
  // the protobuf encoder read it back as the integer 0.
  EXPECT_EQ(OneAttr(R"({"arrayValue":{"values":[{"doubleValue":-0.0},{"doubleValue":"-0"},)"
                    R"({"intValue":"-0"}]}})"),
            (Attr{"k", ValueType::kArray, "[-0.0,-0.0,0]"}));
  EXPECT_EQ(OneAttr(R"({"kvlistValue":{"values":[{"key":"z","value":{"doubleValue":-0.0}}]}})"),
            (Attr{"k", ValueType::kKvList, R"({"z":-0.0})"}));
}

TEST(OtlpJsonValues, EmptyArraysAndKvlists) {
  EXPECT_EQ(OneAttr(R"({"arrayValue":{}})"), (Attr{"k", ValueType::kArray, "[]"}));
  EXPECT_EQ(OneAttr(R"({"arrayValue":{"values":[]}})"), (Attr{"k", ValueType::kArray, "[]"}));
  EXPECT_EQ(OneAttr(R"({"arrayValue":{"values":null}})"), (Attr{"k", ValueType::kArray, "[]"}));
  EXPECT_EQ(OneAttr(R"({"kvlistValue":{}})"), (Attr{"k", ValueType::kKvList, "{}"}));
  EXPECT_EQ(OneAttr(R"({"kvlist_value":{"values":[]}})"), (Attr{"k", ValueType::kKvList, "{}"}));
}

TEST(OtlpJsonValues, KvlistWithNestedArray) {
  EXPECT_EQ(OneAttr(R"({"kvlistValue":{"values":[)"
                    R"({"key":"a","value":{"stringValue":"x"}},)"
                    R"({"key":"arr","value":{"arrayValue":{"values":[{"intValue":1},)"
                    R"({"arrayValue":{"values":[{"doubleValue":"-Infinity"},{}]}},)"
                    R"({"kvlistValue":{"values":[{"key":"deep","value":{"boolValue":true}}]}}]}}},)"
                    R"({"key":"e"},{"key":"n","value":null},{"key":"z","value":{}},)"
                    R"({"value":{"intValue":"3"}},)"
                    R"({"key":"q\"\\","value":{"bytesValue":"aGk"}}]}})"),
            (Attr{"k", ValueType::kKvList,
                  R"({"a":"x","arr":[1,["-Infinity",null],{"deep":true}],"e":null,"n":null,)"
                  R"("z":null,"":3,"q\"\\":"aGk="})"}));
}

TEST(OtlpJsonValues, EmptyValues) {
  EXPECT_EQ(OneAttr("{}"), (Attr{"k", ValueType::kEmpty, ""}));
  EXPECT_EQ(OneAttr("null"), (Attr{"k", ValueType::kEmpty, ""}));
  EXPECT_EQ(OneAttr(R"({"stringValue":null})"), (Attr{"k", ValueType::kEmpty, ""}));
  EXPECT_EQ(OneAttr(R"({"someFutureValue":{"x":1}})"), (Attr{"k", ValueType::kEmpty, ""}));

  SpanBatch b;
  ASSERT_TRUE(
      DecodeOtlpJson(OneSpan(R"([{"key":"nokey"},{"value":{"stringValue":"v"}}])"), b).ok());
  EXPECT_EQ(Attrs(b, b.span_attrs, b.spans.attrs[0]),
            (std::vector<Attr>{{"nokey", ValueType::kEmpty, ""}, {"", ValueType::kString, "v"}}));
}

TEST(OtlpJsonValues, NestingUpToSixteenLevels) {
  // depth 1 is the attribute's value itself; each arrayValue adds a level.
  auto nested = [](int depth) {
    std::string s = R"({"intValue":1})";
    for (int i = 1; i < depth; ++i) s = R"({"arrayValue":{"values":[)" + s + "]}}";
    return s;
  };
  Attr a = OneAttr(nested(16));
  EXPECT_EQ(a.type, ValueType::kArray);
  EXPECT_EQ(a.value, std::string(15, '[') + "1" + std::string(15, ']'));

  std::string err = AttrError(nested(17));
  EXPECT_NE(err.find("nested deeper than 16"), std::string::npos) << err;
  EXPECT_EQ(err.rfind(std::string(kAttrPath) + ".value.arrayValue.values[0]", 0), 0u) << err;

  // The same through kvlists.
  auto nested_kv = [](int depth) {
    std::string s = R"({"intValue":1})";
    for (int i = 1; i < depth; ++i) {
      s = R"({"kvlistValue":{"values":[{"key":"k","value":)" + s + "}]}}";
    }
    return s;
  };
  EXPECT_EQ(OneAttr(nested_kv(16)).type, ValueType::kKvList);
  err = AttrError(nested_kv(17));
  EXPECT_NE(err.find("nested deeper than 16"), std::string::npos) << err;
}

TEST(OtlpJsonValues, StoredTextMatchesProtobufDecoder) {
  // The attribute values of kFull, hand-encoded as protobuf.
  struct Pb {
    std::string s;
    Pb& Varint(uint64_t v) {
      while (v >= 0x80) {
        s += static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
      }
      s += static_cast<char>(v);
      return *this;
    }
    Pb& Tag(uint32_t f, uint32_t wire) { return Varint(uint64_t{f} << 3 | wire); }
    Pb& Len(uint32_t f, std::string_view b) {
      Tag(f, 2).Varint(b.size());
      s.append(b);
      return *this;
    }
    Pb& Msg(uint32_t f, const Pb& m) { return Len(f, m.s); }
    Pb& U64(uint32_t f, uint64_t v) { return Tag(f, 0).Varint(v); }
    Pb& Fixed64(uint32_t f, uint64_t v) {
      Tag(f, 1);
      for (int i = 0; i < 8; ++i) s += static_cast<char>(v >> (8 * i));
      return *this;
    }
    Pb& Fixed32(uint32_t f, uint32_t v) {
      Tag(f, 5);
      for (int i = 0; i < 4; ++i) s += static_cast<char>(v >> (8 * i));
      return *this;
    }
    Pb& Double(uint32_t f, double d) { return Fixed64(f, std::bit_cast<uint64_t>(d)); }
  };
  auto str = [](std::string_view v) { return Pb{}.Len(1, v); };
  auto boolean = [](bool v) { return Pb{}.U64(2, v ? 1 : 0); };
  auto integer = [](int64_t v) { return Pb{}.U64(3, static_cast<uint64_t>(v)); };
  auto dbl = [](double v) { return Pb{}.Double(4, v); };
  auto bytes = [](std::string_view v) { return Pb{}.Len(7, v); };
  auto arr = [](std::vector<Pb> vs) {
    Pb a;
    for (auto& v : vs) a.Msg(1, v);
    return Pb{}.Msg(5, a);
  };
  auto kv = [](std::string_view k, const Pb* v) {
    Pb p;
    p.Len(1, k);
    if (v != nullptr) p.Msg(2, *v);
    return p;
  };
  auto kvlist = [](std::vector<Pb> kvs) {
    Pb l;
    for (auto& k : kvs) l.Msg(1, k);
    return Pb{}.Msg(6, l);
  };
  auto attr = [&](std::string_view k, const Pb& v) { return kv(k, &v); };
  auto hex = [](std::string_view h, size_t n) {
    std::string out(n, '\0');
    EXPECT_TRUE(FromHex(h, reinterpret_cast<uint8_t*>(out.data()), n));
    return out;
  };

  Pb resource;
  resource.Msg(1, attr("service.name", str("checkout")))
      .Msg(1, attr("host.cores", integer(8)))
      .U64(2, 1);
  Pb scope;
  scope.Len(1, "io.opentelemetry.http")
      .Len(2, "1.2.3")
      .Msg(3, attr("scope.attr", boolean(true)))
      .U64(4, 2);
  Pb x = arr({bytes("hi"), dbl(-std::numeric_limits<double>::infinity())});
  Pb span;
  span.Len(1, hex(kTraceId, 16))
      .Len(2, hex(kSpanId, 8))
      .Len(3, "rojo=00f067aa0ba902b7")
      .Len(4, hex("eee19b7ec3c1b173", 8))
      .Len(5, "GET /cart")
      .U64(6, 2)
      .Fixed64(7, 1544712660000000000u)
      .Fixed64(8, 1544712661000000000u)
      .Msg(9, attr("s", str("v\xC3\xA9\"\n")))
      .Msg(9, attr("b", boolean(false)))
      .Msg(9, attr("i", integer(INT64_MIN)))
      .Msg(9, attr("i2", integer(INT64_MAX)))
      .Msg(9, attr("d", dbl(2.5e-7)))
      .Msg(9, attr("nan", dbl(std::numeric_limits<double>::quiet_NaN())))
      .Msg(9, attr("by", bytes("\x00\x01\x02\xff"s)))
      .Msg(9, attr("arr", arr({integer(1), str("a"), boolean(true), dbl(2.5), Pb{}})))
      .Msg(9, attr("kv", kvlist({kv("x", &x), kv("y", nullptr)})))
      .Msg(9, attr("empty", Pb{}))
      .U64(10, 3)
      .Msg(11, Pb{}.Fixed64(1, 1544712660500000000u)
                   .Len(2, "retry")
                   .Msg(3, attr("attempt", integer(2)))
                   .U64(4, 4))
      .Msg(11, Pb{}.Fixed64(1, 1544712660600000000u).Len(2, "done"))
      .U64(12, 5)
      .Msg(13, Pb{}.Len(1, hex("0af7651916cd43dd8448eb211c80319c", 16))
                   .Len(2, hex("b7ad6b7169203331", 8))
                   .Len(3, "congo=t61rcWkgMzE")
                   .Msg(4, attr("link.kind", str("follows")))
                   .U64(5, 6)
                   .Fixed32(6, 1))
      .U64(14, 7)
      .Msg(15, Pb{}.Len(2, "boom").U64(3, 2))
      .Fixed32(16, 257);
  Pb scope_spans;
  scope_spans.Msg(1, scope).Msg(2, span).Len(3, "https://opentelemetry.io/schemas/1.21.0");
  Pb resource_spans;
  resource_spans.Msg(1, resource)
      .Msg(2, scope_spans)
      .Len(3, "https://opentelemetry.io/schemas/1.20.0");
  Pb request;
  request.Msg(1, resource_spans);

  SpanBatch from_proto;
  Status st = DecodeOtlpProto(request.s, from_proto);
  ASSERT_TRUE(st.ok()) << st.message();
  SpanBatch from_json;
  ASSERT_TRUE(DecodeOtlpJson(kFull, from_json).ok());
  std::string why;
  EXPECT_TRUE(from_json.LogicallyEquals(from_proto, &why)) << why;
  // LogicallyEquals compares texts; check the types too.
  EXPECT_EQ(from_json.span_attrs.type, from_proto.span_attrs.type);
}

// ---- structure ----

TEST(OtlpJsonDecode, MultipleResourcesAndScopesGetTheRightIndices) {
  auto span = [](char c) {
    return R"({"traceId":")" + std::string(32, c) + R"(","spanId":")" + std::string(16, c) + "\"}";
  };
  auto svc = [](std::string_view name) {
    return R"({"attributes":[{"key":"a","value":{"intValue":1}},)"
           R"({"key":"service.name","value":{"stringValue":")" +
           std::string(name) + R"("}}]})";
  };
  std::string body =
      R"({"resourceSpans":[)"
      // resource 0: two scopes, spans listed before the scope
      R"({"scopeSpans":[{"spans":[)" +
      span('1') + "," + span('2') + R"(],"scope":{"name":"s0"}},{"scope":{"name":"s1"},"spans":[)" +
      span('3') + R"(]}],"resource":)" + svc("svc-a") +
      // resource 1: no service.name, one empty scope, one deprecated library
      R"(},{"resource":{"attributes":[{"key":"service.name","value":{"intValue":5}}]},)"
      R"("scopeSpans":[{"scope":{"name":"s2"}}],)"
      R"("instrumentationLibrarySpans":[{"instrumentationLibrary":{"name":"lib","version":"9"},)"
      R"("spans":[)" +
      span('4') +
      "]}]},"
      // resource 2
      R"({"resource":)" +
      svc("svc-c") + R"(,"scope_spans":[{"spans":[)" + span('5') + "]}]}]}";
  SpanBatch b;
  Status st = DecodeOtlpJson(body, b);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectConsistent(b);
  ASSERT_EQ(b.span_count(), 5u);
  ASSERT_EQ(b.resources.attrs.size(), 3u);
  ASSERT_EQ(b.scopes.name.size(), 5u);
  EXPECT_EQ(b.spans.resource, (std::vector<uint32_t>{0, 0, 0, 1, 2}));
  EXPECT_EQ(b.spans.scope, (std::vector<uint32_t>{0, 0, 1, 3, 4}));
  EXPECT_EQ(ToHex(b.spans.span_id[2]), std::string(16, '3'));
  EXPECT_EQ(Str(b, b.scopes.name[0]), "s0");
  EXPECT_EQ(Str(b, b.scopes.name[1]), "s1");
  EXPECT_EQ(Str(b, b.scopes.name[2]), "s2");
  EXPECT_EQ(Str(b, b.scopes.name[3]), "lib");
  EXPECT_EQ(Str(b, b.scopes.version[3]), "9");
  EXPECT_EQ(Str(b, b.scopes.name[4]), "");
  EXPECT_EQ(Str(b, b.resources.service_name[0]), "svc-a");
  EXPECT_EQ(Str(b, b.resources.service_name[1]), "service-name-wrong-type");
  EXPECT_EQ(Str(b, b.resources.service_name[2]), "svc-c");
  EXPECT_EQ(b.resources.attrs[0].begin, 0u);
  EXPECT_EQ(b.resources.attrs[0].end, 2u);
  EXPECT_EQ(b.resources.attrs[1].begin, 2u);
  EXPECT_EQ(b.resources.attrs[1].end, 3u);
  EXPECT_EQ(b.resources.attrs[2].begin, 3u);
  EXPECT_EQ(b.resources.attrs[2].end, 5u);
}

TEST(OtlpJsonDecode, EventsAndLinksOfSeveralSpans) {
  std::string span0 =
      R"({"traceId":")" + std::string(32, 'a') + R"(","spanId":")" + std::string(16, 'a') +
      R"(","events":[{"name":"e0","attributes":[{"key":"x","value":{"intValue":0}}]},)"
      R"({"name":"e1","attributes":[{"key":"y","value":{"intValue":1}},)"
      R"({"key":"z","value":{"intValue":2}}]}],)"
      R"("links":[{"traceId":")" +
      std::string(32, 'b') + R"(","spanId":")" + std::string(16, 'b') +
      R"(","attributes":[{"key":"l","value":{}}]}]})";
  // Links and events before the ids; attributes between them.
  std::string span1 = R"({"links":[{"spanId":")" + std::string(16, 'c') + R"(","traceId":")" +
                      std::string(32, 'c') + R"("},{"traceId":")" + std::string(32, 'd') +
                      R"(","spanId":")" + std::string(16, 'd') +
                      R"(","flags":3}],"attributes":[{"key":"s","value":{"boolValue":true}}],)"
                      R"("events":[{"name":"e2"}],"traceId":")" +
                      std::string(32, 'e') + R"(","spanId":")" + std::string(16, 'e') + "\"}";
  std::string body =
      R"({"resourceSpans":[{"scopeSpans":[{"spans":[)" + span0 + "," + span1 + "]}]}]}";
  SpanBatch b;
  Status st = DecodeOtlpJson(body, b);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectConsistent(b);
  ASSERT_EQ(b.span_count(), 2u);
  EXPECT_EQ(b.spans.events[0].begin, 0u);
  EXPECT_EQ(b.spans.events[0].end, 2u);
  EXPECT_EQ(b.spans.events[1].begin, 2u);
  EXPECT_EQ(b.spans.events[1].end, 3u);
  EXPECT_EQ(Str(b, b.events.name[2]), "e2");
  EXPECT_EQ(b.spans.links[0].begin, 0u);
  EXPECT_EQ(b.spans.links[0].end, 1u);
  EXPECT_EQ(b.spans.links[1].begin, 1u);
  EXPECT_EQ(b.spans.links[1].end, 3u);
  EXPECT_EQ(ToHex(b.links.span_id[1]), std::string(16, 'c'));
  EXPECT_EQ(b.links.flags[2], 3u);
  EXPECT_EQ(Attrs(b, b.event_attrs, b.events.attrs[1]),
            (std::vector<Attr>{{"y", ValueType::kInt, "1"}, {"z", ValueType::kInt, "2"}}));
  EXPECT_EQ(Attrs(b, b.link_attrs, b.links.attrs[0]),
            (std::vector<Attr>{{"l", ValueType::kEmpty, ""}}));
  EXPECT_EQ(b.links.attrs[1].size(), 0u);
  EXPECT_EQ(Attrs(b, b.span_attrs, b.spans.attrs[1]),
            (std::vector<Attr>{{"s", ValueType::kBool, "true"}}));
  EXPECT_EQ(ToHex(b.spans.trace_id[1]), std::string(32, 'e'));
}

TEST(OtlpJsonDecode, AppendsToANonEmptyBatch) {
  SpanBatch b;
  ASSERT_TRUE(DecodeOtlpJson(kFull, b).ok());
  ASSERT_TRUE(DecodeOtlpJson(kFullSnake, b).ok());
  ExpectConsistent(b);
  ASSERT_EQ(b.span_count(), 2u);
  EXPECT_EQ(b.spans.resource[1], 1u);
  EXPECT_EQ(b.spans.scope[1], 1u);
  EXPECT_EQ(b.spans.events[1].begin, 2u);
  EXPECT_EQ(b.spans.events[1].end, 4u);
  EXPECT_EQ(b.spans.attrs[1].begin, 10u);
  EXPECT_EQ(Str(b, b.resources.service_name[1]), "checkout");
  SpanBatch one;
  ASSERT_TRUE(DecodeOtlpJson(kFull, one).ok());
  SpanBatch two;
  two.Append(one);
  two.Append(one);
  std::string why;
  EXPECT_TRUE(b.LogicallyEquals(two, &why)) << why;
}

TEST(OtlpJsonDecode, ParsersArePerThread) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ok] {
      for (int i = 0; i < 50; ++i) {
        SpanBatch b;
        if (DecodeOtlpJson((t + i) % 2 ? kFull : kFullSnake, b).ok() && b.span_count() == 1 &&
            b.Str(b.spans.name[0]) == "GET /cart") {
          ++ok[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, (std::vector<int>{50, 50, 50, 50}));
}

// ---- errors ----

TEST(OtlpJsonErrors, InvalidJson) {
  for (std::string_view body :
       {"", "{", "{\"resourceSpans\":[}", "nope", "{\"a\":1,}", "{\"a\":\"\xff\"}", "{}{}",
        "{\"a\":01}", "{\"a\":1e999}", "{\"a\":-9223372036854775809}"}) {
    std::string err = ErrorOf(body);
    EXPECT_EQ(err.rfind("invalid JSON: ", 0), 0u) << body << " -> " << err;
  }
  // Deeper than simdjson's own limit: an error, not a stack overflow.
  std::string deep(5000, '[');
  EXPECT_EQ(ErrorOf(deep + std::string(5000, ']')).rfind("invalid JSON: ", 0), 0u);
  std::string deep_obj;
  for (int i = 0; i < 3000; ++i) deep_obj += "{\"a\":";
  deep_obj += "1" + std::string(3000, '}');
  EXPECT_EQ(ErrorOf(deep_obj).rfind("invalid JSON: ", 0), 0u);
}

TEST(OtlpJsonErrors, WrongTopLevel) {
  EXPECT_EQ(ErrorOf("[]"), "request: expected a JSON object (ExportTraceServiceRequest)");
  EXPECT_EQ(ErrorOf("\"x\""), "request: expected a JSON object (ExportTraceServiceRequest)");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":{}})"), "resourceSpans: expected an array");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[1]})"), "resourceSpans[0]: expected an object");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{},null]})"), "resourceSpans[1]: expected an object");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{"resource":[]}]})"),
            "resourceSpans[0].resource: expected an object");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{"scopeSpans":{}}]})"),
            "resourceSpans[0].scopeSpans: expected an array");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{"scopeSpans":[{"spans":"x"}]}]})"),
            "resourceSpans[0].scopeSpans[0].spans: expected an array");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{"scopeSpans":[{"scope":{"name":1}}]}]})"),
            "resourceSpans[0].scopeSpans[0].scope.name: expected a string");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{"instrumentationLibrarySpans":[)"
                    R"({"instrumentationLibrary":{"version":false}}]}]})"),
            "resourceSpans[0].instrumentationLibrarySpans[0].instrumentationLibrary.version: "
            "expected a string");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{"schemaUrl":5}]})"),
            "resourceSpans[0].schemaUrl: expected a string");
  EXPECT_EQ(ErrorOf(R"({"resourceSpans":[{"resource":{"droppedAttributesCount":-1}}]})"),
            "resourceSpans[0].resource.droppedAttributesCount: integer out of range");
}

TEST(OtlpJsonErrors, PathNamesTheSpan) {
  auto span = [](std::string_view trace_id) {
    return R"({"traceId":")" + std::string(trace_id) + R"(","spanId":")" + std::string(kSpanId) +
           "\"}";
  };
  std::string good = span(kTraceId);
  std::string body = R"({"resourceSpans":[{"scopeSpans":[{"spans":[)" + good + R"(]},{"spans":[)" +
                     good + "," + good + "," + good + "," +
                     span("5b8efff798038103d269b633813fc60") + "]}]}]}";
  EXPECT_EQ(ErrorOf(body),
            "resourceSpans[0].scopeSpans[1].spans[3].traceId: expected 32 hex digits");
}

TEST(OtlpJsonErrors, BadIds) {
  const std::string t(kTraceId);
  const std::string s(kSpanId);
  struct Case {
    std::string fields;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {R"("traceId":")" + t.substr(1) + R"(","spanId":")" + s + "\"",
            "traceId: expected 32 hex digits"},
           {R"("traceId":")" + t + "0\",\"spanId\":\"" + s + "\"",
            "traceId: expected 32 hex digits"},
           {R"("traceId":"5b8efff798038103d269b633813fc60g","spanId":")" + s + "\"",
            "traceId: expected 32 hex digits"},
           {R"("traceId":"W47/95gDgQPSabYzgT/GDA==","spanId":")" + s + "\"",
            "traceId: expected 32 hex digits"},
           {R"("traceId":"","spanId":")" + s + "\"", "traceId: expected 32 hex digits"},
           {R"("traceId":123,"spanId":")" + s + "\"", "traceId: expected a string"},
           {R"("traceId":")" + t + R"(","spanId":"7uGbfsPBsXQ=")",
            "spanId: expected 16 hex digits"},
           {R"("traceId":")" + t + R"(","spanId":"eee19b7ec3c1b17 ")",
            "spanId: expected 16 hex digits"},
           {R"("traceId":")" + t + R"(","spanId":")" + s + R"(","parentSpanId":"00")",
            "parentSpanId: expected 16 hex digits"},
           {R"("traceId":")" + t + R"(","spanId":")" + s + R"(","parentSpanId":0)",
            "parentSpanId: expected a string"},
           {R"("spanId":")" + s + "\"", "missing traceId"},
           {R"("traceId":null,"spanId":")" + s + "\"", "missing traceId"},
           {R"("traceId":")" + t + "\"", "missing spanId"},
       }) {
    SpanBatch b;
    std::string body = R"({"resourceSpans":[{"scopeSpans":[{"spans":[{)" + c.fields + "}]}]}]}";
    Status st = DecodeOtlpJson(body, b);
    ASSERT_FALSE(st.ok()) << c.fields;
    const std::string want = c.want.rfind("missing", 0) == 0
                                 ? std::string(kSpanPath) + ": " + c.want
                                 : std::string(kSpanPath) + "." + c.want;
    EXPECT_EQ(st.message(), want) << c.fields;
  }
  // Links need both ids too.
  EXPECT_EQ(ErrorOf(SpanWith(R"("links":[{"traceId":")" + t + "\"}]")),
            std::string(kSpanPath) + ".links[0]: missing spanId");
  EXPECT_EQ(ErrorOf(SpanWith(R"("links":[{},{"spanId":")" + s + "\"}]")),
            std::string(kSpanPath) + ".links[0]: missing traceId");
  EXPECT_EQ(ErrorOf(SpanWith(R"("links":[{"traceId":"abc","spanId":")" + s + "\"}]")),
            std::string(kSpanPath) + ".links[0].traceId: expected 32 hex digits");
}

TEST(OtlpJsonErrors, WrongTypesAndRanges) {
  struct Case {
    std::string fields;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {R"("name":5)", "name: expected a string"},
           {R"("name":{})", "name: expected a string"},
           {R"("traceState":[])", "traceState: expected a string"},
           {R"("kind":6)", "kind: enum value 6 out of range 0..5"},
           {R"("kind":-1)", "kind: enum value -1 out of range 0..5"},
           {R"("kind":1.5)", "kind: expected an enum name or number"},
           {R"("kind":"SERVER")", "kind: unknown enum value \"SERVER\""},
           {R"("kind":"2")", "kind: unknown enum value \"2\""},
           {R"("kind":true)", "kind: expected an enum name or number"},
           {R"("status":{"code":3})", "status.code: enum value 3 out of range 0..2"},
           {R"("status":{"code":"STATUS_CODE_FOO"})",
            "status.code: unknown enum value \"STATUS_CODE_FOO\""},
           {R"("status":{"message":1})", "status.message: expected a string"},
           {R"("status":"ok")", "status: expected an object"},
           {R"("flags":4294967296)", "flags: integer out of range"},
           {R"("flags":"-1")", "flags: integer out of range"},
           {R"("flags":1.5)", "flags: expected an integer"},
           {R"("startTimeUnixNano":"-1")", "startTimeUnixNano: integer out of range"},
           {R"("startTimeUnixNano":-1)", "startTimeUnixNano: integer out of range"},
           {R"("startTimeUnixNano":"18446744073709551616")",
            "startTimeUnixNano: integer out of range"},
           {R"("startTimeUnixNano":1.8446744073709552e19)",
            "startTimeUnixNano: integer out of range"},
           {R"("endTimeUnixNano":"abc")", "endTimeUnixNano: expected an integer"},
           {R"("endTimeUnixNano":"")", "endTimeUnixNano: expected an integer"},
           {R"("endTimeUnixNano":"1.0")", "endTimeUnixNano: expected an integer"},
           {R"("endTimeUnixNano":" 1")", "endTimeUnixNano: expected an integer"},
           {R"("endTimeUnixNano":"+1")", "endTimeUnixNano: expected an integer"},
           {R"("endTimeUnixNano":true)", "endTimeUnixNano: expected an integer"},
           {R"("endTimeUnixNano":[1])", "endTimeUnixNano: expected an integer"},
           {R"("droppedAttributesCount":"x")", "droppedAttributesCount: expected an integer"},
           {R"("droppedEventsCount":-5)", "droppedEventsCount: integer out of range"},
           {R"("droppedLinksCount":{})", "droppedLinksCount: expected an integer"},
           {R"("attributes":{})", "attributes: expected an array"},
           {R"("attributes":[[]])", "attributes[0]: expected an object"},
           {R"("attributes":[{"key":5}])", "attributes[0].key: expected a string"},
           {R"("attributes":[{"key":"k","value":"v"}])", "attributes[0].value: expected an object"},
           {R"("events":{})", "events: expected an array"},
           {R"("events":[{},{"timeUnixNano":"x"}])", "events[1].timeUnixNano: expected an integer"},
           {R"("events":[{"name":1}])", "events[0].name: expected a string"},
           {R"("events":[{"attributes":[{"key":"a","value":{"intValue":"z"}}]}])",
            "events[0].attributes[0].value.intValue: expected an integer"},
           {R"("links":[5])", "links[0]: expected an object"},
       }) {
    EXPECT_EQ(ErrorOf(SpanWith(c.fields)), std::string(kSpanPath) + "." + c.want) << c.fields;
  }
}

TEST(OtlpJsonErrors, BadValues) {
  const std::string v = std::string(kAttrPath) + ".value.";
  struct Case {
    const char* json;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"boolValue":"true"})", "boolValue: expected true or false"},
           {R"({"boolValue":1})", "boolValue: expected true or false"},
           {R"({"stringValue":1})", "stringValue: expected a string"},
           {R"({"stringValue":"a","intValue":1})",
            "intValue: AnyValue has more than one value set"},
           {R"({"stringValue":"a","string_value":"b"})",
            "stringValue: AnyValue has more than one value set"},
           {R"({"intValue":"9223372036854775808"})", "intValue: integer out of range"},
           {R"({"intValue":9223372036854775808})", "intValue: integer out of range"},
           {R"({"intValue":18446744073709551615})", "intValue: integer out of range"},
           {R"({"intValue":"-9223372036854775809"})", "intValue: integer out of range"},
           {R"({"intValue":"99999999999999999999999"})", "intValue: integer out of range"},
           {R"({"intValue":1e19})", "intValue: integer out of range"},
           {R"({"intValue":-1e19})", "intValue: integer out of range"},
           {R"({"intValue":1.5})", "intValue: expected an integer"},
           {R"({"intValue":"1.5"})", "intValue: expected an integer"},
           {R"({"intValue":"0x10"})", "intValue: expected an integer"},
           {R"({"intValue":"-"})", "intValue: expected an integer"},
           {R"({"intValue":true})", "intValue: expected an integer"},
           {R"({"doubleValue":"abc"})", "doubleValue: expected a number"},
           {R"({"doubleValue":"inf"})", "doubleValue: expected a number"},
           {R"({"doubleValue":"nan"})", "doubleValue: expected a number"},
           {R"({"doubleValue":"-nan"})", "doubleValue: expected a number"},
           {R"({"doubleValue":"1.5x"})", "doubleValue: expected a number"},
           {R"({"doubleValue":""})", "doubleValue: expected a number"},
           {R"({"doubleValue":"1e999"})", "doubleValue: number out of range"},
           {R"({"doubleValue":true})", "doubleValue: expected a number"},
           {R"({"doubleValue":[1]})", "doubleValue: expected a number"},
           {R"({"bytesValue":"a!b="})", "bytesValue: invalid base64"},
           {R"({"bytesValue":"abcde"})", "bytesValue: invalid base64"},
           {R"({"bytesValue":"ab cd"})", "bytesValue: invalid base64"},
           {R"({"bytesValue":5})", "bytesValue: expected a string"},
           {R"({"arrayValue":[]})", "arrayValue: expected an object"},
           {R"({"arrayValue":{"values":{}}})", "arrayValue.values: expected an array"},
           {R"({"arrayValue":{"values":[{},5]}})", "arrayValue.values[1]: expected an object"},
           {R"({"arrayValue":{"values":[null]}})", "arrayValue.values[0]: expected an object"},
           {R"({"kvlistValue":"x"})", "kvlistValue: expected an object"},
           {R"({"kvlistValue":{"values":[{"key":"a"},7]}})",
            "kvlistValue.values[1]: expected an object"},
           {R"({"kvlistValue":{"values":[{"key":[]}]}})",
            "kvlistValue.values[0].key: expected a string"},
           {R"({"arrayValue":{"values":[{"intValue":1},{"kvlistValue":{"values":[)"
            R"({"key":"a","value":{"intValue":"x"}}]}}]}})",
            "arrayValue.values[1].kvlistValue.values[0].value.intValue: expected an integer"},
           {R"({"kvlistValue":{"values":[{"key":"a","value":{"bytesValue":"***"}}]}})",
            "kvlistValue.values[0].value.bytesValue: invalid base64"},
       }) {
    EXPECT_EQ(AttrError(c.json), v + c.want) << c.json;
  }
}

TEST(OtlpJsonErrors, ErrorsAreInvalidArgument) {
  SpanBatch b;
  Status st = DecodeOtlpJson("{", b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(st.retryable());
}

// ---- robustness ----

TEST(OtlpJsonRobustness, EveryPrefixOfAValidPayload) {
  for (std::string_view full : {kFull, kFullSnake}) {
    SpanBatch whole;
    ASSERT_TRUE(DecodeOtlpJson(full, whole).ok());
    for (size_t n = 0; n < full.size(); ++n) {
      SpanBatch b;
      // A copy of exactly n bytes, so ASan sees any read past the end.
      std::string prefix(full.substr(0, n));
      Status st = DecodeOtlpJson(prefix, b);
      EXPECT_TRUE(!st.ok() || b.span_count() < whole.span_count()) << n;
    }
  }
}

TEST(OtlpJsonRobustness, MutatedPayloadsNeverCrash) {
  static constexpr char kInteresting[] = "{}[]\":,0-9e.\\nutfalse\x00\xff ";
  uint64_t rng = 0x9E3779B97F4A7C15u;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  int ok = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string body(iter % 2 ? kFull : kFullSnake);
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = next() % body.size();
      const char c = kInteresting[next() % (sizeof(kInteresting) - 1)];
      switch (next() % 3) {
        case 0:
          body[at] = c;
          break;
        case 1:
          body.insert(body.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          body.erase(at, 1 + next() % 8);
          break;
      }
    }
    SpanBatch b;
    Status st = DecodeOtlpJson(body, b);
    if (st.ok()) {
      ++ok;
      ExpectConsistent(b);
    } else {
      EXPECT_FALSE(st.message().empty());
    }
  }
  // Some mutations (inside strings, say) keep the payload valid.
  EXPECT_GT(ok, 0);
}

TEST(OtlpJsonRobustness, LargeBodiesThenSmallOnes) {
  // Over the size whose buffers a thread keeps: decoded, then released, then
  // the parser is usable again.
  const std::string big_string(5 << 20, 'x');
  std::string big_array = R"({"arrayValue":{"values":[{"intValue":7},)";
  for (int i = 0; i < 20000; ++i) big_array += R"({"boolValue":true},)";
  big_array += R"({"stringValue":")" + big_string + "\"}]}}";
  for (int round = 0; round < 2; ++round) {
    Attr a = OneAttr(R"({"stringValue":")" + big_string + "\"}");
    EXPECT_EQ(a.value.size(), big_string.size());
    a = OneAttr(big_array);
    EXPECT_EQ(a.value.size(), 3 + 20000 * 5 + big_string.size() + 3);
    EXPECT_EQ(OneAttr(R"({"intValue":1})").value, "1");
    EXPECT_EQ(ErrorOf(std::string(6 << 20, '[')).rfind("invalid JSON: ", 0), 0u);
    SpanBatch b;
    ASSERT_TRUE(DecodeOtlpJson(kFull, b).ok());
  }
}

// ---- the response ----

TEST(OtlpJsonResponse, Encode) {
  EXPECT_EQ(EncodeExportResponseJson(0, ""), "{}");
  EXPECT_EQ(EncodeExportResponseJson(3, "bad spans"),
            R"({"partialSuccess":{"rejectedSpans":"3","errorMessage":"bad spans"}})");
  EXPECT_EQ(EncodeExportResponseJson(3, ""), R"({"partialSuccess":{"rejectedSpans":"3"}})");
  EXPECT_EQ(EncodeExportResponseJson(0, "warning"),
            R"({"partialSuccess":{"errorMessage":"warning"}})");
  EXPECT_EQ(EncodeExportResponseJson(INT64_MAX, "a\"b\\c\nd\x01"),
            R"({"partialSuccess":{"rejectedSpans":"9223372036854775807",)"
            R"("errorMessage":"a\"b\\c\nd\u0001"}})");
}

}  // namespace
}  // namespace spanhouse::codec
