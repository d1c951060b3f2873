// The storage layouts against real chDB: the project's codecs and types,
// every layout `spanhouse bench storage` measures (its DDL must be valid and
// spans must come back unchanged through it), and an older data directory
// taking the chosen codecs in place; the part size picking LZ4 or ZSTD.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "sink/span_queue.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "tools/bench/storage_variants.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::storage {
namespace {

void ExpectRoundTrip(const Capabilities& caps, const std::string& label,
                     const StorageLayout& layout = {}) {
  SpanBatch in = testdata::SampleBatch(2);
  WriteAll(in, caps, UserFieldValues::kMarked, layout.extras_column, layout.span_ids_column,
           layout.attr_columns);
  ChdbSpanReader reader(*Engine::conn, caps, {}, layout);
  SpanBatch out;
  for (uint8_t t = 0; t < 2; ++t) {
    Status st = reader.GetTrace(testdata::MakeTraceId(t), &out);
    ASSERT_TRUE(st.ok()) << label << ": " << st.message();
  }
  std::string why;
  EXPECT_TRUE(in.LogicallyEquals(out, &why)) << label << ": " << why;
}

std::string Column(const std::string& table, const std::string& column) {
  return Q(fmt::format(
      "SELECT type, compression_codec FROM system.columns WHERE database = '{}' AND table = '{}' "
      "AND name = '{}'",
      kDatabase, table, column));
}

TEST(StorageLayout, ChosenCodecsAndTypesAreTheTables) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_TRUE(caps.codecs);
  EXPECT_EQ(Column("spans", "attr_values"), "Array(LowCardinality(String))\tCODEC(ZSTD(3))\n");
  EXPECT_EQ(Column("spans", "duration_ns"), "UInt64\tCODEC(T64, Default)\n");
  EXPECT_EQ(Column("spans", "attr_keys"), "Array(LowCardinality(String))\tCODEC(ZSTD(6))\n");
  EXPECT_EQ(Column("spans", "resource_id"), "LowCardinality(UInt64)\tCODEC(ZSTD(3))\n");
  EXPECT_EQ(Column("spans", "span_ids"), "FixedString(16)\tCODEC(ZSTD(3))\n");
  EXPECT_EQ(Column("spans", "parent_span_id"), "FixedString(8)\t\n");  // an alias
  EXPECT_EQ(Column("trace_index", "start_s"),
            "SimpleAggregateFunction(min, UInt32)\tCODEC(T64, Default)\n");
  EXPECT_EQ(Column("spans", "user_fields"),
            "Map(LowCardinality(String), LowCardinality(String))\tCODEC(ZSTD(6))\n");
  EXPECT_EQ(Column("resources", "attr_values"), "Array(LowCardinality(String))\tCODEC(Default)\n");
  // Every stored column of every table has a codec.
  EXPECT_EQ(Q(fmt::format("SELECT groupArray(concat(table, '.', name)) FROM system.columns WHERE "
                          "database = '{}' AND table != 'schema_version' AND table NOT LIKE "
                          "'%_mv' AND compression_codec = '' AND default_kind != 'ALIAS'",
                          kDatabase)),
            "[]\n");
  ExpectRoundTrip(caps, "chosen");
}

// Every layout the storage benchmark measures is valid DDL and stores and
// returns spans unchanged (the writer sorts by the default key; a layout
// with another key has the engine sort).
TEST(StorageLayout, EveryBenchVariantRoundTripsSpans) {
  for (const auto& v : bench::StorageVariants()) {
    SCOPED_TRACE(v.name);
    Reset();
    Capabilities caps;
    SchemaOptions options;
    options.layout = v.layout;
    Status st = EnsureSchema(*Engine::conn, &caps, options);
    ASSERT_TRUE(st.ok()) << v.name << ": " << st.message();
    ExpectRoundTrip(caps, v.name, v.layout);
  }
}

// A data directory made before codecs (schema 3's layout) takes the chosen
// codecs at the next start without rewriting its parts; its types stay.
TEST(StorageLayout, OlderTablesTakeTheChosenCodecsInPlace) {
  Reset();
  Capabilities caps;
  SchemaOptions old;
  old.layout.codec = [](const CodecQuery&) { return std::string(); };
  old.layout.low_cardinality_values = false;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, old).ok());
  EXPECT_EQ(Column("spans", "attr_values"), "Array(String)\t\n");
  WriteAll(testdata::SampleBatch(2), caps);
  // The spans and trace index parts (the metrics tables' TTL may merge
  // theirs meanwhile).
  const std::string parts_sql = fmt::format(
      "SELECT name FROM system.parts WHERE database = '{}' AND table IN ('spans', 'trace_index') "
      "AND active ORDER BY name",
      kDatabase);
  const std::string parts = Q(parts_sql);
  ASSERT_NE(parts, "");

  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(Column("spans", "attr_values"), "Array(String)\tCODEC(ZSTD(3))\n");
  EXPECT_EQ(Column("spans", "duration_ns"), "UInt64\tCODEC(T64, Default)\n");
  EXPECT_EQ(Column("trace_index", "end_s"),
            "SimpleAggregateFunction(max, UInt32)\tCODEC(T64, Default)\n");
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM system.mutations WHERE database = '{}'", kDatabase)),
            "0\n");
  EXPECT_EQ(parts, Q(parts_sql));
  // Old rows and new ones read back alike.
  WriteAll(testdata::SampleBatch(2, 1700000100000000000ull), caps);
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(0), &out).ok());
  EXPECT_EQ(out.span_count(), 6u);
  // A third start changes nothing.
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(Column("spans", "attr_values"), "Array(String)\tCODEC(ZSTD(3))\n");
}

// Columns with CODEC(Default) take the engine's rule: a small fresh part is
// LZ4 (cheap to write, merged again soon), a part from
// Engine::kZstdMinPartBytes on (here: a merge of two inserts) is ZSTD(1), and
// holds the same spans.
TEST(StorageLayout, PartSizePicksLz4OrZstd) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  const std::string parts_sql = fmt::format(
      "SELECT groupArray(default_compression_codec), sum(rows), max(data_compressed_bytes) < {0}, "
      "sum(data_compressed_bytes) >= {0} FROM system.parts WHERE database = '{1}' AND table = "
      "'spans' AND active",
      Engine::kZstdMinPartBytes, kDatabase);
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{7});
  SpanBatch a;
  SpanBatch b;
  uint64_t t = 1700000000000000000ull;
  // 44-87 bytes a span with LZ4 (schema 5: user-field values once, ZSTD(3)
  // on attr_values and user_fields): each insert below the threshold, both
  // above.
  while (a.span_count() < 12000) gen.AppendTrace(t += 1000000, &a);
  while (b.span_count() < 12000) gen.AppendTrace(t += 1000000, &b);
  const size_t n = a.span_count() + b.span_count();
  WriteAll(a, caps);
  WriteAll(b, caps);
  EXPECT_EQ(Q(parts_sql), fmt::format("['LZ4','LZ4']\t{}\t1\t1\n", n));
  Q(fmt::format("OPTIMIZE TABLE {}.spans FINAL", kDatabase));
  EXPECT_EQ(Q(parts_sql).substr(0, 12 + std::to_string(n).size()),
            fmt::format("['ZSTD(1)']\t{}", n));
  EXPECT_EQ(Q(fmt::format("SELECT uniqExact(span_id) FROM {}.spans", kDatabase)),
            fmt::format("{}\n", n));
}

// A merge into a part of a quarter of the table or more is ZSTD(1) below the
// size threshold too (a small store's merged parts); a merge into a smaller
// share stays LZ4. Two days' partitions, each merged on its own.
TEST(StorageLayout, AMergeIntoAQuarterOfTheTableIsZstd) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{7});
  auto insert = [&](uint64_t t, size_t spans) {
    SpanBatch b;
    while (b.span_count() < spans) gen.AppendTrace(t += 1000000, &b);
    WriteAll(b, caps);
  };
  const uint64_t day_a = 1700000000000000000ull;
  const uint64_t day_b = day_a + 2 * 86400 * 1000000000ull;
  insert(day_a, 4000);
  insert(day_a + 3600000000000ull, 4000);
  insert(day_b, 500);
  insert(day_b + 3600000000000ull, 500);
  const std::string parts_sql = fmt::format(
      "SELECT partition, groupArray(default_compression_codec), sum(data_compressed_bytes) < {} "
      "FROM system.parts WHERE database = '{}' AND table = 'spans' AND active GROUP BY "
      "partition ORDER BY partition",
      Engine::kZstdMinPartBytes, kDatabase);
  EXPECT_EQ(Q(parts_sql), "2023-11-14\t['LZ4','LZ4']\t1\n2023-11-16\t['LZ4','LZ4']\t1\n");
  Q(fmt::format("OPTIMIZE TABLE {}.spans PARTITION '2023-11-16' FINAL", kDatabase));
  Q(fmt::format("OPTIMIZE TABLE {}.spans PARTITION '2023-11-14' FINAL", kDatabase));
  EXPECT_EQ(Q(parts_sql), "2023-11-14\t['ZSTD(1)']\t1\n2023-11-16\t['LZ4']\t1\n");
}

}  // namespace
}  // namespace spanhouse::storage
