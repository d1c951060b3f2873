// The spans table's Native blocks written: the Encoder (row by row, every
// column's streams at once), the rows' order by the table's key, and the
// resources table's block.
#include "storage/clickhouse/span_block.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <tuple>

#include "storage/clickhouse/key_index.h"
#include "storage/clickhouse/span_extras.h"

namespace spanhouse::storage {

namespace {

using native::Writer;

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
          UserFieldValues values, bool extras_column, bool span_ids_column, bool attr_columns,
          bool user_fields_map)
      : out_(out),
        json_type_(caps.json_type),
        attr_(attr_columns && caps.low_cardinality && caps.codecs),
        values_(caps.json_type ? values : UserFieldValues::kInArrays),
        user_fields_(user_fields),
        user_field_columns_(user_fields, caps.json_type && user_fields_map) {
    const auto& cols = SpanColumns(extras_column, span_ids_column, attr_);
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
      // user_fields: the table's Map or the JSON type's own columns where
      // the engine has it (UserFieldsColumns).
      const bool values = c.logical == Logical::kString || c.logical == Logical::kStringArray ||
                          c.logical == Logical::kStringArray2;
      // A map goes as kUserFieldsMapWireType whatever its values are stored
      // as (the engine builds their dictionaries).
      StorageLayout layout;
      layout.user_fields_map = user_fields_map;
      const bool map = c.id == Col::kUserFields && caps.json_type && user_fields_map;
      const std::string type = values ? WireType(c.logical, caps)
                               : map  ? std::string(kUserFieldsMapWireType)
                                      : TableType(c.logical, caps, layout);
      const bool lc = type.find("LowCardinality(") != std::string::npos;
      {
        native::Writer h(&out_->pieces[at]);
        h.ColumnHeader(c.name, type);
        if (lc && rows > 0) h.Fixed<uint64_t>(1);  // keys serialization version
      }
      ColumnOut co;
      co.id = c.id;
      co.logical = c.logical;
      if (lc && c.id != Col::kUserFields) {  // a map's keys: UserFieldsColumns'
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
    if (attr_) AttrColumnValues(*r.batch, r.batch->spans.attrs[r.index]);
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

  // The row's span's values of the attribute columns' keys (the first of a
  // key twice), and which of its attributes they are.
  void AttrColumnValues(const SpanBatch& b, Range r) {
    in_column_.assign(r.size(), 0);
    for (auto& v : column_value_) v = {};
    uint32_t taken = 0;  // bit k: column k has its value
    for (uint32_t a = r.begin; a < r.end; ++a) {
      const int k = AttrColumnOf(b.Str(b.span_attrs.key[a]));
      if (k < 0 || (taken & (1u << k)) != 0) continue;
      taken |= 1u << k;
      column_value_[k] = b.Str(b.span_attrs.value[a]);
      in_column_[a - r.begin] = 1;
    }
  }

  // Array(T) of the span's own attributes: those whose value is in
  // user_fields (exact_) marked or left out, as values_ says; those whose
  // value is in an attribute column (in_column_) marked.
  void SpanAttrs(ColumnOut& c, const SpanBatch& b, Range r, Part p) {
    if (p == Part::kKey && c.dict == attr_keys_ && c.dict != nullptr &&
        values_ != UserFieldValues::kDropped) {
      // Every key, in order: their indexes are known (KeyIds).
      c.total[0] += r.size();
      c.w[0]->Fixed<uint64_t>(c.total[0]);
      for (uint32_t k : key_ids_) c.dict->AddIndex(k);
      return;
    }
    const bool arrays = values_ == UserFieldValues::kInArrays;
    if (arrays && !attr_) return Attrs(c, b, b.span_attrs, r, p);
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
      const bool in_json = !arrays && exact_[a - r.begin] != 0;
      if (in_json && drop) continue;
      const bool in_column = attr_ && in_column_[a - r.begin] != 0;
      switch (p) {
        case Part::kKey:
          Key(c, w, b.Str(cols.key[a]));
          break;
        case Part::kType:
          w.Fixed<uint8_t>(static_cast<uint8_t>(static_cast<uint8_t>(cols.type[a]) |
                                                (in_json ? kTypeInUserFields : 0) |
                                                (in_column ? kTypeInAttrColumn : 0)));
          break;
        case Part::kValue:
          Key(c, w, in_json || in_column ? std::string_view() : b.Str(cols.value[a]));
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

  // Row `i`'s value of column `c`: the columns of every layout here, the
  // rare ones of schema 7's in RareColumn.
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
      case Col::kSpanIds:
        w.Bytes(s.span_id[i].data(), 8);
        w.Bytes(s.parent_span_id[i].data(), 8);
        break;
      case Col::kAttrNetworkPeerAddress:
      case Col::kAttrNetworkPeerPort:
      case Col::kAttrUserAgentOriginal:
      case Col::kAttrDbStatement:
        Key(c, w,
            column_value_[static_cast<size_t>(c.id) -
                          static_cast<size_t>(Col::kAttrNetworkPeerAddress)]);
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
      default:  // RareColumns(): scope attributes, events, links
        RareColumn(c, b, i);
        break;
    }
  }

  // Row `i`'s value of one of the 21 rare columns (schema 7's layout; the
  // extras column holds them since).
  static void RareColumn(ColumnOut& c, const SpanBatch& b, uint32_t i) {
    native::Writer& w = *c.w[0];
    const auto& s = b.spans;
    switch (c.id) {
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
      default:
        break;
    }
  }

  EncodedBlock* out_;
  bool json_type_;
  bool attr_;  // the attribute columns
  UserFieldValues values_;
  // The current row's: per attribute, 1 where its value is in an attribute
  // column; each attribute column's value (AttrColumnValues).
  std::vector<uint8_t> in_column_;
  std::array<std::string_view, kAttrColumnCount> column_value_{};
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

}  // namespace

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
                    const UserFields& user_fields, UserFieldValues values, bool extras_column,
                    bool span_ids_column, bool attr_columns, bool user_fields_map) {
  Encoder enc(caps, out, rows.size(), user_fields, values, extras_column, span_ids_column,
              attr_columns, user_fields_map);
  for (const SpanRow& r : rows) enc.Row(r);
  enc.Finish();
}

void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, std::string* out,
                    const UserFields& user_fields, UserFieldValues values, bool extras_column,
                    bool span_ids_column, bool attr_columns, bool user_fields_map) {
  EncodedBlock block;
  EncodeSpanRows(rows, caps, &block, user_fields, values, extras_column, span_ids_column,
                 attr_columns, user_fields_map);
  block.AppendTo(out);
}

void EncodeSpanBlock(const SpanBatch& batch, const Capabilities& caps, std::string* out,
                     const std::vector<uint64_t>* resource_ids, const UserFields& user_fields,
                     bool extras_column, bool span_ids_column, bool attr_columns,
                     bool user_fields_map) {
  std::vector<uint64_t> computed;
  if (resource_ids == nullptr) {
    computed = ResourceIds(batch);
    resource_ids = &computed;
  }
  std::vector<SpanRow> rows(batch.span_count());
  for (uint32_t i = 0; i < rows.size(); ++i) {
    rows[i] = {&batch, i, (*resource_ids)[batch.spans.resource[i]]};
  }
  EncodeSpanRows(rows, caps, out, user_fields, UserFieldValues::kMarked, extras_column,
                 span_ids_column, attr_columns, user_fields_map);
}

namespace {

void AppendVarint(std::string& out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}

template <typename T>
void AppendFixed(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void AppendString(std::string& out, std::string_view s) {
  AppendVarint(out, s.size());
  out.append(s);
}

}  // namespace

SampledSpanRows::SampledSpanRows() : pieces_(1 + 2 * SampledColumns().size()) {}

void SampledSpanRows::Shape() {
  // Moved from: made whole again.
  if (pieces_.empty()) [[unlikely]]
    pieces_.resize(1 + 2 * SampledColumns().size());
}

void SampledSpanRows::Add(const SpanBatch& b, uint32_t i) {
  Shape();
  const auto& s = b.spans;
  const auto& cols = SampledColumns();
  for (size_t c = 0; c < cols.size(); ++c) {
    std::string& out = pieces_[2 + 2 * c];
    // The values as the spans block's encoder writes them (Encoder::Column).
    switch (cols[c].id) {
      case Col::kTimestamp:
        AppendFixed<uint32_t>(out, static_cast<uint32_t>(s.start_ns[i] / 1000000000));
        break;
      case Col::kTraceId:
        out.append(reinterpret_cast<const char*>(s.trace_id[i].data()), 16);
        break;
      case Col::kSpanId:
        out.append(reinterpret_cast<const char*>(s.span_id[i].data()), 8);
        break;
      case Col::kParentSpanId:
        out.append(reinterpret_cast<const char*>(s.parent_span_id[i].data()), 8);
        break;
      case Col::kServiceName:
        AppendString(out, b.Str(b.resources.service_name[s.resource[i]]));
        break;
      case Col::kName:
        AppendString(out, b.Str(s.name[i]));
        break;
      case Col::kKind:
        AppendFixed<uint8_t>(out, s.kind[i]);
        break;
      case Col::kStatusCode:
        AppendFixed<uint8_t>(out, s.status_code[i]);
        break;
      case Col::kDurationNs:
        AppendFixed<uint64_t>(out, s.end_ns[i] >= s.start_ns[i] ? s.end_ns[i] - s.start_ns[i] : 0);
        break;
      default:  // not a column of SampledColumns()
        break;
    }
  }
  ++rows_;
}

void SampledSpanRows::Append(SampledSpanRows& other) {
  if (other.rows_ == 0) return;
  Shape();
  if (rows_ == 0) {
    pieces_.swap(other.pieces_);
  } else {
    for (size_t c = 2; c < pieces_.size(); c += 2) pieces_[c] += other.pieces_[c];
  }
  rows_ += other.rows_;
  other.Clear();
}

void SampledSpanRows::Clear() {
  for (auto& p : pieces_) p.clear();
  rows_ = 0;
}

size_t SampledSpanRows::bytes() const {
  size_t n = 0;
  for (size_t c = 2; c < pieces_.size(); c += 2) n += pieces_[c].size();
  return n;
}

const std::vector<std::string>& SampledSpanRows::Block(const Capabilities& caps) {
  Shape();
  const auto& cols = SampledColumns();
  pieces_[0].clear();
  {
    Writer h(&pieces_[0]);
    h.BlockHeader(cols.size(), rows_);
  }
  for (size_t c = 0; c < cols.size(); ++c) {
    std::string& header = pieces_[1 + 2 * c];
    header.clear();
    Writer h(&header);
    // Plain types (String for the key columns): the engine converts to the
    // table's LowCardinality, as it does for the resources block.
    h.ColumnHeader(cols[c].name, WireType(cols[c].logical, caps));
  }
  return pieces_;
}

void GatherSpanRows(const SpanBatch& batch, const std::vector<uint64_t>& resource_ids,
                    std::vector<SpanRow>* rows, SampledSpanRows* sampled) {
  const auto& s = batch.spans;
  const uint32_t n = static_cast<uint32_t>(batch.span_count());
  for (uint32_t i = 0; i < n; ++i) {
    if (s.metrics_only[i] != 0) [[unlikely]] {
      sampled->Add(batch, i);
      continue;
    }
    rows->push_back({&batch, i, resource_ids[s.resource[i]]});
  }
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

}  // namespace spanhouse::storage
