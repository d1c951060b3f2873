// The schema of a ClickHouse cluster, made by the spanhouse that runs the
// jobs (the holder of the job lease, job_lease.h): the tables on every replica of every shard
// (replicated when a shard has several replicas) and, with several shards,
// the Distributed tables reads go through; or, on the other nodes, waited
// for.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/clickhouse/remote_connection.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

struct ClusterSchemaOptions {
  std::vector<std::vector<RemoteOptions>> shards;  // each shard's replicas
  std::string cluster;                             // the servers' cluster name (ON CLUSTER)
  std::string database;
  std::string read_database;  // the Distributed tables' (several shards)
  uint32_t metrics_retention_days = 0;
  uint64_t retention_s = 0;
};

// Makes the schema on every replica that answers. A replica that cannot be
// reached is skipped (it needs the schema before it takes writes: start
// again once it is back); a shard with none reachable, or a schema older
// than the in-place upgrades handle, stops it. `caps`: the first replica's.
Status EnsureClusterSchema(const ClusterSchemaOptions& options, Capabilities* caps);

// Waits until every shard (one connection each) has the current schema,
// made by another spanhouse; kUnavailable after `wait`. Returns early, with
// `*taken_over` true, once `take_over` (if set) says this node is to make it.
Status WaitForClusterSchema(const std::vector<std::unique_ptr<SqlConnection>>& shards,
                            const std::string& database, std::chrono::seconds wait,
                            const std::function<bool()>& take_over = {},
                            bool* taken_over = nullptr);

}  // namespace spanhouse::storage
