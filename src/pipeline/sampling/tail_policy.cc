#include "pipeline/sampling/tail_policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "pipeline/sampling/trace_state.h"

namespace spanhouse::pipeline {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The first word of `s` (removed from it).
std::string_view Word(std::string_view* s) {
  *s = Trim(*s);
  const size_t end = std::min(s->find(' '), s->find('\t'));
  const std::string_view w = s->substr(0, end);
  *s = end == std::string_view::npos ? std::string_view() : Trim(s->substr(end));
  return w;
}

// The last word of `s` (removed from it).
std::string_view LastWord(std::string_view* s) {
  *s = Trim(*s);
  const size_t space = s->find_last_of(" \t");
  const std::string_view w = space == std::string_view::npos ? *s : s->substr(space + 1);
  *s = space == std::string_view::npos ? std::string_view() : Trim(s->substr(0, space));
  return w;
}

bool ParseNumber(std::string_view s, double* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(*out) && *out >= 0;
}

// "250us", "500ms", "2s", "1m".
bool ParseDuration(std::string_view s, uint64_t* ns) {
  size_t unit = s.find_first_not_of("0123456789.");
  if (unit == std::string_view::npos || unit == 0) return false;
  double v = 0;
  if (!ParseNumber(s.substr(0, unit), &v)) return false;
  const std::string_view u = s.substr(unit);
  double scale = 0;
  if (u == "us") scale = 1e3;
  if (u == "ms") scale = 1e6;
  if (u == "s") scale = 1e9;
  if (u == "m") scale = 60e9;
  if (scale == 0 || v * scale > 1e18) return false;
  *ns = static_cast<uint64_t>(std::llround(v * scale));
  return true;
}

Status Bad(std::string_view policy, std::string_view why) {
  return Status::Invalid("tail sampling policy '" + std::string(policy) + "': " + std::string(why));
}

Status ParseOne(std::string_view text, TailPolicy* p) {
  p->name = std::string(text);
  std::string_view rest = text;
  const std::string_view kind = Word(&rest);
  if (kind == "error") {
    p->kind = TailPolicy::Kind::kError;
    if (!rest.empty()) return Bad(text, "error takes nothing after it");
    return Status::Ok();
  }
  if (kind == "latency") {
    p->kind = TailPolicy::Kind::kLatency;
    if (!ParseDuration(LastWord(&rest), &p->min_duration_ns)) {
      return Bad(text, "want latency [SERVICE[/OPERATION]] DURATION, e.g. latency checkout 500ms");
    }
    const size_t slash = rest.find('/');
    p->service = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) p->operation = std::string(rest.substr(slash + 1));
    if (p->service == "*") p->service.clear();
    return Status::Ok();
  }
  if (kind == "attribute") {
    p->kind = TailPolicy::Kind::kAttribute;
    const size_t eq = rest.find('=');
    p->key = std::string(Trim(rest.substr(0, eq)));
    if (eq != std::string_view::npos) {
      p->any_value = false;
      p->value = std::string(Trim(rest.substr(eq + 1)));
    }
    if (p->key.empty()) return Bad(text, "want attribute KEY[=VALUE]");
    return Status::Ok();
  }
  if (kind == "rate") {
    p->kind = TailPolicy::Kind::kRate;
    const std::string_view n = LastWord(&rest);
    if (n.size() < 3 || n.substr(n.size() - 2) != "/s" ||
        !ParseNumber(n.substr(0, n.size() - 2), &p->per_second) || p->per_second <= 0) {
      return Bad(text, "want rate [SERVICE] N/s, e.g. rate 20/s");
    }
    p->service = std::string(rest == "*" ? std::string_view() : rest);
    return Status::Ok();
  }
  if (kind == "probability") {
    p->kind = TailPolicy::Kind::kProbability;
    double v = 0;
    if (!ParseNumber(Trim(rest), &v) || v > 1) return Bad(text, "want probability P, 0 to 1");
    p->threshold = ThresholdOf(v);
    return Status::Ok();
  }
  return Bad(text, "unknown policy; one of error, latency, attribute, rate, probability");
}

bool SpanLevel(TailPolicy::Kind k) {
  return k == TailPolicy::Kind::kError || k == TailPolicy::Kind::kLatency ||
         k == TailPolicy::Kind::kAttribute;
}

}  // namespace

Status TailPolicies::Parse(std::string_view text, std::unique_ptr<TailPolicies>* out) {
  auto p = std::unique_ptr<TailPolicies>(new TailPolicies());
  while (!Trim(text).empty()) {
    const size_t semi = text.find(';');
    const std::string_view one = Trim(text.substr(0, semi));
    if (!one.empty()) {
      TailPolicy policy;
      if (Status st = ParseOne(one, &policy); !st.ok()) return st;
      p->policies_.push_back(std::move(policy));
    }
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  if (p->policies_.empty()) return Status::Invalid("tail sampling: no policy given");
  if (p->policies_.size() > 64) return Status::Invalid("tail sampling: at most 64 policies");
  for (size_t i = 0; i < p->policies_.size(); ++i) {
    p->kept_.push_back(std::make_unique<std::atomic<uint64_t>>(0));
  }
  p->buckets_.resize(p->policies_.size());
  *out = std::move(p);
  return Status::Ok();
}

void TailPolicies::Observe(const SpanBatch& b, uint32_t i, TraceVerdictState* st) const {
  const auto& s = b.spans;
  const std::string_view service = b.Str(b.resources.service_name[s.resource[i]]);
  if (!st->seen) {
    st->seen = true;
    st->randomness = RandomnessOf(s.trace_id[i], ParseOtTraceState(b.Str(s.trace_state[i])));
  }
  if (IsZero(s.parent_span_id[i]) && !st->has_root) {
    st->has_root = true;
    st->service = std::string(service);
  } else if (st->service.empty() && !st->has_root) {
    st->service = std::string(service);
  }
  st->matched = Matches(b, i, st->matched);
}

uint64_t TailPolicies::Matches(const SpanBatch& b, uint32_t i, uint64_t matched) const {
  const auto& s = b.spans;
  const std::string_view service = b.Str(b.resources.service_name[s.resource[i]]);
  const uint64_t duration = s.end_ns[i] >= s.start_ns[i] ? s.end_ns[i] - s.start_ns[i] : 0;
  for (size_t k = 0; k < policies_.size(); ++k) {
    const TailPolicy& p = policies_[k];
    if (!SpanLevel(p.kind) || (matched >> k & 1) != 0) continue;
    bool hit = false;
    switch (p.kind) {
      case TailPolicy::Kind::kError:
        hit = s.status_code[i] == static_cast<uint8_t>(StatusCodeOtlp::kError);
        break;
      case TailPolicy::Kind::kLatency:
        hit = duration >= p.min_duration_ns && (p.service.empty() || p.service == service) &&
              (p.operation.empty() || p.operation == b.Str(s.name[i]));
        break;
      case TailPolicy::Kind::kAttribute:
        for (uint32_t a = s.attrs[i].begin; a < s.attrs[i].end && !hit; ++a) {
          hit = b.Str(b.span_attrs.key[a]) == p.key &&
                (p.any_value || b.Str(b.span_attrs.value[a]) == p.value);
        }
        break;
      default:
        break;
    }
    if (hit) matched |= uint64_t{1} << k;
  }
  return matched;
}

bool TailPolicies::TakeToken(size_t policy, const std::string& service, uint64_t now_ns) {
  const double rate = policies_[policy].per_second * (share_ ? share_() : 1.0);
  const double burst = std::max(1.0, rate);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = buckets_[policy].try_emplace(service);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = burst;
  } else if (now_ns > b.last_ns) {
    b.tokens = std::min(burst, b.tokens + rate * static_cast<double>(now_ns - b.last_ns) / 1e9);
  }
  b.last_ns = std::max(b.last_ns, now_ns);
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

int TailPolicies::Decide(const TraceVerdictState& st, uint64_t now_ns) {
  for (size_t k = 0; k < policies_.size(); ++k) {
    const TailPolicy& p = policies_[k];
    bool keep = false;
    if (SpanLevel(p.kind)) {
      keep = (st.matched >> k & 1) != 0;
    } else if (p.kind == TailPolicy::Kind::kRate) {
      keep = (p.service.empty() || p.service == st.service) && TakeToken(k, st.service, now_ns);
    } else if (p.kind == TailPolicy::Kind::kProbability) {
      keep = st.randomness >= p.threshold;
    }
    if (keep) {
      (*kept_[k])++;
      return static_cast<int>(k);
    }
  }
  dropped_++;
  return kDropped;
}

}  // namespace spanhouse::pipeline
