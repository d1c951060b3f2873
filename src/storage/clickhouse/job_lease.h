// Which spanhouse node runs the jobs (the schema at start, the dependency
// job) when several share one ClickHouse server or cluster: a lease built
// from heartbeat rows, since 18.16 has neither lightweight updates nor a
// compare-and-set (decision 0056).
//
// Each node that may run them inserts a row every lease/3 into
// <database>.job_lease (on the first shard): its node id, this process's
// incarnation, when it registered and the lease it asks. Times are the
// server's now(), so the nodes' clocks do not matter. Every node reads the
// same rows and applies the same rule (DecideLease): of the nodes whose
// latest row has not expired, the one registered first runs the jobs. A
// node registered after another never takes the jobs from it, so a node
// that comes back after a crash does not take them back. A registration
// counts only after `settle`: by then every node that registered at the
// same time is visible too, so two views agree before either acts.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

// One (node, incarnation, registration) of the lease table, its rows merged.
struct LeaseRow {
  std::string node_id;
  uint64_t incarnation = 0;    // random per process start
  uint32_t registered_at = 0;  // server time, unix seconds
  uint32_t renewed_at = 0;     // the latest heartbeat, server time
  uint32_t lease_s = 0;        // how long after renewed_at it holds
  bool released = false;       // the process stopped cleanly
};

// The node asking, as DecideLease sees it.
struct LeaseSelf {
  std::string node_id;
  uint64_t incarnation = 0;
  uint32_t registered_at = 0;  // 0: not registered yet
  uint32_t settle_s = 2;
};

struct LeaseDecision {
  std::string runner;  // the runner's node id; "" when no node is live
  uint64_t runner_incarnation = 0;
  size_t live_nodes = 0;  // distinct live node ids
  // `self` is the runner and its registration has settled: it runs the jobs.
  bool self_runs = false;
  // `self` has settled: what it sees is final for this read.
  bool self_settled = false;
  // A live process registered later under self's node id: node.id is not
  // unique (only the later one may run the jobs).
  bool self_superseded = false;
};

// The rule, a pure function of the rows and the server's time `now`:
// - a row is live while renewed_at + lease_s > now and its incarnation has
//   not released the lease;
// - a node id is represented by its live registration with the greatest
//   (registered_at, incarnation): a restart supersedes the process before it;
// - the runner is the represented node with the least (registered_at,
//   node_id).
LeaseDecision DecideLease(const std::vector<LeaseRow>& rows, uint32_t now, const LeaseSelf& self);

// Rows as the lease query writes them (TSV: node, incarnation, registered,
// renewed, lease, released, now); `now` from the first row, 0 when none.
Status ParseLeaseRows(std::string_view tsv, std::vector<LeaseRow>* rows, uint32_t* now);

// A node id: 1 to 64 of A-Z a-z 0-9 . _ -
bool ValidNodeId(std::string_view id);

// The lease table's DDL; `replicated`: ReplicatedMergeTree on the shard's
// replicas (the {shard} and {replica} macros), as the other tables.
std::string JobLeaseDdl(std::string_view database, bool replicated);

struct JobLeaseOptions {
  std::string database;
  std::string node_id;
  std::chrono::seconds lease{15};
  // How long a registration waits (server seconds) before it may run the
  // jobs: at least the time a heartbeat takes to be visible everywhere.
  uint32_t settle_s = 2;
};

struct JobLeaseStats {
  std::atomic<uint64_t> renewals{0};  // heartbeats written and read back
  std::atomic<uint64_t> failures{0};  // heartbeats that failed
  std::atomic<uint64_t> acquired{0};  // times this node became the runner
  std::atomic<uint64_t> live_nodes{0};
};

// This node's side of the lease: a thread that writes the heartbeats and
// reads the decision. runner() is what a job asks before each run.
class JobLease {
 public:
  JobLease(std::unique_ptr<SqlConnection> conn, JobLeaseOptions options);
  ~JobLease();
  JobLease(const JobLease&) = delete;
  JobLease& operator=(const JobLease&) = delete;

  void Start();
  // Stops the heartbeats and, if registered, writes a released row so the
  // next node takes over at once instead of after the lease.
  void Stop();
  // Whether this node runs the jobs now: elected at the last read, and
  // within the lease of its last heartbeat (a node that cannot renew stops
  // before the others may see its lease expire).
  bool runner() const;
  // Whether the first decision has been made (runner() then says which).
  bool decided() const { return decided_.load(); }
  // The runner at the last read ("" if none or not read yet).
  std::string runner_id() const;
  // The last heartbeat's error, "" after a success.
  std::string last_error() const;
  const std::string& node_id() const { return opts_.node_id; }
  const JobLeaseStats& stats() const { return stats_; }

 private:
  void Run();
  void Tick();
  Status Heartbeat(bool released);
  void DropOldDays(uint32_t now);

  std::unique_ptr<SqlConnection> conn_;
  const JobLeaseOptions opts_;
  const uint64_t incarnation_;
  // The heartbeat thread's own; registered_at_ 0 until a registration
  // was seen written within its bound.
  uint32_t registered_at_ = 0;
  uint32_t dropped_day_ = 0;  // the server day old days were last dropped on
  JobLeaseStats stats_;
  std::atomic<bool> decided_{false};
  std::atomic<bool> elected_{false};
  std::atomic<int64_t> hold_until_ns_{0};  // steady clock
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;      // guarded by mu_
  bool closed_ = false;    // guarded by mu_: Stop ran
  std::string runner_id_;  // guarded by mu_
  std::string error_;      // guarded by mu_
  std::thread thread_;
};

}  // namespace spanhouse::storage
