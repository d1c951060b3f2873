// SpanBatch <-> Native block of the spans table (columns as in schema.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "model/span_batch.h"
#include "storage/clickhouse/native.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

// Which attribute keys are user-defined fields, copied into the spans
// table's `user_fields` JSON column: those outside the well-known
// semantic-convention namespaces. A key is well-known when it equals a listed
// namespace or starts with one followed by a dot ("http" covers
// "http.request.method"; "app.internal" covers "app.internal.x").
class UserFields {
 public:
  explicit UserFields(const std::vector<std::string>& well_known);
  // The OpenTelemetry semantic-convention namespaces (http, db, rpc, k8s, ...).
  static const std::vector<std::string>& DefaultWellKnown();
  static const UserFields& Default();

  bool IsUserField(std::string_view key) const;

 private:
  std::unordered_set<std::string> well_known_;
};

// The user_fields value of spans: a JSON object of the span's user-defined
// attributes, then its resource's (a key in both: the span's comes first,
// and the engine keeps the first). Which keys are user fields is decided once
// per distinct key it has seen. The batches' strings must outlive it.
class UserFieldsJson {
 public:
  explicit UserFieldsJson(const UserFields& filter);
  ~UserFieldsJson();
  UserFieldsJson(const UserFieldsJson&) = delete;
  UserFieldsJson& operator=(const UserFieldsJson&) = delete;

  // Span `i` of `b`; valid until the next call.
  std::string_view Of(const SpanBatch& b, uint32_t i);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Where a span's own user-field attribute keeps its value. Every user field
// goes to the user_fields JSON column; the question is what stays in the
// attribute arrays beside it.
enum class UserFieldValues : uint8_t {
  // Key, type and value in the arrays too: schema 4, and every engine
  // without the JSON type.
  kInArrays,
  // Key and type in the arrays, the type marked (kTypeInUserFields), the
  // value empty: the value is stored once, in user_fields, and read back
  // from there (schema 5). Only values the JSON type gives back exactly:
  // strings, ints and doubles in their canonical text, bools; not bytes,
  // arrays, kvlists, non-finite doubles, nor a key past the block's path cap.
  kMarked,
  // Left out of the arrays altogether (measured by `bench storage` only: the
  // reader does not restore these).
  kDropped,
};
// attr_types of a span attribute whose value is in user_fields (kMarked).
inline constexpr uint8_t kTypeInUserFields = 0x80;

// ResourceFingerprint of every resource of `batch`, by resource index.
std::vector<uint64_t> ResourceIds(const SpanBatch& batch);

// Appends one Native block holding every span of `batch`, one row each, to
// `out`, in the spans table's layout (SpanColumns(extras_column)).
// `resource_ids` are the batch's ResourceIds, computed here when null.
void EncodeSpanBlock(const SpanBatch& batch, const Capabilities& caps, std::string* out,
                     const std::vector<uint64_t>* resource_ids = nullptr,
                     const UserFields& user_fields = UserFields::Default(),
                     bool extras_column = true);

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
void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, EncodedBlock* out,
                    const UserFields& user_fields = UserFields::Default(),
                    UserFieldValues values = UserFieldValues::kMarked, bool extras_column = true);
// The same, appended to `out`.
void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, std::string* out,
                    const UserFields& user_fields = UserFields::Default(),
                    UserFieldValues values = UserFieldValues::kMarked, bool extras_column = true);

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
