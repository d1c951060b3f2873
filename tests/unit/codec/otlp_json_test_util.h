// Helpers of the OTLP/JSON decoder's tests (otlp_json_test.cc,
// otlp_json_errors_test.cc): one-span requests, the paths errors name, a
// full request in camelCase and in snake_case, and a check that every
// range of a batch lies inside its column.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "codec/otlp.h"
#include "model/span_batch.h"
#include "testdata/attrs.h"

namespace spanhouse::codec {

inline constexpr std::string_view kTraceId = "5b8efff798038103d269b633813fc60c";
inline constexpr std::string_view kSpanId = "eee19b7ec3c1b174";

// A request with one span whose attribute list is `attrs` (JSON array text).
inline std::string OneSpan(std::string_view attrs) {
  return R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":")" + std::string(kTraceId) +
         R"(","spanId":")" + std::string(kSpanId) + R"(","attributes":)" + std::string(attrs) +
         "}]}]}]}";
}

// A request with one span whose extra members are `fields` (JSON object members).
inline std::string SpanWith(std::string_view fields) {
  return R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":")" + std::string(kTraceId) +
         R"(","spanId":")" + std::string(kSpanId) + "\"" + (fields.empty() ? "" : ",") +
         std::string(fields) + "}]}]}]}";
}

// Decodes a one-attribute span and returns that attribute.
inline testdata::Attr OneAttr(std::string_view any_value) {
  SpanBatch b;
  std::string body = OneSpan(R"([{"key":"k","value":)" + std::string(any_value) + "}]");
  Status st = DecodeOtlpJson(body, b);
  EXPECT_TRUE(st.ok()) << any_value << ": " << st.message();
  if (!st.ok() || b.span_count() != 1) return {};
  auto attrs = testdata::Attrs(b, b.span_attrs, b.spans.attrs[0]);
  EXPECT_EQ(attrs.size(), 1u);
  return attrs.empty() ? testdata::Attr{} : attrs[0];
}

inline std::string ErrorOf(std::string_view body) {
  SpanBatch b;
  Status st = DecodeOtlpJson(body, b);
  EXPECT_FALSE(st.ok()) << body;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << body;
  return st.message();
}

inline std::string AttrError(std::string_view any_value) {
  return ErrorOf(OneSpan(R"([{"key":"k","value":)" + std::string(any_value) + "}]"));
}

inline constexpr std::string_view kAttrPath =
    "resourceSpans[0].scopeSpans[0].spans[0].attributes[0]";
inline constexpr std::string_view kSpanPath = "resourceSpans[0].scopeSpans[0].spans[0]";

// Every Range of the batch lies inside its child column.
inline void ExpectConsistent(const SpanBatch& b) {
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
inline constexpr std::string_view kFull = R"json({
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
inline constexpr std::string_view kFullSnake = R"json({
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

}  // namespace spanhouse::codec
