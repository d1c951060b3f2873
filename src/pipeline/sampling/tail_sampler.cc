#include "pipeline/sampling/tail_sampler.h"

#include <cstring>
#include <unordered_set>

#include "pipeline/sampling/trace_state.h"

namespace spanhouse::pipeline {

namespace {

// A decision in its record: the trace id, the policy (-1: dropped), flags.
constexpr size_t kItemBytes = 18;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint32_t GetU32(std::string_view p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Appends an attribute to span `i`: its attributes are moved to the end of
// the column first unless they are there already (the rows left behind are
// unreferenced, as the filter leaves them).
void AddSpanAttribute(SpanBatch& b, uint32_t i, std::string_view key, std::string_view value) {
  AttrColumns& a = b.span_attrs;
  Range r = b.spans.attrs[i];
  if (r.end != a.size() || r.begin == r.end) {
    const auto begin = static_cast<uint32_t>(a.size());
    for (uint32_t k = r.begin; k < r.end; ++k) {
      const StrRef kk = a.key[k];
      const ValueType t = a.type[k];
      const StrRef v = a.value[k];
      SpanBatch::AddAttr(a, kk, t, v);
    }
    r = {begin, static_cast<uint32_t>(a.size())};
  }
  SpanBatch::AddAttr(a, b.AddString(key), ValueType::kString, b.AddString(value));
  r.end++;
  b.spans.attrs[i] = r;
}

}  // namespace

TailSampler::TailSampler(TailSamplingOptions options, std::unique_ptr<TailPolicies> policies,
                         MemoryBudget* budget)
    : opts_(options), policies_(std::move(policies)), budget_(budget) {}

TailSampler::~TailSampler() {
  if (budget_ != nullptr) budget_->Release(traces_.size() * kTraceBytes);
}

uint32_t TailSampler::ServiceIndex(std::string_view service) {
  if (service.empty()) return 0;
  auto it = service_index_.find(std::string(service));
  if (it != service_index_.end()) return it->second;
  // A flood of distinct names would grow this without bound: past a cap
  // they share the unnamed slot (the rate policy's "any" bucket).
  if (services_.size() >= 100000) return 0;
  const auto idx = static_cast<uint32_t>(services_.size());
  services_.emplace_back(service);
  service_index_.emplace(std::string(service), idx);
  return idx;
}

void TailSampler::Note(const SpanBatch& b, uint32_t i, Entry* e, uint32_t service) {
  const auto& s = b.spans;
  if ((e->flags & kSeen) == 0) {
    e->flags |= kSeen;
    e->randomness = RandomnessOf(s.trace_id[i], ParseOtTraceState(b.Str(s.trace_state[i])));
  }
  if (IsZero(s.parent_span_id[i]) && (e->flags & kHasRoot) == 0) {
    e->flags |= kHasRoot;
    e->service = service;
  } else if (e->service == 0 && (e->flags & kHasRoot) == 0) {
    e->service = service;
  }
  e->matched = policies_->Matches(b, i, e->matched);
}

bool TailSampler::Observe(const SpanBatch& batch, uint64_t now_ns, bool* decided) {
  const size_t n = batch.span_count();
  const size_t worst = n * kTraceBytes;
  if (!budget_->TryReserve(worst)) {
    stats_.refused_batches++;
    return false;
  }
  const std::vector<uint8_t> foreign = Foreign(batch);
  uint64_t late = 0;
  size_t created = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    created = Open(batch, now_ns, &late, foreign);
  }
  stats_.late_spans += late;
  budget_->Release(worst - created * kTraceBytes);
  if (decided != nullptr) {
    // Nothing of it waits for a decision here: late spans, spans head
    // sampling dropped, and other nodes' spans (theirs to sample).
    size_t sampled = 0;
    size_t others = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (!foreign.empty() && foreign[i] != 0) {
        ++others;
      } else {
        sampled += batch.spans.metrics_only[i];
      }
    }
    *decided = (late > 0 || others > 0) && late + sampled + others == n;
    if (*decided && late > 0) stats_.late_requests++;
  }
  return true;
}

std::vector<uint8_t> TailSampler::Foreign(const SpanBatch& batch) const {
  std::vector<uint8_t> out;
  if (!owns_) return out;
  out.assign(batch.span_count(), 1);
  std::vector<uint32_t> mine;
  SpansOfTraces(
      batch, [&](const TraceId& t) { return owns_(t, batch.peer_view); }, &mine);
  for (const uint32_t i : mine) out[i] = 0;
  return out;
}

std::vector<uint32_t> TailSampler::ServicesOf(const SpanBatch& batch) {
  std::vector<uint32_t> out(batch.resources.service_name.size());
  for (size_t r = 0; r < out.size(); ++r) {
    out[r] = ServiceIndex(batch.Str(batch.resources.service_name[r]));
  }
  return out;
}

size_t TailSampler::Open(const SpanBatch& batch, uint64_t now_ns, uint64_t* late,
                         const std::vector<uint8_t>& foreign) {
  const std::vector<uint32_t> res_service = ServicesOf(batch);
  const auto& s = batch.spans;
  size_t created = 0;
  for (uint32_t i = 0; i < batch.span_count(); ++i) {
    if (s.metrics_only[i] != 0) continue;               // head sampling dropped it
    if (!foreign.empty() && foreign[i] != 0) continue;  // its owner samples it
    auto [it, fresh] = traces_.try_emplace(s.trace_id[i]);
    Entry& e = it->second;
    if (fresh) {
      e.time_ns = now_ns;
      opened_.emplace_back(now_ns, s.trace_id[i]);
      created++;
    }
    if (e.decision != kOpen) {
      ++*late;
      continue;
    }
    Note(batch, i, &e, res_service[s.resource[i]]);
  }
  open_count_ += created;
  return created;
}

void TailSampler::AddToRecord(std::string* record, const TraceId& id, const Entry& e) {
  if (record->empty()) PutU32(record, 0);
  record->append(reinterpret_cast<const char*>(id.data()), id.size());
  record->push_back(static_cast<char>(e.decision));
  record->push_back(static_cast<char>(e.flags & kRootless));
}

uint64_t TailSampler::Write(const std::string& record) {
  if (!persist_ || record.empty()) return 0;
  std::string r = record;
  const auto count = static_cast<uint32_t>((r.size() - 4) / kItemBytes);
  for (int i = 0; i < 4; ++i) r[i] = static_cast<char>(count >> (8 * i));
  const uint64_t lsn = persist_(r);
  if (lsn == 0) stats_.persist_errors++;
  return lsn;
}

void TailSampler::DecideOne(const TraceId& id, Entry* e, uint64_t now_ns, std::string* record) {
  TraceVerdictState st;
  st.matched = e->matched;
  st.service = services_[e->service];
  st.has_root = (e->flags & kHasRoot) != 0;
  st.seen = (e->flags & kSeen) != 0;
  st.randomness = e->randomness;
  e->decision = static_cast<int8_t>(policies_->Decide(st, now_ns));
  if (!st.has_root) e->flags |= kRootless;
  e->time_ns = now_ns;
  decided_.emplace_back(now_ns, id);
  open_count_--;
  decided_count_++;
  AddToRecord(record, id, *e);
}

size_t TailSampler::DecideDue(uint64_t now_ns, bool all) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string record;
  std::vector<Entry*> stamped;
  while (!opened_.empty() && (all || opened_.front().first + opts_.decision_wait_ns <= now_ns)) {
    const TraceId id = opened_.front().second;
    opened_.pop_front();
    auto it = traces_.find(id);
    if (it == traces_.end() || it->second.decision != kOpen) continue;  // decided at once
    DecideOne(id, &it->second, now_ns, &record);
    stamped.push_back(&it->second);
  }
  // Logged before any span is marked by them (under mu_: nobody sees them
  // decided before that).
  const uint64_t lsn = Write(record);
  for (Entry* e : stamped) e->lsn = lsn;
  return stamped.size();
}

size_t TailSampler::Apply(SpanBatch& batch, uint64_t record_lsn, uint64_t now_ns, bool count) {
  const size_t n = batch.span_count();
  auto& s = batch.spans;
  const std::vector<uint8_t> foreign = Foreign(batch);
  if (observing_) {
    uint64_t decided = 0;  // traces with a logged decision keep it
    std::lock_guard<std::mutex> lock(mu_);
    budget_->ForceReserve(Open(batch, now_ns, &decided, foreign) * kTraceBytes);
    return 0;
  }
  // Each span's trace's decision (kOpen: not sampled here) and flags,
  // copied out so the marking needs no lock.
  std::vector<int8_t> decision(n, kOpen);
  std::vector<uint8_t> flags(n, 0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint32_t> res_service;  // looked up once a trace needs deciding here
    // A trace not decided yet (a record spilled, or read back after a
    // restart) is decided now with what is known of it; one open in the
    // live window too gets these spans' evidence first.
    std::vector<Entry*> entry(n, nullptr);
    std::vector<std::pair<TraceId, Entry*>> undecided;
    std::unordered_set<Entry*> listed;
    size_t created = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (s.metrics_only[i] != 0) continue;
      if (!foreign.empty() && foreign[i] != 0) continue;  // its owner marks it
      auto [it, fresh] = traces_.try_emplace(s.trace_id[i]);
      Entry& e = it->second;
      entry[i] = &e;
      if (fresh) {
        e.time_ns = now_ns;
        created++;
      }
      if (e.decision != kOpen) continue;
      if (listed.insert(&e).second) undecided.emplace_back(it->first, &e);
      if (res_service.empty()) res_service = ServicesOf(batch);
      Note(batch, i, &e, res_service[s.resource[i]]);
    }
    if (created > 0) {
      budget_->ForceReserve(created * kTraceBytes);
      open_count_ += created;
    }
    std::string record;
    std::unordered_set<Entry*> logged;
    for (auto& [id, e] : undecided) {
      DecideOne(id, e, now_ns, &record);
      logged.insert(e);
    }
    stats_.decided_at_once += undecided.size();
    // A decision logged before this batch's record must be logged again
    // after it, or the log could drop it while still holding the record.
    if (record_lsn != 0) {
      for (uint32_t i = 0; i < n; ++i) {
        Entry* e = entry[i];
        if (e != nullptr && e->lsn < record_lsn && logged.insert(e).second) {
          AddToRecord(&record, s.trace_id[i], *e);
        }
      }
    }
    if (!record.empty()) {
      const uint64_t lsn = Write(record);
      for (Entry* e : logged) e->lsn = std::max(e->lsn, lsn);
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (entry[i] == nullptr) continue;
      decision[i] = entry[i]->decision;
      flags[i] = entry[i]->flags;
    }
  }
  const auto& list = policies_->policies();
  size_t dropped = 0;
  size_t kept = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (decision[i] == kOpen) continue;
    if (decision[i] < 0) {
      s.metrics_only[i] = 1;
      dropped++;
      continue;
    }
    kept++;
    if (IsZero(s.parent_span_id[i]) || (flags[i] & kRootless) != 0) {
      const auto d = static_cast<size_t>(static_cast<uint8_t>(decision[i]));
      AddSpanAttribute(batch, i, kPolicyAttribute, d < list.size() ? list[d].name : "restored");
    }
  }
  if (count) {
    stats_.kept_spans += kept;
    stats_.dropped_spans += dropped;
  }
  return dropped;
}

void TailSampler::Forget(uint64_t now_ns) {
  size_t forgotten = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A late span's request waits in the window decision_wait before it is
    // marked: its trace's decision is kept that much longer.
    const uint64_t keep = opts_.keep_ns + opts_.decision_wait_ns;
    while (!decided_.empty() && decided_.front().first + keep <= now_ns) {
      const auto [when, id] = decided_.front();
      decided_.pop_front();
      auto it = traces_.find(id);
      if (it == traces_.end() || it->second.decision == kOpen || it->second.time_ns > when) {
        continue;
      }
      traces_.erase(it);
      forgotten++;
    }
  }
  decided_count_ -= forgotten;
  budget_->Release(forgotten * kTraceBytes);
}

void TailSampler::Load(std::string_view payload, uint64_t lsn, uint64_t now_ns) {
  if (payload.size() < 4) return;
  const uint32_t count = GetU32(payload);
  if (payload.size() != 4 + static_cast<size_t>(count) * kItemBytes) return;
  size_t created = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t k = 0; k < count; ++k) {
      const std::string_view item = payload.substr(4 + k * kItemBytes, kItemBytes);
      TraceId id;
      std::memcpy(id.data(), item.data(), id.size());
      auto [it, fresh] = traces_.try_emplace(id);
      Entry& e = it->second;
      if (fresh) created++;
      if (!fresh && e.decision == kOpen) open_count_--;
      if (fresh || e.decision == kOpen) decided_count_++;
      e.decision = static_cast<int8_t>(item[16]);
      e.flags = static_cast<uint8_t>(item[17]) & kRootless;
      e.lsn = std::max(e.lsn, lsn);
      e.time_ns = now_ns;
      decided_.emplace_back(now_ns, id);
    }
  }
  budget_->ForceReserve(created * kTraceBytes);
}

}  // namespace spanhouse::pipeline
