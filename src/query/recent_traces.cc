#include "query/recent_traces.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "common/clock.h"
#include "pipeline/durable/records.h"

namespace spanhouse::query {

namespace {

// What a held span costs beside its batch: its key.
constexpr size_t kPerSpanBytes = sizeof(std::pair<uint64_t, uint32_t>);

bool AttrIn(const SpanBatch& b, const AttrColumns& cols, Range r, std::string_view key,
            std::string_view value) {
  for (uint32_t a = r.begin; a < r.end; ++a) {
    if (b.Str(cols.key[a]) == key && b.Str(cols.value[a]) == value) return true;
  }
  return false;
}

// One tag filter on span `s`, as the stores read it (storage/clickhouse's
// TagCondition): the span's or its resource's attribute, or the span field
// Jaeger shows under that key. user_fields.<key> is the attribute <key>.
bool TagMatches(const SpanBatch& b, uint32_t s, const TagFilter& tag) {
  constexpr std::string_view kUserFields = "user_fields.";
  std::string_view key = tag.key;
  if (key.size() > kUserFields.size() && key.starts_with(kUserFields)) {
    key.remove_prefix(kUserFields.size());
  }
  const SpanBatch::Spans& sp = b.spans;
  if (AttrIn(b, b.span_attrs, sp.attrs[s], key, tag.value) ||
      AttrIn(b, b.resource_attrs, b.resources.attrs[sp.resource[s]], key, tag.value)) {
    return true;
  }
  const uint8_t status = sp.status_code[s];
  if (key == "error") {
    return (tag.value == "true" && status == 2) || (tag.value == "false" && status != 2);
  }
  if (key == "otel.status_code") {
    return (tag.value == "ERROR" && status == 2) || (tag.value == "OK" && status == 1) ||
           (tag.value == "UNSET" && status == 0);
  }
  if (key == "span.kind") {
    uint8_t kind = 0;
    return !tag.value.empty() && ParseSpanKind(tag.value, &kind) && kind == sp.kind[s];
  }
  if (key == "otel.status_description") return b.Str(sp.status_message[s]) == tag.value;
  if (key == "otel.scope.name") return b.Str(b.scopes.name[sp.scope[s]]) == tag.value;
  if (key == "otel.scope.version") return b.Str(b.scopes.version[sp.scope[s]]) == tag.value;
  return false;
}

bool SpanMatches(const SpanBatch& b, uint32_t s, const TraceQuery& q) {
  const SpanBatch::Spans& sp = b.spans;
  if (sp.metrics_only[s] != 0) return false;
  if (sp.start_ns[s] < q.start_ns || sp.start_ns[s] > q.end_ns) return false;
  if (b.Str(b.resources.service_name[sp.resource[s]]) != q.service) return false;
  if (!q.operation.empty() && b.Str(sp.name[s]) != q.operation) return false;
  const uint64_t duration = sp.end_ns[s] > sp.start_ns[s] ? sp.end_ns[s] - sp.start_ns[s] : 0;
  if (q.min_duration_ns != 0 && duration < q.min_duration_ns) return false;
  if (q.max_duration_ns != 0 && duration > q.max_duration_ns) return false;
  return std::all_of(q.tags.begin(), q.tags.end(),
                     [&](const TagFilter& tag) { return TagMatches(b, s, tag); });
}

}  // namespace

RecentTraces::RecentTraces(RecentTracesOptions options, MemoryBudget* budget, uint64_t start_ns)
    : opts_(options), budget_(budget), start_ns_(start_ns) {}

RecentTraces::~RecentTraces() {
  if (budget_ != nullptr && bytes_ + kept_bytes_ != 0) budget_->Release(bytes_ + kept_bytes_);
  for (Held& h : held_) h.keep.Ack();
  for (Kept& k : kept_) k.keep.Ack();
}

void RecentTraces::Add(std::unique_ptr<SpanBatch> batch, uint64_t now_ns, sink::Ticket keep) {
  if (opts_.max_bytes == 0 || batch == nullptr) {
    keep.Ack();
    return;
  }
  const SpanBatch::Spans& sp = batch->spans;
  const auto n = static_cast<uint32_t>(batch->span_count());
  std::vector<std::pair<uint64_t, uint32_t>> keys;
  keys.reserve(n);
  for (uint32_t s = 0; s < n; ++s) {
    if (sp.metrics_only[s] == 0) keys.emplace_back(TraceIdHash{}(sp.trace_id[s]), s);
  }
  if (keys.empty()) {
    keep.Ack();
    return;
  }
  std::sort(keys.begin(), keys.end());
  const size_t bytes = batch->MemoryBytes() + keys.capacity() * kPerSpanBytes;

  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now_ns);
  ++batches_total_;
  while (!held_.empty() && bytes_ + bytes > opts_.max_bytes) {
    DropOldest();
  }
  bool room = bytes <= opts_.max_bytes;
  if (room && budget_ != nullptr) {
    // The budget is shared with the requests being received: the index
    // gives back its oldest before it takes from them.
    while (!(room = budget_->TryReserve(bytes)) && !held_.empty()) {
      DropOldest();
    }
  }
  if (!room) {
    ++refused_batches_total_;
    LetGo(now_ns);
    keep.Ack();
    return;
  }
  bytes_ += bytes;
  spans_ += keys.size();
  held_.push_back({std::move(batch), std::move(keys), now_ns, bytes, std::move(keep)});
  // The kept segments are counted once they leave the log, which the sinks'
  // acks decide: checked on every batch taken.
  while (!kept_.empty() && opts_.log != nullptr && opts_.log->kept_bytes() > opts_.disk_max_bytes) {
    DropOldestKept();
    ++dropped_batches_total_;
  }
}

void RecentTraces::LetGo(uint64_t received_ns) {
  let_go_ns_ = std::max(let_go_ns_, received_ns);
}

void RecentTraces::DropOldest(bool to_disk) {
  Held& h = held_.front();
  bytes_ -= h.bytes;
  spans_ -= h.keys.size();
  if (budget_ != nullptr) budget_->Release(h.bytes);
  if (to_disk && h.keep.valid() && wants_keeps()) {
    Kept k;
    k.traces.reserve(h.keys.size());
    for (const auto& [hash, s] : h.keys) {
      if (k.traces.empty() || k.traces.back() != hash) k.traces.push_back(hash);
    }
    k.traces.shrink_to_fit();
    k.bytes = sizeof(Kept) + k.traces.capacity() * sizeof(uint64_t);
    if (budget_ == nullptr || budget_->TryReserve(k.bytes)) {
      k.keep = std::move(h.keep);
      k.received_ns = h.received_ns;
      k.spans = h.keys.size();
      kept_bytes_ += k.bytes;
      kept_spans_ += k.spans;
      ++kept_batches_total_;
      kept_.push_back(std::move(k));
      held_.pop_front();
      return;
    }
  }
  if (to_disk) ++dropped_batches_total_;
  h.keep.Ack();
  LetGo(h.received_ns);
  held_.pop_front();
}

void RecentTraces::DropOldestKept() {
  Kept& k = kept_.front();
  kept_bytes_ -= k.bytes;
  kept_spans_ -= k.spans;
  if (budget_ != nullptr) budget_->Release(k.bytes);
  k.keep.Ack();
  LetGo(k.received_ns);
  kept_.pop_front();
}

void RecentTraces::Observe(std::unique_ptr<SpanBatch> copy, sink::Ticket keep) {
  Add(std::move(copy), WallClockNs(), std::move(keep));
}

void RecentTraces::Expire(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now_ns);
}

void RecentTraces::ExpireLocked(uint64_t now_ns) {
  const auto max_age_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.max_age).count());
  while (!kept_.empty() && kept_.front().received_ns + max_age_ns < now_ns) DropOldestKept();
  while (!held_.empty() && held_.front().received_ns + max_age_ns < now_ns) {
    DropOldest(/*to_disk=*/false);
  }
}

RecentHit RecentTraces::Collect(const TraceId& id, SpanBatch* out) {
  RecentHit hit;
  const uint64_t hash = TraceIdHash{}(id);
  // By id and content: the two halves of a Zipkin shared span share an id.
  std::set<std::pair<SpanId, uint64_t>> seen;
  std::vector<uint32_t> which;
  // Span `s` of `b` joins the answer unless seen already.
  auto take = [&](const SpanBatch& b, uint32_t s) {
    if (b.spans.trace_id[s] != id || b.spans.metrics_only[s] != 0 ||
        !seen.emplace(b.spans.span_id[s], SpanContentHash(b, s)).second) {
      return;
    }
    which.push_back(s);
    if (IsZero(b.spans.parent_span_id[s]) &&
        (hit.root_start_ns == 0 || b.spans.start_ns[s] < hit.root_start_ns)) {
      hit.root_start_ns = b.spans.start_ns[s];
    }
  };
  struct Record {
    pipeline::durable::RecordKind kind{};
    std::string payload;
    uint64_t lsn = 0;
  };
  std::vector<Record> records;
  uint64_t read_errors = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++lookups_total_;
    for (const Held& h : held_) {
      const SpanBatch& b = *h.batch;
      which.clear();
      auto it = std::lower_bound(h.keys.begin(), h.keys.end(), std::make_pair(hash, 0u));
      for (; it != h.keys.end() && it->first == hash; ++it) take(b, it->second);
      if (which.empty()) continue;
      out->AppendSpans(b, which.data(), which.size());
      hit.spans += which.size();
    }
    // Read under the lock, which keeps the keeps; decoded after it.
    for (const Kept& k : kept_) {
      if (!std::binary_search(k.traces.begin(), k.traces.end(), hash)) continue;
      Record r;
      r.lsn = k.keep.lsn();
      ++record_reads_total_;
      if (opts_.log->Read(k.keep, &r.kind, &r.payload).ok()) {
        records.push_back(std::move(r));
      } else {
        ++record_read_errors_total_;
      }
    }
  }
  for (Record& r : records) {
    // As the durable queue reads its records back: the same spans, filtered
    // and sampled as when they were accepted.
    SpanBatch b;
    if (!pipeline::durable::DecodeRequestRecord(r.kind, std::move(r.payload), opts_.filter, &b,
                                                r.lsn)
             .ok()) {
      ++read_errors;
      continue;
    }
    which.clear();
    for (uint32_t s = 0; s < b.span_count(); ++s) take(b, s);
    if (which.empty()) continue;
    out->AppendSpans(b, which.data(), which.size());
    hit.spans += which.size();
  }
  std::lock_guard<std::mutex> lock(mu_);
  record_read_errors_total_ += read_errors;
  if (hit.spans != 0) ++lookup_hits_total_;
  return hit;
}

uint64_t RecentTraces::horizon_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::max(start_ns_, let_go_ns_);
}

void RecentTraces::Find(const TraceQuery& q, std::vector<TraceId>* out) {
  std::unordered_map<TraceId, uint64_t, TraceIdHash> newest;  // trace -> its latest start
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Held& h : held_) {
      const SpanBatch& b = *h.batch;
      for (uint32_t s = 0; s < b.span_count(); ++s) {
        if (!SpanMatches(b, s, q)) continue;
        uint64_t& latest = newest[b.spans.trace_id[s]];
        latest = std::max(latest, b.spans.start_ns[s]);
      }
    }
  }
  std::vector<std::pair<uint64_t, TraceId>> order;
  order.reserve(newest.size());
  for (const auto& [id, start] : newest) order.emplace_back(start, id);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (order.size() > q.limit) order.resize(q.limit);
  for (const auto& entry : order) out->push_back(entry.second);
}

void RecentTraces::Services(std::vector<std::string>* out) {
  std::set<std::string_view> seen;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Held& h : held_) {
    const SpanBatch& b = *h.batch;
    for (const auto& [hash, s] : h.keys) {
      const std::string_view service = b.Str(b.resources.service_name[b.spans.resource[s]]);
      // A span without a service name is listed as the store lists it: not.
      if (!service.empty() && seen.insert(service).second) out->emplace_back(service);
    }
  }
}

void RecentTraces::Operations(const std::string& service, bool any_kind, uint8_t kind,
                              std::vector<OperationInfo>* out) {
  std::set<std::pair<std::string_view, uint8_t>> seen;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Held& h : held_) {
    const SpanBatch& b = *h.batch;
    for (const auto& [hash, s] : h.keys) {
      if (!any_kind && b.spans.kind[s] != kind) continue;
      if (b.Str(b.resources.service_name[b.spans.resource[s]]) != service) continue;
      if (seen.emplace(b.Str(b.spans.name[s]), b.spans.kind[s]).second) {
        out->push_back({std::string(b.Str(b.spans.name[s])), b.spans.kind[s]});
      }
    }
  }
}

void RecentTraces::AppendMetrics(PromText& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out.One("spanhouse_recent_bytes", "gauge",
          "Bytes of recent spans held in memory for reads by trace id (query.recent).", "", bytes_);
  out.One("spanhouse_recent_spans", "gauge", "Spans held in the recent-traces index.", "", spans_);
  const uint64_t now = WallClockNs();
  const uint64_t horizon = std::max(start_ns_, let_go_ns_);
  out.One("spanhouse_recent_covered_seconds", "gauge",
          "Seconds since the recent-traces index's horizon: every span the primary sink took "
          "since is held (the process's uptime until a batch is let go).",
          "", now > horizon ? (now - horizon) / 1'000'000'000ull : 0);
  out.One("spanhouse_recent_batches_total", "counter", "Batches handed to the recent-traces index.",
          "", batches_total_);
  out.One("spanhouse_recent_evicted_batches_total", "counter",
          "Batches let go before query.recent_max_age_s for want of room in memory or on disk "
          "(oldest first).",
          "", dropped_batches_total_);
  out.One("spanhouse_recent_refused_batches_total", "counter",
          "Batches not held: no room in query.recent.max_bytes or the memory budget.", "",
          refused_batches_total_);
  out.One("spanhouse_recent_disk_spans", "gauge",
          "Spans of the recent-traces index's disk tier: their traces' ids in memory, their "
          "requests in kept segments of the durable queue.",
          "", kept_spans_);
  out.One("spanhouse_recent_disk_index_bytes", "gauge",
          "Memory of the recent-traces index's disk tier (trace id hashes).", "", kept_bytes_);
  out.One("spanhouse_recent_disk_bytes", "gauge",
          "Bytes of durable queue segments kept after every sink stored them, for the "
          "recent-traces index (query.recent_disk_bytes).",
          "", opts_.log != nullptr ? opts_.log->kept_bytes() : 0);
  out.One("spanhouse_recent_kept_batches_total", "counter",
          "Batches moved from the recent-traces index's memory to its disk tier.", "",
          kept_batches_total_);
  out.One("spanhouse_recent_record_reads_total", "counter",
          "Request records read back from the durable queue by trace lookups.", "",
          record_reads_total_);
  out.One("spanhouse_recent_record_read_errors_total", "counter",
          "Request records of the disk tier that could not be read back or decoded.", "",
          record_read_errors_total_);
  out.One("spanhouse_recent_lookups_total", "counter",
          "Trace lookups that asked the recent-traces index.", "", lookups_total_);
  out.One("spanhouse_recent_lookup_hits_total", "counter",
          "Trace lookups that found spans in the recent-traces index.", "", lookup_hits_total_);
}

}  // namespace spanhouse::query
