#include "storage/clickhouse/trace_copy.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace spanhouse::storage {
namespace {

using Columns = std::vector<std::pair<std::string, std::string>>;

TraceId Id(uint8_t b) {
  TraceId id{};
  id.fill(b);
  return id;
}

// One copy row (a String of RowBinary) as the engine answers it.
std::string Row(const std::string& binary) {
  std::string out(1, static_cast<char>(binary.size()));  // < 128: a one-byte varint
  return out + binary;
}

std::string U64(uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 8);
}

const Columns kColumns = {{"timestamp", "DateTime"},
                          {"trace_id", "FixedString(16)"},
                          {"attr_keys", "Array(String)"},
                          {"user_fields", "Map(String, String)"},
                          {"n", "Nullable(UInt8)"}};

std::string IdBytes(uint8_t b) {
  return std::string(16, static_cast<char>(b));
}

TEST(TraceCopyRows, BecomeOneNativeBlockOfTheAskedTraces) {
  // Row 1: trace 1, keys [a, bc], {k: v}, n = 7. Row 2: trace 2 (not asked).
  // Row 3: trace 1, keys [], {}, n NULL.
  const std::string rows =
      Row(std::string("\x01\x00\x00\x00", 4) + IdBytes(1) +
          "\x02\x01"
          "a\x02"
          "bc" +
          "\x01\x01k\x01v" + std::string("\x00\x07", 2)) +
      Row(std::string("\x02\x00\x00\x00", 4) + IdBytes(2) + std::string("\x00\x00\x01", 3)) +
      Row(std::string("\x03\x00\x00\x00", 4) + IdBytes(1) + std::string("\x00\x00\x01", 3));
  std::string native;
  ASSERT_TRUE(CopyRowsToNative(rows, kColumns, {Id(1)}, &native).ok());
  const std::string want = std::string("\x05\x02", 2) +  // 5 columns, 2 rows
                           "\x09timestamp\x08"
                           "DateTime" +
                           std::string("\x01\x00\x00\x00\x03\x00\x00\x00", 8) +
                           "\x08trace_id\x0f"
                           "FixedString(16)" +
                           IdBytes(1) + IdBytes(1) +
                           "\x09"
                           "attr_keys\x0d"
                           "Array(String)" +
                           U64(2) + U64(2) +
                           "\x01"
                           "a\x02"
                           "bc" +
                           "\x0buser_fields\x13"
                           "Map(String, String)" +
                           U64(1) + U64(1) + "\x01k" + "\x01v" +
                           "\x01n\x0f"
                           "Nullable(UInt8)" +
                           std::string("\x00\x01", 2) + std::string("\x07\x00", 2);
  EXPECT_EQ(native, want);
  // None asked: nothing.
  ASSERT_TRUE(CopyRowsToNative(rows, kColumns, {Id(9)}, &native).ok());
  EXPECT_TRUE(native.empty());
  ASSERT_TRUE(CopyRowsToNative("", kColumns, {Id(1)}, &native).ok());
  EXPECT_TRUE(native.empty());
}

TEST(TraceCopyRows, RefuseWhatIsNotTheColumns) {
  const std::string good =
      Row(std::string("\x01\x00\x00\x00", 4) + IdBytes(1) + std::string("\x00\x00\x01", 3));
  std::string native;
  // Cut anywhere: an error, never a read past the end.
  for (size_t n = 1; n < good.size(); ++n) {
    EXPECT_FALSE(CopyRowsToNative(good.substr(0, n), kColumns, {Id(1)}, &native).ok()) << n;
  }
  // A row longer than the columns.
  std::string longer = good;
  longer[0] = static_cast<char>(longer[0] + 1);
  longer += 'x';
  EXPECT_FALSE(CopyRowsToNative(longer, kColumns, {Id(1)}, &native).ok());
  // A type it does not know, and no trace id column.
  EXPECT_FALSE(CopyRowsToNative(good, {{"trace_id", "FixedString(16)"}, {"x", "Decimal(9, 2)"}},
                                {Id(1)}, &native)
                   .ok());
  EXPECT_FALSE(CopyRowsToNative(good, {{"timestamp", "DateTime"}}, {Id(1)}, &native).ok());
  // Random bytes: an answer, never a crash.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    const Status st = CopyRowsToNative(junk, kColumns, {Id(1)}, &native);
    if (!st.ok()) {
      EXPECT_EQ(st.code(), StatusCode::kInternal);
    }
  }
}

TEST(TraceCopyRows, TypesWithoutLowCardinality) {
  EXPECT_EQ(WithoutLowCardinality("LowCardinality(String)"), "String");
  EXPECT_EQ(WithoutLowCardinality("Array(LowCardinality(String))"), "Array(String)");
  EXPECT_EQ(WithoutLowCardinality("Map(LowCardinality(String), LowCardinality(String))"),
            "Map(String, String)");
  EXPECT_EQ(WithoutLowCardinality("LowCardinality(Nullable(String))"), "Nullable(String)");
  EXPECT_EQ(WithoutLowCardinality("FixedString(16)"), "FixedString(16)");
}

}  // namespace
}  // namespace spanhouse::storage
