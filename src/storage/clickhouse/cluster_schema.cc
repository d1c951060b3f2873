#include "storage/clickhouse/cluster_schema.h"

#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace spanhouse::storage {

Status EnsureClusterSchema(const ClusterSchemaOptions& o, Capabilities* caps_out) {
  bool replicated = false;
  for (const auto& shard : o.shards) replicated = replicated || shard.size() > 1;
  bool have_caps = false;
  Capabilities first;
  for (size_t s = 0; s < o.shards.size(); ++s) {
    size_t ready = 0;
    std::string errors;
    for (const RemoteOptions& replica : o.shards[s]) {
      const std::string& url = replica.url;
      std::unique_ptr<RemoteConnection> conn;
      Status st = RemoteConnection::Open(replica, &conn);
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
      QueryResult version;
      if (conn->Query(fmt::format("SELECT max(version) FROM {}.schema_version", o.database), "TSV",
                      &version)
              .ok() &&
          std::strtoul(version.data.c_str(), nullptr, 10) < kInPlaceFromSchemaVersion) {
        return Status::Internal(fmt::format(
            "ClickHouse {}: database {} has schema {}, this spanhouse writes {}; upgrading a "
            "cluster's schema is not supported yet (one server is upgraded at start)",
            url, o.database, version.data.substr(0, version.data.find('\n')), kSchemaVersion));
      }
      SchemaOptions schema;
      schema.database = o.database;
      schema.metrics_retention_days = o.metrics_retention_days;
      schema.retention_s = o.retention_s;
      if (replicated) schema.replicated_path = "/clickhouse/tables/{shard}";
      // No copy across servers: a spans table made before schema 11 keeps
      // its two id columns, and the shard's writers write those.
      schema.copy_spans = false;
      Capabilities caps;
      if (st = EnsureSchema(*conn, &caps, schema); !st.ok()) {
        return {st.code(), fmt::format("ClickHouse {}: {}", url, st.message())};
      }
      if (have_caps && (caps.major != first.major || caps.minor != first.minor)) {
        spdlog::warn("ClickHouse {} is {}.{}, others {}.{}: spans are encoded for the first", url,
                     caps.major, caps.minor, first.major, first.minor);
      }
      if (!have_caps) first = caps;
      have_caps = true;
      if (o.shards.size() > 1) {
        for (const std::string& sql : DistributedDdl(o.cluster, o.database, o.read_database)) {
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
  *caps_out = first;
  spdlog::info("ClickHouse {}.{}: schema {} ready in database {} on {} shard(s){}", first.major,
               first.minor, kSchemaVersion, o.database, o.shards.size(),
               replicated ? ", replicated" : "");
  return Status::Ok();
}

Status WaitForClusterSchema(const std::vector<std::unique_ptr<SqlConnection>>& shards,
                            const std::string& database, std::chrono::seconds wait,
                            const std::function<bool()>& take_over, bool* taken_over) {
  if (taken_over != nullptr) *taken_over = false;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (size_t s = 0; s < shards.size(); ++s) {
    for (bool logged = false;; logged = true) {
      if (take_over && take_over()) {
        if (taken_over != nullptr) *taken_over = true;
        return Status::Ok();
      }
      QueryResult r;
      const Status st = shards[s]->Query(
          fmt::format("SELECT max(version) FROM {}.schema_version", database), "TSV", &r);
      if (st.ok() && std::strtoul(r.data.c_str(), nullptr, 10) >= kSchemaVersion) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::Unavailable(fmt::format(
            "ClickHouse shard {}: the schema of database {} is not at version {} after {} "
            "minutes; the node running the jobs (clickhouse.run_jobs, the job lease) makes it "
            "so ({})",
            s + 1, database, kSchemaVersion, wait.count() / 60,
            st.ok() ? "at " + r.data.substr(0, r.data.find('\n')) : st.message()));
      }
      if (!logged) {
        spdlog::info("waiting for the schema of shard {} (another node runs the jobs)", s + 1);
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  return Status::Ok();
}

}  // namespace spanhouse::storage
