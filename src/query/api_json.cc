#include "query/api_json.h"

#include <ctime>

#include <fmt/format.h>

#include "codec/json_writer.h"

namespace spanhouse::query {

namespace {

// Jaeger's structured envelope around `data` (JSON text).
std::string Envelope(std::string_view data, size_t total) {
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("data").Raw(data).Key("total").Uint(total);
  w.Key("limit").Uint(0).Key("offset").Uint(0).Key("errors").Null().EndObject();
  return out;
}

void AppendPoint(codec::JsonWriter& w, uint64_t time_s, double value) {
  w.BeginObject().Key("gaugeValue").BeginObject().Key("doubleValue").Double(value).EndObject();
  w.Key("timestamp").String(Rfc3339(time_s)).EndObject();
}

void AppendLabel(codec::JsonWriter& w, std::string_view name, std::string_view value) {
  w.BeginObject().Key("name").String(name).Key("value").String(value).EndObject();
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
  std::string data;
  codec::JsonWriter w(data);
  w.BeginArray();
  for (const std::string& v : values) w.String(v);
  w.EndArray();
  return Envelope(data, values.size());
}

std::string RenderOperations(const std::vector<OperationInfo>& ops) {
  std::string data;
  codec::JsonWriter w(data);
  w.BeginArray();
  for (const OperationInfo& op : ops) {
    w.BeginObject().Key("name").String(op.name).Key("spanKind").String(SpanKindName(op.kind));
    w.EndObject();
  }
  w.EndArray();
  return Envelope(data, ops.size());
}

std::string RenderDependencies(const std::vector<DependencyLink>& links) {
  std::string data;
  codec::JsonWriter w(data);
  w.BeginArray();
  for (const DependencyLink& link : links) {
    w.BeginObject().Key("parent").String(link.parent).Key("child").String(link.child);
    w.Key("callCount").Uint(link.calls).EndObject();
  }
  w.EndArray();
  // Jaeger leaves total at 0 here.
  return Envelope(data, 0);
}

std::string RenderNumberData(uint64_t value) {
  return Envelope(std::to_string(value), 0);
}

std::string RenderMissingTraces(const std::vector<TraceId>& missing) {
  if (missing.empty()) return "null";
  std::string out;
  codec::JsonWriter w(out);
  w.BeginArray();
  for (const TraceId& id : missing) {
    w.BeginObject().Key("msg").String("trace not found").Key("traceID").String(ToHex(id));
    w.EndObject();
  }
  w.EndArray();
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
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("name").String(name).Key("type").String("GAUGE").Key("help").String(help);
  w.Key("metrics").BeginArray();
  const uint64_t points = query.lookback_s / query.step_s + 1;
  const double window = static_cast<double>(query.window_s);
  for (const RedSeries& s : series) {
    w.BeginObject().Key("labels").BeginArray();
    AppendLabel(w, "service_name", s.service);
    if (query.by_operation) AppendLabel(w, "operation", s.operation);
    w.EndArray().Key("metricPoints").BeginArray();
    if (metric == RedMetric::kCalls) {
      // Every point of the range, zero where its window had no call.
      size_t at = 0;
      for (uint64_t k = points; k-- > 0;) {
        if (query.end_s < k * query.step_s) continue;
        const uint64_t t = query.end_s - k * query.step_s;
        while (at < s.points.size() && s.points[at].time_s < t) ++at;
        const uint64_t calls =
            at < s.points.size() && s.points[at].time_s == t ? s.points[at].calls : 0;
        AppendPoint(w, t, static_cast<double>(calls) / window);
      }
    } else {
      for (const RedPoint& p : s.points) {
        if (p.calls == 0) continue;
        AppendPoint(w, p.time_s,
                    metric == RedMetric::kErrors
                        ? static_cast<double>(p.errors) / static_cast<double>(p.calls)
                        : p.quantile_ms);
      }
    }
    w.EndArray().EndObject();
  }
  w.EndArray().EndObject();
  return out;
}

std::string RenderSummary(const RedSummaryQuery& query, const std::vector<RedSummaryRow>& rows) {
  const double seconds = static_cast<double>(query.to_s - query.from_s);
  std::string data;
  codec::JsonWriter w(data);
  w.BeginArray();
  for (const RedSummaryRow& r : rows) {
    w.BeginObject().Key("service").String(r.service);
    if (!query.service.empty()) {
      w.Key("operation").String(r.operation).Key("span_kind").String(SpanKindName(r.kind));
    }
    w.Key("rate_per_s").Double(seconds > 0 ? static_cast<double>(r.calls) / seconds : 0);
    w.Key("error_rate")
        .Double(r.calls > 0 ? static_cast<double>(r.errors) / static_cast<double>(r.calls) : 0);
    w.Key("p50_ms").Double(r.p50_ms).Key("p95_ms").Double(r.p95_ms).Key("p99_ms").Double(r.p99_ms);
    w.Key("calls").Uint(r.calls).Key("errors").Uint(r.errors).EndObject();
  }
  w.EndArray();
  return Envelope(data, rows.size());
}

}  // namespace spanhouse::query
