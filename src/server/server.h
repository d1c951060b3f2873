// Everything `spanhouse serve` runs, assembled from the configuration. Each
// component is a member that owns what it opened, so a start that fails half
// way closes what it had opened, in the reverse order, by its destructors.
// Stopping is explicit (Stop), in the order the data flows: the listeners
// first, then the sinks write what they hold, then the log is closed.
//
//   receivers ──> durable queue ──> sink cursor ──> sinks (embedded ClickHouse, null, ...)
//   query API ──> span reader ──> the primary sink's store
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/memory_budget.h"
#include "common/status.h"
#include "pipeline/dedup/dedup_index.h"
#include "pipeline/durable/durable_queue.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/sampling/tail_window.h"
#include "query/query_api.h"
#include "query/read_switch.h"
#include "query/recent_reader.h"
#include "query/recent_traces.h"
#include "receivers/otlp_grpc/otlp_grpc_receiver.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "receivers/zipkin/zipkin_receiver.h"
#include "server/config.h"
#include "server/data_dir_lock.h"
#include "server/listener_security.h"
#include "server/sink_factory.h"
#include "sink/sink.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
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
  // Applies what may change while running: query.read_from, query.fallback.
  // Other changed keys are logged as needing a restart.
  void Reload(const Config& fresh);
  // Stops intake, lets every sink write what it holds, closes the store.
  // Returns the process's exit code: 0, or 3 if spans were lost.
  int Stop();

 private:
  explicit Server(const Config& cfg) : cfg_(cfg), budget_(cfg.queue.max_bytes) {}
  Status OpenEngine();
  // storage.engine clickhouse: the servers of clickhouse.shards.
  Status OpenRemote();
  bool remote() const { return cfg_.storage.engine == "clickhouse"; }
  // The schema on every replica of every shard, and the Distributed tables.
  Status EnsureRemoteStore();
  // clickhouse.run_jobs false: waits until every shard's schema is current
  // (another spanhouse makes it so).
  Status WaitForRemoteSchema();
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
  // POST /api/admin/import: Jaeger span documents stored in ClickHouse only
  // (those not stored yet), written before the answer.
  void ImportEndpoint(const net::HttpRequest& req, net::HttpResponse& resp);
  Status Import(const SpanBatch& batch, uint64_t* written);
  void MakeQueryApi();
  void MakeReceivers();
  std::string NotReady() const;
  std::string Metrics();
  std::string SamplingJson() const;
  std::string Listening() const;

  const Config cfg_;
  std::string dir_;  // the data directory, absolute
  // In the order they are built; destroyed in reverse.
  ListenerSecurity security_;
  DataDirLock lock_;
  std::shared_ptr<storage::ChdbLibrary> lib_;
  std::vector<std::string> engine_args_;
  std::unique_ptr<storage::SqlConnection> read_conn_;  // queries, schema, /metrics
  // The dependency job's joins: one per shard (a parent and its child
  // span share a trace, so a shard's edges are its own).
  std::vector<std::unique_ptr<storage::SqlConnection>> job_conns_;
  // The primary's database (the embedded spanhouse, or clickhouse.database).
  std::string database_;
  // Where reads go: database_, or on a cluster of several shards the
  // Distributed tables over it ("<database>_cluster").
  std::string read_database_;
  std::vector<std::vector<std::string>> shards_;  // clickhouse.shards' replica URLs
  storage::Capabilities caps_;
  MemoryBudget budget_;
  std::unique_ptr<pipeline::HeadSampler> head_sampler_;  // null: sampling.head keeps everything
  std::unique_ptr<pipeline::TailSampler> tail_sampler_;  // null: no sampling.tail.policies
  std::unique_ptr<pipeline::SpanFilter> filter_;
  std::unique_ptr<pipeline::durable::DurableQueue> queue_;
  // The keys of spans accepted lately (null: dedup.enabled false); the
  // receivers drop a retried request's spans by it.
  std::unique_ptr<pipeline::DedupIndex> dedup_;
  struct Faults {
    std::string sink;
    std::unique_ptr<storage::SinkFaults> faults;
  };
  std::vector<Faults> faults_;  // one per embedded sink

  std::vector<std::unique_ptr<sink::Sink>> sinks_;  // the first is the primary
  // Holds requests for tail sampling; gone before the sinks it delivers to.
  std::unique_ptr<pipeline::TailWindow> tail_window_;
  std::vector<std::unique_ptr<storage::DependencyJob>> dependency_jobs_;
  std::unique_ptr<storage::ChdbSpanReader> reader_;
  std::shared_ptr<storage::opensearch::OpenSearchClient> opensearch_;
  std::unique_ptr<query::SpanReader> opensearch_reader_;
  std::unique_ptr<query::ReadSwitch> read_switch_;
  // Recent spans in memory (null: query.recent_max_bytes 0), fed by the
  // primary sink (sink::ObservedSink) and merged in front of read_switch_:
  // what the query API reads.
  std::unique_ptr<query::RecentTraces> recent_;
  std::unique_ptr<query::RecentReader> recent_reader_;
  std::mutex import_mu_;  // one import at a time
  std::unique_ptr<query::QueryApi> query_api_;
  std::unique_ptr<receivers::OtlpHttpReceiver> otlp_http_;
  std::unique_ptr<receivers::ZipkinReceiver> zipkin_;
  std::unique_ptr<receivers::OtlpGrpcReceiver> otlp_grpc_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
};

}  // namespace spanhouse::server
