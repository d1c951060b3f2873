// Service dependency edges per minute (caller service -> callee service,
// calls, errors), computed by a periodic job rather than a view.
//
// Why a job: the two ends of an edge, a client span in one service and its
// child server span in another, come from different processes, so they
// arrive in different requests and usually in different inserts; a
// materialized view sees one insert block at a time and would miss most
// edges. The job joins child spans to their parents over stored spans, one
// interval at a time, late enough (a lag) that both ends have arrived; a
// minute recomputed later replaces its earlier rows (ReplacingMergeTree by
// (minute, parent, child)), so running it twice never counts twice.
//
// Spans sampled out (sampled_spans, schema_ddl.cc) count as stored ones: each
// side of the join reads the spans and the sampled spans of its range, so
// an edge whose parent or child was sampled out is still counted. Those
// rows are needed only until their minutes are computed: after a run the
// job drops the days of sampled_spans computed kSampledSpansKeepDays days
// before (DropComputedSampledSpans).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "common/status.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

class SqlConnection;

// How far before and after its children's range ComputeDependencies looks
// for parents, unless told.
inline constexpr uint32_t kParentsBeforeS = 60;
inline constexpr uint32_t kParentsAfterS = 10;

// Edges of the child spans that started in [from_s, to_s) (unix seconds,
// whole minutes), their parents looked up from `before_s` before that range
// to `after_s` after it (a parent starts before its child; clocks skew).
// The children of the range are the join's hash table, the parents stream
// past it, so memory follows the range, not the look-around. `database`:
// where the tables are (SchemaOptions::database).
Status ComputeDependencies(SqlConnection& conn, uint32_t from_s, uint32_t to_s,
                           uint32_t before_s = kParentsBeforeS, uint32_t after_s = kParentsAfterS,
                           std::string_view database = kDatabase);

// How many days of sampled_spans the job keeps before what it has computed:
// room for a minute computed again by hand, never needed by the job itself.
inline constexpr uint32_t kSampledSpansKeepDays = 2;

// Drops the partitions (days) of `database`.sampled_spans that ended more
// than `keep_days` days before the day of `computed_until_s` (unix
// seconds: every edge before it is computed). ALTER TABLE ... DROP
// PARTITION, on every version; on a replicated table every replica's. The
// number of days dropped in `dropped` if not null.
Status DropComputedSampledSpans(SqlConnection& conn, uint32_t computed_until_s,
                                std::string_view database = kDatabase,
                                uint32_t keep_days = kSampledSpansKeepDays,
                                size_t* dropped = nullptr);

struct DependencyJobOptions {
  std::chrono::seconds interval{60};              // how often the job runs
  std::chrono::seconds lag{120};                  // how long after a minute ends it is computed
  std::chrono::seconds first_lookback{900};       // on a fresh start, how far back to begin
  uint32_t max_minutes_per_query = 5;             // catching up goes in steps of this
  std::string database = std::string(kDatabase);  // where the tables are
  // Asked before each run and between its steps; false: this node does not
  // run the job now (another holds the job lease, job_lease.h). Empty: always.
  std::function<bool()> may_run;
};

// Runs ComputeDependencies every interval over the minutes that have become
// old enough, on its own connection, from where the table left off.
class DependencyJob {
 public:
  DependencyJob(SqlConnection& conn, DependencyJobOptions options);
  ~DependencyJob();
  void Start();
  void Stop();
  // Runs done (skipped ones, while another node runs the job, not counted).
  uint64_t runs() const { return runs_.load(); }
  uint64_t errors() const { return errors_.load(); }

  // Spans that started in [from_ns, to_ns] were stored late (an import of
  // history the job may have passed): the minutes whose edges they can be
  // part of are computed again, once no such call has touched them for the
  // lag. Ranges are merged. They run whether or not this node holds the job
  // lease (computing a minute twice replaces its rows: nothing counts twice).
  void Recompute(uint64_t from_ns, uint64_t to_ns);
  // Minutes recomputed so far, and minutes still waiting.
  uint64_t recomputed_minutes() const { return recomputed_minutes_.load(); }
  uint64_t pending_minutes() const;

 private:
  void Run();
  Status RunOnce(uint32_t* done_until);
  // Computes the pending ranges untouched for the lag.
  Status RunRecomputes();
  // Adds [lo, hi) to pending_, merged with the ranges it overlaps or
  // touches, touched now. mu_ held.
  void AddPending(uint32_t lo, uint32_t hi);

  SqlConnection& conn_;
  const DependencyJobOptions opts_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::atomic<uint64_t> runs_{0};
  std::atomic<uint64_t> errors_{0};
  // The day (since the epoch) of the edges computed when sampled_spans was
  // last cut back: it is cut again once that day changes (job thread only).
  uint32_t sampled_cut_at_day_ = 0;
  // Minute ranges to compute again: from -> (to, when last touched).
  struct Pending {
    uint32_t to_s = 0;
    std::chrono::steady_clock::time_point touched;
  };
  std::map<uint32_t, Pending> pending_;  // guarded by mu_
  std::atomic<uint64_t> recomputed_minutes_{0};
};

}  // namespace spanhouse::storage
