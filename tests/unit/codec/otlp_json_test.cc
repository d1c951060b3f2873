// Tests of the OTLP/JSON decoder: every field, attribute values, structure.
// Its errors, robustness and the JSON export response: otlp_json_errors_test.cc.
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
#include "unit/codec/otlp_json_test_util.h"

namespace spanhouse::codec {
namespace {

using namespace std::string_literals;
using testdata::Attr;
using testdata::Attrs;

std::string Str(const SpanBatch& b, StrRef r) {
  return std::string(b.Str(r));
}

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

}  // namespace
}  // namespace spanhouse::codec
