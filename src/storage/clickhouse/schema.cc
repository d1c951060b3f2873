#include "storage/clickhouse/schema.h"

#include <charconv>
#include <set>

#include <fmt/format.h>

#include "storage/clickhouse/chdb.h"

namespace spanhouse::storage {

Capabilities Capabilities::FromVersion(std::string_view version) {
  Capabilities c;
  auto dot = version.find('.');
  std::from_chars(version.data(), version.data() + version.size(), c.major);
  if (dot != std::string_view::npos) {
    std::from_chars(version.data() + dot + 1, version.data() + version.size(), c.minor);
  }
  auto at_least = [&](int maj, int min) {
    return c.major > maj || (c.major == maj && c.minor >= min);
  };
  c.datetime64 = at_least(20, 1);
  c.low_cardinality = at_least(19, 1);
  c.simple_aggregate = at_least(19, 8);
  c.if_not_exists_column = at_least(19, 1);
  return c;
}

const std::vector<ColumnSpec>& SpanColumns() {
  using L = Logical;
  static const std::vector<ColumnSpec> cols = {
      {Col::kTimestamp, "timestamp", L::kDateTimeSec},
      {Col::kTraceId, "trace_id", L::kTraceId},
      {Col::kSpanId, "span_id", L::kSpanId},
      {Col::kParentSpanId, "parent_span_id", L::kSpanId},
      {Col::kTraceState, "trace_state", L::kString},
      {Col::kFlags, "flags", L::kUInt32},
      {Col::kName, "name", L::kKey},
      {Col::kKind, "kind", L::kUInt8},
      {Col::kStartTime, "start_time", L::kTimeNs},
      {Col::kDurationNs, "duration_ns", L::kUInt64},
      {Col::kStatusCode, "status_code", L::kUInt8},
      {Col::kStatusMessage, "status_message", L::kString},
      {Col::kServiceName, "service_name", L::kKey},
      {Col::kResourceAttrKeys, "resource_attr_keys", L::kKeyArray},
      {Col::kResourceAttrTypes, "resource_attr_types", L::kUInt8Array},
      {Col::kResourceAttrValues, "resource_attr_values", L::kStringArray},
      {Col::kResourceDroppedAttrs, "resource_dropped_attributes_count", L::kUInt32},
      {Col::kResourceSchemaUrl, "resource_schema_url", L::kKey},
      {Col::kScopeName, "scope_name", L::kKey},
      {Col::kScopeVersion, "scope_version", L::kKey},
      {Col::kScopeAttrKeys, "scope_attr_keys", L::kKeyArray},
      {Col::kScopeAttrTypes, "scope_attr_types", L::kUInt8Array},
      {Col::kScopeAttrValues, "scope_attr_values", L::kStringArray},
      {Col::kScopeDroppedAttrs, "scope_dropped_attributes_count", L::kUInt32},
      {Col::kScopeSchemaUrl, "scope_schema_url", L::kKey},
      {Col::kAttrKeys, "attr_keys", L::kKeyArray},
      {Col::kAttrTypes, "attr_types", L::kUInt8Array},
      {Col::kAttrValues, "attr_values", L::kStringArray},
      {Col::kDroppedAttrs, "dropped_attributes_count", L::kUInt32},
      {Col::kEventTimes, "event_times", L::kTimeNsArray},
      {Col::kEventNames, "event_names", L::kKeyArray},
      {Col::kEventAttrKeys, "event_attr_keys", L::kKeyArray2},
      {Col::kEventAttrTypes, "event_attr_types", L::kUInt8Array2},
      {Col::kEventAttrValues, "event_attr_values", L::kStringArray2},
      {Col::kEventDroppedAttrs, "event_dropped_attributes_counts", L::kUInt32Array},
      {Col::kDroppedEvents, "dropped_events_count", L::kUInt32},
      {Col::kLinkTraceIds, "link_trace_ids", L::kTraceIdArray},
      {Col::kLinkSpanIds, "link_span_ids", L::kSpanIdArray},
      {Col::kLinkTraceStates, "link_trace_states", L::kStringArray},
      {Col::kLinkFlags, "link_flags", L::kUInt32Array},
      {Col::kLinkAttrKeys, "link_attr_keys", L::kKeyArray2},
      {Col::kLinkAttrTypes, "link_attr_types", L::kUInt8Array2},
      {Col::kLinkAttrValues, "link_attr_values", L::kStringArray2},
      {Col::kLinkDroppedAttrs, "link_dropped_attributes_counts", L::kUInt32Array},
      {Col::kDroppedLinks, "dropped_links_count", L::kUInt32},
  };
  return cols;
}

namespace {

std::string Scalar(Logical l, const Capabilities& caps, bool table) {
  switch (l) {
    case Logical::kDateTimeSec:
      return "DateTime";
    case Logical::kTraceId:
    case Logical::kTraceIdArray:
      return "FixedString(16)";
    case Logical::kSpanId:
    case Logical::kSpanIdArray:
      return "FixedString(8)";
    case Logical::kString:
    case Logical::kStringArray:
    case Logical::kStringArray2:
      return "String";
    case Logical::kKey:
    case Logical::kKeyArray:
    case Logical::kKeyArray2:
      return table && caps.low_cardinality ? "LowCardinality(String)" : "String";
    case Logical::kUInt8:
    case Logical::kUInt8Array:
    case Logical::kUInt8Array2:
      return "UInt8";
    case Logical::kUInt32:
    case Logical::kUInt32Array:
      return "UInt32";
    case Logical::kUInt64:
      return "UInt64";
    case Logical::kTimeNs:
    case Logical::kTimeNsArray:
      return caps.datetime64 ? "DateTime64(9)" : "UInt64";
  }
  return "String";
}

int Depth(Logical l) {
  switch (l) {
    case Logical::kKeyArray:
    case Logical::kUInt8Array:
    case Logical::kUInt32Array:
    case Logical::kStringArray:
    case Logical::kTimeNsArray:
    case Logical::kTraceIdArray:
    case Logical::kSpanIdArray:
      return 1;
    case Logical::kKeyArray2:
    case Logical::kUInt8Array2:
    case Logical::kStringArray2:
      return 2;
    default:
      return 0;
  }
}

std::string Wrap(std::string t, int depth) {
  for (int i = 0; i < depth; ++i) t = "Array(" + t + ")";
  return t;
}

std::string SpansDdl(const Capabilities& caps) {
  std::string cols;
  for (const auto& c : SpanColumns()) {
    if (!cols.empty()) cols += ",\n  ";
    cols += fmt::format("{} {}", c.name, TableType(c.logical, caps));
  }
  // Sort by hour, then trace id: a trace's spans sit together (a lookup reads
  // one granule range and trace ids compress), and the hour keeps time-range
  // scans cheap. Daily partitions let retention drop whole parts.
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.spans (\n  {}\n) ENGINE = MergeTree\n"
      "PARTITION BY toDate(timestamp)\nORDER BY (toStartOfHour(timestamp), trace_id)",
      kDatabase, cols);
}

}  // namespace

std::string WireType(Logical l, const Capabilities& caps) {
  return Wrap(Scalar(l, caps, false), Depth(l));
}

std::string TableType(Logical l, const Capabilities& caps) {
  return Wrap(Scalar(l, caps, true), Depth(l));
}

std::vector<std::string> SchemaDdl(const Capabilities& caps) {
  std::vector<std::string> ddl;
  ddl.push_back(fmt::format("CREATE DATABASE IF NOT EXISTS {}", kDatabase));
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.schema_version (version UInt32, applied_at DateTime) "
      "ENGINE = MergeTree ORDER BY version",
      kDatabase));
  ddl.push_back(SpansDdl(caps));
  // Trace id -> (first start, last end), so a lookup by id knows which hours
  // of the spans table to read. Fed by a view; merges keep one row per
  // (day, trace).
  std::string start_t = caps.simple_aggregate ? "SimpleAggregateFunction(min, UInt64)"
                                              : "AggregateFunction(min, UInt64)";
  std::string end_t = caps.simple_aggregate ? "SimpleAggregateFunction(max, UInt64)"
                                            : "AggregateFunction(max, UInt64)";
  ddl.push_back(
      fmt::format("CREATE TABLE IF NOT EXISTS {}.trace_index (day Date, trace_id FixedString(16), "
                  "start_ns {}, end_ns {}) ENGINE = AggregatingMergeTree PARTITION BY day "
                  "ORDER BY trace_id",
                  kDatabase, start_t, end_t));
  std::string start_ns = caps.datetime64 ? "toUnixTimestamp64Nano(start_time)" : "start_time";
  std::string agg_min = caps.simple_aggregate ? "min" : "minState";
  std::string agg_max = caps.simple_aggregate ? "max" : "maxState";
  ddl.push_back(fmt::format(
      "CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.trace_index_mv TO {0}.trace_index AS "
      "SELECT toDate(timestamp) AS day, trace_id, {1}(toUInt64({3})) AS start_ns, "
      "{2}(toUInt64({3}) + duration_ns) AS end_ns FROM {0}.spans GROUP BY day, trace_id",
      kDatabase, agg_min, agg_max, start_ns));
  return ddl;
}

Status EnsureSchema(ChdbConnection& conn, Capabilities* caps_out) {
  QueryResult r;
  if (Status st = conn.Query("SELECT version()", "TSV", &r); !st.ok()) return st;
  std::string version = r.data;
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  Capabilities caps = Capabilities::FromVersion(version);
  for (const auto& sql : SchemaDdl(caps)) {
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + sql);
    }
  }
  // Upgrade in place: add any column an older spans table lacks.
  if (Status st = conn.Query(
          fmt::format("SELECT name FROM system.columns WHERE database = '{}' AND table = 'spans'",
                      kDatabase),
          "TSV", &r);
      !st.ok()) {
    return st;
  }
  std::set<std::string> have;
  size_t pos = 0;
  while (pos < r.data.size()) {
    size_t nl = r.data.find('\n', pos);
    if (nl == std::string::npos) nl = r.data.size();
    have.insert(r.data.substr(pos, nl - pos));
    pos = nl + 1;
  }
  for (const auto& c : SpanColumns()) {
    if (have.count(c.name) != 0) continue;
    std::string sql = fmt::format("ALTER TABLE {}.spans ADD COLUMN {} {}", kDatabase, c.name,
                                  TableType(c.logical, caps));
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema upgrade: " + st.message());
    }
  }
  if (Status st =
          conn.Query(fmt::format("INSERT INTO {0}.schema_version SELECT {1}, now() WHERE (SELECT "
                                 "count() FROM {0}.schema_version WHERE version = {1}) = 0",
                                 kDatabase, kSchemaVersion),
                     "");
      !st.ok()) {
    return st;
  }
  if (caps_out != nullptr) *caps_out = caps;
  return Status::Ok();
}

std::string SpanSelectList(const Capabilities& caps) {
  std::string s;
  for (const auto& c : SpanColumns()) {
    if (!s.empty()) s += ", ";
    s += fmt::format("CAST({0} AS {1}) AS {0}", c.name, WireType(c.logical, caps));
  }
  return s;
}

}  // namespace spanhouse::storage
