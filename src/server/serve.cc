#include "server/serve.h"

#include <malloc.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <filesystem>
#include <functional>
#include <initializer_list>

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include "pipeline/filter/span_filter.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "query/query_api.h"
#include "receivers/durable/spill_backlog.h"
#include "receivers/intake/http_intake.h"
#include "receivers/otlp_grpc/otlp_grpc_receiver.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "receivers/zipkin/zipkin_receiver.h"
#include "server/data_dir_lock.h"
#include "server/durable_replay.h"
#include "server/listener_security.h"
#include "server/metrics.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/schema.h"
#include "ui/ui_server.h"

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

pipeline::FilterLimits FilterLimitsOf(const Config& cfg) {
  constexpr uint64_t kNs = 1000000000ull;
  pipeline::FilterLimits l;
  l.max_future_ns = cfg.filter.max_future_s * kNs;
  l.max_age_ns = cfg.storage.retention_s * kNs;
  l.max_duration_ns = cfg.filter.max_duration_s * kNs;
  l.max_attributes = static_cast<uint32_t>(cfg.filter.max_attributes);
  l.max_events = static_cast<uint32_t>(cfg.filter.max_events);
  l.max_links = static_cast<uint32_t>(cfg.filter.max_links);
  l.max_value_bytes = static_cast<uint32_t>(cfg.filter.max_value_bytes);
  l.max_key_bytes = static_cast<uint32_t>(cfg.filter.max_key_bytes);
  l.max_span_names_per_service = static_cast<uint32_t>(cfg.filter.max_span_names_per_service);
  return l;
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

// The durable queue: its size on disk, appends, fsyncs, what the last
// start replayed, and corrupt tails skipped.
void AppendDurableMetrics(const pipeline::durable::SegmentLog& log, const ReplayCounts& replayed,
                          const receivers::SpillStats& spill, PromText& out) {
  const pipeline::durable::LogStats& s = log.stats();
  const std::pair<const char*, uint64_t> gauges[] = {
      {"spanhouse_durable_queue_bytes", log.bytes()},
      {"spanhouse_durable_queue_limit_bytes", log.options().max_bytes},
      // Accepted requests waiting on disk for memory (spill_backlog.h).
      {"spanhouse_durable_queue_spilled_waiting_requests", spill.waiting_requests.load()},
      {"spanhouse_durable_queue_spilled_waiting_spans", spill.waiting_spans.load()}};
  for (const auto& [name, v] : gauges) out.One(name, "gauge", "The durable queue on disk.", "", v);
  const std::pair<const char*, uint64_t> counters[] = {
      {"spanhouse_durable_queue_records_total", s.records_appended.load()},
      {"spanhouse_durable_queue_appended_bytes_total", s.bytes_appended.load()},
      {"spanhouse_durable_queue_fsyncs_total", s.fsyncs.load()},
      {"spanhouse_durable_queue_rejected_full_total", s.rejected_full.load()},
      {"spanhouse_durable_queue_segments_deleted_total", s.segments_deleted.load()},
      {"spanhouse_durable_queue_segments_recycled_total", s.segments_recycled.load()},
      {"spanhouse_durable_queue_corrupt_tails_total", s.corrupt_tails.load()},
      {"spanhouse_durable_queue_corrupt_bytes_total", s.corrupt_bytes.load()},
      {"spanhouse_durable_queue_replayed_records_total", s.records_replayed.load()},
      {"spanhouse_durable_queue_replayed_blocks_total", replayed.blocks},
      {"spanhouse_durable_queue_replayed_spans_total",
       replayed.block_spans + replayed.queued_spans},
      {"spanhouse_durable_queue_bad_records_total", replayed.bad_records},
      {"spanhouse_durable_queue_spilled_requests_total", spill.spilled_requests.load()},
      {"spanhouse_durable_queue_spilled_spans_total", spill.spilled_spans.load()},
      {"spanhouse_durable_queue_spilled_queued_spans_total", spill.queued_spans.load()},
      {"spanhouse_durable_queue_spilled_read_errors_total", spill.read_errors.load()}};
  for (const auto& [name, v] : counters) {
    out.One(name, "counter", "The durable queue's work since start.", "", v);
  }
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
  const auto rows = storage::TsvRows(r.data);
  std::vector<std::string> f = rows.empty() ? std::vector<std::string>() : rows[0];
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
  // Tokens and certificates first: a bad one fails start-up before the
  // engine is booted.
  ListenerSecurity security;
  if (Status st = ListenerSecurity::Load(cfg, &security); !st.ok()) return Fail(st);
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
  storage::CompressionOptions compression;
  compression.zstd_min_part_bytes = cfg.storage.zstd_min_part_bytes;
  if (Status st = storage::WriteEngineConfig(engine_config, tiering, compression); !st.ok()) {
    return Fail(st);
  }
  const std::vector<std::string> engine_args = storage::EngineArgs(engine_config);
  // One connection per writer and one for queries: chDB runs one statement
  // at a time per connection, so inserts never wait behind a slow query.
  std::unique_ptr<storage::ChdbConnection> read_conn;
  if (Status st = storage::ChdbConnection::Open(lib, ch_path, engine_args, &read_conn); !st.ok()) {
    return Fail(st);
  }
  // The durable queue: opened (and its old segments indexed) before the
  // schema is ensured (an upgrade that copies the spans table replays its
  // logged blocks first), replayed before the receivers open.
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
      read_conn->Close();
      return Fail(st);
    }
  }
  pipeline::SpanFilter filter(FilterLimitsOf(cfg));
  ReplayCounts replayed;

  storage::Capabilities caps;
  storage::SchemaOptions schema_opts;
  schema_opts.metrics_retention_days = static_cast<uint32_t>(cfg.metrics.retention_days);
  schema_opts.tiered = true;
  schema_opts.move_after_s = cfg.storage.move_after_s;
  schema_opts.retention_s = cfg.storage.retention_s;
  if (log != nullptr) {
    // A copying upgrade starts the tables' deduplication history afresh:
    // the logged blocks go into the old tables first (durable_replay.h).
    schema_opts.before_copy = [&](const storage::Capabilities& c) -> Status {
      if (Status st = storage::EnableInsertDeduplication(*read_conn, c); !st.ok()) return st;
      pipeline::SpanQueue none(1);
      storage::WriterOptions wopts;
      wopts.spool_dir = dir + "/spool";
      wopts.name = "upgrade";
      wopts.well_known = WellKnownNamespaces(cfg);
      wopts.dead_letter_dir = dir + "/dead-letter";
      storage::EmbeddedWriter writer(read_conn.get(), c, none, wopts);
      Status st = ReplayLoggedBlocksBeforeCopy(*log, writer, &filter, &replayed);
      none.Close();
      return st;
    };
  }
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

  storage::SinkFaults faults;
  pipeline::MemoryBudget budget(cfg.queue.max_bytes);
  // Each shard's own bound is twice the whole budget: the budget is what
  // refuses. (A batch's reservation is corrected to its decoded size after
  // the budget admitted it, so the budget can run over by a little; a queue
  // bound equal to it then refused the spill backlog's batches.)
  pipeline::ShardedQueue queue(shards, 2 * cfg.queue.max_bytes);
  std::vector<std::unique_ptr<storage::EmbeddedWriter>> writers;
  for (size_t i = 0; i < shards; ++i) {
    storage::WriterOptions wopts;
    wopts.max_rows = cfg.writer.max_rows;
    // Batches waiting to be encoded hold receivers' memory: at most a
    // quarter of it, so a full budget always has blocks on their way out.
    wopts.max_bytes = std::min<uint64_t>(cfg.writer.max_bytes, cfg.queue.max_bytes / 4);
    wopts.insert_rows = cfg.writer.insert_rows;
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
  if (log != nullptr) ReplayLoggedBlocks(*log, writers, &filter, &replayed);
  for (auto& w : writers) w->Start();
  std::unique_ptr<receivers::SpillBacklog> backlog;
  if (log != nullptr) {
    backlog = std::make_unique<receivers::SpillBacklog>(*log, queue, budget, &filter);
    backlog->Start();
    ReplayRemainingRecords(*log, queue, budget, &filter, backlog.get(), &replayed);
  }

  storage::ChdbSpanReader reader(*read_conn, caps,
                                 {.max_execution_s = static_cast<uint32_t>(cfg.query.timeout_s),
                                  .max_spans = cfg.query.max_trace_spans,
                                  .max_rows = cfg.query.max_rows});
  receivers::OtlpHttpOptions receiver_opts;
  receiver_opts.address = cfg.otlp_http.listen;
  receiver_opts.max_body_bytes = cfg.otlp_http.max_body_bytes;
  receiver_opts.max_spans_per_request = cfg.otlp_http.max_spans_per_request;
  receiver_opts.threads = cfg.otlp_http.threads;
  receiver_opts.memory_wait = std::chrono::milliseconds(cfg.queue.wait_ms);
  receiver_opts.authorize = security.ingest->Authorizer();
  receiver_opts.tls = security.ingest_tls;
  receiver_opts.log = log.get();
  receiver_opts.spill = backlog.get();
  receivers::OtlpHttpReceiver receiver(receiver_opts, queue, budget, &filter);
  // Zipkin and OTLP/gRPC: the same limits, guard, TLS and intake (each its
  // own counters); an empty address turns one off.
  std::unique_ptr<receivers::ZipkinReceiver> zipkin;
  if (!cfg.zipkin.listen.empty()) {
    receivers::ZipkinOptions zopts;
    static_cast<receivers::OtlpHttpOptions&>(zopts) = receiver_opts;
    zopts.address = cfg.zipkin.listen;
    zipkin = std::make_unique<receivers::ZipkinReceiver>(zopts, queue, budget, &filter);
  }
  std::unique_ptr<receivers::OtlpGrpcReceiver> grpc;
  if (!cfg.otlp_grpc.listen.empty()) {
    receivers::OtlpGrpcOptions gopts;
    gopts.address = cfg.otlp_grpc.listen;
    gopts.intake = receivers::IntakeOptionsOf(receiver_opts);
    gopts.authorize = receiver_opts.authorize;
    gopts.tls_cert_pem = security.ingest_cert_pem;
    gopts.tls_key_pem = security.ingest_key_pem;
    grpc = std::make_unique<receivers::OtlpGrpcReceiver>(gopts, queue, budget, &filter);
  }
  // Ready (GET /readyz) from the moment intake starts until shutdown begins.
  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};
  MetricsSources metrics;
  metrics.receivers.push_back({"otlp_http", &receiver.stats(), &receiver.http_stats()});
  if (grpc != nullptr) metrics.receivers.push_back({"otlp_grpc", &grpc->stats(), nullptr});
  if (zipkin != nullptr) {
    metrics.receivers.push_back({"zipkin", &zipkin->stats(), &zipkin->http_stats()});
  }
  metrics.filter = &filter.stats();
  metrics.budget = &budget;
  metrics.queue = &queue;
  metrics.writers = &writers;
  metrics.extra.push_back([&security](PromText& out) { security.AppendMetrics(out.text()); });
  if (log != nullptr) {
    metrics.extra.push_back([&log, &replayed, &backlog](PromText& out) {
      AppendDurableMetrics(*log, replayed, backlog->stats(), out);
    });
  }
  query::AdminHooks hooks;
  hooks.metrics = [&] {
    PromText out;
    AppendPipelineMetrics(metrics, out);
    AppendStorageMetrics(*read_conn, out);
    return std::move(out.text());
  };
  hooks.not_ready = [&]() -> std::string {
    if (stopping.load()) return "shutting down: intake stopped, writing the queued spans";
    if (!ready.load()) return "starting";
    return "";
  };
  if (cfg.debug.fault_injection) {
    spdlog::warn("fault injection is enabled (debug.fault_injection): POST /debug/sink");
    hooks.debug = [&faults, &read_conn](const net::HttpRequest& req, net::HttpResponse& resp) {
      if (req.path() == "/debug/spans") return HandleDebugSpans(resp, *read_conn);
      HandleDebugSink(req, resp, faults);
    };
  }
  hooks.ui = ui::ServeUi;
  query::QueryApi query_api({cfg.query.listen, 2, security.query->Authorizer(), security.query_tls},
                            reader, std::move(hooks));

  auto shutdown_storage = [&] {
    if (backlog != nullptr) backlog->Stop();
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
  auto stop_receivers = [&] {
    receiver.Stop();
    if (grpc != nullptr) grpc->Stop();
    if (zipkin != nullptr) zipkin->Stop();
  };
  for (const auto& start : std::initializer_list<std::function<Status()>>{
           [&] { return receiver.Start(); },
           [&] { return grpc != nullptr ? grpc->Start() : Status::Ok(); },
           [&] { return zipkin != nullptr ? zipkin->Start() : Status::Ok(); }}) {
    if (Status st = start(); !st.ok()) {
      stop_receivers();
      query_api.Stop();
      shutdown_storage();
      return Fail(st);
    }
  }
  spdlog::info("OTLP/HTTP on {} (port {}, {}{}), query API on {} (port {}, {}{}), {} writer(s)",
               cfg.otlp_http.listen, receiver.port(), security.ingest_tls ? "https" : "http",
               security.ingest->enabled() ? ", token required" : "", cfg.query.listen,
               query_api.port(), security.query_tls ? "https" : "http",
               security.query->enabled() ? ", token required" : "", shards);
  if (grpc != nullptr) {
    spdlog::info("OTLP/gRPC on {} (port {}, {}{})", cfg.otlp_grpc.listen, grpc->port(),
                 security.ingest_cert_pem.empty() ? "plaintext" : "TLS",
                 security.ingest->enabled() ? ", token required" : "");
  }
  if (zipkin != nullptr) {
    spdlog::info("Zipkin v2 on {} (port {}, {}{})", cfg.zipkin.listen, zipkin->port(),
                 security.ingest_tls ? "https" : "http",
                 security.ingest->enabled() ? ", token required" : "");
  }
  ready = true;
  spdlog::info("spanhouse ready");

  sigset_t set = ShutdownSignals();
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("{} received: stopping intake, flushing queued spans", strsignal(sig));

  stopping = true;
  stop_receivers();
  if (backlog != nullptr) backlog->Stop();
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
