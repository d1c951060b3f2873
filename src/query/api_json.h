// The JSON answers of the query API other than traces (jaeger_json.h):
// Jaeger's structured envelope {"data":...,"total":N,"limit":0,"offset":0,
// "errors":null} around services, operations and dependency links; Jaeger's
// metricsquery MetricFamily for /api/metrics/*; spanhouse's own summaries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "query/span_reader.h"

namespace spanhouse::query {

// {"data":["a","b"],"total":2,...}
std::string RenderStringList(const std::vector<std::string>& values);
// {"data":[{"name":"GET /","spanKind":"server"},...],"total":N,...}
std::string RenderOperations(const std::vector<OperationInfo>& ops);
// {"data":[{"parent":"a","child":"b","callCount":3},...],...}
std::string RenderDependencies(const std::vector<DependencyLink>& links);
// {"data":60000,...}
std::string RenderNumberData(uint64_t value);
// The errors array of a lookup by several ids: [{"msg":"trace not found",
// "traceID":"..."},...], or "null" when every id was found.
std::string RenderMissingTraces(const std::vector<TraceId>& missing);

// Which series of /api/metrics/* a MetricFamily holds.
enum class RedMetric { kLatencies, kCalls, kErrors };

// Jaeger's MetricFamily (metricsquery.proto as JSON): name, type GAUGE, help
// and per series its labels (service_name, and operation when grouped) and
// points {"gaugeValue":{"doubleValue":x},"timestamp":"RFC 3339"}. Calls are
// per second over each point's window, with a zero for a point whose window
// has none; error rates (errors / calls) and latencies (ms) only where the
// window has calls.
std::string RenderMetricFamily(RedMetric metric, const RedQuery& query,
                               const std::vector<RedSeries>& series);

// {"data":[{"service":..,["operation":..,"span_kind":..,]"rate_per_s":..,
// "error_rate":..,"p50_ms":..,"p95_ms":..,"p99_ms":..,"calls":..,"errors":..}],...}
std::string RenderSummary(const RedSummaryQuery& query, const std::vector<RedSummaryRow>& rows);

// "2024-01-02T03:04:05Z"
std::string Rfc3339(uint64_t unix_s);

}  // namespace spanhouse::query
