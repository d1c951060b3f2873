// Every sink spanhouse writes to is made here, from the configuration: by
// `serve` (the primary store, a secondary, dual-write), by the import of
// spans from another store and by the schema upgrade. A sink kind is one
// line of the table in sink_factory.cc (CONTRIBUTING.md shows how to add one).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "peers/ring.h"
#include "server/config.h"
#include "sink/sink.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/sql_connection.h"
#include "storage/opensearch/index_layout.h"
#include "storage/opensearch/opensearch_client.h"

namespace spanhouse::server {

// One sink to make.
struct SinkSpec {
  // The kind, a line of the factory's table: "chdb" (the embedded
  // ClickHouse), "clickhouse" (one shard of a ClickHouse server or
  // cluster), "opensearch" (dual-write in Jaeger's format), "null".
  std::string kind;
  // Its place in the durable queue: stable across restarts.
  std::string name;
  // ClickHouse kinds: the database, and on a cluster the shard it writes.
  std::string database;
  uint32_t shard = 0;
  uint32_t shards = 1;
  size_t writers = 0;     // ClickHouse writer threads (0: writer.threads)
  std::string spool_dir;  // ClickHouse spool ("": <data dir>/spool)
  // The bound on its queued bytes (0: the kind's default from the
  // configuration).
  size_t queue_bytes = 0;
  // Kind peer: the node's name in peers.nodes.
  std::string peer;
  // Fault injection of the ClickHouse kinds (debug.fault_injection; null: none).
  const storage::SinkFaults* faults = nullptr;
};

// A spec of `kind` named `name` (ClickHouse kinds: on `database`), the rest
// defaults.
SinkSpec Spec(std::string kind, std::string name, std::string database = {});

// Where Jaeger's documents lie in the search store (opensearch.index_prefix,
// date_layout or index_date_separator, use_aliases; checked by Validate).
storage::opensearch::IndexLayout SearchStoreLayout(const Config& cfg);

// What sinks are made with: the configuration and what the server opened.
struct SinkContext {
  const Config* cfg = nullptr;
  std::string dir;  // the data directory, absolute
  storage::Capabilities caps;
  // `n` writer connections: to the embedded engine, or to shard `shard`'s replicas.
  std::function<Status(size_t n, size_t shard,
                       std::vector<std::unique_ptr<storage::SqlConnection>>* out)>
      connect;
  // Several nodes as one (peers.nodes): which node owns a trace, and where a
  // peer's spans go once it has been down for peers.down_after_s (this
  // node's intake). Null: this node is alone.
  const peers::PeerRing* ring = nullptr;
  // `peer`: the node's index in the ring.
  std::function<Status(std::unique_ptr<SpanBatch>, size_t peer)> decide_here;
  // The OpenSearch cluster of the opensearch section (null: none).
  std::shared_ptr<storage::opensearch::OpenSearchClient> opensearch;
};

// The embedded writers' options from writer.* (name, shard and cursor are
// the sink's to set).
storage::WriterOptions WriterOptionsOf(const Config& cfg, const std::string& dir);

// Makes the sink `spec` names. An unknown kind is an error that lists the known.
Status MakeSink(const SinkSpec& spec, const SinkContext& ctx, std::unique_ptr<sink::Sink>* out);

// The sinks `serve` writes every accepted span to, the primary first:
// writer.sink's (or one per shard of clickhouse.shards, `cluster_shards`
// of them), then secondary.type's.
std::vector<SinkSpec> ServeSinks(const Config& cfg, size_t cluster_shards);

// The name a secondary embedded sink keeps its place in the durable queue by.
std::string SecondarySinkName(const Config& cfg);

}  // namespace spanhouse::server
