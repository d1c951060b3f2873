// The replicas of one shard as one connection: each statement goes to the
// replica that answered last, and when that one cannot be reached
// (kUnavailable) to the next, in the configured order. An insert retried on
// another replica is the same bytes, so a replicated table keeps it once.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "storage/clickhouse/remote_connection.h"

namespace spanhouse::storage {

class ReplicaSet final : public SqlConnection {
 public:
  // Connects to the first replica that answers; fails with every replica's
  // error when none does. `replicas` share user, password and database.
  static Status Open(std::vector<RemoteOptions> replicas, std::unique_ptr<ReplicaSet>* out);

  Status Run(std::string_view sql, std::string_view format, QueryResult* result,
             const std::vector<QueryParam>& params) override;
  Status Insert(std::string_view insert, std::string data,
                const std::vector<QueryParam>& settings = {}) override;
  void Close() override;
  uint64_t bytes_sent() const override;

  // The version of the replica that answered first (e.g. "18.16.1").
  const std::string& version() const { return version_; }
  // How many times a statement moved to another replica.
  uint64_t failovers() const;

 private:
  explicit ReplicaSet(std::vector<RemoteOptions> replicas);
  // Runs `f` on the current replica, then on the others while it finds
  // them unreachable.
  template <typename F>
  Status OnReplica(F&& f);

  const std::vector<RemoteOptions> opts_;
  std::string version_;
  mutable std::mutex mu_;
  // Guarded by mu_: one connection per replica, opened when first needed.
  std::vector<std::unique_ptr<RemoteConnection>> conns_;
  size_t current_ = 0;
  uint64_t failovers_ = 0;
  bool closed_ = false;
};

}  // namespace spanhouse::storage
