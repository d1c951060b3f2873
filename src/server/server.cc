#include "server/server.h"

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "codec/json_writer.h"
#include "common/clock.h"
#include "query/jaeger_json.h"
#include "server/debug_endpoints.h"
#include "server/metrics.h"
#include "sink/observed_sink.h"
#include "sink/owned_sink.h"
#include "storage/clickhouse/cluster_schema.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/replica_set.h"
#include "storage/clickhouse/trace_copy.h"
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
  SH_RETURN_IF_ERROR(s->MakeQueryApi());
  s->MakeReceivers();
  *out = std::move(s);
  return Status::Ok();
}

Server::~Server() {
  Stop();
}

Status Server::OpenEngine() {
  if (remote()) return OpenRemote();
  store_.database = std::string(storage::kDatabase);
  SH_RETURN_IF_ERROR(storage::ChdbLibrary::Load(&store_.lib));
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
  store_.engine_args = storage::EngineArgs(engine_config);
  // One connection per writer (the sinks open theirs), one for queries and
  // one for the dependency job: chDB runs one statement at a time per
  // connection, so inserts never wait behind a slow query.
  std::vector<std::unique_ptr<storage::SqlConnection>> conns;
  SH_RETURN_IF_ERROR(OpenConnections(2, &conns));
  store_.read_conn = std::move(conns[0]);
  store_.job_conns.push_back(std::move(conns[1]));
  store_.read_database = store_.database;
  spdlog::info("spans move to the cold volume ({}) after {} s and are deleted after {} s",
               tiering.s3_endpoint.empty() ? tiering.cold_path : tiering.s3_endpoint,
               cfg_.storage.move_after_s, cfg_.storage.retention_s);
  return Status::Ok();
}

Status Server::OpenRemote() {
  store_.database = cfg_.clickhouse.database;
  store_.shards = ClickHouseShards(cfg_.clickhouse.shards);
  store_.read_database = store_.shards.size() > 1 ? store_.database + "_cluster" : store_.database;
  // Like the embedded engine: queries and the dependency job on connections
  // of their own, so neither waits behind an insert.
  std::vector<std::unique_ptr<storage::SqlConnection>> conns;
  SH_RETURN_IF_ERROR(OpenConnections(1, &conns));
  store_.read_conn = std::move(conns[0]);
  for (size_t s = 0; s < store_.shards.size(); ++s) {
    conns.clear();
    SH_RETURN_IF_ERROR(OpenConnections(1, &conns, s));
    store_.job_conns.push_back(std::move(conns[0]));
  }
  spdlog::info("ClickHouse {} at {} ({} shard(s)), database {}",
               static_cast<storage::ReplicaSet&>(*store_.read_conn).version(),
               cfg_.clickhouse.shards, store_.shards.size(), store_.database);
  return Status::Ok();
}

Status Server::OpenQueue() {
  pipeline_.filter = std::make_unique<pipeline::SpanFilter>(FilterLimitsOf(cfg_));
  pipeline::HeadSamplingOptions head;
  head.probability = cfg_.sampling.head.probability;
  ParseServiceProbabilities(cfg_.sampling.head.services, &head.services);  // validated
  auto sampler = std::make_unique<pipeline::HeadSampler>(std::move(head));
  if (sampler->active()) {
    pipeline_.head_sampler = std::move(sampler);
    pipeline_.filter->set_sampler(pipeline_.head_sampler.get());
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
    pipeline_.tail_sampler =
        std::make_unique<pipeline::TailSampler>(tail, std::move(policies), &pipeline_.budget);
    pipeline_.filter->set_tail(pipeline_.tail_sampler.get());
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
  SH_RETURN_IF_ERROR(pipeline::durable::DurableQueue::Open(
      d, pipeline_.budget, pipeline_.filter.get(), &pipeline_.queue));
  if (cfg_.dedup.enabled) {
    pipeline::DedupOptions o;
    o.window_s = static_cast<uint32_t>(cfg_.dedup.window_s);
    o.max_bytes = cfg_.dedup.max_bytes;
    o.dir = std::filesystem::absolute(DedupDir(cfg_)).lexically_normal().string();
    const uint64_t now = WallClockNs();
    SH_RETURN_IF_ERROR(pipeline::DedupIndex::Open(o, now, &pipeline_.dedup));
    // The queue's records are stored or will be (the replay); their keys
    // are in the files unless the process ended between a record's sync and
    // the keys' write, or its sync failed after the record reached the disk.
    // Noted as the replay at start decodes them (once), before the
    // receivers open.
    pipeline_.queue->set_replay_observer(
        [dedup = pipeline_.dedup.get(), now](const SpanBatch& b) { dedup->Note(b, now); });
  }
  if (pipeline_.tail_sampler != nullptr) {
    writing_.tail_window =
        std::make_unique<pipeline::TailWindow>(*pipeline_.tail_sampler, *pipeline_.queue);
    pipeline_.queue->set_tail_window(writing_.tail_window.get());
  }
  return Status::Ok();
}

Status Server::EnsureStore() {
  if (remote()) return EnsureRemoteStore();
  SH_RETURN_IF_ERROR(EnsureDatabase(store_.database, "chdb", &store_.caps));
  if (cfg_.secondary.type == "chdb") {
    storage::Capabilities caps;
    SH_RETURN_IF_ERROR(EnsureDatabase(cfg_.secondary.database, SecondarySinkName(cfg_), &caps));
  }
  SH_RETURN_IF_ERROR(storage::EnsureTraceCopy(*store_.read_conn, store_.caps, store_.database,
                                              cfg_.storage.trace_copy_s, &store_.copy_since_s));
  spdlog::info("embedded ClickHouse {}.{} ready in {}/clickhouse", store_.caps.major,
               store_.caps.minor, dir_);
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
  if (pipeline_.queue->durable()) {
    // A copying upgrade starts the tables' deduplication history afresh:
    // the sink's sealed, unfinished blocks go into the old tables first.
    schema.before_copy = [this, database, sink](const storage::Capabilities& c) -> Status {
      SH_RETURN_IF_ERROR(storage::EnableInsertDeduplication(
          *store_.read_conn, c, storage::kDeduplicationWindow, database));
      SinkContext ctx = SinkContextOf();
      ctx.caps = c;
      std::unique_ptr<sink::Sink> upgrade;
      SinkSpec spec = Spec("chdb", sink, database);
      spec.writers = 1;
      spec.spool_dir = dir_ + "/spool-upgrade";
      SH_RETURN_IF_ERROR(MakeSink(spec, ctx, &upgrade));
      return pipeline_.queue->ReplaySealedBlocks(*upgrade);
    };
  }
  SH_RETURN_IF_ERROR(storage::EnsureSchema(*store_.read_conn, caps, schema));
  if (!pipeline_.queue->durable()) return Status::Ok();
  return storage::EnableInsertDeduplication(*store_.read_conn, *caps, storage::kDeduplicationWindow,
                                            database);
}

Status Server::WaitForRemoteSchema(bool* taken_over) {
  store_.caps = storage::Capabilities::FromVersion(
      static_cast<storage::ReplicaSet&>(*store_.read_conn).version());
  std::function<bool()> take_over;
  if (store_.lease != nullptr) take_over = [this] { return store_.lease->runner(); };
  SH_RETURN_IF_ERROR(storage::WaitForClusterSchema(
      store_.job_conns, store_.database, std::chrono::minutes(10), take_over, taken_over));
  if (taken_over != nullptr && *taken_over) {
    spdlog::info("job lease: this node runs the jobs now, before the schema was made: making it");
    return Status::Ok();
  }
  spdlog::info("ClickHouse {}.{}: schema {} found in database {}", store_.caps.major,
               store_.caps.minor, storage::kSchemaVersion, store_.database);
  return Status::Ok();
}

namespace {

// node.id, or the one kept in the data directory (made at the first start).
Status NodeIdOf(const Config& cfg, const std::string& dir, std::string* out) {
  if (!cfg.node.id.empty()) {
    *out = cfg.node.id;
    return Status::Ok();
  }
  const std::filesystem::path path = std::filesystem::path(dir) / "node_id";
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[80] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    std::string id(buf, n);
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    if (!storage::ValidNodeId(id)) {
      return Status::Invalid(fmt::format(
          "{}: '{}' is not a node id (1 to 64 letters, digits, '.', '_' or '-'); fix or remove "
          "it, or set node.id",
          path.string(), id));
    }
    *out = id;
    return Status::Ok();
  }
  std::random_device rd;
  const std::string id = fmt::format("node-{:08x}{:08x}", rd(), rd());
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr || std::fprintf(f, "%s\n", id.c_str()) < 0 || std::fclose(f) != 0) {
    return Status::Internal(fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Internal(fmt::format("cannot write {}: {}", path.string(), ec.message()));
  *out = id;
  return Status::Ok();
}

}  // namespace

Status Server::StartJobLease() {
  storage::JobLeaseOptions o;
  SH_RETURN_IF_ERROR(NodeIdOf(cfg_, dir_, &o.node_id));
  o.database = store_.database;
  o.lease = std::chrono::seconds(cfg_.clickhouse.job_lease_s);
  // The table is on the first shard, the one place every node reads; with
  // replicas there, replicated between them like the other tables.
  const std::vector<std::string>& first = store_.shards.front();
  const bool replicated = first.size() > 1;
  // A replica's copy of the heartbeats may lag: a registration waits for
  // that too (one heartbeat interval) before it counts.
  o.settle_s = 3 + (replicated ? static_cast<uint32_t>(cfg_.clickhouse.job_lease_s / 3) : 0);
  size_t made = 0;
  std::string errors;
  for (const std::string& url : first) {
    std::unique_ptr<storage::RemoteConnection> c;
    Status st = storage::RemoteConnection::Open(RemoteOptionsOf(cfg_, url), &c);
    if (st.code() == StatusCode::kUnavailable) {
      spdlog::warn("job lease: ClickHouse {} unreachable at start: {}", url, st.message());
      errors += (errors.empty() ? "" : "; ") + st.message();
      continue;
    }
    SH_RETURN_IF_ERROR(st);
    // Nodes starting together make it together: IF NOT EXISTS is not atomic
    // on older servers, so a lost race is tried again.
    for (int attempt = 1;; ++attempt) {
      st = c->Query(fmt::format("CREATE DATABASE IF NOT EXISTS {}", store_.database), "");
      if (st.ok()) st = c->Query(storage::JobLeaseDdl(store_.database, replicated), "");
      if (st.ok() || attempt == 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    if (!st.ok()) {
      return {st.code(), fmt::format("job lease: ClickHouse {}: {}", url, st.message())};
    }
    ++made;
  }
  if (made == 0) {
    return Status::Unavailable(
        fmt::format("job lease: no replica of the first shard reachable: {}", errors));
  }
  std::vector<std::unique_ptr<storage::SqlConnection>> conns;
  SH_RETURN_IF_ERROR(OpenConnections(1, &conns, 0));
  spdlog::info("job lease: node {} registering in {}.job_lease (lease {} s)", o.node_id,
               store_.database, o.lease.count());
  store_.lease = std::make_unique<storage::JobLease>(std::move(conns[0]), o);
  store_.lease->Start();
  // The schema is the runner's to make: the start waits for the first
  // decision (a few seconds: the settle time).
  const std::chrono::seconds wait = std::chrono::seconds(60) + 4 * o.lease;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!store_.lease->decided()) {
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string error = store_.lease->last_error();
      return Status::Unavailable(fmt::format(
          "job lease: no decision on which node runs the jobs after {} s: {}", wait.count(),
          error.empty() ? "registrations kept taking over a second to write" : error));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Ok();
}

bool Server::JobRunner() const {
  if (!remote()) return true;
  return store_.lease != nullptr && store_.lease->runner();
}

Status Server::EnsureRemoteStore() {
  if (!cfg_.clickhouse.run_jobs) return WaitForRemoteSchema();
  SH_RETURN_IF_ERROR(StartJobLease());
  if (!store_.lease->runner()) {
    bool taken_over = false;
    SH_RETURN_IF_ERROR(WaitForRemoteSchema(&taken_over));
    if (!taken_over) return Status::Ok();
  }
  const bool one_server = store_.shards.size() == 1 && store_.shards[0].size() == 1;
  if (one_server) {
    SH_RETURN_IF_ERROR(EnsureDatabase(store_.database, "clickhouse", &store_.caps));
    spdlog::info("ClickHouse {}.{}: schema {} ready in database {}", store_.caps.major,
                 store_.caps.minor, storage::kSchemaVersion, store_.database);
    return Status::Ok();
  }
  storage::ClusterSchemaOptions o;
  for (const auto& shard : store_.shards) {
    auto& replicas = o.shards.emplace_back();
    for (const std::string& url : shard) replicas.push_back(RemoteOptionsOf(cfg_, url));
  }
  o.cluster = cfg_.clickhouse.cluster;
  o.database = store_.database;
  o.read_database = store_.read_database;
  o.metrics_retention_days = static_cast<uint32_t>(cfg_.metrics.retention_days);
  o.retention_s = cfg_.storage.retention_s;
  return storage::EnsureClusterSchema(o, &store_.caps);
}

Status Server::OpenConnections(size_t n, std::vector<std::unique_ptr<storage::SqlConnection>>* out,
                               size_t shard) {
  if (remote()) {
    std::vector<storage::RemoteOptions> replicas;
    for (const std::string& url : store_.shards.at(shard)) {
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
    SH_RETURN_IF_ERROR(
        storage::ChdbConnection::Open(store_.lib, dir_ + "/clickhouse", store_.engine_args, &c));
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

SinkContext Server::SinkContextOf() {
  SinkContext ctx;
  ctx.cfg = &cfg_;
  ctx.dir = dir_;
  ctx.caps = store_.caps;
  ctx.connect = [this](size_t n, size_t shard,
                       std::vector<std::unique_ptr<storage::SqlConnection>>* out) {
    return OpenConnections(n, out, shard);
  };
  ctx.opensearch = store_.opensearch;
  return ctx;
}

Status Server::OpenPeers() {
  std::vector<peers::PeerNode> nodes;
  std::string why;
  if (!peers::ParsePeerNodes(cfg_.peers.nodes, &nodes, &why)) {
    return Status::Invalid("config key 'peers.nodes': " + why);
  }
  const auto self = std::find_if(nodes.begin(), nodes.end(),
                                 [&](const peers::PeerNode& n) { return n.name == cfg_.node.id; });
  if (self == nodes.end()) return Status::Invalid("config key 'node.id': not in peers.nodes");
  const auto index = static_cast<size_t>(self - nodes.begin());
  writing_.ring = std::make_unique<peers::PeerRing>(std::move(nodes), index);
  peers::HealthOptions h;
  h.probe_interval = std::chrono::milliseconds(cfg_.peers.probe_ms);
  h.down_after = std::chrono::seconds(cfg_.peers.down_after_s);
  writing_.health = std::make_unique<peers::PeerHealth>(*writing_.ring, h);
  writing_.health->Start();
  spdlog::info(
      "peers: node {} of {}; the traces this node owns are stored here, the others' go "
      "to their owners",
      cfg_.node.id, writing_.ring->size());
  return Status::Ok();
}

Status Server::HandOff(std::unique_ptr<SpanBatch> batch, size_t peer) {
  if (pipeline_.handoff == nullptr) return Status::Unavailable("the intake is not open yet");
  const uint64_t view = writing_.ring->View() & ~(uint64_t{1} << peer);
  return pipeline_.handoff->Redirect(std::move(batch), view);
}

Status Server::MakeSinks() {
  if (SecondaryIsSearchStore(cfg_)) SH_RETURN_IF_ERROR(OpenOpenSearch());
  if (!cfg_.peers.nodes.empty()) SH_RETURN_IF_ERROR(OpenPeers());
  SinkContext ctx = SinkContextOf();
  ctx.ring = writing_.ring.get();
  if (const peers::PeerRing* ring = ctx.ring; ring != nullptr) {
    ctx.decide_here = [this](std::unique_ptr<SpanBatch> b, size_t peer) {
      return HandOff(std::move(b), peer);
    };
    // Each trace sampled on its owner, whole: the other nodes forward its spans at once.
    if (pipeline_.tail_sampler != nullptr) {
      pipeline_.tail_sampler->set_owns(
          [ring](const TraceId& t, uint64_t view) { return ring->OwnedHere(t, view); });
      // A rate holds for the system: each owner keeps its share of it.
      pipeline_.tail_sampler->policies().set_rate_share(
          [ring] { return 1.0 / static_cast<double>(ring->UpCount()); });
    }
  }
  std::vector<bool> local;  // per sink: a store here, not a peer
  for (SinkSpec& spec : ServeSinks(cfg_, remote() ? store_.shards.size() : 1)) {
    if (spec.kind == "chdb" || spec.kind == "clickhouse") {
      writing_.faults.push_back({spec.name, std::make_unique<storage::SinkFaults>()});
      spec.faults = writing_.faults.back().faults.get();
    }
    std::unique_ptr<sink::Sink> made;
    SH_RETURN_IF_ERROR(MakeSink(spec, ctx, &made));
    local.push_back(spec.kind != "peer");
    writing_.sinks.push_back(std::move(made));
  }
  if (SecondaryIsSearchStore(cfg_)) {
    spdlog::info("dual-write: every accepted span also goes to {} {} (index prefix '{}'{})",
                 cfg_.secondary.type, cfg_.opensearch.urls, cfg_.opensearch.index_prefix,
                 cfg_.opensearch.use_aliases ? ", read and write aliases" : "");
  }
  if (cfg_.query.recent_max_bytes != 0 && cfg_.writer.sink != "null") {
    // At most a quarter of the budget: the rest is for requests in flight.
    query::RecentTracesOptions o{
        .max_bytes = std::min<size_t>(cfg_.query.recent_max_bytes, cfg_.queue.max_bytes / 4),
        .max_age = std::chrono::seconds(
            // Nothing is answered from memory past the retention that deleted it from the store.
            std::min(cfg_.query.recent_max_age_s, cfg_.storage.retention_s)),
        .log = pipeline_.queue->log(),
        .filter = pipeline_.queue->filter(),
        .disk_max_bytes = cfg_.query.recent_disk_bytes};
    writing_.recent = std::make_unique<query::RecentTraces>(o, &pipeline_.budget, WallClockNs());
    // The primary sees every span (on a cluster, each shard's sink is handed
    // all of them and keeps its own).
    writing_.sinks.front() =
        std::make_unique<sink::ObservedSink>(std::move(writing_.sinks.front()), *writing_.recent);
  }
  for (size_t i = 0; writing_.ring != nullptr && i < writing_.sinks.size(); ++i) {
    if (!local[i]) continue;
    // A store here (and the recent index in front of the primary) keeps the
    // traces this node owns; the peer sinks take the rest.
    const peers::PeerRing* ring = writing_.ring.get();
    writing_.sinks[i] = std::make_unique<sink::OwnedSink>(
        std::move(writing_.sinks[i]),
        [ring](const TraceId& t, uint64_t view) { return ring->OwnedHere(t, view); });
  }
  for (size_t i = 0; i < writing_.sinks.size(); ++i) {
    pipeline_.queue->AddSink(*writing_.sinks[i], /*before_tail=*/!local[i]);
  }
  return Status::Ok();
}

Status Server::OpenOpenSearch() {
  if (store_.opensearch != nullptr || cfg_.opensearch.urls.empty()) return Status::Ok();
  storage::opensearch::OpenSearchOptions o;
  o.urls = OpenSearchUrls(cfg_.opensearch.urls);
  o.user = cfg_.opensearch.user;
  o.password = cfg_.opensearch.password;
  o.api_key = cfg_.opensearch.api_key;
  o.tls_ca_file = cfg_.opensearch.tls_ca_file;
  o.tls_cert_file = cfg_.opensearch.tls_cert;
  o.tls_key_file = cfg_.opensearch.tls_key;
  o.timeout = std::chrono::seconds(cfg_.opensearch.timeout_s);
  std::unique_ptr<storage::opensearch::OpenSearchClient> c;
  SH_RETURN_IF_ERROR(storage::opensearch::OpenSearchClient::Create(o, &c));
  // The engine, checked now when the cluster answers: an unsupported one is
  // a start-up error, not a stream of failed writes. One that does not
  // answer yet is not an error (the sink retries; the queue holds its spans).
  storage::opensearch::EngineInfo engine;
  if (Status st = c->DetectEngine(&engine); !st.ok()) {
    if (st.code() != StatusCode::kUnavailable) {
      return Status::Invalid("config key 'opensearch.urls': " + st.message());
    }
    spdlog::warn("{} {}: {}; its engine is not checked", SearchStoreName(cfg_),
                 cfg_.opensearch.urls, st.message());
  } else {
    const std::string name(storage::opensearch::EngineName(engine.engine));
    spdlog::info("{} {}: {} {}", SearchStoreName(cfg_), cfg_.opensearch.urls, name, engine.version);
    if (storage::opensearch::EngineId(engine.engine) != SearchStoreName(cfg_)) {
      spdlog::warn("{} is named {} in the configuration, but the cluster is {} {}",
                   cfg_.opensearch.urls, SearchStoreName(cfg_), name, engine.version);
    }
  }
  store_.opensearch = std::move(c);
  return Status::Ok();
}

void Server::Reload(const Config& fresh) {
  const std::string read_from = ReadSourceName(*reading_.read_switch, fresh.query.read_from);
  if (read_from != reading_.read_switch->current()) {
    if (Status st = reading_.read_switch->SwitchTo(read_from); !st.ok()) {
      spdlog::error("reload: query.read_from: {} (reads stay on {})", st.message(),
                    reading_.read_switch->current());
    }
  }
  // Everything else is read once, at start (fill_gaps' "auto" follows the
  // secondary sink running, not the file's).
  Config applied = cfg_;
  applied.query.read_from = fresh.query.read_from;
  applied.query.fallback = fresh.query.fallback;
  applied.query.fill_gaps = fresh.query.fill_gaps;
  reading_.read_switch->set_fallback(applied.query.fallback);
  reading_.read_switch->set_fill_gaps(FillGaps(applied));
  const std::string before = ToYaml(applied, Secrets::kShow);
  const std::string after = ToYaml(fresh, Secrets::kShow);
  if (before != after) {
    spdlog::warn(
        "reload: applied query.read_from ({}), query.fallback and query.fill_gaps; other "
        "changed keys take effect at the next start",
        reading_.read_switch->current());
  } else {
    spdlog::info("reload: reads from {}, fallback {}, fill gaps {}",
                 reading_.read_switch->current(), fresh.query.fallback ? "on" : "off",
                 reading_.read_switch->fill_gaps() ? "on" : "off");
  }
}

Status Server::MakeQueryApi() {
  storage::DependencyJobOptions job;
  job.interval = std::chrono::seconds(cfg_.dependencies.interval_s);
  job.lag = std::chrono::seconds(cfg_.dependencies.lag_s);
  job.database = store_.database;
  // With several spanhouse nodes on one cluster, the holder of the job
  // lease runs it; the others' jobs skip their turns.
  if (store_.lease != nullptr) job.may_run = [this] { return store_.lease->runner(); };
  if (!remote() || cfg_.clickhouse.run_jobs) {
    for (auto& conn : store_.job_conns) {
      writing_.dependency_jobs.push_back(std::make_unique<storage::DependencyJob>(*conn, job));
    }
  }
  reading_.reader = std::make_unique<storage::ChdbSpanReader>(
      *store_.read_conn, store_.caps,
      storage::ReaderLimits{.max_execution_s = static_cast<uint32_t>(cfg_.query.timeout_s),
                            .max_spans = cfg_.query.max_trace_spans,
                            .max_rows = cfg_.query.max_rows},
      storage::StorageLayout{}, store_.read_database, store_.read_database != store_.database);
  if (!remote() && cfg_.storage.trace_copy_s > 0 && store_.read_database == store_.database) {
    reading_.reader->set_trace_copy(store_.copy_since_s);
  }
  if (store_.opensearch != nullptr) {
    storage::opensearch::ReaderOptions o;
    o.layout = SearchStoreLayout(cfg_);
    o.max_spans = cfg_.query.max_trace_spans;
    o.max_rows = cfg_.query.max_rows;
    o.timeout = std::chrono::seconds(cfg_.query.timeout_s);
    reading_.opensearch_reader =
        std::make_unique<storage::opensearch::OpenSearchReader>(store_.opensearch, o);
  }
  // Reads: the primary's store, and OpenSearch when configured; the query
  // API reads through the switch between them.
  std::vector<query::ReadSource> sources{{"clickhouse", reading_.reader.get()}};
  if (reading_.opensearch_reader != nullptr)
    sources.push_back({SearchStoreName(cfg_), reading_.opensearch_reader.get()});
  size_t current = 0;
  if (cfg_.query.read_from != "clickhouse" && sources.size() > 1) current = 1;
  reading_.read_switch = std::make_unique<query::ReadSwitch>(
      std::move(sources), current, cfg_.query.fallback,
      std::chrono::milliseconds(cfg_.query.fallback_after_ms), FillGaps(cfg_));
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
    if (!info.completed_from.empty()) {
      resp.headers.emplace_back(
          "X-Spanhouse-Read-Completed",
          info.completed_from + "; spans=" + std::to_string(info.completed_spans));
    }
    if (!info.not_completed.empty()) {
      resp.headers.emplace_back("X-Spanhouse-Read-Not-Completed", info.not_completed);
    }
    if (std::string missing = query::PeerReader::TakeMissing(); !missing.empty()) {
      resp.headers.emplace_back("X-Spanhouse-Peers-Missing", std::move(missing));
    }
  };
  hooks.metrics = [this] { return Metrics(); };
  hooks.sampling = [this] { return SamplingJson(); };
  hooks.not_ready = [this] { return NotReady(); };
  if (writing_.health != nullptr) {
    // A peer down does not make this node unready: its spans wait, or go to the next owner.
    hooks.ready_detail = [this] { return "peers: " + writing_.health->Summary(); };
  }
  if (cfg_.debug.fault_injection) {
    spdlog::warn("fault injection is enabled (debug.fault_injection): POST /debug/sink");
    hooks.debug = [this](const net::HttpRequest& req, net::HttpResponse& resp) {
      std::vector<DebugSink> sinks;
      for (const auto& f : writing_.faults) sinks.push_back({f.sink, f.faults.get()});
      HandleDebug(req, resp, DebugStore{store_.read_conn.get(), store_.read_database, store_.caps},
                  sinks);
    };
  }
  hooks.ui = ui::ServeUi;
  query::SpanReader* api_reader = reading_.read_switch.get();
  if (writing_.recent != nullptr) {
    // The store is this process's alone when it is embedded and nothing
    // else answers reads (imports are shown to the index too).
    query::RecentReaderOptions o{.sole_writer = !remote() &&
                                                reading_.opensearch_reader == nullptr &&
                                                store_.read_database == store_.database};
    reading_.recent_reader =
        std::make_unique<query::RecentReader>(*reading_.read_switch, *writing_.recent, o);
    api_reader = reading_.recent_reader.get();
  }
  if (const peers::PeerRing* ring = writing_.ring.get(); ring != nullptr) {
    // Fresh traces from every node: lookups and searches ask the peers too;
    // the peers ask this node's own reader, never on to the others.
    query::PeerReaderOptions o;
    for (size_t i = 0; i < ring->size(); ++i) {
      o.nodes.push_back({ring->node(i).name, ring->node(i).query});
    }
    o.self = ring->self();
    o.up = [ring](size_t i) { return ring->Up(i); };
    o.shared_store = remote();
    o.timeout = std::chrono::milliseconds(cfg_.peers.read_timeout_ms);
    o.bearer_token = FirstToken(cfg_.auth.query_tokens);
    o.tls_ca_file = cfg_.peers.tls_ca_file;
    SH_RETURN_IF_ERROR(query::PeerReader::Make(*api_reader, std::move(o), &reading_.peer_reader));
  }
  // What this node alone holds, for its peers (and for people asking).
  reading_.peer_endpoint =
      std::make_unique<query::PeerEndpoint>(*api_reader, writing_.recent.get());
  hooks.peer = [this](std::string_view what, const query::QueryString& q, net::HttpResponse& resp) {
    reading_.peer_endpoint->Handle(what, q, resp);
  };
  if (reading_.peer_reader != nullptr) api_reader = reading_.peer_reader.get();
  query::QueryApiOptions api{cfg_.query.listen, 2, security_.query->Authorizer(),
                             security_.query_tls};
  if (reading_.peer_reader != nullptr) api.trace_workers = 4;
  api.import_workers = 8;  // a parallel backfill's pages (--parallel, 4 by default)
  reading_.query_api = std::make_unique<query::QueryApi>(api, *api_reader, std::move(hooks));
  return Status::Ok();
}

void Server::MakeReceivers() {
  receivers::IntakeOptions intake;
  intake.max_body_bytes = cfg_.otlp_http.max_body_bytes;
  intake.max_spans_per_request = cfg_.otlp_http.max_spans_per_request;
  intake.memory_wait = std::chrono::milliseconds(cfg_.queue.wait_ms);
  intake.dedup = pipeline_.dedup.get();
  if (const peers::PeerRing* ring = writing_.ring.get(); ring != nullptr) {
    intake.peer_view = [ring] { return ring->View(); };
    pipeline_.handoff = std::make_unique<receivers::Intake>(
        intake, *pipeline_.queue, std::make_shared<receivers::IntakeStats>());
  }
  // Every receiver: the same limits, guard, TLS and intake (each its own
  // counters); an empty address turns Zipkin or OTLP/gRPC off.
  receivers::HttpListenerOptions http{.address = cfg_.otlp_http.listen,
                                      .threads = cfg_.otlp_http.threads,
                                      .authorize = security_.ingest->Authorizer(),
                                      .tls = security_.ingest_tls};
  receivers_.otlp_http =
      std::make_unique<receivers::OtlpHttpReceiver>(http, intake, *pipeline_.queue);
  if (!cfg_.zipkin.listen.empty()) {
    http.address = cfg_.zipkin.listen;
    receivers_.zipkin = std::make_unique<receivers::ZipkinReceiver>(http, intake, *pipeline_.queue);
  }
  if (!cfg_.otlp_grpc.listen.empty()) {
    receivers::OtlpGrpcOptions g;
    g.address = cfg_.otlp_grpc.listen;
    g.intake = intake;
    g.authorize = security_.ingest->Authorizer();
    g.tls_cert_pem = security_.ingest_cert_pem;
    g.tls_key_pem = security_.ingest_key_pem;
    receivers_.otlp_grpc = std::make_unique<receivers::OtlpGrpcReceiver>(g, *pipeline_.queue);
  }
}

Status Server::Start() {
  for (auto& s : writing_.sinks) SH_RETURN_IF_ERROR(s->Start());
  // What the last process accepted and did not store, before anything new.
  pipeline_.queue->Start();
  for (auto& job : writing_.dependency_jobs) job->Start();
  SH_RETURN_IF_ERROR(reading_.query_api->Start());
  SH_RETURN_IF_ERROR(receivers_.otlp_http->Start());
  if (receivers_.otlp_grpc != nullptr) SH_RETURN_IF_ERROR(receivers_.otlp_grpc->Start());
  if (receivers_.zipkin != nullptr) SH_RETURN_IF_ERROR(receivers_.zipkin->Start());
  spdlog::info("{}", Listening());
  ready_ = true;
  spdlog::info("spanhouse ready");
  return Status::Ok();
}

std::string Server::Listening() const {
  const std::string token = security_.ingest->enabled() ? ", token required" : "";
  std::string sinks;
  for (const auto& s : writing_.sinks) sinks += (sinks.empty() ? "" : ", ") + s->name();
  std::string out = fmt::format(
      "OTLP/HTTP on {} (port {}, {}{}), query API on {} (port {}, {}{}), sinks: {} ({} "
      "writer(s))",
      cfg_.otlp_http.listen, receivers_.otlp_http->port(), security_.ingest_tls ? "https" : "http",
      token, cfg_.query.listen, reading_.query_api->port(), security_.query_tls ? "https" : "http",
      security_.query->enabled() ? ", token required" : "", sinks, cfg_.writer.threads);
  if (receivers_.otlp_grpc != nullptr) {
    out += fmt::format("; OTLP/gRPC on {} (port {}, {}{})", cfg_.otlp_grpc.listen,
                       receivers_.otlp_grpc->port(),
                       security_.ingest_cert_pem.empty() ? "plaintext" : "TLS", token);
  }
  if (receivers_.zipkin != nullptr) {
    out += fmt::format("; Zipkin v2 on {} (port {}, {}{})", cfg_.zipkin.listen,
                       receivers_.zipkin->port(), security_.ingest_tls ? "https" : "http", token);
  }
  return out;
}

void Server::Receivers::Stop() {
  if (otlp_http != nullptr) otlp_http->Stop();
  if (otlp_grpc != nullptr) otlp_grpc->Stop();
  if (zipkin != nullptr) zipkin->Stop();
}

void Server::Store::Close() {
  // Released before the connections close: the next node takes over now.
  if (lease != nullptr) lease->Stop();
  for (auto& conn : job_conns) conn->Close();
  if (read_conn != nullptr) read_conn->Close();
}

int Server::Stop() {
  if (stopped_) return 0;
  stopped_ = true;
  stopping_ = true;
  // The stages in the data's direction: intake first, then what is queued
  // is written, then reads and jobs end, then the log and the stores close.
  receivers_.Stop();
  reading_.import_claims.Abort();  // imports waiting answer 503 (and new ones are refused)
  // Traces still open are decided with what arrived; their spans go on.
  if (writing_.tail_window != nullptr) writing_.tail_window->Flush();
  if (pipeline_.queue != nullptr) pipeline_.queue->StopBacklogs();
  uint64_t written = 0;
  uint64_t lost = 0;
  uint64_t left = 0;
  for (auto& s : writing_.sinks) {
    s->Drain();
    written += s->stats().rows_written.load();
    lost += s->stats().rows_lost.load();
    left += s->stats().rows_left_queued.load();
  }
  if (reading_.query_api != nullptr) reading_.query_api->Stop();
  for (auto& job : writing_.dependency_jobs) job->Stop();
  if (pipeline_.queue != nullptr) pipeline_.queue->Close();
  store_.Close();
  if (!writing_.sinks.empty()) {
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
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("data").BeginObject();
  w.Key("head").BeginObject().Key("probability").Double(cfg_.sampling.head.probability);
  w.Key("services").BeginObject();
  std::vector<std::pair<std::string, double>> services;
  ParseServiceProbabilities(cfg_.sampling.head.services, &services);
  for (const auto& [service, probability] : services) w.Key(service).Double(probability);
  w.EndObject().EndObject();
  const auto share = [](uint64_t kept, uint64_t dropped) {
    return kept + dropped == 0 ? -1.0
                               : static_cast<double>(kept) / static_cast<double>(kept + dropped);
  };
  const auto share_value = [&w](double s) {  // null: nothing decided yet
    if (s < 0) {
      w.Null();
    } else {
      w.Double(s);
    }
  };
  uint64_t kept = 0, dropped = 0, kept_spans = 0, dropped_spans = 0;
  double kept_share = 1;
  if (pipeline_.head_sampler != nullptr) {
    const pipeline::HeadSamplingStats& st = pipeline_.head_sampler->stats();
    kept = st.kept_traces.load();
    dropped = st.dropped_traces.load();
    kept_spans = st.kept_spans.load();
    dropped_spans = st.dropped_spans.load();
    kept_share = share(kept, dropped);
  }
  w.Key("tail");
  if (pipeline_.tail_sampler == nullptr) {
    w.Null();
  } else {
    const pipeline::TailPolicies& p = pipeline_.tail_sampler->policies();
    w.BeginObject().Key("policies").String(cfg_.sampling.tail.policies);
    w.Key("decisionWaitMs").Uint(cfg_.sampling.tail.decision_wait_ms);
    w.Key("kept").BeginObject();
    uint64_t tail_kept = 0;
    for (size_t k = 0; k < p.policies().size(); ++k) {
      w.Key(p.policies()[k].name).Uint(p.kept(k));
      tail_kept += p.kept(k);
    }
    w.EndObject();
    const double tail_share = share(tail_kept, p.dropped());
    w.Key("dropped").Uint(p.dropped()).Key("keptShare");
    share_value(tail_share);
    w.EndObject();
    if (pipeline_.head_sampler == nullptr) {
      kept = tail_kept;
      dropped = p.dropped();
      kept_spans = pipeline_.tail_sampler->stats().kept_spans.load();
      dropped_spans = pipeline_.tail_sampler->stats().dropped_spans.load();
    }
    kept_share = kept_share < 0 || tail_share < 0 ? -1 : kept_share * tail_share;
  }
  w.Key("traces").BeginObject().Key("kept").Uint(kept).Key("dropped").Uint(dropped).EndObject();
  w.Key("spans").BeginObject();
  w.Key("kept").Uint(kept_spans).Key("dropped").Uint(dropped_spans).EndObject();
  w.Key("keptShare");
  share_value(kept_share);
  w.Key("metricsCountEverySpan").Bool(true);
  w.EndObject().EndObject();
  return out;
}

std::string Server::Metrics() {
  PromText out;
  MetricsSources m;
  if (receivers_.otlp_http != nullptr) {
    m.receivers.push_back(
        {"otlp_http", &receivers_.otlp_http->stats(), &receivers_.otlp_http->http_stats()});
  }
  if (receivers_.otlp_grpc != nullptr)
    m.receivers.push_back({"otlp_grpc", &receivers_.otlp_grpc->stats(), nullptr});
  if (receivers_.zipkin != nullptr) {
    m.receivers.push_back(
        {"zipkin", &receivers_.zipkin->stats(), &receivers_.zipkin->http_stats()});
  }
  m.filter = &pipeline_.filter->stats();
  m.head_sampler = pipeline_.head_sampler.get();
  m.tail_sampler = pipeline_.tail_sampler.get();
  m.tail_window = writing_.tail_window.get();
  m.budget = &pipeline_.budget;
  for (const auto& s : writing_.sinks) m.sinks.push_back(s.get());
  m.queue = pipeline_.queue.get();
  m.dedup = pipeline_.dedup.get();
  AppendPipelineMetrics(m, out);
  if (writing_.health != nullptr) writing_.health->AppendMetrics(out);
  if (reading_.read_switch != nullptr) reading_.read_switch->AppendMetrics(out);
  if (reading_.recent_reader != nullptr) reading_.recent_reader->AppendMetrics(out);
  if (reading_.peer_reader != nullptr) reading_.peer_reader->AppendMetrics(out);
  security_.AppendMetrics(out.trailer());
  AppendJobMetrics(out);
  if (cfg_.storage.trace_copy_s > 0 && !remote()) {
    out.Family("spanhouse_trace_copy_reads_total", "counter",
               "Reads of traces by id from the trace copy (storage.trace_copy_s): answered there, "
               "or left to the spans table (a trace it lacks or may hold in part).");
    out.Sample("spanhouse_trace_copy_reads_total", "answer=\"copy\"",
               reading_.reader->copy_answers());
    out.Sample("spanhouse_trace_copy_reads_total", "answer=\"spans\"",
               reading_.reader->copy_misses());
  }
  AppendStorageMetrics(*store_.read_conn, store_.database, store_.caps.ttl_moves, out);
  return out.Render();
}

void Server::AppendJobMetrics(PromText& out) const {
  out.One("spanhouse_job_runner", "gauge",
          "1 when this node runs the schema and dependency jobs: always on the embedded engine; "
          "on a shared ClickHouse, while it holds the job lease.",
          "", JobRunner() ? 1 : 0);
  if (store_.lease != nullptr) {
    const storage::JobLeaseStats& st = store_.lease->stats();
    out.One("spanhouse_job_lease_renewals_total", "counter",
            "Job lease heartbeats written and read back.", "", st.renewals.load());
    out.One("spanhouse_job_lease_failures_total", "counter",
            "Job lease heartbeats that failed (the store unreachable or refusing).", "",
            st.failures.load());
    out.One("spanhouse_job_lease_acquired_total", "counter",
            "Times this node became the job runner.", "", st.acquired.load());
    out.One("spanhouse_job_lease_nodes", "gauge",
            "Live nodes in the job lease at the last heartbeat (run_jobs true).", "",
            st.live_nodes.load());
  }
  uint64_t runs = 0;
  uint64_t errors = 0;
  uint64_t recomputed = 0;
  uint64_t pending = 0;
  for (const auto& job : writing_.dependency_jobs) {
    runs += job->runs();
    errors += job->errors();
    recomputed += job->recomputed_minutes();
    pending += job->pending_minutes();
  }
  out.One("spanhouse_dependency_recomputed_minutes_total", "counter",
          "Minutes whose dependency edges were computed again because spans of them were "
          "imported late (a backfill).",
          "", recomputed);
  out.One("spanhouse_dependency_pending_minutes", "gauge",
          "Minutes waiting to be computed again after an import (they wait until no import has "
          "touched them for dependencies.lag_s).",
          "", pending);
  out.One("spanhouse_dependency_job_runs_total", "counter",
          "Runs of the dependency job on this node (one per shard per interval while it runs "
          "the jobs).",
          "", runs);
  out.One("spanhouse_dependency_job_errors_total", "counter",
          "Runs of the dependency job that failed (the log says why).", "", errors);
}

}  // namespace spanhouse::server
