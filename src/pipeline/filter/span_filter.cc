#include "pipeline/filter/span_filter.h"

#include <cstring>
#include <vector>

#include "common/clock.h"

namespace spanhouse::pipeline {

namespace {

constexpr uint64_t kNsPerS = 1000000000ull;

bool AllZero(const uint8_t* p, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc |= w;
  }
  return acc == 0;
}

// Moves the kept rows of `v` down over the dropped ones and shrinks it.
template <class V>
void Compact(V& v, const std::vector<uint8_t>& keep) {
  size_t w = 0;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] == 0) continue;
    if (w != i) v[w] = v[i];
    ++w;
  }
  v.resize(w);
}

// The longest prefix of `s` of at most `max` bytes that does not end inside
// a UTF-8 sequence (continuation bytes are 10xxxxxx).
uint32_t Utf8Cut(std::string_view s, uint32_t max) {
  uint32_t n = max;
  while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

// Indexed by the enums' values.
constexpr const char* kRejectNames[kRejectReasons] = {
    "zero_trace_id", "zero_span_id",      "future_start",
    "too_old",       "negative_duration", "absurd_duration",
};
constexpr const char* kTrimNames[kTrimReasons] = {
    "attributes", "events", "links", "value_length", "key_length", "span_name",
};

const char* ReasonName(RejectReason r) {
  return kRejectNames[static_cast<size_t>(r)];
}

const char* ReasonName(TrimReason r) {
  return kTrimNames[static_cast<size_t>(r)];
}

uint32_t FilterReport::rejected_spans() const {
  uint32_t n = 0;
  for (uint32_t v : rejected) n += v;
  return n;
}

bool FilterReport::clean() const {
  for (uint32_t v : rejected)
    if (v != 0) return false;
  for (uint64_t v : trimmed)
    if (v != 0) return false;
  return true;
}

std::string FilterReport::Message(const FilterLimits& l) const {
  auto s = [](uint64_t v) { return std::to_string(v); };
  const std::string why_rejected[kRejectReasons] = {
      "all-zero trace id",
      "all-zero span id",
      "start time more than " + s(l.max_future_ns / kNsPerS) + " s ahead",
      "start time older than the retention of " + s(l.max_age_ns / kNsPerS) + " s",
      "end time before start time",
      "duration over " + s(l.max_duration_ns / kNsPerS) + " s",
  };
  const std::string why_trimmed[kTrimReasons] = {
      "over " + s(l.max_attributes) + " per span, event or link; dropped",
      "over " + s(l.max_events) + " per span; dropped",
      "over " + s(l.max_links) + " per span; dropped",
      "attribute values over " + s(l.max_value_bytes) + " bytes; cut",
      "attribute keys over " + s(l.max_key_bytes) + " bytes; cut",
      "names past " + s(l.max_span_names_per_service) + " distinct per service; renamed '" +
          std::string(kOtherSpanName) + "'",
  };
  std::string out;
  if (const uint32_t n = rejected_spans(); n != 0) {
    out = "rejected " + s(n) + (n == 1 ? " span:" : " spans:");
    const char* sep = " ";
    for (size_t i = 0; i < kRejectReasons; ++i) {
      if (rejected[i] == 0) continue;
      out += sep + s(rejected[i]) + " " + ReasonName(static_cast<RejectReason>(i)) + " (" +
             why_rejected[i] + ")";
      sep = ", ";
    }
  }
  const char* sep = out.empty() ? "trimmed: " : "; trimmed: ";
  for (size_t i = 0; i < kTrimReasons; ++i) {
    if (trimmed[i] == 0) continue;
    out += sep + s(trimmed[i]) + " " + ReasonName(static_cast<TrimReason>(i)) + " (" +
           why_trimmed[i] + ")";
    sep = ", ";
  }
  return out;
}

void FilterStats::Add(const FilterReport& r) {
  for (size_t i = 0; i < kRejectReasons; ++i) {
    if (r.rejected[i] != 0) rejected[i].fetch_add(r.rejected[i], std::memory_order_relaxed);
  }
  for (size_t i = 0; i < kTrimReasons; ++i) {
    if (r.trimmed[i] != 0) trimmed[i].fetch_add(r.trimmed[i], std::memory_order_relaxed);
  }
}

SpanFilter::SpanFilter(const FilterLimits& limits)
    : limits_(limits), names_(limits.max_span_names_per_service) {}

void SpanFilter::Apply(SpanBatch& batch, uint64_t now_ns, FilterReport* report, bool count,
                       uint64_t record_lsn, bool tail) {
  *report = FilterReport();
  Reject(batch, now_ns, report);
  TrimLists(batch, report);
  TrimStrings(batch, report);
  report->trimmed[static_cast<size_t>(TrimReason::kSpanName)] = names_.Apply(batch);
  if (count && !report->clean()) stats_.Add(*report);
  if (sampler_ != nullptr) {
    report->sampled_out = static_cast<uint32_t>(sampler_->Apply(batch, count));
  }
  if (tail && !count) report->sampled_out += static_cast<uint32_t>(ApplyTail(batch, record_lsn));
}

size_t SpanFilter::ApplyTail(SpanBatch& batch, uint64_t record_lsn) {
  if (tail_ == nullptr) return 0;
  return tail_->Apply(batch, record_lsn, WallClockNs(), false);
}

void SpanFilter::Reject(SpanBatch& batch, uint64_t now_ns, FilterReport* report) const {
  auto& s = batch.spans;
  const size_t n = batch.span_count();
  const uint64_t newest =
      now_ns > UINT64_MAX - limits_.max_future_ns ? UINT64_MAX : now_ns + limits_.max_future_ns;
  const uint64_t oldest = now_ns > limits_.max_age_ns ? now_ns - limits_.max_age_ns : 0;
  std::vector<uint8_t> keep;  // allocated at the first span dropped only
  for (size_t i = 0; i < n; ++i) {
    const uint64_t start = s.start_ns[i];
    const uint64_t end = s.end_ns[i];
    RejectReason why;
    if (AllZero(s.trace_id[i].data(), 16)) {
      why = RejectReason::kZeroTraceId;
    } else if (AllZero(s.span_id[i].data(), 8)) {
      why = RejectReason::kZeroSpanId;
    } else if (start > newest) {
      why = RejectReason::kFutureStart;
    } else if (start < oldest) {
      why = RejectReason::kTooOld;
    } else if (end < start) {
      why = RejectReason::kNegativeDuration;
    } else if (end - start > limits_.max_duration_ns) {
      why = RejectReason::kAbsurdDuration;
    } else {
      continue;
    }
    if (keep.empty()) keep.assign(n, 1);
    keep[i] = 0;
    report->rejected[static_cast<size_t>(why)]++;
  }
  if (keep.empty()) return;
  // Every span column; a column added to Spans must be added here (the
  // size check below fails to compile until it is).
  static_assert(sizeof(SpanBatch::Spans) == 20 * sizeof(std::vector<uint8_t>),
                "SpanFilter::Reject compacts every span column: add the new one");
  Compact(s.trace_id, keep);
  Compact(s.span_id, keep);
  Compact(s.parent_span_id, keep);
  Compact(s.trace_state, keep);
  Compact(s.flags, keep);
  Compact(s.name, keep);
  Compact(s.kind, keep);
  Compact(s.start_ns, keep);
  Compact(s.end_ns, keep);
  Compact(s.status_code, keep);
  Compact(s.status_message, keep);
  Compact(s.resource, keep);
  Compact(s.scope, keep);
  Compact(s.attrs, keep);
  Compact(s.dropped_attributes_count, keep);
  Compact(s.events, keep);
  Compact(s.dropped_events_count, keep);
  Compact(s.links, keep);
  Compact(s.dropped_links_count, keep);
  Compact(s.metrics_only, keep);
}

void SpanFilter::TrimLists(SpanBatch& batch, FilterReport* report) const {
  uint64_t attrs = 0;
  uint64_t events = 0;
  uint64_t links = 0;
  // Shortens `r` to `max`; adds what it cut to `dropped` and `total`.
  auto cut = [](Range& r, uint32_t max, uint32_t& dropped, uint64_t& total) {
    if (r.size() <= max) return;
    const uint32_t extra = r.size() - max;
    r.end = r.begin + max;
    dropped += extra;
    total += extra;
  };
  auto& s = batch.spans;
  for (size_t i = 0; i < batch.span_count(); ++i) {
    cut(s.attrs[i], limits_.max_attributes, s.dropped_attributes_count[i], attrs);
    cut(s.events[i], limits_.max_events, s.dropped_events_count[i], events);
    cut(s.links[i], limits_.max_links, s.dropped_links_count[i], links);
    for (uint32_t e = s.events[i].begin; e < s.events[i].end; ++e) {
      cut(batch.events.attrs[e], limits_.max_attributes, batch.events.dropped_attributes_count[e],
          attrs);
    }
    for (uint32_t l = s.links[i].begin; l < s.links[i].end; ++l) {
      cut(batch.links.attrs[l], limits_.max_attributes, batch.links.dropped_attributes_count[l],
          attrs);
    }
  }
  report->trimmed[static_cast<size_t>(TrimReason::kAttributes)] += attrs;
  report->trimmed[static_cast<size_t>(TrimReason::kEvents)] += events;
  report->trimmed[static_cast<size_t>(TrimReason::kLinks)] += links;
}

void SpanFilter::TrimStrings(SpanBatch& batch, FilterReport* report) const {
  uint64_t values = 0;
  uint64_t keys = 0;
  const uint32_t max_value = limits_.max_value_bytes;
  const uint32_t max_key = limits_.max_key_bytes;
  auto trim = [&](AttrColumns& c, Range r) {
    for (uint32_t a = r.begin; a < r.end; ++a) {
      if (c.key[a].len > max_key) {
        c.key[a].len = Utf8Cut(batch.Str(c.key[a]), max_key);
        ++keys;
      }
      if (c.value[a].len > max_value) {
        const ValueType t = c.type[a];
        // Raw bytes are cut anywhere; text at a character boundary. A cut
        // number or JSON array/map would no longer parse: it becomes text.
        c.value[a].len =
            t == ValueType::kBytes ? max_value : Utf8Cut(batch.Str(c.value[a]), max_value);
        if (t != ValueType::kBytes) c.type[a] = ValueType::kString;
        ++values;
      }
    }
  };
  auto& s = batch.spans;
  for (size_t i = 0; i < batch.span_count(); ++i) {
    trim(batch.span_attrs, s.attrs[i]);
    for (uint32_t e = s.events[i].begin; e < s.events[i].end; ++e) {
      trim(batch.event_attrs, batch.events.attrs[e]);
    }
    for (uint32_t l = s.links[i].begin; l < s.links[i].end; ++l) {
      trim(batch.link_attrs, batch.links.attrs[l]);
    }
  }
  for (const Range& r : batch.resources.attrs) trim(batch.resource_attrs, r);
  for (const Range& r : batch.scopes.attrs) trim(batch.scope_attrs, r);
  report->trimmed[static_cast<size_t>(TrimReason::kValueLength)] += values;
  report->trimmed[static_cast<size_t>(TrimReason::kKeyLength)] += keys;
}

}  // namespace spanhouse::pipeline
