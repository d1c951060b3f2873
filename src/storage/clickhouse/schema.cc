#include "storage/clickhouse/schema.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/engine_config.h"

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
  c.compact_parts = at_least(20, 3);
  c.ttl = at_least(19, 6);
  c.json_type = at_least(25, 3);
  // All there by 22.1 (the last of them, materialize_ttl_recalculate_only,
  // came in 21.x).
  c.ttl_moves = at_least(22, 1);
  // ZSTD and Delta codecs came in 19.1, DoubleDelta and T64 later in 19.x;
  // 20.1 has every codec the schema uses.
  c.codecs = at_least(20, 1);
  // The Default codec (also inside a list, "T64, Default") came in 20.10.
  c.default_codec = at_least(20, 10);
  // auto_statistics_types came in 25.10 with no default; 26.3 made it
  // "minmax, uniq".
  c.auto_statistics = at_least(26, 3);
  c.merge_selector_base = at_least(24, 11);
  // The setting is old; measured on 26.5 with it given in the CREATE's
  // SETTINGS, which older servers read as table settings only.
  c.low_cardinality_numbers = at_least(25, 3);
  return c;
}

namespace {

// How long after a partition's parts have all expired they are dropped at
// the latest: the engine's minimum pause between TTL merges in a partition
// (4 h by default), shortened for short retentions so tests see it.
uint64_t MergeWithTtlTimeout(const SchemaOptions& options) {
  return std::clamp<uint64_t>(options.retention_s / 8, 1, 14400);
}

// Where a column of a span is stored.
enum class In : uint8_t {
  kSpans,      // a column of the spans table
  kResources,  // the resources table (read joined back)
  kRare,       // one of the 21 rare fields: in extras, or its own column (schema 7)
  kExtras,     // the extras column
};

// Every column of a span as read, in block order, and where it is stored.
struct MasterColumn {
  ColumnSpec spec;
  In in;
};

// Codecs, chosen by `spanhouse bench storage` (BENCHMARKS.md, "Storage:
// bytes per span"): the engine's default codec, which its configuration
// (engine_config.h, CompressionOptions) makes LZ4 for parts below
// storage.zstd_min_part_bytes and ZSTD(1) above: inserts and first merges
// are rewritten within seconds, so they take the cheap codec, and the parts
// that stay take the small one. ZSTD(3) where the stream is small and level
// 3 measurably smaller, and on user_fields and attr_values (schema 5: 9.1
// -> 7.1 and 12.0 -> 11.5 bytes per span, no more CPU measured), on
// parent_span_id (6.13 -> 5.96) and resource_id; ZSTD(6) on the attribute
// keys and types (schema 6: 1.41 -> 0.83 and 1.60 -> 1.06; ZSTD(6) on
// user_fields saved 0.28 for a stream ten times larger to compress, and was
// not taken); T64 before the default on
// durations (integers far below 2^64); Delta, DoubleDelta and T64 on times and ids measured no
// smaller and are not used (Delta on start_time neither, with start_time in the sort key).
constexpr const char* kSized = "Default";
constexpr const char* kZstd3 = "ZSTD(3)";
constexpr const char* kZstd6 = "ZSTD(6)";
constexpr const char* kT64Sized = "T64, Default";

const std::vector<MasterColumn>& Master() {
  using L = Logical;
  static const std::vector<MasterColumn> cols = {
      {{Col::kTimestamp, "timestamp", L::kDateTimeSec, kSized}, In::kSpans},
      {{Col::kTraceId, "trace_id", L::kTraceId, kSized}, In::kSpans},
      {{Col::kSpanId, "span_id", L::kSpanId, kSized}, In::kSpans},
      {{Col::kParentSpanId, "parent_span_id", L::kSpanId, kZstd3}, In::kSpans},
      {{Col::kTraceState, "trace_state", L::kString, kSized}, In::kSpans},
      {{Col::kFlags, "flags", L::kUInt32, kSized}, In::kSpans},
      {{Col::kName, "name", L::kKey, kSized}, In::kSpans},
      {{Col::kKind, "kind", L::kUInt8, kSized}, In::kSpans},
      {{Col::kStartTime, "start_time", L::kTimeNs, kSized}, In::kSpans},
      {{Col::kDurationNs, "duration_ns", L::kUInt64, kT64Sized}, In::kSpans},
      {{Col::kStatusCode, "status_code", L::kUInt8, kSized}, In::kSpans},
      {{Col::kStatusMessage, "status_message", L::kString, kSized}, In::kSpans},
      {{Col::kServiceName, "service_name", L::kKey, kSized}, In::kSpans},
      {{Col::kResourceAttrKeys, "resource_attr_keys", L::kKeyArray, kSized}, In::kResources},
      {{Col::kResourceAttrTypes, "resource_attr_types", L::kUInt8Array, kSized}, In::kResources},
      {{Col::kResourceAttrValues, "resource_attr_values", L::kStringArray, kSized}, In::kResources},
      {{Col::kResourceDroppedAttrs, "resource_dropped_attributes_count", L::kUInt32, kSized},
       In::kResources},
      {{Col::kResourceSchemaUrl, "resource_schema_url", L::kKey, kSized}, In::kResources},
      {{Col::kScopeName, "scope_name", L::kKey, kSized}, In::kSpans},
      {{Col::kScopeVersion, "scope_version", L::kKey, kSized}, In::kSpans},
      {{Col::kScopeAttrKeys, "scope_attr_keys", L::kKeyArray, kSized}, In::kRare},
      {{Col::kScopeAttrTypes, "scope_attr_types", L::kUInt8Array, kSized}, In::kRare},
      {{Col::kScopeAttrValues, "scope_attr_values", L::kStringArray, kSized}, In::kRare},
      {{Col::kScopeDroppedAttrs, "scope_dropped_attributes_count", L::kUInt32, kSized}, In::kRare},
      {{Col::kScopeSchemaUrl, "scope_schema_url", L::kKey, kSized}, In::kRare},
      {{Col::kAttrKeys, "attr_keys", L::kKeyArray, kZstd6}, In::kSpans},
      {{Col::kAttrTypes, "attr_types", L::kUInt8Array, kZstd6}, In::kSpans},
      {{Col::kAttrValues, "attr_values", L::kStringArray, kZstd3}, In::kSpans},
      {{Col::kDroppedAttrs, "dropped_attributes_count", L::kUInt32, kSized}, In::kSpans},
      {{Col::kEventTimes, "event_times", L::kTimeNsArray, kSized}, In::kRare},
      {{Col::kEventNames, "event_names", L::kKeyArray, kSized}, In::kRare},
      {{Col::kEventAttrKeys, "event_attr_keys", L::kKeyArray2, kSized}, In::kRare},
      {{Col::kEventAttrTypes, "event_attr_types", L::kUInt8Array2, kSized}, In::kRare},
      {{Col::kEventAttrValues, "event_attr_values", L::kStringArray2, kSized}, In::kRare},
      {{Col::kEventDroppedAttrs, "event_dropped_attributes_counts", L::kUInt32Array, kSized},
       In::kRare},
      {{Col::kDroppedEvents, "dropped_events_count", L::kUInt32, kSized}, In::kRare},
      {{Col::kLinkTraceIds, "link_trace_ids", L::kTraceIdArray, kSized}, In::kRare},
      {{Col::kLinkSpanIds, "link_span_ids", L::kSpanIdArray, kSized}, In::kRare},
      {{Col::kLinkTraceStates, "link_trace_states", L::kStringArray, kSized}, In::kRare},
      {{Col::kLinkFlags, "link_flags", L::kUInt32Array, kSized}, In::kRare},
      {{Col::kLinkAttrKeys, "link_attr_keys", L::kKeyArray2, kSized}, In::kRare},
      {{Col::kLinkAttrTypes, "link_attr_types", L::kUInt8Array2, kSized}, In::kRare},
      {{Col::kLinkAttrValues, "link_attr_values", L::kStringArray2, kSized}, In::kRare},
      {{Col::kLinkDroppedAttrs, "link_dropped_attributes_counts", L::kUInt32Array, kSized},
       In::kRare},
      {{Col::kDroppedLinks, "dropped_links_count", L::kUInt32, kSized}, In::kRare},
      {{Col::kResourceId, "resource_id", L::kUInt64, kZstd3}, In::kSpans},
      {{Col::kUserFields, "user_fields", L::kJson, kZstd3}, In::kSpans},
      // ZSTD(3): as measured for the value (bench/trace_read_layouts.py).
      {{Col::kExtras, "extras", L::kString, kZstd3}, In::kExtras},
  };
  return cols;
}

// The resources-table column a read's resource column comes from.
const char* ResourceSource(Col id) {
  switch (id) {
    case Col::kResourceAttrKeys:
      return "attr_keys";
    case Col::kResourceAttrTypes:
      return "attr_types";
    case Col::kResourceAttrValues:
      return "attr_values";
    case Col::kResourceDroppedAttrs:
      return "dropped_attributes_count";
    case Col::kResourceSchemaUrl:
      return "schema_url";
    default:
      return nullptr;
  }
}

// The columns of schema version 1 that version 2 moved to `resources`.
constexpr const char* kV1ResourceColumns[] = {
    "resource_attr_keys", "resource_attr_types", "resource_attr_values",
    "resource_dropped_attributes_count", "resource_schema_url"};

}  // namespace

namespace {

// The Master() columns whose place is one of `in`.
std::vector<ColumnSpec> MasterIn(std::initializer_list<In> in) {
  std::vector<ColumnSpec> v;
  for (const auto& m : Master()) {
    if (std::find(in.begin(), in.end(), m.in) != in.end()) v.push_back(m.spec);
  }
  return v;
}

}  // namespace

const std::vector<ColumnSpec>& SpanColumns(bool extras_column) {
  static const std::vector<ColumnSpec> extras = MasterIn({In::kSpans, In::kExtras});
  static const std::vector<ColumnSpec> rare = MasterIn({In::kSpans, In::kRare});
  return extras_column ? extras : rare;
}

const std::vector<ColumnSpec>& ReadColumns(bool extras_column) {
  static const std::vector<ColumnSpec> extras = MasterIn({In::kSpans, In::kResources, In::kExtras});
  static const std::vector<ColumnSpec> rare = MasterIn({In::kSpans, In::kResources, In::kRare});
  return extras_column ? extras : rare;
}

const std::vector<ColumnSpec>& RareColumns() {
  static const std::vector<ColumnSpec> cols = MasterIn({In::kRare});
  return cols;
}

std::string ExtrasFromRareColumns() {
  // EncodeSpanExtras writes nothing where every field is empty; the engine
  // writes RowBinary as that encoder does (span_extras_test.cc).
  std::string empty;
  std::string names;
  for (const auto& c : RareColumns()) {
    const char* sep = names.empty() ? "" : ", ";
    names += fmt::format("{}{}", sep, c.name);
    const std::string_view and_ = empty.empty() ? "" : " AND ";
    if (ArrayDepth(c.logical) > 0) {
      empty += fmt::format("{}empty({})", and_, c.name);
    } else if (c.logical == Logical::kUInt32) {
      empty += fmt::format("{}{} = 0", and_, c.name);
    } else {
      empty += fmt::format("{}{} = ''", and_, c.name);
    }
  }
  return fmt::format("if({}, '', formatRowNoNewline('RowBinary', {}))", empty, names);
}

const std::vector<std::pair<const char*, Logical>>& ResourceColumns() {
  using L = Logical;
  static const std::vector<std::pair<const char*, Logical>> cols = {
      {"resource_id", L::kUInt64},      {"service_name", L::kKey},
      {"attr_keys", L::kKeyArray},      {"attr_types", L::kUInt8Array},
      {"attr_values", L::kStringArray}, {"dropped_attributes_count", L::kUInt32},
      {"schema_url", L::kKey},          {"last_seen", L::kDateTimeSec},
  };
  return cols;
}

namespace {

// `layout` is null for the wire type (no LowCardinality).
std::string Scalar(Logical l, const Capabilities& caps, const StorageLayout* layout) {
  const bool lc_keys = layout != nullptr && caps.low_cardinality && layout->low_cardinality_keys;
  const bool lc_values =
      layout != nullptr && caps.low_cardinality && layout->low_cardinality_values;
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
      return "String";
    case Logical::kStringArray:
    case Logical::kStringArray2:
      return lc_values ? "LowCardinality(String)" : "String";
    case Logical::kKey:
    case Logical::kKeyArray:
    case Logical::kKeyArray2:
      return lc_keys ? "LowCardinality(String)" : "String";
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
    case Logical::kJson:  // read back as JSON text; the table's type where the engine has it
      return layout != nullptr && caps.json_type ? "JSON" : "String";
  }
  return "String";
}

std::string Wrap(std::string t, int depth) {
  for (int i = 0; i < depth; ++i) t = "Array(" + t + ")";
  return t;
}

// A table whose TTL and settings follow the configuration: created with
// them, and changed in place at every start (EnsureSchema).
struct TtlTable {
  const char* name;
  std::string ttl;                    // "" for none
  std::vector<std::string> settings;  // "k = v", as the engine prints them back
};

// The spans table, then trace_index and resources.
std::vector<TtlTable> TtlTables(const Capabilities& caps, const SchemaOptions& options) {
  const uint64_t retention = options.retention_s;
  const bool moves = caps.ttl_moves;
  TtlTable spans{"spans", SpansTtl(caps, options), {}};
  if (moves && options.tiered) {
    spans.settings.push_back(fmt::format("storage_policy = '{}'", kTieredPolicy));
  }
  if (caps.merge_selector_base) {
    // A merge is chosen once it would be ~10 times its largest part, not ~5:
    // each span is rewritten by fewer merges on its way to a day's large
    // parts (log base 10 instead of 5 of their size in inserts), at the cost
    // of more parts per partition. Measured end to end (BENCHMARKS.md): 12%
    // less CPU per span over 60 s; merges were the largest share of it.
    spans.settings.emplace_back("merge_selector_base = 10");
  }
  TtlTable index{"trace_index", "", {}};
  TtlTable resources{"resources", "", {}};
  if (caps.ttl && retention > 0) {
    // A day's index rows go with the day's spans: those are all gone once
    // the day's last second is retention_s old.
    index.ttl = fmt::format("toDateTime(day) + toIntervalSecond({})", retention + 86400);
    // A resource row is kept two days past the spans' retention: its
    // last_seen is at most a day older than the newest span using it (the
    // writer stores resources in use again daily, resource_refresh), and
    // spans go by whole daily parts, up to a day after their retention.
    resources.ttl = fmt::format("last_seen + toIntervalSecond({})", retention + 2 * 86400);
  }
  for (TtlTable* t : {&spans, &index}) {
    if (t->ttl.empty()) continue;
    if (moves) {
      // A part goes when all its rows are past the retention, dropped whole
      // rather than rewritten without its expired rows (a rewrite of parts
      // on the cold volume would read and write them there again).
      t->settings.emplace_back("ttl_only_drop_parts = 1");
    }
    t->settings.push_back(fmt::format("merge_with_ttl_timeout = {}", MergeWithTtlTimeout(options)));
  }
  for (TtlTable* t : {&spans, &index, &resources}) {
    // A changed TTL is applied to stored parts by recomputing their TTL
    // (reads the TTL's columns), not by rewriting them.
    if (moves && !t->ttl.empty()) t->settings.emplace_back("materialize_ttl_recalculate_only = 1");
  }
  return {spans, index, resources};
}

// A column of a table: its type and the schema's own codec for it.
struct TableColumn {
  std::string name;
  std::string type;
  std::string codec;
};

// Codecs of the tables other than spans (the spans table's are in Master()).
constexpr const char* kTraceIndexCodec = kSized;
// Times of one day: T64 drops the high bits they share.
constexpr const char* kTraceIndexTimeCodec = kT64Sized;
// red_1m, operations, dependencies_1m: a few rows per minute and key.
constexpr const char* kAggregateCodec = kSized;
constexpr const char* kResourceCodec = kSized;

// The tables with columns, in creation order.
constexpr const char* kTables[] = {"resources",      "spans",           "trace_index", "red_1m",
                                   "red_service_1m", "dependencies_1m", "operations"};

std::string AggregateType(const Capabilities& caps, const char* fn, const char* type) {
  return fmt::format("{}({}, {})",
                     caps.simple_aggregate ? "SimpleAggregateFunction" : "AggregateFunction", fn,
                     type);
}

bool LowCardinalityResourceId(const Capabilities& caps, const StorageLayout& layout) {
  return caps.low_cardinality_numbers && layout.low_cardinality_resource_id;
}

// What a CREATE or ALTER of the spans table needs to be allowed a
// LowCardinality(UInt64) column.
constexpr const char* kAllowLowCardinalityNumbers = "allow_suspicious_low_cardinality_types = 1";

// The columns of `table` (one of kTables).
std::vector<TableColumn> ColumnsOf(std::string_view table, const Capabilities& caps,
                                   const StorageLayout& layout) {
  std::vector<TableColumn> cols;
  if (table == "spans") {
    for (const auto& c : SpanColumns(layout.extras_column)) {
      cols.push_back({c.name, TableType(c.logical, caps, layout), c.codec});
      if (c.id == Col::kResourceId && LowCardinalityResourceId(caps, layout)) {
        cols.back().type = "LowCardinality(UInt64)";
      }
    }
    return cols;
  }
  if (table == "resources") {
    for (const auto& [name, logical] : ResourceColumns()) {
      cols.push_back({name, TableType(logical, caps, layout), kResourceCodec});
    }
    return cols;
  }
  const std::string key_t = TableType(Logical::kKey, caps, layout);
  const std::string sum_t = AggregateType(caps, "sum", "UInt64");
  const char* agg = kAggregateCodec;
  if (table == "trace_index") {
    std::vector<TableColumn> ti = {{"day", "Date", kTraceIndexCodec}};
    if (layout.trace_index_short_id) {
      ti.push_back({"trace_id8", "FixedString(8)", kTraceIndexCodec});
    } else {
      ti.push_back({"trace_id", "FixedString(16)", kTraceIndexCodec});
    }
    if (layout.trace_index_seconds) {
      ti.push_back({"start_s", AggregateType(caps, "min", "UInt32"), kTraceIndexTimeCodec});
      ti.push_back({"end_s", AggregateType(caps, "max", "UInt32"), kTraceIndexTimeCodec});
    } else {
      ti.push_back({"start_ns", AggregateType(caps, "min", "UInt64"), kTraceIndexTimeCodec});
      ti.push_back({"end_ns", AggregateType(caps, "max", "UInt64"), kTraceIndexTimeCodec});
    }
    return ti;
  }
  if (table == "red_1m" || table == "red_service_1m") {
    std::vector<TableColumn> red = {
        {"minute", "DateTime", agg},
        {"service_name", key_t, agg},
        {"name", key_t, agg},
        {"kind", "UInt8", agg},
        {"calls", sum_t, agg},
        {"errors", sum_t, agg},
        {"duration_sum_ns", sum_t, agg},
        {"duration_quantiles",
         fmt::format("AggregateFunction(quantilesTDigest({}), UInt64)", kRedQuantiles), agg}};
    if (table == "red_service_1m") red.erase(red.begin() + 2);  // no operation name
    return red;
  }
  if (table == "dependencies_1m") {
    return {{"minute", "DateTime", agg}, {"parent", key_t, agg},
            {"child", key_t, agg},       {"calls", "UInt64", agg},
            {"errors", "UInt64", agg},   {"computed_at", "DateTime", agg}};
  }
  if (table == "operations") {
    return {{"service_name", key_t, agg},
            {"name", key_t, agg},
            {"kind", "UInt8", agg},
            {"last_seen", AggregateType(caps, "max", "DateTime"), agg}};
  }
  return cols;
}

// The codec a column gets: the layout's choice over the schema's own; ""
// where the server has no codecs or the server's default is chosen.
std::string CodecOf(std::string_view table, const TableColumn& c, const Capabilities& caps,
                    const StorageLayout& layout) {
  if (!caps.codecs) return "";
  std::string codec =
      layout.codec ? layout.codec(CodecQuery{table, c.name, c.type, c.codec}) : c.codec;
  // Without the Default codec the part-size rule cannot apply: ZSTD(1) on
  // every part, the choice before that rule.
  if (!caps.default_codec) {
    if (const size_t at = codec.find("Default"); at != std::string::npos) {
      codec.replace(at, 7, "ZSTD(1)");
    }
  }
  return codec;
}

// "name type [CODEC(...)]".
std::string ColumnDef(std::string_view table, const TableColumn& c, const Capabilities& caps,
                      const StorageLayout& layout) {
  const std::string codec = CodecOf(table, c, caps, layout);
  if (codec.empty()) return fmt::format("{} {}", c.name, c.type);
  return fmt::format("{} {} CODEC({})", c.name, c.type, codec);
}

std::string ColumnDefs(std::string_view table, const Capabilities& caps,
                       const StorageLayout& layout, std::string_view sep = ", ") {
  std::string out;
  for (const auto& c : ColumnsOf(table, caps, layout)) {
    if (!out.empty()) out += sep;
    out += ColumnDef(table, c, caps, layout);
  }
  return out;
}

// " SETTINGS a = 1, b = 2", or "" for none.
std::string Settings(std::vector<std::string> settings, const Capabilities& caps,
                     const StorageLayout& layout) {
  // The automatic statistics measured ~1.6 bytes per span on disk (spans and
  // trace_index) and are built in every merge; no query here needs them.
  if (caps.auto_statistics && !layout.column_statistics) {
    settings.emplace_back("auto_statistics_types = ''");
  }
  if (!layout.table_settings.empty()) settings.push_back(layout.table_settings);
  std::string out;
  for (const auto& s : settings) out += fmt::format("{}{}", out.empty() ? " SETTINGS " : ", ", s);
  return out;
}

// " TTL ... SETTINGS ..." for a CREATE of `t`; `more` are settings that come
// first (not changed in place).
std::string TtlClauses(const TtlTable& t, std::vector<std::string> more, const Capabilities& caps,
                       const StorageLayout& layout) {
  more.insert(more.end(), t.settings.begin(), t.settings.end());
  return (t.ttl.empty() ? "" : " TTL " + t.ttl) + Settings(std::move(more), caps, layout);
}

std::string SpansDdl(const Capabilities& caps, const SchemaOptions& options) {
  const StorageLayout& layout = options.layout;
  // Sorted by kSpansOrderBy: second, trace id, start time.
  // Daily partitions, and the TTL acts on whole parts: a part moves to the
  // cold volume once its newest span is move_after_s old, and is dropped
  // once that span is retention_s old (ttl_only_drop_parts). Merges never
  // join parts of two partitions, so a part's spans are all of one day, and
  // a day's spans are all on cold by move_after_s after the day ends and
  // all gone by retention_s after it. Finer partitions would move data
  // sooner after move_after_s but multiply parts (and one insert per
  // partition in the writer); see docs/ARCHITECTURE.md.
  // Parts the writer inserts (up to a few hundred thousand spans) stay
  // compact, one data file for all columns instead of two or three per
  // column: creating ~140 files per insert cost measurable CPU in the engine.
  // Merges make the large parts wide.
  std::vector<std::string> settings;
  if (caps.compact_parts) settings.emplace_back("min_bytes_for_wide_part = 268435456");
  if (layout.index_granularity != 0) {
    settings.push_back(fmt::format("index_granularity = {}", layout.index_granularity));
    settings.push_back(fmt::format("index_granularity_bytes = {}",
                                   uint64_t{10} * 1024 * 1024 * layout.index_granularity / 8192));
    // Merges write blocks of merge_max_block_size rows (8192), and a granule
    // never spans two blocks.
    if (layout.index_granularity > 8192) {
      settings.push_back(fmt::format("merge_max_block_size = {}", layout.index_granularity));
    }
  }
  // A query setting, which the engine takes from the CREATE and does not
  // keep among the table's.
  if (LowCardinalityResourceId(caps, layout)) settings.emplace_back(kAllowLowCardinalityNumbers);
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.spans (\n  {}\n) ENGINE = MergeTree\n"
      "PARTITION BY toDate(timestamp)\nORDER BY {}{}",
      kDatabase, ColumnDefs("spans", caps, layout, ",\n  "),
      layout.spans_order_by.empty() ? std::string(kSpansOrderBy) : layout.spans_order_by,
      TtlClauses(TtlTables(caps, options)[0], std::move(settings), caps, layout));
}

// Schema 5's codec for a column, given schema 4's where they differ.
std::string Schema5Codec(const CodecQuery& q) {
  if (q.table == "spans") {
    if (q.column == "parent_span_id" || q.column == "resource_id") return kSized;
    if (q.column == "attr_keys" || q.column == "attr_types") return kZstd3;
  }
  return std::string(q.chosen);
}

}  // namespace

StorageLayout Schema8Layout() {
  StorageLayout l;
  l.spans_order_by = std::string(kSchema8SpansOrderBy);
  return l;
}

StorageLayout Schema7Layout() {
  StorageLayout l = Schema8Layout();
  l.extras_column = false;
  return l;
}

StorageLayout Schema5Layout() {
  StorageLayout l = Schema7Layout();
  l.index_granularity = 32768;
  l.low_cardinality_resource_id = false;
  l.codec = Schema5Codec;
  return l;
}

StorageLayout Schema4Layout() {
  StorageLayout l = Schema5Layout();
  l.spans_order_by = "(toStartOfHour(timestamp), trace_id)";
  l.index_granularity = 0;
  l.trace_index_seconds = false;
  l.trace_index_short_id = false;
  l.codec = [](const CodecQuery& q) {
    if (q.table == "spans" && (q.column == "user_fields" || q.column == "attr_values")) {
      return std::string(kSized);
    }
    return Schema5Codec(q);
  };
  return l;
}

std::string TraceRangeQuery(const StorageLayout& layout) {
  // The ids are made FixedString before the set is built: a set of Strings
  // loses an id's trailing zero bytes when the engine compares it with the
  // FixedString column (an id ending in 00 was not found).
  const std::string where =
      layout.trace_index_short_id
          ? "trace_id8 IN (SELECT toFixedString(substring(unhex(arrayJoin({ids:Array(String)})), "
            "1, 8), 8))"
          : "trace_id IN (SELECT toFixedString(unhex(arrayJoin({ids:Array(String)})), 16))";
  const std::string times = layout.trace_index_seconds
                                ? "start_s, end_s"
                                : "intDiv(start_ns, 1000000000), intDiv(end_ns, 1000000000) + 1";
  // Rows as stored, not grouped per id: the reader only takes the union of
  // their hours, and the aggregation's pipeline (with the threads it
  // starts) cost more than the lookup itself (in chDB over the 49.4M store:
  // ~4 vs ~7 ms).
  return fmt::format("SELECT {} FROM {}.trace_index WHERE {} SETTINGS max_threads = 1", times,
                     kDatabase, where);
}

std::string SpansTtl(const Capabilities& caps, const SchemaOptions& options) {
  if (!caps.ttl) return "";
  std::string ttl;
  if (caps.ttl_moves && options.tiered && options.move_after_s > 0) {
    ttl = fmt::format("timestamp + toIntervalSecond({}) TO VOLUME 'cold'", options.move_after_s);
  }
  if (options.retention_s > 0) {
    ttl += fmt::format("{}timestamp + toIntervalSecond({})", ttl.empty() ? "" : ", ",
                       options.retention_s);
  }
  return ttl;
}

int ArrayDepth(Logical l) {
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

std::string WireType(Logical l, const Capabilities& caps) {
  return Wrap(Scalar(l, caps, nullptr), ArrayDepth(l));
}

std::string TableType(Logical l, const Capabilities& caps, const StorageLayout& layout) {
  return Wrap(Scalar(l, caps, &layout), ArrayDepth(l));
}

// Where SchemaDdl puts the spans table: what comes before it does not read
// it, what comes after may (views), so EnsureSchema upgrades the table's
// columns in between.
constexpr size_t kSpansDdlIndex = 3;

std::vector<std::string> SchemaDdl(const Capabilities& caps, const SchemaOptions& options) {
  const StorageLayout& layout = options.layout;
  std::vector<std::string> ddl;
  ddl.push_back(fmt::format("CREATE DATABASE IF NOT EXISTS {}", kDatabase));
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.schema_version (version UInt32, applied_at DateTime) "
      "ENGINE = MergeTree ORDER BY version",
      kDatabase));
  // One row per distinct resource (per fingerprint); a resource sent again
  // after a restart is inserted again and merges keep the latest.
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.resources ({}) ENGINE = ReplacingMergeTree(last_seen) "
      "ORDER BY resource_id{}",
      kDatabase, ColumnDefs("resources", caps, layout),
      TtlClauses(TtlTables(caps, options)[2], {}, caps, layout)));
  ddl.push_back(SpansDdl(caps, options));  // at kSpansDdlIndex
  // Trace id -> (first start, last end), so a lookup by id knows which hours
  // of the spans table to read. Fed by a view; merges keep one row per
  // (day, trace).
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.trace_index ({}) ENGINE = AggregatingMergeTree PARTITION BY "
      "day ORDER BY {}{}",
      kDatabase, ColumnDefs("trace_index", caps, layout),
      layout.trace_index_short_id ? "trace_id8" : "trace_id",
      TtlClauses(TtlTables(caps, options)[1], {}, caps, layout)));
  const std::string start_ns = caps.datetime64 ? "toUnixTimestamp64Nano(start_time)" : "start_time";
  const std::string agg_min = caps.simple_aggregate ? "min" : "minState";
  const std::string agg_max = caps.simple_aggregate ? "max" : "maxState";
  const std::string id = layout.trace_index_short_id
                             ? "toFixedString(substring(trace_id, 1, 8), 8) AS trace_id8"
                             : "trace_id";
  const std::string times =
      layout.trace_index_seconds
          ? fmt::format(
                "{0}(toUInt32(intDiv(toUInt64({2}), 1000000000))) AS start_s, "
                "{1}(toUInt32(intDiv(toUInt64({2}) + duration_ns + 999999999, "
                "1000000000))) AS end_s",
                agg_min, agg_max, start_ns)
          : fmt::format(
                "{0}(toUInt64({2})) AS start_ns, {1}(toUInt64({2}) + duration_ns) AS "
                "end_ns",
                agg_min, agg_max, start_ns);
  ddl.push_back(
      fmt::format("CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.trace_index_mv TO {0}.trace_index AS "
                  "SELECT toDate(timestamp) AS day, {1}, {2} FROM {0}.spans GROUP BY day, {3}",
                  kDatabase, id, times, layout.trace_index_short_id ? "trace_id8" : "trace_id"));

  // RED metrics per minute x service x operation x span kind: calls, errors
  // (status code ERROR), the duration sum and a t-digest of durations from
  // which p50/p90/p95/p99 are recovered by merging states. Fed by a view on
  // every insert; merges fold the rows of one key together. Ordered by
  // service first, so a service's series over days is one range read.
  const std::string sum_f = caps.simple_aggregate ? "sum" : "sumState";
  const std::string ttl =
      caps.ttl ? fmt::format(" TTL minute + INTERVAL {} DAY", options.metrics_retention_days) : "";
  ddl.push_back(
      fmt::format("CREATE TABLE IF NOT EXISTS {0}.red_1m ({1}) ENGINE = AggregatingMergeTree "
                  "PARTITION BY toDate(minute) ORDER BY (service_name, minute, name, kind){2}{3}",
                  kDatabase, ColumnDefs("red_1m", caps, layout), ttl, Settings({}, caps, layout)));
  ddl.push_back(
      fmt::format("CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.red_1m_mv TO {0}.red_1m AS SELECT "
                  "toStartOfMinute(timestamp) AS minute, service_name, name, kind, "
                  "{1}(toUInt64(1)) AS calls, {1}(toUInt64(status_code = 2)) AS errors, "
                  "{1}(duration_ns) AS duration_sum_ns, "
                  "quantilesTDigestState({2})(duration_ns) AS duration_quantiles "
                  "FROM {0}.spans GROUP BY minute, service_name, name, kind",
                  kDatabase, sum_f, kRedQuantiles));
  // The same per service and span kind, without the operation: what a
  // service's series and the services overview read. Loadgen's checkout has
  // 13 (operation, kind) pairs, so a 7-day series merges ~4x fewer t-digest
  // states for server spans (in chDB: 24 vs 75 ms). Fed by a view on
  // red_1m's inserts (red_1m_mv's blocks cascade into it), summing the
  // states red_1m_mv made. Granules of 256 rows: a day's part holds every
  // service, and a series reads ~1440 rows of it per kind, which granules of
  // 8192 (the default) made ~16k states to decode per day (in chDB over the
  // 50.5M store, checkout's 7-day p99 series: 78 ms at 8192, 39 at 1024, 24
  // at 256; the same bytes on disk).
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.red_service_1m ({1}) ENGINE = AggregatingMergeTree "
      "PARTITION BY toDate(minute) ORDER BY (service_name, kind, minute){2}{3}",
      kDatabase, ColumnDefs("red_service_1m", caps, layout), ttl,
      Settings({"index_granularity = 256"}, caps, layout)));
  const std::string merge_sum = caps.simple_aggregate ? "sum" : "sumMergeState";
  ddl.push_back(fmt::format(
      "CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.red_service_1m_mv TO {0}.red_service_1m AS "
      "SELECT minute, service_name, kind, {1}(calls) AS calls, {1}(errors) AS errors, "
      "{1}(duration_sum_ns) AS duration_sum_ns, quantilesTDigestMergeState({2})"
      "(duration_quantiles) AS duration_quantiles FROM {0}.red_1m GROUP BY minute, service_name, "
      "kind",
      kDatabase, merge_sum, kRedQuantiles));
  // Service dependency edges per minute, written by the dependency job
  // (dependencies.h: the two ends of an edge arrive in different inserts,
  // so a view cannot see them together). A recomputed minute replaces its
  // rows: the latest computed_at wins.
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.dependencies_1m ({1}) ENGINE = "
      "ReplacingMergeTree(computed_at) PARTITION BY toDate(minute) ORDER BY (minute, parent, "
      "child){2}{3}",
      kDatabase, ColumnDefs("dependencies_1m", caps, layout), ttl, Settings({}, caps, layout)));
  // The service catalog: every (service, operation, kind) seen, and when
  // last. One row per key after merges.
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.operations ({1}) ENGINE = AggregatingMergeTree ORDER BY "
      "(service_name, name, kind){2}",
      kDatabase, ColumnDefs("operations", caps, layout), Settings({}, caps, layout)));
  ddl.push_back(fmt::format(
      "CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.operations_mv TO {0}.operations AS SELECT "
      "service_name, name, kind, {1}(timestamp) AS last_seen FROM {0}.spans "
      "GROUP BY service_name, name, kind",
      kDatabase, caps.simple_aggregate ? "max" : "maxState"));
  return ddl;
}

namespace {

// Schema 1 -> 2: each distinct resource of the old rows goes to `resources`
// (its id a hash computed here by ClickHouse: any stable function will do,
// ids only have to agree between a span and its resource row), the rows get
// that id, and the per-row resource columns are dropped. Every step is
// synchronous, so a crash part-way leaves either the old columns (and this
// runs again) or a finished upgrade.
Status MoveResourcesOutOfSpans(ChdbConnection& conn) {
  const std::string id =
      "cityHash64(resource_attr_keys, resource_attr_types, resource_attr_values, "
      "resource_schema_url, resource_dropped_attributes_count)";
  std::vector<std::string> steps = {
      fmt::format("INSERT INTO {0}.resources SELECT {1} AS rid, any(service_name), "
                  "any(resource_attr_keys), any(resource_attr_types), any(resource_attr_values), "
                  "any(resource_dropped_attributes_count), any(resource_schema_url), "
                  "max(timestamp) FROM {0}.spans WHERE resource_id = 0 GROUP BY rid",
                  kDatabase, id),
      fmt::format("ALTER TABLE {}.spans UPDATE resource_id = {} WHERE resource_id = 0 "
                  "SETTINGS mutations_sync = 2",
                  kDatabase, id),
  };
  std::string drop;
  for (const char* c : kV1ResourceColumns) {
    drop += drop.empty() ? "" : ", ";
    drop += fmt::format("DROP COLUMN {}", c);
  }
  steps.push_back(
      fmt::format("ALTER TABLE {}.spans {} SETTINGS mutations_sync = 2", kDatabase, drop));
  for (const auto& sql : steps) {
    if (Status st = conn.Query(sql, ""); !st.ok()) return st;
  }
  return Status::Ok();
}

// The lines of a one-column TSV result.
std::set<std::string> LineSet(const std::string& tsv) {
  std::set<std::string> out;
  for (size_t pos = 0; pos < tsv.size();) {
    size_t nl = tsv.find('\n', pos);
    if (nl == std::string::npos) nl = tsv.size();
    out.insert(tsv.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// Upgrade in place: adds any column an older spans table lacks, and moves
// schema 1's per-span resource columns to the resources table.
Status AddMissingColumns(ChdbConnection& conn, const Capabilities& caps,
                         const StorageLayout& layout) {
  QueryResult r;
  if (Status st = conn.Query(
          fmt::format("SELECT name FROM system.columns WHERE database = '{}' AND table = 'spans'",
                      kDatabase),
          "TSV", &r);
      !st.ok()) {
    return st;
  }
  const std::set<std::string> have = LineSet(r.data);
  // A table with the rare columns (schema 7 and older) computes extras from
  // them, for its rows and for any insert that leaves extras out; the
  // upgrade's copy then reads the value (RebuildSpansIfChanged).
  const bool rare_columns = have.count(RareColumns().front().name) != 0;
  for (TableColumn col : ColumnsOf("spans", caps, layout)) {
    if (have.count(col.name) != 0) continue;
    if (col.name == "extras" && rare_columns) {
      col.type += fmt::format(" DEFAULT {}", ExtrasFromRareColumns());
    }
    std::string sql = fmt::format("ALTER TABLE {}.spans ADD COLUMN {}", kDatabase,
                                  ColumnDef("spans", col, caps, layout));
    if (col.type.find("LowCardinality(UInt64)") != std::string::npos) {
      sql += fmt::format(" SETTINGS {}", kAllowLowCardinalityNumbers);
    }
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema upgrade: " + st.message());
    }
  }
  if (have.count(kV1ResourceColumns[0]) != 0) {
    if (Status st = MoveResourcesOutOfSpans(conn); !st.ok()) {
      return Status::Internal("schema upgrade (resources table): " + st.message());
    }
  }
  return Status::Ok();
}

// Tables made before a codec was chosen take it: a codec-only MODIFY COLUMN
// changes metadata alone (measured: no mutation, parts untouched), new
// parts and merges write the new codec. Types are left as they are (a
// changed type would rewrite every part), and a column whose codec went
// back to the server's default keeps the one it has.
Status SyncCodecs(ChdbConnection& conn, const Capabilities& caps, const StorageLayout& layout) {
  if (!caps.codecs) return Status::Ok();
  for (const char* table : kTables) {
    QueryResult r;
    if (Status st = conn.Query(fmt::format("SELECT name, compression_codec FROM system.columns "
                                           "WHERE database = '{}' AND table = '{}'",
                                           kDatabase, table),
                               "TSV", &r);
        !st.ok()) {
      return st;
    }
    std::map<std::string, std::string, std::less<>> have;
    for (auto& f : TsvRows(r.data)) {
      if (f.size() == 2) have[std::move(f[0])] = std::move(f[1]);
    }
    std::string alter;
    for (const auto& c : ColumnsOf(table, caps, layout)) {
      const std::string codec = CodecOf(table, c, caps, layout);
      auto it = have.find(c.name);
      if (codec.empty() || it == have.end() || it->second == fmt::format("CODEC({})", codec)) {
        continue;
      }
      alter +=
          fmt::format("{}MODIFY COLUMN {} CODEC({})", alter.empty() ? "" : ", ", c.name, codec);
    }
    if (alter.empty()) continue;
    const std::string sql = fmt::format("ALTER TABLE {}.{} {}", kDatabase, table, alter);
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + sql);
    }
  }
  return Status::Ok();
}

// Runs the SELECT of view `<table>_mv` over every stored row of its source
// into `table`.
Status BackfillView(ChdbConnection& conn, std::string_view table) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT as_select FROM system.tables WHERE database = "
                                         "'{}' AND name = '{}_mv'",
                                         kDatabase, table),
                             "TSVRaw", &r);
      !st.ok()) {
    return st;
  }
  std::string select = r.data;
  while (!select.empty() && (select.back() == '\n' || select.back() == '\r')) select.pop_back();
  if (select.empty()) return Status::Internal(fmt::format("no view {}_mv", table));
  return conn.Query(fmt::format("INSERT INTO {}.{} {}", kDatabase, table, select), "");
}

// Brings a table made with other settings (an older spanhouse, another
// configuration) to those of `t`: the storage policy first (the TTL's TO
// VOLUME needs it), then the other settings, then the TTL. Each only when
// it differs, so a start with an unchanged configuration changes nothing.
// The engine allows the switch from the default policy because the tiered
// policy's hot volume is named "default" and holds the default disk.
Status ApplyTtlTable(ChdbConnection& conn, const Capabilities& caps, const TtlTable& t) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT engine_full FROM system.tables WHERE database = "
                                         "'{}' AND name = '{}'",
                                         kDatabase, t.name),
                             "TSVRaw", &r);
      !st.ok()) {
    return st;
  }
  std::string engine = r.data;
  while (!engine.empty() && (engine.back() == '\n' || engine.back() == '\r')) engine.pop_back();
  // "k = v" as a whole item of the SETTINGS list.
  auto has_setting = [&](const std::string& kv) {
    for (size_t at = engine.find(kv); at != std::string::npos; at = engine.find(kv, at + 1)) {
      const size_t end = at + kv.size();
      if (at > 0 && engine[at - 1] == ' ' && (end == engine.size() || engine[end] == ',')) {
        return true;
      }
    }
    return false;
  };
  auto run = [&](const std::string& sql) -> Status {
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + sql);
    }
    return Status::Ok();
  };
  std::vector<std::string> changed;
  for (const auto& kv : t.settings) {
    if (has_setting(kv)) continue;
    if (kv.rfind("storage_policy", 0) == 0) {
      if (Status st =
              run(fmt::format("ALTER TABLE {}.{} MODIFY SETTING {}", kDatabase, t.name, kv));
          !st.ok()) {
        return st;
      }
    } else {
      changed.push_back(kv);
    }
  }
  if (!changed.empty()) {
    std::string list;
    for (const auto& kv : changed) list += (list.empty() ? "" : ", ") + kv;
    if (Status st =
            run(fmt::format("ALTER TABLE {}.{} MODIFY SETTING {}", kDatabase, t.name, list));
        !st.ok()) {
      return st;
    }
  }
  const size_t ttl_at = engine.find(" TTL ");
  if (t.ttl.empty()) {
    if (ttl_at == std::string::npos) return Status::Ok();
    return run(fmt::format("ALTER TABLE {}.{} REMOVE TTL", kDatabase, t.name));
  }
  const std::string want = " TTL " + t.ttl;
  if (ttl_at != std::string::npos && engine.compare(ttl_at, want.size(), want) == 0 &&
      (ttl_at + want.size() == engine.size() ||
       engine.compare(ttl_at + want.size(), 10, " SETTINGS ") == 0)) {
    return Status::Ok();
  }
  // Where the engine can recompute only the TTL of stored parts
  // (materialize_ttl_recalculate_only, set above), it does so now, in the
  // background: stored parts then move and go by the new TTL. Elsewhere the
  // new TTL reaches old parts as they merge.
  return run(fmt::format("ALTER TABLE {}.{} MODIFY TTL {}{}", kDatabase, t.name, t.ttl,
                         caps.ttl_moves ? "" : " SETTINGS materialize_ttl_after_modify = 0"));
}

// Schema 4 -> 5 (and any later change of the spans table's sort key or
// granule size, or of trace_index's columns): neither changes in place, so
// the table is renamed to "<table>_before_upgrade", made anew, filled from
// it and the old one dropped. While the old one exists the upgrade is not
// done; the next start copies again into an emptied new table (the writer
// starts only after EnsureSchema). The views reading the spans table are
// dropped first (a copy must not feed them again: their tables keep what
// they hold) and made again by the DDL that follows. The old table is
// dropped without SYNC (in chDB a SYNC drop of a table the connection had
// just read waited for ever); the engine deletes its parts soon after.
constexpr std::string_view kBeforeUpgrade = "_before_upgrade";

// Where an upgrade keeps `table` while it copies.
std::string BeforeUpgrade(std::string_view table) {
  return fmt::format("{}{}", table, kBeforeUpgrade);
}

Status Run(ChdbConnection& conn, const std::string& sql) {
  if (Status st = conn.Query(sql, ""); !st.ok()) {
    return Status::Internal("schema upgrade: " + st.message() + "\nin: " + sql);
  }
  return Status::Ok();
}

Status TableExists(ChdbConnection& conn, std::string_view table, bool* exists) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT count() FROM system.tables WHERE database = '{}' "
                                         "AND name = '{}'",
                                         kDatabase, table),
                             "TSV", &r);
      !st.ok()) {
    return st;
  }
  *exists = r.data == "1\n";
  return Status::Ok();
}

// The names of `table`'s columns.
Status ColumnNames(ChdbConnection& conn, std::string_view table, std::set<std::string>* out) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT name FROM system.columns WHERE database = '{}' "
                                         "AND table = '{}'",
                                         kDatabase, table),
                             "TSVRaw", &r);
      !st.ok()) {
    return st;
  }
  *out = LineSet(r.data);
  out->erase("");
  return Status::Ok();
}

// Whether the spans table's sort key and granule size are `options`'.
Status SpansLayoutIs(ChdbConnection& conn, const StorageLayout& layout, bool* same) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT sorting_key, engine_full FROM system.tables "
                                         "WHERE database = '{}' AND name = 'spans'",
                                         kDatabase),
                             "TSVRaw", &r);
      !st.ok()) {
    return st;
  }
  const size_t tab = r.data.find('\t');
  if (tab == std::string::npos) return Status::Internal("schema upgrade: no spans table");
  const std::string key = "(" + r.data.substr(0, tab) + ")";
  const std::string want_key =
      layout.spans_order_by.empty() ? std::string(kSpansOrderBy) : layout.spans_order_by;
  // "index_granularity = N" among the settings (the engine prints it always).
  uint32_t granules = 8192;
  const std::string setting = " index_granularity = ";
  if (const size_t at = r.data.find(setting, tab); at != std::string::npos) {
    const char* p = r.data.data() + at + setting.size();
    std::from_chars(p, r.data.data() + r.data.size(), granules);
  }
  const uint32_t want_granules = layout.index_granularity == 0 ? 8192 : layout.index_granularity;
  // And its columns: the rare ones of schema 7 beside extras go by a copy.
  std::set<std::string> have;
  SH_RETURN_IF_ERROR(ColumnNames(conn, "spans", &have));
  std::set<std::string> want;
  for (const auto& c : SpanColumns(layout.extras_column)) want.insert(c.name);
  *same = key == want_key && granules == want_granules && have == want;
  return Status::Ok();
}

Status DropSpansViews(ChdbConnection& conn) {
  for (const char* view : {"trace_index_mv", "red_1m_mv", "operations_mv"}) {
    SH_RETURN_IF_ERROR(Run(conn, fmt::format("DROP VIEW IF EXISTS {}.{}", kDatabase, view)));
  }
  return Status::Ok();
}

// Rows per partition id of `table`'s active parts.
Status PartitionRows(ChdbConnection& conn, std::string_view table,
                     std::map<std::string, uint64_t>* out) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT partition_id, sum(rows) FROM system.parts WHERE "
                                         "database = '{}' AND table = '{}' AND active GROUP BY "
                                         "partition_id ORDER BY partition_id",
                                         kDatabase, table),
                             "TSV", &r);
      !st.ok()) {
    return st;
  }
  out->clear();
  for (const auto& f : TsvRows(r.data)) {
    if (f.size() == 2) (*out)[f[0]] = std::strtoull(f[1].c_str(), nullptr, 10);
  }
  return Status::Ok();
}

// After the spans table's CREATE (`create`, which made no table where one
// was) and its missing columns: made anew if its layout differs. The copy
// goes one partition (day) at a time, in order, each logged with the rows
// copied so far; a start that finds a copy stopped part-way keeps the
// partitions that are complete, empties a partial one and copies the rest.
Status RebuildSpansIfChanged(ChdbConnection& conn, const StorageLayout& layout,
                             const std::string& create,
                             const std::function<Status()>& before_copy) {
  const std::string old = BeforeUpgrade("spans");
  bool resume = false;
  SH_RETURN_IF_ERROR(TableExists(conn, old, &resume));
  std::map<std::string, uint64_t> have;  // what a stopped copy left
  if (resume) {
    SH_RETURN_IF_ERROR(DropSpansViews(conn));
    SH_RETURN_IF_ERROR(PartitionRows(conn, "spans", &have));
  } else {
    bool same = true;
    SH_RETURN_IF_ERROR(SpansLayoutIs(conn, layout, &same));
    if (same) return Status::Ok();
    SH_RETURN_IF_ERROR(before_copy());
    SH_RETURN_IF_ERROR(DropSpansViews(conn));
    SH_RETURN_IF_ERROR(Run(conn, fmt::format("RENAME TABLE {0}.spans TO {0}.{1}", kDatabase, old)));
    SH_RETURN_IF_ERROR(Run(conn, create));
  }
  std::map<std::string, uint64_t> parts;
  SH_RETURN_IF_ERROR(PartitionRows(conn, old, &parts));
  uint64_t total = 0;
  for (const auto& [id, rows] : parts) total += rows;
  spdlog::info("schema upgrade: copying {} spans in {} partition(s) into the new spans table",
               total, parts.size());
  // The new table's columns from the old one's; extras computed from the
  // rare columns where the old one lacks it (a copy an older spanhouse
  // began, before extras was added to the table it renamed).
  std::set<std::string> old_cols;
  SH_RETURN_IF_ERROR(ColumnNames(conn, old, &old_cols));
  std::string cols;
  std::string select;
  for (const auto& c : SpanColumns(layout.extras_column)) {
    std::string expr = c.name;
    if (old_cols.count(c.name) == 0) {
      if (c.id != Col::kExtras || old_cols.count(RareColumns().front().name) == 0) continue;
      expr = ExtrasFromRareColumns();
    }
    cols += fmt::format("{}{}", cols.empty() ? "" : ", ", c.name);
    select += fmt::format("{}{}", select.empty() ? "" : ", ", expr);
  }
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t copied = 0;
  for (const auto& [id, rows] : parts) {
    const auto it = have.find(id);
    if (it != have.end() && it->second == rows) {
      copied += rows;
      spdlog::info("schema upgrade: spans partition {} already copied ({} rows)", id, rows);
      continue;
    }
    if (it != have.end()) {
      SH_RETURN_IF_ERROR(
          Run(conn, fmt::format("ALTER TABLE {}.spans DROP PARTITION ID '{}'", kDatabase, id)));
    }
    SH_RETURN_IF_ERROR(Run(conn, fmt::format("INSERT INTO {0}.spans ({1}) SELECT {4} FROM {0}.{2} "
                                             "WHERE _partition_id = '{3}'",
                                             kDatabase, cols, old, id, select)));
    // The copy leaves a day in parts of ~400k rows (the insert's blocks),
    // stored as new parts are (LZ4); merged now. The table is made without
    // its TTL and storage policy for the copy (EnsureSchema gives them
    // after): an insert whose rows are past the TTL's move goes straight to
    // the cold volume, where nothing merges, not even OPTIMIZE (measured on
    // the 49.4M-span store: 117 parts, 56 bytes/span, where the merged
    // store had 48).
    SH_RETURN_IF_ERROR(
        Run(conn, fmt::format("OPTIMIZE TABLE {}.spans PARTITION ID '{}' FINAL", kDatabase, id)));
    copied += rows;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info(
        "schema upgrade: spans partition {} copied ({} rows): {} of {} rows ({:.0f}%), "
        "{:.1f} s",
        id, rows, copied, total, total > 0 ? 100.0 * copied / total : 100.0, s);
  }
  return Run(conn, fmt::format("DROP TABLE {}.{}", kDatabase, old));
}

// Before trace_index's CREATE: an existing one with other columns is
// renamed (and its view dropped), for FinishTraceIndexRebuild to copy.
Status PrepareTraceIndexRebuild(ChdbConnection& conn, const Capabilities& caps,
                                const StorageLayout& layout,
                                const std::function<Status()>& before_copy) {
  const std::string old = BeforeUpgrade("trace_index");
  bool exists = false;
  SH_RETURN_IF_ERROR(TableExists(conn, old, &exists));
  if (exists) return Status::Ok();  // stopped part-way: copied again after the CREATE
  SH_RETURN_IF_ERROR(TableExists(conn, "trace_index", &exists));
  if (!exists) return Status::Ok();
  std::set<std::string> have;
  SH_RETURN_IF_ERROR(ColumnNames(conn, "trace_index", &have));
  std::set<std::string> want;
  for (const auto& c : ColumnsOf("trace_index", caps, layout)) want.insert(c.name);
  if (have == want) return Status::Ok();
  SH_RETURN_IF_ERROR(before_copy());
  SH_RETURN_IF_ERROR(Run(conn, fmt::format("DROP VIEW IF EXISTS {}.trace_index_mv", kDatabase)));
  return Run(conn, fmt::format("RENAME TABLE {0}.trace_index TO {0}.{1}", kDatabase, old));
}

// After the new trace_index's CREATE: fills it from the renamed one, ids
// and times converted, and drops that.
Status FinishTraceIndexRebuild(ChdbConnection& conn, const Capabilities& caps,
                               const StorageLayout& layout) {
  const std::string old = BeforeUpgrade("trace_index");
  bool exists = false;
  SH_RETURN_IF_ERROR(TableExists(conn, old, &exists));
  if (!exists) return Status::Ok();
  if (!caps.simple_aggregate) {
    return Status::Internal("schema upgrade: trace_index's states cannot be converted before 19.8");
  }
  std::set<std::string> have;
  SH_RETURN_IF_ERROR(ColumnNames(conn, old, &have));
  std::string id;
  if (layout.trace_index_short_id) {
    id = have.count("trace_id8") != 0 ? "trace_id8" : "toFixedString(substring(trace_id, 1, 8), 8)";
  } else if (have.count("trace_id") != 0) {
    id = "trace_id";
  } else {
    return Status::Internal("schema upgrade: trace_index by 8 bytes cannot go back to 16");
  }
  std::string times;
  if (layout.trace_index_seconds) {
    times = have.count("start_s") != 0 ? "start_s, end_s"
                                       : "toUInt32(intDiv(start_ns, 1000000000)), "
                                         "toUInt32(intDiv(end_ns + 999999999, 1000000000))";
  } else {
    times = have.count("start_ns") != 0
                ? "start_ns, end_ns"
                : "toUInt64(start_s) * 1000000000, toUInt64(end_s) * 1000000000";
  }
  std::string cols;
  for (const auto& c : ColumnsOf("trace_index", caps, layout)) {
    cols += fmt::format("{}{}", cols.empty() ? "" : ", ", c.name);
  }
  SH_RETURN_IF_ERROR(Run(conn, fmt::format("TRUNCATE TABLE {}.trace_index", kDatabase)));
  SH_RETURN_IF_ERROR(
      Run(conn, fmt::format("INSERT INTO {0}.trace_index ({1}) SELECT day, {2}, {3} FROM "
                            "{0}.{4} SETTINGS max_partitions_per_insert_block = 0",
                            kDatabase, cols, id, times, old)));
  return Run(conn, fmt::format("DROP TABLE {}.{}", kDatabase, old));
}

}  // namespace

Status EnsureSchema(ChdbConnection& conn, Capabilities* caps_out, const SchemaOptions& options) {
  QueryResult r;
  if (Status st = conn.Query("SELECT version()", "TSV", &r); !st.ok()) return st;
  std::string version = r.data;
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  Capabilities caps = Capabilities::FromVersion(version);
  // Which tables were there before, to fill views added since from old rows.
  if (Status st =
          conn.Query(fmt::format("SELECT name FROM system.tables WHERE database = '{}'", kDatabase),
                     "TSV", &r);
      !st.ok()) {
    return st;
  }
  const std::set<std::string> existed = LineSet(r.data);
  // The tables up to the spans table first, then the columns an older spans
  // table lacks, then what reads the spans table (views need its columns).
  const std::vector<std::string> ddl = SchemaDdl(caps, options);
  const size_t spans_at = kSpansDdlIndex;
  if (ddl.size() <= spans_at || ddl[spans_at].find(".spans (") == std::string::npos) {
    return Status::Internal("schema: the spans table is not where EnsureSchema expects it");
  }
  // The hook runs once, before the first copy (the spans table's or
  // trace_index's), if there is one.
  bool before_copy_ran = false;
  const std::function<Status()> before_copy = [&]() -> Status {
    if (before_copy_ran || !options.before_copy) return Status::Ok();
    before_copy_ran = true;
    return options.before_copy(caps);
  };
  for (size_t i = 0; i < ddl.size(); ++i) {
    if (Status st = conn.Query(ddl[i], ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + ddl[i]);
    }
    if (i == spans_at) {
      if (Status st = AddMissingColumns(conn, caps, options.layout); !st.ok()) return st;
      // Made for a copy without TTL and storage policy (see the copy).
      SchemaOptions for_copy = options;
      for_copy.tiered = false;
      for_copy.retention_s = 0;
      for_copy.move_after_s = 0;
      if (Status st =
              RebuildSpansIfChanged(conn, options.layout, SpansDdl(caps, for_copy), before_copy);
          !st.ok()) {
        return st;
      }
      if (Status st = PrepareTraceIndexRebuild(conn, caps, options.layout, before_copy); !st.ok()) {
        return st;
      }
    }
  }
  if (Status st = FinishTraceIndexRebuild(conn, caps, options.layout); !st.ok()) return st;
  if (Status st = SyncCodecs(conn, caps, options.layout); !st.ok()) return st;
  // The spans table's storage policy and TTL, the retention of trace_index
  // and resources.
  if (caps.ttl) {
    for (const TtlTable& t : TtlTables(caps, options)) {
      if (Status st = ApplyTtlTable(conn, caps, t); !st.ok()) return st;
    }
  }
  // Tables made with another retention take this one (metadata only: the
  // TTL applies as parts merge, rather than rewriting every part now).
  if (caps.ttl) {
    for (const char* table : {"red_1m", "red_service_1m", "dependencies_1m"}) {
      const std::string sql = fmt::format(
          "ALTER TABLE {}.{} MODIFY TTL minute + INTERVAL {} DAY SETTINGS "
          "materialize_ttl_after_modify = 0",
          kDatabase, table, options.metrics_retention_days);
      if (Status st = conn.Query(sql, ""); !st.ok()) {
        return Status::Internal("schema: " + st.message() + "\nin: " + sql);
      }
    }
  }
  // A view created now sees only new inserts: give it the stored rows once,
  // in order (red_1m's fill cascades into red_service_1m, which is filled
  // from red_1m only where red_1m was there before).
  const std::pair<const char*, const char*> filled_from[] = {
      {"red_1m", "spans"}, {"operations", "spans"}, {"red_service_1m", "red_1m"}};
  for (const auto& [view, source] : filled_from) {
    if (existed.count(source) == 0 || existed.count(view) != 0) continue;
    if (Status st = BackfillView(conn, view); !st.ok()) {
      return Status::Internal(fmt::format("schema upgrade (filling {}): {}", view, st.message()));
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

namespace {

// A read column: CAST to its wire type, but user_fields as the JSON type
// itself where the engine has it (the reader takes span attribute values
// from it, in the flattened layout: kFlattenedJsonSetting).
std::string ReadExpr(const ColumnSpec& c, std::string_view table, std::string_view column,
                     const Capabilities& caps) {
  if (c.logical == Logical::kJson && caps.json_type) {
    return fmt::format("{}{} AS {}", table, column, c.name);
  }
  return fmt::format("CAST({}{} AS {}) AS {}", table, column, WireType(c.logical, caps), c.name);
}

}  // namespace

std::string SpanSelectList(const Capabilities& caps) {
  std::string s;
  for (const auto& c : SpanColumns()) {
    if (!s.empty()) s += ", ";
    s += ReadExpr(c, "", c.name, caps);
  }
  return s;
}

std::string SpanReadQuery(const Capabilities& caps, const StorageLayout& layout,
                          std::string_view where, std::string_view order_by) {
  // Each column as the table stores it (LowCardinality kept: DecodeSpanBlocks
  // reads both, and turning dictionaries into strings cost ~10 ms of a
  // 32768-row granule); the CAST is a no-op unless an older table differs.
  std::string list;
  for (const auto& c : ReadColumns(layout.extras_column)) {
    if (ResourceSource(c.id) != nullptr) continue;  // ResourceReadQuery
    if (!list.empty()) list += ", ";
    if (c.logical == Logical::kJson && caps.json_type) {
      list += c.name;
    } else {
      list += fmt::format("CAST({0} AS {1}) AS {0}", c.name, TableType(c.logical, caps, layout));
    }
  }
  return fmt::format("SELECT {} FROM {}.spans WHERE {} ORDER BY {}{}", list, kDatabase, where,
                     order_by,
                     caps.json_type ? fmt::format(" SETTINGS {} = 1", kFlattenedJsonSetting) : "");
}

std::string ResourceReadQuery(const Capabilities& caps) {
  std::string list;
  for (const auto& c : ReadColumns()) {
    const char* from = ResourceSource(c.id);
    if (from == nullptr) continue;
    list += ReadExpr(c, "", from, caps) + ", ";
  }
  // Merges may not have collapsed repeated inserts of a resource yet.
  return fmt::format(
      "SELECT {}CAST(resource_id AS UInt64) AS resource_id FROM {}.resources WHERE resource_id IN "
      "{{resource_ids:Array(UInt64)}} ORDER BY last_seen DESC LIMIT 1 BY resource_id",
      list, kDatabase);
}

}  // namespace spanhouse::storage
