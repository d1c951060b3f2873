#include "query/params.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace spanhouse::query {

namespace {

constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kNsPerMs = 1000 * kNsPerUs;
constexpr uint64_t kNsPerS = 1000 * kNsPerMs;
constexpr uint64_t kMsPerMinute = 60000;
// Times past this many microseconds since the epoch (~2262) do not fit
// int64 nanoseconds.
constexpr uint64_t kMaxMicros = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 1000;
constexpr uint64_t kMaxMillis = kMaxMicros / 1000;
constexpr uint64_t kDefaultTraceLookbackNs = 2 * 86400 * kNsPerS;  // Jaeger's 2 days
constexpr uint64_t kDefaultDependencyLookbackMs = 86400 * 1000;    // Jaeger's 24 h
constexpr uint64_t kDefaultMetricsLookbackMs = 3600 * 1000;        // Jaeger's 1 h
constexpr uint64_t kDefaultRatePerMs = 600 * 1000;                 // Jaeger's 10 min
constexpr size_t kMaxTagsJsonBytes = 64 * 1024;
constexpr size_t kMaxServices = 100;

Status Bad(std::string message) {
  return Status::Invalid(std::move(message));
}

// "unable to parse param 'x': why", as Jaeger words it.
Status BadParam(std::string_view param, std::string_view why) {
  return Bad(fmt::format("unable to parse param '{}': {}", param, why));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; '+' is a space in a query string, not in a path.
bool PercentDecode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+' && plus_is_space) {
      out->push_back(' ');
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi << 4 | lo));
      i += 2;
    } else {
      out->push_back(in[i]);
    }
  }
  return true;
}

Status CheckString(std::string_view value, std::string_view param, const QueryLimits& limits) {
  if (value.size() > limits.max_string_bytes) {
    return BadParam(param, fmt::format("longer than {} bytes", limits.max_string_bytes));
  }
  return Status::Ok();
}

// The unit of a duration, in nanoseconds; 0 if unknown.
uint64_t UnitNs(std::string_view unit, bool days) {
  if (unit == "ns") return 1;
  if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") return kNsPerUs;  // µ, μ
  if (unit == "ms") return kNsPerMs;
  if (unit == "s") return kNsPerS;
  if (unit == "m") return 60 * kNsPerS;
  if (unit == "h") return 3600 * kNsPerS;
  if (days && unit == "d") return 86400 * kNsPerS;
  return 0;
}

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// An optional unsigned parameter, in the units it is sent in.
Status OptionalUnsigned(const QueryString& q, std::string_view param, uint64_t max,
                        uint64_t fallback, uint64_t* out) {
  const std::string* v = q.First(param);
  if (v == nullptr || v->empty()) {
    *out = fallback;
    return Status::Ok();
  }
  return ParseUnsigned(*v, param, max, out);
}

// Go's strconv.ParseBool.
bool ParseBool(std::string_view s, bool* out) {
  for (std::string_view t : {"1", "t", "T", "true", "TRUE", "True"}) {
    if (s == t) return *out = true;
  }
  for (std::string_view f : {"0", "f", "F", "false", "FALSE", "False"}) {
    if (s == f) {
      *out = false;
      return true;
    }
  }
  return false;
}

// Repeated spanKind= values; `fallback` when there is none. "all": no filter.
Status ParseKinds(const QueryString& q, std::vector<uint8_t> fallback, std::vector<uint8_t>* out) {
  const std::vector<std::string> values = q.All("spanKind");
  if (values.empty()) {
    *out = std::move(fallback);
    return Status::Ok();
  }
  out->clear();
  for (const std::string& v : values) {
    if (v == "all") {
      out->clear();
      return Status::Ok();
    }
    uint8_t kind = 0;
    if (!ParseSpanKind(v, &kind) || v.empty()) {
      return BadParam("spanKind",
                      fmt::format("unsupported span kind '{}': want server, client, producer, "
                                  "consumer, internal or unspecified (or SPAN_KIND_SERVER ...)",
                                  v));
    }
    if (std::find(out->begin(), out->end(), kind) == out->end()) out->push_back(kind);
  }
  return Status::Ok();
}

// The request's end time in ms (endTs=, default now).
Status EndMillis(const QueryString& q, uint64_t now_ns, uint64_t* end_ms) {
  return OptionalUnsigned(q, "endTs", kMaxMillis, now_ns / kNsPerMs, end_ms);
}

// lookback= in ms (`fallback` when absent), at most the limit.
Status LookbackMillis(const QueryString& q, uint64_t fallback, const QueryLimits& limits,
                      uint64_t* ms) {
  if (Status st = OptionalUnsigned(q, "lookback", kMaxMillis, fallback, ms); !st.ok()) return st;
  if (*ms > limits.max_metrics_lookback_s * 1000) {
    return BadParam("lookback",
                    fmt::format("over the maximum of {} ms", limits.max_metrics_lookback_s * 1000));
  }
  return Status::Ok();
}

uint64_t RoundUpToMinute(uint64_t ms) {
  return (ms + kMsPerMinute - 1) / kMsPerMinute * 60;
}

}  // namespace

bool DecodePathSegment(std::string_view in, std::string* out) {
  return PercentDecode(in, false, out);
}

Status QueryString::Parse(std::string_view target, QueryString* out) {
  out->pairs_.clear();
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return Status::Ok();
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    if (out->pairs_.size() == kMaxPairs) {
      return Bad(fmt::format("more than {} query parameters", kMaxPairs));
    }
    const size_t eq = pair.find('=');
    std::string name;
    std::string value;
    if (!PercentDecode(pair.substr(0, eq), true, &name) ||
        !PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
                       true, &value)) {
      return Bad("malformed percent-encoding in the query string");
    }
    out->pairs_.emplace_back(std::move(name), std::move(value));
  }
  return Status::Ok();
}

const std::string* QueryString::First(std::string_view name) const {
  for (const auto& [n, v] : pairs_) {
    if (n == name) return &v;
  }
  return nullptr;
}

std::vector<std::string> QueryString::All(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : pairs_) {
    if (n == name) out.push_back(v);
  }
  return out;
}

Status ParseDuration(std::string_view text, std::string_view param, uint64_t* ns, bool days) {
  const std::string_view original = text;
  auto bad = [&](std::string_view why) {
    return BadParam(param, fmt::format("invalid duration '{}': {}", original, why));
  };
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (!text.empty() && text.front() == '-') return bad("must not be negative");
  if (text == "0") {
    *ns = 0;
    return Status::Ok();
  }
  if (text.empty()) return bad("empty");
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  unsigned __int128 total = 0;
  while (!text.empty()) {
    // A decimal number: digits, optionally '.' and more digits.
    uint64_t whole = 0;
    bool overflow = false;
    size_t i = 0;
    size_t digits = 0;
    for (; i < text.size() && IsDigit(text[i]); ++i, ++digits) {
      if (whole > (kMax - 9) / 10) overflow = true;
      whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    }
    uint64_t frac = 0;
    uint64_t frac_scale = 1;
    if (i < text.size() && text[i] == '.') {
      ++i;
      for (; i < text.size() && IsDigit(text[i]); ++i, ++digits) {
        if (frac_scale < 1000000000000000000ull) {  // further digits cannot matter
          frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
          frac_scale *= 10;
        }
      }
    }
    if (digits == 0) return bad("want a number before each unit (e.g. 1.5ms, 2s, 100us)");
    if (overflow) return bad("too large");
    text.remove_prefix(i);
    size_t u = 0;
    while (u < text.size() && !IsDigit(text[u]) && text[u] != '.') ++u;
    if (u == 0) return bad("missing unit (ns, us, ms, s, m, h)");
    const uint64_t unit = UnitNs(text.substr(0, u), days);
    if (unit == 0) {
      return bad(fmt::format("unknown unit '{}' (want ns, us, ms, s, m, h{})", text.substr(0, u),
                             days ? ", d" : ""));
    }
    text.remove_prefix(u);
    total += static_cast<unsigned __int128>(whole) * unit;
    total += static_cast<unsigned __int128>(frac) * unit / frac_scale;
    if (total > kMax) return bad("too large");
  }
  *ns = static_cast<uint64_t>(total);
  return Status::Ok();
}

Status ParseUnsigned(std::string_view text, std::string_view param, uint64_t max, uint64_t* out) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), IsDigit)) {
    return BadParam(param, fmt::format("'{}' is not a non-negative integer", text));
  }
  uint64_t v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || v > max) {
    return BadParam(param, fmt::format("'{}' is out of range (at most {})", text, max));
  }
  *out = v;
  return Status::Ok();
}

Status ParseTags(const std::vector<std::string>& tag, const std::vector<std::string>& tags_json,
                 const QueryLimits& limits, std::vector<TagFilter>* out) {
  out->clear();
  auto add = [&](std::string_view key, std::string_view value) -> Status {
    if (key.empty()) return Bad("malformed tag: the key must not be empty");
    if (Status st = CheckString(key, "tag", limits); !st.ok()) return st;
    if (Status st = CheckString(value, "tag", limits); !st.ok()) return st;
    for (TagFilter& t : *out) {
      if (t.key == key) {
        t.value = std::string(value);
        return Status::Ok();
      }
    }
    if (out->size() == limits.max_tags) {
      return Bad(fmt::format("more than {} tag filters", limits.max_tags));
    }
    out->push_back({std::string(key), std::string(value)});
    return Status::Ok();
  };
  for (const std::string& t : tag) {
    const size_t colon = t.find(':');
    if (colon == std::string::npos) {
      return Bad(fmt::format("malformed 'tag' parameter, expecting key:value, received: {}", t));
    }
    if (Status st =
            add(std::string_view(t).substr(0, colon), std::string_view(t).substr(colon + 1));
        !st.ok()) {
      return st;
    }
  }
  for (const std::string& text : tags_json) {
    if (text.size() > kMaxTagsJsonBytes) {
      return Bad(
          fmt::format("malformed 'tags' parameter: longer than {} bytes", kMaxTagsJsonBytes));
    }
    simdjson::dom::parser parser;
    simdjson::dom::object obj;
    if (parser.parse(text).get_object().get(obj) != simdjson::SUCCESS) {
      return Bad(
          "malformed 'tags' parameter: want a JSON object of strings, e.g. "
          "{\"http.status_code\":\"500\"}");
    }
    for (auto field : obj) {
      std::string_view value;
      if (field.value.get_string().get(value) != simdjson::SUCCESS) {
        return Bad(fmt::format("malformed 'tags' parameter: the value of '{}' is not a string",
                               field.key));
      }
      if (Status st = add(field.key, value); !st.ok()) return st;
    }
  }
  return Status::Ok();
}

bool ParseTraceIdHex(std::string_view hex, TraceId* out) {
  if (hex.empty() || hex.size() > 32) return false;
  std::string padded(32 - hex.size(), '0');
  padded.append(hex);
  return FromHex(padded, out->data(), out->size());
}

Status ParseTraceSearch(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                        TraceSearchRequest* out) {
  *out = {};
  const std::vector<std::string> ids = q.All("traceID");
  if (ids.size() > limits.max_trace_ids) {
    return Bad(fmt::format("more than {} traceID values", limits.max_trace_ids));
  }
  for (const std::string& hex : ids) {
    TraceId id{};
    if (!ParseTraceIdHex(hex, &id)) {
      return Bad(fmt::format("cannot parse traceID param '{}': want up to 32 hex digits", hex));
    }
    if (std::find(out->ids.begin(), out->ids.end(), id) == out->ids.end()) out->ids.push_back(id);
  }
  if (!out->ids.empty()) return Status::Ok();

  TraceQuery& tq = out->query;
  const std::string* service = q.First("service");
  if (service == nullptr || service->empty()) return Bad("parameter 'service' is required");
  tq.service = *service;
  if (Status st = CheckString(tq.service, "service", limits); !st.ok()) return st;
  if (const std::string* op = q.First("operation"); op != nullptr) tq.operation = *op;
  if (Status st = CheckString(tq.operation, "operation", limits); !st.ok()) return st;

  uint64_t end_us = 0;
  if (Status st = OptionalUnsigned(q, "end", kMaxMicros, now_ns / kNsPerUs, &end_us); !st.ok()) {
    return st;
  }
  tq.end_ns = end_us * kNsPerUs;
  uint64_t lookback_ns = kDefaultTraceLookbackNs;
  if (const std::string* lb = q.First("lookback");
      lb != nullptr && !lb->empty() && *lb != "custom") {
    if (Status st = ParseDuration(*lb, "lookback", &lookback_ns, /*days=*/true); !st.ok()) {
      return st;
    }
  }
  uint64_t start_us = 0;
  if (Status st = OptionalUnsigned(
          q, "start", kMaxMicros,
          tq.end_ns > lookback_ns ? (tq.end_ns - lookback_ns) / kNsPerUs : 0, &start_us);
      !st.ok()) {
    return st;
  }
  tq.start_ns = start_us * kNsPerUs;
  if (tq.start_ns > tq.end_ns) return Bad("'start' must not be after 'end'");

  uint64_t limit = 0;
  if (Status st = OptionalUnsigned(q, "limit", std::numeric_limits<uint64_t>::max(), 0, &limit);
      !st.ok()) {
    return st;
  }
  if (limit > limits.max_traces) {
    return BadParam("limit",
                    fmt::format("{} is over the maximum of {} traces", limit, limits.max_traces));
  }
  tq.limit = limit == 0 ? limits.default_traces : static_cast<uint32_t>(limit);

  for (auto [param, dst] : {std::pair{"minDuration", &tq.min_duration_ns},
                            std::pair{"maxDuration", &tq.max_duration_ns}}) {
    if (const std::string* d = q.First(param); d != nullptr && !d->empty()) {
      if (Status st = ParseDuration(*d, param, dst); !st.ok()) return st;
    }
  }
  if (tq.min_duration_ns != 0 && tq.max_duration_ns != 0 &&
      tq.max_duration_ns < tq.min_duration_ns) {
    return Bad("'maxDuration' should be greater than 'minDuration'");
  }
  return ParseTags(q.All("tag"), q.All("tags"), limits, &tq.tags);
}

Status ParseDependencies(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                         DependenciesRequest* out) {
  *out = {};
  uint64_t end_ms = 0;
  if (Status st = EndMillis(q, now_ns, &end_ms); !st.ok()) return st;
  uint64_t lookback_ms = 0;
  if (Status st = LookbackMillis(q, kDefaultDependencyLookbackMs, limits, &lookback_ms); !st.ok()) {
    return st;
  }
  out->end_s = end_ms / 1000;
  out->lookback_s = (lookback_ms + 999) / 1000;
  if (const std::string* s = q.First("service"); s != nullptr) out->service = *s;
  return CheckString(out->service, "service", limits);
}

Status ParseMetricsQuery(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                         bool want_quantile, RedQuery* out) {
  *out = {};
  out->services = q.All("service");
  if (out->services.empty()) {
    return BadParam("service", "please provide at least one service name");
  }
  if (out->services.size() > kMaxServices) {
    return BadParam("service", fmt::format("more than {} services", kMaxServices));
  }
  for (const std::string& s : out->services) {
    if (s.empty()) return BadParam("service", "empty service name");
    if (Status st = CheckString(s, "service", limits); !st.ok()) return st;
  }
  out->want_quantile = want_quantile;
  if (want_quantile) {
    const std::string* text = q.First("quantile");
    double v = 0;
    if (text == nullptr || text->empty()) return BadParam("quantile", "missing");
    auto res = std::from_chars(text->data(), text->data() + text->size(), v);
    if (res.ec != std::errc() || res.ptr != text->data() + text->size() || !std::isfinite(v) ||
        v <= 0 || v > 1) {
      return BadParam("quantile", fmt::format("'{}' is not a number in (0, 1]", *text));
    }
    out->quantile = v;
  }
  if (const std::string* g = q.First("groupByOperation"); g != nullptr && !g->empty()) {
    if (!ParseBool(*g, &out->by_operation)) {
      return BadParam("groupByOperation", fmt::format("'{}' is not a boolean", *g));
    }
  }
  if (Status st = ParseKinds(q, {static_cast<uint8_t>(SpanKind::kServer)}, &out->kinds); !st.ok()) {
    return st;
  }
  uint64_t end_ms = 0;
  uint64_t lookback_ms = 0;
  uint64_t step_ms = 0;
  uint64_t rate_ms = 0;
  if (Status st = EndMillis(q, now_ns, &end_ms); !st.ok()) return st;
  if (Status st = LookbackMillis(q, kDefaultMetricsLookbackMs, limits, &lookback_ms); !st.ok()) {
    return st;
  }
  if (Status st = OptionalUnsigned(q, "step", kMaxMillis, kMsPerMinute, &step_ms); !st.ok()) {
    return st;
  }
  if (Status st = OptionalUnsigned(q, "ratePer", kMaxMillis, kDefaultRatePerMs, &rate_ms);
      !st.ok()) {
    return st;
  }
  if (step_ms == 0) return BadParam("step", "must be positive");
  if (rate_ms == 0) return BadParam("ratePer", "must be positive");
  out->end_s = end_ms / kMsPerMinute * 60;
  out->lookback_s = lookback_ms / 1000;
  out->step_s = RoundUpToMinute(step_ms);
  out->window_s = RoundUpToMinute(std::min(rate_ms, limits.max_metrics_lookback_s * 1000));
  if (out->lookback_s / out->step_s + 1 > limits.max_metric_points) {
    return BadParam("step", fmt::format("lookback / step is over {} points per series",
                                        limits.max_metric_points));
  }
  if (out->window_s / out->step_s > limits.max_rate_windows_per_step) {
    return BadParam("ratePer",
                    fmt::format("ratePer / step is over {}", limits.max_rate_windows_per_step));
  }
  return Status::Ok();
}

Status ParseSummary(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                    RedSummaryQuery* out) {
  *out = {};
  uint64_t end_ms = 0;
  uint64_t lookback_ms = 0;
  if (Status st = EndMillis(q, now_ns, &end_ms); !st.ok()) return st;
  if (Status st = LookbackMillis(q, kDefaultMetricsLookbackMs, limits, &lookback_ms); !st.ok()) {
    return st;
  }
  if (lookback_ms == 0) return BadParam("lookback", "must be positive");
  if (lookback_ms > end_ms) return BadParam("lookback", "reaches before the epoch");
  out->to_s = end_ms / 1000;
  out->from_s = (end_ms - lookback_ms) / 1000;
  if (out->from_s == out->to_s) return BadParam("lookback", "shorter than a second");
  return ParseKinds(
      q, {static_cast<uint8_t>(SpanKind::kServer), static_cast<uint8_t>(SpanKind::kConsumer)},
      &out->kinds);
}

}  // namespace spanhouse::query
