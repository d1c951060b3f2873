#include "query/read_switch.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <thread>

namespace spanhouse::query {

namespace {

thread_local ReadInfo tls_info;

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
                       std::chrono::milliseconds fallback_after)
    : sources_(std::move(sources)),
      current_(current < sources_.size() ? current : 0),
      fallback_(fallback),
      fallback_after_(fallback_after),
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
Status ReadSwitch::Run(T* out, const Call& call) {
  const size_t first = current_.load();
  const size_t other = sources_.size() > 1 ? 1 - first : first;
  tls_info.source = sources_[first].name;
  tls_info.fallback.clear();
  if (!fallback_.load() || other == first) {
    Status st = call(*sources_[first].reader, out);
    if (st.ok()) counters_[first].answered++;
    return st;
  }
  // The first source's call runs on a thread of its own so that a slow
  // store can be given up on; the state outlives this call if it is.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status st;
    T out{};
  };
  auto state = std::make_shared<State>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }
  SpanReader* reader = sources_[first].reader;
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
  std::string why;
  {
    std::unique_lock<std::mutex> lock(state->mu);
    if (state->cv.wait_for(lock, fallback_after_, [&] { return state->done; })) {
      if (!FallbackWorthy(state->st)) {
        if (state->st.ok()) {
          MergeInto(out, state->out);
          counters_[first].answered++;
        }
        return state->st;
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
  tls_info.source = sources_[other].name;
  tls_info.fallback = why;
  Status st = call(*sources_[other].reader, out);
  if (st.ok()) counters_[other].answered++;
  return st;
}

Status ReadSwitch::GetTrace(const TraceId& id, SpanBatch* out) {
  return Run(out, [id](SpanReader& r, SpanBatch* o) { return r.GetTrace(id, o); });
}

Status ReadSwitch::GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) {
  return Run(out, [ids](SpanReader& r, SpanBatch* o) { return r.GetTraces(ids, o); });
}

Status ReadSwitch::FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) {
  return Run(out,
             [query](SpanReader& r, std::vector<TraceId>* o) { return r.FindTraceIds(query, o); });
}

Status ReadSwitch::GetServices(std::vector<std::string>* out) {
  return Run(out, [](SpanReader& r, std::vector<std::string>* o) { return r.GetServices(o); });
}

Status ReadSwitch::GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                                 std::vector<OperationInfo>* out) {
  return Run(out, [service, any_kind, kind](SpanReader& r, std::vector<OperationInfo>* o) {
    return r.GetOperations(service, any_kind, kind, o);
  });
}

Status ReadSwitch::GetDependencies(uint64_t from_s, uint64_t to_s,
                                   std::vector<DependencyLink>* out) {
  return Run(out, [from_s, to_s](SpanReader& r, std::vector<DependencyLink>* o) {
    return r.GetDependencies(from_s, to_s, o);
  });
}

// The RED views exist in ClickHouse only (the first source), whatever is read.
Status ReadSwitch::GetRedSeries(const RedQuery& query, std::vector<RedSeries>* out) {
  tls_info = {sources_[0].name, ""};
  return sources_[0].reader->GetRedSeries(query, out);
}

Status ReadSwitch::GetRedSummary(const RedSummaryQuery& query, std::vector<RedSummaryRow>* out) {
  tls_info = {sources_[0].name, ""};
  return sources_[0].reader->GetRedSummary(query, out);
}

Status ReadSwitch::CountSpansWithAttr(AttrOwner owner, const std::string& key,
                                      const std::string& value, uint64_t* count) {
  return Run(count, [owner, key, value](SpanReader& r, uint64_t* o) {
    return r.CountSpansWithAttr(owner, key, value, o);
  });
}

void ReadSwitch::AppendMetrics(PromText& out) const {
  out.Family("spanhouse_query_read_source", "gauge",
             "1 for the store the query API reads from, 0 for the others.");
  for (size_t i = 0; i < sources_.size(); ++i) {
    out.Sample("spanhouse_query_read_source", PromText::Label("source", sources_[i].name),
               i == current_.load() ? 1 : 0);
  }
  out.Family("spanhouse_query_reads_total", "counter",
             "Reads answered, by the store that answered.");
  for (size_t i = 0; i < sources_.size(); ++i) {
    out.Sample("spanhouse_query_reads_total", PromText::Label("source", sources_[i].name),
               counters_[i].answered.load());
  }
  out.Family("spanhouse_query_read_fallbacks_total", "counter",
             "Reads answered by the other store because this one failed or was too slow.");
  for (size_t i = 0; i < sources_.size(); ++i) {
    out.Sample(
        "spanhouse_query_read_fallbacks_total",
        PromText::Label("source", sources_[i].name) + "," + PromText::Label("reason", "failed"),
        counters_[i].fallbacks_failed.load());
    out.Sample(
        "spanhouse_query_read_fallbacks_total",
        PromText::Label("source", sources_[i].name) + "," + PromText::Label("reason", "slow"),
        counters_[i].fallbacks_slow.load());
  }
}

}  // namespace spanhouse::query
