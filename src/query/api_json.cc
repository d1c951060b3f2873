#include "query/api_json.h"

#include <ctime>

#include <fmt/format.h>

#include "codec/value_text.h"

namespace spanhouse::query {

namespace {

// Jaeger's structured envelope around `data` (JSON text).
std::string Envelope(std::string_view data, size_t total) {
  return fmt::format("{{\"data\":{},\"total\":{},\"limit\":0,\"offset\":0,\"errors\":null}}", data,
                     total);
}

void AppendNumber(std::string& out, double v) {
  codec::AppendJsonDouble(out, v);
}

void AppendPoint(std::string& out, bool& first, uint64_t time_s, double value) {
  out += first ? "" : ",";
  first = false;
  out += "{\"gaugeValue\":{\"doubleValue\":";
  AppendNumber(out, value);
  out += "},\"timestamp\":\"";
  out += Rfc3339(time_s);
  out += "\"}";
}

void AppendLabel(std::string& out, std::string_view name, std::string_view value) {
  out += "{\"name\":";
  codec::AppendJsonString(out, name);
  out += ",\"value\":";
  codec::AppendJsonString(out, value);
  out += '}';
}

}  // namespace

std::string Rfc3339(uint64_t unix_s) {
  const auto t = static_cast<time_t>(unix_s);
  struct tm tm {};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string RenderStringList(const std::vector<std::string>& values) {
  std::string data = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i != 0) data += ',';
    codec::AppendJsonString(data, values[i]);
  }
  data += ']';
  return Envelope(data, values.size());
}

std::string RenderOperations(const std::vector<OperationInfo>& ops) {
  std::string data = "[";
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i != 0) data += ',';
    data += "{\"name\":";
    codec::AppendJsonString(data, ops[i].name);
    data += ",\"spanKind\":";
    codec::AppendJsonString(data, SpanKindName(ops[i].kind));
    data += '}';
  }
  data += ']';
  return Envelope(data, ops.size());
}

std::string RenderDependencies(const std::vector<DependencyLink>& links) {
  std::string data = "[";
  for (size_t i = 0; i < links.size(); ++i) {
    if (i != 0) data += ',';
    data += "{\"parent\":";
    codec::AppendJsonString(data, links[i].parent);
    data += ",\"child\":";
    codec::AppendJsonString(data, links[i].child);
    data += fmt::format(",\"callCount\":{}}}", links[i].calls);
  }
  data += ']';
  // Jaeger leaves total at 0 here.
  return Envelope(data, 0);
}

std::string RenderNumberData(uint64_t value) {
  return Envelope(std::to_string(value), 0);
}

std::string RenderMissingTraces(const std::vector<TraceId>& missing) {
  if (missing.empty()) return "null";
  std::string out = "[";
  for (size_t i = 0; i < missing.size(); ++i) {
    if (i != 0) out += ',';
    out += fmt::format("{{\"msg\":\"trace not found\",\"traceID\":\"{}\"}}", ToHex(missing[i]));
  }
  out += ']';
  return out;
}

std::string RenderMetricFamily(RedMetric metric, const RedQuery& query,
                               const std::vector<RedSeries>& series) {
  std::string name;
  std::string help;
  switch (metric) {
    case RedMetric::kLatencies:
      name = "service_latencies";
      help = fmt::format("{:.2f}th quantile latency, grouped by service", query.quantile);
      break;
    case RedMetric::kCalls:
      name = "service_call_rate";
      help = "calls/sec, grouped by service";
      break;
    case RedMetric::kErrors:
      name = "service_error_rate";
      help = "error rate, computed as a fraction of errors/sec over calls/sec, grouped by service";
      break;
  }
  if (query.by_operation) {
    name.replace(0, 7, "service_operation");
    help += " & operation";
  }
  std::string out = "{\"name\":";
  codec::AppendJsonString(out, name);
  out += ",\"type\":\"GAUGE\",\"help\":";
  codec::AppendJsonString(out, help);
  out += ",\"metrics\":[";
  const uint64_t points = query.lookback_s / query.step_s + 1;
  const double window = static_cast<double>(query.window_s);
  for (size_t i = 0; i < series.size(); ++i) {
    const RedSeries& s = series[i];
    if (i != 0) out += ',';
    out += "{\"labels\":[";
    AppendLabel(out, "service_name", s.service);
    if (query.by_operation) {
      out += ',';
      AppendLabel(out, "operation", s.operation);
    }
    out += "],\"metricPoints\":[";
    bool first = true;
    if (metric == RedMetric::kCalls) {
      // Every point of the range, zero where its window had no call.
      size_t at = 0;
      for (uint64_t k = points; k-- > 0;) {
        if (query.end_s < k * query.step_s) continue;
        const uint64_t t = query.end_s - k * query.step_s;
        while (at < s.points.size() && s.points[at].time_s < t) ++at;
        const uint64_t calls =
            at < s.points.size() && s.points[at].time_s == t ? s.points[at].calls : 0;
        AppendPoint(out, first, t, static_cast<double>(calls) / window);
      }
    } else {
      for (const RedPoint& p : s.points) {
        if (p.calls == 0) continue;
        AppendPoint(out, first, p.time_s,
                    metric == RedMetric::kErrors
                        ? static_cast<double>(p.errors) / static_cast<double>(p.calls)
                        : p.quantile_ms);
      }
    }
    out += "]}";
  }
  out += "]}";
  return out;
}

std::string RenderSummary(const RedSummaryQuery& query, const std::vector<RedSummaryRow>& rows) {
  const double seconds = static_cast<double>(query.to_s - query.from_s);
  std::string data = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const RedSummaryRow& r = rows[i];
    if (i != 0) data += ',';
    data += "{\"service\":";
    codec::AppendJsonString(data, r.service);
    if (!query.service.empty()) {
      data += ",\"operation\":";
      codec::AppendJsonString(data, r.operation);
      data += ",\"span_kind\":";
      codec::AppendJsonString(data, SpanKindName(r.kind));
    }
    data += ",\"rate_per_s\":";
    AppendNumber(data, seconds > 0 ? static_cast<double>(r.calls) / seconds : 0);
    data += ",\"error_rate\":";
    AppendNumber(data,
                 r.calls > 0 ? static_cast<double>(r.errors) / static_cast<double>(r.calls) : 0);
    data += ",\"p50_ms\":";
    AppendNumber(data, r.p50_ms);
    data += ",\"p95_ms\":";
    AppendNumber(data, r.p95_ms);
    data += ",\"p99_ms\":";
    AppendNumber(data, r.p99_ms);
    data += fmt::format(",\"calls\":{},\"errors\":{}}}", r.calls, r.errors);
  }
  data += ']';
  return Envelope(data, rows.size());
}

}  // namespace spanhouse::query
