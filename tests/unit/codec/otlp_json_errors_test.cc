// Tests of the OTLP/JSON decoder's errors (each names its path), its
// robustness on truncated and mutated input, and the JSON export response.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/otlp.h"
#include "model/span_batch.h"
#include "testdata/attrs.h"
#include "unit/codec/otlp_json_test_util.h"

namespace spanhouse::codec {
namespace {

using testdata::Attr;

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