// Parsing and checking of the query API's request parameters: the query
// string, Jaeger's duration strings, timestamps, limits and tag filters.
//
// Every value a request sends goes through here before it reaches a
// SpanReader, and every malformed or out-of-range one is refused with a
// kInvalidArgument Status (a 400 in Jaeger's envelope) naming the parameter:
// the store only ever sees values that fit their types, as bound parameters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "query/span_reader.h"

namespace spanhouse::query {

// The decoded name=value pairs of a request target's query string, in order.
// Names may repeat (Jaeger's tag=, traceID=, service=).
class QueryString {
 public:
  // Fails on malformed percent-encoding, or with more than kMaxPairs pairs.
  static Status Parse(std::string_view target, QueryString* out);
  static constexpr size_t kMaxPairs = 2048;  // room for 1500 traceID= values

  // The first value of `name`, or nullptr.
  const std::string* First(std::string_view name) const;
  // Every value of `name`, in order.
  std::vector<std::string> All(std::string_view name) const;
  bool Has(std::string_view name) const { return First(name) != nullptr; }

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
};

// Percent-decoding of a URL path segment ('+' stays '+'); false when malformed.
bool DecodePathSegment(std::string_view in, std::string* out);

// Limits on what a request may ask for.
struct QueryLimits {
  uint32_t max_traces = 1500;      // limit= of a trace search
  uint32_t default_traces = 100;   // Jaeger's default limit
  uint32_t max_trace_ids = 1500;   // traceID= values in one request
  uint32_t max_tags = 32;          // tag filters in one search
  size_t max_string_bytes = 1024;  // a service, operation, tag key or value
  uint64_t max_metrics_lookback_s = 31 * 86400;
  uint32_t max_metric_points = 11000;        // points per series (lookback / step)
  uint32_t max_rate_windows_per_step = 100;  // ratePer / step
};

// Go's time.ParseDuration grammar, as Jaeger's minDuration and maxDuration
// take it: one or more decimal numbers each with a unit ("1.5ms", "2s",
// "100us", "1h30m"; units ns, us, µs, μs, ms, s, m, h), or a bare "0".
// `days` also accepts the unit d (24 h) for lookback= values such as "2d".
// Negative durations and ones over ~292 years are refused.
Status ParseDuration(std::string_view text, std::string_view param, uint64_t* ns,
                     bool days = false);

// A decimal unsigned integer no larger than `max` (no sign, no spaces).
Status ParseUnsigned(std::string_view text, std::string_view param, uint64_t max, uint64_t* out);

// tag=key:value (repeatable; the value is everything after the first ':')
// and tags={"key":"value",...} (a JSON object of string values), as Jaeger
// reads them. A later key replaces an earlier one, as in Jaeger's map.
Status ParseTags(const std::vector<std::string>& tag, const std::vector<std::string>& tags_json,
                 const QueryLimits& limits, std::vector<TagFilter>* out);

// Jaeger accepts ids with leading zeros left out and 64-bit ids: pad to 128 bits.
bool ParseTraceIdHex(std::string_view hex, TraceId* out);

// GET /api/traces: a search, or a lookup of the traceID= values.
struct TraceSearchRequest {
  std::vector<TraceId> ids;  // traceID=...; when set the search fields are not used
  TraceQuery query;
};
Status ParseTraceSearch(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                        TraceSearchRequest* out);

// GET /api/dependencies?endTs=ms&lookback=ms (and service= to keep the
// edges that touch one service).
struct DependenciesRequest {
  uint64_t end_s = 0;
  uint64_t lookback_s = 0;
  std::string service;
};
Status ParseDependencies(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                         DependenciesRequest* out);

// GET /api/metrics/{latencies,calls,errors}: Jaeger's SPM parameters.
// Times in ms; step and ratePer are rounded up to whole minutes (red_1m's
// resolution, the answer of /api/metrics/minstep).
Status ParseMetricsQuery(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                         bool want_quantile, RedQuery* out);

// GET /api/spanhouse/services/summary and .../{service}/operations/summary:
// lookback= and endTs= in ms, spanKind= (default server and consumer; "all"
// for every kind).
Status ParseSummary(const QueryString& q, uint64_t now_ns, const QueryLimits& limits,
                    RedSummaryQuery* out);

}  // namespace spanhouse::query
