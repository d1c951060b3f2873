// A span's rare fields as one value: its scope's attributes, dropped count
// and schema URL, its events and its links (the spans table's 21 columns
// scope_attr_keys ... dropped_links_count), as ClickHouse's RowBinary of
// those columns in that order, "" when every one is empty.
//
// One string column in place of 21 (~50 streams) makes a trace read 0.66-
// 0.70x and the merge of a day 0.73x of the CPU at the same bytes
// (BENCHMARKS.md, "The 21 rare columns as one column"). The engine makes
// the same bytes from the 21 columns with formatRowNoNewline('RowBinary',
// ...), so a table that had them can compute the value for its old parts
// (a column DEFAULT) instead of rewriting them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::storage {

// Appends span `i`'s value to `out` (nothing when all its rare fields are
// empty).
void EncodeSpanExtras(const SpanBatch& b, uint32_t i, std::string* out);

// Reads a value made by EncodeSpanExtras (or the engine's RowBinary of the
// same columns) into span `span` of `out`, which must have no events or
// links yet and a scope of its own. "" leaves the span as it is.
Status DecodeSpanExtras(std::string_view value, SpanBatch* out, uint32_t span);

}  // namespace spanhouse::storage
