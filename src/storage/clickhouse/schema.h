// The spanhouse schema, generated from code (decision 0009).
//
// One logical row per span on every ClickHouse version; the physical types
// follow what the server supports, read once from `SELECT version()`.
// The column lists below are the single definition used by the DDL, the
// Native encoder, the Native decoder and the SELECT of the span reader.
//
// Resources are stored once: a span row holds its resource's fingerprint
// (resource_id) and the `resources` table holds each resource's attributes.
// A read joins them back, so a read row has the resource columns again.
//
// Where each part is: schema.cc the capabilities, the columns and their
// types; schema_ddl.cc the tables and views (SchemaDdl; schema_ddl.h the
// pieces the upgrades reuse); schema_upgrade.cc the older schemas' layouts
// and EnsureSchema; schema_read.cc the read queries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace spanhouse::storage {

class SqlConnection;

struct Capabilities {
  int major = 0;
  int minor = 0;
  bool datetime64 = false;            // DateTime64(9); else UInt64 nanoseconds
  bool low_cardinality = false;       // LowCardinality(String) without experimental settings
  bool simple_aggregate = false;      // SimpleAggregateFunction
  bool if_not_exists_column = false;  // ALTER TABLE ADD COLUMN IF NOT EXISTS
  bool compact_parts = false;         // MergeTree compact parts (min_bytes_for_wide_part)
  bool adaptive_granularity = false;  // MergeTree index_granularity_bytes (19.11)
  // A materialized view's inserts into its target table fire the views on
  // that table (red_1m's blocks feeding red_service_1m).
  bool cascading_views = false;
  bool merge_selector_base = false;  // MergeTree merge_selector_base (24.11)
  bool prewarm_mark_cache = false;   // MergeTree prewarm_mark_cache (24.12)
  // MergeTree string_serialization_version = 'single_stream' (the value's
  // name since 25.11)
  bool single_stream_strings = false;
  // A column's own SETTINGS (min_compress_block_size ...) in its
  // definition and by ALTER ... MODIFY COLUMN ... MODIFY SETTING (24.1).
  bool column_settings = false;
  bool ttl = false;        // table TTL expressions
  bool json_type = false;  // the JSON column type (production-ready in 25.3)
  // Storage policies, TTL ... TO VOLUME, ttl_only_drop_parts,
  // materialize_ttl_recalculate_only.
  bool ttl_moves = false;
  bool codecs = false;  // column codecs: CODEC(ZSTD(1)), Delta, DoubleDelta, T64
  // CODEC(Default) in a column's codec list (the engine's configured
  // default, which the schema lets follow part size).
  bool default_codec = false;
  bool auto_statistics = false;  // statistics on every column by default (minmax, uniq)
  // LowCardinality of a number type in a table, allowed by the setting
  // allow_suspicious_low_cardinality_types given with the CREATE or ALTER.
  bool low_cardinality_numbers = false;
  // formatRowNoNewline (20.7): the schema 7 -> 8 upgrade makes the extras
  // column of the rare ones with it.
  bool format_row = false;
  // insert_deduplication_token (22.2): a retried insert is known by the
  // token its durable block was sealed with. Before, only replicated tables
  // deduplicate, by the inserted block's bytes (sent again the same).
  bool dedup_token = false;
  // Query parameters ({name:Type}, bound by the server). Where unsure, the
  // caller's values are inlined as literals (inline_params.h), which every
  // version reads the same.
  bool query_params = false;
  // compile_aggregate_expressions and compile_sort_description (all there
  // by 22.8): the reader turns the JIT off with them.
  bool jit_settings = false;
  // JSONHas, JSONExtractString (19.x; 20.1 taken for sure): user_fields as
  // JSON text is read with them, before with visitParamHas and
  // visitParamExtractString (a flat object's keys, matched as written).
  bool json_functions = false;
  // The read settings a one-trace lookup is given (kOneTraceReadSettings:
  // local_filesystem_read_method, merge_tree_use_prefixes_deserialization_
  // thread_pool, enable_multiple_prewhere_read_steps; all there by 25.3).
  bool one_trace_read_settings = false;

  static Capabilities FromVersion(std::string_view version);  // e.g. "26.5.1.1"
};

// The logical kinds of the span columns.
enum class Logical : uint8_t {
  kDateTimeSec,  // DateTime, seconds: partition and sort
  kTraceId,      // FixedString(16)
  kSpanId,       // FixedString(8)
  kString,       // String
  kKey,          // low-cardinality String
  kUInt8,
  kUInt32,
  kUInt64,
  kTimeNs,    // DateTime64(9) or UInt64 ns
  kKeyArray,  // Array(key)
  kUInt8Array,
  kUInt32Array,
  kStringArray,
  kTimeNsArray,
  kTraceIdArray,
  kSpanIdArray,
  kKeyArray2,  // Array(Array(key))
  kUInt8Array2,
  kStringArray2,
  kJson,  // user_fields: a Map or the JSON type where the engine has it, else JSON text
};

// user_fields as a map of key to value text (StorageLayout::user_fields_map),
// keys and values LowCardinality where the layout has them (ids and other
// distinct values go to each part's dictionary once, repeated ones become
// indexes: smaller than plain Strings at a cheaper ZSTD level).
inline constexpr std::string_view kUserFieldsMapType =
    "Map(LowCardinality(String), LowCardinality(String))";
// How the writer sends it: the values as plain Strings, which the engine
// turns into the table's dictionaries (as it does attr_values': decision
// 0008).
inline constexpr std::string_view kUserFieldsMapWireType = "Map(LowCardinality(String), String)";
// Its codec: the values of different keys interleave in the map's streams,
// so it needs a stronger level than the JSON column's per-path streams to
// stay as small (decision 0052).
inline constexpr std::string_view kUserFieldsMapCodec = "ZSTD(6)";

// Span columns, in table and block order. Never reorder or rename: new
// columns go at the end (an older data directory gets them by ALTER).
enum class Col : uint8_t {
  kTimestamp,
  kTraceId,
  kSpanId,
  kParentSpanId,
  kTraceState,
  kFlags,
  kName,
  kKind,
  kStartTime,
  kDurationNs,
  kStatusCode,
  kStatusMessage,
  kServiceName,
  kResourceAttrKeys,
  kResourceAttrTypes,
  kResourceAttrValues,
  kResourceDroppedAttrs,
  kResourceSchemaUrl,
  kScopeName,
  kScopeVersion,
  kScopeAttrKeys,
  kScopeAttrTypes,
  kScopeAttrValues,
  kScopeDroppedAttrs,
  kScopeSchemaUrl,
  kAttrKeys,
  kAttrTypes,
  kAttrValues,
  kDroppedAttrs,
  kEventTimes,
  kEventNames,
  kEventAttrKeys,
  kEventAttrTypes,
  kEventAttrValues,
  kEventDroppedAttrs,
  kDroppedEvents,
  kLinkTraceIds,
  kLinkSpanIds,
  kLinkTraceStates,
  kLinkFlags,
  kLinkAttrKeys,
  kLinkAttrTypes,
  kLinkAttrValues,
  kLinkDroppedAttrs,
  kDroppedLinks,
  kResourceId,  // stored in spans; the kResource* columns above are read from `resources`
  kUserFields,  // JSON object of the span's and its resource's user-defined attributes
  // The 21 rare columns above (kScopeAttrKeys ... kDroppedLinks) as one
  // value (span_extras.h): what the spans table stores in their place.
  kExtras,
  // span_id then parent_span_id, one FixedString(16) (schema 11): the two
  // are ALIAS columns of it. A child's parent id is an earlier row's span
  // id; in one column its codec finds it there, where a column of parent
  // ids alone never saw it (13.97 -> 8.69 bytes per span).
  kSpanIds,
  // Attribute columns (schema 12): the value of one well-known, high-entropy
  // span attribute, where the engine has LowCardinality and codecs
  // (AttrColumnsStored). Like values together compress far better than
  // among every other key's in attr_values (AttrColumnKeys).
  kAttrNetworkPeerAddress,
  kAttrNetworkPeerPort,
  kAttrUserAgentOriginal,
  kAttrDbStatement,
  kCount
};

// attr_types of a span attribute whose value is in its attribute column
// (its attr_values entry is empty): the type | this.
inline constexpr uint8_t kTypeInAttrColumn = 0x40;

// The attribute columns, in table order: the span attribute each holds.
inline constexpr size_t kAttrColumnCount = 4;
struct AttrColumnKey {
  Col id;
  std::string_view key;     // the span attribute's key
  std::string_view column;  // the column's name
};
const std::vector<AttrColumnKey>& AttrColumnKeys();
// The place in AttrColumnKeys of the column holding `key`'s value; -1: none.
int AttrColumnOf(std::string_view key);

struct ColumnSpec {
  Col id;
  const char* name;
  Logical logical;
  // The column's compression codec in the table where the server has codecs
  // (the argument of CODEC(...)); empty: the server's default, LZ4.
  // Chosen by measurement: `spanhouse bench storage`, BENCHMARKS.md.
  const char* codec = "";
};

// Columns of the spans table that are stored, in table and block order.
// `extras_column` (StorageLayout): the rare fields as the one extras
// column; false: as schema 7's 21 columns. `span_ids_column`: span_id and
// parent_span_id as span_ids (their ALIAS columns are not stored, nor sent);
// false: as schema 10's two columns. `attr_columns`: with the attribute
// columns (AttrColumnsStored says where).
const std::vector<ColumnSpec>& SpanColumns(bool extras_column = true, bool span_ids_column = true,
                                           bool attr_columns = false);
// The ALIAS columns the span_ids layout gives the spans table (span_id,
// parent_span_id), with their expressions over span_ids.
struct AliasColumn {
  Col id;
  const char* name;
  const char* expression;
};
const std::vector<AliasColumn>& SpanIdAliases();
// Columns of a span as read back (SpanReadQuery): the stored ones plus the
// resource's, joined from the resources table; the attribute columns too
// with `attr_columns`.
const std::vector<ColumnSpec>& ReadColumns(bool extras_column = true, bool attr_columns = false);
// The 21 rare columns, in table order: what the extras column holds.
const std::vector<ColumnSpec>& RareColumns();
// Columns of the sampled_spans table, in table and block order: the narrow
// row of a span sampled out (SpanBatch::Spans::metrics_only), what the RED
// views, the catalog's view and the dependency job read of a span, each
// with the spans table's logical type and codec (timestamp the same
// DateTime second, service_name and name the same key type).
const std::vector<ColumnSpec>& SampledColumns();
// The extras value computed by the engine from a table's 21 rare columns
// (the bytes EncodeSpanExtras makes): the DEFAULT of the extras column an
// upgrade adds to a schema-7 table, so that the copy into the new table
// reads the value for every old row.
std::string ExtrasFromRareColumns();

// One column of a table, as StorageLayout::codec sees it.
struct CodecQuery {
  std::string_view table;   // "spans", "resources", "trace_index", ...
  std::string_view column;  // its name
  std::string_view type;    // its type in the table ("Array(LowCardinality(String))")
  std::string_view chosen;  // the schema's own codec for it ("" = the server's default)
};

// How the tables are stored, where that leaves the logical row and every
// query alone: compression codecs, LowCardinality, the spans table's sort
// key and granule size. The defaults are the project's schema; `spanhouse
// bench storage` measures other layouts by changing them.
struct StorageLayout {
  // The codec of each column (what goes in CODEC(...); "" for none, i.e.
  // LZ4). Unset: the schema's own choice. Used only where the server has
  // codecs (Capabilities::codecs).
  std::function<std::string(const CodecQuery&)> codec;
  bool low_cardinality_keys = true;  // kKey columns LowCardinality(String) where supported
  // String arrays (attribute values) LowCardinality too: high-cardinality
  // values, but a trace repeats its own (session, request, user ids) in
  // every span, and the dictionary stores them once per part.
  bool low_cardinality_values = true;
  // The spans table's ORDER BY; empty: kSpansOrderBy. The writer sorts its
  // blocks that are inserts alone by that key (SortByTableKey).
  std::string spans_order_by;
  // Rows per granule of the spans table and its cap in bytes
  // (index_granularity_bytes, 10 MiB for 8192 rows, scaled alike); a merge
  // writes blocks of at least 8192 rows (merge_max_block_size), of a granule
  // where that is more. 0: the server's defaults (8192). Schema 6: 4096. A
  // lookup by trace id decompresses, per column, its granule up to the
  // trace: measured on 897,900 spans of the 50M store, 28 ms for one trace
  // against 52 with schema 5's 32768, 99 against 321 for ten; +1.6 bytes
  // per span (a LowCardinality column writes its dictionary per granule),
  // paid for by the codecs and resource_id below (BENCHMARKS.md).
  uint32_t index_granularity = 4096;
  // Parts of the spans table smaller than this (bytes before compression)
  // are compact: one data file for every column (where the server has them).
  uint64_t min_bytes_for_wide_part = 32ull << 20;
  // The spans table's resource_id LowCardinality(UInt64) where the server
  // takes it (Capabilities::low_cardinality_numbers): a part holds a few
  // hundred distinct resources, so each row keeps a 1-2 byte index where it
  // kept 8 bytes (1.18 -> 0.60 bytes per span compressed).
  bool low_cardinality_resource_id = true;
  // Keep the statistics newer servers (26.3+) build on every column of every
  // part by default; off, the tables are made with auto_statistics_types = ''.
  bool column_statistics = false;
  // More settings for every table ("name = value, ...").
  std::string table_settings;
  // trace_index's times in whole seconds (UInt32: the first start rounded
  // down, the last end up), where schema 4 kept nanoseconds: a lookup needs
  // only the seconds of the spans table to read.
  bool trace_index_seconds = true;
  // trace_index keyed by the trace id's first 8 bytes (trace_id8), not all
  // 16: a lookup whose prefix another trace shares reads a wider time range,
  // never a wrong span (the spans table is read by the whole id).
  bool trace_index_short_id = true;
  // A span's 21 rare fields (scope attributes, events, links) as one
  // RowBinary string, extras (span_extras.h), where schema 7 and older kept
  // 21 columns (~50 streams): a trace read 0.66-0.70x, the merge of a day
  // 0.73x of the CPU, the same bytes (BENCHMARKS.md). The writer must
  // agree (WriterOptions::extras_column).
  bool extras_column = true;
  // span_id and parent_span_id stored as one span_ids column (Col::kSpanIds),
  // where schema 10 and older kept two. The writer must agree
  // (LegacyLayout::span_ids_column).
  bool span_ids_column = true;
  // The attribute columns (Col::kAttrNetworkPeerAddress ...), where the
  // engine has LowCardinality and codecs: a span's value of each of those
  // keys is stored there, its attr_types entry marked kTypeInAttrColumn.
  // The writer must agree (LegacyLayout::attr_columns).
  bool attr_columns = true;
  // Each String of the spans table (a column, or a String path of
  // user_fields) written as one stream, its sizes inline, where the server
  // would write a data stream and a sizes stream (its default since 25.11):
  // a lookup reads ~15 streams fewer, and the table is ~0.5 bytes per span
  // smaller. Decision 0050.
  bool single_stream_strings = true;
  // Spans columns whose compressed blocks start from 16 KiB, not the
  // table's 64 KiB (a column-level min_compress_block_size, where the server
  // has column settings): a lookup decompresses, per stream, the block that
  // holds its granule, and these columns' granules are a few KiB (the JSON
  // column's ~95 streams, the dictionary-encoded and small columns), so a
  // 64 KiB block is several granules. Columns of 64 KiB or more per granule
  // are cut at each granule either way. Decision 0049.
  // user_fields as a Map(LowCardinality(String), LowCardinality(String)) of
  // each user field's value text (its type stays in attr_types), where the engine has
  // the JSON type; false: the JSON type, one subcolumn per path (schema 4 to
  // 12's tables keep it). A lookup reads the map's 3 streams where the JSON
  // column's ~15 paths read ~70. The writer and the reader follow the table's
  // column (SpansUserFieldsMap). Decision 0052.
  bool user_fields_map = true;
  std::vector<std::string> small_block_columns = {"user_fields",
                                                  "timestamp",
                                                  "trace_state",
                                                  "flags",
                                                  "name",
                                                  "kind",
                                                  "status_code",
                                                  "status_message",
                                                  "service_name",
                                                  "scope_name",
                                                  "scope_version",
                                                  "dropped_attributes_count",
                                                  "attr_user_agent_original",
                                                  "attr_db_statement"};
};

// The column-level setting of the spans columns in
// StorageLayout::small_block_columns.
inline constexpr std::string_view kSmallBlockSetting = "min_compress_block_size = 16384";
// The spans table's setting of StorageLayout::single_stream_strings.
inline constexpr std::string_view kSingleStreamStrings =
    "string_serialization_version = 'single_stream'";

// Whether the spans table has the attribute columns: the layout's choice,
// where the engine has LowCardinality and codecs (older servers keep every
// value in attr_values).
bool AttrColumnsStored(const Capabilities& caps, const StorageLayout& layout);

// The spans table's sort key: the span's start second first, then a
// trace's spans of that second together, in start order. Inserts arrive in
// time order, so the parts a merge joins hold mostly disjoint seconds and
// the merge copies runs of rows from each; under schema 8's hour first, the
// rows of ten inserts of one hour interleaved one by one by trace id, and a
// merge cost ~1.7x the CPU (BENCHMARKS.md, "Spans sorted by the second").
// A lookup by trace id is bounded by the trace's seconds (trace_index): in
// a granule within one second the key finds the id; at 4096 spans/s and
// more most granules are, and below a granule spans a few seconds, all of
// them read. Time-range scans are cut to the second.
inline constexpr std::string_view kSpansOrderBy = "(timestamp, trace_id, start_time)";
// Schema 8's and older (5 on): the hour, then the trace.
inline constexpr std::string_view kSchema8SpansOrderBy =
    "(toStartOfHour(timestamp), trace_id, start_time)";

// Schema 8's layout, where schema 9 differs: spans sorted by hour first
// (kSchema8SpansOrderBy). The upgrade test and `bench storage` build it.
StorageLayout Schema8Layout();

// Schema 12's layout, where schema 13 differs: user_fields as the JSON type
// (StorageLayout::user_fields_map false), which a store made before keeps.
StorageLayout Schema12Layout();

// Schema 10's layout, where schema 12 differs: span_id and parent_span_id in
// columns of their own (11), no attribute columns (12). The upgrade test and `bench storage` build
// it; a cluster's store made before schema 11 keeps it (SchemaOptions::copy_spans).
StorageLayout Schema10Layout();

// Schema 7's layout, where schema 8 differs: the 21 rare columns in place
// of extras (and schema 8's sort key). The upgrade test and `bench storage`
// build it.
StorageLayout Schema7Layout();

// Schema 5's layout, where schema 6 differs: granules of 32768 rows,
// resource_id UInt64, ZSTD(3) on attr_keys and attr_types (6 since), the
// part-size codec on parent_span_id and resource_id (ZSTD(3) since), and
// schema 7's rare columns. The upgrade test and `bench storage` build it.
StorageLayout Schema5Layout();

// Schema 4's layout, where schema 5 differs: sort key (hour, trace_id),
// granules of 8192 rows, trace_index by the whole id in nanoseconds,
// user_fields and attr_values with the part-size codec. (The upgrade test and `bench
// storage` build it; schema 4's writer also kept user-field values in the
// attribute arrays: UserFieldValues::kInArrays.)
StorageLayout Schema4Layout();

// Type of a column in a Native block (no LowCardinality, no codecs).
// How many Array()s wrap the column: 0, 1 or 2.
int ArrayDepth(Logical l);
std::string WireType(Logical l, const Capabilities& caps);
// Type of a column in the table.
std::string TableType(Logical l, const Capabilities& caps, const StorageLayout& layout = {});

// The database's name unless SchemaOptions::database (and the readers'
// options) say another.
inline constexpr std::string_view kDatabase = "spanhouse";
// 1: resource attributes in every span row. 2: resources stored once, by id.
// 3: per-minute RED views, the operations catalog, dependency edges.
// 4: codecs and types chosen by `spanhouse bench storage`, the user_fields
// JSON column (older tables take the codecs in place and gain the column;
// their types stay).
// 5: a span's user-field values stored once (in user_fields; the arrays
// keep key and marked type), spans sorted by (hour, trace_id, start_time)
// in granules of 32768 rows, user_fields and attr_values ZSTD(3),
// trace_index by the id's first 8 bytes in seconds. Sort key, granules and
// trace_index's columns
// cannot change in place: an older spans or trace_index table is made anew
// and its rows copied (EnsureSchema). Rows of schema 4 (values in both
// places) read back as they are.
// 6: granules of 4096 rows (copied as for 5), resource_id
// LowCardinality(UInt64), ZSTD(6) on attr_keys and attr_types, ZSTD(3) on
// parent_span_id and resource_id.
// 7: red_service_1m, red_1m per service and kind (a view on red_1m's
// inserts; made and filled from red_1m at the first start).
// 8: the 21 rare columns as one extras column. The older table gets extras
// with a DEFAULT computed from them (ExtrasFromRareColumns) and is copied
// into a new one without them, as for 5.
// 9: spans sorted by (timestamp, trace_id, start_time), the second first
// (kSpansOrderBy); copied as for 5.
// 10: sampled_spans (the spans sampled out: counted in red_1m,
// red_service_1m and operations by views of their own, and in the
// dependency edges by the job; not stored as spans). Created in place.
// 11: span_id and parent_span_id stored as one column, span_ids (the two
// ALIAS columns of it); copied as for 5 on one server. A cluster's spans
// tables made before keep their two columns (SchemaOptions::copy_spans).
// 12: the attribute columns (network.peer.address, network.peer.port,
// user_agent.original, db.statement), added in place; older rows keep their
// values in attr_values, unmarked.
// 13: user_fields a Map(LowCardinality(String), LowCardinality(String)) in
// tables made from now (StorageLayout::user_fields_map); a spans table made
// before keeps its JSON column, which the writer, the reader and the
// searches follow (SpansUserFieldsMap).
inline constexpr uint32_t kSchemaVersion = 13;
// The oldest schema EnsureSchema brings to kSchemaVersion on a cluster
// (only CREATE ... IF NOT EXISTS and in-place ALTERs): 9 -> 10 adds
// sampled_spans and its views; 10 -> 11 leaves a cluster's spans tables
// their two id columns (SchemaOptions::copy_spans).
inline constexpr uint32_t kInPlaceFromSchemaVersion = 9;

// Choices the schema takes from the configuration.
struct SchemaOptions {
  // The database the tables and views are made in: views read their own
  // database's tables, so a second database in the same engine (a second
  // sink's, a test's) is a store of its own. A plain identifier (letters,
  // digits, '_'; not a digit first): EnsureSchema refuses another.
  std::string database = std::string(kDatabase);
  // How long the per-minute RED series and dependency edges are kept.
  uint32_t metrics_retention_days = 7;
  // Spans are deleted this long after their timestamp, whole parts at a
  // time; trace_index and resources rows follow (SchemaDdl says when).
  // 0: kept for ever (tests that write fixed old timestamps).
  uint64_t retention_s = 0;
  // The engine has the kTieredPolicy storage policy (engine_config.h): the
  // spans table uses it and its parts move to the cold volume move_after_s
  // after their newest span (move_after_s < retention_s when both are set).
  bool tiered = false;
  uint64_t move_after_s = 0;
  // Codecs, LowCardinality, sort key: the project's own unless a benchmark
  // says otherwise.
  StorageLayout layout;
  // Not empty: the tables are Replicated*MergeTree, their ZooKeeper path
  // "<replicated_path>/<database>.<table>", the replica's name the server's
  // {replica} macro (e.g. "/clickhouse/tables/{shard}": each shard's own).
  std::string replicated_path;
  // Called once, with the engine's capabilities, right before an upgrade
  // starts copying a table (spans or trace_index: see EnsureSchema), while
  // the old tables and their views are still as they were; not OK stops
  // EnsureSchema before anything is renamed. The copy starts the engine's
  // insert-deduplication history afresh: serve writes the sink's sealed,
  // unfinished blocks here, into the old tables
  // (DurableQueue::ReplaySealedBlocks).
  std::function<Status(const Capabilities&)> before_copy;
  // Whether a spans table of another layout may be copied into a new one.
  // False on the servers of a cluster (a copy is not run across them): an
  // existing spans table without span_ids then keeps its two id columns,
  // and the writer writes those (SpansHaveSpanIds). The other differences a
  // copy makes (sort key, granules, extras) predate the clusters' schema 9.
  bool copy_spans = true;
};

// Whether `database`'s spans table stores span_ids (schema 11's layout) or
// span_id and parent_span_id (a cluster's store made before).
Status SpansHaveSpanIds(SqlConnection& conn, std::string_view database, bool* has);
// Whether `database`'s spans table keeps user_fields as a Map (schema 13),
// not the JSON type (nor does a spans_before_upgrade an upgrade's copy was
// stopped in): true where there is no spans table yet (EnsureSchema makes one
// with the Map) or the engine lacks the JSON type (the column is then JSON
// text whatever the layout says).
Status SpansUserFieldsMap(SqlConnection& conn, std::string_view database, bool* map);
// The spans table's TTL ("" for none), as the engine prints it back in
// system.tables.engine_full (so a start can tell whether it changed).
std::string SpansTtl(const Capabilities& caps, const SchemaOptions& options);
// The duration quantiles the RED views keep recoverable, in the order of
// the array their state merges into.
inline constexpr std::string_view kRedQuantiles = "0.5, 0.9, 0.95, 0.99";

// All DDL statements, in order, for a fresh database (idempotent: IF NOT EXISTS).
std::vector<std::string> SchemaDdl(const Capabilities& caps, const SchemaOptions& options = {});

// Reads the server version, creates what is missing, adds columns an older
// schema lacks, and records the schema version. Safe to run at every start.
// A spans table with another sort key or granule size, a trace_index with
// other columns (schema 4's) is renamed "<table>_before_upgrade", made anew
// and filled from the old one, which is then dropped: the rows are copied
// once, at that start (an upgrade stopped part-way starts its copy again
// at the next). The views reading the spans table are made again after it.
// The retention of the per-minute tables follows `options` at every start
// (TTL changed in place, applied as parts merge). So do the spans table's
// storage policy and TTL, trace_index's and resources' retention: a changed
// TTL is recomputed for the stored parts (only the TTL, nothing rewritten),
// so parts already stored move and go by the new intervals.
Status EnsureSchema(SqlConnection& conn, Capabilities* caps_out, const SchemaOptions& options = {});

// `sql` (a CREATE TABLE of SchemaDdl) with its MergeTree engine made the
// replicated one (SchemaOptions::replicated_path).
void ReplicateEngine(const SchemaOptions& options, std::string* sql);

// On a cluster of several shards, the tables reads go through: in
// `cluster_db`, one Distributed table over each table of `local_db` that the
// reader reads, on the servers' cluster `cluster` (remote_servers), made
// the same on every server.
std::vector<std::string> DistributedDdl(std::string_view cluster, std::string_view local_db,
                                        std::string_view cluster_db);

// The query a trace lookup starts with: the seconds of the spans table that
// hold the traces with ids {ids:Array(String)} (hex), as TSV rows
// "first\tlast", one per stored row of an id found (several where a trace's
// rows are in several days or parts not merged yet: the union of their
// ranges is the trace's; with trace_index_short_id, rows of every id with
// the same 8-byte prefix: a shared prefix widens the union, never narrows it).
// `simple_aggregate`: the server's trace_index holds plain values (else
// aggregate states, merged per day and id). `one_id`: the one id is bound as
// {id:String} instead.
std::string TraceRangeQuery(const StorageLayout& layout = {}, std::string_view database = kDatabase,
                            bool simple_aggregate = true, bool one_id = false);

// The setting under which a Native result carries JSON columns in the
// layout DecodeSpanBlocks reads (set it to 1 on a query of SpanSelectList).
inline constexpr std::string_view kFlattenedJsonSetting =
    "output_format_native_use_flattened_dynamic_and_json_serialization";

// "CAST(col AS wire) AS col, ..." over the stored columns (a table in the
// spans table's layout, without the resource join); user_fields as the JSON
// type where the engine has it (the query needs kFlattenedJsonSetting).
std::string SpanSelectList(const Capabilities& caps);

// The columns SpanReadQuery reads, in its order: ReadColumns() without the
// resource columns and, where `layout` stores span_ids, without
// parent_span_id (span_id then stands for the span_ids column).
std::vector<ColumnSpec> SpanReadColumns(const Capabilities& caps, const StorageLayout& layout);

// A query returning the spans that match `where` (a condition on the spans
// table, which may use {name:Type} parameters) as Native blocks in
// ReadColumns() layout without the resource columns (resource_id says which;
// ResourceReadQuery reads them), span_ids in place of span_id and
// parent_span_id where `layout` stores them so, in no order (a sort in the
// plan cost more than the reader's sort of a few traces). Columns keep the
// types `layout` stores them in (a CAST, left out for a column whose type in
// `stored_types`, name -> the table's type, is that type already). The read
// queries read `database`'s tables.
// `one_trace`: the condition selects one trace, whose spans lie in a granule
// or two; the read is then made on one thread, reading each stream's block in
// place (kOneTraceReadSettings, where caps has them).
std::string SpanReadQuery(const Capabilities& caps, const StorageLayout& layout,
                          std::string_view where, std::string_view database = kDatabase,
                          const std::unordered_map<std::string, std::string>& stored_types = {},
                          bool one_trace = false);

// The settings of a one-trace read: one thread; each stream's block read by
// the query's own thread (not handed to the reading pool); the JSON column's
// per-path prefixes read in turn (not by the prefix pool); the time and id
// conditions as one PREWHERE step. A lookup reads one granule of ~100
// streams, and each hand-off between threads cost more than the read.
inline constexpr std::string_view kOneTraceReadSettings =
    "max_threads = 1, local_filesystem_read_method = 'pread', "
    "merge_tree_use_prefixes_deserialization_thread_pool = 0, "
    "enable_multiple_prewhere_read_steps = 0";

// The resources whose ids are bound as {resource_ids:Array(UInt64)}, one row
// each, as Native blocks of ReadColumns()' resource columns and resource_id
// (DecodeSpanBlocks gives each row a span of its own); with `recent` > 0,
// also the `recent` resources seen last (`in`: "GLOBAL IN" over Distributed
// tables).
std::string ResourceReadQuery(const Capabilities& caps, std::string_view database = kDatabase,
                              size_t recent = 0, std::string_view in = "IN");

// Columns of the resources table's Native blocks: (name, logical type).
const std::vector<std::pair<const char*, Logical>>& ResourceColumns();

}  // namespace spanhouse::storage
