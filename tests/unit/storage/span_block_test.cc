#include "storage/clickhouse/span_block.h"

#include <gtest/gtest.h>

#include "../../testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

Capabilities Modern() {
  return Capabilities::FromVersion("26.5.1.1");
}

TEST(SpanBlock, RoundTripsEveryField) {
  SpanBatch in = testdata::SampleBatch(3);
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(block, &out).ok());
  std::string why;
  EXPECT_TRUE(in.LogicallyEquals(out, &why)) << why;
}

TEST(SpanBlock, SeveralBlocksConcatenate) {
  SpanBatch a = testdata::SampleBatch(1);
  SpanBatch b = testdata::SampleBatch(2, 1800000000000000000ull);
  std::string data;
  EncodeSpanBlock(a, Modern(), &data);
  EncodeSpanBlock(b, Modern(), &data);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(data, &out).ok());
  SpanBatch both = a;
  both.Append(b);
  std::string why;
  EXPECT_TRUE(both.LogicallyEquals(out, &why)) << why;
}

TEST(SpanBlock, EmptyBatchIsAnEmptyBlock) {
  SpanBatch in;
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(block, &out).ok());
  EXPECT_EQ(out.span_count(), 0u);
}

TEST(SpanBlock, TruncatedBlockIsAnErrorNotACrash) {
  SpanBatch in = testdata::SampleBatch(1);
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  for (size_t n = 1; n < block.size(); n += 7) {
    SpanBatch out;
    EXPECT_FALSE(DecodeSpanBlocks(std::string_view(block).substr(0, n), &out).ok()) << n;
  }
}

TEST(Schema, WireTypesFollowCapabilities) {
  auto old = Capabilities::FromVersion("18.16.1");
  EXPECT_FALSE(old.datetime64);
  EXPECT_FALSE(old.low_cardinality);
  EXPECT_EQ(TableType(Logical::kTimeNs, old), "UInt64");
  EXPECT_EQ(TableType(Logical::kKeyArray2, old), "Array(Array(String))");
  auto cur = Modern();
  EXPECT_EQ(TableType(Logical::kTimeNs, cur), "DateTime64(9)");
  EXPECT_EQ(TableType(Logical::kKeyArray, cur), "Array(LowCardinality(String))");
  EXPECT_EQ(WireType(Logical::kKeyArray, cur), "Array(String)");
  for (const auto& sql : SchemaDdl(old)) {
    EXPECT_EQ(sql.find("LowCardinality"), std::string::npos) << sql;
    EXPECT_EQ(sql.find("DateTime64"), std::string::npos) << sql;
    EXPECT_EQ(sql.find("SimpleAggregateFunction"), std::string::npos) << sql;
  }
}

TEST(Schema, ColumnListIsInEnumOrder) {
  const auto& cols = SpanColumns();
  ASSERT_EQ(cols.size(), static_cast<size_t>(Col::kCount));
  for (size_t i = 0; i < cols.size(); ++i) EXPECT_EQ(static_cast<size_t>(cols[i].id), i);
}

}  // namespace
}  // namespace spanhouse::storage
