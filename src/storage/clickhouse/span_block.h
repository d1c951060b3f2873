// SpanBatch <-> Native block of the spans table (columns as in schema.h).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "model/span_batch.h"
#include "storage/clickhouse/native.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

// Appends one Native block holding every span of `batch`, one row each, to `out`.
void EncodeSpanBlock(const SpanBatch& batch, const Capabilities& caps, std::string* out);

// Appends the spans of one or more Native blocks (as written by
// EncodeSpanBlock or selected with SpanSelectList) to `out`. Each row gets
// its own resource and scope entry.
Status DecodeSpanBlocks(std::string_view data, SpanBatch* out);

}  // namespace spanhouse::storage
