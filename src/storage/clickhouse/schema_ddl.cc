// The schema's DDL: every table and view, their columns' types and codecs,
// their TTL and settings, all from the engine's capabilities and the
// configuration (SchemaOptions).
#include "storage/clickhouse/schema_ddl.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "storage/clickhouse/cluster_shard.h"
#include "storage/clickhouse/engine_config.h"

namespace spanhouse::storage {
namespace ddl {
namespace {

// How long after a partition's parts have all expired they are dropped at
// the latest: the engine's minimum pause between TTL merges in a partition
// (4 h by default), shortened for short retentions so tests see it.
uint64_t MergeWithTtlTimeout(const SchemaOptions& options) {
  return std::clamp<uint64_t>(options.retention_s / 8, 1, 14400);
}

// Codecs of the tables other than spans (the spans table's are in Master()).
constexpr const char* kTraceIndexCodec = kSized;
// Times of one day: T64 drops the high bits they share.
constexpr const char* kTraceIndexTimeCodec = kT64Sized;
// red_1m, operations, dependencies_1m: a few rows per minute and key.
constexpr const char* kAggregateCodec = kSized;
constexpr const char* kResourceCodec = kSized;

std::string AggregateType(const Capabilities& caps, const char* fn, const char* type) {
  return fmt::format("{}({}, {})",
                     caps.simple_aggregate ? "SimpleAggregateFunction" : "AggregateFunction", fn,
                     type);
}

bool LowCardinalityResourceId(const Capabilities& caps, const StorageLayout& layout) {
  return caps.low_cardinality_numbers && layout.low_cardinality_resource_id;
}

}  // namespace

std::vector<TtlTable> TtlTables(const Capabilities& caps, const SchemaOptions& options) {
  const uint64_t retention = options.retention_s;
  const bool moves = caps.ttl_moves;
  TtlTable spans{"spans", SpansTtl(caps, options), {}};
  if (moves && options.tiered) {
    spans.settings.push_back(fmt::format("storage_policy = '{}'", kTieredPolicy));
  }
  if (caps.compact_parts) {
    // Small inserts (a writer flushing by time) stay compact, one data file
    // for every column, not ~140 files; parts from 32 MiB (large inserts,
    // merges) are wide, which compress each column as one stream: at 256 MiB
    // a store of 300k spans stayed compact at 54.7 bytes per span against
    // 49.0 wide, and its OPTIMIZE took 4x the CPU (decision 0062).
    spans.settings.push_back(
        fmt::format("min_bytes_for_wide_part = {}", options.layout.min_bytes_for_wide_part));
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
  TtlTable sampled{"sampled_spans", "", {}};
  if (caps.prewarm_mark_cache) {
    // A trace lookup reads a granule of every column of one part: the first
    // lookup in a part after a start (or a merge) loaded the marks of its
    // ~140 streams, ~20 ms more than the next. With this the engine loads
    // them when the table starts and when a part is written (a few MB for
    // 100M spans; decision 0048).
    for (TtlTable* t : {&spans, &index, &resources}) {
      t->settings.emplace_back("prewarm_mark_cache = 1");
    }
  }
  if (caps.single_stream_strings && options.layout.single_stream_strings) {
    spans.settings.emplace_back(kSingleStreamStrings);
  }
  if (caps.ttl && retention > 0) {
    // The dependency job drops a day of sampled spans two days after it has
    // computed it (dependencies.h, DropComputedSampledSpans); where no job
    // runs, they still go no later than the spans would have.
    sampled.ttl = fmt::format("timestamp + toIntervalSecond({})", retention);
    // A day's index rows go with the day's spans: those are all gone once
    // the day's last second is retention_s old.
    index.ttl = fmt::format("toDateTime(day) + toIntervalSecond({})", retention + 86400);
    // A resource row is kept two days past the spans' retention: its
    // last_seen is at most a day older than the newest span using it (the
    // writer stores resources in use again daily, resource_refresh), and
    // spans go by whole daily parts, up to a day after their retention.
    resources.ttl = fmt::format("last_seen + toIntervalSecond({})", retention + 2 * 86400);
  }
  for (TtlTable* t : {&spans, &index, &sampled}) {
    if (t->ttl.empty()) continue;
    if (moves) {
      // A part goes when all its rows are past the retention, dropped whole
      // rather than rewritten without its expired rows (a rewrite of parts
      // on the cold volume would read and write them there again).
      t->settings.emplace_back("ttl_only_drop_parts = 1");
    }
    t->settings.push_back(fmt::format("merge_with_ttl_timeout = {}", MergeWithTtlTimeout(options)));
  }
  for (TtlTable* t : {&spans, &index, &resources, &sampled}) {
    // A changed TTL is applied to stored parts by recomputing their TTL
    // (reads the TTL's columns), not by rewriting them.
    if (moves && !t->ttl.empty()) t->settings.emplace_back("materialize_ttl_recalculate_only = 1");
  }
  return {spans, index, resources, sampled};
}

std::vector<TableColumn> ColumnsOf(std::string_view table, const Capabilities& caps,
                                   const StorageLayout& layout) {
  std::vector<TableColumn> cols;
  if (table == "spans") {
    for (const auto& c : SpanColumns(layout.extras_column, layout.span_ids_column,
                                     AttrColumnsStored(caps, layout))) {
      cols.push_back({c.name, TableType(c.logical, caps, layout), c.codec});
      if (c.id == Col::kUserFields && caps.json_type && layout.user_fields_map) {
        cols.back().codec = std::string(kUserFieldsMapCodec);
      }
      if (c.id == Col::kResourceId && LowCardinalityResourceId(caps, layout)) {
        cols.back().type = "LowCardinality(UInt64)";
      }
    }
    if (layout.span_ids_column) {
      for (const AliasColumn& a : SpanIdAliases()) {
        cols.push_back(
            {a.name,
             fmt::format("{} ALIAS {}", TableType(Logical::kSpanId, caps, layout), a.expression),
             "", true});
      }
    }
    return cols;
  }
  if (table == "sampled_spans") {
    for (const auto& c : SampledColumns()) {
      cols.push_back({c.name, TableType(c.logical, caps, layout), c.codec});
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

std::string CodecOf(std::string_view table, const TableColumn& c, const Capabilities& caps,
                    const StorageLayout& layout) {
  if (!caps.codecs || c.alias) return "";
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

bool SmallBlocks(std::string_view table, const TableColumn& c, const Capabilities& caps,
                 const StorageLayout& layout) {
  return table == "spans" && caps.column_settings && !c.alias &&
         std::find(layout.small_block_columns.begin(), layout.small_block_columns.end(), c.name) !=
             layout.small_block_columns.end();
}

std::string ColumnDef(std::string_view table, const TableColumn& c, const Capabilities& caps,
                      const StorageLayout& layout) {
  const std::string codec = CodecOf(table, c, caps, layout);
  std::string def = codec.empty() ? fmt::format("{} {}", c.name, c.type)
                                  : fmt::format("{} {} CODEC({})", c.name, c.type, codec);
  if (SmallBlocks(table, c, caps, layout)) def += fmt::format(" SETTINGS ({})", kSmallBlockSetting);
  return def;
}

namespace {

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

// The trace_index table and its view.
void TraceIndexDdl(const Capabilities& caps, const SchemaOptions& options,
                   std::vector<std::string>* out) {
  const StorageLayout& layout = options.layout;
  // Trace id -> (first start, last end), so a lookup by id knows which hours
  // of the spans table to read. Fed by a view; merges keep one row per
  // (day, trace).
  out->push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.trace_index ({}) ENGINE = AggregatingMergeTree PARTITION BY "
      "day ORDER BY {}{}",
      options.database, ColumnDefs("trace_index", caps, layout),
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
  out->push_back(fmt::format(
      "CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.trace_index_mv TO {0}.trace_index AS "
      "SELECT toDate(timestamp) AS day, {1}, {2} FROM {0}.spans GROUP BY day, {3}",
      options.database, id, times, layout.trace_index_short_id ? "trace_id8" : "trace_id"));
}

// The metrics tables' TTL clause ("" for none).
std::string MetricsTtl(const Capabilities& caps, const SchemaOptions& options) {
  return caps.ttl ? fmt::format(" TTL minute + INTERVAL {} DAY", options.metrics_retention_days)
                  : "";
}

// The SELECT of a view feeding red_1m (`per_operation`) or red_service_1m
// from the span rows of `source`: the spans table, or sampled_spans, whose
// columns of these names hold the same values. One SELECT for both, so a
// sampled-out span counts as a stored one.
std::string RedSelect(const Capabilities& caps, std::string_view database, std::string_view source,
                      bool per_operation) {
  return fmt::format(
      "SELECT toStartOfMinute(timestamp) AS minute, service_name, {3}kind, "
      "{1}(toUInt64(1)) AS calls, {1}(toUInt64(status_code = 2)) AS errors, "
      "{1}(duration_ns) AS duration_sum_ns, "
      "quantilesTDigestState({2})(duration_ns) AS duration_quantiles "
      "FROM {0}.{4} GROUP BY minute, service_name, {3}kind",
      database, caps.simple_aggregate ? "sum" : "sumState", kRedQuantiles,
      per_operation ? "name, " : "", source);
}

// The SELECT of the view feeding the service catalog from `source` (spans
// or sampled_spans).
std::string OperationsSelect(const Capabilities& caps, std::string_view database,
                             std::string_view source) {
  return fmt::format(
      "SELECT service_name, name, kind, {1}(timestamp) AS last_seen FROM {0}.{2} "
      "GROUP BY service_name, name, kind",
      database, caps.simple_aggregate ? "max" : "maxState", source);
}

// The view named `<table><suffix>` feeding `table` (red_1m,
// red_service_1m: RedSelect's; operations: OperationsSelect's) from the
// span rows of `source`. `suffix` tells one source's views from another's
// ("_mv": the spans table's).
std::string MetricsView(const Capabilities& caps, std::string_view database, std::string_view table,
                        std::string_view source, std::string_view suffix) {
  const std::string select = table == "operations"
                                 ? OperationsSelect(caps, database, source)
                                 : RedSelect(caps, database, source, table == "red_1m");
  return fmt::format("CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.{1}{2} TO {0}.{1} AS {3}",
                     database, table, suffix, select);
}

// RED metrics per minute x service x operation x span kind: calls, errors
// (status code ERROR), the duration sum and a t-digest of durations from
// which p50/p90/p95/p99 are recovered by merging states. Fed by a view on
// every insert; merges fold the rows of one key together. Ordered by
// service first, so a service's series over days is one range read.
void RedDdl(const Capabilities& caps, const SchemaOptions& options, std::vector<std::string>* out) {
  const StorageLayout& layout = options.layout;
  const std::string ttl = MetricsTtl(caps, options);
  out->push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.red_1m ({1}) ENGINE = AggregatingMergeTree "
      "PARTITION BY toDate(minute) ORDER BY (service_name, minute, name, kind){2}{3}",
      options.database, ColumnDefs("red_1m", caps, layout), ttl, Settings({}, caps, layout)));
  out->push_back(MetricsView(caps, options.database, "red_1m", "spans", "_mv"));
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
  out->push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.red_service_1m ({1}) ENGINE = AggregatingMergeTree "
      "PARTITION BY toDate(minute) ORDER BY (service_name, kind, minute){2}{3}",
      options.database, ColumnDefs("red_service_1m", caps, layout), ttl,
      Settings({"index_granularity = 256"}, caps, layout)));
  if (!caps.cascading_views) {
    // A server whose views do not fire on a view's inserts: from the spans.
    out->push_back(MetricsView(caps, options.database, "red_service_1m", "spans", "_mv"));
    return;
  }
  const std::string merge_sum = caps.simple_aggregate ? "sum" : "sumMergeState";
  out->push_back(fmt::format(
      "CREATE MATERIALIZED VIEW IF NOT EXISTS {0}.red_service_1m_mv TO {0}.red_service_1m AS "
      "SELECT minute, service_name, kind, {1}(calls) AS calls, {1}(errors) AS errors, "
      "{1}(duration_sum_ns) AS duration_sum_ns, quantilesTDigestMergeState({2})"
      "(duration_quantiles) AS duration_quantiles FROM {0}.red_1m GROUP BY minute, service_name, "
      "kind",
      options.database, merge_sum, kRedQuantiles));
}

// The dependency edges' table and the service catalog with its view.
void CatalogDdl(const Capabilities& caps, const SchemaOptions& options,
                std::vector<std::string>* out) {
  const StorageLayout& layout = options.layout;
  const std::string ttl = MetricsTtl(caps, options);
  // Service dependency edges per minute, written by the dependency job
  // (dependencies.h: the two ends of an edge arrive in different inserts,
  // so a view cannot see them together). A recomputed minute replaces its
  // rows: the latest computed_at wins.
  out->push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.dependencies_1m ({1}) ENGINE = "
      "ReplacingMergeTree(computed_at) PARTITION BY toDate(minute) ORDER BY (minute, parent, "
      "child){2}{3}",
      options.database, ColumnDefs("dependencies_1m", caps, layout), ttl,
      Settings({}, caps, layout)));
  // The service catalog: every (service, operation, kind) seen, and when
  // last. One row per key after merges.
  out->push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.operations ({1}) ENGINE = AggregatingMergeTree ORDER BY "
      "(service_name, name, kind){2}",
      options.database, ColumnDefs("operations", caps, layout), Settings({}, caps, layout)));
  out->push_back(MetricsView(caps, options.database, "operations", "spans", "_mv"));
}

// The spans head sampling left out (SpanBatch::Spans::metrics_only): one
// narrow row each, written by the sink in the same insert cycle as the
// stored spans, with the same token. Views of their own feed the same RED
// tables and catalog as the spans' views, with the same SELECT; the
// dependency job reads them beside the spans (dependencies.h). Kept only
// until the job has computed their minutes: it drops a day's partition two
// days after that (DropComputedSampledSpans; ALTER ... DROP PARTITION, on
// every version), and with a retention the TTL drops it by then at the
// latest. Partitioned by day like the spans, so that drop is whole
// partitions. Sorted as the spans are, the second first: inserts come in
// time order, so parts a merge joins hold mostly disjoint seconds (cheap
// merges, decision 0013), and both sides of the job's join read a range of
// seconds. The join itself is a hash join on (trace_id, span_id), which no
// sort key serves; after the second, trace_id then span_id keep a trace's
// rows together (its ids compress) and make the key unique.
void SampledSpansDdl(const Capabilities& caps, const SchemaOptions& options,
                     std::vector<std::string>* out) {
  const StorageLayout& layout = options.layout;
  out->push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}.sampled_spans ({1}) ENGINE = MergeTree PARTITION BY "
      "toDate(timestamp) ORDER BY (timestamp, trace_id, span_id){2}",
      options.database, ColumnDefs("sampled_spans", caps, layout),
      TtlClauses(TtlTables(caps, options)[3], {}, caps, layout)));
  // The same views as the spans table's, read from this one: into red_1m
  // (and on from there into red_service_1m where views cascade, else into
  // it directly), and into operations.
  for (const char* table : {"red_1m", "red_service_1m", "operations"}) {
    if (std::string_view(table) == "red_service_1m" && caps.cascading_views) continue;
    out->push_back(MetricsView(caps, options.database, table, "sampled_spans", "_sampled_mv"));
  }
}

}  // namespace

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
  // Compact and wide parts: TtlTables (a table of an older spanhouse gets
  // the setting too).
  std::vector<std::string> settings;
  if (layout.index_granularity != 0) {
    settings.push_back(fmt::format("index_granularity = {}", layout.index_granularity));
    if (caps.adaptive_granularity) {
      settings.push_back(fmt::format("index_granularity_bytes = {}",
                                     uint64_t{10} * 1024 * 1024 * layout.index_granularity / 8192));
    }
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
      options.database, ColumnDefs("spans", caps, layout, ",\n  "),
      layout.spans_order_by.empty() ? std::string(kSpansOrderBy) : layout.spans_order_by,
      TtlClauses(TtlTables(caps, options)[0], std::move(settings), caps, layout));
}

}  // namespace ddl

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

std::vector<std::string> SchemaDdl(const Capabilities& caps, const SchemaOptions& options) {
  const StorageLayout& layout = options.layout;
  std::vector<std::string> ddl;
  ddl.push_back(fmt::format("CREATE DATABASE IF NOT EXISTS {}", options.database));
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.schema_version (version UInt32, applied_at DateTime) "
      "ENGINE = MergeTree ORDER BY version",
      options.database));
  // One row per distinct resource (per fingerprint); a resource sent again
  // after a restart is inserted again and merges keep the latest.
  ddl.push_back(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.resources ({}) ENGINE = ReplacingMergeTree(last_seen) "
      "ORDER BY resource_id{}",
      options.database, ddl::ColumnDefs("resources", caps, layout),
      ddl::TtlClauses(ddl::TtlTables(caps, options)[2], {}, caps, layout)));
  ddl.push_back(ddl::SpansDdl(caps, options));  // at kSpansDdlIndex
  ddl::TraceIndexDdl(caps, options, &ddl);
  ddl::RedDdl(caps, options, &ddl);
  ddl::CatalogDdl(caps, options, &ddl);
  ddl::SampledSpansDdl(caps, options, &ddl);
  if (!options.replicated_path.empty()) {
    // Every table of data replicated between a shard's replicas (the
    // schema's version stays each server's own).
    for (std::string& sql : ddl) {
      if (sql.find(".schema_version ") == std::string::npos) ReplicateEngine(options, &sql);
    }
  }
  return ddl;
}

void ReplicateEngine(const SchemaOptions& options, std::string* sql) {
  constexpr std::string_view kCreate = "CREATE TABLE IF NOT EXISTS ";
  constexpr std::string_view kEngine = "ENGINE = ";
  if (!sql->starts_with(kCreate)) return;
  const size_t engine = sql->find(kEngine);
  if (engine == std::string::npos) return;
  const size_t name_at = kCreate.size();
  const size_t name_end = sql->find_first_of(" (", name_at);
  const std::string table = sql->substr(name_at, name_end - name_at);  // db.table
  const size_t family_at = engine + kEngine.size();
  size_t family_end = family_at;
  while (family_end < sql->size() &&
         (std::isalnum(static_cast<unsigned char>((*sql)[family_end])) != 0)) {
    ++family_end;
  }
  const std::string family = sql->substr(family_at, family_end - family_at);
  if (!family.ends_with("MergeTree")) return;
  std::string args = fmt::format("'{}/{}', '{{replica}}'", options.replicated_path, table);
  size_t replace_end = family_end;
  if (family_end < sql->size() && (*sql)[family_end] == '(') {
    const size_t close = sql->find(')', family_end);
    const std::string inner = sql->substr(family_end + 1, close - family_end - 1);
    if (!inner.empty()) args += ", " + inner;
    replace_end = close + 1;
  }
  sql->replace(family_at, replace_end - family_at, fmt::format("Replicated{}({})", family, args));
}

std::vector<std::string> DistributedDdl(std::string_view cluster, std::string_view local_db,
                                        std::string_view cluster_db) {
  std::vector<std::string> ddl;
  ddl.push_back(fmt::format("CREATE DATABASE IF NOT EXISTS {}", cluster_db));
  for (const char* table : {"spans", "trace_index", "resources", "red_1m", "red_service_1m",
                            "operations", "dependencies_1m"}) {
    // Nothing is inserted through them (the writers go to each shard's
    // tables); the spans' sharding key is the writers' all the same.
    const std::string_view key = std::string_view(table) == "spans" ? kShardingKey : "rand()";
    ddl.push_back(fmt::format(
        "CREATE TABLE IF NOT EXISTS {2}.{3} AS {1}.{3} ENGINE = Distributed({0}, {1}, {3}, {4})",
        cluster, local_db, cluster_db, table, key));
  }
  return ddl;
}

}  // namespace spanhouse::storage
