// User fields: the attributes outside the semantic conventions, which the
// spans table also keeps in its user_fields column (a Map of value texts from
// schema 13, decision 0052; the JSON type, one path per key, in stores made
// before), and how that column is written into a Native block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/span_batch.h"
#include "storage/clickhouse/key_index.h"
#include "storage/clickhouse/native.h"

namespace spanhouse::storage {

// Which attribute keys are user-defined fields, copied into the spans
// table's `user_fields` column: those outside the well-known
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
// goes to the user_fields column; the question is what stays in the
// attribute arrays beside it.
enum class UserFieldValues : uint8_t {
  // Key, type and value in the arrays too: schema 4, and every engine
  // without the JSON type.
  kInArrays,
  // Key and type in the arrays, the type marked (kTypeInUserFields), the
  // value empty: the value is stored once, in user_fields, and read back
  // from there (schema 5). Only values the column gives back exactly: in a
  // Map every value but bytes (kept as base64 text); in the JSON type
  // strings, ints and doubles in their canonical text, bools; not bytes,
  // arrays, kvlists, non-finite doubles, nor a key past the block's path cap.
  kMarked,
  // Left out of the arrays altogether (measured by `bench storage` only: the
  // reader does not restore these).
  kDropped,
};
// attr_types of a span attribute whose value is in user_fields (kMarked).
inline constexpr uint8_t kTypeInUserFields = 0x80;

// The user_fields column as the JSON type's own columns, in the engine's
// "flattened" Native layout: the block's distinct paths, then per path a
// Dynamic column (its value types, then per row which type or NULL, then the
// values of each type). The engine then stores typed subcolumns without
// parsing any JSON text, which measured ~3x the rest of the insert.
// The span block's encoder writes one per block; the batches' strings must
// outlive it.
//
// With `map` (StorageLayout::user_fields_map), the column is a map instead,
// sent as kUserFieldsMapWireType: per row its keys and value texts (bytes
// in base64), the keys a dictionary of the block's paths.
class UserFieldsColumns {
 public:
  explicit UserFieldsColumns(const UserFields& filter, bool map = false)
      : filter_(filter), map_(map) {}

  // Span `i` of `b` as the next row. `exact`, when given, gets one flag per
  // attribute of the span: 1 where user_fields holds that attribute's value
  // and gives it back exactly (its type and its text).
  // `key_ids`, when given, are the span's attribute keys as indexes of a
  // dictionary of the block's span attribute keys (the attr_keys column's):
  // each key's path is then looked up once per block, not once per row.
  void Row(const SpanBatch& b, uint32_t i, std::vector<uint8_t>* exact = nullptr,
           const uint32_t* key_ids = nullptr);

  // The column's data, after the last row (a map's after its LowCardinality
  // version, which the column's header has).
  void Write(native::Writer& w);

 private:
  // In type-name order: Bool < Float64 < Int64 < String.
  enum : uint8_t { kBool = 0, kFloat64 = 1, kInt64 = 2, kString = 3, kTypes = 4, kNull = 4 };
  static constexpr const char* kTypeNames[kTypes] = {"Bool", "Float64", "Int64", "String"};
  // A block keeps at most this many paths (the JSON type's default limit
  // of dynamic paths is 1024); keys beyond it stay in the attribute columns.
  static constexpr size_t kMaxPaths = 1000;

  struct Path {
    std::string_view name;
    uint32_t map_key = 0;       // its index in map_keys_ (a map)
    size_t map_row = 0;         // a map: the last row it was set in, plus one
    std::vector<uint8_t> type;  // per row: a type, or kNull
    unsigned types = 0;         // bit per type present
    std::vector<uint8_t> bools;
    std::vector<double> doubles;
    std::vector<int64_t> ints;
    std::string strings;  // Native String values back to back
  };

  static constexpr uint32_t kNoAttr = ~0u;

  // The path of a user-field key, or -1.
  int32_t PathOf(std::string_view key);
  // The path of the key with index `id` in the caller's key dictionary.
  int32_t PathOfId(uint32_t id, std::string_view key);
  // Attribute `a`, whose key has `path` (-1: not a user field), in this
  // row. True when it was stored (the first of its key in the row) and
  // reads back exactly.
  bool Set(const SpanBatch& b, const AttrColumns& cols, uint32_t a, int32_t path);
  // Adds one value; true when the type and text come back as they are
  // (the text is what the decoders make of such a value: value_text.h).
  static bool Add(Path& p, ValueType t, std::string_view v);
  // A map's value: its text, as the attribute arrays would keep it (bytes
  // in base64). True when it reads back as it is.
  bool AddText(ValueType t, std::string_view v);
  static void Push(Path& p, uint8_t type);
  static void AppendString(std::string& out, std::string_view v);

  const UserFields& filter_;
  const bool map_;
  // A map's keys (its paths' indexes), values and offsets.
  LcDict map_keys_;
  std::string map_values_;
  std::vector<uint64_t> map_offsets_;
  static constexpr int32_t kUnknownPath = -2;
  KeyIndex keys_;
  std::vector<int32_t> path_of_;     // by key index: its path, or -1 (not a user field)
  std::vector<int32_t> path_of_id_;  // by the caller's key index (PathOfId), or kUnknownPath
  std::vector<Path> paths_;
  // Per batch, per resource: its attributes that are user fields, with their
  // paths (then kNoAttr).
  struct ResourceField {
    uint32_t attr;
    int32_t path;
  };
  std::unordered_map<const SpanBatch*, std::vector<std::vector<ResourceField>>> resource_fields_;
  const SpanBatch* last_batch_ = nullptr;
  std::vector<std::vector<ResourceField>>* last_fields_ = nullptr;  // last_batch_'s
  size_t rows_ = 0;
};

}  // namespace spanhouse::storage
