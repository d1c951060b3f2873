#include "query/read_switch.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>
#include <thread>

#include "query/recent_reader.h"

namespace spanhouse::query {

namespace {

thread_local ReadInfo tls_info;

// Adds `item` to the `sep`-separated `list` unless it is there already: the
// calls of one request (a search's ids, then its traces) are told once.
void NoteOnce(std::string* list, const std::string& item, std::string_view sep) {
  if (item.empty()) return;
  for (size_t p = 0; p <= list->size();) {
    const size_t e = std::min(list->find(sep, p), list->size());
    if (std::string_view(*list).substr(p, e - p) == item) return;
    p = e + sep.size();
  }
  if (!list->empty()) *list += sep;
  *list += item;
}

void MergeInto(SpanBatch* out, SpanBatch& from) {
  out->Append(from);
}
template <typename E>
void MergeInto(std::vector<E>* out, std::vector<E>& from) {
  for (auto& e : from) out->push_back(std::move(e));
}
void MergeInto(uint64_t* out, uint64_t& from) {
  *out = from;
}

// Errors of the store itself, which the other store may not have.
bool FallbackWorthy(const Status& st) {
  return st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kInternal ||
         st.code() == StatusCode::kResourceExhausted;
}

}  // namespace

ReadSwitch::ReadSwitch(std::vector<ReadSource> sources, size_t current, bool fallback,
                       std::chrono::milliseconds fallback_after, bool fill_gaps)
    : sources_(std::move(sources)),
      current_(current < sources_.size() ? current : 0),
      fallback_(fallback),
      fallback_after_(fallback_after),
      fill_gaps_(fill_gaps),
      counters_(sources_.size()) {}

ReadSwitch::~ReadSwitch() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return in_flight_ == 0; });
}

Status ReadSwitch::SwitchTo(const std::string& name) {
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i].name == name) {
      const size_t was = current_.exchange(i);
      if (was != i) spdlog::info("reads switched from {} to {}", sources_[was].name, name);
      return Status::Ok();
    }
  }
  std::string names;
  for (const auto& s : sources_) names += (names.empty() ? "" : ", ") + s.name;
  return Status::Invalid("no read source '" + name + "': the sources are " + names);
}

const std::string& ReadSwitch::current() const {
  return sources_[current_.load()].name;
}

std::vector<std::string> ReadSwitch::sources() const {
  std::vector<std::string> out;
  for (const auto& s : sources_) out.push_back(s.name);
  return out;
}

SpanReader* ReadSwitch::Source(const std::string& name) const {
  for (const auto& s : sources_) {
    if (s.name == name) return s.reader;
  }
  return nullptr;
}

ReadInfo ReadSwitch::TakeInfo() {
  ReadInfo out = std::move(tls_info);
  tls_info = {};
  return out;
}

template <typename T, typename Call>
std::shared_ptr<ReadSwitch::Pending<T>> ReadSwitch::Start(size_t source, const Call& call) {
  auto state = std::make_shared<Pending<T>>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }
  SpanReader* reader = sources_[source].reader;
  std::thread([this, state, reader, call] {
    Status st = call(*reader, &state->out);
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->st = std::move(st);
      state->done = true;
    }
    state->cv.notify_all();
    std::lock_guard<std::mutex> lock(mu_);
    if (--in_flight_ == 0) idle_.notify_all();
  }).detach();
  return state;
}

template <typename T, typename Call>
Status ReadSwitch::Run(size_t first, T* out, const Call& call,
                       const std::shared_ptr<Pending<T>>& other_call, size_t* answered) {
  const size_t other = sources_.size() > 1 ? 1 - first : first;
  auto answer = [&](size_t source, Status st) {
    NoteOnce(&tls_info.source, sources_[source].name, ", ");
    if (st.ok()) counters_[source].answered++;
    if (answered != nullptr) *answered = source;
    return st;
  };
  if (!fallback_.load() || other == first) return answer(first, call(*sources_[first].reader, out));
  // The first source's call runs on a thread of its own so that a slow
  // store can be given up on.
  auto state = Start<T>(first, call);
  std::string why;
  {
    std::unique_lock<std::mutex> lock(state->mu);
    if (state->cv.wait_for(lock, fallback_after_, [&] { return state->done; })) {
      if (!FallbackWorthy(state->st)) {
        if (state->st.ok()) MergeInto(out, state->out);
        return answer(first, state->st);
      }
      why = sources_[first].name + " failed: " + state->st.message();
      counters_[first].fallbacks_failed++;
    } else {
      why = sources_[first].name + " did not answer within " +
            std::to_string(fallback_after_.count()) + " ms";
      counters_[first].fallbacks_slow++;
    }
  }
  spdlog::warn("read from {} instead: {}", sources_[other].name, why);
  NoteOnce(&tls_info.fallback, why, "; ");
  if (other_call == nullptr) return answer(other, call(*sources_[other].reader, out));
  std::unique_lock<std::mutex> lock(other_call->mu);
  other_call->cv.wait(lock, [&] { return other_call->done; });
  if (other_call->st.ok()) MergeInto(out, other_call->out);
  return answer(other, other_call->st);
}

template <typename Call>
Status ReadSwitch::Lookup(SpanBatch* out, const Call& call) {
  const size_t first = current_.load();
  const size_t other = sources_.size() > 1 ? 1 - first : first;
  if (!fill_gaps_.load() || other == first) return Run(first, out, call);
  // Both asked at once: a lookup takes as long as the slower store up to
  // fallback_after, never the two one after the other.
  const auto deadline = std::chrono::steady_clock::now() + fallback_after_;
  auto theirs = Start<SpanBatch>(other, call);
  size_t answered = first;
  Status st = Run(first, out, call, theirs, &answered);
  // A fallback is the other's answer already; a refusal (too many spans) stands.
  if (answered != first || (!st.ok() && st.code() != StatusCode::kNotFound)) return st;
  const std::string& name = sources_[other].name;
  std::string why;
  {
    std::unique_lock<std::mutex> lock(theirs->mu);
    if (!theirs->cv.wait_until(lock, deadline, [&] { return theirs->done; })) {
      why = name + " did not answer within " + std::to_string(fallback_after_.count()) + " ms";
      counters_[other].not_completed_slow++;
    } else if (!theirs->st.ok() && theirs->st.code() != StatusCode::kNotFound) {
      // The store's own text stays in the log, as for the query API's 500s.
      spdlog::warn("lookup not completed from {}: {}", name, theirs->st.message());
      why = name + " failed" +
            (theirs->st.code() == StatusCode::kInternal
                 ? std::string(" (the reason is in spanhouse's log)")
                 : ": " + theirs->st.message());
      counters_[other].not_completed_failed++;
    } else {
      const size_t added = AppendMissingSpans(theirs->out, out);
      if (added == 0) return st;
      counters_[other].completed++;
      counters_[other].completed_spans += added;
      NoteOnce(&tls_info.completed_from, name, ", ");
      tls_info.completed_spans += added;
      return Status::Ok();  // found now, if the current store had none of it
    }
  }
  NoteOnce(&tls_info.not_completed, why, "; ");
  return st;
}

Status ReadSwitch::GetTrace(const TraceId& id, SpanBatch* out) {
  return Lookup(out, [id](SpanReader& r, SpanBatch* o) { return r.GetTrace(id, o); });
}

Status ReadSwitch::GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) {
  return Lookup(out, [ids](SpanReader& r, SpanBatch* o) { return r.GetTraces(ids, o); });
}

Status ReadSwitch::FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) {
  return Run(current_.load(), out,
             [query](SpanReader& r, std::vector<TraceId>* o) { return r.FindTraceIds(query, o); });
}

Status ReadSwitch::GetServices(std::vector<std::string>* out) {
  return Run(current_.load(), out,
             [](SpanReader& r, std::vector<std::string>* o) { return r.GetServices(o); });
}

Status ReadSwitch::GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                                 std::vector<OperationInfo>* out) {
  return Run(current_.load(), out,
             [service, any_kind, kind](SpanReader& r, std::vector<OperationInfo>* o) {
               return r.GetOperations(service, any_kind, kind, o);
             });
}

Status ReadSwitch::GetDependencies(uint64_t from_s, uint64_t to_s,
                                   std::vector<DependencyLink>* out) {
  return Run(current_.load(), out, [from_s, to_s](SpanReader& r, std::vector<DependencyLink>* o) {
    return r.GetDependencies(from_s, to_s, o);
  });
}

// The RED views exist in ClickHouse only (the first source), whatever is read.
Status ReadSwitch::GetRedSeries(const RedQuery& query, std::vector<RedSeries>* out) {
  NoteOnce(&tls_info.source, sources_[0].name, ", ");
  return sources_[0].reader->GetRedSeries(query, out);
}

Status ReadSwitch::GetRedSummary(const RedSummaryQuery& query, std::vector<RedSummaryRow>* out) {
  NoteOnce(&tls_info.source, sources_[0].name, ", ");
  return sources_[0].reader->GetRedSummary(query, out);
}

Status ReadSwitch::CountSpansWithAttr(AttrOwner owner, const std::string& key,
                                      const std::string& value, uint64_t* count) {
  return Run(current_.load(), count, [owner, key, value](SpanReader& r, uint64_t* o) {
    return r.CountSpansWithAttr(owner, key, value, o);
  });
}

void ReadSwitch::AppendMetrics(PromText& out) const {
  auto per_source = [&](const char* name, const char* type, const char* help, auto value) {
    out.Family(name, type, help);
    for (size_t i = 0; i < sources_.size(); ++i) {
      out.Sample(name, PromText::Label("source", sources_[i].name), value(i));
    }
  };
  // Failed and slow: the two reasons the other store is turned to or left out.
  auto per_reason = [&](const char* name, const char* help, auto failed, auto slow) {
    out.Family(name, "counter", help);
    for (size_t i = 0; i < sources_.size(); ++i) {
      const std::string source = PromText::Label("source", sources_[i].name) + ",";
      out.Sample(name, source + PromText::Label("reason", "failed"), failed(counters_[i]).load());
      out.Sample(name, source + PromText::Label("reason", "slow"), slow(counters_[i]).load());
    }
  };
  per_source("spanhouse_query_read_source", "gauge",
             "1 for the store the query API reads from, 0 for the others.",
             [&](size_t i) -> uint64_t { return i == current_.load() ? 1 : 0; });
  per_source("spanhouse_query_reads_total", "counter",
             "Reads answered, by the store that answered.",
             [&](size_t i) { return counters_[i].answered.load(); });
  per_reason(
      "spanhouse_query_read_fallbacks_total",
      "Reads answered by the other store because this one failed or was too slow.",
      [](const Counters& c) -> const auto& { return c.fallbacks_failed; },
      [](const Counters& c) -> const auto& { return c.fallbacks_slow; });
  per_source("spanhouse_query_read_completed_total", "counter",
             "Trace lookups (a lookup, or a search's traces) to which this store, not the one "
             "read, added spans (query.fill_gaps).",
             [&](size_t i) { return counters_[i].completed.load(); });
  per_source("spanhouse_query_read_completed_spans_total", "counter",
             "Spans this store added to trace lookups answered by the other.",
             [&](size_t i) { return counters_[i].completed_spans.load(); });
  per_reason(
      "spanhouse_query_read_not_completed_total",
      "Trace lookups answered without this store's spans because it failed or was too slow.",
      [](const Counters& c) -> const auto& { return c.not_completed_failed; },
      [](const Counters& c) -> const auto& { return c.not_completed_slow; });
}

}  // namespace spanhouse::query
