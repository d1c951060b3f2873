#include "server/server.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

#include "codec/value_text.h"
#include "common/clock.h"
#include "query/jaeger_json.h"
#include "server/debug_endpoints.h"
#include "server/metrics.h"
#include "sink/observed_sink.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/embedded_sink.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/replica_set.h"
#include "storage/opensearch/opensearch_reader.h"
#include "ui/ui_server.h"

namespace spanhouse::server {

namespace {

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

}  // namespace

namespace {

// How to reach one ClickHouse server of clickhouse.shards.
storage::RemoteOptions RemoteOptionsOf(const Config& cfg, const std::string& url) {
  storage::RemoteOptions o;
  o.url = url;
  o.user = cfg.clickhouse.user;
  o.password = cfg.clickhouse.password;
  o.timeout = std::chrono::seconds(cfg.clickhouse.timeout_s);
  o.tls_ca_file = cfg.clickhouse.tls_ca_file;
  o.compression = cfg.clickhouse.compression;
  return o;
}

}  // namespace

Status Server::Create(const Config& cfg, std::unique_ptr<Server>* out) {
  std::unique_ptr<Server> s(new Server(cfg));
  // Tokens and certificates first: a bad one fails start-up before the
  // engine is booted.
  SH_RETURN_IF_ERROR(ListenerSecurity::Load(cfg, &s->security_));
  SH_RETURN_IF_ERROR(DataDirLock::Acquire(cfg.data_dir, &s->lock_));
  s->dir_ = std::filesystem::absolute(cfg.data_dir).lexically_normal().string();
  SH_RETURN_IF_ERROR(s->OpenEngine());
  // The durable queue before the schema: an upgrade that copies the spans
  // table first writes the blocks the queue holds unfinished (EnsureStore).
  SH_RETURN_IF_ERROR(s->OpenQueue());
  SH_RETURN_IF_ERROR(s->EnsureStore());
  SH_RETURN_IF_ERROR(s->MakeSinks());
  SH_RETURN_IF_ERROR(s->OpenOpenSearch());
  s->MakeQueryApi();
  s->MakeReceivers();
  *out = std::move(s);
  return Status::Ok();
}

Server::~Server() {
  Stop();
}

Status Server::OpenEngine() {
  if (remote()) return OpenRemote();
  database_ = std::string(storage::kDatabase);
  SH_RETURN_IF_ERROR(storage::ChdbLibrary::Load(&lib_));
  // The engine's disks and storage policy (hot: the data directory; cold: a
  // directory or an S3 bucket), written anew at every start so it follows
  // the configuration. The engine reads it when it boots, at the first
  // connection; every connection gets the same arguments.
  storage::TieringOptions tiering;
  tiering.cold_path = std::filesystem::absolute(ColdPath(cfg_)).lexically_normal().string();
  tiering.s3_endpoint = cfg_.storage.s3_endpoint;
  tiering.s3_access_key_id = cfg_.storage.s3_access_key_id;
  tiering.s3_secret_access_key = cfg_.storage.s3_secret_access_key;
  tiering.s3_region = cfg_.storage.s3_region;
  const std::string engine_config = dir_ + "/clickhouse-config.xml";
  storage::CompressionOptions compression;
  compression.zstd_min_part_bytes = cfg_.storage.zstd_min_part_bytes;
  SH_RETURN_IF_ERROR(storage::WriteEngineConfig(engine_config, tiering, compression));
  engine_args_ = storage::EngineArgs(engine_config);
  // One connection per writer (the sinks open theirs), one for queries and
  // one for the dependency job: chDB runs one statement at a time per
  // connection, so inserts never wait behind a slow query.
  std::vector<std::unique_ptr<storage::SqlConnection>> conns;
  SH_RETURN_IF_ERROR(OpenConnections(2, &conns));
  read_conn_ = std::move(conns[0]);
  job_conns_.push_back(std::move(conns[1]));
  read_database_ = database_;
  spdlog::info("spans move to the cold volume ({}) after {} s and are deleted after {} s",
               tiering.s3_endpoint.empty() ? tiering.cold_path : tiering.s3_endpoint,
               cfg_.storage.move_after_s, cfg_.storage.retention_s);
  return Status::Ok();
}

Status Server::OpenRemote() {
  database_ = cfg_.clickhouse.database;
  shards_ = ClickHouseShards(cfg_.clickhouse.shards);
  read_database_ = shards_.size() > 1 ? database_ + "_cluster" : database_;
  // Like the embedded engine: queries and the dependency job on connections
  // of their own, so neither waits behind an insert.
  std::vector<std::unique_ptr<storage::SqlConnection>> conns;
  SH_RETURN_IF_ERROR(OpenConnections(1, &conns));
  read_conn_ = std::move(conns[0]);
  for (size_t s = 0; s < shards_.size(); ++s) {
    conns.clear();
    SH_RETURN_IF_ERROR(OpenConnections(1, &conns, s));
    job_conns_.push_back(std::move(conns[0]));
  }
  spdlog::info("ClickHouse {} at {} ({} shard(s)), database {}",
               static_cast<storage::ReplicaSet&>(*read_conn_).version(), cfg_.clickhouse.shards,
               shards_.size(), database_);
  return Status::Ok();
}

Status Server::OpenQueue() {
  filter_ = std::make_unique<pipeline::SpanFilter>(FilterLimitsOf(cfg_));
  pipeline::HeadSamplingOptions head;
  head.probability = cfg_.sampling.head.probability;
  ParseServiceProbabilities(cfg_.sampling.head.services, &head.services);  // validated
  auto sampler = std::make_unique<pipeline::HeadSampler>(std::move(head));
  if (sampler->active()) {
    head_sampler_ = std::move(sampler);
    filter_->set_sampler(head_sampler_.get());
    spdlog::info("head sampling: {} of traces kept{}", cfg_.sampling.head.probability,
                 cfg_.sampling.head.services.empty()
                     ? ""
                     : fmt::format(" ({} per service)", cfg_.sampling.head.services));
  }
  if (!cfg_.sampling.tail.policies.empty()) {
    std::unique_ptr<pipeline::TailPolicies> policies;
    SH_RETURN_IF_ERROR(pipeline::TailPolicies::Parse(cfg_.sampling.tail.policies, &policies));
    pipeline::TailSamplingOptions tail;
    tail.decision_wait_ns = cfg_.sampling.tail.decision_wait_ms * 1000000ull;
    tail.keep_ns = cfg_.sampling.tail.keep_ms * 1000000ull;
    tail_sampler_ = std::make_unique<pipeline::TailSampler>(tail, std::move(policies), &budget_);
    filter_->set_tail(tail_sampler_.get());
    spdlog::info("tail sampling: {} (decided {} ms after a trace's first span)",
                 cfg_.sampling.tail.policies, cfg_.sampling.tail.decision_wait_ms);
  }
  pipeline::durable::DurableOptions d;
  d.enabled = cfg_.durable.enabled;
  d.log.dir = std::filesystem::absolute(DurableDir(cfg_)).lexically_normal().string();
  d.log.max_bytes = cfg_.durable.max_bytes;
  // Several segments per queue, so finished ones can go while others fill.
  d.log.segment_bytes = std::clamp<uint64_t>(cfg_.durable.max_bytes / 8, 64 << 10, 64 << 20);
  d.log.fsync_always = cfg_.durable.fsync == "always";
  if (!d.log.fsync_always) {
    d.log.fsync_interval = std::chrono::milliseconds(std::stoull(cfg_.durable.fsync));
  }
  SH_RETURN_IF_ERROR(pipeline::durable::DurableQueue::Open(d, budget_, filter_.get(), &queue_));
  if (cfg_.dedup.enabled) {
    pipeline::DedupOptions o;
    o.window_s = static_cast<uint32_t>(cfg_.dedup.window_s);
    o.max_bytes = cfg_.dedup.max_bytes;
    o.dir = std::filesystem::absolute(DedupDir(cfg_)).lexically_normal().string();
    const uint64_t now = WallClockNs();
    SH_RETURN_IF_ERROR(pipeline::DedupIndex::Open(o, now, &dedup_));
    // The queue's records are stored or will be (the replay); their keys
    // are in the files unless the process ended between a record's sync and
    // the keys' write, or its sync failed after the record reached the disk.
    // Read as a replay reads them, without tail sampling's marks.
    pipeline::TailSampler* tail = filter_->tail();
    filter_->set_tail(nullptr);
    queue_->ForEachLoggedRequest([&](const SpanBatch& b) { dedup_->Note(b, now); });
    filter_->set_tail(tail);
  }
  if (tail_sampler_ != nullptr) {
    tail_window_ = std::make_unique<pipeline::TailWindow>(*tail_sampler_, *queue_);
    queue_->set_tail_window(tail_window_.get());
  }
  return Status::Ok();
}

Status Server::EnsureStore() {
  if (remote()) return EnsureRemoteStore();
  SH_RETURN_IF_ERROR(EnsureDatabase(database_, "chdb", &caps_));
  if (cfg_.secondary.type == "chdb") {
    storage::Capabilities caps;
    SH_RETURN_IF_ERROR(EnsureDatabase(cfg_.secondary.database, SecondarySinkName(cfg_), &caps));
  }
  spdlog::info("embedded ClickHouse {}.{} ready in {}/clickhouse", caps_.major, caps_.minor, dir_);
  return Status::Ok();
}

Status Server::EnsureDatabase(const std::string& database, const std::string& sink,
                              storage::Capabilities* caps) {
  storage::SchemaOptions schema;
  schema.database = database;
  schema.metrics_retention_days = static_cast<uint32_t>(cfg_.metrics.retention_days);
  // The embedded engine's tiers are spanhouse's to configure (engine_config.h); a
  // server's storage policies are its operator's.
  schema.tiered = !remote();
  schema.move_after_s = cfg_.storage.move_after_s;
  schema.retention_s = cfg_.storage.retention_s;
  if (queue_->durable()) {
    // A copying upgrade starts the tables' deduplication history afresh:
    // the sink's sealed, unfinished blocks go into the old tables first.
    schema.before_copy = [this, database, sink](const storage::Capabilities& c) -> Status {
      SH_RETURN_IF_ERROR(storage::EnableInsertDeduplication(
          *read_conn_, c, storage::kDeduplicationWindow, database));
      SinkContext ctx = SinkContextOf();
      ctx.caps = c;
      std::unique_ptr<sink::Sink> upgrade;
      SH_RETURN_IF_ERROR(MakeSink({.kind = "chdb",
                                   .name = sink,
                                   .database = database,
                                   .writers = 1,
                                   .spool_dir = dir_ + "/spool-upgrade"},
                                  ctx, &upgrade));
      return queue_->ReplaySealedBlocks(*upgrade);
    };
  }
  SH_RETURN_IF_ERROR(storage::EnsureSchema(*read_conn_, caps, schema));
  if (!queue_->durable()) return Status::Ok();
  return storage::EnableInsertDeduplication(*read_conn_, *caps, storage::kDeduplicationWindow,
                                            database);
}

Status Server::WaitForRemoteSchema() {
  caps_ =
      storage::Capabilities::FromVersion(static_cast<storage::ReplicaSet&>(*read_conn_).version());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  for (size_t s = 0; s < job_conns_.size(); ++s) {
    for (bool logged = false;; logged = true) {
      storage::QueryResult r;
      const Status st = job_conns_[s]->Query(
          fmt::format("SELECT max(version) FROM {}.schema_version", database_), "TSV", &r);
      if (st.ok() && std::strtoul(r.data.c_str(), nullptr, 10) >= storage::kSchemaVersion) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::Unavailable(fmt::format(
            "ClickHouse shard {}: the schema of database {} is not at version {} after 10 "
            "minutes; the spanhouse with clickhouse.run_jobs true makes it so ({})",
            s + 1, database_, storage::kSchemaVersion,
            st.ok() ? "at " + r.data.substr(0, r.data.find('\n')) : st.message()));
      }
      if (!logged) {
        spdlog::info("waiting for the schema of shard {} (clickhouse.run_jobs is false here)",
                     s + 1);
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  spdlog::info("ClickHouse {}.{}: schema {} found in database {}", caps_.major, caps_.minor,
               storage::kSchemaVersion, database_);
  return Status::Ok();
}

Status Server::EnsureRemoteStore() {
  if (!cfg_.clickhouse.run_jobs) return WaitForRemoteSchema();
  const bool one_server = shards_.size() == 1 && shards_[0].size() == 1;
  if (one_server) {
    SH_RETURN_IF_ERROR(EnsureDatabase(database_, "clickhouse", &caps_));
    spdlog::info("ClickHouse {}.{}: schema {} ready in database {}", caps_.major, caps_.minor,
                 storage::kSchemaVersion, database_);
    return Status::Ok();
  }
  // A cluster: each replica of each shard gets the tables (replicated when
  // a shard has several replicas) and, with several shards, the Distributed
  // tables reads go through. A replica that cannot be reached is skipped
  // (it needs the schema before it takes writes: start spanhouse again once
  // it is back); a shard with none reachable stops the start.
  bool replicated = false;
  for (const auto& shard : shards_) replicated = replicated || shard.size() > 1;
  bool have_caps = false;
  for (size_t s = 0; s < shards_.size(); ++s) {
    size_t ready = 0;
    std::string errors;
    for (const std::string& url : shards_[s]) {
      const storage::RemoteOptions o = RemoteOptionsOf(cfg_, url);
      std::unique_ptr<storage::RemoteConnection> conn;
      Status st = storage::RemoteConnection::Open(o, &conn);
      if (st.code() == StatusCode::kUnavailable) {
        spdlog::warn("ClickHouse replica {} of shard {} unreachable at start: {}", url, s + 1,
                     st.message());
        errors += (errors.empty() ? "" : "; ") + st.message();
        continue;
      }
      SH_RETURN_IF_ERROR(st);
      // An upgrade that copies tables is not run across replicas and shards
      // yet: a schema older than the in-place ones (which only create what is
      // missing) stops the start, untouched.
      storage::QueryResult version;
      if (conn->Query(fmt::format("SELECT max(version) FROM {}.schema_version", database_), "TSV",
                      &version)
              .ok() &&
          std::strtoul(version.data.c_str(), nullptr, 10) < storage::kInPlaceFromSchemaVersion) {
        return Status::Internal(fmt::format(
            "ClickHouse {}: database {} has schema {}, this spanhouse writes {}; upgrading a "
            "cluster's schema is not supported yet (one server is upgraded at start)",
            url, database_, version.data.substr(0, version.data.find('\n')),
            storage::kSchemaVersion));
      }
      storage::SchemaOptions schema;
      schema.database = database_;
      schema.metrics_retention_days = static_cast<uint32_t>(cfg_.metrics.retention_days);
      schema.retention_s = cfg_.storage.retention_s;
      if (replicated) schema.replicated_path = "/clickhouse/tables/{shard}";
      // No copy across servers: a spans table made before schema 11 keeps
      // its two id columns, and the shard's writers write those.
      schema.copy_spans = false;
      storage::Capabilities caps;
      if (st = storage::EnsureSchema(*conn, &caps, schema); !st.ok()) {
        return {st.code(), fmt::format("ClickHouse {}: {}", url, st.message())};
      }
      if (have_caps && (caps.major != caps_.major || caps.minor != caps_.minor)) {
        spdlog::warn("ClickHouse {} is {}.{}, others {}.{}: spans are encoded for the first", url,
                     caps.major, caps.minor, caps_.major, caps_.minor);
      }
      if (!have_caps) caps_ = caps;
      have_caps = true;
      if (shards_.size() > 1) {
        for (const std::string& sql :
             storage::DistributedDdl(cfg_.clickhouse.cluster, database_, read_database_)) {
          if (st = conn->Query(sql, ""); !st.ok()) {
            return {st.code(), fmt::format("ClickHouse {}: {}\nin: {}", url, st.message(), sql)};
          }
        }
      }
      ++ready;
    }
    if (ready == 0) {
      return Status::Unavailable(
          fmt::format("ClickHouse shard {}: no replica reachable: {}", s + 1, errors));
    }
  }
  spdlog::info("ClickHouse {}.{}: schema {} ready in database {} on {} shard(s){}", caps_.major,
               caps_.minor, storage::kSchemaVersion, database_, shards_.size(),
               replicated ? ", replicated" : "");
  return Status::Ok();
}

Status Server::OpenConnections(size_t n, std::vector<std::unique_ptr<storage::SqlConnection>>* out,
                               size_t shard) {
  if (remote()) {
    std::vector<storage::RemoteOptions> replicas;
    for (const std::string& url : shards_.at(shard)) {
      replicas.push_back(RemoteOptionsOf(cfg_, url));
    }
    for (size_t i = 0; i < n; ++i) {
      std::unique_ptr<storage::ReplicaSet> c;
      SH_RETURN_IF_ERROR(storage::ReplicaSet::Open(replicas, &c));
      out->push_back(std::move(c));
    }
    return Status::Ok();
  }
  for (size_t i = 0; i < n; ++i) {
    std::unique_ptr<storage::ChdbConnection> c;
    SH_RETURN_IF_ERROR(storage::ChdbConnection::Open(lib_, dir_ + "/clickhouse", engine_args_, &c));
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

SinkContext Server::SinkContextOf() {
  SinkContext ctx;
  ctx.cfg = &cfg_;
  ctx.dir = dir_;
  ctx.caps = caps_;
  ctx.connect = [this](size_t n, size_t shard,
                       std::vector<std::unique_ptr<storage::SqlConnection>>* out) {
    return OpenConnections(n, out, shard);
  };
  ctx.opensearch = opensearch_;
  return ctx;
}

Status Server::MakeSinks() {
  if (cfg_.secondary.type == "opensearch") SH_RETURN_IF_ERROR(OpenOpenSearch());
  const SinkContext ctx = SinkContextOf();
  for (SinkSpec& spec : ServeSinks(cfg_, remote() ? shards_.size() : 1)) {
    if (spec.kind == "chdb" || spec.kind == "clickhouse") {
      faults_.push_back({spec.name, std::make_unique<storage::SinkFaults>()});
      spec.faults = faults_.back().faults.get();
    }
    std::unique_ptr<sink::Sink> made;
    SH_RETURN_IF_ERROR(MakeSink(spec, ctx, &made));
    sinks_.push_back(std::move(made));
  }
  if (cfg_.secondary.type == "opensearch") {
    spdlog::info("dual-write: every accepted span also goes to OpenSearch {} (index prefix '{}')",
                 cfg_.opensearch.urls, cfg_.opensearch.index_prefix);
  }
  if (cfg_.query.recent_max_bytes != 0 && cfg_.writer.sink != "null") {
    // At most a quarter of the budget: the rest is for requests in flight.
    query::RecentTracesOptions o{
        .max_bytes = std::min<size_t>(cfg_.query.recent_max_bytes, cfg_.queue.max_bytes / 4),
        .max_age = std::chrono::seconds(
            // Nothing is answered from memory past the retention that deleted it from the store.
            std::min(cfg_.query.recent_max_age_s, cfg_.storage.retention_s)),
        .log = queue_->log(),
        .filter = queue_->filter(),
        .disk_max_bytes = cfg_.query.recent_disk_bytes};
    recent_ = std::make_unique<query::RecentTraces>(o, &budget_, WallClockNs());
    // The primary sees every span (on a cluster, each shard's sink is handed
    // all of them and keeps its own).
    sinks_.front() = std::make_unique<sink::ObservedSink>(std::move(sinks_.front()), *recent_);
  }
  for (auto& s : sinks_) queue_->AddSink(*s);
  return Status::Ok();
}

Status Server::OpenOpenSearch() {
  if (opensearch_ != nullptr || cfg_.opensearch.urls.empty()) return Status::Ok();
  storage::opensearch::OpenSearchOptions o;
  o.urls = OpenSearchUrls(cfg_.opensearch.urls);
  o.user = cfg_.opensearch.user;
  o.password = cfg_.opensearch.password;
  o.tls_ca_file = cfg_.opensearch.tls_ca_file;
  o.timeout = std::chrono::seconds(cfg_.opensearch.timeout_s);
  std::unique_ptr<storage::opensearch::OpenSearchClient> c;
  SH_RETURN_IF_ERROR(storage::opensearch::OpenSearchClient::Create(o, &c));
  opensearch_ = std::move(c);
  return Status::Ok();
}

void Server::Reload(const Config& fresh) {
  if (fresh.query.read_from != read_switch_->current()) {
    if (Status st = read_switch_->SwitchTo(fresh.query.read_from); !st.ok()) {
      spdlog::error("reload: query.read_from: {} (reads stay on {})", st.message(),
                    read_switch_->current());
    }
  }
  read_switch_->set_fallback(fresh.query.fallback);
  // Everything else is read once, at start.
  Config applied = cfg_;
  applied.query.read_from = fresh.query.read_from;
  applied.query.fallback = fresh.query.fallback;
  const std::string before = ToYaml(applied, Secrets::kShow);
  const std::string after = ToYaml(fresh, Secrets::kShow);
  if (before != after) {
    spdlog::warn(
        "reload: applied query.read_from ({}) and query.fallback; other changed keys "
        "take effect at the next start",
        read_switch_->current());
  } else {
    spdlog::info("reload: reads from {}, fallback {}", read_switch_->current(),
                 fresh.query.fallback ? "on" : "off");
  }
}

void Server::MakeQueryApi() {
  storage::DependencyJobOptions job;
  job.interval = std::chrono::seconds(cfg_.dependencies.interval_s);
  job.lag = std::chrono::seconds(cfg_.dependencies.lag_s);
  job.database = database_;
  // With several spanhouse nodes on one cluster, one runs the job.
  if (!remote() || cfg_.clickhouse.run_jobs) {
    for (auto& conn : job_conns_) {
      dependency_jobs_.push_back(std::make_unique<storage::DependencyJob>(*conn, job));
    }
  }
  reader_ = std::make_unique<storage::ChdbSpanReader>(
      *read_conn_, caps_,
      storage::ReaderLimits{.max_execution_s = static_cast<uint32_t>(cfg_.query.timeout_s),
                            .max_spans = cfg_.query.max_trace_spans,
                            .max_rows = cfg_.query.max_rows},
      storage::StorageLayout{}, read_database_, read_database_ != database_);
  if (opensearch_ != nullptr) {
    storage::opensearch::ReaderOptions o;
    o.index_prefix = cfg_.opensearch.index_prefix;
    o.max_spans = cfg_.query.max_trace_spans;
    o.max_rows = cfg_.query.max_rows;
    o.timeout = std::chrono::seconds(cfg_.query.timeout_s);
    opensearch_reader_ = std::make_unique<storage::opensearch::OpenSearchReader>(opensearch_, o);
  }
  // Reads: the primary's store, and OpenSearch when configured; the query
  // API reads through the switch between them.
  std::vector<query::ReadSource> sources{{"clickhouse", reader_.get()}};
  if (opensearch_reader_ != nullptr) sources.push_back({"opensearch", opensearch_reader_.get()});
  size_t current = 0;
  if (cfg_.query.read_from == "opensearch" && sources.size() > 1) current = 1;
  read_switch_ =
      std::make_unique<query::ReadSwitch>(std::move(sources), current, cfg_.query.fallback,
                                          std::chrono::milliseconds(cfg_.query.fallback_after_ms));
  query::AdminHooks hooks;
  hooks.admin = [this](const net::HttpRequest& req, net::HttpResponse& resp) {
    HandleAdmin(req, resp);
  };
  hooks.annotate = [](net::HttpResponse& resp) {
    query::ReadInfo info = query::ReadSwitch::TakeInfo();
    if (!info.source.empty()) resp.headers.emplace_back("X-Spanhouse-Read-Source", info.source);
    if (!info.fallback.empty()) {
      resp.headers.emplace_back("X-Spanhouse-Read-Fallback", info.fallback);
    }
  };
  hooks.metrics = [this] { return Metrics(); };
  hooks.sampling = [this] { return SamplingJson(); };
  hooks.not_ready = [this] { return NotReady(); };
  if (cfg_.debug.fault_injection) {
    spdlog::warn("fault injection is enabled (debug.fault_injection): POST /debug/sink");
    hooks.debug = [this](const net::HttpRequest& req, net::HttpResponse& resp) {
      std::vector<DebugSink> sinks;
      for (const auto& f : faults_) sinks.push_back({f.sink, f.faults.get()});
      HandleDebug(req, resp, DebugStore{read_conn_.get(), read_database_, caps_}, sinks);
    };
  }
  hooks.ui = ui::ServeUi;
  query::SpanReader* api_reader = read_switch_.get();
  if (recent_ != nullptr) {
    // The store is this process's alone when it is embedded and nothing
    // else answers reads (imports are shown to the index too).
    query::RecentReaderOptions o{.sole_writer = !remote() && opensearch_reader_ == nullptr &&
                                                read_database_ == database_};
    recent_reader_ = std::make_unique<query::RecentReader>(*read_switch_, *recent_, o);
    api_reader = recent_reader_.get();
  }
  query_api_ = std::make_unique<query::QueryApi>(
      query::QueryApiOptions{cfg_.query.listen, 2, security_.query->Authorizer(),
                             security_.query_tls},
      *api_reader, std::move(hooks));
}

void Server::MakeReceivers() {
  receivers::IntakeOptions intake;
  intake.max_body_bytes = cfg_.otlp_http.max_body_bytes;
  intake.max_spans_per_request = cfg_.otlp_http.max_spans_per_request;
  intake.memory_wait = std::chrono::milliseconds(cfg_.queue.wait_ms);
  intake.dedup = dedup_.get();
  // Every receiver: the same limits, guard, TLS and intake (each its own
  // counters); an empty address turns Zipkin or OTLP/gRPC off.
  receivers::HttpListenerOptions http{.address = cfg_.otlp_http.listen,
                                      .threads = cfg_.otlp_http.threads,
                                      .authorize = security_.ingest->Authorizer(),
                                      .tls = security_.ingest_tls};
  otlp_http_ = std::make_unique<receivers::OtlpHttpReceiver>(http, intake, *queue_);
  if (!cfg_.zipkin.listen.empty()) {
    http.address = cfg_.zipkin.listen;
    zipkin_ = std::make_unique<receivers::ZipkinReceiver>(http, intake, *queue_);
  }
  if (!cfg_.otlp_grpc.listen.empty()) {
    receivers::OtlpGrpcOptions g;
    g.address = cfg_.otlp_grpc.listen;
    g.intake = intake;
    g.authorize = security_.ingest->Authorizer();
    g.tls_cert_pem = security_.ingest_cert_pem;
    g.tls_key_pem = security_.ingest_key_pem;
    otlp_grpc_ = std::make_unique<receivers::OtlpGrpcReceiver>(g, *queue_);
  }
}

Status Server::Start() {
  for (auto& s : sinks_) SH_RETURN_IF_ERROR(s->Start());
  // What the last process accepted and did not store, before anything new.
  queue_->Start();
  for (auto& job : dependency_jobs_) job->Start();
  SH_RETURN_IF_ERROR(query_api_->Start());
  SH_RETURN_IF_ERROR(otlp_http_->Start());
  if (otlp_grpc_ != nullptr) SH_RETURN_IF_ERROR(otlp_grpc_->Start());
  if (zipkin_ != nullptr) SH_RETURN_IF_ERROR(zipkin_->Start());
  spdlog::info("{}", Listening());
  ready_ = true;
  spdlog::info("spanhouse ready");
  return Status::Ok();
}

std::string Server::Listening() const {
  const std::string token = security_.ingest->enabled() ? ", token required" : "";
  std::string sinks;
  for (const auto& s : sinks_) sinks += (sinks.empty() ? "" : ", ") + s->name();
  std::string out = fmt::format(
      "OTLP/HTTP on {} (port {}, {}{}), query API on {} (port {}, {}{}), sinks: {} ({} "
      "writer(s))",
      cfg_.otlp_http.listen, otlp_http_->port(), security_.ingest_tls ? "https" : "http", token,
      cfg_.query.listen, query_api_->port(), security_.query_tls ? "https" : "http",
      security_.query->enabled() ? ", token required" : "", sinks, cfg_.writer.threads);
  if (otlp_grpc_ != nullptr) {
    out +=
        fmt::format("; OTLP/gRPC on {} (port {}, {}{})", cfg_.otlp_grpc.listen, otlp_grpc_->port(),
                    security_.ingest_cert_pem.empty() ? "plaintext" : "TLS", token);
  }
  if (zipkin_ != nullptr) {
    out += fmt::format("; Zipkin v2 on {} (port {}, {}{})", cfg_.zipkin.listen, zipkin_->port(),
                       security_.ingest_tls ? "https" : "http", token);
  }
  return out;
}

int Server::Stop() {
  if (stopped_) return 0;
  stopped_ = true;
  stopping_ = true;
  // The data's direction: intake first, then what is queued is written.
  if (otlp_http_ != nullptr) otlp_http_->Stop();
  if (otlp_grpc_ != nullptr) otlp_grpc_->Stop();
  if (zipkin_ != nullptr) zipkin_->Stop();
  // Traces still open are decided with what arrived; their spans go on.
  if (tail_window_ != nullptr) tail_window_->Flush();
  if (queue_ != nullptr) queue_->StopBacklogs();
  uint64_t written = 0;
  uint64_t lost = 0;
  uint64_t left = 0;
  for (auto& s : sinks_) {
    s->Drain();
    written += s->stats().rows_written.load();
    lost += s->stats().rows_lost.load();
    left += s->stats().rows_left_queued.load();
  }
  if (query_api_ != nullptr) query_api_->Stop();
  for (auto& job : dependency_jobs_) job->Stop();
  if (queue_ != nullptr) queue_->Close();
  for (auto& conn : job_conns_) conn->Close();
  if (read_conn_ != nullptr) read_conn_->Close();
  if (!sinks_.empty()) {
    spdlog::info("flushed: {} spans written, {} lost, {} left in the durable queue", written, lost,
                 left);
  }
  return lost == 0 ? 0 : 3;
}

std::string Server::NotReady() const {
  if (stopping_.load()) return "shutting down: intake stopped, writing the queued spans";
  if (!ready_.load()) return "starting";
  return "";
}

std::string Server::SamplingJson() const {
  // {"data": {"head": {"probability": 0.1, "services": {"checkout": 0.5}},
  //  "tail": null | {"policies": "...", "decisionWaitMs": n,
  //                  "kept": {"error": n, ...}, "dropped": m, "keptShare": r},
  //  "traces": {"kept": n, "dropped": m}, "spans": {...}, "keptShare": r,
  //  "metricsCountEverySpan": true}}; traces and spans are head sampling's
  //  (tail sampling's when it is the only one); keptShare is the share of
  //  traces kept since start by both (null before any).
  std::string out = R"({"data":{"head":{"probability":)";
  out += fmt::format("{}", cfg_.sampling.head.probability);
  out += R"(,"services":{)";
  std::vector<std::pair<std::string, double>> services;
  ParseServiceProbabilities(cfg_.sampling.head.services, &services);
  for (size_t i = 0; i < services.size(); ++i) {
    if (i != 0) out += ',';
    codec::AppendJsonString(out, services[i].first);
    out += fmt::format(":{}", services[i].second);
  }
  out += "}},\"tail\":";
  const auto share = [](uint64_t kept, uint64_t dropped) {
    return kept + dropped == 0 ? -1.0
                               : static_cast<double>(kept) / static_cast<double>(kept + dropped);
  };
  uint64_t kept = 0, dropped = 0, kept_spans = 0, dropped_spans = 0;
  double kept_share = 1;
  if (head_sampler_ != nullptr) {
    const pipeline::HeadSamplingStats& st = head_sampler_->stats();
    kept = st.kept_traces.load();
    dropped = st.dropped_traces.load();
    kept_spans = st.kept_spans.load();
    dropped_spans = st.dropped_spans.load();
    kept_share = share(kept, dropped);
  }
  if (tail_sampler_ == nullptr) {
    out += "null";
  } else {
    const pipeline::TailPolicies& p = tail_sampler_->policies();
    out += R"({"policies":)";
    codec::AppendJsonString(out, cfg_.sampling.tail.policies);
    out += fmt::format(R"(,"decisionWaitMs":{},"kept":{{)", cfg_.sampling.tail.decision_wait_ms);
    uint64_t tail_kept = 0;
    for (size_t k = 0; k < p.policies().size(); ++k) {
      if (k != 0) out += ',';
      codec::AppendJsonString(out, p.policies()[k].name);
      out += fmt::format(":{}", p.kept(k));
      tail_kept += p.kept(k);
    }
    const double tail_share = share(tail_kept, p.dropped());
    out += fmt::format(R"(}},"dropped":{},"keptShare":{}}})", p.dropped(),
                       tail_share < 0 ? std::string("null") : fmt::format("{}", tail_share));
    if (head_sampler_ == nullptr) {
      kept = tail_kept;
      dropped = p.dropped();
      kept_spans = tail_sampler_->stats().kept_spans.load();
      dropped_spans = tail_sampler_->stats().dropped_spans.load();
    }
    kept_share = kept_share < 0 || tail_share < 0 ? -1 : kept_share * tail_share;
  }
  out += fmt::format(R"(,"traces":{{"kept":{},"dropped":{}}},"spans":{{"kept":{},"dropped":{}}},)"
                     R"("keptShare":{},"metricsCountEverySpan":true}}}})",
                     kept, dropped, kept_spans, dropped_spans,
                     kept_share < 0 ? std::string("null") : fmt::format("{}", kept_share));
  return out;
}

std::string Server::Metrics() {
  PromText out;
  MetricsSources m;
  if (otlp_http_ != nullptr) {
    m.receivers.push_back({"otlp_http", &otlp_http_->stats(), &otlp_http_->http_stats()});
  }
  if (otlp_grpc_ != nullptr) m.receivers.push_back({"otlp_grpc", &otlp_grpc_->stats(), nullptr});
  if (zipkin_ != nullptr) {
    m.receivers.push_back({"zipkin", &zipkin_->stats(), &zipkin_->http_stats()});
  }
  m.filter = &filter_->stats();
  m.head_sampler = head_sampler_.get();
  m.tail_sampler = tail_sampler_.get();
  m.tail_window = tail_window_.get();
  m.budget = &budget_;
  for (const auto& s : sinks_) m.sinks.push_back(s.get());
  m.queue = queue_.get();
  m.dedup = dedup_.get();
  AppendPipelineMetrics(m, out);
  if (read_switch_ != nullptr) read_switch_->AppendMetrics(out);
  if (recent_reader_ != nullptr) recent_reader_->AppendMetrics(out);
  security_.AppendMetrics(out.trailer());
  AppendStorageMetrics(*read_conn_, database_, caps_.ttl_moves, out);
  return out.Render();
}

}  // namespace spanhouse::server
