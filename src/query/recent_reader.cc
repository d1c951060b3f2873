#include "query/recent_reader.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "common/clock.h"

namespace spanhouse::query {

size_t AppendMissingSpans(const SpanBatch& from, SpanBatch* out) {
  std::set<std::pair<SpanKey, uint8_t>> have;
  for (uint32_t s = 0; s < out->span_count(); ++s) {
    have.insert({{out->spans.trace_id[s], out->spans.span_id[s]}, out->spans.kind[s]});
  }
  std::vector<uint32_t> which;
  for (uint32_t s = 0; s < from.span_count(); ++s) {
    if (!have.contains({{from.spans.trace_id[s], from.spans.span_id[s]}, from.spans.kind[s]})) {
      which.push_back(s);
    }
  }
  out->AppendSpans(from, which.data(), which.size());
  return which.size();
}

RecentReader::RecentReader(SpanReader& store, RecentTraces& recent, RecentReaderOptions options)
    : ReaderInFront(store), recent_(recent), opts_(options) {}

Status RecentReader::GetTrace(const TraceId& id, SpanBatch* out) {
  const uint64_t now = WallClockNs();
  recent_.Expire(now);
  SpanBatch held;
  const RecentHit hit = recent_.Collect(id, &held);
  const auto skew_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.clock_skew).count());
  if (opts_.sole_writer && hit.root_start_ns != 0 &&
      hit.root_start_ns > recent_.horizon_ns() + skew_ns) {
    // Every span of the trace starts after its root, so was received after
    // the horizon, so is held: the store has nothing more.
    from_memory_.fetch_add(1, std::memory_order_relaxed);
    out->Append(held);
    return Status::Ok();
  }
  Status st = inner_.GetTrace(id, out);
  if (st.code() == StatusCode::kNotFound && hit.spans != 0) st = Status::Ok();
  if (!st.ok()) return st;
  merged_spans_.fetch_add(AppendMissingSpans(held, out), std::memory_order_relaxed);
  return Status::Ok();
}

Status RecentReader::GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) {
  SH_RETURN_IF_ERROR(inner_.GetTraces(ids, out));
  SpanBatch held;
  for (const TraceId& id : ids) recent_.Collect(id, &held);
  merged_spans_.fetch_add(AppendMissingSpans(held, out), std::memory_order_relaxed);
  return Status::Ok();
}

Status RecentReader::FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) {
  std::vector<TraceId> stored;
  SH_RETURN_IF_ERROR(inner_.FindTraceIds(query, &stored));
  // The recent ones first: they are the newest, and the store may not have
  // them yet.
  recent_.Find(query, out);
  std::unordered_set<TraceId, TraceIdHash> have(out->begin(), out->end());
  for (const TraceId& id : stored) {
    if (out->size() >= query.limit) break;
    if (have.insert(id).second) out->push_back(id);
  }
  return Status::Ok();
}

Status RecentReader::GetServices(std::vector<std::string>* out) {
  SH_RETURN_IF_ERROR(inner_.GetServices(out));
  recent_.Services(out);
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return Status::Ok();
}

Status RecentReader::GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                                   std::vector<OperationInfo>* out) {
  SH_RETURN_IF_ERROR(inner_.GetOperations(service, any_kind, kind, out));
  const bool kinds_known =
      std::all_of(out->begin(), out->end(), [](const OperationInfo& o) { return o.kind_known; });
  recent_.Operations(service, any_kind, kind, out);
  // A store that keeps no kinds lists each name once, kind unknown: the
  // names held in memory are listed the same way, not beside them.
  if (!kinds_known) {
    for (OperationInfo& o : *out) o = {std::move(o.name), 0, false};
  }
  auto key = [](const OperationInfo& o) { return std::tie(o.name, o.kind); };
  std::sort(out->begin(), out->end(),
            [&](const OperationInfo& a, const OperationInfo& b) { return key(a) < key(b); });
  out->erase(
      std::unique(out->begin(), out->end(),
                  [&](const OperationInfo& a, const OperationInfo& b) { return key(a) == key(b); }),
      out->end());
  return Status::Ok();
}

void RecentReader::AppendMetrics(PromText& out) const {
  recent_.AppendMetrics(out);
  out.One("spanhouse_recent_answered_from_memory_total", "counter",
          "Trace lookups answered from the recent-traces index alone (every span of the trace "
          "received since the index's horizon).",
          "", from_memory_.load());
  out.One("spanhouse_recent_merged_spans_total", "counter",
          "Spans answered from memory that the store did not have yet.", "", merged_spans_.load());
}

}  // namespace spanhouse::query
