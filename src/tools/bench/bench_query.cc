// `spanhouse bench query-fill`: fills a data directory for the query API's
// benchmark (bench/query_api.py): the load generator's traces (a fixed seed)
// spread evenly over the last --days days, written the way `spanhouse serve`
// writes them (the same engine configuration, schema options and writer, so
// serve opens the directory afterwards as its own), then the dependency
// edges of the whole range computed hour by hour. Loadgen itself cannot do
// this: it stamps every span with the time it is sent.
//
// The tables are made without the tiered policy and merged (OPTIMIZE ...
// FINAL) once filled: in production a day's parts merge on the hot volume for
// storage.move_after_s before they move to cold (which does not merge), but a
// part whose times are already past the move TTL is written to cold at
// insert, so a fill of old times with the policy on left ~70 small unmerged
// parts per day on cold (measured: 482 parts for 50M spans), a store no one
// runs. serve then switches the tables to the tiered policy at start, as it
// does for an older data directory, and the merged parts move.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_sink.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/schema.h"
#include "tools/bench/bench.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::bench {
namespace {

struct FillOptions {
  std::string data_dir;
  uint64_t spans = 1000000;
  double days = 7;
  uint64_t seed = 1;
  std::string corpus = "replay";
  size_t batch_spans = 20000;  // spans generated per batch handed to the writer
};

constexpr uint64_t kNsPerS = 1000000000;

// serve's engine configuration in `dir` (the cold volume beside the data),
// the schema ensured with a retention of 7 days.
Status OpenStore(const std::string& dir, std::unique_ptr<storage::ChdbConnection>* conn,
                 storage::Capabilities* caps) {
  std::shared_ptr<storage::ChdbLibrary> lib;
  SH_RETURN_IF_ERROR(storage::ChdbLibrary::Load(&lib));
  storage::TieringOptions tiering;
  tiering.cold_path = dir + "/cold";
  const std::string config = dir + "/clickhouse-config.xml";
  SH_RETURN_IF_ERROR(storage::WriteEngineConfig(config, tiering));
  SH_RETURN_IF_ERROR(
      storage::ChdbConnection::Open(lib, dir + "/clickhouse", storage::EngineArgs(config), conn));
  storage::SchemaOptions schema;
  schema.retention_s = 604800;
  return storage::EnsureSchema(**conn, caps, schema);
}

// Merges each table's parts into one, then computes the dependency edges of
// [start_ns, end_ns), an hour of children at a time (the job's own steps).
Status MergeAndLink(storage::ChdbConnection& conn, uint64_t start_ns, uint64_t end_ns,
                    double* merge_s) {
  const auto t_merge = Clock::now();
  for (const char* table : {"spans", "trace_index", "red_1m", "red_service_1m", "resources"}) {
    Status st =
        conn.Query(fmt::format("OPTIMIZE TABLE {}.{} FINAL SETTINGS optimize_throw_if_noop = 1",
                               storage::kDatabase, table),
                   "");
    if (!st.ok()) return Status::Internal("optimize: " + st.message());
  }
  *merge_s = Seconds(t_merge);
  for (uint64_t h = start_ns / kNsPerS / 3600 * 3600; h < end_ns / kNsPerS; h += 3600) {
    Status st = storage::ComputeDependencies(conn, static_cast<uint32_t>(h),
                                             static_cast<uint32_t>(h + 3600));
    if (!st.ok()) return Status::Internal("dependencies: " + st.message());
  }
  return Status::Ok();
}

int RunFill(const FillOptions& o) {
  const std::string dir = std::filesystem::absolute(o.data_dir).lexically_normal().string();
  std::filesystem::create_directories(dir);
  std::unique_ptr<storage::ChdbConnection> conn;
  storage::Capabilities caps;
  if (Status st = OpenStore(dir, &conn, &caps); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    if (conn) conn->Close();
    return 1;
  }

  const auto now_s = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  // The range ends a minute ago and starts --days before (an hour less, so
  // nothing is past the retention by the time serve reads it).
  const uint64_t end_ns = (now_s - 60) * kNsPerS;
  const auto range_ns = static_cast<uint64_t>(o.days * 86400 - 3600) * kNsPerS;
  const uint64_t start_ns = end_ns - range_ns;
  // Loadgen traces average ~11 spans.
  const uint64_t traces = std::max<uint64_t>(1, o.spans / 11);
  const uint64_t spacing_ns = std::max<uint64_t>(1, range_ns / traces);

  storage::EmbeddedSinkOptions sopts;
  sopts.queue_bytes = 512u << 20;
  sopts.writer.spool_dir = dir + "/spool";
  const auto writer = storage::MakeClickHouseSink(storage::Borrow(conn.get()), caps, sopts);
  if (const Status st = writer->Start(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  loadgen::CorpusOptions corpus{o.seed};
  loadgen::ParseCorpusKind(o.corpus, &corpus.kind);  // one of them: the option checks
  loadgen::TraceGenerator gen(corpus);
  const auto t0 = Clock::now();
  uint64_t sent = 0;
  uint64_t next_ns = start_ns;
  double last_report = 0;
  while (sent < o.spans) {
    auto batch = std::make_unique<SpanBatch>();
    const size_t n = gen.AppendTraces(next_ns, spacing_ns, o.batch_spans, batch.get());
    next_ns += spacing_ns * ((n + 10) / 11);
    sent += n;
    sink::QueuedBatch item;
    item.batch = std::move(batch);
    while (writer->Push(item).code() == StatusCode::kResourceExhausted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (Seconds(t0) - last_report > 10) {
      last_report = Seconds(t0);
      std::fprintf(stderr, "fill: %llu spans, %.0f/s\n", static_cast<unsigned long long>(sent),
                   static_cast<double>(sent) / last_report);
    }
  }
  writer->Drain();
  const double insert_s = Seconds(t0);
  const auto t1 = Clock::now();
  double merge_s = 0;
  const Status st = MergeAndLink(*conn, start_ns, next_ns, &merge_s);
  conn->Close();
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  std::printf(
      "{\"spans\":%llu,\"rows_written\":%llu,\"first_ns\":%llu,\"last_ns\":%llu,"
      "\"insert_s\":%.1f,\"merge_s\":%.1f,\"dependencies_s\":%.1f,\"cpu_s\":%.1f}\n",
      static_cast<unsigned long long>(sent),
      static_cast<unsigned long long>(writer->stats().rows_written.load()),
      static_cast<unsigned long long>(start_ns), static_cast<unsigned long long>(next_ns), insert_s,
      merge_s, Seconds(t1) - merge_s, CpuSeconds());
  return writer->stats().rows_written.load() == sent ? 0 : 1;
}

}  // namespace

void AddQueryFillCommand(CLI::App& bench, std::function<int()>* run) {
  auto o = std::make_shared<FillOptions>();
  CLI::App* cmd =
      bench.add_subcommand("query-fill",
                           "Fill a data directory with generated traces spread over days (for "
                           "bench/query_api.py)");
  cmd->add_option("--data-dir", o->data_dir, "Data directory to fill (serve's layout)")->required();
  cmd->add_option("--spans", o->spans, "Spans to write")->capture_default_str();
  cmd->add_option("--days", o->days, "Days the spans are spread over, ending now")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 7.0));
  cmd->add_option("--seed", o->seed, "Seed of the generated corpus")->capture_default_str();
  cmd->add_option("--corpus", o->corpus,
                  "Corpus: replay (the benchmarks' default) or fresh (values drawn afresh, as "
                  "real traffic carries them)")
      ->capture_default_str()
      ->check(CLI::IsMember({"replay", "fresh"}));
  cmd->callback([o, run] { *run = [o] { return RunFill(*o); }; });
}

}  // namespace spanhouse::bench
