#include "server/serve.h"

#include <malloc.h>
#include <signal.h>

#include <charconv>
#include <filesystem>

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "query/query_api.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "server/data_dir_lock.h"
#include "server/durable_replay.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::server {

namespace {

// The semantic-convention namespaces and user_fields.also_well_known's.
std::vector<std::string> WellKnownNamespaces(const Config& cfg) {
  std::vector<std::string> names = storage::UserFields::DefaultWellKnown();
  const std::string& extra = cfg.user_fields.also_well_known;
  for (size_t start = 0; start <= extra.size();) {
    size_t comma = extra.find(',', start);
    if (comma == std::string::npos) comma = extra.size();
    std::string name = extra.substr(start, comma - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) names.push_back(name);
    start = comma + 1;
  }
  return names;
}

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int Fail(const Status& st) {
  spdlog::error("{}", st.message());
  return 1;
}

// Prometheus text format. Counters are named after what they count, per
// component and stage (received, accepted, rejected by reason, written).
std::string RenderMetrics(const receivers::OtlpHttpStats& rs, const pipeline::MemoryBudget& budget,
                          const pipeline::ShardedQueue& queue,
                          const std::vector<std::unique_ptr<storage::EmbeddedWriter>>& writers) {
  std::string out;
  auto line = [&](const char* name, const char* type, const std::string& labels, uint64_t v) {
    out += fmt::format("# TYPE {} {}\n{}{} {}\n", name, type, name,
                       labels.empty() ? "" : "{" + labels + "}", v);
  };
  line("spanhouse_receiver_requests_total", "counter", "receiver=\"otlp_http\"",
       rs.requests.load());
  line("spanhouse_receiver_accepted_spans_total", "counter", "receiver=\"otlp_http\"",
       rs.spans_accepted.load());
  out += "# TYPE spanhouse_receiver_rejected_requests_total counter\n";
  const std::pair<const char*, uint64_t> rejected[] = {
      {"malformed", rs.rejected_malformed.load()},
      {"too_large", rs.rejected_too_large.load()},
      {"media_type", rs.rejected_media_type.load()},
      {"memory_limit", rs.rejected_queue_full.load()},
      {"shutting_down", rs.rejected_shutting_down.load()},
      {"durable_queue_full", rs.rejected_durable_full.load()},
      {"durable_queue_error", rs.durable_errors.load()}};
  for (const auto& [reason, v] : rejected) {
    out += fmt::format(
        "spanhouse_receiver_rejected_requests_total{{receiver=\"otlp_http\",reason=\"{}\"}} {}\n",
        reason, v);
  }
  line("spanhouse_memory_reserved_bytes", "gauge", "", budget.used());
  line("spanhouse_memory_limit_bytes", "gauge", "", budget.limit());
  line("spanhouse_queue_bytes", "gauge", "sink=\"chdb\"", queue.bytes());
  uint64_t rows = 0, inserts = 0, errors = 0, lost = 0, pending = 0;
  for (const auto& w : writers) {
    rows += w->stats().rows_written.load();
    inserts += w->stats().inserts.load();
    errors += w->stats().insert_errors.load();
    lost += w->stats().rows_lost.load();
    pending += w->stats().pending_rows.load();
  }
  line("spanhouse_sink_rows_written_total", "counter", "sink=\"chdb\"", rows);
  line("spanhouse_sink_batches_written_total", "counter", "sink=\"chdb\"", inserts);
  line("spanhouse_sink_insert_errors_total", "counter", "sink=\"chdb\"", errors);
  line("spanhouse_sink_rows_lost_total", "counter", "sink=\"chdb\"", lost);
  uint64_t retryable = 0, permanent = 0, dead_rows = 0, dead_blocks = 0;
  for (const auto& w : writers) {
    retryable += w->stats().retryable_errors.load();
    permanent += w->stats().permanent_errors.load();
    dead_rows += w->stats().rows_dead_lettered.load();
    dead_blocks += w->stats().blocks_dead_lettered.load();
  }
  out += "# TYPE spanhouse_sink_insert_errors_by_class_total counter\n";
  out += fmt::format(
      "spanhouse_sink_insert_errors_by_class_total{{sink=\"chdb\",class=\"retryable\"}} {}\n"
      "spanhouse_sink_insert_errors_by_class_total{{sink=\"chdb\",class=\"permanent\"}} {}\n",
      retryable, permanent);
  line("spanhouse_sink_dead_letter_rows_total", "counter", "sink=\"chdb\"", dead_rows);
  line("spanhouse_sink_dead_letter_blocks_total", "counter", "sink=\"chdb\"", dead_blocks);
  line("spanhouse_sink_pending_rows", "gauge", "sink=\"chdb\"", pending);
  out += "# TYPE spanhouse_sink_insert_seconds histogram\n";
  for (size_t i = 0; i < writers.size(); ++i) {
    writers[i]->stats().insert_seconds.AppendPrometheus(
        out, "spanhouse_sink_insert_seconds", fmt::format("sink=\"chdb\",writer=\"{}\"", i));
  }
  return out;
}

// The durable queue: its size on disk, appends, fsyncs, what the last
// start replayed, and corrupt tails skipped.
void AppendDurableMetrics(const pipeline::durable::SegmentLog& log, const ReplayCounts& replayed,
                          std::string& out) {
  const pipeline::durable::LogStats& s = log.stats();
  const std::pair<const char*, uint64_t> gauges[] = {
      {"spanhouse_durable_queue_bytes", log.bytes()},
      {"spanhouse_durable_queue_limit_bytes", log.options().max_bytes}};
  for (const auto& [name, v] : gauges) out += fmt::format("# TYPE {0} gauge\n{0} {1}\n", name, v);
  const std::pair<const char*, uint64_t> counters[] = {
      {"spanhouse_durable_queue_records_total", s.records_appended.load()},
      {"spanhouse_durable_queue_appended_bytes_total", s.bytes_appended.load()},
      {"spanhouse_durable_queue_fsyncs_total", s.fsyncs.load()},
      {"spanhouse_durable_queue_rejected_full_total", s.rejected_full.load()},
      {"spanhouse_durable_queue_segments_deleted_total", s.segments_deleted.load()},
      {"spanhouse_durable_queue_corrupt_tails_total", s.corrupt_tails.load()},
      {"spanhouse_durable_queue_corrupt_bytes_total", s.corrupt_bytes.load()},
      {"spanhouse_durable_queue_replayed_records_total", s.records_replayed.load()},
      {"spanhouse_durable_queue_replayed_blocks_total", replayed.blocks},
      {"spanhouse_durable_queue_replayed_spans_total",
       replayed.block_spans + replayed.queued_spans},
      {"spanhouse_durable_queue_bad_records_total", replayed.bad_records}};
  for (const auto& [name, v] : counters) {
    out += fmt::format("# TYPE {0} counter\n{0} {1}\n", name, v);
  }
}

// The fields of one TSV line.
std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> f;
  for (size_t a = 0;;) {
    const size_t tab = line.find('\t', a);
    f.push_back(line.substr(a, tab == std::string::npos ? std::string::npos : tab - a));
    if (tab == std::string::npos) return f;
    a = tab + 1;
  }
}

// Where the stored data lies: active parts, rows and bytes per table and
// disk ("default" is the hot volume, "cold" or "cold_s3" the cold one).
// Asked of the engine at each scrape (system.parts, metadata only).
void AppendStorageMetrics(storage::ChdbConnection& conn, std::string& out) {
  storage::QueryResult r;
  const Status st = conn.Query(
      fmt::format("SELECT table, disk_name, count(), sum(rows), sum(bytes_on_disk) FROM "
                  "system.parts WHERE database = '{}' AND active GROUP BY table, disk_name "
                  "ORDER BY table, disk_name",
                  storage::kDatabase),
      "TSV", &r);
  if (!st.ok()) {
    spdlog::warn("storage metrics: {}", st.message());
    return;
  }
  std::string parts = "# TYPE spanhouse_storage_parts gauge\n";
  std::string rows = "# TYPE spanhouse_storage_rows gauge\n";
  std::string bytes = "# TYPE spanhouse_storage_bytes gauge\n";
  for (size_t pos = 0; pos < r.data.size();) {
    size_t nl = r.data.find('\n', pos);
    if (nl == std::string::npos) nl = r.data.size();
    const std::string line = r.data.substr(pos, nl - pos);
    pos = nl + 1;
    const std::vector<std::string> f = SplitTabs(line);
    if (f.size() != 5) continue;
    const std::string labels = fmt::format("{{table=\"{}\",disk=\"{}\"}}", f[0], f[1]);
    parts += fmt::format("spanhouse_storage_parts{} {}\n", labels, f[2]);
    rows += fmt::format("spanhouse_storage_rows{} {}\n", labels, f[3]);
    bytes += fmt::format("spanhouse_storage_bytes{} {}\n", labels, f[4]);
  }
  out += parts + rows + bytes;
}

// POST /debug/sink?insert_delay_ms=N&fail_inserts=true|false&fail_permanent=true|false
//                 &kill_after_insert=true|false
void HandleDebugSink(const net::HttpRequest& req, net::HttpResponse& resp,
                     storage::SinkFaults& faults) {
  resp.content_type = "application/json";
  if (req.path() != "/debug/sink" || req.method != "POST") {
    resp.status = req.path() == "/debug/sink" ? 405 : 404;
    resp.body = "{\"error\":\"use POST /debug/sink?insert_delay_ms=N&fail_inserts=true|false\"}";
    return;
  }
  std::string v;
  if (query::QueryParam(req.target, "insert_delay_ms", &v)) {
    uint64_t ms = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), ms);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size() || v.empty() || ms > 600000) {
      resp.status = 400;
      resp.body = "{\"error\":\"insert_delay_ms: want 0 to 600000\"}";
      return;
    }
    faults.insert_delay_ms = static_cast<uint32_t>(ms);
  }
  const std::pair<const char*, std::atomic<bool>*> switches[] = {
      {"fail_inserts", &faults.fail_inserts},
      {"fail_permanent", &faults.fail_permanent},
      {"kill_after_insert", &faults.kill_after_insert}};
  for (const auto& [name, flag] : switches) {
    if (!query::QueryParam(req.target, name, &v)) continue;
    if (v != "true" && v != "false") {
      resp.status = 400;
      resp.body = fmt::format("{{\"error\":\"{}: want true or false\"}}", name);
      return;
    }
    *flag = v == "true";
  }
  resp.body = fmt::format("{{\"insert_delay_ms\":{},\"fail_inserts\":{},\"fail_permanent\":{}}}",
                          faults.insert_delay_ms.load(), faults.fail_inserts.load(),
                          faults.fail_permanent.load());
}

// GET /debug/spans: how many span rows are stored and how many distinct
// span ids, and the calls the red_1m view counted: the crash and outage
// tests check that nothing was stored twice (tables and views alike).
void HandleDebugSpans(net::HttpResponse& resp, storage::ChdbConnection& conn) {
  resp.content_type = "application/json";
  storage::QueryResult r;
  const Status st = conn.Query(
      fmt::format("SELECT (SELECT count() FROM {0}.spans), (SELECT uniqExact(span_id) FROM "
                  "{0}.spans), (SELECT sum(calls) FROM {0}.red_1m)",
                  storage::kDatabase),
      "TSV", &r);
  if (!st.ok()) {
    resp.status = 503;
    resp.body = "{\"error\":\"query failed\"}";
    spdlog::warn("/debug/spans: {}", st.message());
    return;
  }
  std::string v = r.data;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  std::vector<std::string> f = SplitTabs(v);
  if (f.size() != 3) f.resize(3, "0");
  resp.body =
      fmt::format("{{\"rows\":{},\"unique_span_ids\":{},\"red_calls\":{}}}", f[0], f[1], f[2]);
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int Serve(const Config& cfg) {
  // Request bodies and batch columns are large, short-lived allocations.
  // glibc would map and unmap each (>128 KiB) and fault its pages in anew
  // every request (page faults were ~6% of the pipeline's CPU); keep them on
  // the heap for reuse instead.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  DataDirLock lock;
  if (Status st = DataDirLock::Acquire(cfg.data_dir, &lock); !st.ok()) return Fail(st);
  const std::string dir = std::filesystem::absolute(cfg.data_dir).lexically_normal().string();

  std::shared_ptr<storage::ChdbLibrary> lib;
  if (Status st = storage::ChdbLibrary::Load(&lib); !st.ok()) return Fail(st);
  const std::string ch_path = dir + "/clickhouse";
  // The engine's disks and storage policy (hot: the data directory; cold: a
  // directory or an S3 bucket), written anew at every start so it follows
  // the configuration. The engine reads it when it boots, at the first
  // connection; every connection gets the same arguments.
  storage::TieringOptions tiering;
  tiering.cold_path = std::filesystem::absolute(ColdPath(cfg)).lexically_normal().string();
  tiering.s3_endpoint = cfg.storage.s3_endpoint;
  tiering.s3_access_key_id = cfg.storage.s3_access_key_id;
  tiering.s3_secret_access_key = cfg.storage.s3_secret_access_key;
  tiering.s3_region = cfg.storage.s3_region;
  const std::string engine_config = dir + "/clickhouse-config.xml";
  if (Status st = storage::WriteEngineConfig(engine_config, tiering); !st.ok()) return Fail(st);
  const std::vector<std::string> engine_args = storage::EngineArgs(engine_config);
  // One connection per writer and one for queries: chDB runs one statement
  // at a time per connection, so inserts never wait behind a slow query.
  std::unique_ptr<storage::ChdbConnection> read_conn;
  if (Status st = storage::ChdbConnection::Open(lib, ch_path, engine_args, &read_conn); !st.ok()) {
    return Fail(st);
  }
  storage::Capabilities caps;
  storage::SchemaOptions schema_opts;
  schema_opts.metrics_retention_days = static_cast<uint32_t>(cfg.metrics.retention_days);
  schema_opts.tiered = true;
  schema_opts.move_after_s = cfg.storage.move_after_s;
  schema_opts.retention_s = cfg.storage.retention_s;
  if (Status st = storage::EnsureSchema(*read_conn, &caps, schema_opts); !st.ok()) {
    read_conn->Close();
    return Fail(st);
  }
  if (cfg.durable.enabled) {
    if (Status st = storage::EnableInsertDeduplication(*read_conn, caps); !st.ok()) {
      read_conn->Close();
      return Fail(st);
    }
  }
  const size_t shards = static_cast<size_t>(cfg.writer.threads);
  std::vector<std::unique_ptr<storage::ChdbConnection>> write_conns(shards);
  for (auto& c : write_conns) {
    if (Status st = storage::ChdbConnection::Open(lib, ch_path, engine_args, &c); !st.ok()) {
      read_conn->Close();
      return Fail(st);
    }
  }
  // The dependency job's joins get a connection of their own, so they
  // delay neither inserts nor API queries.
  std::unique_ptr<storage::ChdbConnection> job_conn;
  if (Status st = storage::ChdbConnection::Open(lib, ch_path, engine_args, &job_conn); !st.ok()) {
    read_conn->Close();
    for (auto& c : write_conns) c->Close();
    return Fail(st);
  }
  storage::DependencyJobOptions job_opts;
  job_opts.interval = std::chrono::seconds(cfg.dependencies.interval_s);
  job_opts.lag = std::chrono::seconds(cfg.dependencies.lag_s);
  storage::DependencyJob dependency_job(*job_conn, job_opts);
  dependency_job.Start();
  spdlog::info("embedded ClickHouse {}.{} ready in {}", caps.major, caps.minor, ch_path);
  spdlog::info("spans move to the cold volume ({}) after {} s and are deleted after {} s",
               tiering.s3_endpoint.empty() ? tiering.cold_path : tiering.s3_endpoint,
               cfg.storage.move_after_s, cfg.storage.retention_s);

  // The durable queue: opened (and its old segments indexed) before the
  // writers exist, replayed before the receivers open.
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  if (cfg.durable.enabled) {
    pipeline::durable::LogOptions lopts;
    lopts.dir = std::filesystem::absolute(DurableDir(cfg)).lexically_normal().string();
    lopts.max_bytes = cfg.durable.max_bytes;
    // Several segments per queue, so stored ones can go while others fill.
    lopts.segment_bytes = std::clamp<uint64_t>(cfg.durable.max_bytes / 8, 64 << 10, 64 << 20);
    lopts.fsync_always = cfg.durable.fsync == "always";
    if (!lopts.fsync_always) {
      lopts.fsync_interval = std::chrono::milliseconds(std::stoull(cfg.durable.fsync));
    }
    if (Status st = pipeline::durable::SegmentLog::Open(lopts, &log); !st.ok()) {
      dependency_job.Stop();
      job_conn->Close();
      read_conn->Close();
      for (auto& c : write_conns) c->Close();
      return Fail(st);
    }
  }

  storage::SinkFaults faults;
  pipeline::MemoryBudget budget(cfg.queue.max_bytes);
  // Each shard's own bound is the whole budget: the budget is what refuses.
  pipeline::ShardedQueue queue(shards, cfg.queue.max_bytes);
  std::vector<std::unique_ptr<storage::EmbeddedWriter>> writers;
  for (size_t i = 0; i < shards; ++i) {
    storage::WriterOptions wopts;
    wopts.max_rows = cfg.writer.max_rows;
    wopts.max_bytes = cfg.writer.max_bytes;
    wopts.max_age = std::chrono::milliseconds(cfg.writer.max_age_ms);
    wopts.spool_dir = dir + "/spool";
    wopts.name = std::to_string(i);
    wopts.null_sink = cfg.writer.sink == "null";
    wopts.well_known = WellKnownNamespaces(cfg);
    wopts.log = log.get();
    wopts.shard = static_cast<uint32_t>(i);
    wopts.shards = static_cast<uint32_t>(shards);
    wopts.dead_letter_dir = dir + "/dead-letter";
    writers.push_back(std::make_unique<storage::EmbeddedWriter>(write_conns[i].get(), caps,
                                                                queue.shard(i), wopts, &faults));
  }
  ReplayCounts replayed;
  if (log != nullptr) ReplayLoggedBlocks(*log, writers, &replayed);
  for (auto& w : writers) w->Start();
  if (log != nullptr) ReplayRemainingRecords(*log, queue, budget, &replayed);

  storage::ChdbSpanReader reader(*read_conn, caps);
  receivers::OtlpHttpReceiver receiver(
      {cfg.otlp_http.listen, cfg.otlp_http.max_body_bytes, cfg.otlp_http.threads,
       std::chrono::milliseconds(cfg.queue.wait_ms), log.get()},
      queue, budget);
  query::AdminHooks hooks;
  hooks.metrics = [&] {
    std::string out = RenderMetrics(receiver.stats(), budget, queue, writers);
    if (log != nullptr) AppendDurableMetrics(*log, replayed, out);
    AppendStorageMetrics(*read_conn, out);
    return out;
  };
  if (cfg.debug.fault_injection) {
    spdlog::warn("fault injection is enabled (debug.fault_injection): POST /debug/sink");
    hooks.debug = [&faults, &read_conn](const net::HttpRequest& req, net::HttpResponse& resp) {
      if (req.path() == "/debug/spans") return HandleDebugSpans(resp, *read_conn);
      HandleDebugSink(req, resp, faults);
    };
  }
  query::QueryApi query_api({cfg.query.listen, 2}, reader, std::move(hooks));

  auto shutdown_storage = [&] {
    queue.Close();
    for (auto& w : writers) w->Join();
    dependency_job.Stop();
    job_conn->Close();
    read_conn->Close();
    for (auto& c : write_conns) c->Close();
  };
  if (Status st = query_api.Start(); !st.ok()) {
    shutdown_storage();
    return Fail(st);
  }
  if (Status st = receiver.Start(); !st.ok()) {
    query_api.Stop();
    shutdown_storage();
    return Fail(st);
  }
  spdlog::info("OTLP/HTTP on {} (port {}), query API on {} (port {}), {} writer(s)",
               cfg.otlp_http.listen, receiver.port(), cfg.query.listen, query_api.port(), shards);
  spdlog::info("spanhouse ready");

  sigset_t set = ShutdownSignals();
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("{} received: stopping intake, flushing queued spans", strsignal(sig));

  receiver.Stop();
  queue.Close();
  uint64_t written = 0;
  uint64_t inserts = 0;
  uint64_t lost = 0;
  uint64_t left_queued = 0;
  for (auto& w : writers) {
    w->Join();
    left_queued += w->stats().rows_left_queued.load();
    written += w->stats().rows_written.load();
    inserts += w->stats().inserts.load();
    lost += w->stats().rows_lost.load();
  }
  query_api.Stop();
  dependency_job.Stop();
  spdlog::info("flushed: {} spans written in {} inserts, {} lost, {} left in the durable queue",
               written, inserts, lost, left_queued);
  if (log != nullptr) log->Close();
  job_conn->Close();
  read_conn->Close();
  for (auto& c : write_conns) c->Close();
  spdlog::info("stopped");
  return lost == 0 ? 0 : 3;
}

}  // namespace spanhouse::server
