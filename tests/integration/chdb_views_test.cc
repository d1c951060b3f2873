// Integration tests against real embedded ClickHouse (chDB): the views (RED,
// operations), the dependency job and the reader's compiled queries over a
// generated corpus.
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

// Loadgen traces (3-30 spans, ~1% errors, long-tailed durations) over a few
// minutes of the last hour (the RED views drop rows older than their
// retention), in two writes: the views see two inserts.
void WriteCorpus(const Capabilities& caps, size_t traces) {
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{7});
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  const uint64_t base = now - 3600ull * 1000000000ull;
  SpanBatch a;
  SpanBatch b;
  for (size_t t = 0; t < traces; ++t) {
    gen.AppendTrace(base + t * 150000000ull, t % 2 == 0 ? &a : &b);
  }
  WriteAll(a, caps);
  WriteAll(b, caps);
}

// The user_fields JSON column: a query by a path returns exactly the spans
// whose own or resource attributes carry that user-defined key (with that
// value), and well-known semantic-convention keys are not in it.
// In both kinds of store: user_fields a Map (schema 13), and the JSON
// column of a store made before, which a later start keeps and the writer
// and reader follow.
TEST(ChdbViews, RedPerMinuteEqualsTheSpansTable) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  WriteCorpus(caps, 1200);  // ~3 minutes of spans
  const std::string key =
      "toStartOfMinute(timestamp) AS m, service_name AS s, name AS n, kind AS k";
  const std::string from_spans =
      Q(fmt::format("SELECT {}, count(), countIf(status_code = 2), sum(duration_ns) FROM {}.spans "
                    "GROUP BY m, s, n, k ORDER BY m, s, n, k",
                    key, kDatabase));
  const std::string from_view =
      Q(fmt::format("SELECT minute AS m, service_name AS s, name AS n, kind AS k, sum(calls), "
                    "sum(errors), sum(duration_sum_ns) FROM {}.red_1m GROUP BY m, s, n, k "
                    "ORDER BY m, s, n, k",
                    kDatabase));
  EXPECT_EQ(from_view, from_spans);
  EXPECT_GT(std::count(from_spans.begin(), from_spans.end(), '\n'), 50);
  // And per service and kind, fed by a view on red_1m's inserts.
  const std::string service_key = "toStartOfMinute(timestamp) AS m, service_name AS s, kind AS k";
  const std::string per_service_from_spans =
      Q(fmt::format("SELECT {}, count(), countIf(status_code = 2), sum(duration_ns) FROM {}.spans "
                    "GROUP BY m, s, k ORDER BY m, s, k",
                    service_key, kDatabase));
  EXPECT_EQ(Q(fmt::format("SELECT minute AS m, service_name AS s, kind AS k, sum(calls), "
                          "sum(errors), sum(duration_sum_ns) FROM {}.red_service_1m GROUP BY m, "
                          "s, k ORDER BY m, s, k",
                          kDatabase)),
            per_service_from_spans);
  EXPECT_LT(std::count(per_service_from_spans.begin(), per_service_from_spans.end(), '\n'),
            std::count(from_spans.begin(), from_spans.end(), '\n'));
  // Errors exist in the corpus, so the error column is really compared.
  EXPECT_NE(Q(fmt::format("SELECT sum(errors) FROM {}.red_1m", kDatabase)), "0\n");

  // Quantiles per service over the whole range: the merged t-digest states
  // against exact quantiles of the stored durations, within 5% or 1 ms (a
  // t-digest is approximate by design; long tails make p99 the hard one).
  const auto per_service = [](const std::string& tsv) {
    std::map<std::string, std::vector<double>> out;
    for (size_t pos = 0; pos < tsv.size();) {
      size_t nl = tsv.find('\n', pos);
      if (nl == std::string::npos) nl = tsv.size();
      const std::string line = tsv.substr(pos, nl - pos);
      pos = nl + 1;
      const size_t tab = line.find('\t');
      std::vector<double>& qs = out[line.substr(0, tab)];
      std::string arr = line.substr(tab + 2, line.size() - tab - 3);  // inside [ ]
      for (size_t p = 0; p < arr.size();) {
        size_t comma = arr.find(',', p);
        if (comma == std::string::npos) comma = arr.size();
        qs.push_back(std::stod(arr.substr(p, comma - p)));
        p = comma + 1;
      }
    }
    return out;
  };
  const auto view_q = per_service(Q(fmt::format(
      "SELECT service_name, quantilesTDigestMerge({})(duration_quantiles) FROM {}.red_1m "
      "GROUP BY service_name ORDER BY service_name",
      kRedQuantiles, kDatabase)));
  const auto exact_q = per_service(Q(fmt::format(
      "SELECT service_name, quantilesExact({})(duration_ns) FROM {}.spans GROUP BY service_name "
      "ORDER BY service_name",
      kRedQuantiles, kDatabase)));
  // red_service_1m's states are red_1m's merged once more.
  const auto service_q = per_service(Q(fmt::format(
      "SELECT service_name, quantilesTDigestMerge({})(duration_quantiles) FROM {}.red_service_1m "
      "GROUP BY service_name ORDER BY service_name",
      kRedQuantiles, kDatabase)));
  ASSERT_EQ(view_q.size(), exact_q.size());
  ASSERT_EQ(service_q.size(), exact_q.size());
  EXPECT_GT(view_q.size(), 5u);
  for (const auto& [service, exact] : exact_q) {
    for (const auto* merged : {&view_q, &service_q}) {
      const std::vector<double>& approx = merged->at(service);
      ASSERT_EQ(approx.size(), 4u) << service;
      ASSERT_EQ(exact.size(), 4u) << service;
      for (size_t i = 0; i < 4; ++i) {
        EXPECT_NEAR(approx[i], exact[i], std::max(0.05 * exact[i], 1e6)) << service << " q" << i;
      }
    }
  }

  // The catalog has every (service, operation, kind) stored, once.
  EXPECT_EQ(
      Q(fmt::format("SELECT service_name, name, kind FROM {}.operations FINAL ORDER BY 1, 2, 3",
                    kDatabase)),
      Q(fmt::format("SELECT DISTINCT service_name, name, kind FROM {}.spans ORDER BY 1, 2, 3",
                    kDatabase)));
}

// The engine compiles a query's expressions the fourth time it sees them,
// a stall of ~100 ms in that query (chdb_span_reader.cc, kNoJit): the
// reader's queries, repeated, compile nothing, where the same engine
// compiles a repeated query of its own.
TEST(ChdbReader, RepeatedQueriesAreNeverCompiled) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  WriteCorpus(caps, 300);
  ChdbSpanReader reader(*Engine::conn, caps);
  query::RedQuery red;
  red.services = {"checkout"};
  red.end_s = static_cast<uint64_t>(std::time(nullptr)) / 60 * 60 + 60;
  red.lookback_s = 7200;
  red.step_s = 60;
  red.window_s = 60;
  red.want_quantile = true;
  red.quantile = 0.99;
  query::TraceQuery search;
  search.service = "checkout";
  search.start_ns = (red.end_s - red.lookback_s) * 1000000000ull;
  search.end_ns = red.end_s * 1000000000ull;
  search.limit = 5;
  const auto compiled = [] {
    return Q("SELECT sum(value) FROM system.events WHERE event = 'CompileFunction'");
  };
  // Nothing else runs expressions meanwhile (merges back on however the
  // test ends, or the tests after it would not merge).
  Q("SYSTEM STOP MERGES");
  struct MergesBack {
    ~MergesBack() { Q("SYSTEM START MERGES"); }
  } merges_back;
  const std::string before = compiled();
  for (int i = 0; i < 6; ++i) {
    std::vector<query::RedSeries> series;
    ASSERT_TRUE(reader.GetRedSeries(red, &series).ok());
    ASSERT_FALSE(series.empty());
    std::vector<TraceId> ids;
    ASSERT_TRUE(reader.FindTraceIds(search, &ids).ok());
    ASSERT_FALSE(ids.empty());
    SpanBatch traces;
    ASSERT_TRUE(reader.GetTraces(ids, &traces).ok());
    ASSERT_GT(traces.span_count(), 0u);
  }
  EXPECT_EQ(compiled(), before);
  // The control: a query of the engine's defaults, repeated, is compiled.
  for (int i = 0; i < 6; ++i) {
    Q(
        fmt::format("SELECT intDiv(toUInt64(duration_ns) * 3 + 7, 11) % 5 AS b, count() FROM "
                    "{}.spans GROUP BY b ORDER BY b",
                    kDatabase));
  }
  EXPECT_NE(compiled(), before);
}

TEST(ChdbViews, ViewsAddedByAnUpgradeAreFilledFromStoredSpans) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  WriteCorpus(caps, 200);
  // As a schema-2 data directory: no RED views or catalog yet.
  for (const char* t : {"red_service_1m_mv", "red_service_1m", "red_1m_mv", "red_1m",
                        "operations_mv", "operations"}) {
    Q(fmt::format("DROP TABLE {}.{}", kDatabase, t));
  }
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  const std::string counted =
      Q(fmt::format("SELECT count(), countIf(status_code = 2) FROM {}.spans", kDatabase));
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls), sum(errors) FROM {}.red_1m", kDatabase)), counted);
  // Filled once, through red_1m's fill (not a second time from red_1m).
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls), sum(errors) FROM {}.red_service_1m", kDatabase)),
            counted);
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.operations FINAL", kDatabase)),
            Q(fmt::format("SELECT count() FROM (SELECT DISTINCT service_name, name, kind FROM "
                          "{}.spans)",
                          kDatabase)));
  // And a restart fills nothing twice.
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)),
            Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)));
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_service_1m", kDatabase)),
            Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)));

  // As a schema-6 data directory: red_1m but no red_service_1m, filled from
  // red_1m's rows (the spans table is not read: its rows past a shorter
  // retention than the metrics' would be gone).
  for (const char* t : {"red_service_1m_mv", "red_service_1m"}) {
    Q(fmt::format("DROP TABLE {}.{}", kDatabase, t));
  }
  Q(fmt::format(
      "INSERT INTO {0}.red_1m SELECT minute - INTERVAL 1 DAY, service_name, name, kind, "
      "calls, errors, duration_sum_ns, duration_quantiles FROM {0}.red_1m",
      kDatabase));
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(Q(fmt::format("SELECT toDate(minute) AS d, service_name, kind, sum(calls), "
                          "sum(errors), sum(duration_sum_ns) FROM {}.red_service_1m GROUP BY d, "
                          "service_name, kind ORDER BY d, service_name, kind",
                          kDatabase)),
            Q(fmt::format("SELECT toDate(minute) AS d, service_name, kind, sum(calls), "
                          "sum(errors), sum(duration_sum_ns) FROM {}.red_1m GROUP BY d, "
                          "service_name, kind ORDER BY d, service_name, kind",
                          kDatabase)));
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_service_1m", kDatabase)),
            Q(fmt::format("SELECT 2 * count() FROM {}.spans", kDatabase)));
}

TEST(ChdbViews, RetentionFollowsTheConfigurationAtEveryStart) {
  Reset();
  Capabilities caps;
  SchemaOptions opts;
  opts.metrics_retention_days = 30;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, opts).ok());
  const std::string ttl_sql = fmt::format(
      "SELECT name, extract(create_table_query, 'TTL minute \\+ toIntervalDay\\(\\d+\\)') "
      "FROM system.tables WHERE database = '{}' AND name IN ('red_1m', 'dependencies_1m') "
      "ORDER BY name",
      kDatabase);
  EXPECT_EQ(Q(ttl_sql),
            "dependencies_1m\tTTL minute + toIntervalDay(30)\nred_1m\tTTL minute + "
            "toIntervalDay(30)\n");
  opts.metrics_retention_days = 3;  // a restart with another setting
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, opts).ok());
  EXPECT_EQ(Q(ttl_sql),
            "dependencies_1m\tTTL minute + toIntervalDay(3)\nred_1m\tTTL minute + "
            "toIntervalDay(3)\n");
}

TEST(ChdbDependencies, EdgesEqualTheGeneratedTracesEvenAcrossInserts) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{11});
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  const uint64_t base_s = (now - 3600) / 60 * 60;
  SpanBatch all;
  for (size_t t = 0; t < 600; ++t) {
    gen.AppendTrace(base_s * 1000000000ull + t * 250000000ull, &all);  // 2.5 minutes
  }
  // Expected edges from the generated traces: (minute of the child, parent
  // service, child service) -> calls, errors.
  std::map<std::tuple<uint64_t, std::string, std::string>, std::pair<uint64_t, uint64_t>> want;
  std::map<std::pair<TraceId, SpanId>, std::string> service_of;
  auto service = [&](uint32_t i) {
    return std::string(all.Str(all.resources.service_name[all.spans.resource[i]]));
  };
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    service_of[{all.spans.trace_id[i], all.spans.span_id[i]}] = service(i);
  }
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    if (IsZero(all.spans.parent_span_id[i])) continue;
    const auto parent = service_of.find({all.spans.trace_id[i], all.spans.parent_span_id[i]});
    ASSERT_NE(parent, service_of.end());
    if (parent->second == service(i)) continue;
    auto& e = want[{all.spans.start_ns[i] / 1000000000ull / 60 * 60, parent->second, service(i)}];
    e.first++;
    if (all.spans.status_code[i] == 2) e.second++;
  }
  ASSERT_GT(want.size(), 20u);
  // Parents and children in different inserts: odd and even spans apart.
  std::vector<uint32_t> odd;
  std::vector<uint32_t> even;
  for (uint32_t i = 0; i < all.span_count(); ++i) (i % 2 == 0 ? even : odd).push_back(i);
  SpanBatch first;
  SpanBatch second;
  first.AppendSpans(all, even.data(), even.size());
  second.AppendSpans(all, odd.data(), odd.size());
  WriteAll(first, caps);
  WriteAll(second, caps);

  const auto from = static_cast<uint32_t>(base_s);
  const auto to = static_cast<uint32_t>(base_s + 240);
  ASSERT_TRUE(ComputeDependencies(*Engine::conn, from, to).ok());
  // Run again over part of the range: the recomputed minutes replace theirs.
  ASSERT_TRUE(ComputeDependencies(*Engine::conn, from + 60, from + 120).ok());
  std::string expected;
  for (const auto& [k, v] : want) {
    expected += fmt::format("{}\t{}\t{}\t{}\t{}\n", std::get<0>(k), std::get<1>(k), std::get<2>(k),
                            v.first, v.second);
  }
  const std::string edges_sql = fmt::format(
      "SELECT toUInt32(minute), parent, child, calls, errors FROM {}.dependencies_1m FINAL "
      "ORDER BY minute, parent, child",
      kDatabase);
  EXPECT_EQ(Q(edges_sql), expected);

  // The job finds the same edges on its own, catching up from its look-back
  // in steps.
  Q(fmt::format("TRUNCATE TABLE {}.dependencies_1m", kDatabase));
  DependencyJobOptions opts;
  opts.interval = std::chrono::seconds(1);
  opts.lag = std::chrono::seconds(0);
  opts.first_lookback = std::chrono::seconds(7200);
  opts.max_minutes_per_query = 7;
  RunDependencyJobOnce(opts);
  EXPECT_EQ(Q(edges_sql), expected);

  // History stored late (a backfill): a job that looks back 15 minutes never
  // reaches it on its own...
  Q(fmt::format("TRUNCATE TABLE {}.dependencies_1m", kDatabase));
  opts.first_lookback = std::chrono::seconds(900);
  RunDependencyJobOnce(opts);
  EXPECT_EQ(Q(edges_sql), "");
  // ...and computes its minutes again when told they were imported, in steps
  // (the ranges of two imports merged).
  const auto [lo, hi] = std::minmax_element(all.spans.start_ns.begin(), all.spans.start_ns.end());
  DependencyJob job(*Engine::conn, opts);
  job.Recompute(*lo, *lo + (*hi - *lo) / 2);
  job.Recompute(*lo + (*hi - *lo) / 2, *hi);
  // 2.5 minutes of spans, with the minute before (a parent may start up to
  // 10 s after its child) and the minutes of children up to 60 s later.
  EXPECT_EQ(job.pending_minutes(), 5u);
  job.Start();
  for (int i = 0; i < 600 && job.pending_minutes() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  job.Stop();
  EXPECT_EQ(job.pending_minutes(), 0u);
  EXPECT_EQ(job.errors(), 0u);
  EXPECT_GE(job.recomputed_minutes(), (to - from) / 60);
  EXPECT_EQ(Q(edges_sql), expected);
}

}  // namespace
}  // namespace spanhouse::storage
