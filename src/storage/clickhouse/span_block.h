// SpanBatch <-> Native block of the spans table (columns as in schema.h).
//
// The encoder is span_block_encode.cc (the rows' order and the resources
// table's block too), the decoder span_block_decode.cc; the user_fields
// column is user_fields.h's, the dictionaries of a block key_index.h's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/span_batch.h"
#include "storage/clickhouse/native.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/user_fields.h"

namespace spanhouse::storage {

// ResourceFingerprint of every resource of `batch`, by resource index.
std::vector<uint64_t> ResourceIds(const SpanBatch& batch);

// Appends one Native block holding every span of `batch`, one row each, to
// `out`, in the spans table's layout (SpanColumns(extras_column,
// span_ids_column)). `resource_ids` are the batch's ResourceIds, computed
// here when null.
void EncodeSpanBlock(const SpanBatch& batch, const Capabilities& caps, std::string* out,
                     const std::vector<uint64_t>* resource_ids = nullptr,
                     const UserFields& user_fields = UserFields::Default(),
                     bool extras_column = true, bool span_ids_column = true,
                     bool attr_columns = true, bool user_fields_map = true);

// One row of a spans block: span `index` of `batch`, whose resource has
// the fingerprint `resource_id`.
struct SpanRow {
  const SpanBatch* batch = nullptr;
  uint32_t index = 0;
  uint64_t resource_id = 0;
};

// Orders rows by (start time / bucket_ns, trace_id, start_time), stably.
void SortByTimeTraceStart(std::vector<SpanRow>* rows, uint64_t bucket_ns);

// Orders rows as the spans table's sort key (kSpansOrderBy: timestamp, the
// start second; trace_id; start_time), stably. An insert whose block is
// already in key order is not sorted again by the engine.
inline void SortByTableKey(std::vector<SpanRow>* rows) {
  SortByTimeTraceStart(rows, 1000000000ull);
}

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
// `values`: where the spans' user fields keep their values (kInArrays where
// the engine lacks the JSON type). `extras_column`: the rare fields as the
// extras column (StorageLayout::extras_column); false: schema 7's columns.
// `span_ids_column`: both ids as span_ids (StorageLayout::span_ids_column);
// false: schema 10's two columns. `attr_columns`: the attribute columns
// where the engine has them (StorageLayout::attr_columns).
// `user_fields_map`: user_fields as a Map where the engine has the JSON type
// (StorageLayout::user_fields_map); false: the JSON type.
void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, EncodedBlock* out,
                    const UserFields& user_fields = UserFields::Default(),
                    UserFieldValues values = UserFieldValues::kMarked, bool extras_column = true,
                    bool span_ids_column = true, bool attr_columns = true,
                    bool user_fields_map = true);
// The same, appended to `out`.
void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, std::string* out,
                    const UserFields& user_fields = UserFields::Default(),
                    UserFieldValues values = UserFieldValues::kMarked, bool extras_column = true,
                    bool span_ids_column = true, bool attr_columns = true,
                    bool user_fields_map = true);

// The rows of the sampled_spans table (SampledColumns): spans sampled out
// (SpanBatch::Spans::metrics_only), gathered from any number of batches
// and blocks, written as ONE Native block. One block per insert, however
// many spooled blocks the spans of the same insert took: the engine's
// deduplication id counts the blocks an insert reads, and a replay forms the
// spans' blocks again but not how their sampled spans were spread over them.
// Each row's columns are appended to the column's stream as it comes (the
// streams grow by doubling: no allocation per row).
class SampledSpanRows {
 public:
  SampledSpanRows();
  // Span `i` of `b` as a row.
  void Add(const SpanBatch& b, uint32_t i);
  // Moves `other`'s rows after these (`other` is left empty).
  void Append(SampledSpanRows& other);
  void Clear();
  size_t rows() const { return rows_; }
  bool empty() const { return rows_ == 0; }
  // Bytes of the rows held (the streams' sizes).
  size_t bytes() const;
  // The rows as one Native block in pieces (the block's header, then each
  // column's header and values), to be written out in order.
  const std::vector<std::string>& Block(const Capabilities& caps);

 private:
  void Shape();                      // pieces_ sized (a moved-from object has none)
  std::vector<std::string> pieces_;  // [block header, (column header, values) per column]
  size_t rows_ = 0;
};

// The spans of `batch` as rows of a spans block (`rows`, appended; their
// resources' ids from `resource_ids`, by resource index), except its spans
// sampled out (metrics_only), which go to `sampled`. What a writer's block
// holds: a batch without sampled spans costs a test per span more.
void GatherSpanRows(const SpanBatch& batch, const std::vector<uint64_t>& resource_ids,
                    std::vector<SpanRow>* rows, SampledSpanRows* sampled);

// Appends one Native block of the resources table (ResourceColumns) with
// one row per resource index in `which`.
void EncodeResourceBlock(const SpanBatch& batch, const std::vector<uint32_t>& which,
                         const std::vector<uint64_t>& resource_ids, uint32_t last_seen,
                         const Capabilities& caps, std::string* out);

// Appends the spans of one or more Native blocks (as written by
// EncodeSpanBlock, or selected with SpanSelectList, SpanReadQuery or
// ResourceReadQuery) to `out`. Each row gets its own resource and scope
// entry. With `resource_ids`, the resource_id column's values are appended
// there, one per row (0 for a block without the column).
Status DecodeSpanBlocks(std::string_view data, SpanBatch* out,
                        std::vector<uint64_t>* resource_ids = nullptr);

}  // namespace spanhouse::storage
