// Tests for the hand-written OTLP/protobuf decoder. Payloads are built with a
// tiny protobuf encoder below, so every byte on the wire is under the test's
// control: field order, unknown fields, broken lengths and wire types.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/otlp.h"
#include "model/span_batch.h"
#include "testdata/attrs.h"
#include "testdata/pb.h"

namespace spanhouse::codec {
namespace {

using testdata::Attr;
using testdata::Attrs;
using testdata::Pb;

std::string Id(size_t n, uint8_t seed) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(seed + i);
  return s;
}
std::string Tid(uint8_t seed) {
  return Id(16, seed);
}
std::string Sid(uint8_t seed) {
  return Id(8, seed);
}

template <size_t N>
std::string IdStr(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

// AnyValue builders.
Pb AStr(std::string_view v) {
  return Pb().Bytes(1, v);
}
Pb ABool(bool v) {
  return Pb().Varint(2, v ? 1 : 0);
}
Pb AInt(int64_t v) {
  return Pb().Varint(3, static_cast<uint64_t>(v));
}
Pb ADouble(double v) {
  return Pb().Double(4, v);
}
Pb ABytes(std::string_view v) {
  return Pb().Bytes(7, v);
}
Pb AEmpty() {
  return Pb();
}
Pb AArray(std::initializer_list<Pb> vs) {
  Pb arr;
  for (const Pb& v : vs) arr.Msg(1, v);
  return Pb().Msg(5, arr);
}
Pb KV(std::string_view k, const Pb& v) {
  return Pb().Bytes(1, k).Msg(2, v);
}
Pb KVNoValue(std::string_view k) {
  return Pb().Bytes(1, k);
}
Pb AKvList(std::initializer_list<Pb> kvs) {
  Pb list;
  for (const Pb& kv : kvs) list.Msg(1, kv);
  return Pb().Msg(6, list);
}

// A minimal valid span.
Pb MinSpan(uint8_t seed, std::string_view name = "op") {
  return Pb().Bytes(1, Tid(seed)).Bytes(2, Sid(seed)).Bytes(5, name);
}

// One ResourceSpans holding one ScopeSpans holding `spans`.
Pb Request(std::initializer_list<Pb> spans) {
  Pb scope_spans;
  for (const Pb& s : spans) scope_spans.Msg(2, s);
  return Pb().Msg(1, Pb().Msg(2, scope_spans));
}

// What a decode must leave behind even when it fails: every range and
// string reference inside its column / the arena.
void CheckInvariants(const SpanBatch& b) {
  const uint64_t arena = b.BeginString();
  auto str_ok = [&](StrRef r) { return uint64_t{r.off} + r.len <= arena; };
  auto range_ok = [](Range r, size_t n) { return r.begin <= r.end && r.end <= n; };
  auto attrs_ok = [&](const AttrColumns& c) {
    ASSERT_EQ(c.key.size(), c.type.size());
    ASSERT_EQ(c.key.size(), c.value.size());
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_TRUE(str_ok(c.key[i]));
      ASSERT_TRUE(str_ok(c.value[i]));
      ASSERT_LE(static_cast<int>(c.type[i]), 7);
    }
  };
  attrs_ok(b.resource_attrs);
  attrs_ok(b.scope_attrs);
  attrs_ok(b.span_attrs);
  attrs_ok(b.event_attrs);
  attrs_ok(b.link_attrs);
  for (size_t r = 0; r < b.resources.attrs.size(); ++r) {
    ASSERT_TRUE(range_ok(b.resources.attrs[r], b.resource_attrs.size()));
    ASSERT_TRUE(str_ok(b.resources.schema_url[r]));
    ASSERT_TRUE(str_ok(b.resources.service_name[r]));
  }
  for (size_t s = 0; s < b.scopes.name.size(); ++s) {
    ASSERT_TRUE(range_ok(b.scopes.attrs[s], b.scope_attrs.size()));
    ASSERT_TRUE(str_ok(b.scopes.name[s]));
    ASSERT_TRUE(str_ok(b.scopes.version[s]));
  }
  for (size_t i = 0; i < b.span_count(); ++i) {
    ASSERT_LT(b.spans.resource[i], b.resources.attrs.size());
    ASSERT_LT(b.spans.scope[i], b.scopes.name.size());
    ASSERT_TRUE(range_ok(b.spans.attrs[i], b.span_attrs.size()));
    ASSERT_TRUE(range_ok(b.spans.events[i], b.events.time_ns.size()));
    ASSERT_TRUE(range_ok(b.spans.links[i], b.links.trace_id.size()));
    ASSERT_TRUE(str_ok(b.spans.name[i]));
    ASSERT_TRUE(str_ok(b.spans.trace_state[i]));
    ASSERT_TRUE(str_ok(b.spans.status_message[i]));
    ASSERT_LE(b.spans.kind[i], 5);
    ASSERT_LE(b.spans.status_code[i], 2);
  }
  for (size_t e = 0; e < b.events.time_ns.size(); ++e) {
    ASSERT_TRUE(range_ok(b.events.attrs[e], b.event_attrs.size()));
    ASSERT_TRUE(str_ok(b.events.name[e]));
  }
  for (size_t l = 0; l < b.links.trace_id.size(); ++l) {
    ASSERT_TRUE(range_ok(b.links.attrs[l], b.link_attrs.size()));
    ASSERT_TRUE(str_ok(b.links.trace_state[l]));
  }
}

Status Decode(const Pb& body, SpanBatch& b) {
  Status st = DecodeOtlpProto(body.str(), b);
  CheckInvariants(b);
  return st;
}

// Decodes a request whose only span carries one attribute with `value`;
// returns that attribute.
Attr DecodeOneValue(const Pb& value) {
  SpanBatch b;
  Status st = Decode(Request({MinSpan(1).Msg(9, KV("k", value))}), b);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok() || b.span_attrs.size() != 1) return {};
  return Attrs(b, b.span_attrs, b.spans.attrs[0])[0];
}

// A payload touching every message and field, used by the fuzz-ish tests.
Pb RichRequest() {
  Pb resource = Pb().Msg(1, KV("service.name", AStr("checkout")))
                    .Msg(1, KV("host", AArray({AStr("a"), AInt(-1), AEmpty()})))
                    .Varint(2, 3);
  Pb scope = Pb().Bytes(1, "lib").Bytes(2, "1.0").Msg(3, KV("s", ABool(true))).Varint(4, 1);
  Pb event = Pb().Fixed64(1, 42).Bytes(2, "ev").Msg(3, KV("e", ADouble(0.5))).Varint(4, 2);
  Pb link = Pb().Bytes(1, Tid(9))
                .Bytes(2, Sid(9))
                .Bytes(3, "ts")
                .Msg(4, KV("l", AKvList({KV("x", AArray({AInt(1)}))})))
                .Varint(5, 4)
                .Fixed32(6, 0x301);
  Pb span = MinSpan(1)
                .Bytes(3, "state")
                .Bytes(4, Sid(7))
                .Varint(6, 2)
                .Fixed64(7, 1000)
                .Fixed64(8, 2000)
                .Msg(9, KV("http.method", AStr("GET")))
                .Varint(10, 5)
                .Msg(11, event)
                .Varint(12, 6)
                .Msg(13, link)
                .Varint(14, 7)
                .Msg(15, Pb().Bytes(2, "boom").Varint(3, 2))
                .Fixed32(16, 1);
  Pb scope_spans = Pb().Msg(1, scope).Msg(2, span).Msg(2, MinSpan(2)).Bytes(3, "scope-url");
  Pb rs = Pb().Msg(1, resource).Msg(2, scope_spans).Bytes(3, "res-url");
  return Pb().Msg(1, rs).Msg(1, Pb().Msg(2, Pb().Msg(2, MinSpan(3))));
}

// ---- decoding ----

TEST(OtlpProtoDecode, EmptyBodyIsAnEmptyRequest) {
  SpanBatch b;
  ASSERT_TRUE(DecodeOtlpProto("", b).ok());
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.resources.attrs.empty());
}

TEST(OtlpProtoDecode, EverySpanField) {
  Pb span = Pb().Bytes(1, Tid(0x10))
                .Bytes(2, Sid(0x20))
                .Bytes(3, "rojo=00f067aa0ba902b7")
                .Bytes(4, Sid(0x30))
                .Bytes(5, "GET /cart")
                .Varint(6, 3)
                .Fixed64(7, 1700000000123456789ull)
                .Fixed64(8, 1700000000987654321ull)
                .Msg(9, KV("http.status_code", AInt(500)))
                .Varint(10, 11)
                .Varint(12, 12)
                .Varint(14, 14)
                .Msg(15, Pb().Bytes(2, "upstream failed").Varint(3, 2))
                .Fixed32(16, 0x101);
  SpanBatch b;
  Status st = Decode(Request({span}), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 1u);
  const auto& s = b.spans;
  EXPECT_EQ(IdStr(s.trace_id[0]), Tid(0x10));
  EXPECT_EQ(IdStr(s.span_id[0]), Sid(0x20));
  EXPECT_EQ(IdStr(s.parent_span_id[0]), Sid(0x30));
  EXPECT_EQ(b.Str(s.trace_state[0]), "rojo=00f067aa0ba902b7");
  EXPECT_EQ(b.Str(s.name[0]), "GET /cart");
  EXPECT_EQ(s.kind[0], static_cast<uint8_t>(SpanKind::kClient));
  EXPECT_EQ(s.start_ns[0], 1700000000123456789ull);
  EXPECT_EQ(s.end_ns[0], 1700000000987654321ull);
  EXPECT_EQ(Attrs(b, b.span_attrs, s.attrs[0]),
            (std::vector<Attr>{{"http.status_code", ValueType::kInt, "500"}}));
  EXPECT_EQ(s.dropped_attributes_count[0], 11u);
  EXPECT_EQ(s.dropped_events_count[0], 12u);
  EXPECT_EQ(s.dropped_links_count[0], 14u);
  EXPECT_EQ(s.status_code[0], static_cast<uint8_t>(StatusCodeOtlp::kError));
  EXPECT_EQ(b.Str(s.status_message[0]), "upstream failed");
  EXPECT_EQ(s.flags[0], 0x101u);
  EXPECT_EQ(s.events[0].size(), 0u);
  EXPECT_EQ(s.links[0].size(), 0u);
  EXPECT_EQ(s.resource[0], 0u);
  EXPECT_EQ(s.scope[0], 0u);
}

TEST(OtlpProtoDecode, DefaultsForAbsentFields) {
  SpanBatch b;
  ASSERT_TRUE(Decode(Request({Pb().Bytes(1, Tid(1)).Bytes(2, Sid(1))}), b).ok());
  const auto& s = b.spans;
  EXPECT_TRUE(IsZero(s.parent_span_id[0]));
  EXPECT_EQ(b.Str(s.name[0]), "");
  EXPECT_EQ(b.Str(s.trace_state[0]), "");
  EXPECT_EQ(s.kind[0], 0);
  EXPECT_EQ(s.status_code[0], 0);
  EXPECT_EQ(s.flags[0], 0u);
  EXPECT_EQ(s.start_ns[0], 0u);
  EXPECT_EQ(b.Str(b.resources.service_name[0]), "missing-service-name");
}

TEST(OtlpProtoDecode, EmptyParentSpanIdIsARoot) {
  SpanBatch b;
  ASSERT_TRUE(Decode(Request({MinSpan(1).Bytes(4, "")}), b).ok());
  EXPECT_TRUE(IsZero(b.spans.parent_span_id[0]));
}

TEST(OtlpProtoDecode, StatusDeprecatedCodeIsIgnored) {
  SpanBatch b;
  Status st = Decode(Request({MinSpan(1).Msg(15, Pb().Varint(1, 2).Varint(3, 1))}), b);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(b.spans.status_code[0], static_cast<uint8_t>(StatusCodeOtlp::kOk));
  EXPECT_EQ(b.Str(b.spans.status_message[0]), "");
}

TEST(OtlpProtoDecode, ResourceAndScope) {
  Pb resource = Pb().Msg(1, KV("host.name", AStr("web-1")))
                    .Msg(1, KV("service.name", AStr("cart")))
                    .Msg(1, KV("pid", AInt(42)))
                    .Varint(2, 2);
  Pb scope = Pb().Bytes(1, "io.opentelemetry.http")
                 .Bytes(2, "1.2.3")
                 .Msg(3, KV("scope.attr", ABool(false)))
                 .Varint(4, 9);
  Pb scope_spans = Pb().Msg(1, scope).Msg(2, MinSpan(1)).Bytes(3, "https://scope/schema");
  Pb rs = Pb().Msg(1, resource).Msg(2, scope_spans).Bytes(3, "https://opentelemetry.io/1.21");
  SpanBatch b;
  Status st = Decode(Pb().Msg(1, rs), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.resources.attrs.size(), 1u);
  EXPECT_EQ(Attrs(b, b.resource_attrs, b.resources.attrs[0]),
            (std::vector<Attr>{{"host.name", ValueType::kString, "web-1"},
                               {"service.name", ValueType::kString, "cart"},
                               {"pid", ValueType::kInt, "42"}}));
  EXPECT_EQ(b.resources.dropped_attributes_count[0], 2u);
  EXPECT_EQ(b.Str(b.resources.schema_url[0]), "https://opentelemetry.io/1.21");
  EXPECT_EQ(b.Str(b.resources.service_name[0]), "cart");
  ASSERT_EQ(b.scopes.name.size(), 1u);
  EXPECT_EQ(b.Str(b.scopes.name[0]), "io.opentelemetry.http");
  EXPECT_EQ(b.Str(b.scopes.version[0]), "1.2.3");
  EXPECT_EQ(Attrs(b, b.scope_attrs, b.scopes.attrs[0]),
            (std::vector<Attr>{{"scope.attr", ValueType::kBool, "false"}}));
  EXPECT_EQ(b.scopes.dropped_attributes_count[0], 9u);
  EXPECT_EQ(b.Str(b.scopes.schema_url[0]), "https://scope/schema");
}

TEST(OtlpProtoValues, Scalars) {
  EXPECT_EQ(DecodeOneValue(AStr("hello")), (Attr{"k", ValueType::kString, "hello"}));
  EXPECT_EQ(DecodeOneValue(AStr("")), (Attr{"k", ValueType::kString, ""}));
  EXPECT_EQ(DecodeOneValue(ABool(true)), (Attr{"k", ValueType::kBool, "true"}));
  EXPECT_EQ(DecodeOneValue(ABool(false)), (Attr{"k", ValueType::kBool, "false"}));
  EXPECT_EQ(DecodeOneValue(AInt(0)), (Attr{"k", ValueType::kInt, "0"}));
  EXPECT_EQ(DecodeOneValue(AInt(-42)), (Attr{"k", ValueType::kInt, "-42"}));
  EXPECT_EQ(DecodeOneValue(AInt(std::numeric_limits<int64_t>::min())),
            (Attr{"k", ValueType::kInt, "-9223372036854775808"}));
  EXPECT_EQ(DecodeOneValue(AInt(std::numeric_limits<int64_t>::max())),
            (Attr{"k", ValueType::kInt, "9223372036854775807"}));
  EXPECT_EQ(DecodeOneValue(ADouble(1.5)), (Attr{"k", ValueType::kDouble, "1.5"}));
  EXPECT_EQ(DecodeOneValue(ADouble(0.1)), (Attr{"k", ValueType::kDouble, "0.1"}));
  EXPECT_EQ(DecodeOneValue(ADouble(-2e300)), (Attr{"k", ValueType::kDouble, "-2e+300"}));
  EXPECT_EQ(DecodeOneValue(ADouble(std::nan(""))), (Attr{"k", ValueType::kDouble, "NaN"}));
  EXPECT_EQ(DecodeOneValue(ADouble(-INFINITY)), (Attr{"k", ValueType::kDouble, "-Infinity"}));
  // Bytes (and strings) are kept raw, invalid UTF-8 included.
  const std::string raw("\x00\xff\xfe\x80", 4);
  EXPECT_EQ(DecodeOneValue(ABytes(raw)), (Attr{"k", ValueType::kBytes, raw}));
  EXPECT_EQ(DecodeOneValue(AStr(raw)), (Attr{"k", ValueType::kString, raw}));
}

// The common layout (key, then a value with one scalar) is read by a fast
// path; the same attribute with an unknown field appended to the KeyValue
// must take the general path and decode identically, at every boundary the
// fast path checks (1- and 2-byte lengths, 10-byte varints, long keys).
TEST(OtlpProtoValues, FastAndGeneralPathsAgree) {
  const std::string long_key(200, 'k');
  const std::string long_value(20000, 'v');  // a 3-byte length: general path only
  const std::vector<std::pair<std::string, Pb>> cases = {
      {"k", AStr("hello")},
      {"k", AStr("")},
      {"", AStr("empty key")},
      {long_key, AStr(std::string(300, 'x'))},
      {"k", AStr(long_value)},
      {"k", AInt(0)},
      {"k", AInt(-1)},
      {"k", AInt(std::numeric_limits<int64_t>::min())},
      {"k", AInt(std::numeric_limits<int64_t>::max())},
      {"k", ABool(true)},
      {"k", ABool(false)},
      {"k", Pb().Varint(2, 2)},    // a bool sent as 2 is true
      {"k", Pb().Varint(2, 300)},  // ... also with a 2-byte varint
      {"k", ADouble(0.1)},
      {"k", ADouble(-INFINITY)},
      {"k", ABytes("raw")},
      {"k", AEmpty()},
  };
  for (const auto& [key, value] : cases) {
    SpanBatch fast;
    SpanBatch general;
    ASSERT_TRUE(Decode(Request({MinSpan(1).Msg(9, KV(key, value))}), fast).ok());
    ASSERT_TRUE(Decode(Request({MinSpan(1).Msg(9, KV(key, value).Varint(15, 1))}), general).ok());
    EXPECT_EQ(Attrs(fast, fast.span_attrs, fast.spans.attrs[0]),
              Attrs(general, general.span_attrs, general.spans.attrs[0]))
        << key.substr(0, 8);
  }
  // Spot-check the fast path's own answers.
  SpanBatch b;
  ASSERT_TRUE(Decode(Request({MinSpan(1).Msg(9, KV("n", Pb().Varint(2, 300)))}), b).ok());
  EXPECT_EQ(Attrs(b, b.span_attrs, b.spans.attrs[0]),
            (std::vector<Attr>{{"n", ValueType::kBool, "true"}}));
}

TEST(OtlpProtoValues, NegativeZeroInAnArrayKeepsItsSign) {
  // Found by tests/fuzz: written "-0", it read back as the integer 0 (the encoder sent [0]).
  EXPECT_EQ(DecodeOneValue(AArray({ADouble(-0.0), ADouble(0.0), AInt(0)})),
            (Attr{"k", ValueType::kArray, "[-0.0,0,0]"}));
  EXPECT_EQ(DecodeOneValue(AKvList({KV("z", ADouble(-0.0))})),
            (Attr{"k", ValueType::kKvList, "{\"z\":-0.0}"}));
  // Outside JSON text the type is kept beside the value: "-0" is unambiguous there.
  EXPECT_EQ(DecodeOneValue(ADouble(-0.0)), (Attr{"k", ValueType::kDouble, "-0"}));
}

TEST(OtlpProtoValues, EmptyValues) {
  // An AnyValue with nothing set, and a KeyValue without a value at all.
  EXPECT_EQ(DecodeOneValue(AEmpty()), (Attr{"k", ValueType::kEmpty, ""}));
  SpanBatch b;
  ASSERT_TRUE(Decode(Request({MinSpan(1).Msg(9, KVNoValue("novalue"))}), b).ok());
  EXPECT_EQ(Attrs(b, b.span_attrs, b.spans.attrs[0]),
            (std::vector<Attr>{{"novalue", ValueType::kEmpty, ""}}));
}

TEST(OtlpProtoValues, ArrayWithMixedElements) {
  Pb arr = AArray({AStr("a\"b\n"), ABool(true), AInt(-7), ADouble(2.5),
                   ABytes(std::string("\x00\xff", 2)), AEmpty(), AArray({AInt(1), AInt(2)}),
                   AArray({}), AStr("bad\xff"), ADouble(INFINITY), AKvList({KV("x", AStr("y"))})});
  // Bytes in JSON are base64; invalid UTF-8 in strings becomes U+FFFD.
  EXPECT_EQ(DecodeOneValue(arr),
            (Attr{"k", ValueType::kArray,
                  "[\"a\\\"b\\n\",true,-7,2.5,\"AP8=\",null,[1,2],[],\"bad\xEF\xBF\xBD\","
                  "\"Infinity\",{\"x\":\"y\"}]"}));
  std::string null_bytes("\x00\xff", 2);
  EXPECT_EQ(DecodeOneValue(AArray({ABytes(null_bytes)})),
            (Attr{"k", ValueType::kArray, "[\"AP8=\"]"}));
  EXPECT_EQ(DecodeOneValue(AArray({})), (Attr{"k", ValueType::kArray, "[]"}));
}

TEST(OtlpProtoValues, KvListWithNestedArray) {
  Pb kv = AKvList({KV("name", AStr("x")), KV("list", AArray({AInt(1), AStr("two"), ABool(false)})),
                   KVNoValue("none"), KV("empty", AEmpty()), KV("d", ADouble(-0.25)),
                   KV("q\"k", AKvList({}))});
  EXPECT_EQ(DecodeOneValue(kv),
            (Attr{"k", ValueType::kKvList,
                  "{\"name\":\"x\",\"list\":[1,\"two\",false],\"none\":null,\"empty\":null,"
                  "\"d\":-0.25,\"q\\\"k\":{}}"}));
  EXPECT_EQ(DecodeOneValue(AKvList({})), (Attr{"k", ValueType::kKvList, "{}"}));
}

TEST(OtlpProtoValues, LastOneofMemberWins) {
  // Protobuf semantics for a oneof set twice on the wire: the last one counts.
  EXPECT_EQ(DecodeOneValue(Pb().Bytes(1, "s").Varint(3, 5)), (Attr{"k", ValueType::kInt, "5"}));
  EXPECT_EQ(DecodeOneValue(Pb().Varint(3, 5).Bytes(1, "s")), (Attr{"k", ValueType::kString, "s"}));
}

TEST(OtlpProtoValues, ValueBeforeKey) {
  SpanBatch b;
  Pb kv = Pb().Msg(2, AStr("v")).Bytes(1, "key");
  ASSERT_TRUE(Decode(Request({MinSpan(1).Msg(9, kv)}), b).ok());
  EXPECT_EQ(Attrs(b, b.span_attrs, b.spans.attrs[0]),
            (std::vector<Attr>{{"key", ValueType::kString, "v"}}));
}

TEST(OtlpProtoValues, NestingUpToSixteenLevels) {
  // Level 1 is the attribute's own value; each array adds a level.
  auto nest = [](int levels) {
    Pb v = AInt(1);
    for (int i = 1; i < levels; ++i) v = AArray({v});
    return v;
  };
  Attr a = DecodeOneValue(nest(16));
  EXPECT_EQ(a.type, ValueType::kArray);
  EXPECT_EQ(a.value, std::string(15, '[') + "1" + std::string(15, ']'));

  SpanBatch b;
  Status st = Decode(Request({MinSpan(1).Msg(9, KV("deep", nest(17)))}), b);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "span 0 attribute 'deep': value nested deeper than 16 levels");

  // Same through kvlists, on a resource.
  Pb kv = AInt(1);
  for (int i = 1; i < 17; ++i) kv = AKvList({KV("a", kv)});
  SpanBatch b2;
  Pb req = Pb().Msg(1, Pb().Msg(1, Pb().Msg(1, KV("r", kv))));
  st = Decode(req, b2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "resource 0 attribute 'r': value nested deeper than 16 levels");
}

TEST(OtlpProtoValues, VeryDeepNestingIsRejectedWithoutRecursingFar) {
  // 100000 levels of arrays: must fail cleanly (a naive recursive decoder
  // would blow the stack on this).
  // Each level is AnyValue{5: ArrayValue{1: <inner>}}: only a prefix of two
  // tags and two lengths, so the payload is built inside out in linear time.
  constexpr int kLevels = 100000;
  const std::string innermost = AInt(1).str();
  std::vector<std::string> prefixes(kLevels);
  size_t inner_size = innermost.size();
  for (int i = kLevels - 1; i >= 0; --i) {
    Pb arr_head = Pb().Tag(1, 2).PutVarint(inner_size);
    const size_t arr_size = arr_head.str().size() + inner_size;
    prefixes[i] = Pb().Tag(5, 2).PutVarint(arr_size).str() + arr_head.str();
    inner_size = prefixes[i].size() + inner_size;
  }
  std::string v;
  v.reserve(inner_size);
  for (const std::string& p : prefixes) v += p;
  v += innermost;
  ASSERT_EQ(v.size(), inner_size);
  SpanBatch b;
  Status st = Decode(Request({MinSpan(1).Msg(9, Pb().Bytes(1, "k").Bytes(2, v))}), b);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "span 0 attribute 'k': value nested deeper than 16 levels");
}

TEST(OtlpProtoDecode, EventsWithAttributes) {
  Pb e1 = Pb().Fixed64(1, 111)
              .Bytes(2, "exception")
              .Msg(3, KV("exception.type", AStr("IOError")))
              .Msg(3, KV("exception.escaped", ABool(true)))
              .Varint(4, 3);
  Pb e2 = Pb().Fixed64(1, 222).Bytes(2, "retry");
  SpanBatch b;
  Status st = Decode(Request({MinSpan(1).Msg(11, e1).Msg(11, e2), MinSpan(2).Msg(11, e2)}), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.events.time_ns.size(), 3u);
  EXPECT_EQ(b.spans.events[0].begin, 0u);
  EXPECT_EQ(b.spans.events[0].end, 2u);
  EXPECT_EQ(b.spans.events[1].begin, 2u);
  EXPECT_EQ(b.spans.events[1].end, 3u);
  EXPECT_EQ(b.events.time_ns[0], 111u);
  EXPECT_EQ(b.Str(b.events.name[0]), "exception");
  EXPECT_EQ(Attrs(b, b.event_attrs, b.events.attrs[0]),
            (std::vector<Attr>{{"exception.type", ValueType::kString, "IOError"},
                               {"exception.escaped", ValueType::kBool, "true"}}));
  EXPECT_EQ(b.events.dropped_attributes_count[0], 3u);
  EXPECT_EQ(b.events.time_ns[1], 222u);
  EXPECT_EQ(b.Str(b.events.name[1]), "retry");
  EXPECT_EQ(b.events.attrs[1].size(), 0u);
  EXPECT_EQ(b.events.dropped_attributes_count[1], 0u);
  EXPECT_EQ(b.events.time_ns[2], 222u);
}

TEST(OtlpProtoDecode, LinksWithAttributesAndFlags) {
  Pb l1 = Pb().Bytes(1, Tid(0x40))
              .Bytes(2, Sid(0x50))
              .Bytes(3, "k=v")
              .Msg(4, KV("link.kind", AStr("follows")))
              .Msg(4, KV("n", AInt(2)))
              .Varint(5, 8)
              .Fixed32(6, 0x300);
  Pb l2 = Pb().Bytes(1, Tid(0x41)).Bytes(2, Sid(0x51));
  SpanBatch b;
  Status st = Decode(Request({MinSpan(1).Msg(13, l1).Msg(13, l2)}), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.links.trace_id.size(), 2u);
  EXPECT_EQ(b.spans.links[0].begin, 0u);
  EXPECT_EQ(b.spans.links[0].end, 2u);
  EXPECT_EQ(IdStr(b.links.trace_id[0]), Tid(0x40));
  EXPECT_EQ(IdStr(b.links.span_id[0]), Sid(0x50));
  EXPECT_EQ(b.Str(b.links.trace_state[0]), "k=v");
  EXPECT_EQ(Attrs(b, b.link_attrs, b.links.attrs[0]),
            (std::vector<Attr>{{"link.kind", ValueType::kString, "follows"},
                               {"n", ValueType::kInt, "2"}}));
  EXPECT_EQ(b.links.dropped_attributes_count[0], 8u);
  EXPECT_EQ(b.links.flags[0], 0x300u);
  EXPECT_EQ(IdStr(b.links.trace_id[1]), Tid(0x41));
  EXPECT_EQ(b.links.flags[1], 0u);
  EXPECT_EQ(b.links.attrs[1].size(), 0u);
}

TEST(OtlpProtoDecode, TwoResourcesTwoScopesEach) {
  auto scope_spans = [](std::string_view scope_name, std::initializer_list<Pb> spans) {
    Pb ss = Pb().Msg(1, Pb().Bytes(1, scope_name));
    for (const Pb& s : spans) ss.Msg(2, s);
    return ss;
  };
  Pb rs1 = Pb().Msg(1, Pb().Msg(1, KV("service.name", AStr("svc-a"))))
               .Msg(2, scope_spans("a1", {MinSpan(1, "s1"), MinSpan(2, "s2")}))
               .Msg(2, scope_spans("a2", {MinSpan(3, "s3")}));
  Pb rs2 = Pb().Msg(1, Pb().Msg(1, KV("service.name", AStr("svc-b"))).Msg(1, KV("x", AInt(1))))
               .Msg(2, scope_spans("b1", {MinSpan(4, "s4")}))
               .Msg(2, scope_spans("b2", {MinSpan(5, "s5"), MinSpan(6, "s6"), MinSpan(7, "s7")}));
  SpanBatch b;
  Status st = Decode(Pb().Msg(1, rs1).Msg(1, rs2), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 7u);
  ASSERT_EQ(b.resources.attrs.size(), 2u);
  ASSERT_EQ(b.scopes.name.size(), 4u);
  EXPECT_EQ(b.Str(b.resources.service_name[0]), "svc-a");
  EXPECT_EQ(b.Str(b.resources.service_name[1]), "svc-b");
  EXPECT_EQ(b.resources.attrs[0].begin, 0u);
  EXPECT_EQ(b.resources.attrs[0].end, 1u);
  EXPECT_EQ(b.resources.attrs[1].begin, 1u);
  EXPECT_EQ(b.resources.attrs[1].end, 3u);
  const std::vector<uint32_t> want_res{0, 0, 0, 1, 1, 1, 1};
  const std::vector<uint32_t> want_scope{0, 0, 1, 2, 3, 3, 3};
  const std::vector<std::string> want_scope_name{"a1", "a2", "b1", "b2"};
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(b.spans.resource[i], want_res[i]) << i;
    EXPECT_EQ(b.spans.scope[i], want_scope[i]) << i;
    EXPECT_EQ(b.Str(b.spans.name[i]), "s" + std::to_string(i + 1));
    EXPECT_EQ(IdStr(b.spans.span_id[i]), Sid(static_cast<uint8_t>(i + 1)));
  }
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(b.Str(b.scopes.name[s]), want_scope_name[s]);
}

TEST(OtlpProtoDecode, UnusualFieldOrder) {
  // Span: attributes after events and links, ids last, name before everything.
  Pb span = Pb().Bytes(5, "late-ids")
                .Msg(11, Pb().Msg(3, KV("ea", AInt(1))).Bytes(2, "ev"))
                .Msg(9, KV("a1", AStr("x")))
                .Msg(13, Pb().Msg(4, KV("la", AInt(2))).Bytes(2, Sid(8)).Bytes(1, Tid(8)))
                .Msg(9, KV("a2", AStr("y")))
                .Msg(15, Pb().Varint(3, 1))
                .Fixed32(16, 1)
                .Bytes(2, Sid(1))
                .Bytes(1, Tid(1));
  // ScopeSpans: spans before the scope. ResourceSpans: scope_spans before
  // the resource, which is split in two (protobuf merges them).
  Pb scope_spans = Pb().Bytes(3, "url").Msg(2, span).Msg(2, MinSpan(2)).Msg(1, Pb().Bytes(1, "sc"));
  Pb rs = Pb().Msg(2, scope_spans)
              .Msg(1, Pb().Msg(1, KV("a", AStr("1"))))
              .Msg(2, Pb().Msg(2, MinSpan(3)))
              .Msg(1, Pb().Msg(1, KV("service.name", AStr("svc"))));
  SpanBatch b;
  Status st = Decode(Pb().Msg(1, rs), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 3u);
  EXPECT_EQ(b.Str(b.spans.name[0]), "late-ids");
  EXPECT_EQ(IdStr(b.spans.trace_id[0]), Tid(1));
  EXPECT_EQ(Attrs(b, b.span_attrs, b.spans.attrs[0]),
            (std::vector<Attr>{{"a1", ValueType::kString, "x"}, {"a2", ValueType::kString, "y"}}));
  EXPECT_EQ(Attrs(b, b.event_attrs, b.events.attrs[0]),
            (std::vector<Attr>{{"ea", ValueType::kInt, "1"}}));
  EXPECT_EQ(Attrs(b, b.link_attrs, b.links.attrs[0]),
            (std::vector<Attr>{{"la", ValueType::kInt, "2"}}));
  EXPECT_EQ(IdStr(b.links.trace_id[0]), Tid(8));
  EXPECT_EQ(b.spans.status_code[0], 1);
  EXPECT_EQ(b.spans.scope[0], 0u);
  EXPECT_EQ(b.spans.scope[1], 0u);
  EXPECT_EQ(b.spans.scope[2], 1u);
  EXPECT_EQ(b.Str(b.scopes.name[0]), "sc");
  EXPECT_EQ(b.Str(b.scopes.schema_url[0]), "url");
  EXPECT_EQ(b.Str(b.scopes.name[1]), "");
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(b.spans.resource[i], 0u);
  EXPECT_EQ(Attrs(b, b.resource_attrs, b.resources.attrs[0]),
            (std::vector<Attr>{{"a", ValueType::kString, "1"},
                               {"service.name", ValueType::kString, "svc"}}));
  EXPECT_EQ(b.Str(b.resources.service_name[0]), "svc");
}

TEST(OtlpProtoDecode, RepeatedScalarLastWins) {
  Pb span = MinSpan(1)
                .Bytes(5, "second")
                .Varint(6, 1)
                .Varint(6, 4)
                .Fixed64(7, 1)
                .Fixed64(7, 2)
                .Bytes(2, Sid(9))
                .Bytes(4, Sid(3))
                .Bytes(4, "");
  SpanBatch b;
  ASSERT_TRUE(Decode(Request({span}), b).ok());
  EXPECT_EQ(b.Str(b.spans.name[0]), "second");
  EXPECT_EQ(b.spans.kind[0], 4);
  EXPECT_EQ(b.spans.start_ns[0], 2u);
  EXPECT_EQ(IdStr(b.spans.span_id[0]), Sid(9));
  EXPECT_TRUE(IsZero(b.spans.parent_span_id[0]));
}

TEST(OtlpProtoDecode, UnknownFieldsAreSkipped) {
  // One unknown field of each skippable wire type, with large field numbers too.
  auto junk = [](Pb p) {
    return p.Varint(99, 123456789)
        .Fixed64(98, 7)
        .Bytes(97, "ignored")
        .Fixed32(96, 5)
        .Bytes(536870911, "max field number")
        .Varint(50000, 1);
  };
  Pb any = junk(Pb()).Bytes(1, "v");
  Pb kv = junk(Pb()).Bytes(1, "k").Msg(2, any);
  Pb arr_any = junk(Pb()).Msg(5, junk(Pb()).Msg(1, junk(Pb()).Varint(3, 1)));
  Pb kvl_any = junk(Pb()).Msg(6, junk(Pb()).Msg(1, junk(Pb()).Bytes(1, "x").Msg(2, AInt(2))));
  Pb event = junk(Pb()).Bytes(2, "e").Msg(3, kv);
  Pb link = junk(Pb()).Bytes(1, Tid(2)).Bytes(2, Sid(2)).Msg(4, kv);
  Pb status = junk(Pb()).Varint(3, 2);
  Pb span = junk(MinSpan(1))
                .Msg(9, kv)
                .Msg(9, Pb().Bytes(1, "arr").Msg(2, arr_any))
                .Msg(9, Pb().Bytes(1, "kvl").Msg(2, kvl_any))
                .Msg(11, event)
                .Msg(13, link)
                .Msg(15, status);
  Pb scope = junk(Pb()).Bytes(1, "sc").Msg(3, kv);
  Pb resource = junk(Pb()).Msg(1, kv);
  Pb rs = junk(Pb()).Msg(1, resource).Msg(2, junk(Pb()).Msg(1, scope).Msg(2, span));
  SpanBatch b;
  Status st = Decode(junk(Pb()).Msg(1, rs), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 1u);
  EXPECT_EQ(Attrs(b, b.span_attrs, b.spans.attrs[0]),
            (std::vector<Attr>{{"k", ValueType::kString, "v"},
                               {"arr", ValueType::kArray, "[1]"},
                               {"kvl", ValueType::kKvList, "{\"x\":2}"}}));
  EXPECT_EQ(b.Str(b.events.name[0]), "e");
  EXPECT_EQ(b.event_attrs.size(), 1u);
  EXPECT_EQ(b.link_attrs.size(), 1u);
  EXPECT_EQ(b.scope_attrs.size(), 1u);
  EXPECT_EQ(b.resource_attrs.size(), 1u);
  EXPECT_EQ(b.spans.status_code[0], 2);
  EXPECT_EQ(b.Str(b.scopes.name[0]), "sc");
}

TEST(OtlpProtoDecode, DeprecatedInstrumentationLibrarySpans) {
  Pb lib = Pb().Bytes(1, "old-lib").Bytes(2, "0.9");
  Pb ils = Pb().Msg(1, lib).Msg(2, MinSpan(1)).Msg(2, MinSpan(2)).Bytes(3, "ils-url");
  Pb rs = Pb().Msg(1, Pb().Msg(1, KV("service.name", AStr("legacy"))))
              .Msg(1000, ils)
              .Msg(2, Pb().Msg(1, Pb().Bytes(1, "new-lib")).Msg(2, MinSpan(3)));
  SpanBatch b;
  Status st = Decode(Pb().Msg(1, rs), b);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(b.span_count(), 3u);
  ASSERT_EQ(b.scopes.name.size(), 2u);
  EXPECT_EQ(b.Str(b.scopes.name[0]), "old-lib");
  EXPECT_EQ(b.Str(b.scopes.version[0]), "0.9");
  EXPECT_EQ(b.Str(b.scopes.schema_url[0]), "ils-url");
  EXPECT_EQ(b.Str(b.scopes.name[1]), "new-lib");
  EXPECT_EQ(b.spans.scope[0], 0u);
  EXPECT_EQ(b.spans.scope[1], 0u);
  EXPECT_EQ(b.spans.scope[2], 1u);
  EXPECT_EQ(b.Str(b.resources.service_name[0]), "legacy");
}

TEST(OtlpProtoDecode, AppendsToANonEmptyBatch) {
  SpanBatch b;
  ASSERT_TRUE(Decode(RichRequest(), b).ok());
  const size_t spans = b.span_count();
  const size_t resources = b.resources.attrs.size();
  const size_t scopes = b.scopes.name.size();
  ASSERT_TRUE(Decode(RichRequest(), b).ok());
  ASSERT_EQ(b.span_count(), 2 * spans);
  EXPECT_EQ(b.spans.resource[spans], resources);
  EXPECT_EQ(b.spans.scope[spans], scopes);
  EXPECT_EQ(b.Str(b.resources.service_name[resources]), "checkout");
  // Span numbers in errors count from the start of the request, not the batch.
  Status st = Decode(Request({MinSpan(1), Pb().Bytes(1, Tid(1))}), b);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "span 1: missing span_id");
}

TEST(OtlpProtoDecode, RichRequestRoundTripsThroughAppend) {
  SpanBatch a;
  ASSERT_TRUE(Decode(RichRequest(), a).ok());
  ASSERT_EQ(a.span_count(), 3u);
  SpanBatch c;
  c.Append(a);
  std::string why;
  EXPECT_TRUE(a.LogicallyEquals(c, &why)) << why;
  EXPECT_EQ(Attrs(a, a.resource_attrs, a.resources.attrs[0])[1].value, "[\"a\",-1,null]");
  EXPECT_EQ(Attrs(a, a.link_attrs, a.links.attrs[0])[0].value, "{\"x\":[1]}");
}

// ---- errors ----

Status DecodeErr(const Pb& body) {
  SpanBatch b;
  Status st = Decode(body, b);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  return st;
}

TEST(OtlpProtoErrors, IdLengths) {
  EXPECT_EQ(DecodeErr(Request({MinSpan(1), MinSpan(2), MinSpan(3),
                               Pb().Bytes(1, Id(5, 0)).Bytes(2, Sid(1))}))
                .message(),
            "span 3: trace_id must be 16 bytes, got 5");
  EXPECT_EQ(DecodeErr(Request({Pb().Bytes(1, Tid(1)).Bytes(2, Id(9, 0))})).message(),
            "span 0: span_id must be 8 bytes, got 9");
  EXPECT_EQ(DecodeErr(Request({Pb().Bytes(1, "").Bytes(2, Sid(1))})).message(),
            "span 0: trace_id must be 16 bytes, got 0");
  EXPECT_EQ(DecodeErr(Request({Pb().Bytes(2, Sid(1))})).message(), "span 0: missing trace_id");
  EXPECT_EQ(DecodeErr(Request({Pb().Bytes(1, Tid(1))})).message(), "span 0: missing span_id");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Bytes(4, Id(4, 0))})).message(),
            "span 0: parent_span_id must be empty or 8 bytes, got 4");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1), MinSpan(2)
                                               .Msg(13, Pb().Bytes(1, Tid(1)).Bytes(2, Sid(1)))
                                               .Msg(13, Pb().Bytes(1, Id(15, 0)))}))
                .message(),
            "span 1 link 1: trace_id must be 16 bytes, got 15");
  EXPECT_EQ(
      DecodeErr(Request({MinSpan(1).Msg(13, Pb().Bytes(1, Tid(1)).Bytes(2, Id(7, 0)))})).message(),
      "span 0 link 0: span_id must be 8 bytes, got 7");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Msg(13, Pb().Bytes(2, Sid(1)))})).message(),
            "span 0 link 0: missing trace_id");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Msg(13, Pb().Bytes(1, Tid(1)))})).message(),
            "span 0 link 0: missing span_id");
}

TEST(OtlpProtoErrors, EnumRanges) {
  for (uint64_t kind = 0; kind <= 5; ++kind) {
    SpanBatch b;
    ASSERT_TRUE(Decode(Request({MinSpan(1).Varint(6, kind)}), b).ok());
    EXPECT_EQ(b.spans.kind[0], kind);
  }
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Varint(6, 6)})).message(),
            "span 0: kind 6 is not a valid SpanKind (0-5)");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Varint(6, static_cast<uint64_t>(-1))})).message(),
            "span 0: kind -1 is not a valid SpanKind (0-5)");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Msg(15, Pb().Varint(3, 3))})).message(),
            "span 0: status code 3 is not a valid StatusCode (0-2)");
  EXPECT_EQ(
      DecodeErr(Request({MinSpan(1).Msg(15, Pb().Varint(3, static_cast<uint64_t>(-2)))})).message(),
      "span 0: status code -2 is not a valid StatusCode (0-2)");
}

TEST(OtlpProtoErrors, BadWireTypes) {
  // Groups and the undefined wire types, as unknown fields inside a Span.
  for (uint32_t wire : {3u, 4u, 6u, 7u}) {
    Pb span = MinSpan(1).Tag(9, wire).Raw(std::string(16, '\0'));
    Status st = DecodeErr(Request({span}));
    EXPECT_NE(
        st.message().find("invalid wire type " + std::to_string(wire) + " for field 9 in Span"),
        std::string::npos)
        << st.message();
  }
  EXPECT_EQ(DecodeErr(Pb().Tag(1, 7)).message(),
            "invalid wire type 7 for field 1 in ExportTraceServiceRequest");
  // Known fields with the wrong wire type.
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Varint(5, 1)})).message(),
            "wrong wire type 0 for field 5 (name) in Span, expected 2");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Varint(7, 1)})).message(),
            "wrong wire type 0 for field 7 (start_time_unix_nano) in Span, expected 1");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Varint(16, 1)})).message(),
            "wrong wire type 0 for field 16 (flags) in Span, expected 5");
  EXPECT_EQ(DecodeErr(Request({MinSpan(1).Msg(9, KV("k", Pb().Varint(4, 1)))})).message(),
            "wrong wire type 0 for field 4 (double_value) in AnyValue, expected 1");
  EXPECT_EQ(DecodeErr(Pb().Varint(1, 1)).message(),
            "wrong wire type 0 for field 1 (resource_spans) in ExportTraceServiceRequest, "
            "expected 2");
  // Field number 0 is not a field.
  EXPECT_EQ(DecodeErr(Pb().Raw(std::string("\x02\x00", 2))).message(),
            "invalid field number 0 in ExportTraceServiceRequest at offset 0");
}

TEST(OtlpProtoErrors, LengthsAndVarints) {
  // A length running past the end of the body.
  EXPECT_EQ(DecodeErr(Pb().Tag(1, 2).PutVarint(100).Raw("abc")).message(),
            "length 100 of field 1 in ExportTraceServiceRequest at offset 1 exceeds the 3 "
            "bytes left");
  // A length that fits the body but not the enclosing message.
  Pb inner = Pb().Tag(2, 2).PutVarint(50);  // ScopeSpans claiming 50 bytes, having none
  Pb body = Pb().Msg(1, inner).Raw(std::string(60, '\0'));
  Status st = DecodeErr(body);
  EXPECT_EQ(st.message(),
            "length 50 of field 2 in ResourceSpans at offset 3 exceeds the 0 bytes left");
  // A 64-bit length.
  EXPECT_NE(DecodeErr(Pb().Tag(1, 2).PutVarint(~0ull)).message().find("exceeds"),
            std::string::npos);
  // Varints: truncated, and longer than 10 bytes.
  EXPECT_EQ(DecodeErr(Pb().Raw("\x08\x80\x80")).message(), "truncated varint at offset 1");
  EXPECT_EQ(DecodeErr(Pb().Raw("\x80")).message(), "truncated varint at offset 0");
  EXPECT_EQ(DecodeErr(Pb().Raw("\x08" + std::string(11, '\x80') + "\x01")).message(),
            "varint longer than 10 bytes at offset 1");
  // Fixed-width values cut short.
  EXPECT_EQ(DecodeErr(Pb().Tag(9, 1).Raw("1234")).message(),
            "truncated fixed64 for field 9 in ExportTraceServiceRequest at offset 1");
  EXPECT_EQ(DecodeErr(Pb().Tag(9, 5).Raw("12")).message(),
            "truncated fixed32 for field 9 in ExportTraceServiceRequest at offset 1");
}

TEST(OtlpProtoErrors, MaxLengthVarintsAreFine) {
  // 10-byte varints are legal (e.g. negative int64).
  EXPECT_EQ(DecodeOneValue(AInt(-1)), (Attr{"k", ValueType::kInt, "-1"}));
  // A non-minimal varint encoding of a small number is legal too.
  SpanBatch b;
  Pb span = MinSpan(1).Tag(6, 0).Raw(std::string("\x82\x80\x80\x00", 4));
  ASSERT_TRUE(Decode(Request({span}), b).ok());
  EXPECT_EQ(b.spans.kind[0], 2);
}

TEST(OtlpProtoErrors, EveryTruncationIsSafe) {
  const std::string full = RichRequest().str();
  SpanBatch whole;
  ASSERT_TRUE(DecodeOtlpProto(full, whole).ok());
  const size_t n = whole.span_count();
  size_t ok_prefixes = 0;
  for (size_t len = 0; len < full.size(); ++len) {
    SpanBatch b;
    Status st = DecodeOtlpProto(std::string_view(full).substr(0, len), b);
    CheckInvariants(b);
    if (st.ok()) {
      ++ok_prefixes;
      EXPECT_LT(b.span_count(), n) << "prefix " << len;
    } else {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_FALSE(st.message().empty());
    }
  }
  // The empty prefix and the one ending after the first ResourceSpans.
  EXPECT_EQ(ok_prefixes, 2u);
}

TEST(OtlpProtoErrors, CopiedTruncationsDoNotReadPastTheEnd) {
  // Same as above but each prefix in its own heap buffer, so ASan sees any
  // read one byte past the end.
  const std::string full = RichRequest().str();
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<char> buf(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    SpanBatch b;
    (void)DecodeOtlpProto(std::string_view(buf.data(), buf.size()), b);
    CheckInvariants(b);
  }
}

TEST(OtlpProtoErrors, MutatedPayloadsNeverCrash) {
  // A cheap deterministic fuzz pass: single-byte corruptions at every offset.
  const std::string full = RichRequest().str();
  const uint8_t patterns[] = {0x00, 0xff, 0x80, 0x7f, 0x01, 0x0a, 0x12, 0x3b};
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t p : patterns) {
      std::vector<char> buf(full.begin(), full.end());
      buf[i] = static_cast<char>(p);
      SpanBatch b;
      Status st = DecodeOtlpProto(std::string_view(buf.data(), buf.size()), b);
      CheckInvariants(b);
      if (!st.ok()) {
        EXPECT_FALSE(st.message().empty());
      }
    }
  }
}

// ---- response encoding ----

TEST(OtlpProtoResponse, EmptyWhenNothingRejected) {
  EXPECT_EQ(EncodeExportResponseProto(0, ""), "");
}

TEST(OtlpProtoResponse, PartialSuccess) {
  EXPECT_EQ(EncodeExportResponseProto(3, "x"), std::string("\x0a\x05\x08\x03\x12\x01x", 7));
  EXPECT_EQ(EncodeExportResponseProto(3, ""), std::string("\x0a\x02\x08\x03", 4));
  EXPECT_EQ(EncodeExportResponseProto(0, "warn"), std::string("\x0a\x06\x12\x04warn", 8));
  EXPECT_EQ(EncodeExportResponseProto(300, ""), std::string("\x0a\x03\x08\xac\x02", 5));
  const std::string long_msg(200, 'm');
  EXPECT_EQ(EncodeExportResponseProto(1, long_msg),
            std::string("\x0a\xcd\x01\x08\x01\x12\xc8\x01", 8) + long_msg);
}

}  // namespace
}  // namespace spanhouse::codec
