// A SpanBatch's columnar bytes: what the durable queue logs for a request it
// will read back. Read back, the batch is the same; bytes that are not such
// a batch are refused, never read out of bounds.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../../testdata/sample_batch.h"
#include "model/span_batch.h"

namespace spanhouse {
namespace {

TEST(Columnar, EveryFieldComesBack) {
  const SpanBatch b = testdata::SampleBatch(3);
  std::string bytes;
  b.AppendColumnar(&bytes);
  SpanBatch back;
  std::string why;
  ASSERT_TRUE(back.ReadColumnar(bytes, &why)) << why;
  EXPECT_TRUE(b.LogicallyEquals(back, &why)) << why;
  EXPECT_EQ(back.spans.metrics_only, b.spans.metrics_only);
}

TEST(Columnar, StringsInTheSourceComeBackFromTheRecord) {
  // A batch whose strings point into its source (as a protobuf decode's do)
  // and into its arena.
  SpanBatch b;
  std::string body = "checkout-service|GET /cart|http.method|POST";
  ASSERT_TRUE(b.AdoptSource(body));
  const std::string_view src = b.source();
  const uint32_t r = b.AddResource();
  b.resources.service_name[r] = b.RefString(src.substr(0, 16));
  const uint32_t sc = b.AddScope();
  const uint32_t s = b.AddSpan(r, sc);
  b.spans.name[s] = b.RefString(src.substr(17, 9));
  b.spans.trace_id[s] = testdata::MakeTraceId(7);
  b.spans.span_id[s] = testdata::MakeSpanId(8);
  const uint32_t a = static_cast<uint32_t>(b.span_attrs.size());
  SpanBatch::AddAttr(b.span_attrs, b.RefString(src.substr(27, 11)), ValueType::kString,
                     b.AddString("a value in the arena"));
  b.spans.attrs[s] = {a, a + 1};
  std::string bytes;
  b.AppendColumnar(&bytes);
  SpanBatch back;
  std::string why;
  ASSERT_TRUE(back.ReadColumnar(bytes, &why)) << why;
  EXPECT_TRUE(bytes.empty());  // taken as the batch's source
  EXPECT_TRUE(b.LogicallyEquals(back, &why)) << why;
  EXPECT_EQ(back.Str(back.spans.name[0]), "GET /cart");
  EXPECT_EQ(back.Str(back.span_attrs.value[0]), "a value in the arena");
}

TEST(Columnar, AnEmptyStringInAnEmptySourceReadsBackEmpty) {
  // A reference of length 0 marked as lying in the source, in a batch that has no source
  // (bytes a fuzzer made): valid, and read as "" without arithmetic on a null base.
  SpanBatch b = testdata::SampleBatch(1);
  b.spans.name[0] = {SpanBatch::kSourceBit, 0};
  std::string bytes;
  b.AppendColumnar(&bytes);
  SpanBatch back;
  std::string why;
  ASSERT_TRUE(back.ReadColumnar(bytes, &why)) << why;
  EXPECT_TRUE(back.source().empty());
  EXPECT_EQ(back.Str(back.spans.name[0]), "");
}

TEST(Columnar, BytesThatAreNotABatchAreRefused) {
  const SpanBatch b = testdata::SampleBatch(2);
  std::string good;
  b.AppendColumnar(&good);
  // Every truncation, and bytes flipped at random: refused or read, never
  // out of bounds (ASan and the checks below), and a batch read is whole.
  for (size_t n = 0; n < good.size(); n += 7) {
    std::string cut = good.substr(0, n);
    SpanBatch back;
    EXPECT_FALSE(back.ReadColumnar(cut));
    EXPECT_TRUE(back.empty());
  }
  std::mt19937 rng(42);
  size_t refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    SpanBatch back;
    if (!back.ReadColumnar(bad)) {
      ++refused;
      EXPECT_TRUE(back.empty());
      continue;
    }
    // Read: every string it names lies inside it.
    for (uint32_t s = 0; s < back.span_count(); ++s) {
      EXPECT_LE(back.Str(back.spans.name[s]).size(), good.size());
      EXPECT_LT(back.spans.resource[s], back.resources.attrs.size());
    }
  }
  EXPECT_GT(refused, 0u);
  SpanBatch not_empty = testdata::SampleBatch(1);
  std::string again = good;
  EXPECT_FALSE(not_empty.ReadColumnar(again));
}

}  // namespace
}  // namespace spanhouse
