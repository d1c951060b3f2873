#include "storage/clickhouse/dependencies.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

Status ComputeDependencies(SqlConnection& conn, uint32_t from_s, uint32_t to_s, uint32_t before_s,
                           uint32_t after_s, std::string_view database) {
  if (to_s <= from_s) return Status::Ok();
  // Each side's rows: of the spans stored and of those sampled out, the
  // same columns of both tables.
  const auto rows = [database](std::string_view columns, std::string_view where) {
    return fmt::format(
        "SELECT {1} FROM {0}.spans WHERE {2} UNION ALL SELECT {1} FROM "
        "{0}.sampled_spans WHERE {2}",
        database, columns, where);
  };
  // An edge is a parent-child pair of spans in different services; its
  // errors are the child's (the callee's answer).
  const std::string sql = fmt::format(
      "INSERT INTO {0}.dependencies_1m SELECT toStartOfMinute(c.timestamp) AS minute, "
      "p.service_name AS parent, c.service_name AS child, count() AS calls, "
      "countIf(c.status_code = 2) AS errors, now() AS computed_at FROM ({1}) AS p INNER JOIN "
      "({2}) AS c ON p.trace_id = c.trace_id AND p.span_id = c.parent_span_id WHERE "
      "p.service_name != c.service_name GROUP BY minute, parent, child",
      database,
      rows("trace_id, span_id, service_name",
           "timestamp >= toDateTime({lo:UInt32}) AND timestamp < toDateTime({hi:UInt32})"),
      rows("trace_id, parent_span_id, service_name, status_code, timestamp",
           "timestamp >= toDateTime({from:UInt32}) AND timestamp < toDateTime({to:UInt32}) AND "
           "parent_span_id != toFixedString(unhex('0000000000000000'), 8)"));
  return conn.Query(sql, "", nullptr,
                    {{"from", std::to_string(from_s)},
                     {"to", std::to_string(to_s)},
                     {"lo", std::to_string(from_s - std::min(before_s, from_s))},
                     {"hi", std::to_string(to_s + after_s)}});
}

Status DropComputedSampledSpans(SqlConnection& conn, uint32_t computed_until_s,
                                std::string_view database, uint32_t keep_days, size_t* dropped) {
  if (dropped != nullptr) *dropped = 0;
  const uint32_t day = computed_until_s / 86400;
  if (day <= keep_days) return Status::Ok();
  // The first day kept, as the partition id of toDate(): YYYYMMDD.
  const time_t first_kept = static_cast<time_t>(day - keep_days) * 86400;
  std::tm tm{};
  gmtime_r(&first_kept, &tm);
  const std::string keep_from =
      fmt::format("{:04}{:02}{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
  QueryResult r;
  SH_RETURN_IF_ERROR(conn.Query(
      fmt::format("SELECT DISTINCT partition_id FROM system.parts WHERE database = '{}' AND "
                  "table = 'sampled_spans' AND active AND partition_id < '{}' ORDER BY "
                  "partition_id",
                  database, keep_from),
      "TSV", &r));
  for (size_t pos = 0; pos < r.data.size();) {
    size_t nl = r.data.find('\n', pos);
    if (nl == std::string::npos) nl = r.data.size();
    const std::string id = r.data.substr(pos, nl - pos);
    pos = nl + 1;
    // The engine's own ids, YYYYMMDD: nothing else is put in the statement.
    if (id.size() != 8 || id.find_first_not_of("0123456789") != std::string::npos) continue;
    SH_RETURN_IF_ERROR(conn.Query(
        fmt::format("ALTER TABLE {}.sampled_spans DROP PARTITION ID '{}'", database, id), ""));
    if (dropped != nullptr) ++*dropped;
  }
  return Status::Ok();
}

DependencyJob::DependencyJob(SqlConnection& conn, DependencyJobOptions options)
    : conn_(conn), opts_(std::move(options)) {}

DependencyJob::~DependencyJob() {
  Stop();
}

void DependencyJob::Start() {
  thread_ = std::thread([this] { Run(); });
}

void DependencyJob::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status DependencyJob::RunOnce(uint32_t* done_until) {
  const auto now = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  const uint32_t ready = (now - static_cast<uint32_t>(opts_.lag.count())) / 60 * 60;
  if (*done_until == 0) {
    // Where the table left off (a restart), else a bounded look back.
    QueryResult r;
    if (Status st = conn_.Query(
            fmt::format("SELECT toUInt32(max(minute)) FROM {}.dependencies_1m", opts_.database),
            "TSV", &r);
        !st.ok()) {
      return st;
    }
    uint32_t last = 0;
    std::from_chars(r.data.data(), r.data.data() + r.data.size(), last);
    const uint32_t floor = (now - static_cast<uint32_t>(opts_.first_lookback.count())) / 60 * 60;
    *done_until = last == 0 ? floor : std::max(last + 60, floor);
  }
  while (*done_until < ready) {
    const uint32_t to = std::min(ready, *done_until + opts_.max_minutes_per_query * 60);
    if (Status st = ComputeDependencies(conn_, *done_until, to, kParentsBeforeS, kParentsAfterS,
                                        opts_.database);
        !st.ok()) {
      return st;
    }
    *done_until = to;
    if (opts_.may_run && !opts_.may_run()) return Status::Ok();
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Status::Ok();
  }
  // Every edge before done_until is computed: the sampled spans of the days
  // well before it are not needed any more.
  if (*done_until / 86400 != sampled_cut_at_day_) {
    size_t dropped = 0;
    SH_RETURN_IF_ERROR(DropComputedSampledSpans(conn_, *done_until, opts_.database,
                                                kSampledSpansKeepDays, &dropped));
    if (dropped > 0) {
      spdlog::info("dependency job: dropped {} day(s) of sampled spans, computed", dropped);
    }
    sampled_cut_at_day_ = *done_until / 86400;
  }
  return Status::Ok();
}

void DependencyJob::Recompute(uint64_t from_ns, uint64_t to_ns) {
  // The minutes of children of these spans (up to kParentsBeforeS after a
  // parent) and of their parents (up to kParentsAfterS after a child).
  const auto from = static_cast<uint32_t>(from_ns / 1000000000ull);
  const auto to = static_cast<uint32_t>(to_ns / 1000000000ull);
  std::lock_guard<std::mutex> lock(mu_);
  AddPending((from > kParentsAfterS ? from - kParentsAfterS : 0) / 60 * 60,
             (to + kParentsBeforeS) / 60 * 60 + 60);
}

void DependencyJob::AddPending(uint32_t lo, uint32_t hi) {
  const auto now = std::chrono::steady_clock::now();
  // Merge with every range it overlaps or touches.
  auto it = pending_.upper_bound(hi);
  while (it != pending_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.to_s < lo) break;
    lo = std::min(lo, prev->first);
    hi = std::max(hi, prev->second.to_s);
    it = pending_.erase(prev);
  }
  pending_[lo] = Pending{hi, now};
}

uint64_t DependencyJob::pending_minutes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [from, p] : pending_) n += (p.to_s - from) / 60;
  return n;
}

Status DependencyJob::RunRecomputes() {
  while (true) {
    uint32_t from = 0, to = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return Status::Ok();
      const auto quiet = std::chrono::steady_clock::now() - opts_.lag;
      auto it = std::find_if(pending_.begin(), pending_.end(),
                             [&](const auto& kv) { return kv.second.touched <= quiet; });
      if (it == pending_.end()) return Status::Ok();
      // One step at a time, so a range touched again meanwhile merges with
      // what is left of it.
      from = it->first;
      to = std::min(it->second.to_s, from + opts_.max_minutes_per_query * 60);
      Pending rest = it->second;
      pending_.erase(it);
      if (to < rest.to_s) pending_[to] = rest;
    }
    if (Status st =
            ComputeDependencies(conn_, from, to, kParentsBeforeS, kParentsAfterS, opts_.database);
        !st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      AddPending(from, to);  // tried again at the next run
      return st;
    }
    recomputed_minutes_ += (to - from) / 60;
  }
}

void DependencyJob::Run() {
  uint32_t done_until = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    if (opts_.may_run && !opts_.may_run()) {
      // Another node moves the table on meanwhile: start again from where
      // it left off when this node runs the job again.
      done_until = 0;
    } else {
      Status st = RunOnce(&done_until);
      runs_++;
      if (!st.ok()) {
        errors_++;
        spdlog::warn("dependency job: {}", st.message());
      }
    }
    if (Status st = RunRecomputes(); !st.ok()) {
      errors_++;
      spdlog::warn("dependency job, recomputing imported minutes: {}", st.message());
    }
    lock.lock();
    cv_.wait_for(lock, opts_.interval, [&] { return stop_; });
  }
}

}  // namespace spanhouse::storage
