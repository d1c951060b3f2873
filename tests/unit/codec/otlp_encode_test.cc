// Tests for the OTLP/protobuf encoder: whatever it writes, DecodeOtlpProto
// reads back into a batch that LogicallyEquals the one encoded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../../testdata/sample_batch.h"
#include "codec/otlp.h"
#include "codec/otlp_encode.h"
#include "codec/value_text.h"
#include "model/span_batch.h"

namespace spanhouse::codec {
namespace {

void ExpectRoundTrip(const SpanBatch& in) {
  const std::string body = EncodeOtlpProto(in);
  SpanBatch out;
  const Status st = DecodeOtlpProto(body, out);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string why;
  EXPECT_TRUE(in.LogicallyEquals(out, &why)) << why;
}

// A one-span batch whose span carries `attrs` (key, type, stored text).
struct A {
  std::string_view key;
  ValueType type;
  std::string_view text;
};
SpanBatch OneSpan(std::initializer_list<A> attrs) {
  SpanBatch b;
  const uint32_t r = b.AddResource();
  const uint32_t s = b.AddScope();
  const uint32_t sp = b.AddSpan(r, s);
  b.spans.trace_id[sp] = testdata::MakeTraceId(1);
  b.spans.span_id[sp] = testdata::MakeSpanId(1);
  for (const A& a : attrs) {
    SpanBatch::AddAttr(b.span_attrs, b.AddString(a.key), a.type, b.AddString(a.text));
  }
  b.spans.attrs[sp].end = static_cast<uint32_t>(b.span_attrs.size());
  return b;
}

TEST(OtlpEncodeTest, SampleBatchRoundTrips) {
  ExpectRoundTrip(testdata::SampleBatch(3));
}

TEST(OtlpEncodeTest, EmptyBatchIsAnEmptyRequest) {
  SpanBatch b;
  EXPECT_EQ(EncodeOtlpProto(b), "");
}

TEST(OtlpEncodeTest, GroupsConsecutiveSpansOfOneResourceAndScope) {
  // SampleBatch interleaves its two resources (r0 r0 r1 r0 r0 r1 ...): each
  // run is one ResourceSpans, so decoding gives one resource per run.
  SpanBatch in = testdata::SampleBatch(3);
  SpanBatch out;
  ASSERT_TRUE(DecodeOtlpProto(EncodeOtlpProto(in), out).ok());
  EXPECT_EQ(out.resources.attrs.size(), 6u);
  EXPECT_EQ(out.scopes.name.size(), 6u);
}

TEST(OtlpEncodeTest, EveryValueTypeRoundTrips) {
  ExpectRoundTrip(OneSpan({
      {"s", ValueType::kString, "h\xc3\xa9llo\n\"q\""},
      {"invalid utf8", ValueType::kString, "\xff\xfe"},
      {"empty string", ValueType::kString, ""},
      {"t", ValueType::kBool, "true"},
      {"f", ValueType::kBool, "false"},
      {"i", ValueType::kInt, "-9223372036854775808"},
      {"imax", ValueType::kInt, "9223372036854775807"},
      {"zero", ValueType::kInt, "0"},
      {"d", ValueType::kDouble, "0.1"},
      {"dint", ValueType::kDouble, "3"},
      {"dexp", ValueType::kDouble, "1e+300"},
      {"dneg", ValueType::kDouble, "-2.5e-08"},
      {"nan", ValueType::kDouble, "NaN"},
      {"inf", ValueType::kDouble, "Infinity"},
      {"ninf", ValueType::kDouble, "-Infinity"},
      {"bytes", ValueType::kBytes, std::string_view("\x00\x01\xff", 3)},
      {"nothing", ValueType::kEmpty, ""},
      {"", ValueType::kString, "empty key"},
  }));
}

TEST(OtlpEncodeTest, ArraysAndKvListsRoundTrip) {
  ExpectRoundTrip(OneSpan({
      {"empty array", ValueType::kArray, "[]"},
      {"empty kvlist", ValueType::kKvList, "{}"},
      {"mixed", ValueType::kArray, "[\"a\",1,-2,0.5,true,false,null,\"AAEC\"]"},
      {"nested", ValueType::kArray, "[[1,[2,[3]]],{\"k\":[{\"x\":null}]}]"},
      {"map", ValueType::kKvList, "{\"a\":1,\"b\":\"two\",\"a\":3,\"\":{},\"esc\\n\":\"\\u0001\"}"},
      {"non-finite in array", ValueType::kArray, "[\"NaN\",\"Infinity\",\"-Infinity\"]"},
      {"doubles", ValueType::kArray, "[1e+300,-2.5e-08,0.1,1.7976931348623157e+308]"},
      {"int extremes", ValueType::kArray, "[-9223372036854775808,9223372036854775807]"},
      {"unicode", ValueType::kArray, "[\"h\xc3\xa9\",\"\xef\xbf\xbd\"]"},
  }));
}

TEST(OtlpEncodeTest, IntegralDoublesBeyondInt64RoundTrip) {
  // to_chars writes these without an exponent when that is shorter, so their
  // text looks like an integer too large for int64 (or for uint64).
  std::string text = "[";
  for (double d : {9223372036854775808.0, 12345678901234567168.0, 18446744073709551616.0,
                   123456789012345677877.0, 999999999999999999999.0, -9223372036854777856.0,
                   -123456789012345677877.0}) {
    if (text.size() > 1) text += ',';
    AppendJsonDouble(text, d);
  }
  text += ']';
  ExpectRoundTrip(OneSpan({{"big", ValueType::kArray, text}}));
}

TEST(OtlpEncodeTest, NegativeZeroInJsonTextRoundTrips) {
  // Found by tests/fuzz: the decoders wrote -0.0 in an array as "-0", which this encoder (like
  // any JSON reader) takes for the integer 0; they now write "-0.0".
  std::string text = "[";
  AppendJsonDouble(text, -0.0);
  text += ']';
  EXPECT_EQ(text, "[-0.0]");
  ExpectRoundTrip(OneSpan({{"negative zero", ValueType::kArray, text},
                           {"in a kvlist", ValueType::kKvList, R"({"z":-0.0,"i":0})"}}));
}

TEST(OtlpEncodeTest, LargeMessagesGetMultiByteLengths) {
  // Values and a span large enough for 2- and 3-byte length varints at every level.
  const std::string big(70000, 'x');
  const std::string mid(200, 'y');
  SpanBatch b = OneSpan({{"big", ValueType::kString, big}, {"mid", ValueType::kString, mid}});
  ExpectRoundTrip(b);
}

TEST(OtlpEncodeTest, OffsetsPointAtEveryIdAndTimestamp) {
  const SpanBatch in = testdata::SampleBatch(3);
  std::string body = "prefix";  // offsets are relative to the start of `out`
  IdOffsets offs;
  EncodeOtlpProto(in, &body, &offs);

  std::vector<std::string> want_trace, got_trace, want_span, got_span;
  std::vector<uint64_t> want_time, got_time;
  auto id = [](const auto& a) {
    return std::string(reinterpret_cast<const char*>(a.data()), a.size());
  };
  for (size_t i = 0; i < in.span_count(); ++i) {
    want_trace.push_back(id(in.spans.trace_id[i]));
    want_span.push_back(id(in.spans.span_id[i]));
    if (!IsZero(in.spans.parent_span_id[i])) want_span.push_back(id(in.spans.parent_span_id[i]));
    want_time.push_back(in.spans.start_ns[i]);
    want_time.push_back(in.spans.end_ns[i]);
  }
  for (size_t l = 0; l < in.links.trace_id.size(); ++l) {
    want_trace.push_back(id(in.links.trace_id[l]));
    want_span.push_back(id(in.links.span_id[l]));
  }
  for (uint64_t t : in.events.time_ns) want_time.push_back(t);
  for (uint32_t off : offs.trace_ids) got_trace.push_back(body.substr(off, 16));
  for (uint32_t off : offs.span_ids) got_span.push_back(body.substr(off, 8));
  for (uint32_t off : offs.times) {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(body[off + k])) << (8 * k);
    got_time.push_back(v);
  }
  for (auto* v : {&want_trace, &got_trace, &want_span, &got_span}) std::sort(v->begin(), v->end());
  std::sort(want_time.begin(), want_time.end());
  std::sort(got_time.begin(), got_time.end());
  EXPECT_EQ(got_trace, want_trace);
  EXPECT_EQ(got_span, want_span);
  EXPECT_EQ(got_time, want_time);

  // The body after the prefix is the same as a plain encode.
  EXPECT_EQ(body.substr(6), EncodeOtlpProto(in));
}

TEST(OtlpEncodeTest, OffsetsSurviveLengthWidening) {
  // A span whose attributes push every enclosing length past one byte: the
  // offsets recorded before the widening must move with the content.
  const std::string big(300, 'z');
  SpanBatch b = OneSpan({{"big", ValueType::kString, big}});
  std::string body;
  IdOffsets offs;
  EncodeOtlpProto(b, &body, &offs);
  ASSERT_EQ(offs.trace_ids.size(), 1u);
  ASSERT_EQ(offs.span_ids.size(), 1u);
  const TraceId tid = testdata::MakeTraceId(1);
  const SpanId sid = testdata::MakeSpanId(1);
  EXPECT_EQ(std::memcmp(body.data() + offs.trace_ids[0], tid.data(), 16), 0);
  EXPECT_EQ(std::memcmp(body.data() + offs.span_ids[0], sid.data(), 8), 0);
}

}  // namespace
}  // namespace spanhouse::codec
