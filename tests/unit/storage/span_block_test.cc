#include "storage/clickhouse/span_block.h"

#include <gtest/gtest.h>

#include "../../testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

Capabilities Modern() {
  return Capabilities::FromVersion("26.5.1.1");
}

TEST(SpanBlock, RoundTripsEveryStoredField) {
  SpanBatch in = testdata::SampleBatch(3);
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(block, &out).ok());
  std::string why;
  EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why)) << why;
  // Nothing of the resource but the service name went into the block.
  SpanBatch full = testdata::SampleBatch(3);
  ASSERT_FALSE(full.LogicallyEquals(out, &why));
}

TEST(SpanBlock, ResourceIdsIdentifyContentNotLayout) {
  SpanBatch a = testdata::SampleBatch(2);
  SpanBatch b;
  b.AddString("unrelated bytes first, so every offset differs");
  b.Append(a);
  const auto ia = ResourceIds(a);
  const auto ib = ResourceIds(b);
  ASSERT_EQ(ia.size(), ib.size());
  for (size_t r = 0; r < ia.size(); ++r) EXPECT_EQ(ia[r], ib[r]) << r;
  // One changed value, type or the schema URL makes another resource.
  ASSERT_GT(a.resources.attrs[0].size(), 0u);
  SpanBatch c = a;
  c.resource_attrs.value[c.resources.attrs[0].begin] = c.AddString("another value");
  EXPECT_NE(ResourceIds(c)[0], ia[0]);
  SpanBatch d = a;
  d.resource_attrs.type[d.resources.attrs[0].begin] = ValueType::kBytes;
  EXPECT_NE(ResourceIds(d)[0], ia[0]);
  SpanBatch e = a;
  e.resources.schema_url[0] = e.AddString("https://opentelemetry.io/schemas/9.9.9");
  EXPECT_NE(ResourceIds(e)[0], ia[0]);
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
  EXPECT_TRUE(testdata::StoredPart(both).LogicallyEquals(out, &why)) << why;
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
  const auto& read = ReadColumns();
  ASSERT_EQ(read.size(), static_cast<size_t>(Col::kCount));
  for (size_t i = 0; i < read.size(); ++i) EXPECT_EQ(static_cast<size_t>(read[i].id), i);
  // The stored columns are the read ones less the resource's own.
  const auto& stored = SpanColumns();
  EXPECT_EQ(stored.size(), read.size() - 5);
  for (size_t i = 1; i < stored.size(); ++i) EXPECT_LT(stored[i - 1].id, stored[i].id);
  for (const auto& c : stored) {
    EXPECT_EQ(std::string(c.name).rfind("resource_attr", 0), std::string::npos) << c.name;
  }
}

}  // namespace
}  // namespace spanhouse::storage
