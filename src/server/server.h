// Everything `spanhouse serve` runs, assembled from the configuration into
// stages in the data's direction (Store, Pipeline, Writing, Reading,
// Receivers below), each owning what it opened: a start that fails half way
// closes what it had opened by the destructors, in reverse. Stopping is
// explicit (Stop), in the data's direction: the listeners first, then the
// sinks write what they hold, then the log and the stores are closed.
//
//   receivers ──> durable queue ──> sink cursors ──> sinks (made by sink_factory.h)
//   query API ──> recent index ──> read switch ──> the stores' readers
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/memory_budget.h"
#include "common/prom_text.h"
#include "common/status.h"
#include "peers/health.h"
#include "peers/ring.h"
#include "pipeline/dedup/dedup_index.h"
#include "pipeline/durable/durable_queue.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/sampling/tail_window.h"
#include "query/peer_reader.h"
#include "query/query_api.h"
#include "query/read_switch.h"
#include "query/recent_reader.h"
#include "query/recent_traces.h"
#include "receivers/otlp_grpc/otlp_grpc_receiver.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "receivers/zipkin/zipkin_receiver.h"
#include "server/config.h"
#include "server/data_dir_lock.h"
#include "server/import_claims.h"
#include "server/listener_security.h"
#include "server/sink_factory.h"
#include "sink/sink.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/job_lease.h"
#include "storage/clickhouse/schema.h"
#include "storage/opensearch/opensearch_client.h"

namespace spanhouse::server {

class Server {
 public:
  // Opens the data directory, the engine, the durable queue and the sinks,
  // and ensures the schema (an upgrade runs here). Nothing listens yet.
  static Status Create(const Config& cfg, std::unique_ptr<Server>* out);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Starts the sinks, replays the durable queue to them, then opens the
  // query API and the receivers. Ready (GET /readyz) once it returns OK.
  Status Start();
  // Applies what may change while running: query.read_from, query.fallback,
  // query.fill_gaps.
  // Other changed keys are logged as needing a restart.
  void Reload(const Config& fresh);
  // Stops intake, lets every sink write what it holds, closes the store.
  // Returns the process's exit code: 0, or 3 if spans were lost.
  int Stop();

 private:
  explicit Server(const Config& cfg) : cfg_(cfg), pipeline_(cfg.queue.max_bytes) {}
  Status OpenEngine();
  // storage.engine clickhouse: the servers of clickhouse.shards.
  Status OpenRemote();
  bool remote() const { return cfg_.storage.engine == "clickhouse"; }
  // The schema on every replica of every shard, and the Distributed tables.
  Status EnsureRemoteStore();
  // Waits until every shard's schema is current (the job runner makes it
  // so); with the job lease, stops waiting when this node becomes the
  // runner (`taken_over`: it then makes the schema itself).
  Status WaitForRemoteSchema(bool* taken_over = nullptr);
  // clickhouse.run_jobs on a server: the lease table, this node's
  // heartbeats, and the first decision (which node runs the jobs).
  Status StartJobLease();
  // Whether this node runs the jobs now (always on the embedded engine).
  bool JobRunner() const;
  Status OpenQueue();
  Status EnsureStore();
  // The schema of one database, the blocks its sink left unfinished written
  // first if an upgrade copies a table.
  Status EnsureDatabase(const std::string& database, const std::string& sink,
                        storage::Capabilities* caps);
  // `n` writer connections: to the embedded engine, or to shard `shard`'s replicas.
  Status OpenConnections(size_t n, std::vector<std::unique_ptr<storage::SqlConnection>>* out,
                         size_t shard = 0);
  // What the sink factory makes sinks with (sink_factory.h).
  SinkContext SinkContextOf();
  // The ring and the health checks of peers.nodes.
  Status OpenPeers();
  // The spans a peer sink could not deliver to node `peer` for peers.down_after_s, handed
  // to their traces' owners among the nodes up without it.
  Status HandOff(std::unique_ptr<SpanBatch> batch, size_t peer);
  Status MakeSinks();
  // The OpenSearch cluster of the opensearch section (made once, shared by
  // its sink and reader).
  Status OpenOpenSearch();
  // /api/admin/...: the read source, and what reconcile and backfill ask
  // of the stores (admin_endpoints.cc).
  void HandleAdmin(const net::HttpRequest& req, net::HttpResponse& resp);
  void ReadSourceEndpoint(const net::HttpRequest& req, net::HttpResponse& resp);
  void SpanCountsEndpoint(const net::HttpRequest& req, net::HttpResponse& resp);
  void SpanIdsEndpoint(const net::HttpRequest& req, net::HttpResponse& resp);
  void DocumentsEndpoint(const net::HttpRequest& req, net::HttpResponse& resp);
  // POST /api/admin/import[?wait=stored]: Jaeger span documents stored in
  // ClickHouse only (those not stored or being stored yet), in the durable
  // queue before the answer (with wait=stored: they and every import before
  // them stored).
  void ImportEndpoint(const net::HttpRequest& req, net::HttpResponse& resp);
  // Appends `batch` (the claim's spans) to the durable queue for the
  // ClickHouse sinks and hands it to them; the claim's flight is advanced as
  // they are durable, then stored.
  Status Import(std::unique_ptr<SpanBatch> batch, const ImportClaims::FlightPtr& flight);
  // The dependency job computes the minutes of imported spans again.
  void NoteImported(const SpanBatch& batch);
  Status MakeQueryApi();
  void MakeReceivers();
  std::string NotReady() const;
  std::string Metrics();
  // The job runner gauge, the lease's and the dependency job's counters.
  void AppendJobMetrics(PromText& out) const;
  std::string SamplingJson() const;
  std::string Listening() const;

  const Config cfg_;
  std::string dir_;  // the data directory, absolute
  ListenerSecurity security_;
  DataDirLock lock_;

  // What the server owns, one struct per stage in the data's direction.
  // Built in this order (Create), stopped in it (Stop), destroyed in
  // reverse: a stage uses only stages declared before it, except the sinks'
  // cursors in the durable queue (Stop ends the queue's backlogs before the
  // sinks drain, and the sinks go before the queue).

  // The stores: connections to ClickHouse (embedded or a cluster) and to
  // OpenSearch.
  struct Store {
    std::shared_ptr<storage::ChdbLibrary> lib;
    std::vector<std::string> engine_args;
    std::unique_ptr<storage::SqlConnection> read_conn;  // queries, schema, /metrics
    // The dependency job's joins: one per shard (a parent and its child
    // span share a trace, so a shard's edges are its own).
    std::vector<std::unique_ptr<storage::SqlConnection>> job_conns;
    // The primary's database (the embedded spanhouse, or clickhouse.database).
    std::string database;
    // Where reads go: database, or on a cluster of several shards the
    // Distributed tables over it ("<database>_cluster").
    std::string read_database;
    uint64_t copy_since_s = 0;  // EnsureTraceCopy's since_s (storage.trace_copy_s)
    std::vector<std::vector<std::string>> shards;  // clickhouse.shards' replica URLs
    storage::Capabilities caps;
    // The OpenSearch cluster of the opensearch section (null: none), shared
    // by its sink and its reader.
    std::shared_ptr<storage::opensearch::OpenSearchClient> opensearch;
    // Which node runs the jobs (null: the embedded engine, or run_jobs
    // false); declared here so it outlives the jobs that ask it.
    std::unique_ptr<storage::JobLease> lease;
    void Close();
  };
  // From an accepted request to the sinks: memory, filter, sampling, dedup,
  // the durable queue.
  struct Pipeline {
    explicit Pipeline(size_t budget_bytes) : budget(budget_bytes) {}
    MemoryBudget budget;
    std::unique_ptr<pipeline::HeadSampler> head_sampler;  // null: sampling.head keeps everything
    std::unique_ptr<pipeline::TailSampler> tail_sampler;  // null: no sampling.tail.policies
    std::unique_ptr<pipeline::SpanFilter> filter;
    std::unique_ptr<pipeline::durable::DurableQueue> queue;
    // The keys of spans accepted lately (null: dedup.enabled false); the
    // receivers drop a retried request's spans by it.
    std::unique_ptr<pipeline::DedupIndex> dedup;
    // Hands on again the spans of a peer down for longer than peers.down_after_s (the
    // peer sinks' decide_here); null without peers.
    std::unique_ptr<receivers::Intake> handoff;
  };
  // Where the spans go: the sinks, what feeds them (the tail window) and
  // what they feed (the recent index, the dependency job).
  struct Writing {
    struct Faults {
      std::string sink;
      std::unique_ptr<storage::SinkFaults> faults;
    };
    std::vector<Faults> faults;  // one per ClickHouse sink, before the sinks that use them
    // Several nodes as one (peers.nodes; null: alone): which node owns a
    // trace, and the other nodes' health that moves it; before the sinks
    // that ask them.
    std::unique_ptr<peers::PeerRing> ring;
    std::unique_ptr<peers::PeerHealth> health;
    // Recent spans in memory (null: query.recent_max_bytes 0), fed by the
    // primary sink (sink::ObservedSink): declared before the sinks, so it
    // outlives the one that refers to it.
    std::unique_ptr<query::RecentTraces> recent;
    std::vector<std::unique_ptr<sink::Sink>> sinks;  // the first is the primary
    // Holds requests for tail sampling; gone before the sinks it delivers to.
    std::unique_ptr<pipeline::TailWindow> tail_window;
    std::vector<std::unique_ptr<storage::DependencyJob>> dependency_jobs;
  };
  // Reads: the stores' readers, the read switch, the recent index in front,
  // the query API (and admin endpoints).
  struct Reading {
    std::unique_ptr<storage::ChdbSpanReader> reader;
    std::unique_ptr<query::SpanReader> opensearch_reader;
    std::unique_ptr<query::ReadSwitch> read_switch;
    std::unique_ptr<query::RecentReader> recent_reader;
    // With peers: the others' recent spans merged in (what the query API reads then),
    // and what this node answers them.
    std::unique_ptr<query::PeerReader> peer_reader;
    std::unique_ptr<query::PeerEndpoint> peer_endpoint;
    ImportClaims import_claims;  // the spans imports in flight are storing
    std::unique_ptr<query::QueryApi> query_api;
  };
  // Intake: the listeners of every protocol.
  struct Receivers {
    std::unique_ptr<receivers::OtlpHttpReceiver> otlp_http;
    std::unique_ptr<receivers::ZipkinReceiver> zipkin;
    std::unique_ptr<receivers::OtlpGrpcReceiver> otlp_grpc;
    void Stop();
  };
  Store store_;
  Pipeline pipeline_;
  Writing writing_;
  Reading reading_;
  Receivers receivers_;

  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
};

// The read source a name means: "opensearch" and "elasticsearch" both name
// the search store, whichever it is called; other names are themselves.
std::string ReadSourceName(const query::ReadSwitch& sw, const std::string& name);

}  // namespace spanhouse::server
