// Spans sampled out (SpanBatch::Spans::metrics_only) against the real
// engine: stored as sampled_spans rows, not as spans, and counted in the RED
// tables, the catalog and the dependency edges exactly as the same spans all
// kept count in another database; a replayed block counts once; a schema-9
// data directory gets the table and its views; the dependency job drops the
// days it has computed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "integration/engine.h"
#include "integration/sampled_corpus.h"
#include "pipeline/durable/records.h"
#include "sink/span_queue.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

constexpr const char* kSampledDb = "sampled_on";
constexpr const char* kAllKeptDb = "sampled_off";

uint64_t NowS() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// A fresh database `db` with the schema.
void Fresh(const std::string& db, Capabilities* caps) {
  Q(fmt::format("DROP DATABASE IF EXISTS {}", db));
  SchemaOptions o;
  o.database = db;
  const Status st = EnsureSchema(*Engine::conn, caps, o);
  ASSERT_TRUE(st.ok()) << st.message();
}

// Stores `b` in `db` through the real writer path (one writer, one flush).
void WriteTo(const std::string& db, const SpanBatch& b, const Capabilities& caps) {
  WriterOptions o = TestWriter();
  o.database = db;
  WriteOneBatch(Engine::conn.get(), caps, o, b);
}

// "trace\tspan" (hex) of the spans of `b` not sampled out, sorted, as TSV.
std::string KeptIds(const std::vector<const SpanBatch*>& batches) {
  std::set<std::string> ids;
  for (const SpanBatch* b : batches) {
    for (uint32_t i = 0; i < b->span_count(); ++i) {
      if (b->spans.metrics_only[i] != 0) continue;
      ids.insert(ToHex(b->spans.trace_id[i]) + "\t" + ToHex(b->spans.span_id[i]));
    }
  }
  std::string out;
  for (const auto& id : ids) out += id + "\n";
  return out;
}

// Per service, the quantiles (kRedQuantiles) of the merged t-digest states
// of `table`.
std::map<std::string, std::vector<double>> Quantiles(const std::string& db,
                                                     const std::string& table) {
  const std::string tsv =
      Q(fmt::format("SELECT service_name, arrayStringConcat(arrayMap(x -> toString(x), "
                    "quantilesTDigestMerge({})(duration_quantiles)), ',') FROM {}.{} GROUP BY "
                    "service_name ORDER BY service_name",
                    kRedQuantiles, db, table));
  std::map<std::string, std::vector<double>> out;
  for (const auto& row : TsvRows(tsv)) {
    if (row.size() != 2) continue;
    std::vector<double>& qs = out[row[0]];
    for (size_t p = 0; p < row[1].size();) {
      size_t comma = row[1].find(',', p);
      if (comma == std::string::npos) comma = row[1].size();
      qs.push_back(std::stod(row[1].substr(p, comma - p)));
      p = comma + 1;
    }
  }
  return out;
}

TEST(ChdbSampledSpans, MetricsEqualThoseOfTheSameSpansAllKept) {
  Capabilities caps;
  Fresh(kSampledDb, &caps);
  Fresh(kAllKeptDb, &caps);
  const uint64_t base_s = (NowS() - 3600) / 60 * 60;
  const testdata::SampledCorpus c = testdata::MakeSampledCorpus(600, base_s * 1000000000ull);
  ASSERT_GT(c.kept, 1000u);
  ASSERT_GT(c.sampled, 1000u);
  ASSERT_GT(c.kept_parent_sampled_child, 50u);
  ASSERT_GT(c.sampled_parent_kept_child, 50u);
  // Parents and children in different batches, so in different inserts.
  WriteTo(kSampledDb, c.first, caps);
  WriteTo(kSampledDb, c.second, caps);
  WriteTo(kAllKeptDb, c.kept_first, caps);
  WriteTo(kAllKeptDb, c.kept_second, caps);

  // Stored: exactly the spans kept; the others as sampled_spans rows only.
  EXPECT_EQ(Q(fmt::format("SELECT lower(hex(trace_id)), lower(hex(span_id)) FROM {}.spans ORDER "
                          "BY 1, 2",
                          kSampledDb)),
            KeptIds({&c.first, &c.second}));
  EXPECT_EQ(Q(fmt::format("SELECT count(), uniqExact(trace_id, span_id) FROM {}.sampled_spans",
                          kSampledDb)),
            fmt::format("{0}\t{0}\n", c.sampled));
  // A sampled row holds what the spans row of the same span would.
  const std::string narrow =
      "SELECT timestamp, lower(hex(trace_id)) AS t, lower(hex(span_id)) AS s, "
      "lower(hex(parent_span_id)), service_name, name, kind, status_code, duration_ns FROM {}.{}";
  EXPECT_EQ(Q(fmt::format("SELECT * FROM ({}) WHERE (t, s) IN (SELECT lower(hex(trace_id)), "
                          "lower(hex(span_id)) FROM {}.sampled_spans) ORDER BY t, s",
                          fmt::format(fmt::runtime(narrow), kAllKeptDb, "spans"), kSampledDb)),
            Q(fmt::format("{} ORDER BY t, s",
                          fmt::format(fmt::runtime(narrow), kSampledDb, "sampled_spans"))));
  // trace_index only knows traces with a span kept; resources only the
  // resources of spans kept.
  EXPECT_EQ(
      Q(fmt::format("SELECT count() FROM (SELECT trace_id8 FROM {}.trace_index GROUP BY "
                    "trace_id8)",
                    kSampledDb)),
      Q(fmt::format("SELECT uniqExact(substring(trace_id, 1, 8)) FROM {}.spans", kSampledDb)));
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.resources WHERE service_name LIKE 'ghost%'",
                          kSampledDb)),
            "0\n");

  // RED per minute, operation and kind, and per service and kind: the same
  // calls, errors and duration sums.
  const auto red = [](const std::string& db, const std::string& table, const std::string& key) {
    return Q(
        fmt::format("SELECT {2}, sum(calls), sum(errors), sum(duration_sum_ns) FROM {0}.{1} "
                    "GROUP BY {2} ORDER BY {2}",
                    db, table, key));
  };
  const std::string red_key = "minute, service_name, name, kind";
  const std::string service_key = "minute, service_name, kind";
  const std::string want_red = red(kAllKeptDb, "red_1m", red_key);
  EXPECT_GT(std::count(want_red.begin(), want_red.end(), '\n'), 100);
  EXPECT_EQ(red(kSampledDb, "red_1m", red_key), want_red);
  EXPECT_EQ(red(kSampledDb, "red_service_1m", service_key),
            red(kAllKeptDb, "red_service_1m", service_key));
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kSampledDb)),
            fmt::format("{}\n", c.kept + c.sampled));
  EXPECT_NE(Q(fmt::format("SELECT sum(errors) FROM {}.red_1m WHERE service_name = 'ghost-db'",
                          kSampledDb)),
            "0\n");
  // Durations: the same t-digests (states merged in another grouping),
  // within 1%.
  for (const char* table : {"red_1m", "red_service_1m"}) {
    const auto got = Quantiles(kSampledDb, table);
    const auto want = Quantiles(kAllKeptDb, table);
    ASSERT_EQ(got.size(), want.size()) << table;
    EXPECT_GT(want.size(), 10u);
    for (const auto& [service, qs] : want) {
      ASSERT_EQ(got.at(service).size(), qs.size()) << service;
      for (size_t i = 0; i < qs.size(); ++i) {
        EXPECT_NEAR(got.at(service)[i], qs[i], 0.01 * qs[i])
            << table << " " << service << " q" << i;
      }
    }
  }
  // The catalog: the same operations, those only ever sampled out included.
  const std::string ops =
      "SELECT service_name, name, kind FROM {}.operations FINAL ORDER BY 1, 2, 3";
  EXPECT_EQ(Q(fmt::format(fmt::runtime(ops), kSampledDb)),
            Q(fmt::format(fmt::runtime(ops), kAllKeptDb)));
  EXPECT_EQ(Q(fmt::format("SELECT name FROM {}.operations FINAL WHERE service_name LIKE 'ghost%' "
                          "ORDER BY 1",
                          kSampledDb)),
            "GET /haunt\nSELECT souls\n");

  // Dependency edges: the same, those of the ghost services included.
  const auto from = static_cast<uint32_t>(base_s);
  const auto to = static_cast<uint32_t>(base_s + 240);
  for (const char* db : {kSampledDb, kAllKeptDb}) {
    const Status st =
        ComputeDependencies(*Engine::conn, from, to, kParentsBeforeS, kParentsAfterS, db);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  const std::string edges =
      "SELECT toUInt32(minute), parent, child, calls, errors FROM {}.dependencies_1m FINAL ORDER "
      "BY minute, parent, child";
  const std::string want_edges = Q(fmt::format(fmt::runtime(edges), kAllKeptDb));
  EXPECT_GT(std::count(want_edges.begin(), want_edges.end(), '\n'), 20);
  EXPECT_EQ(Q(fmt::format(fmt::runtime(edges), kSampledDb)), want_edges);
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls), sum(errors) FROM {}.dependencies_1m FINAL WHERE "
                          "parent = 'ghost' AND child = 'ghost-db'",
                          kSampledDb)),
            "1\t1\n");
  for (const char* db : {kSampledDb, kAllKeptDb}) Q(fmt::format("DROP DATABASE {}", db));
}

// Has a writer insert `parts` (of day `day`) as the block sealed with
// `token` and read as `chunks` spooled blocks: the way a replayed block
// comes, through the writer's queue like any item.
void InsertBlock(const std::vector<SpanBatch>& parts, uint32_t day, const Capabilities& caps,
                 const std::string& token, uint32_t chunks) {
  testdata::OneWriter writer(Engine::conn.get(), caps, TestWriter());
  sink::QueuedBatch item;
  item.block = std::make_unique<sink::ReplayBlock>();
  item.block->key = InsertKey{0, 1, day}.Encode();
  item.block->chunks = chunks;
  item.block->sealed = {1, token};
  size_t kept = 0;
  size_t all = 0;
  for (const auto& p : parts) {
    item.block->parts.push_back(std::make_unique<SpanBatch>(p));
    kept += KeptSpans(p);
    all += p.span_count();
  }
  ASSERT_TRUE(writer.Push(item).ok());
  writer.Close();
  EXPECT_EQ(writer.stats().rows_written.load(), kept);
  EXPECT_EQ(writer.stats().sampled_rows_written.load(), all - kept);
  EXPECT_EQ(writer.stats().write_errors.load(), 0u);
}

// A block of three records (one all sampled out, one mixed, one all kept),
// inserted as two spooled blocks of spans, then replayed with its token:
// its spans, its sampled spans and what the views made of both are stored
// once. Another token stores them again (the control).
TEST(ChdbSampledSpans, AReplayedBlockCountsItsSampledSpansOnce) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  ASSERT_TRUE(EnableInsertDeduplication(*Engine::conn, caps).ok());
  // Recent spans: red_1m's TTL (7 days) drops older rows as they are inserted.
  const uint64_t base_ns = (NowS() - 3600) * 1000000000ull;
  std::vector<SpanBatch> parts;
  for (int k = 0; k < 3; ++k) {
    SpanBatch b = testdata::SampleBatch(2, base_ns + static_cast<uint64_t>(k) * 1000000ull);
    for (auto& id : b.spans.trace_id) id[14] = static_cast<uint8_t>(0x40 + k);  // other traces
    for (uint32_t i = 0; i < b.span_count(); ++i) {
      b.spans.metrics_only[i] = k == 0 || (k == 1 && i % 2 == 0) ? 1 : 0;
    }
    parts.push_back(std::move(b));
  }
  size_t kept = 0;
  size_t all = 0;
  for (const auto& p : parts) {
    kept += KeptSpans(p);
    all += p.span_count();
  }
  ASSERT_GT(kept, 0u);
  ASSERT_LT(kept, all);
  const uint32_t day = PartitionDay(base_ns);
  const auto counts = [] {
    return Q(
        fmt::format("SELECT (SELECT count() FROM {0}.spans), (SELECT count() FROM "
                    "{0}.sampled_spans), (SELECT sum(calls) FROM {0}.red_1m), (SELECT "
                    "sum(calls) FROM {0}.red_service_1m)",
                    kDatabase));
  };
  InsertBlock(parts, day, caps, "sh-sampled-1", 2);
  const std::string once = fmt::format("{}\t{}\t{}\t{}\n", kept, all - kept, all, all);
  EXPECT_EQ(counts(), once);
  InsertBlock(parts, day, caps, "sh-sampled-1", 2);  // the replay of a block that was stored
  EXPECT_EQ(counts(), once);
  InsertBlock(parts, day, caps, "sh-sampled-2", 2);  // another block with the same rows
  EXPECT_EQ(counts(),
            fmt::format("{}\t{}\t{}\t{}\n", 2 * kept, 2 * (all - kept), 2 * all, 2 * all));
}

// A data directory of schema 9 (no sampled_spans, no views of it) gets the
// table and its views at the next start, keeping every row, filling
// nothing twice; sampled spans written then count.
TEST(ChdbSampledSpans, ASchema9DataDirectoryGetsTheTableAndItsViews) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  const uint64_t base_ns = (NowS() - 3600) * 1000000000ull;
  WriteAll(testdata::SampleBatch(20, base_ns), caps);
  // As schema 9 left it.
  for (const char* t : {"red_1m_sampled_mv", "operations_sampled_mv", "sampled_spans"}) {
    Q(fmt::format("DROP TABLE {}.{}", kDatabase, t));
  }
  Q(fmt::format("TRUNCATE TABLE {}.schema_version", kDatabase));
  Q(fmt::format("INSERT INTO {}.schema_version VALUES (9, now())", kDatabase));
  const std::string fingerprint = fmt::format(
      "SELECT (SELECT count() FROM {0}.spans), (SELECT sum(cityHash64(trace_id, span_id, name, "
      "duration_ns)) FROM {0}.spans), (SELECT sum(calls) FROM {0}.red_1m), (SELECT sum(calls) "
      "FROM {0}.red_service_1m), (SELECT count() FROM {0}.operations FINAL), (SELECT count() "
      "FROM {0}.trace_index)",
      kDatabase);
  const std::string before = Q(fingerprint);
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(Q(fingerprint), before);
  EXPECT_EQ(Q(fmt::format("SELECT max(version) FROM {}.schema_version", kDatabase)),
            fmt::format("{}\n", kSchemaVersion));
  EXPECT_EQ(Q(fmt::format("SELECT name FROM system.tables WHERE database = '{}' AND name LIKE "
                          "'%sampled%' ORDER BY name",
                          kDatabase)),
            "operations_sampled_mv\nred_1m_sampled_mv\nsampled_spans\n");
  // Sampled spans now count in the views.
  SpanBatch sampled = testdata::SampleBatch(2, base_ns + 60000000000ull);
  for (auto& id : sampled.spans.trace_id) id[14] = 0x77;
  for (auto& m : sampled.spans.metrics_only) m = 1;
  WriteTo(std::string(kDatabase), sampled, caps);
  EXPECT_EQ(Q(fmt::format("SELECT (SELECT sum(calls) FROM {0}.red_1m), (SELECT sum(calls) FROM "
                          "{0}.red_service_1m), (SELECT count() FROM {0}.spans)",
                          kDatabase)),
            fmt::format("{0}\t{0}\t{1}\n", 60 + sampled.span_count(), 60));
}

// The partitions (days) of sampled_spans the dependency job has computed,
// two days back, are dropped (by the function, and by the job after a
// run); the RED rows they made stay.
TEST(ChdbSampledSpans, TheJobDropsTheDaysOfSampledSpansItHasComputed) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  const uint64_t now = NowS();
  const auto sampled_at = [](uint64_t s, uint8_t tag) {
    SpanBatch b = testdata::SampleBatch(1, s * 1000000000ull);
    for (auto& id : b.spans.trace_id) id[14] = tag;
    for (auto& m : b.spans.metrics_only) m = 1;
    return b;
  };
  const std::string db(kDatabase);
  WriteTo(db, sampled_at(now - 5 * 86400, 1), caps);
  WriteTo(db, sampled_at(now - 3 * 86400, 2), caps);
  WriteTo(db, sampled_at(now - 3600, 3), caps);
  const std::string days = fmt::format(
      "SELECT count(DISTINCT partition_id), (SELECT count() FROM {0}.sampled_spans) FROM "
      "system.parts WHERE database = '{0}' AND table = 'sampled_spans' AND active",
      kDatabase);
  ASSERT_EQ(Q(days), "3\t9\n");
  size_t dropped = 0;
  // Computed only up to ten days ago: nothing of these is.
  ASSERT_TRUE(DropComputedSampledSpans(*Engine::conn, static_cast<uint32_t>(now - 10 * 86400),
                                       kDatabase, kSampledSpansKeepDays, &dropped)
                  .ok());
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(Q(days), "3\t9\n");
  ASSERT_TRUE(DropComputedSampledSpans(*Engine::conn, static_cast<uint32_t>(now), kDatabase,
                                       kSampledSpansKeepDays, &dropped)
                  .ok());
  EXPECT_EQ(dropped, 2u);
  EXPECT_EQ(Q(days), "1\t3\n");
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)), "9\n");

  // The job does it after a run.
  WriteTo(db, sampled_at(now - 4 * 86400, 4), caps);
  ASSERT_EQ(Q(days), "2\t6\n");
  DependencyJobOptions opts;
  opts.interval = std::chrono::seconds(1);
  opts.lag = std::chrono::seconds(0);
  opts.first_lookback = std::chrono::seconds(600);
  RunDependencyJobOnce(opts);
  EXPECT_EQ(Q(days), "1\t3\n");
}

}  // namespace
}  // namespace spanhouse::storage
