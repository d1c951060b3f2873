// SpanBatch <-> Native block of the spans table (columns as in schema.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/span_batch.h"
#include "storage/clickhouse/native.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

// ResourceFingerprint of every resource of `batch`, by resource index.
std::vector<uint64_t> ResourceIds(const SpanBatch& batch);

// Appends one Native block holding every span of `batch`, one row each, to
// `out`, in the spans table's layout (SpanColumns). `resource_ids` are the
// batch's ResourceIds, computed here when null.
void EncodeSpanBlock(const SpanBatch& batch, const Capabilities& caps, std::string* out,
                     const std::vector<uint64_t>* resource_ids = nullptr);

// One row of a spans block: span `index` of `batch`, whose resource has
// the fingerprint `resource_id`.
struct SpanRow {
  const SpanBatch* batch = nullptr;
  uint32_t index = 0;
  uint64_t resource_id = 0;
};

// Orders rows as the spans table's sort key, (toStartOfHour(timestamp),
// trace_id), stably. An insert whose block is already in key order is not
// sorted again by the engine.
void SortByTableKey(std::vector<SpanRow>* rows);

// One Native block in pieces (the block header, then per column its header
// and its streams: array offsets, values), which concatenated in order are
// the block. Kept apart so the encoder can fill every column in one pass
// over the rows, and so they can be written out without joining them.
// Reusing one keeps the pieces' capacity.
struct EncodedBlock {
  std::vector<std::string> pieces;
  size_t size() const;  // bytes, all pieces
  void AppendTo(std::string* out) const;
};

// One Native block with `rows`, in that order, in the spans table's layout:
// replaces `out`'s content. The batches must outlive the call.
void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, EncodedBlock* out);
// The same, appended to `out`.
void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, std::string* out);

// Appends one Native block of the resources table (ResourceColumns) with
// one row per resource index in `which`.
void EncodeResourceBlock(const SpanBatch& batch, const std::vector<uint32_t>& which,
                         const std::vector<uint64_t>& resource_ids, uint32_t last_seen,
                         const Capabilities& caps, std::string* out);

// Appends the spans of one or more Native blocks (as written by
// EncodeSpanBlock, or selected with SpanSelectList or SpanReadQuery) to `out`. Each row gets
// its own resource and scope entry.
Status DecodeSpanBlocks(std::string_view data, SpanBatch* out);

}  // namespace spanhouse::storage
