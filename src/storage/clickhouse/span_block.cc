#include "storage/clickhouse/span_block.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "codec/value_text.h"
#include "storage/clickhouse/span_extras.h"

namespace spanhouse::storage {

namespace {

using native::Reader;
using native::Writer;

// Distinct strings of a block, each with a dense index (0, 1, 2, ... in
// order of first sight). The strings are not copied: they must outlive it.
class KeyIndex {
 public:
  KeyIndex() : slots_(64) {}

  // The index of `s`, new ones appended; `added` says whether it was new.
  uint32_t Find(std::string_view s, bool* added = nullptr) {
    const uint32_t h = Hash(s);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.key == kEmpty) {
        slot = {h, static_cast<uint32_t>(keys_.size())};
        keys_.push_back(s);
        if (keys_.size() * 2 > slots_.size()) Grow();
        if (added != nullptr) *added = true;
        return static_cast<uint32_t>(keys_.size() - 1);
      }
      if (slot.hash == h && keys_[slot.key] == s) {
        if (added != nullptr) *added = false;
        return slot.key;
      }
    }
  }
  const std::vector<std::string_view>& keys() const { return keys_; }

 private:
  // Keys are short (names, attribute keys) and a slot is confirmed by
  // comparing the string, so the hash is a few loads and multiplies, not a
  // general-purpose byte loop.
  static uint32_t Hash(std::string_view s) {
    const size_t n = s.size();
    const char* p = s.data();
    uint64_t a = 0;
    uint64_t b = 0;
    if (n >= 8) {
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + n - 8, 8);
      if (n > 16) {
        uint64_t m = 0;
        std::memcpy(&m, p + n / 2 - 4, 8);
        a ^= m * 0xc2b2ae3d27d4eb4full;
      }
    } else if (n >= 4) {
      uint32_t x = 0;
      uint32_t y = 0;
      std::memcpy(&x, p, 4);
      std::memcpy(&y, p + n - 4, 4);
      a = x;
      b = y;
    } else if (n > 0) {
      a = static_cast<uint8_t>(p[0]) | static_cast<uint64_t>(static_cast<uint8_t>(p[n / 2])) << 8 |
          static_cast<uint64_t>(static_cast<uint8_t>(p[n - 1])) << 16;
    }
    uint64_t h = (a ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    h ^= (b + n) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return static_cast<uint32_t>(h ^ (h >> 32));
  }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& o : old) {
      if (o.key == kEmpty) continue;
      size_t i = o.hash & mask;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask;
      slots_[i] = o;
    }
  }

  struct Slot {
    uint32_t hash = 0;
    uint32_t key = kEmpty;
  };
  static constexpr uint32_t kEmpty = ~0u;

  std::vector<std::string_view> keys_;
  std::vector<Slot> slots_;
};

// The dictionary of one LowCardinality(String) column of a block: each
// distinct string once, each value an index into it. The engine stores such
// a column this way; sent as plain strings, it would hash every value itself
// to build the dictionary.
class LcDict {
 public:
  LcDict() { keys_.Find(std::string_view()); }  // key 0: the default value

  void Add(std::string_view s) {
    // Rows come in the table's order (by trace): a value is often the
    // previous row's (its service, scope, name), which a compare finds
    // for less than a hash and a probe.
    if (s != last_) {
      last_ = s;
      last_index_ = keys_.Find(s);
    }
    index_.push_back(last_index_);
  }
  // The index of `s` in the dictionary (added if new), without a row: for
  // a caller that adds the row later with AddIndex, the same keys in the
  // same order.
  uint32_t Index(std::string_view s) { return keys_.Find(s); }
  void AddIndex(uint32_t k) { index_.push_back(k); }

  // The column's data after its array offsets, in the engine's layout
  // (keys as "additional keys" of the block, no shared dictionary): flags
  // (index width | has additional keys | dictionary update), the keys, then
  // the rows' indexes. Nothing when the column has no values.
  void Write(native::Writer& w) const {
    if (index_.empty()) return;
    const size_t n = keys_.keys().size();
    const uint64_t width = n <= 0x100 ? 0 : n <= 0x10000 ? 1 : 2;  // UInt8, UInt16, UInt32
    w.Fixed<uint64_t>(width | (1u << 9) | (1u << 10));
    w.Fixed<uint64_t>(n);
    for (std::string_view k : keys_.keys()) w.String(k);
    w.Fixed<uint64_t>(index_.size());
    for (uint32_t i : index_) {
      if (width == 0) {
        w.Fixed<uint8_t>(static_cast<uint8_t>(i));
      } else if (width == 1) {
        w.Fixed<uint16_t>(static_cast<uint16_t>(i));
      } else {
        w.Fixed<uint32_t>(i);
      }
    }
  }

 private:
  KeyIndex keys_;
  std::vector<uint32_t> index_;
  std::string_view last_;
  uint32_t last_index_ = 0;  // of last_ (key 0: "", which last_ starts as)
};

}  // namespace

// The user_fields column: per row a JSON object of the span's user-defined
// attributes, then its resource's (a key in both: the span's wins, the
// engine skipping the repeated path). Which keys are user fields is decided
// once per distinct key of the block; a resource's part once per batch.
struct UserFieldsJson::Impl {
  explicit Impl(const UserFields& filter) : filter_(filter) {}

  std::string_view Of(const SpanBatch& b, uint32_t i) {
    json_.assign(1, '{');
    bool first = true;
    Append(b, b.span_attrs, b.spans.attrs[i], &json_, &first);
    const std::string& res = ResourcePart(b, b.spans.resource[i]);
    if (!res.empty()) {
      if (!first) json_ += ',';
      json_ += res;
    }
    json_ += '}';
    return json_;
  }

  bool IsUserField(std::string_view key) {
    bool added = false;
    const uint32_t k = keys_.Find(key, &added);
    if (added) user_.push_back(!key.empty() && filter_.IsUserField(key) ? 1 : 0);
    return user_[k] != 0;
  }
  // `"key":value` pairs, comma-separated, of the user fields in `r`.
  void Append(const SpanBatch& b, const AttrColumns& cols, Range r, std::string* out, bool* first) {
    for (uint32_t a = r.begin; a < r.end; ++a) {
      const std::string_view key = b.Str(cols.key[a]);
      if (!IsUserField(key)) continue;
      if (!*first) *out += ',';
      *first = false;
      codec::AppendJsonString(*out, key);
      *out += ':';
      const std::string_view v = b.Str(cols.value[a]);
      switch (cols.type[a]) {
        case ValueType::kBool:
        case ValueType::kInt:
          out->append(v);  // true / false, decimal: JSON as they are
          break;
        case ValueType::kDouble:
          if (!v.empty() && (v.back() >= '0' && v.back() <= '9')) {
            out->append(v);
          } else {
            codec::AppendJsonString(*out, v);  // NaN, Infinity: not JSON numbers
          }
          break;
        case ValueType::kBytes: {
          std::string b64;
          codec::AppendBase64(b64, v);
          codec::AppendJsonString(*out, b64);
          break;
        }
        case ValueType::kEmpty:
          *out += "null";
          break;
        default:  // strings; arrays and kvlists as their JSON text, one value
          codec::AppendJsonString(*out, v);
          break;
      }
    }
  }
  const std::string& ResourcePart(const SpanBatch& b, uint32_t r) {
    std::vector<std::string>& parts = resources_[&b];
    if (parts.empty()) {
      parts.resize(b.resources.attrs.size());
      for (uint32_t k = 0; k < parts.size(); ++k) {
        bool first = true;
        Append(b, b.resource_attrs, b.resources.attrs[k], &parts[k], &first);
      }
    }
    return parts[r];
  }

  const UserFields& filter_;
  KeyIndex keys_;
  std::vector<uint8_t> user_;  // by key index: 1 = user field
  std::unordered_map<const SpanBatch*, std::vector<std::string>> resources_;
  std::string json_;
};

namespace {

// The user_fields column as the JSON type's own columns, in the engine's
// "flattened" Native layout: the block's distinct paths, then per path a
// Dynamic column (its value types, then per row which type or NULL, then the
// values of each type). The engine then stores typed subcolumns without
// parsing any JSON text, which measured ~3x the rest of the insert.
class UserFieldsColumns {
 public:
  explicit UserFieldsColumns(const UserFields& filter) : filter_(filter) {}

  // Span `i` of `b` as the next row. `exact`, when given, gets one flag per
  // attribute of the span: 1 where user_fields holds that attribute's value
  // and gives it back exactly (its type and its text).
  // `key_ids`, when given, are the span's attribute keys as indexes of a
  // dictionary of the block's span attribute keys (the attr_keys column's):
  // each key's path is then looked up once per block, not once per row.
  void Row(const SpanBatch& b, uint32_t i, std::vector<uint8_t>* exact = nullptr,
           const uint32_t* key_ids = nullptr) {
    // The span's first: a key in both is its.
    const Range own = b.spans.attrs[i];
    if (exact != nullptr) exact->assign(own.size(), 0);
    for (uint32_t a = own.begin; a < own.end; ++a) {
      const std::string_view key = b.Str(b.span_attrs.key[a]);
      const int32_t path = key_ids != nullptr ? PathOfId(key_ids[a - own.begin], key) : PathOf(key);
      const bool e = Set(b, b.span_attrs, a, path);
      if (exact != nullptr) (*exact)[a - own.begin] = e ? 1 : 0;
    }
    // A resource's user fields are found once per batch: its ~15 attributes
    // come with every span and few are user fields. Kept with their paths;
    // the batch's list found once per run of rows from it.
    if (&b != last_batch_) {
      last_batch_ = &b;
      last_fields_ = &resource_fields_[&b];
      if (last_fields_->empty()) last_fields_->resize(b.resources.attrs.size());
    }
    std::vector<ResourceField>& res = (*last_fields_)[b.spans.resource[i]];
    if (res.empty()) {
      const Range range = b.resources.attrs[b.spans.resource[i]];
      for (uint32_t a = range.begin; a < range.end; ++a) {
        const int32_t path = PathOf(b.Str(b.resource_attrs.key[a]));
        if (path >= 0) res.push_back({a, path});
      }
      res.push_back({kNoAttr, -1});  // known, even when it has none
    }
    for (const ResourceField& f : res) {
      if (f.attr != kNoAttr) Set(b, b.resource_attrs, f.attr, f.path);
    }
    ++rows_;
  }

  void Write(native::Writer& w) {
    if (rows_ == 0) return;
    w.Fixed<uint64_t>(3);  // JSON serialization: flattened
    w.Varint(paths_.size());
    for (const Path& p : paths_) w.String(p.name);
    for (const Path& p : paths_) {
      w.Fixed<uint64_t>(3);  // Dynamic serialization: flattened
      w.Varint(static_cast<uint64_t>(__builtin_popcount(p.types)));
      for (int t = 0; t < kTypes; ++t) {
        if ((p.types & (1u << t)) != 0) w.String(kTypeNames[t]);
      }
    }
    for (Path& p : paths_) {
      // Discriminators: a type's rank among the path's types (they are
      // listed in name order, as kTypeNames is), NULL after the last.
      uint8_t rank[kTypes + 1];
      uint8_t n = 0;
      for (int t = 0; t < kTypes; ++t) rank[t] = (p.types & (1u << t)) != 0 ? n++ : 0;
      rank[kNull] = n;
      p.type.resize(rows_, kNull);
      for (uint8_t t : p.type) w.Fixed<uint8_t>(rank[t]);
      for (uint8_t v : p.bools) w.Fixed<uint8_t>(v);
      for (double v : p.doubles) w.Fixed<double>(v);
      for (int64_t v : p.ints) w.Fixed<int64_t>(v);
      w.Bytes(p.strings.data(), p.strings.size());
    }
  }

 private:
  // In type-name order: Bool < Float64 < Int64 < String.
  enum : uint8_t { kBool = 0, kFloat64 = 1, kInt64 = 2, kString = 3, kTypes = 4, kNull = 4 };
  static constexpr const char* kTypeNames[kTypes] = {"Bool", "Float64", "Int64", "String"};
  // A block keeps at most this many paths (the JSON type's default limit
  // of dynamic paths is 1024); keys beyond it stay in the attribute columns.
  static constexpr size_t kMaxPaths = 1000;

  struct Path {
    std::string_view name;
    std::vector<uint8_t> type;  // per row: a type, or kNull
    unsigned types = 0;         // bit per type present
    std::vector<uint8_t> bools;
    std::vector<double> doubles;
    std::vector<int64_t> ints;
    std::string strings;  // Native String values back to back
  };

  static constexpr uint32_t kNoAttr = ~0u;

  // The path of a user-field key, or -1.
  int32_t PathOf(std::string_view key) {
    bool added = false;
    const uint32_t k = keys_.Find(key, &added);
    if (added) {
      const bool user = !key.empty() && filter_.IsUserField(key) && paths_.size() < kMaxPaths;
      path_of_.push_back(user ? static_cast<int32_t>(paths_.size()) : -1);
      if (user) {
        paths_.emplace_back();
        paths_.back().name = key;
      }
    }
    return path_of_[k];
  }
  // The path of the key with index `id` in the caller's key dictionary.
  int32_t PathOfId(uint32_t id, std::string_view key) {
    if (id >= path_of_id_.size()) path_of_id_.resize(id + 1, kUnknownPath);
    int32_t& path = path_of_id_[id];
    if (path == kUnknownPath) path = PathOf(key);
    return path;
  }
  // Attribute `a`, whose key has `path` (-1: not a user field), in this
  // row. True when it was stored (the first of its key in the row) and
  // reads back exactly.
  bool Set(const SpanBatch& b, const AttrColumns& cols, uint32_t a, int32_t path) {
    if (path < 0 || cols.type[a] == ValueType::kEmpty) return false;
    Path& p = paths_[static_cast<size_t>(path)];
    if (p.type.size() > rows_) return false;  // already set in this row: the first wins
    p.type.resize(rows_, kNull);
    return Add(p, cols.type[a], b.Str(cols.value[a]));
  }
  // Adds one value; true when the type and text come back as they are
  // (the text is what the decoders make of such a value: value_text.h).
  static bool Add(Path& p, ValueType t, std::string_view v) {
    const char* end = v.data() + v.size();
    switch (t) {
      case ValueType::kBool:
        Push(p, kBool);
        p.bools.push_back(v == "true" ? 1 : 0);
        return v == "true" || v == "false";
      case ValueType::kInt: {
        int64_t n = 0;
        if (std::from_chars(v.data(), end, n).ptr == end && !v.empty()) {
          Push(p, kInt64);
          p.ints.push_back(n);
          char buf[24];
          const auto r = std::to_chars(buf, buf + sizeof(buf), n);
          return std::string_view(buf, static_cast<size_t>(r.ptr - buf)) == v;
        }
        break;
      }
      case ValueType::kDouble: {
        double d = 0;
        if (!v.empty() && v.back() >= '0' && v.back() <= '9' &&
            std::from_chars(v.data(), end, d).ptr == end) {
          Push(p, kFloat64);
          p.doubles.push_back(d);
          char buf[32];
          const auto r = std::to_chars(buf, buf + sizeof(buf), d);
          return std::string_view(buf, static_cast<size_t>(r.ptr - buf)) == v;
        }
        break;  // NaN, Infinity: as text
      }
      case ValueType::kBytes: {
        std::string b64;
        codec::AppendBase64(b64, v);
        Push(p, kString);
        AppendString(p.strings, b64);
        return false;
      }
      default:
        break;
    }
    Push(p, kString);  // strings; arrays and kvlists as their JSON text
    AppendString(p.strings, v);
    return t == ValueType::kString;
  }
  static void Push(Path& p, uint8_t type) {
    p.type.push_back(type);
    p.types |= 1u << type;
  }
  static void AppendString(std::string& out, std::string_view v) {
    uint64_t n = v.size();
    while (n >= 0x80) {
      out += static_cast<char>(n | 0x80);
      n >>= 7;
    }
    out += static_cast<char>(n);
    out.append(v);
  }

  const UserFields& filter_;
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

// Writes the spans table's columns for a list of rows, each a span of some
// batch: one block may gather spans from many batches, in any order (the
// writer's order is the table's sort key, so the engine need not sort).
//
// Row by row, not column by column: each column's streams (array offsets,
// values) are separate buffers, and one pass over the rows appends a row to
// all of them while its span is in cache. In the table's order, consecutive
// rows come from different batches; walking them once per column, as a
// columnar encoder would, fetched every span's data from memory ~40 times.
class Encoder {
 public:
  Encoder(const Capabilities& caps, EncodedBlock* out, size_t rows, const UserFields& user_fields,
          UserFieldValues values, bool extras_column)
      : out_(out),
        json_type_(caps.json_type),
        values_(caps.json_type ? values : UserFieldValues::kInArrays),
        user_fields_(user_fields),
        user_field_columns_(user_fields) {
    const auto& cols = SpanColumns(extras_column);
    // Pieces: the block header, then per column its header and streams.
    size_t n = 1;
    for (const auto& c : cols) n += 1 + static_cast<size_t>(ArrayDepth(c.logical)) + 1;
    out_->pieces.resize(n);
    for (auto& p : out_->pieces) p.clear();
    {
      native::Writer h(&out_->pieces[0]);
      h.BlockHeader(cols.size(), rows);
    }
    size_t at = 1;
    cols_.reserve(cols.size());
    for (const auto& c : cols) {
      // Key columns go as the table stores them: LowCardinality where the
      // engine has it (few distinct values: a small dictionary per block).
      // Attribute values go as plain strings even where the table keeps
      // them LowCardinality: nearly every value is distinct in a block, and
      // building that dictionary here cost more than the engine's
      // conversion (null sink 4.6 -> 7.8 CPU-s/M spans).
      // user_fields: the JSON type's own columns where the engine has it.
      const bool values = c.logical == Logical::kString || c.logical == Logical::kStringArray ||
                          c.logical == Logical::kStringArray2;
      const std::string type = values ? WireType(c.logical, caps) : TableType(c.logical, caps);
      const bool lc = type.find("LowCardinality(") != std::string::npos;
      {
        native::Writer h(&out_->pieces[at]);
        h.ColumnHeader(c.name, type);
        if (lc && rows > 0) h.Fixed<uint64_t>(1);  // keys serialization version
      }
      ColumnOut co;
      co.id = c.id;
      co.logical = c.logical;
      if (lc) {
        dicts_.push_back(std::make_unique<LcDict>());
        co.dict = dicts_.back().get();
        if (c.id == Col::kAttrKeys) attr_keys_ = co.dict;
      }
      const int streams = ArrayDepth(c.logical) + 1;
      for (int s = 0; s < streams; ++s) {
        writers_.push_back(std::make_unique<native::Writer>(&out_->pieces[at + 1 + s]));
        co.w[s] = writers_.back().get();
      }
      at += 1 + static_cast<size_t>(streams);
      cols_.push_back(co);
    }
  }

  void Row(const SpanRow& r) {
    // The span's attribute keys, looked up once for the attr_keys column and
    // the user-field paths (not where attr_keys leaves some out).
    const bool ids = attr_keys_ != nullptr && values_ != UserFieldValues::kDropped;
    if (ids) KeyIds(*r.batch, r.batch->spans.attrs[r.index]);
    // user_fields first: it says which attributes' values the arrays leave out.
    if (json_type_) {
      user_field_columns_.Row(*r.batch, r.index,
                              values_ == UserFieldValues::kInArrays ? nullptr : &exact_,
                              ids ? key_ids_.data() : nullptr);
    }
    for (ColumnOut& c : cols_) {
      if (c.id == Col::kUserFields) {
        if (!json_type_) c.w[0]->String(user_fields_.Of(*r.batch, r.index));
      } else {
        Column(c, *r.batch, r.index, r.resource_id);
      }
    }
  }

  // After the last row: the LowCardinality columns' dictionaries and indexes.
  void Finish() {
    for (ColumnOut& c : cols_) {
      if (c.dict != nullptr) c.dict->Write(*c.w[ArrayDepth(c.logical)]);
      if (c.id == Col::kUserFields && json_type_) user_field_columns_.Write(*c.w[0]);
    }
  }

 private:
  // A column's streams: w[0] is the only one of a scalar column; an
  // Array(T) has its offsets in w[0] and values in w[1]; Array(Array(T))
  // outer offsets, inner offsets, values. `total` are the running offsets.
  struct ColumnOut {
    Col id = Col::kCount;
    Logical logical = Logical::kString;
    native::Writer* w[3] = {nullptr, nullptr, nullptr};
    uint64_t total[2] = {0, 0};
    LcDict* dict = nullptr;  // a LowCardinality column: values go here
  };
  enum class Part { kKey, kType, kValue };

  // A value of a column that may be LowCardinality (keys; attribute values
  // too, by the schema's layout).
  static void Key(const ColumnOut& c, native::Writer& w, std::string_view s) {
    if (c.dict != nullptr) {
      c.dict->Add(s);
    } else {
      w.String(s);
    }
  }

  static void AttrValues(const ColumnOut& c, native::Writer& w, const SpanBatch& b,
                         const AttrColumns& cols, Range r, Part p) {
    for (uint32_t a = r.begin; a < r.end; ++a) {
      switch (p) {
        case Part::kKey:
          Key(c, w, b.Str(cols.key[a]));
          break;
        case Part::kType:
          w.Fixed<uint8_t>(static_cast<uint8_t>(cols.type[a]));
          break;
        case Part::kValue:
          Key(c, w, b.Str(cols.value[a]));
          break;
      }
    }
  }
  // Array(T) of one attribute list.
  static void Attrs(ColumnOut& c, const SpanBatch& b, const AttrColumns& cols, Range r, Part p) {
    c.total[0] += r.size();
    c.w[0]->Fixed<uint64_t>(c.total[0]);
    AttrValues(c, *c.w[1], b, cols, r, p);
  }
  // key_ids_: the attr_keys dictionary's index of each attribute key of
  // the row's span `r`. Rows come by trace, and a trace's spans of one
  // operation carry the same keys in the same places: a key equal to the
  // previous row's in its place takes its index without a lookup.
  void KeyIds(const SpanBatch& b, Range r) {
    key_ids_.resize(r.size());
    if (prev_keys_.size() < r.size()) prev_keys_.resize(r.size());
    for (uint32_t j = 0; j < r.size(); ++j) {
      const std::string_view key = b.Str(b.span_attrs.key[r.begin + j]);
      if (j >= prev_count_ || prev_keys_[j] != key) {
        prev_keys_[j] = key;
        prev_ids_.resize(std::max<size_t>(prev_ids_.size(), j + 1));
        prev_ids_[j] = attr_keys_->Index(key);
      }
      key_ids_[j] = prev_ids_[j];
    }
    prev_count_ = r.size();
  }

  // Array(T) of the span's own attributes: those whose value is in
  // user_fields (exact_) marked or left out, as values_ says.
  void SpanAttrs(ColumnOut& c, const SpanBatch& b, Range r, Part p) {
    if (p == Part::kKey && c.dict == attr_keys_ && c.dict != nullptr &&
        values_ != UserFieldValues::kDropped) {
      // Every key, in order: their indexes are known (KeyIds).
      c.total[0] += r.size();
      c.w[0]->Fixed<uint64_t>(c.total[0]);
      for (uint32_t k : key_ids_) c.dict->AddIndex(k);
      return;
    }
    if (values_ == UserFieldValues::kInArrays) return Attrs(c, b, b.span_attrs, r, p);
    const AttrColumns& cols = b.span_attrs;
    const bool drop = values_ == UserFieldValues::kDropped;
    uint64_t n = r.size();
    if (drop) {
      for (uint8_t e : exact_) n -= e;
    }
    c.total[0] += n;
    c.w[0]->Fixed<uint64_t>(c.total[0]);
    native::Writer& w = *c.w[1];
    for (uint32_t a = r.begin; a < r.end; ++a) {
      const bool in_json = exact_[a - r.begin] != 0;
      if (in_json && drop) continue;
      switch (p) {
        case Part::kKey:
          Key(c, w, b.Str(cols.key[a]));
          break;
        case Part::kType:
          w.Fixed<uint8_t>(static_cast<uint8_t>(static_cast<uint8_t>(cols.type[a]) |
                                                (in_json ? kTypeInUserFields : 0)));
          break;
        case Part::kValue:
          Key(c, w, in_json ? std::string_view() : b.Str(cols.value[a]));
          break;
      }
    }
  }
  // Array(T) over a span's events or links: `each(child)` writes one.
  template <typename Fn>
  static void Nested(ColumnOut& c, Range children, Fn&& each) {
    c.total[0] += children.size();
    c.w[0]->Fixed<uint64_t>(c.total[0]);
    for (uint32_t k = children.begin; k < children.end; ++k) each(*c.w[1], k);
  }
  // Array(Array(T)) over the attributes of a span's events or links.
  static void NestedAttrs(ColumnOut& c, const SpanBatch& b, Range children,
                          const std::vector<Range>& child_attrs, const AttrColumns& cols, Part p) {
    c.total[0] += children.size();
    c.w[0]->Fixed<uint64_t>(c.total[0]);
    for (uint32_t k = children.begin; k < children.end; ++k) {
      c.total[1] += child_attrs[k].size();
      c.w[1]->Fixed<uint64_t>(c.total[1]);
    }
    for (uint32_t k = children.begin; k < children.end; ++k) {
      AttrValues(c, *c.w[2], b, cols, child_attrs[k], p);
    }
  }

  void Column(ColumnOut& c, const SpanBatch& b, uint32_t i, uint64_t resource_id) {
    native::Writer& w = *c.w[0];
    const auto& s = b.spans;
    switch (c.id) {
      case Col::kTimestamp:
        w.Fixed<uint32_t>(static_cast<uint32_t>(s.start_ns[i] / 1000000000));
        break;
      case Col::kTraceId:
        w.Bytes(s.trace_id[i].data(), 16);
        break;
      case Col::kSpanId:
        w.Bytes(s.span_id[i].data(), 8);
        break;
      case Col::kParentSpanId:
        w.Bytes(s.parent_span_id[i].data(), 8);
        break;
      case Col::kTraceState:
        w.String(b.Str(s.trace_state[i]));
        break;
      case Col::kFlags:
        w.Fixed<uint32_t>(s.flags[i]);
        break;
      case Col::kName:
        Key(c, w, b.Str(s.name[i]));
        break;
      case Col::kKind:
        w.Fixed<uint8_t>(s.kind[i]);
        break;
      case Col::kStartTime:
        w.Fixed<uint64_t>(s.start_ns[i]);
        break;
      case Col::kDurationNs:
        w.Fixed<uint64_t>(s.end_ns[i] >= s.start_ns[i] ? s.end_ns[i] - s.start_ns[i] : 0);
        break;
      case Col::kStatusCode:
        w.Fixed<uint8_t>(s.status_code[i]);
        break;
      case Col::kStatusMessage:
        w.String(b.Str(s.status_message[i]));
        break;
      case Col::kServiceName:
        Key(c, w, b.Str(b.resources.service_name[s.resource[i]]));
        break;
      case Col::kResourceAttrKeys:  // not in the spans table: EncodeResourceBlock
      case Col::kResourceAttrTypes:
      case Col::kResourceAttrValues:
      case Col::kResourceDroppedAttrs:
      case Col::kResourceSchemaUrl:
        break;
      case Col::kScopeName:
        Key(c, w, b.Str(b.scopes.name[s.scope[i]]));
        break;
      case Col::kScopeVersion:
        Key(c, w, b.Str(b.scopes.version[s.scope[i]]));
        break;
      case Col::kScopeAttrKeys:
        Attrs(c, b, b.scope_attrs, b.scopes.attrs[s.scope[i]], Part::kKey);
        break;
      case Col::kScopeAttrTypes:
        Attrs(c, b, b.scope_attrs, b.scopes.attrs[s.scope[i]], Part::kType);
        break;
      case Col::kScopeAttrValues:
        Attrs(c, b, b.scope_attrs, b.scopes.attrs[s.scope[i]], Part::kValue);
        break;
      case Col::kScopeDroppedAttrs:
        w.Fixed<uint32_t>(b.scopes.dropped_attributes_count[s.scope[i]]);
        break;
      case Col::kScopeSchemaUrl:
        Key(c, w, b.Str(b.scopes.schema_url[s.scope[i]]));
        break;
      case Col::kAttrKeys:
        SpanAttrs(c, b, s.attrs[i], Part::kKey);
        break;
      case Col::kAttrTypes:
        SpanAttrs(c, b, s.attrs[i], Part::kType);
        break;
      case Col::kAttrValues:
        SpanAttrs(c, b, s.attrs[i], Part::kValue);
        break;
      case Col::kDroppedAttrs:
        w.Fixed<uint32_t>(s.dropped_attributes_count[i]);
        break;
      case Col::kEventTimes:
        Nested(c, s.events[i],
               [&](native::Writer& v, uint32_t e) { v.Fixed<uint64_t>(b.events.time_ns[e]); });
        break;
      case Col::kEventNames:
        Nested(c, s.events[i],
               [&](native::Writer& v, uint32_t e) { Key(c, v, b.Str(b.events.name[e])); });
        break;
      case Col::kEventAttrKeys:
        NestedAttrs(c, b, s.events[i], b.events.attrs, b.event_attrs, Part::kKey);
        break;
      case Col::kEventAttrTypes:
        NestedAttrs(c, b, s.events[i], b.events.attrs, b.event_attrs, Part::kType);
        break;
      case Col::kEventAttrValues:
        NestedAttrs(c, b, s.events[i], b.events.attrs, b.event_attrs, Part::kValue);
        break;
      case Col::kEventDroppedAttrs:
        Nested(c, s.events[i], [&](native::Writer& v, uint32_t e) {
          v.Fixed<uint32_t>(b.events.dropped_attributes_count[e]);
        });
        break;
      case Col::kDroppedEvents:
        w.Fixed<uint32_t>(s.dropped_events_count[i]);
        break;
      case Col::kLinkTraceIds:
        Nested(c, s.links[i],
               [&](native::Writer& v, uint32_t l) { v.Bytes(b.links.trace_id[l].data(), 16); });
        break;
      case Col::kLinkSpanIds:
        Nested(c, s.links[i],
               [&](native::Writer& v, uint32_t l) { v.Bytes(b.links.span_id[l].data(), 8); });
        break;
      case Col::kLinkTraceStates:
        Nested(c, s.links[i],
               [&](native::Writer& v, uint32_t l) { Key(c, v, b.Str(b.links.trace_state[l])); });
        break;
      case Col::kLinkFlags:
        Nested(c, s.links[i],
               [&](native::Writer& v, uint32_t l) { v.Fixed<uint32_t>(b.links.flags[l]); });
        break;
      case Col::kLinkAttrKeys:
        NestedAttrs(c, b, s.links[i], b.links.attrs, b.link_attrs, Part::kKey);
        break;
      case Col::kLinkAttrTypes:
        NestedAttrs(c, b, s.links[i], b.links.attrs, b.link_attrs, Part::kType);
        break;
      case Col::kLinkAttrValues:
        NestedAttrs(c, b, s.links[i], b.links.attrs, b.link_attrs, Part::kValue);
        break;
      case Col::kLinkDroppedAttrs:
        Nested(c, s.links[i], [&](native::Writer& v, uint32_t l) {
          v.Fixed<uint32_t>(b.links.dropped_attributes_count[l]);
        });
        break;
      case Col::kDroppedLinks:
        w.Fixed<uint32_t>(s.dropped_links_count[i]);
        break;
      case Col::kResourceId:
        w.Fixed<uint64_t>(resource_id);
        break;
      case Col::kUserFields:  // Row()
      case Col::kCount:
        break;
      case Col::kExtras:
        extras_.clear();
        EncodeSpanExtras(b, i, &extras_);
        w.String(extras_);
        break;
    }
  }

  EncodedBlock* out_;
  bool json_type_;
  UserFieldValues values_;
  // Per attribute of the current row's span: 1 where user_fields holds its
  // value exactly (UserFieldsColumns::Row).
  std::vector<uint8_t> exact_;
  UserFieldsJson user_fields_;  // as JSON text, where the engine lacks the JSON type
  UserFieldsColumns user_field_columns_;
  std::string extras_;  // the current row's extras value
  std::vector<ColumnOut> cols_;
  std::vector<std::unique_ptr<LcDict>> dicts_;
  LcDict* attr_keys_ = nullptr;  // the attr_keys column's dictionary, if LowCardinality
  // KeyIds: the current row's, and the previous row's keys by place.
  std::vector<uint32_t> key_ids_;
  std::vector<std::string_view> prev_keys_;
  std::vector<uint32_t> prev_ids_;
  size_t prev_count_ = 0;
  // Declared last: destroyed first, trimming each piece to what was written.
  std::vector<std::unique_ptr<native::Writer>> writers_;
};

// Reads one block into rows [base, base + rows) of `b`, which the caller has
// already created (one resource and one scope per row).
class Decoder {
 public:
  Decoder(Reader& r, SpanBatch& b, uint32_t base, uint64_t rows)
      : r_(r), b_(b), base_(base), n_(rows) {}

  Status Offsets(std::vector<uint64_t>* offs) {
    offs->resize(n_);
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      SH_RETURN_IF_ERROR(r_.Fixed(&(*offs)[i]));
      if ((*offs)[i] < prev) return Status::Internal("native: offsets go backwards");
      prev = (*offs)[i];
    }
    return Status::Ok();
  }
  Status Str(StrRef* out) {
    std::string_view s;
    if (lc_) {
      SH_RETURN_IF_ERROR(LcNext(&s));
    } else {
      SH_RETURN_IF_ERROR(r_.String(&s));
    }
    *out = b_.AddString(s);
    return Status::Ok();
  }

  // A LowCardinality(String) column (or array of them) comes next: its
  // version prefix now, its dictionary and indexes after the column's array
  // offsets, at the first value (a column with no values has none).
  Status BeginColumn(bool low_cardinality) {
    if (lc_ && lc_loaded_ && lc_next_ != lc_index_.size()) {
      return Status::Internal("native: LowCardinality column longer than its rows");
    }
    lc_ = low_cardinality;
    lc_loaded_ = false;
    if (!lc_ || n_ == 0) return Status::Ok();
    uint64_t version = 0;
    SH_RETURN_IF_ERROR(r_.Fixed(&version));
    if (version != 1) return Status::Internal("native: unknown LowCardinality version");
    return Status::Ok();
  }
  void SetJson(bool json) { json_ = json; }
  // Where the resource_id column's values go: (*ids)[base + row].
  void SetResourceIds(std::vector<uint64_t>* ids, size_t base) {
    resource_ids_ = ids;
    resource_ids_base_ = base;
  }
  // A JSON column in the flattened layout (UserFieldsColumns; a SELECT
  // with output_format_native_use_flattened_dynamic_and_json_serialization):
  // every path's value of every row, kept for ResolveUserFields.
  Status ReadFlattenedJson() {
    json_paths_.clear();
    if (n_ == 0) return Status::Ok();
    uint64_t version = 0;
    uint64_t npaths = 0;
    SH_RETURN_IF_ERROR(r_.Fixed(&version));
    if (version != 3) return Status::Internal("native: JSON column not in the flattened layout");
    SH_RETURN_IF_ERROR(r_.Varint(&npaths));
    if (npaths > r_.left()) return Status::Internal("native: JSON paths past the end");
    json_paths_.resize(npaths);
    for (JsonPath& p : json_paths_) SH_RETURN_IF_ERROR(r_.String(&p.name));
    for (JsonPath& p : json_paths_) {
      uint64_t ntypes = 0;
      SH_RETURN_IF_ERROR(r_.Fixed(&version));
      if (version != 3) return Status::Internal("native: Dynamic column not flattened");
      SH_RETURN_IF_ERROR(r_.Varint(&ntypes));
      if (ntypes > 250) return Status::Internal("native: too many Dynamic types");
      for (uint64_t t = 0; t < ntypes; ++t) {
        std::string_view name;
        SH_RETURN_IF_ERROR(r_.String(&name));
        const JsonType jt = name == "Bool"      ? JsonType::kBool
                            : name == "Float64" ? JsonType::kFloat64
                            : name == "Int64"   ? JsonType::kInt64
                            : name == "String"  ? JsonType::kString
                                                : JsonType::kNone;
        if (jt == JsonType::kNone) {
          return Status::Internal("native: unexpected Dynamic type " + std::string(name));
        }
        p.types.push_back(jt);
      }
    }
    for (JsonPath& p : json_paths_) {
      const size_t ntypes = p.types.size();
      std::vector<uint64_t> count(ntypes + 1, 0);
      p.row.resize(n_);
      for (uint64_t i = 0; i < n_; ++i) {
        uint8_t d = 0;
        SH_RETURN_IF_ERROR(r_.Fixed(&d));
        if (d > ntypes) return Status::Internal("native: Dynamic discriminator out of range");
        // Which type, and the value's place among that type's values.
        p.row[i] = {d, static_cast<uint32_t>(count[d]++)};
      }
      p.values.resize(ntypes);
      for (size_t t = 0; t < ntypes; ++t) {
        p.values[t].resize(count[t]);
        const unsigned width = p.types[t] == JsonType::kBool     ? 1
                               : p.types[t] == JsonType::kString ? 0
                                                                 : 8;
        for (auto& v : p.values[t])
          SH_RETURN_IF_ERROR(width == 0 ? r_.String(&v) : r_.Bytes(width, &v));
      }
    }
    return Status::Ok();
  }

  // After the block's last column: span attributes whose value is in
  // user_fields (attr_types marked kTypeInUserFields) get it from there, as
  // the text and type the writer had.
  Status ResolveUserFields() {
    std::unordered_map<std::string_view, const JsonPath*> by_name;
    bool indexed = false;
    std::string text;
    for (uint64_t i = 0; i < n_; ++i) {
      const uint32_t span = base_ + static_cast<uint32_t>(i);
      const Range r = b_.spans.attrs[span];
      for (uint32_t a = r.begin; a < r.end; ++a) {
        const auto t = static_cast<uint8_t>(b_.span_attrs.type[a]);
        if ((t & kTypeInUserFields) == 0) continue;
        if (!indexed) {
          for (const JsonPath& p : json_paths_) by_name.emplace(p.name, &p);
          indexed = true;
        }
        const std::string_view key = b_.Str(b_.span_attrs.key[a]);
        const auto type = static_cast<ValueType>(t & ~kTypeInUserFields);
        auto it = by_name.find(key);
        if (it == by_name.end() || it->second->row[i].type >= it->second->types.size()) {
          return Status::Internal("native: attribute " + std::string(key) +
                                  " has its value in user_fields, which lacks it");
        }
        const JsonPath& p = *it->second;
        const auto [ti, vi] = p.row[i];
        const std::string_view raw = p.values[ti][vi];
        text.clear();
        bool ok = false;
        switch (p.types[ti]) {
          case JsonType::kBool:
            ok = type == ValueType::kBool;
            text = raw[0] != 0 ? "true" : "false";
            break;
          case JsonType::kInt64: {
            int64_t v = 0;
            std::memcpy(&v, raw.data(), 8);
            ok = type == ValueType::kInt;
            codec::AppendInt(text, v);
            break;
          }
          case JsonType::kFloat64: {
            double v = 0;
            std::memcpy(&v, raw.data(), 8);
            ok = type == ValueType::kDouble;
            codec::AppendDouble(text, v);
            break;
          }
          case JsonType::kString:
            ok = type == ValueType::kString;
            text = raw;
            break;
          case JsonType::kNone:
            break;
        }
        if (!ok) {
          return Status::Internal("native: attribute " + std::string(key) +
                                  ": its type in user_fields differs from attr_types");
        }
        b_.span_attrs.type[a] = type;
        b_.span_attrs.value[a] = b_.AddString(text);
      }
    }
    return Status::Ok();
  }

  Status LcNext(std::string_view* s) {
    if (!lc_loaded_) {
      uint64_t flags = 0;
      uint64_t nkeys = 0;
      SH_RETURN_IF_ERROR(r_.Fixed(&flags));
      if ((flags & (1u << 8)) != 0 || (flags & (1u << 9)) == 0 || (flags & 0xff) > 3) {
        return Status::Internal("native: unsupported LowCardinality layout");
      }
      SH_RETURN_IF_ERROR(r_.Fixed(&nkeys));
      if (nkeys > r_.left()) return Status::Internal("native: LowCardinality keys past the end");
      lc_keys_.resize(nkeys);
      for (auto& k : lc_keys_) SH_RETURN_IF_ERROR(r_.String(&k));
      uint64_t nidx = 0;
      SH_RETURN_IF_ERROR(r_.Fixed(&nidx));
      const unsigned width = 1u << (flags & 0xff);
      if (nidx > r_.left() / width)
        return Status::Internal("native: LowCardinality indexes past the end");
      lc_index_.resize(nidx);
      for (auto& i : lc_index_) {
        uint64_t v = 0;
        std::string_view bytes;
        SH_RETURN_IF_ERROR(r_.Bytes(width, &bytes));
        std::memcpy(&v, bytes.data(), width);  // little-endian
        if (v >= nkeys) return Status::Internal("native: LowCardinality index out of range");
        i = v;
      }
      lc_next_ = 0;
      lc_loaded_ = true;
    }
    if (lc_next_ >= lc_index_.size())
      return Status::Internal("native: LowCardinality column too short");
    *s = lc_keys_[lc_index_[lc_next_++]];
    return Status::Ok();
  }
  template <typename T, typename U>
  Status Num(U* out) {
    T v{};
    SH_RETURN_IF_ERROR(r_.Fixed(&v));
    *out = static_cast<U>(v);
    return Status::Ok();
  }
  template <size_t N>
  Status Id(std::array<uint8_t, N>* out) {
    std::string_view s;
    SH_RETURN_IF_ERROR(r_.Bytes(N, &s));
    std::memcpy(out->data(), s.data(), N);
    return Status::Ok();
  }

  // Attribute lists of one owner per row. Keys create the rows; types and
  // values must come with the same offsets and fill them in.
  enum class Part { kKey, kType, kValue };
  Status Attrs(AttrColumns& cols, std::vector<Range>& ranges, uint32_t owner_base, Part p) {
    std::vector<uint64_t> offs;
    SH_RETURN_IF_ERROR(Offsets(&offs));
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      Range& rg = ranges[owner_base + i];
      uint64_t count = offs[i] - prev;
      prev = offs[i];
      SH_RETURN_IF_ERROR(AttrRun(cols, rg, count, p));
    }
    return Status::Ok();
  }
  Status AttrRun(AttrColumns& cols, Range& rg, uint64_t count, Part p) {
    if (p == Part::kKey) {
      rg.begin = static_cast<uint32_t>(cols.size());
      for (uint64_t k = 0; k < count; ++k) {
        StrRef key;
        SH_RETURN_IF_ERROR(Str(&key));
        SpanBatch::AddAttr(cols, key, ValueType::kEmpty, StrRef{});
      }
      rg.end = static_cast<uint32_t>(cols.size());
      return Status::Ok();
    }
    if (count != rg.size()) return Status::Internal("native: attribute columns disagree in length");
    for (uint32_t a = rg.begin; a < rg.end; ++a) {
      if (p == Part::kType) {
        uint8_t t = 0;
        SH_RETURN_IF_ERROR(r_.Fixed(&t));
        cols.type[a] = static_cast<ValueType>(t);
      } else {
        SH_RETURN_IF_ERROR(Str(&cols.value[a]));
      }
    }
    return Status::Ok();
  }
  // Array(T) over a span's events or links: the first such column creates
  // the children, later ones must agree.
  template <typename Make, typename Fill>
  Status Children(std::vector<Range>& ranges, Make&& make, Fill&& fill) {
    std::vector<uint64_t> offs;
    SH_RETURN_IF_ERROR(Offsets(&offs));
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      Range& rg = ranges[base_ + i];
      uint64_t count = offs[i] - prev;
      prev = offs[i];
      if (rg.size() == 0 && count > 0) {
        rg.begin = make();
        for (uint64_t k = 1; k < count; ++k) make();
        rg.end = rg.begin + static_cast<uint32_t>(count);
      } else if (rg.size() != count) {
        return Status::Internal("native: child columns disagree in length");
      }
      for (uint32_t c = rg.begin; c < rg.end; ++c) SH_RETURN_IF_ERROR(fill(c));
    }
    return Status::Ok();
  }
  Status NestedAttrs(std::vector<Range>& children, std::vector<Range>& child_attrs,
                     AttrColumns& cols, Part p, bool events) {
    std::vector<uint64_t> outer;
    SH_RETURN_IF_ERROR(Offsets(&outer));
    uint64_t total = outer.empty() ? 0 : outer.back();
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      Range& rg = children[base_ + i];
      uint64_t count = outer[i] - prev;
      prev = outer[i];
      if (rg.size() == 0 && count > 0) {
        rg.begin = events ? b_.AddEvent() : b_.AddLink();
        for (uint64_t k = 1; k < count; ++k) events ? b_.AddEvent() : b_.AddLink();
        rg.end = rg.begin + static_cast<uint32_t>(count);
      } else if (rg.size() != count) {
        return Status::Internal("native: nested columns disagree in length");
      }
    }
    std::vector<uint64_t> inner(total);
    for (uint64_t k = 0; k < total; ++k) SH_RETURN_IF_ERROR(r_.Fixed(&inner[k]));
    uint64_t iprev = 0;
    size_t k = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      const Range rg = children[base_ + i];
      for (uint32_t c = rg.begin; c < rg.end; ++c, ++k) {
        if (inner[k] < iprev) return Status::Internal("native: offsets go backwards");
        uint64_t count = inner[k] - iprev;
        iprev = inner[k];
        SH_RETURN_IF_ERROR(AttrRun(cols, child_attrs[c], count, p));
      }
    }
    return Status::Ok();
  }

  // Rows of a block own consecutive resources and scopes (see DecodeSpanBlocks).
  uint32_t ResBase() const { return n_ == 0 ? 0 : b_.spans.resource[base_]; }
  uint32_t ScopeBase() const { return n_ == 0 ? 0 : b_.spans.scope[base_]; }

  Status Column(Col id) {
    auto& s = b_.spans;
    auto each = [&](auto&& fn) -> Status {
      for (uint64_t i = 0; i < n_; ++i) SH_RETURN_IF_ERROR(fn(base_ + static_cast<uint32_t>(i)));
      return Status::Ok();
    };
    switch (id) {
      case Col::kTimestamp:
        return each([&](uint32_t) {
          uint32_t t;
          return r_.Fixed(&t);
        });
      case Col::kTraceId:
        return each([&](uint32_t i) { return Id(&s.trace_id[i]); });
      case Col::kSpanId:
        return each([&](uint32_t i) { return Id(&s.span_id[i]); });
      case Col::kParentSpanId:
        return each([&](uint32_t i) { return Id(&s.parent_span_id[i]); });
      case Col::kTraceState:
        return each([&](uint32_t i) { return Str(&s.trace_state[i]); });
      case Col::kFlags:
        return each([&](uint32_t i) { return Num<uint32_t>(&s.flags[i]); });
      case Col::kName:
        return each([&](uint32_t i) { return Str(&s.name[i]); });
      case Col::kKind:
        return each([&](uint32_t i) { return Num<uint8_t>(&s.kind[i]); });
      case Col::kStartTime:
        return each([&](uint32_t i) { return Num<uint64_t>(&s.start_ns[i]); });
      case Col::kDurationNs:
        return each([&](uint32_t i) {
          uint64_t d;
          SH_RETURN_IF_ERROR(r_.Fixed(&d));
          s.end_ns[i] = s.start_ns[i] + d;
          return Status::Ok();
        });
      case Col::kStatusCode:
        return each([&](uint32_t i) { return Num<uint8_t>(&s.status_code[i]); });
      case Col::kStatusMessage:
        return each([&](uint32_t i) { return Str(&s.status_message[i]); });
      case Col::kServiceName:
        return each([&](uint32_t i) { return Str(&b_.resources.service_name[s.resource[i]]); });
      case Col::kResourceAttrKeys:
        return Attrs(b_.resource_attrs, b_.resources.attrs, ResBase(), Part::kKey);
      case Col::kResourceAttrTypes:
        return Attrs(b_.resource_attrs, b_.resources.attrs, ResBase(), Part::kType);
      case Col::kResourceAttrValues:
        return Attrs(b_.resource_attrs, b_.resources.attrs, ResBase(), Part::kValue);
      case Col::kResourceDroppedAttrs:
        return each([&](uint32_t i) {
          return Num<uint32_t>(&b_.resources.dropped_attributes_count[s.resource[i]]);
        });
      case Col::kResourceSchemaUrl:
        return each([&](uint32_t i) { return Str(&b_.resources.schema_url[s.resource[i]]); });
      case Col::kScopeName:
        return each([&](uint32_t i) { return Str(&b_.scopes.name[s.scope[i]]); });
      case Col::kScopeVersion:
        return each([&](uint32_t i) { return Str(&b_.scopes.version[s.scope[i]]); });
      case Col::kScopeAttrKeys:
        return Attrs(b_.scope_attrs, b_.scopes.attrs, ScopeBase(), Part::kKey);
      case Col::kScopeAttrTypes:
        return Attrs(b_.scope_attrs, b_.scopes.attrs, ScopeBase(), Part::kType);
      case Col::kScopeAttrValues:
        return Attrs(b_.scope_attrs, b_.scopes.attrs, ScopeBase(), Part::kValue);
      case Col::kScopeDroppedAttrs:
        return each([&](uint32_t i) {
          return Num<uint32_t>(&b_.scopes.dropped_attributes_count[s.scope[i]]);
        });
      case Col::kScopeSchemaUrl:
        return each([&](uint32_t i) { return Str(&b_.scopes.schema_url[s.scope[i]]); });
      case Col::kAttrKeys:
        return Attrs(b_.span_attrs, s.attrs, base_, Part::kKey);
      case Col::kAttrTypes:
        return Attrs(b_.span_attrs, s.attrs, base_, Part::kType);
      case Col::kAttrValues:
        return Attrs(b_.span_attrs, s.attrs, base_, Part::kValue);
      case Col::kDroppedAttrs:
        return each([&](uint32_t i) { return Num<uint32_t>(&s.dropped_attributes_count[i]); });
      case Col::kEventTimes:
        return Children(
            s.events, [&] { return b_.AddEvent(); },
            [&](uint32_t e) { return Num<uint64_t>(&b_.events.time_ns[e]); });
      case Col::kEventNames:
        return Children(
            s.events, [&] { return b_.AddEvent(); },
            [&](uint32_t e) { return Str(&b_.events.name[e]); });
      case Col::kEventAttrKeys:
        return NestedAttrs(s.events, b_.events.attrs, b_.event_attrs, Part::kKey, true);
      case Col::kEventAttrTypes:
        return NestedAttrs(s.events, b_.events.attrs, b_.event_attrs, Part::kType, true);
      case Col::kEventAttrValues:
        return NestedAttrs(s.events, b_.events.attrs, b_.event_attrs, Part::kValue, true);
      case Col::kEventDroppedAttrs:
        return Children(
            s.events, [&] { return b_.AddEvent(); },
            [&](uint32_t e) { return Num<uint32_t>(&b_.events.dropped_attributes_count[e]); });
      case Col::kDroppedEvents:
        return each([&](uint32_t i) { return Num<uint32_t>(&s.dropped_events_count[i]); });
      case Col::kLinkTraceIds:
        return Children(
            s.links, [&] { return b_.AddLink(); },
            [&](uint32_t l) { return Id(&b_.links.trace_id[l]); });
      case Col::kLinkSpanIds:
        return Children(
            s.links, [&] { return b_.AddLink(); },
            [&](uint32_t l) { return Id(&b_.links.span_id[l]); });
      case Col::kLinkTraceStates:
        return Children(
            s.links, [&] { return b_.AddLink(); },
            [&](uint32_t l) { return Str(&b_.links.trace_state[l]); });
      case Col::kLinkFlags:
        return Children(
            s.links, [&] { return b_.AddLink(); },
            [&](uint32_t l) { return Num<uint32_t>(&b_.links.flags[l]); });
      case Col::kLinkAttrKeys:
        return NestedAttrs(s.links, b_.links.attrs, b_.link_attrs, Part::kKey, false);
      case Col::kLinkAttrTypes:
        return NestedAttrs(s.links, b_.links.attrs, b_.link_attrs, Part::kType, false);
      case Col::kLinkAttrValues:
        return NestedAttrs(s.links, b_.links.attrs, b_.link_attrs, Part::kValue, false);
      case Col::kLinkDroppedAttrs:
        return Children(
            s.links, [&] { return b_.AddLink(); },
            [&](uint32_t l) { return Num<uint32_t>(&b_.links.dropped_attributes_count[l]); });
      case Col::kDroppedLinks:
        return each([&](uint32_t i) { return Num<uint32_t>(&s.dropped_links_count[i]); });
      case Col::kResourceId:
        return each([&](uint32_t i) {
          uint64_t id;
          SH_RETURN_IF_ERROR(r_.Fixed(&id));
          if (resource_ids_ != nullptr) (*resource_ids_)[resource_ids_base_ + (i - base_)] = id;
          return Status::Ok();
        });
      case Col::kUserFields:
        // Read for the values the attribute arrays leave to it; as JSON text
        // (engines without the JSON type) a copy of attributes the span has.
        if (json_) return ReadFlattenedJson();
        return each([&](uint32_t) {
          std::string_view json;
          return r_.String(&json);
        });
      case Col::kExtras:
        // Each row has a scope of its own and no events or links yet.
        return each([&](uint32_t i) {
          std::string_view value;
          SH_RETURN_IF_ERROR(r_.String(&value));
          return DecodeSpanExtras(value, &b_, i);
        });
      case Col::kCount:
        break;
    }
    return Status::Internal("native: unknown column");
  }

 private:
  Reader& r_;
  SpanBatch& b_;
  uint32_t base_;
  uint64_t n_;
  bool json_ = false;  // the current column is of the JSON type
  std::vector<uint64_t>* resource_ids_ = nullptr;
  size_t resource_ids_base_ = 0;
  // The block's user_fields (ReadFlattenedJson).
  enum class JsonType : uint8_t { kBool, kFloat64, kInt64, kString, kNone };
  struct JsonPath {
    std::string_view name;
    std::vector<JsonType> types;
    struct At {
      uint8_t type;    // index into types; types.size() for none
      uint32_t value;  // index into values[type]
    };
    std::vector<At> row;
    std::vector<std::vector<std::string_view>> values;  // per type
  };
  std::vector<JsonPath> json_paths_;
  bool lc_ = false;  // the current column is LowCardinality
  bool lc_loaded_ = false;
  std::vector<std::string_view> lc_keys_;
  std::vector<uint64_t> lc_index_;
  size_t lc_next_ = 0;
};

}  // namespace

UserFields::UserFields(const std::vector<std::string>& well_known)
    : well_known_(well_known.begin(), well_known.end()) {}

const std::vector<std::string>& UserFields::DefaultWellKnown() {
  // The namespaces of the OpenTelemetry semantic conventions (attribute
  // registry), and the SDK's own. Never add one: the reader's tag search
  // takes a key of these as never stored in user_fields (stored spans may
  // hold such a key's value only there).
  static const std::vector<std::string> names = {
      "android",       "artifact",     "aws",       "az",           "azure",
      "browser",       "cassandra",    "cicd",      "client",       "cloud",
      "cloudevents",   "code",         "container", "cpu",          "db",
      "deployment",    "destination",  "device",    "disk",         "dns",
      "elasticsearch", "enduser",      "error",     "event",        "exception",
      "faas",          "feature_flag", "file",      "gcp",          "gen_ai",
      "geo",           "graphql",      "heroku",    "host",         "http",
      "ios",           "jvm",          "k8s",       "linux",        "log",
      "message",       "messaging",    "net",       "network",      "oci",
      "opentracing",   "os",           "otel",      "peer",         "process",
      "profile",       "rpc",          "server",    "service",      "session",
      "signalr",       "source",       "system",    "telemetry",    "test",
      "thread",        "tls",          "url",       "user",         "user_agent",
      "v8js",          "vcs",          "webengine", "opentelemetry"};
  return names;
}

const UserFields& UserFields::Default() {
  static const UserFields def(DefaultWellKnown());
  return def;
}

bool UserFields::IsUserField(std::string_view key) const {
  // Every prefix that ends before a dot, then the whole key.
  for (size_t dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.', dot + 1)) {
    if (well_known_.count(std::string(key.substr(0, dot))) != 0) return false;
  }
  return well_known_.count(std::string(key)) == 0;
}

UserFieldsJson::UserFieldsJson(const UserFields& filter) : impl_(std::make_unique<Impl>(filter)) {}
UserFieldsJson::~UserFieldsJson() = default;
std::string_view UserFieldsJson::Of(const SpanBatch& b, uint32_t i) {
  return impl_->Of(b, i);
}

std::vector<uint64_t> ResourceIds(const SpanBatch& batch) {
  std::vector<uint64_t> ids(batch.resources.attrs.size());
  for (uint32_t r = 0; r < ids.size(); ++r) ids[r] = ResourceFingerprint(batch, r);
  return ids;
}

void SortByTimeTraceStart(std::vector<SpanRow>* rows, uint64_t bucket_ns) {
  // Each row's key gathered once (seconds and hours in UTC, as the engine's
  // timestamp and toStartOfHour in its default zone; the trace id as two
  // big-endian words, which order as its bytes do), then sorted without
  // going back to the batches or dividing per comparison. Ties keep the
  // rows' order, as a stable sort would.
  struct Keyed {
    uint64_t bucket, id_hi, id_lo, start;
    uint32_t at;
  };
  auto be64 = [](const uint8_t* p) {
    uint64_t v = 0;
    std::memcpy(&v, p, 8);
    return __builtin_bswap64(v);
  };
  std::vector<Keyed> keys(rows->size());
  for (uint32_t i = 0; i < keys.size(); ++i) {
    const SpanRow& r = (*rows)[i];
    const uint64_t start = r.batch->spans.start_ns[r.index];
    const uint8_t* id = r.batch->spans.trace_id[r.index].data();
    keys[i] = {start / bucket_ns, be64(id), be64(id + 8), start, i};
  }
  std::sort(keys.begin(), keys.end(), [](const Keyed& x, const Keyed& y) {
    return std::tie(x.bucket, x.id_hi, x.id_lo, x.start, x.at) <
           std::tie(y.bucket, y.id_hi, y.id_lo, y.start, y.at);
  });
  std::vector<SpanRow> sorted;
  sorted.reserve(rows->size());
  for (const Keyed& k : keys) sorted.push_back((*rows)[k.at]);
  rows->swap(sorted);
}

size_t EncodedBlock::size() const {
  size_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

void EncodedBlock::AppendTo(std::string* out) const {
  out->reserve(out->size() + size());
  for (const auto& p : pieces) out->append(p);
}

void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, EncodedBlock* out,
                    const UserFields& user_fields, UserFieldValues values, bool extras_column) {
  Encoder enc(caps, out, rows.size(), user_fields, values, extras_column);
  for (const SpanRow& r : rows) enc.Row(r);
  enc.Finish();
}

void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, std::string* out,
                    const UserFields& user_fields, UserFieldValues values, bool extras_column) {
  EncodedBlock block;
  EncodeSpanRows(rows, caps, &block, user_fields, values, extras_column);
  block.AppendTo(out);
}

void EncodeSpanBlock(const SpanBatch& batch, const Capabilities& caps, std::string* out,
                     const std::vector<uint64_t>* resource_ids, const UserFields& user_fields,
                     bool extras_column) {
  std::vector<uint64_t> computed;
  if (resource_ids == nullptr) {
    computed = ResourceIds(batch);
    resource_ids = &computed;
  }
  std::vector<SpanRow> rows(batch.span_count());
  for (uint32_t i = 0; i < rows.size(); ++i) {
    rows[i] = {&batch, i, (*resource_ids)[batch.spans.resource[i]]};
  }
  EncodeSpanRows(rows, caps, out, user_fields, UserFieldValues::kMarked, extras_column);
}

void EncodeResourceBlock(const SpanBatch& batch, const std::vector<uint32_t>& which,
                         const std::vector<uint64_t>& resource_ids, uint32_t last_seen,
                         const Capabilities& caps, std::string* out) {
  Writer w(out);
  const auto& cols = ResourceColumns();
  w.BlockHeader(cols.size(), which.size());
  const auto& res = batch.resources;
  const AttrColumns& attrs = batch.resource_attrs;
  for (const auto& [name, logical] : cols) {
    w.ColumnHeader(name, WireType(logical, caps));
    const std::string_view col = name;
    if (col == "resource_id") {
      for (uint32_t r : which) w.Fixed<uint64_t>(resource_ids[r]);
    } else if (col == "service_name") {
      for (uint32_t r : which) w.String(batch.Str(res.service_name[r]));
    } else if (col == "attr_keys" || col == "attr_types" || col == "attr_values") {
      uint64_t total = 0;
      for (uint32_t r : which) {
        total += res.attrs[r].size();
        w.Fixed<uint64_t>(total);
      }
      for (uint32_t r : which) {
        for (uint32_t a = res.attrs[r].begin; a < res.attrs[r].end; ++a) {
          if (col == "attr_keys") {
            w.String(batch.Str(attrs.key[a]));
          } else if (col == "attr_types") {
            w.Fixed<uint8_t>(static_cast<uint8_t>(attrs.type[a]));
          } else {
            w.String(batch.Str(attrs.value[a]));
          }
        }
      }
    } else if (col == "dropped_attributes_count") {
      for (uint32_t r : which) w.Fixed<uint32_t>(res.dropped_attributes_count[r]);
    } else if (col == "schema_url") {
      for (uint32_t r : which) w.String(batch.Str(res.schema_url[r]));
    } else {  // last_seen
      for (size_t i = 0; i < which.size(); ++i) w.Fixed<uint32_t>(last_seen);
    }
  }
}

Status DecodeSpanBlocks(std::string_view data, SpanBatch* out,
                        std::vector<uint64_t>* resource_ids) {
  static const std::unordered_map<std::string_view, Col> by_name = [] {
    std::unordered_map<std::string_view, Col> m;
    for (const auto& c : ReadColumns(true)) m.emplace(c.name, c.id);
    for (const auto& c : RareColumns()) m.emplace(c.name, c.id);
    return m;
  }();
  Reader r(data);
  while (!r.eof()) {
    uint64_t ncols = 0;
    uint64_t nrows = 0;
    SH_RETURN_IF_ERROR(r.Varint(&ncols));
    SH_RETURN_IF_ERROR(r.Varint(&nrows));
    if (nrows > data.size()) return Status::Internal("native: row count larger than the data");
    auto base = static_cast<uint32_t>(out->span_count());
    for (uint64_t i = 0; i < nrows; ++i) {
      uint32_t res = out->AddResource();
      uint32_t scope = out->AddScope();
      out->AddSpan(res, scope);
    }
    Decoder dec(r, *out, base, nrows);
    if (resource_ids != nullptr) {
      dec.SetResourceIds(resource_ids, resource_ids->size());
      resource_ids->resize(resource_ids->size() + nrows, 0);
    }
    for (uint64_t c = 0; c < ncols; ++c) {
      std::string_view name;
      std::string_view type;
      SH_RETURN_IF_ERROR(r.String(&name));
      SH_RETURN_IF_ERROR(r.String(&type));
      auto it = by_name.find(name);
      if (it == by_name.end())
        return Status::Internal("native: unexpected column " + std::string(name));
      SH_RETURN_IF_ERROR(dec.BeginColumn(type.find("LowCardinality(") != std::string_view::npos));
      dec.SetJson(type.substr(0, 4) == "JSON");
      SH_RETURN_IF_ERROR(dec.Column(it->second));
    }
    SH_RETURN_IF_ERROR(dec.BeginColumn(false));  // checks the last column
    SH_RETURN_IF_ERROR(dec.ResolveUserFields());
  }
  return Status::Ok();
}

}  // namespace spanhouse::storage
