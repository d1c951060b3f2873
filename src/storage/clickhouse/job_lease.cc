#include "storage/clickhouse/job_lease.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "storage/clickhouse/tsv.h"

namespace spanhouse::storage {

namespace {

template <typename T>
bool ParseNumber(const std::string& s, T* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A registration whose first heartbeat took longer than this to be written
// is taken again: the settle time assumes a registered node is visible
// within it (plus the second now() truncates).
constexpr auto kRegistrationBound = std::chrono::seconds(1);
// How long a node keeps acting on a lease it cannot renew, short of the
// lease itself: others see it expire lease_s after the server stamped the
// heartbeat, which now() truncates to the second, and servers' clocks may
// differ by a little.
constexpr auto kHoldMargin = std::chrono::seconds(2);
// Rows further back than this cannot be live (the longest lease is 300 s).
constexpr uint32_t kLookBackS = 600;

}  // namespace

LeaseDecision DecideLease(const std::vector<LeaseRow>& rows, uint32_t now, const LeaseSelf& self) {
  LeaseDecision d;
  std::set<std::pair<std::string, uint64_t>> released;
  for (const LeaseRow& r : rows) {
    if (r.released) released.emplace(r.node_id, r.incarnation);
  }
  // Each node id's live registration with the greatest (registered_at,
  // incarnation).
  std::map<std::string, const LeaseRow*> nodes;
  for (const LeaseRow& r : rows) {
    if (uint64_t{r.renewed_at} + r.lease_s <= now) continue;
    if (released.count({r.node_id, r.incarnation}) != 0) continue;
    const LeaseRow*& best = nodes[r.node_id];
    if (best == nullptr || std::tie(r.registered_at, r.incarnation) >
                               std::tie(best->registered_at, best->incarnation)) {
      best = &r;
    }
  }
  const LeaseRow* runner = nullptr;
  for (const auto& [id, r] : nodes) {
    if (runner == nullptr ||
        std::tie(r->registered_at, r->node_id) < std::tie(runner->registered_at, runner->node_id)) {
      runner = r;
    }
  }
  d.live_nodes = nodes.size();
  if (runner != nullptr) {
    d.runner = runner->node_id;
    d.runner_incarnation = runner->incarnation;
  }
  if (self.registered_at == 0) return d;
  d.self_settled = now >= uint64_t{self.registered_at} + self.settle_s;
  auto mine = nodes.find(self.node_id);
  d.self_superseded = mine != nodes.end() && mine->second->incarnation != self.incarnation;
  d.self_runs = d.self_settled && runner != nullptr && runner->node_id == self.node_id &&
                runner->incarnation == self.incarnation &&
                runner->registered_at == self.registered_at;
  return d;
}

Status ParseLeaseRows(std::string_view tsv, std::vector<LeaseRow>* rows, uint32_t* now) {
  rows->clear();
  *now = 0;
  for (const auto& f : TsvRows(tsv)) {
    LeaseRow r;
    uint32_t released = 0;
    uint32_t row_now = 0;
    if (f.size() != 7 || !ParseNumber(f[1], &r.incarnation) ||
        !ParseNumber(f[2], &r.registered_at) || !ParseNumber(f[3], &r.renewed_at) ||
        !ParseNumber(f[4], &r.lease_s) || !ParseNumber(f[5], &released) ||
        !ParseNumber(f[6], &row_now)) {
      return Status::Internal(
          fmt::format("job lease: unexpected row from the lease table: {}", fmt::join(f, "\t")));
    }
    r.node_id = f[0];
    r.released = released != 0;
    *now = row_now;
    rows->push_back(std::move(r));
  }
  return Status::Ok();
}

bool ValidNodeId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

std::string JobLeaseDdl(std::string_view database, bool replicated) {
  // A day per partition, so old heartbeats go by DROP PARTITION (18.16 has
  // no TTL); sorted by time, so the lease query reads the last minutes only.
  const std::string engine =
      replicated ? fmt::format(
                       "ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{}.job_lease', "
                       "'{{replica}}')",
                       database)
                 : std::string("MergeTree");
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.job_lease (node_id String, incarnation UInt64, "
      "registered_at DateTime, renewed_at DateTime, lease_s UInt32, released UInt8) ENGINE = {} "
      "PARTITION BY toDate(renewed_at) ORDER BY (renewed_at, node_id)",
      database, engine);
}

JobLease::JobLease(std::unique_ptr<SqlConnection> conn, JobLeaseOptions options)
    : conn_(std::move(conn)), opts_(std::move(options)), incarnation_([] {
        std::random_device rd;
        return (uint64_t{rd()} << 32) | rd();
      }()) {}

JobLease::~JobLease() {
  Stop();
}

void JobLease::Start() {
  thread_ = std::thread([this] { Run(); });
}

void JobLease::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  elected_ = false;
  if (registered_at_ != 0) {
    if (Status st = Heartbeat(true); !st.ok()) {
      spdlog::warn("job lease: could not release it ({}); another node takes over after {} s",
                   st.message(), opts_.lease.count());
    }
    registered_at_ = 0;
  }
  conn_->Close();
}

bool JobLease::runner() const {
  return elected_.load() && SteadyNs() < hold_until_ns_.load();
}

std::string JobLease::runner_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runner_id_;
}

std::string JobLease::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status JobLease::Heartbeat(bool released) {
  return conn_->Query(
      fmt::format("INSERT INTO {}.job_lease (node_id, incarnation, registered_at, renewed_at, "
                  "lease_s, released) SELECT {{node:String}}, toUInt64({{incarnation:UInt64}}), "
                  "toDateTime({{registered:UInt32}}), now(), toUInt32({{lease:UInt32}}), "
                  "toUInt8({{released:UInt8}})",
                  opts_.database),
      "", nullptr,
      {{"node", opts_.node_id},
       {"incarnation", std::to_string(incarnation_)},
       {"registered", std::to_string(registered_at_)},
       {"lease", std::to_string(released ? 0 : opts_.lease.count())},
       {"released", released ? "1" : "0"}});
}

void JobLease::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Tick();
    lock.lock();
    // Quickly until the first decision (the start waits for it), then
    // three heartbeats per lease, so one lost heartbeat loses nothing.
    const auto wait = decided_.load() ? std::chrono::milliseconds(opts_.lease) / 3
                                      : std::chrono::milliseconds(250);
    cv_.wait_for(lock, wait, [&] { return stop_; });
  }
}

void JobLease::Tick() {
  const int64_t t0 = SteadyNs();
  const auto fail = [&](const Status& st) {
    stats_.failures++;
    std::lock_guard<std::mutex> lock(mu_);
    if (error_ != st.message()) spdlog::warn("job lease: {}", st.message());
    error_ = st.message();
  };
  const bool registering = registered_at_ == 0;
  if (registering) {
    QueryResult r;
    if (Status st = conn_->Query("SELECT toUInt32(now())", "TSV", &r); !st.ok()) {
      fail(st);
      return;
    }
    uint32_t now = 0;
    std::from_chars(r.data.data(), r.data.data() + r.data.size(), now);
    registered_at_ = now;
  }
  if (Status st = Heartbeat(false); !st.ok()) {
    if (registering) registered_at_ = 0;
    fail(st);
    return;
  }
  if (registering && SteadyNs() - t0 > std::chrono::nanoseconds(kRegistrationBound).count()) {
    // Written too late for the settle time to cover it: register afresh (a
    // later registration of this node supersedes this one).
    spdlog::info("job lease: registration took over {} s to write; registering again",
                 kRegistrationBound.count());
    registered_at_ = 0;
    return;
  }
  QueryResult r;
  Status st = conn_->Query(
      fmt::format("SELECT node_id, incarnation, toUInt32(registered_at), "
                  "toUInt32(max(renewed_at)), argMax(lease_s, renewed_at), max(released), "
                  "toUInt32(now()) FROM {}.job_lease WHERE renewed_at >= now() - {} GROUP BY "
                  "node_id, incarnation, registered_at",
                  opts_.database, kLookBackS),
      "TSV", &r);
  std::vector<LeaseRow> rows;
  uint32_t now = 0;
  if (st.ok()) st = ParseLeaseRows(r.data, &rows, &now);
  if (!st.ok()) {
    fail(st);
    return;
  }
  stats_.renewals++;
  const LeaseDecision d = DecideLease(
      rows, now, LeaseSelf{opts_.node_id, incarnation_, registered_at_, opts_.settle_s});
  stats_.live_nodes = d.live_nodes;
  if (!d.self_settled) return;
  if (d.self_runs) {
    hold_until_ns_ =
        t0 + std::chrono::nanoseconds(opts_.lease - std::chrono::seconds(kHoldMargin)).count();
  }
  const bool was = elected_.exchange(d.self_runs);
  if (d.self_runs && !was) {
    stats_.acquired++;
    spdlog::info("job lease: this node ({}) runs the schema and dependency jobs ({} live node(s))",
                 opts_.node_id, d.live_nodes);
  } else if (!d.self_runs && was) {
    spdlog::warn("job lease: this node ({}) no longer runs the jobs: {} does", opts_.node_id,
                 d.runner.empty() ? "no node" : d.runner);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) spdlog::info("job lease: heartbeats written again");
    error_.clear();
    if (!d.self_runs && d.runner != runner_id_) {
      spdlog::info("job lease: node {} runs the jobs; this node ({}) stands by",
                   d.runner.empty() ? "(none)" : d.runner, opts_.node_id);
    }
    if (d.self_superseded && runner_id_ != "superseded") {
      spdlog::error(
          "job lease: another spanhouse registered later with this node id ({}); it alone may "
          "run the jobs: give each node its own node.id",
          opts_.node_id);
    }
    runner_id_ = d.self_superseded ? "superseded" : d.runner;
  }
  decided_ = true;
  if (d.self_runs) DropOldDays(now);
}

void JobLease::DropOldDays(uint32_t now) {
  const uint32_t day = now / 86400;
  if (day == dropped_day_ || day < 2) return;
  // Every day before yesterday, as toDate()'s partition ids (YYYYMMDD).
  const time_t keep = static_cast<time_t>(day - 1) * 86400;
  std::tm tm{};
  gmtime_r(&keep, &tm);
  const std::string keep_from =
      fmt::format("{:04}{:02}{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
  QueryResult r;
  Status st = conn_->Query(
      fmt::format("SELECT DISTINCT partition_id FROM system.parts WHERE database = '{}' AND "
                  "table = 'job_lease' AND active AND partition_id < '{}'",
                  opts_.database, keep_from),
      "TSV", &r);
  for (const auto& f : TsvRows(r.data)) {
    if (!st.ok()) break;
    // The engine's own ids, YYYYMMDD: nothing else goes into the statement.
    if (f.size() != 1 || f[0].size() != 8 ||
        f[0].find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    st = conn_->Query(
        fmt::format("ALTER TABLE {}.job_lease DROP PARTITION ID '{}'", opts_.database, f[0]), "");
  }
  if (!st.ok()) {
    spdlog::warn("job lease: dropping old heartbeats: {}", st.message());
    return;
  }
  dropped_day_ = day;
}

}  // namespace spanhouse::storage
