// The trace copy (storage.trace_copy_s, off by default): every span's row a
// second time, in a table ordered by the trace id's first 8 bytes with small
// granules, so that a stored trace is read in one query of one granule of one
// column, not through trace_index and a granule of every column of the spans
// table. A view writes it from every insert into spans (RowBinary of the
// columns a lookup reads, formatRow); the reader turns the rows back into
// those columns (CopyRowsToNative: the engine's format table function cost
// more than the read). It costs bytes (about twice the spans table's on the
// fresh corpus) and the view's CPU at insert; decision 0065 has the figures.
//
// The embedded engine only (chDB), on a spans table of the current layout
// (span_ids, user_fields as a Map). The copy's rows go keep_s after their
// day ends; a trace older than that, or one that may have begun before the
// copy was made, is read from the spans table as before.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/span_batch.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

// Creates the copy table and (again: its columns follow the spans table's)
// its view when keep_s > 0, the table's TTL set to keep_s; drops both when
// keep_s is 0. kInvalidArgument when `database`'s spans table is not of the
// current layout.
// `since_s` (if given): the newest second of the spans stored before the
// copy was made (0 when there were none, or it is dropped); it holds every
// span inserted since.
Status EnsureTraceCopy(SqlConnection& conn, const Capabilities& caps, std::string_view database,
                       uint64_t keep_s, uint64_t* since_s = nullptr);

// A trace is taken from the copy when its first span there starts at least
// this long after since_s: a trace with a span stored before the copy
// (which started by since_s) would have lasted longer than this.
inline constexpr uint64_t kTraceCopyMarginS = 3600;

// The copy's rows as read (`SELECT row ... FORMAT RowBinary`: each a String,
// its RowBinary text of the columns (name, type) of TraceCopyColumns) turned
// into one Native block of those columns, each with its type: what
// DecodeSpanBlocks reads. Only rows whose trace_id column is one of `ids`
// (a prefix shared by another trace is left out). kInternal, naming what,
// for a text that does not parse as those columns.
Status CopyRowsToNative(std::string_view rows,
                        const std::vector<std::pair<std::string, std::string>>& columns,
                        const std::vector<TraceId>& ids, std::string* native);

// The columns of the copy's rows, in their order, with the types RowBinary
// wrote them in (the spans table's, `stored_types`, without
// LowCardinality); empty when one is missing.
std::vector<std::pair<std::string, std::string>> TraceCopyColumns(
    const Capabilities& caps, const std::unordered_map<std::string, std::string>& stored_types);

// The query reading the copy's rows of the traces with ids {id:String}
// (`one_id`) or {ids:Array(String)} (hex): one String column, `row`.
std::string TraceCopyRowsQuery(std::string_view database, bool one_id);

// `type` without LowCardinality(...) wrappers: "Map(LowCardinality(String),
// String)" -> "Map(String, String)".
std::string WithoutLowCardinality(std::string_view type);

}  // namespace spanhouse::storage
