// Integration tests against real embedded ClickHouse (chDB): the schema,
// the writer's insert path and the span reader, end to end below HTTP.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "pipeline/queue/span_queue.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {
namespace {

void WriteAll(const SpanBatch& b, const Capabilities& caps) {
  pipeline::SpanQueue queue(64u << 20);
  WriterOptions opts;
  opts.spool_dir = Engine::dir + "/spool";
  EmbeddedWriter writer(Engine::conn.get(), caps, queue, opts);
  writer.Start();
  auto copy = std::make_unique<SpanBatch>(b);
  ASSERT_EQ(queue.TryPush(copy), pipeline::SpanQueue::PushResult::kOk);
  queue.Close();
  writer.Join();
  EXPECT_EQ(writer.stats().rows_written.load(), b.span_count());
  EXPECT_EQ(writer.stats().insert_errors.load(), 0u);
}

TEST(ChdbSchema, CreationIsIdempotent) {
  Reset();
  Capabilities caps;
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(caps.datetime64);
  const std::string tables = Q(fmt::format(
      "SELECT name, create_table_query FROM system.tables WHERE database = '{}' ORDER BY name",
      kDatabase));
  EXPECT_NE(tables.find("spans"), std::string::npos);
  EXPECT_NE(tables.find("trace_index_mv"), std::string::npos);
  st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(tables, Q(fmt::format(
                        "SELECT name, create_table_query FROM system.tables WHERE database = '{}' "
                        "ORDER BY name",
                        kDatabase)));
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.schema_version", kDatabase)), "1\n");
  EXPECT_EQ(
      Q(fmt::format("SELECT count() FROM system.columns WHERE database = '{}' AND table = 'spans'",
                    kDatabase)),
      std::to_string(SpanColumns().size()) + "\n");
}

TEST(ChdbRoundTrip, BatchComesBackExactly) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  SpanBatch in = testdata::SampleBatch(2);
  WriteAll(in, caps);

  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  for (uint8_t t = 0; t < 2; ++t) {
    Status st = reader.GetTrace(testdata::MakeTraceId(t), &out);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  std::string why;
  EXPECT_TRUE(in.LogicallyEquals(out, &why)) << why;

  SpanBatch none;
  EXPECT_EQ(reader.GetTrace(testdata::MakeTraceId(77), &none).code(), StatusCode::kNotFound);
}

TEST(ChdbRoundTrip, TraceIndexHoldsFirstAndLastTime) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  SpanBatch in = testdata::SampleBatch(1);
  // Two inserts of the same trace: the index must merge them.
  SpanBatch first;
  first.Append(in);
  WriteAll(first, caps);
  SpanBatch later = testdata::SampleBatch(1, 1700000100000000000ull);
  WriteAll(later, caps);
  const std::string row = Q(fmt::format(
      "SELECT min(start_ns), max(end_ns) FROM {}.trace_index WHERE trace_id = unhex('{}')",
      kDatabase, ToHex(testdata::MakeTraceId(0))));
  const uint64_t lo = in.spans.start_ns[0];
  const uint64_t hi = later.spans.end_ns[2];
  EXPECT_EQ(row, fmt::format("{}\t{}\n", lo, hi));
}

TEST(ChdbSchema, OldSpansTableIsUpgradedInPlace) {
  Reset();
  // A spans table as an earlier schema made it: the first 12 columns only.
  Capabilities caps = Capabilities::FromVersion("26.5");
  std::string cols;
  for (size_t i = 0; i < 12; ++i) {
    const auto& c = SpanColumns()[i];
    cols += fmt::format("{}{} {}", i ? ", " : "", c.name, TableType(c.logical, caps));
  }
  Q(fmt::format("CREATE DATABASE {}", kDatabase));
  Q(
      fmt::format("CREATE TABLE {}.spans ({}) ENGINE = MergeTree PARTITION BY toDate(timestamp) "
                  "ORDER BY (toStartOfHour(timestamp), trace_id)",
                  kDatabase, cols));
  Q(fmt::format(
      "INSERT INTO {}.spans (timestamp, trace_id, span_id, name, start_time, duration_ns) "
      "VALUES (1700000000, unhex('0102030405060708090a0b0c0d0e0f10'), unhex('0102030405060708'), "
      "'old', 1700000000000000000, 5)",
      kDatabase));
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(
      Q(fmt::format("SELECT count() FROM system.columns WHERE database = '{}' AND table = 'spans'",
                    kDatabase)),
      std::to_string(SpanColumns().size()) + "\n");
  EXPECT_EQ(Q(fmt::format("SELECT name, duration_ns, length(attr_keys) FROM {}.spans", kDatabase)),
            "old\t5\t0\n");
  // New rows still go in next to the old one.
  WriteAll(testdata::SampleBatch(1), caps);
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)), "4\n");
}

}  // namespace
}  // namespace spanhouse::storage
