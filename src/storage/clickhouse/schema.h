// The spanhouse schema, generated from code (design.md, "schema rule").
//
// One logical row per span on every ClickHouse version; the physical types
// follow what the server supports, read once from `SELECT version()`.
// The column list below is the single definition used by the DDL, the
// Native encoder, the Native decoder and the SELECT of the span reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace spanhouse::storage {

class ChdbConnection;

struct Capabilities {
  int major = 0;
  int minor = 0;
  bool datetime64 = false;            // DateTime64(9); else UInt64 nanoseconds
  bool low_cardinality = false;       // LowCardinality(String) without experimental settings
  bool simple_aggregate = false;      // SimpleAggregateFunction
  bool if_not_exists_column = false;  // ALTER TABLE ADD COLUMN IF NOT EXISTS

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
};

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
  kCount
};

struct ColumnSpec {
  Col id;
  const char* name;
  Logical logical;
};

const std::vector<ColumnSpec>& SpanColumns();

// Type of a column in a Native block (no LowCardinality, no codecs).
std::string WireType(Logical l, const Capabilities& caps);
// Type of a column in the table.
std::string TableType(Logical l, const Capabilities& caps);

inline constexpr std::string_view kDatabase = "spanhouse";
inline constexpr uint32_t kSchemaVersion = 1;

// All DDL statements, in order, for a fresh database (idempotent: IF NOT EXISTS).
std::vector<std::string> SchemaDdl(const Capabilities& caps);

// Reads the server version, creates what is missing, adds columns an older
// schema lacks, and records the schema version. Safe to run at every start.
Status EnsureSchema(ChdbConnection& conn, Capabilities* caps_out);

// "CAST(col AS wire) AS col, ..." for reading spans back as a Native block.
std::string SpanSelectList(const Capabilities& caps);

}  // namespace spanhouse::storage
