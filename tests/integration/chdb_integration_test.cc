// Integration tests against real embedded ClickHouse (chDB): the schema,
// the writer's insert path and the span reader, end to end below HTTP.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "integration/trace_as_read.h"
#include "sink/span_queue.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/tsv.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::storage {
namespace {

TEST(ChdbSchema, CreationIsIdempotent) {
  Reset();
  Capabilities caps;
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(caps.datetime64);
  EXPECT_TRUE(caps.dedup_token);  // chDB has the setting
  EXPECT_TRUE(caps.jit_settings);
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
      std::to_string(SpanColumns(true, true, true).size() + SpanIdAliases().size()) + "\n");
}

// The remote generator given a modern server's capabilities (26.5, as a
// ClickHouse server would report it) makes exactly what the embedded store
// runs: the same tables and views, columns, types, engines, keys and TTLs.
TEST(ChdbSchema, TheGeneratorForAModernServerMakesTheEmbeddedSchema) {
  Reset();
  Capabilities embedded;
  SchemaOptions opts;
  opts.retention_s = 7 * 86400;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &embedded, opts).ok());
  const Capabilities modern = Capabilities::FromVersion("26.5.1.1");
  EXPECT_EQ(SchemaDdl(modern, opts), SchemaDdl(embedded, opts));
  SchemaOptions remote = opts;
  remote.database = "generated_for_26_5";
  Q("DROP DATABASE IF EXISTS generated_for_26_5");
  for (const std::string& sql : SchemaDdl(modern, remote)) Q(sql);
  auto shape = [](const std::string& db) {
    std::string out = Q(fmt::format(
        "SELECT name, engine, sorting_key, partition_key, primary_key, "
        "replaceAll(engine_full, '{0}.', ''), "
        "replaceAll(as_select, '{0}.', '') FROM system.tables WHERE database = '{0}' AND name != "
        "'schema_version' ORDER BY name",
        db));
    out += Q(fmt::format(
        "SELECT table, name, type, default_expression, compression_codec FROM system.columns "
        "WHERE database = '{}' ORDER BY table, position",
        db));
    return out;
  };
  const std::string want = shape(std::string(kDatabase));
  EXPECT_NE(want.find("red_service_1m_mv"), std::string::npos);
  EXPECT_EQ(shape("generated_for_26_5"), want);
  Q("DROP DATABASE generated_for_26_5");
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
  // The writer's parts are compact (one data file, not files per column).
  EXPECT_EQ(Q(fmt::format("SELECT DISTINCT part_type FROM system.parts WHERE database = '{}' AND "
                          "table = 'spans' AND active",
                          kDatabase)),
            "Compact\n");
}

// Parts from layout.min_bytes_for_wide_part are wide (a store of an older
// spanhouse gets the threshold at its next start): small inserts stay
// compact, a merge past the threshold writes a wide part.
TEST(ChdbSchema, MergedPartsPastTheThresholdAreWide) {
  Reset();
  Capabilities caps;
  SchemaOptions opts;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, opts).ok());
  const std::string setting_sql = fmt::format(
      "SELECT extract(engine_full, 'min_bytes_for_wide_part = \\d+') FROM system.tables WHERE "
      "database = '{}' AND name = 'spans'",
      kDatabase);
  EXPECT_EQ(Q(setting_sql), "min_bytes_for_wide_part = 33554432\n");
  const std::string types_sql = fmt::format(
      "SELECT groupArray(part_type) FROM system.parts WHERE database = '{}' AND table = 'spans' "
      "AND active",
      kDatabase);
  WriteAll(testdata::SampleBatch(1), caps);
  WriteAll(testdata::SampleBatch(2), caps);
  EXPECT_EQ(Q(types_sql), "['Compact','Compact']\n");
  // As an older store: the threshold of its own, set again at the next start.
  Q(fmt::format("ALTER TABLE {}.spans MODIFY SETTING min_bytes_for_wide_part = 268435456",
                kDatabase));
  opts.layout.min_bytes_for_wide_part = 1;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, opts).ok());
  EXPECT_EQ(Q(setting_sql), "min_bytes_for_wide_part = 1\n");
  Q(fmt::format("OPTIMIZE TABLE {}.spans FINAL", kDatabase));
  EXPECT_EQ(Q(types_sql), "['Wide']\n");
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(1), &out).ok());
  EXPECT_GT(out.span_count(), 0u);
}

// A lookup finds the marks of the parts it reads (spans, trace_index,
// resources) in the engine's cache from the first: the tables load them when a
// part is written (and when the table starts). A store made before gets the
// setting at its next start; without it, the same lookup misses the cache.
TEST(ChdbSchema, ALookupFindsThePartsMarksCached) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  ASSERT_TRUE(caps.prewarm_mark_cache);
  const std::string settings_sql = fmt::format(
      "SELECT name, extract(engine_full, 'prewarm_mark_cache = \\d') FROM system.tables WHERE "
      "database = '{}' AND name IN ('resources', 'spans', 'trace_index') ORDER BY name",
      kDatabase);
  const std::string on =
      "resources\tprewarm_mark_cache = 1\nspans\tprewarm_mark_cache = 1\n"
      "trace_index\tprewarm_mark_cache = 1\n";
  EXPECT_EQ(Q(settings_sql), on);
  for (const char* t : {"resources", "spans", "trace_index"}) {
    Q(fmt::format("ALTER TABLE {}.{} RESET SETTING prewarm_mark_cache", kDatabase, t));
  }
  EXPECT_EQ(Q(settings_sql), "resources\t\nspans\t\ntrace_index\t\n");
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());  // the next start
  EXPECT_EQ(Q(settings_sql), on);

  ChdbSpanReader reader(*Engine::conn, caps);
  const auto misses_of_lookup = [&](uint8_t trace) {
    const std::string misses_sql =
        "SELECT sum(value) FROM system.events WHERE event = 'MarkCacheMisses'";
    const uint64_t before = std::stoull("0" + Q(misses_sql));
    SpanBatch out;
    Status st = reader.GetTrace(testdata::MakeTraceId(trace), &out);
    EXPECT_TRUE(st.ok()) << st.message();
    EXPECT_GT(out.span_count(), 0u);
    return std::stoull("0" + Q(misses_sql)) - before;
  };
  WriteAll(testdata::SampleBatch(1), caps);
  EXPECT_EQ(misses_of_lookup(0), 0u);
  // The control: a part written without the setting is read from disk.
  Q(fmt::format("ALTER TABLE {}.spans MODIFY SETTING prewarm_mark_cache = 0", kDatabase));
  SpanBatch later = testdata::SampleBatch(2);
  WriteAll(later, caps);
  EXPECT_GT(misses_of_lookup(1), 0u);
}

// The spans columns of small granules get 16 KiB compressed blocks, in a
// new store and, at its next start, in one made before.
TEST(ChdbSchema, SmallBlockColumnsAreSetInPlace) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  ASSERT_TRUE(caps.column_settings);
  const std::string count_sql = fmt::format(
      "SELECT countSubstrings(create_table_query, 'SETTINGS (min_compress_block_size = 16384)'), "
      "position(create_table_query, '`user_fields` Map(LowCardinality(String), "
      "LowCardinality(String)) CODEC(ZSTD(6)) SETTINGS (min_compress_block_size = 16384)') > 0 "
      "FROM system.tables WHERE database = '{}' AND name = 'spans'",
      kDatabase);
  const size_t n = StorageLayout{}.small_block_columns.size();
  EXPECT_EQ(Q(count_sql), fmt::format("{}\t1\n", n));
  for (const char* c : {"user_fields", "kind"}) {
    Q(fmt::format("ALTER TABLE {}.spans MODIFY COLUMN {} RESET SETTING min_compress_block_size",
                  kDatabase, c));
  }
  EXPECT_EQ(Q(count_sql), fmt::format("{}\t0\n", n - 2));
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());  // the next start
  EXPECT_EQ(Q(count_sql), fmt::format("{}\t1\n", n));
  // Spans written and merged with them come back whole.
  SpanBatch in = testdata::SampleBatch(2);
  WriteAll(in, caps);
  WriteAll(in, caps);
  Q(fmt::format("OPTIMIZE TABLE {}.spans FINAL", kDatabase));
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(0), &out).ok());
  EXPECT_GT(out.span_count(), 0u);
}

// The spans table's Strings are written as one stream each (no `.size`
// stream), in a new store and, at its next start, in one made before; the
// parts written meanwhile keep two until merged, and read back the same.
TEST(ChdbSchema, SpansStringsAreOneStreamEach) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  ASSERT_TRUE(caps.single_stream_strings);
  // Per part, how many of its String columns have a sizes stream, fewest first.
  const std::string parts_sql = fmt::format(
      "SELECT name, sum(arrayExists(s -> endsWith(s, '.size'), substreams)) AS n FROM "
      "system.parts_columns WHERE database = '{}' AND table = 'spans' AND active AND type = "
      "'String' GROUP BY name ORDER BY n, name",
      kDatabase);
  const auto size_streams = [&] {
    std::vector<uint64_t> per_part;
    for (const auto& row : TsvRows(Q(parts_sql))) per_part.push_back(std::stoull(row.at(1)));
    return per_part;
  };
  WriteAll(testdata::SampleBatch(1), caps);
  EXPECT_EQ(size_streams(), (std::vector<uint64_t>{0}));
  // The control: without the setting, the engine writes sizes streams.
  Q(fmt::format("ALTER TABLE {}.spans RESET SETTING string_serialization_version", kDatabase));
  SpanBatch second = testdata::SampleBatch(2);
  for (uint32_t i = 0; i < second.span_count(); ++i) second.spans.trace_id[i][15] ^= 0x5a;
  WriteAll(second, caps);
  const std::vector<uint64_t> mixed = size_streams();
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[0], 0u);
  EXPECT_GT(mixed[1], 0u);
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());  // the next start
  EXPECT_EQ(Q(fmt::format("SELECT position(engine_full, 'string_serialization_version = "
                          "\\'single_stream\\'') > 0 FROM system.tables WHERE database = '{}' "
                          "AND name = 'spans'",
                          kDatabase)),
            "1\n");
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch before;
  ASSERT_TRUE(reader.GetTrace(second.spans.trace_id[0], &before).ok());
  Q(fmt::format("OPTIMIZE TABLE {}.spans FINAL", kDatabase));
  EXPECT_EQ(size_streams(), (std::vector<uint64_t>{0}));
  SpanBatch after;
  ASSERT_TRUE(reader.GetTrace(second.spans.trace_id[0], &after).ok());
  std::string why;
  EXPECT_TRUE(after.LogicallyEquals(before, &why)) << why;
  EXPECT_GT(after.span_count(), 0u);
}

// A reader keeps the resources it has read, up to max_cached_resources.
// Traces 0 and 1 use resources r0 and r1, trace 2 r0 and a third one: its
// lookup finds r0 cached, r2 not, and the cache full, so it starts over;
// every span must still get its own resource, r0's included.
TEST(ChdbRoundTrip, ResourcesComeBackWhenTheReadersCacheStartsOver) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  SpanBatch in = testdata::SampleBatch(3);
  ASSERT_EQ(in.resources.attrs.size(), 2u);
  const uint32_t r2 = in.AddResource();
  SpanBatch::AddAttr(in.resource_attrs, in.AddString("service.name"), ValueType::kString,
                     in.AddString("cache"));
  in.resources.attrs[r2] = {static_cast<uint32_t>(in.resource_attrs.size() - 1),
                            static_cast<uint32_t>(in.resource_attrs.size())};
  in.ResolveServiceName(r2);
  in.spans.resource[8] = r2;  // trace 2's third span
  WriteAll(in, caps);
  ReaderLimits limits;
  limits.max_cached_resources = 2;
  ChdbSpanReader reader(*Engine::conn, caps, limits);
  for (int round = 0; round < 2; ++round) {
    SpanBatch out;
    for (uint8_t t = 0; t < 3; ++t) {
      Status st = reader.GetTrace(testdata::MakeTraceId(t), &out);
      ASSERT_TRUE(st.ok()) << st.message();
    }
    std::string why;
    EXPECT_TRUE(in.LogicallyEquals(out, &why)) << "round " << round << ": " << why;
  }
}

// Key columns go to the engine as LowCardinality with the writer's own
// dictionaries; with more than 256 and more than 65536 distinct values the
// indexes are two and four bytes wide. The engine must read every width.
TEST(ChdbRoundTrip, LowCardinalityKeysOfEveryIndexWidthAreStoredExactly) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  ASSERT_TRUE(caps.low_cardinality);
  SpanBatch in;
  const SpanBatch one = testdata::SampleBatch(1);
  while (in.span_count() < 70000) in.Append(one);
  for (uint32_t i = 0; i < in.span_count(); ++i) {
    in.spans.name[i] = in.AddString(fmt::format("op-{}", i));
    in.span_attrs.key[in.spans.attrs[i].begin] = in.AddString(fmt::format("k{}", i % 300));
  }
  WriteAll(in, caps);
  const size_t n = in.span_count();
  EXPECT_EQ(Q(fmt::format("SELECT count(), uniqExact(name), min(name), max(name) FROM {}.spans",
                          kDatabase)),
            fmt::format("{0}\t{0}\top-0\top-9999\n", n));
  EXPECT_EQ(Q(fmt::format("SELECT uniqExact(attr_keys[1]), countIf(attr_keys[1] = 'k299') FROM "
                          "{}.spans",
                          kDatabase)),
            fmt::format("300\t{}\n", (n + 300 - 299 - 1) / 300));
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
  // By the id's first 8 bytes, in seconds: the first start rounded down,
  // the last end up.
  const std::string row =
      Q(fmt::format("SELECT min(start_s), max(end_s) FROM {}.trace_index WHERE trace_id8 = "
                    "substring(unhex('{}'), 1, 8)",
                    kDatabase, ToHex(testdata::MakeTraceId(0))));
  const uint64_t lo = in.spans.start_ns[0] / 1000000000;
  const uint64_t hi = (later.spans.end_ns[2] + 999999999) / 1000000000;
  EXPECT_EQ(row, fmt::format("{}\t{}\n", lo, hi));
}

TEST(ChdbRoundTrip, EachResourceIsStoredOncePerWriter) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  // Two flushes of spans from the same two resources, through one writer.
  // Each batch of 2 traces x 3 spans is a flush, and an insert, of its own.
  const WriterOptions opts = TestWriter(6, 6);
  testdata::OneWriter writer(Engine::conn.get(), caps, opts);
  for (int k = 0; k < 2; ++k) {
    auto b = std::make_unique<SpanBatch>(testdata::SampleBatch(2, 1700000000000000000ull + k));
    ASSERT_TRUE(writer.Push(std::move(b)).ok());
  }
  writer.Close();
  EXPECT_EQ(writer.stats().writes.load(), 2u);
  EXPECT_EQ(Q(fmt::format("SELECT count(), uniqExact(resource_id) FROM {}.resources", kDatabase)),
            "2\t2\n");
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans WHERE resource_id NOT IN (SELECT "
                          "resource_id FROM {}.resources)",
                          kDatabase, kDatabase)),
            "0\n");
  // A writer that starts afresh (a restart) stores them again; reads still
  // see one resource per span.
  WriteAll(testdata::SampleBatch(2, 1700000000000000000ull), caps);
  EXPECT_EQ(Q(fmt::format("SELECT count(), uniqExact(resource_id) FROM {}.resources", kDatabase)),
            "4\t2\n");
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(0), &out).ok());
  EXPECT_EQ(out.span_count(), 9u);  // three writes of the trace's 3 spans
  EXPECT_EQ(out.resource_attrs.size(), 9u * 2);
  // Counting by a resource and by a span attribute: 3 writes x 2 traces x
  // 2 "frontend" spans, and every span has http.method = GET.
  uint64_t n = 0;
  ASSERT_TRUE(
      reader
          .CountSpansWithAttr(ChdbSpanReader::AttrOwner::kResource, "service.name", "frontend", &n)
          .ok());
  EXPECT_EQ(n, 12u);
  ASSERT_TRUE(
      reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kSpan, "http.method", "GET", &n).ok());
  EXPECT_EQ(n, 18u);
  ASSERT_TRUE(
      reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kSpan, "http.method", "PUT", &n).ok());
  EXPECT_EQ(n, 0u);
}

// Blocks spooled by the writer are inserted together: one part per insert,
// every span once, its resource stored, the spool files gone after.
TEST(ChdbRoundTrip, SpooledBlocksOfOneInsertBecomeOnePart) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  // Each batch of 2 traces x 3 spans is a block of its own, three blocks an insert.
  WriterOptions opts = TestWriter(6, 18);
  opts.max_age = std::chrono::hours(1);
  testdata::OneWriter writer(Engine::conn.get(), caps, opts);
  for (int k = 0; k < 6; ++k) {
    auto b = std::make_unique<SpanBatch>(
        testdata::SampleBatch(2, 1700000000000000000ull + static_cast<uint64_t>(k) * 1000));
    for (uint32_t i = 0; i < b->span_count(); ++i) {
      b->spans.trace_id[i] = testdata::MakeTraceId(static_cast<uint8_t>(10 + 2 * k + i / 3));
    }
    ASSERT_TRUE(writer.Push(std::move(b)).ok());
  }
  writer.Close();
  EXPECT_EQ(writer.stats().writes.load(), 2u);
  EXPECT_EQ(Q(fmt::format("SELECT count(), sum(rows) FROM system.parts WHERE database = '{}' AND "
                          "table = 'spans' AND active",
                          kDatabase)),
            "2\t36\n");
  EXPECT_EQ(Q(fmt::format("SELECT count(), uniqExact(trace_id, span_id) FROM {}.spans", kDatabase)),
            "36\t36\n");
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans WHERE resource_id NOT IN (SELECT "
                          "resource_id FROM {}.resources)",
                          kDatabase, kDatabase)),
            "0\n");
  // Each trace reads back whole.
  ChdbSpanReader reader(*Engine::conn, caps);
  for (int t = 10; t < 22; ++t) {
    SpanBatch out;
    ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(static_cast<uint8_t>(t)), &out).ok());
    EXPECT_EQ(out.span_count(), 3u) << t;
  }
  size_t left = 0;
  for (const auto& e : std::filesystem::directory_iterator(opts.spool_dir)) {
    (void)e;
    ++left;
  }
  EXPECT_EQ(left, 0u);
}

// A spool file an insert is done with is written over by a later block,
// smaller or larger, and cut to it: every span reads back exactly, and
// nothing is left in the spool directory after.
TEST(ChdbRoundTrip, SpoolFilesWrittenOverHoldOnlyTheirBlock) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  WriterOptions opts = TestWriter(1, 1);  // each batch a block, each block an insert
  opts.max_backoff = std::chrono::milliseconds(100);
  opts.shutdown_retries = 1;
  testdata::OneWriter writer(Engine::conn.get(), caps, opts);
  SpanBatch all;
  const int kBatches = 8;
  int stored = 0;  // batches stored before the next was pushed
  for (int k = 0; k < kBatches && stored == k; ++k) {
    // Large and small in turn (12 and 3 spans), each its own traces.
    auto b = std::make_unique<SpanBatch>(testdata::SampleBatch(
        k % 2 == 0 ? 4 : 1, 1700000000000000000ull + static_cast<uint64_t>(k) * 1000000));
    for (uint32_t i = 0; i < b->span_count(); ++i) {
      b->spans.trace_id[i] = testdata::MakeTraceId(static_cast<uint8_t>(40 + 8 * k + i / 3));
    }
    all.Append(*b);
    EXPECT_TRUE(writer.Push(std::move(b)).ok());
    // Stored before the next comes: its file is free for the next block.
    for (int wait = 0; wait < 1000 && writer.stats().writes.load() < static_cast<uint64_t>(k + 1);
         ++wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (writer.stats().writes.load() == static_cast<uint64_t>(k + 1)) ++stored;
  }
  // A block the engine refuses is retried until shutdown gives it up.
  writer.Close();
  ASSERT_EQ(stored, kBatches);
  EXPECT_EQ(writer.stats().write_errors.load(), 0u);
  EXPECT_EQ(writer.stats().spool_files_reused.load(), static_cast<uint64_t>(kBatches - 1));
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)),
            fmt::format("{}\n", all.span_count()));
  ChdbSpanReader reader(*Engine::conn, caps);
  std::set<TraceId> ids(all.spans.trace_id.begin(), all.spans.trace_id.end());
  std::string why;
  for (const TraceId& id : ids) {
    SpanBatch out;
    ASSERT_TRUE(reader.GetTrace(id, &out).ok()) << ToHex(id);
    EXPECT_TRUE(TraceAsRead(all, id).LogicallyEquals(out, &why)) << ToHex(id) << ": " << why;
  }
  EXPECT_TRUE(std::filesystem::is_empty(opts.spool_dir));
}

class ChdbUserFields : public ::testing::TestWithParam<bool> {};

TEST_P(ChdbUserFields, QueryByPathReturnsExactlyTheSpansThatCarryIt) {
  const bool map = GetParam();
  Reset();
  Capabilities caps;
  SchemaOptions made;
  if (!map) made.layout = Schema12Layout();
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, made).ok());
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());  // the next start
  EXPECT_EQ(Q(fmt::format("SELECT type FROM system.columns WHERE database = '{}' AND table = "
                          "'spans' AND name = 'user_fields'",
                          kDatabase)),
            map ? std::string(kUserFieldsMapType) + "\n" : "JSON\n");
  bool stored_map = !map;
  ASSERT_TRUE(SpansUserFieldsMap(*Engine::conn, kDatabase, &stored_map).ok());
  EXPECT_EQ(stored_map, map);
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{11});
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  SpanBatch in;
  for (size_t t = 0; t < 400; ++t) gen.AppendTrace(now - 600000000000ull + t * 1000000ull, &in);
  WriteAll(in, caps);

  // Expected, from the batch: the value of `key` on span i (its own
  // attribute first, else its resource's), or nullopt.
  const auto value_of = [&](uint32_t i, std::string_view key) -> std::optional<std::string> {
    for (uint32_t a = in.spans.attrs[i].begin; a < in.spans.attrs[i].end; ++a) {
      if (in.Str(in.span_attrs.key[a]) == key) return std::string(in.Str(in.span_attrs.value[a]));
    }
    const Range r = in.resources.attrs[in.spans.resource[i]];
    for (uint32_t a = r.begin; a < r.end; ++a) {
      if (in.Str(in.resource_attrs.key[a]) == key) {
        return std::string(in.Str(in.resource_attrs.value[a]));
      }
    }
    return std::nullopt;
  };
  const auto expect = [&](std::string_view key, const std::string& value) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < in.span_count(); ++i) {
      const auto v = value_of(i, key);
      if (v && (value.empty() || *v == value)) ++n;
    }
    return n;
  };
  ChdbSpanReader reader(*Engine::conn, caps);
  const auto count = [&](const std::string& key, const std::string& value) {
    uint64_t n = 0;
    Status st = reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kUserField, key, value, &n);
    EXPECT_TRUE(st.ok()) << st.message();
    return n;
  };
  // A string, an int (compared as its text) and presence alone.
  const uint64_t android = expect("app.channel", "android");
  EXPECT_GT(android, 0u);
  EXPECT_LT(android, in.span_count());
  EXPECT_EQ(count("app.channel", "android"), android);
  std::string store;
  for (uint32_t i = 0; i < in.span_count() && store.empty(); ++i) {
    store = value_of(i, "app.store_id").value_or("");
  }
  ASSERT_FALSE(store.empty());
  EXPECT_EQ(count("app.store_id", store), expect("app.store_id", store));
  const uint64_t orders = expect("app.order_id", "");
  EXPECT_GT(orders, 0u);
  EXPECT_EQ(count("app.order_id", ""), orders);
  // Well-known keys stay out of user_fields.
  EXPECT_GT(expect("http.request.method", ""), 0u);
  EXPECT_EQ(count("http.request.method", ""), 0u);
  EXPECT_EQ(count("no.such.field", ""), 0u);
  // The path is a bound parameter, not SQL.
  EXPECT_EQ(count("x') OR 1=1 --", ""), 0u);
  // The same key as a span's own attribute: its value is in user_fields
  // only, the arrays' type marked.
  uint64_t own = 0;
  for (uint32_t i = 0; i < in.span_count(); ++i) {
    for (uint32_t a = in.spans.attrs[i].begin; a < in.spans.attrs[i].end; ++a) {
      own += in.Str(in.span_attrs.key[a]) == "app.channel" &&
             in.Str(in.span_attrs.value[a]) == "android";
    }
  }
  EXPECT_GT(own, 0u);
  uint64_t n = 0;
  ASSERT_TRUE(
      reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kSpan, "app.channel", "android", &n)
          .ok());
  EXPECT_EQ(n, own);
  // Traces read back whole, their values put back from user_fields.
  std::set<TraceId> ids(in.spans.trace_id.begin(), in.spans.trace_id.end());
  std::string why;
  int read = 0;
  for (const TraceId& id : ids) {
    if (++read > 40) break;
    SpanBatch out;
    ASSERT_TRUE(reader.GetTrace(id, &out).ok());
    ASSERT_TRUE(TraceAsRead(in, id).LogicallyEquals(out, &why)) << ToHex(id) << ": " << why;
  }
}

// Spans without a user field: their maps (or JSON objects) are empty, and a
// trace of them alone reads back whole.
TEST_P(ChdbUserFields, ATraceWithoutUserFieldsReadsBack) {
  Reset();
  Capabilities caps;
  SchemaOptions made;
  if (!GetParam()) made.layout = Schema12Layout();
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, made).ok());
  WriterOptions o = TestWriter();
  o.well_known.insert(o.well_known.end(),
                      {"ratio", "cached", "blob", "list", "map", "nothing", "tags"});
  const SpanBatch in = testdata::SampleBatch(1);
  WriteOneBatch(Engine::conn.get(), caps, o, in);
  EXPECT_EQ(Q(fmt::format("SELECT count(), countIf(toString(user_fields) IN ('{{}}', '')) FROM "
                          "{}.spans",
                          kDatabase)),
            fmt::format("{0}\t{0}\n", in.span_count()));
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(in.spans.trace_id[0], &out).ok());
  std::string why;
  EXPECT_TRUE(TraceAsRead(in, in.spans.trace_id[0]).LogicallyEquals(out, &why)) << why;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ChdbUserFields, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Map" : "JsonOfAnOlderStore";
                         });

// The attribute columns (schema 12): fresh-corpus traces stored half as
// rows before them (every value in attr_values) and half with them read
// back exactly; a tag search on such a key finds exactly the spans that
// carry the value, in both kinds of rows.
TEST(ChdbAttrColumns, ValuesComeBackAndTagsFindThemInOldAndNewRows) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  ASSERT_TRUE(AttrColumnsStored(caps, {}));
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{12, loadgen::CorpusKind::kFresh});
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  SpanBatch before;
  SpanBatch after;
  for (size_t t = 0; t < 300; ++t) {
    gen.AppendTrace(now - 600000000000ull + t * 1000000ull, t % 2 == 0 ? &before : &after);
  }
  WriteAll(before, caps, UserFieldValues::kMarked, true, true, /*attr_columns=*/false);
  WriteAll(after, caps);
  EXPECT_EQ(Q(fmt::format("SELECT countIf(attr_db_statement != '') > 0, countIf(attr_network_"
                          "peer_address != '') > 0, countIf(attr_user_agent_original != '') > 0, "
                          "countIf(attr_network_peer_port != '') > 0 FROM {}.spans",
                          kDatabase)),
            "1\t1\t1\t1\n");
  // Marked values leave attr_values; unmarked ones (the older rows) stay.
  EXPECT_EQ(Q(fmt::format("SELECT countIf(bitAnd(t, 64) != 0 AND v = '') > 0, countIf(bitAnd(t, "
                          "64) != 0 AND v != ''), countIf(bitAnd(t, 64) = 0 AND k = "
                          "'db.statement' AND v != '') > 0 FROM {}.spans ARRAY JOIN attr_keys AS "
                          "k, attr_types AS t, attr_values AS v",
                          kDatabase)),
            "1\t0\t1\n");
  ChdbSpanReader reader(*Engine::conn, caps);
  std::string why;
  for (const SpanBatch* in : {&before, &after}) {
    std::set<TraceId> ids(in->spans.trace_id.begin(), in->spans.trace_id.end());
    for (const TraceId& id : ids) {
      SpanBatch out;
      ASSERT_TRUE(reader.GetTrace(id, &out).ok());
      ASSERT_TRUE(TraceAsRead(*in, id).LogicallyEquals(out, &why)) << ToHex(id) << ": " << why;
    }
  }
  // A value of each key from each half, counted by the reader's condition
  // and in the batches.
  const auto spans_with = [&](std::string_view key, std::string_view value) {
    uint64_t n = 0;
    for (const SpanBatch* in : {&before, &after}) {
      for (uint32_t i = 0; i < in->span_count(); ++i) {
        for (uint32_t a = in->spans.attrs[i].begin; a < in->spans.attrs[i].end; ++a) {
          if (in->Str(in->span_attrs.key[a]) == key) {
            n += in->Str(in->span_attrs.value[a]) == value ? 1 : 0;
            break;  // the first of a key, as the condition reads it
          }
        }
      }
    }
    return n;
  };
  for (const auto& k : AttrColumnKeys()) {
    for (const SpanBatch* in : {&before, &after}) {
      std::string value;
      for (uint32_t i = in->span_count(); i-- > 0 && value.empty();) {
        for (uint32_t a = in->spans.attrs[i].begin; a < in->spans.attrs[i].end; ++a) {
          if (in->Str(in->span_attrs.key[a]) == k.key) {
            value = in->Str(in->span_attrs.value[a]);
            break;
          }
        }
      }
      ASSERT_FALSE(value.empty()) << k.key;
      uint64_t n = 0;
      const std::string key(k.key);
      ASSERT_TRUE(reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kSpan, key, value, &n).ok());
      EXPECT_EQ(n, spans_with(k.key, value)) << k.key << " = " << value;
      EXPECT_GT(n, 0u);
    }
  }
}

// A span's user fields keep their value in user_fields only (the arrays
// keep key and marked type); a read must give every one back, with its type
// and in its place: after merges, for keys the engine might treat specially
// (dots, spaces, quotes, non-ASCII), and for parts with more paths than the
// JSON type keeps as subcolumns (the rest go to its shared data); in a Map
// (schema 13) and in the JSON column of a store made before.
TEST_P(ChdbUserFields, SpanAttributesComeBackWithTheirTypesAfterMerges) {
  const bool map = GetParam();
  Reset();
  Capabilities caps;
  SchemaOptions made;
  if (!map) made.layout = Schema12Layout();
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, made).ok());
  ASSERT_TRUE(caps.json_type);
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  // Loadgen traces (app.* fields of every type), then spans with odd keys
  // and two with 700 distinct keys each, in three inserts: merged, a part
  // has more than 1024 paths.
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{5});
  SpanBatch loadgen_part;
  for (size_t t = 0; t < 50; ++t) {
    gen.AppendTrace(now - 1200000000000ull + t * 1000000ull, &loadgen_part);
  }
  auto odd = [&](uint8_t trace, int keys, int salt) {
    SpanBatch b = testdata::SampleBatch(1, now - 600000000000ull + static_cast<uint64_t>(salt));
    for (uint32_t i = 0; i < b.span_count(); ++i) {
      b.spans.trace_id[i] = testdata::MakeTraceId(trace);
      const uint32_t begin = static_cast<uint32_t>(b.span_attrs.size());
      for (uint32_t a = b.spans.attrs[i].begin; a < b.spans.attrs[i].end; ++a) {
        SpanBatch::AddAttr(b.span_attrs, b.span_attrs.key[a], b.span_attrs.type[a],
                           b.span_attrs.value[a]);
      }
      auto add = [&](const std::string& k, ValueType t, const std::string& v) {
        SpanBatch::AddAttr(b.span_attrs, b.AddString(k), t, b.AddString(v));
      };
      add("a..b", ValueType::kString, "double dot");
      add(".lead", ValueType::kInt, "7");
      add("trail.", ValueType::kBool, "false");
      add("with space", ValueType::kDouble, "2.5");
      add("quote\"'`", ValueType::kString, "q");
      add("\xc3\xa4pfel.gr\xc3\xb6\xc3\x9f"
          "e",
          ValueType::kString, "\xe2\x82\xac");
      add("cart", ValueType::kString, "leaf");  // a leaf beside cart.items
      add("cart.items", ValueType::kInt, "3");
      add("mixed", i % 2 == 0 ? ValueType::kInt : ValueType::kString, i % 2 == 0 ? "12" : "12");
      for (int k = 0; k < keys; ++k) {
        add(fmt::format("many.s{}.k{}", salt, k), k % 3 == 0 ? ValueType::kInt : ValueType::kString,
            std::to_string(k * 7 + salt));
      }
      b.spans.attrs[i] = {begin, static_cast<uint32_t>(b.span_attrs.size())};
    }
    return b;
  };
  const SpanBatch odd1 = odd(201, 700, 1);
  const SpanBatch odd2 = odd(202, 700, 2);
  WriteAll(loadgen_part, caps);
  WriteAll(odd1, caps);
  WriteAll(odd2, caps);
  // The values are stored once: marked in the arrays.
  EXPECT_EQ(Q(fmt::format("SELECT countIf(bitAnd(t, 128) != 0) > 0, countIf(bitAnd(t, 128) != 0 "
                          "AND v != '') FROM {}.spans ARRAY JOIN attr_types AS t, attr_values AS v",
                          kDatabase)),
            "1\t0\n");
  Q(fmt::format("OPTIMIZE TABLE {}.spans FINAL", kDatabase));
  // One part per day (the spans' times are relative to now: two days just
  // after midnight).
  EXPECT_EQ(Q(fmt::format("SELECT count() = uniqExact(partition) FROM system.parts WHERE database "
                          "= '{}' AND table = 'spans' AND active",
                          kDatabase)),
            "1\n");
  // Some of the merged part's paths are in the JSON type's shared data.
  if (!map) {
    EXPECT_EQ(
        Q(fmt::format("SELECT max(length(JSONSharedDataPaths(user_fields))) > 0 FROM {}.spans",
                      kDatabase)),
        "1\n");
  }

  ChdbSpanReader reader(*Engine::conn, caps);
  std::string why;
  for (const SpanBatch* in : {&odd1, &odd2}) {
    SpanBatch out;
    Status st = reader.GetTrace(in->spans.trace_id[0], &out);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(in->LogicallyEquals(out, &why)) << why;
  }
  // Every loadgen trace, span for span (the reader orders a trace's spans
  // by start time, then id: so is the expected batch).
  std::map<TraceId, std::vector<uint32_t>> want;
  for (uint32_t i = 0; i < loadgen_part.span_count(); ++i) {
    want[loadgen_part.spans.trace_id[i]].push_back(i);
  }
  size_t checked = 0;
  const auto& sp = loadgen_part.spans;
  for (auto& [id, order] : want) {
    std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      return std::tie(sp.start_ns[x], sp.span_id[x]) < std::tie(sp.start_ns[y], sp.span_id[y]);
    });
    SpanBatch sorted;
    sorted.AppendSpans(loadgen_part, order.data(), order.size());
    SpanBatch out;
    Status st = reader.GetTrace(id, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(sorted.LogicallyEquals(out, &why)) << ToHex(id) << ": " << why;
    ++checked;
  }
  EXPECT_EQ(checked, 50u);
  // Counting by a span attribute finds values stored in user_fields too.
  uint64_t n = 0;
  ASSERT_TRUE(
      reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kSpan, "with space", "2.5", &n).ok());
  EXPECT_EQ(n, odd1.span_count() + odd2.span_count());
  ASSERT_TRUE(
      reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kSpan, "many.s2.k3", "23", &n).ok());
  EXPECT_EQ(n, odd2.span_count());
  // A key of the semantic conventions' namespaces is looked up in the arrays
  // alone, a user field (app.*) in user_fields too: each is counted as often
  // as the loadgen spans carry it.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"http.request.method", "GET"}, {"rpc.system", "grpc"}, {"app.channel", "web"}}) {
    uint64_t carried = 0;
    for (uint32_t i = 0; i < loadgen_part.span_count(); ++i) {
      for (uint32_t a = sp.attrs[i].begin; a < sp.attrs[i].end; ++a) {
        carried += loadgen_part.Str(loadgen_part.span_attrs.key[a]) == key &&
                   loadgen_part.Str(loadgen_part.span_attrs.value[a]) == value;
      }
    }
    EXPECT_GT(carried, 0u) << key;
    ASSERT_TRUE(reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kSpan, key, value, &n).ok());
    EXPECT_EQ(n, carried) << key << "=" << value;
  }
  // By user field: plain paths are read as the column's own subcolumn
  // (some of them in the shared data), the other keys by getSubcolumn; both
  // find the same spans.
  const auto user_field = [&](const std::string& key, const std::string& value) {
    uint64_t count = 0;
    Status st =
        reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kUserField, key, value, &count);
    EXPECT_TRUE(st.ok()) << key << ": " << st.message();
    return count;
  };
  const uint64_t both = odd1.span_count() + odd2.span_count();
  EXPECT_EQ(user_field("many.s1.k3", "22"), odd1.span_count());
  EXPECT_EQ(user_field("many.s2.k4", ""), odd2.span_count());
  EXPECT_EQ(user_field("cart.items", "3"), both);
  EXPECT_EQ(user_field("mixed", "12"), both);
  EXPECT_EQ(user_field("with space", "2.5"), both);
  EXPECT_EQ(user_field("quote\"'`", "q"), both);
  EXPECT_EQ(user_field("a..b", "double dot"), both);
  EXPECT_EQ(user_field("\xc3\xa4pfel.gr\xc3\xb6\xc3\x9f"
                       "e",
                       "\xe2\x82\xac"),
            both);
  EXPECT_EQ(user_field("many.s1.k3", "23"), 0u);
  EXPECT_EQ(user_field("many.s1.k3`) OR 1=1 --", ""), 0u);
}

}  // namespace
}  // namespace spanhouse::storage
