// Hot/cold tiering against real embedded ClickHouse: with the engine booted
// as serve boots it (engine.h: the tiered storage policy, a cold directory)
// and the intervals shortened to seconds, the background mover takes the
// spans' parts to the cold volume, the span reader still returns them from
// there, and the retention then drops them. Polls with deadlines; asserts
// no timings.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {
namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Polls `sql` until it returns `want` or `deadline_s` pass; returns the last
// answer.
std::string PollUntil(const std::string& sql, const std::string& want, int deadline_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  std::string got = Q(sql);
  while (got != want && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    got = Q(sql);
  }
  return got;
}

// Active parts of the spans table that hold rows, off the cold disk / all.
std::string SpansPartsNotOnCold() {
  return fmt::format(
      "SELECT countIf(disk_name != 'cold'), count() > 0 FROM system.parts WHERE database = '{}' "
      "AND table = 'spans' AND active AND rows > 0",
      kDatabase);
}

std::string CreateQuery(const char* table) {
  return Q(
      fmt::format("SELECT create_table_query FROM system.tables WHERE database = '{}' AND "
                  "name = '{}'",
                  kDatabase, table));
}

// Whether a part's files lie under `dir` (a part directory has columns.txt).
bool HasPartFiles(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() == "columns.txt") return true;
  }
  return false;
}

TEST(ChdbTiering, EngineHasTheTieredPolicy) {
  EXPECT_EQ(Q(fmt::format("SELECT volume_name, disks, prefer_not_to_merge FROM "
                          "system.storage_policies WHERE policy_name = '{}' ORDER BY "
                          "volume_priority",
                          kTieredPolicy)),
            "default\t['default']\t0\ncold\t['cold']\t1\n");
  EXPECT_EQ(Q("SELECT path FROM system.disks WHERE name = 'cold'"), Engine::cold_dir + "/\n");
}

TEST(ChdbTiering, SpansMoveToColdAreReadThereAndThenDeleted) {
  Reset();
  SchemaOptions opts;
  opts.tiered = true;
  opts.move_after_s = 3;
  opts.retention_s = 25;
  Capabilities caps;
  Status st = EnsureSchema(*Engine::conn, &caps, opts);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(caps.ttl_moves);
  // Recent spans (the TTL counts from their timestamps), in two inserts.
  const auto written = std::chrono::steady_clock::now();
  const SpanBatch in = testdata::SampleBatch(2, NowNs());
  WriteAll(in, caps);
  WriteAll(testdata::SampleBatch(1, NowNs()), caps);
  const std::string where = Q(SpansPartsNotOnCold());
  if (std::chrono::steady_clock::now() - written < std::chrono::seconds(2)) {
    EXPECT_EQ(where, "2\t1\n") << "fresh parts start on the hot volume";
  }

  // The background mover takes every part to the cold disk.
  ASSERT_EQ(PollUntil(SpansPartsNotOnCold(), "0\t1\n", 60), "0\t1\n")
      << Q(fmt::format("SELECT name, disk_name, rows FROM system.parts WHERE database = '{}' AND "
                       "table = 'spans' AND active",
                       kDatabase));
  EXPECT_TRUE(HasPartFiles(Engine::cold_dir));
  // Read back from there, exactly as written (the second write added a
  // second copy of trace 0's spans, so compare trace 1 only).
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  st = reader.GetTrace(testdata::MakeTraceId(1), &out);
  ASSERT_TRUE(st.ok()) << st.message();
  SpanBatch want;
  std::vector<uint32_t> trace1;
  for (uint32_t i = 0; i < in.span_count(); ++i) {
    if (in.spans.trace_id[i] == testdata::MakeTraceId(1)) trace1.push_back(i);
  }
  want.AppendSpans(in, trace1.data(), trace1.size());
  std::string why;
  EXPECT_TRUE(want.LogicallyEquals(out, &why)) << why;
  SpanBatch both;
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(0), &both).ok());
  EXPECT_EQ(both.span_count(), 2 * trace1.size());

  // Past the retention the parts are dropped whole, and the trace is gone.
  ASSERT_EQ(PollUntil(fmt::format("SELECT count() FROM {}.spans", kDatabase), "0\n", 120), "0\n");
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM system.parts WHERE database = '{}' AND table = "
                          "'spans' AND active AND rows > 0",
                          kDatabase)),
            "0\n");
  SpanBatch gone;
  EXPECT_EQ(reader.GetTrace(testdata::MakeTraceId(1), &gone).code(), StatusCode::kNotFound);
}

// A copying upgrade (schema 5 -> 6) of days older than move_after_s: each
// day is merged into one part before it goes to the cold volume, where
// nothing merges; then the tables have their policy and TTL again.
TEST(ChdbTiering, UpgradeCopyOfOldDaysIsMergedBeforeItMovesToCold) {
  Reset();
  SchemaOptions opts;
  opts.tiered = true;
  opts.move_after_s = 3600;
  opts.retention_s = 30 * 86400;
  SchemaOptions v5 = opts;
  v5.layout = Schema5Layout();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, v5).ok());
  // Two days ago, in three inserts: on cold at once (past the move).
  const uint64_t old_ns = NowNs() - 2 * 86400ull * 1000000000ull;
  for (int i = 0; i < 3; ++i) {
    WriteAll(testdata::SampleBatch(2, old_ns + static_cast<uint64_t>(i) * 1000000000ull), caps,
             UserFieldValues::kMarked, v5.layout.extras_column, v5.layout.span_ids_column,
             v5.layout.attr_columns);
  }
  const std::string parts = fmt::format(
      "SELECT count(), countIf(disk_name = 'cold'), sum(rows) FROM system.parts WHERE database = "
      "'{}' AND table = 'spans' AND active",
      kDatabase);
  const std::string before = Q(parts);
  ASSERT_EQ(before.substr(0, 2), "3\t") << before;
  // The copy's insert in blocks of 4 rows: the day in several parts, as a
  // large day's copy leaves it (~400k rows a part).
  const std::string small_blocks =
      "max_insert_block_size = 4, min_insert_block_size_rows = 4, min_insert_block_size_bytes = "
      "0, max_block_size = 4, max_threads = 1";
  Q("SET " + small_blocks);
  Status st = EnsureSchema(*Engine::conn, &caps, opts);
  Q("SET max_insert_block_size = DEFAULT, min_insert_block_size_rows = DEFAULT, "
    "min_insert_block_size_bytes = DEFAULT, max_block_size = DEFAULT, max_threads = DEFAULT");
  ASSERT_TRUE(st.ok()) << st.message();
  const std::string rows = before.substr(before.rfind('\t'));
  EXPECT_EQ(PollUntil(parts, "1\t1" + rows, 60), "1\t1" + rows);
  EXPECT_NE(CreateQuery("spans").find("storage_policy"), std::string::npos);
  EXPECT_NE(CreateQuery("spans").find(" TTL "), std::string::npos);
  EXPECT_NE(CreateQuery("spans").find("index_granularity = 4096,"), std::string::npos);
}

TEST(ChdbTiering, ExistingTablesTakeThePolicyAndRetentionInPlace) {
  Reset();
  // As an older spanhouse left it: default policy, no TTL anywhere.
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(CreateQuery("spans").find("storage_policy"), std::string::npos);
  EXPECT_EQ(CreateQuery("spans").find(" TTL "), std::string::npos);
  WriteAll(testdata::SampleBatch(2, NowNs() - 120ull * 1000000000ull), caps);

  SchemaOptions opts;
  opts.tiered = true;
  opts.move_after_s = 5;
  opts.retention_s = 3 * 86400;
  Status st = EnsureSchema(*Engine::conn, &caps, opts);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::string spans = CreateQuery("spans");
  EXPECT_NE(spans.find(fmt::format("storage_policy = \\'{}\\'", kTieredPolicy)), std::string::npos)
      << spans;
  EXPECT_NE(spans.find("TTL timestamp + toIntervalSecond(5) TO VOLUME \\'cold\\', timestamp + "
                       "toIntervalSecond(259200) SETTINGS"),
            std::string::npos)
      << spans;
  EXPECT_NE(spans.find("ttl_only_drop_parts = 1"), std::string::npos) << spans;
  EXPECT_NE(CreateQuery("trace_index").find("TTL toDateTime(day) + toIntervalSecond(345600)"),
            std::string::npos)
      << CreateQuery("trace_index");
  EXPECT_NE(CreateQuery("resources").find("TTL last_seen + toIntervalSecond(432000)"),
            std::string::npos)
      << CreateQuery("resources");
  // The part stored before the change is two minutes old: its TTL is
  // recomputed in place and the mover takes it to cold.
  ASSERT_EQ(PollUntil(SpansPartsNotOnCold(), "0\t1\n", 60), "0\t1\n");
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(1), &out).ok());
  EXPECT_EQ(out.span_count(), 3u);

  // A start with the same configuration changes nothing (no ALTER, so no
  // new mutation and the same table definitions).
  const std::string mutations =
      fmt::format("SELECT count() FROM system.mutations WHERE database = '{}'", kDatabase);
  const std::string before = Q(mutations);
  const std::string tables = fmt::format(
      "SELECT name, create_table_query FROM system.tables WHERE database = '{}' ORDER BY name",
      kDatabase);
  const std::string defs = Q(tables);
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, opts).ok());
  EXPECT_EQ(Q(mutations), before);
  EXPECT_EQ(Q(tables), defs);

  // Another retention at the next start replaces the TTLs.
  opts.retention_s = 7 * 86400;
  opts.move_after_s = 8 * 3600;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, opts).ok());
  EXPECT_NE(CreateQuery("spans").find("TTL timestamp + toIntervalSecond(28800) TO VOLUME "
                                      "\\'cold\\', timestamp + toIntervalSecond(604800) SETTINGS"),
            std::string::npos)
      << CreateQuery("spans");
  EXPECT_NE(CreateQuery("trace_index").find("toIntervalSecond(691200)"), std::string::npos);
}

// The resources table's retention counts from last_seen, so a writer
// stores the resources it uses again once per resource_refresh.
TEST(ChdbTiering, ResourcesInUseAreStoredAgainAfterTheRefresh) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  // Each batch of 2 traces x 3 spans is a flush, and an insert, of its own.
  WriterOptions opts = TestWriter(6, 6);
  opts.resource_refresh = std::chrono::seconds(0);
  testdata::OneWriter writer(Engine::conn.get(), caps, opts);
  for (int k = 0; k < 3; ++k) {
    auto b = std::make_unique<SpanBatch>(testdata::SampleBatch(2, NowNs() + k));
    ASSERT_TRUE(writer.Push(std::move(b)).ok());
  }
  writer.Close();
  EXPECT_EQ(writer.stats().writes.load(), 3u);
  // Two resources, stored by every flush (with a refresh of a day: once;
  // ChdbRoundTrip.EachResourceIsStoredOncePerWriter).
  EXPECT_EQ(Q(fmt::format("SELECT count(), uniqExact(resource_id) FROM {}.resources", kDatabase)),
            "6\t2\n");
}

TEST(ChdbTiering, NoRetentionMeansNoTtl) {
  Reset();
  Capabilities caps;
  SchemaOptions opts;
  opts.retention_s = 3600;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, opts).ok());
  EXPECT_NE(CreateQuery("spans").find(" TTL timestamp + toIntervalSecond(3600) "),
            std::string::npos)
      << CreateQuery("spans");
  // Retention 0 (tests with fixed old timestamps) removes it again.
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  for (const char* t : {"spans", "trace_index", "resources"}) {
    EXPECT_EQ(CreateQuery(t).find(" TTL "), std::string::npos) << CreateQuery(t);
  }
}

}  // namespace
}  // namespace spanhouse::storage
