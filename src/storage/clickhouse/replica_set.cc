#include "storage/clickhouse/replica_set.h"

#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace spanhouse::storage {

ReplicaSet::ReplicaSet(std::vector<RemoteOptions> replicas)
    : opts_(std::move(replicas)), conns_(opts_.size()) {}

Status ReplicaSet::Open(std::vector<RemoteOptions> replicas, std::unique_ptr<ReplicaSet>* out) {
  if (replicas.empty()) return Status::Invalid("clickhouse: a shard with no replica");
  std::unique_ptr<ReplicaSet> set(new ReplicaSet(std::move(replicas)));
  std::string errors;
  Status last;
  for (size_t i = 0; i < set->opts_.size(); ++i) {
    last = RemoteConnection::Open(set->opts_[i], &set->conns_[i]);
    if (last.ok()) {
      set->current_ = i;
      set->version_ = set->conns_[i]->version();
      *out = std::move(set);
      return Status::Ok();
    }
    errors += (errors.empty() ? "" : "; ") + last.message();
  }
  return {last.code(), errors};
}

template <typename F>
Status ReplicaSet::OnReplica(F&& f) {
  // One statement at a time, as on any SqlConnection: the writers and the
  // reader each have connections of their own.
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return Status::Unavailable("clickhouse: connection closed");
  Status st;
  for (size_t k = 0; k < opts_.size(); ++k) {
    const size_t i = (current_ + k) % opts_.size();
    if (conns_[i] == nullptr) {
      st = RemoteConnection::Open(opts_[i], &conns_[i]);
      if (!st.ok()) {
        conns_[i].reset();
        if (st.code() != StatusCode::kUnavailable) return st;
        continue;
      }
    }
    st = f(*conns_[i]);
    if (st.code() != StatusCode::kUnavailable) {
      if (i != current_) {
        ++failovers_;
        spdlog::warn("clickhouse: {} unreachable, statements go to {}", opts_[current_].url,
                     opts_[i].url);
        current_ = i;
      }
      return st;
    }
  }
  return st;
}

Status ReplicaSet::Run(std::string_view sql, std::string_view format, QueryResult* result,
                       const std::vector<QueryParam>& params) {
  return OnReplica([&](RemoteConnection& c) { return c.Run(sql, format, result, params); });
}

Status ReplicaSet::Insert(std::string_view insert, std::string data,
                          const std::vector<QueryParam>& settings) {
  // Kept for the next replica: an insert that failed is sent again as it was.
  return OnReplica([&](RemoteConnection& c) { return c.Insert(insert, data, settings); });
}

void ReplicaSet::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (auto& c : conns_) {
    if (c != nullptr) c->Close();
  }
}

uint64_t ReplicaSet::bytes_sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& c : conns_) n += c != nullptr ? c->bytes_sent() : 0;
  return n;
}

uint64_t ReplicaSet::failovers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failovers_;
}

}  // namespace spanhouse::storage
