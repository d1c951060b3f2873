// The schema's DDL (schema_ddl.cc) in the pieces EnsureSchema's upgrades
// (schema_upgrade.cc) build on: the tables' columns and codecs, the spans
// table's CREATE, the tables whose TTL follows the configuration. The DDL
// itself is SchemaDdl (schema.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "storage/clickhouse/schema.h"

namespace spanhouse::storage::ddl {

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
inline constexpr const char* kSized = "Default";
inline constexpr const char* kZstd3 = "ZSTD(3)";
inline constexpr const char* kZstd6 = "ZSTD(6)";
inline constexpr const char* kT64Sized = "T64, Default";

// A table whose TTL and settings follow the configuration: created with
// them, and changed in place at every start (EnsureSchema).
struct TtlTable {
  const char* name;
  std::string ttl;                    // "" for none
  std::vector<std::string> settings;  // "k = v", as the engine prints them back
};

// The spans table, then trace_index, resources and sampled_spans.
std::vector<TtlTable> TtlTables(const Capabilities& caps, const SchemaOptions& options);

// A column of a table: its type and the schema's own codec for it.
struct TableColumn {
  std::string name;
  std::string type;  // with " ALIAS <expression>" for an alias
  std::string codec;
  bool alias = false;  // computed from other columns, never stored nor sent
};

// The tables with columns, in creation order.
inline constexpr const char* kTables[] = {"resources",  "spans",          "trace_index",
                                          "red_1m",     "red_service_1m", "dependencies_1m",
                                          "operations", "sampled_spans"};

// What a CREATE or ALTER of the spans table needs to be allowed a
// LowCardinality(UInt64) column.
inline constexpr const char* kAllowLowCardinalityNumbers =
    "allow_suspicious_low_cardinality_types = 1";

// The columns of `table` (one of kTables).
std::vector<TableColumn> ColumnsOf(std::string_view table, const Capabilities& caps,
                                   const StorageLayout& layout);

// The codec a column gets: the layout's choice over the schema's own; ""
// where the server has no codecs or the server's default is chosen.
std::string CodecOf(std::string_view table, const TableColumn& c, const Capabilities& caps,
                    const StorageLayout& layout);

// Whether column `c` of `table` is made with kSmallBlockSetting
// (StorageLayout::small_block_columns).
bool SmallBlocks(std::string_view table, const TableColumn& c, const Capabilities& caps,
                 const StorageLayout& layout);

// "name type [CODEC(...)] [SETTINGS (...)]".
std::string ColumnDef(std::string_view table, const TableColumn& c, const Capabilities& caps,
                      const StorageLayout& layout);

// The spans table's CREATE (IF NOT EXISTS).
std::string SpansDdl(const Capabilities& caps, const SchemaOptions& options);

// Where SchemaDdl puts the spans table: what comes before it does not read
// it, what comes after may (views), so EnsureSchema upgrades the table's
// columns in between.
inline constexpr size_t kSpansDdlIndex = 3;

}  // namespace spanhouse::storage::ddl
