// The span rows of a SpanBatch in ClickHouse's row input formats, next to
// Native: what `spanhouse bench formats` compares to choose the insert path.
//
// Every format carries all columns of SpanColumns(), in that order, with the
// same logical mapping as EncodeSpanBlock (timestamp = start second,
// duration = end - start, resource and scope values repeated per span).
//
//   Values        (v1,v2,...),(...)   strings and times quoted, \-escaped
//   TabSeparated  v1\tv2...\n         TSV escaping; arrays as ['a','b']
//   RowBinary     row by row: String = varint length + bytes, FixedString raw,
//                 Array = varint count + elements, numbers little-endian
//   Native        EncodeSpanBlock
//
// user_fields goes as the JSON type (JSON text in the text formats): the
// formats are compared on tables of schema 12's layout (Schema12Layout).
//
// Times in text: DateTime as Unix seconds, DateTime64(9) as seconds with nine
// fractional digits (UInt64 nanoseconds where the server lacks DateTime64).
// Bytes outside printable ASCII in ids, and control bytes in strings, are
// written as \xNN; other string bytes (UTF-8 included) go through as they are.
#pragma once

#include <string>
#include <string_view>

#include "model/span_batch.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

enum class RowFormat { kValues, kTabSeparated, kRowBinary, kNative };

// ClickHouse's name of the format ("Values", "TabSeparated", ...).
const char* FormatName(RowFormat f);

// Appends every span of `batch`, one row each, to `out` in format `f`.
void EncodeRows(const SpanBatch& batch, const Capabilities& caps, RowFormat f, std::string* out);

// "timestamp, trace_id, ...": the spans table's columns the formats carry,
// for an INSERT's column list (the table has more: the attribute columns).
std::string RowColumns();

// "timestamp DateTime, trace_id FixedString(16), ...": the types every
// encoder here writes (WireType), for the file() table function.
std::string RowStructure(const Capabilities& caps);

// Which structure the file() table function reads a file with.
//   kWire:  the encoder's own types, named in the query (String where the
//           table has LowCardinality(String)); the INSERT converts. Columns
//           go in by position (Native: by name).
//   kTable: none named; file() takes the insertion table's structure
//           (use_structure_from_insertion_table_in_table_functions).
// Both read the same bytes back identically; on chDB 26.5 kWire inserted
// 1.3-4x faster (see `spanhouse bench formats`).
enum class FileStructure { kWire, kTable };

// INSERT INTO <table> [(<columns>)] SELECT * FROM file({path:String}, '<format>'[,
// '<structure>']).
std::string InsertFromFileSql(std::string_view table, RowFormat f, const Capabilities& caps,
                              FileStructure s = FileStructure::kWire,
                              std::string_view columns = {});

}  // namespace spanhouse::storage
