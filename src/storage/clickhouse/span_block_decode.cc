// Native blocks of spans read back into a SpanBatch: the blocks the encoder
// writes, and those the reader's queries select (resources joined, user
// fields in the JSON type's flattened layout, LowCardinality columns).
#include "storage/clickhouse/span_block.h"

#include <array>
#include <cstring>
#include <unordered_map>

#include "codec/value_text.h"
#include "storage/clickhouse/span_extras.h"

namespace spanhouse::storage {

namespace {

using native::Reader;

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
  // A Map column next: whether its keys and its values are LowCardinality.
  void SetMap(bool map, bool keys_lc, bool values_lc) {
    map_ = map;
    map_keys_lc_ = keys_lc;
    map_values_lc_ = values_lc;
  }
  // Where the resource_id column's values go: (*ids)[base + row].
  void SetResourceIds(std::vector<uint64_t>* ids, size_t base) {
    resource_ids_ = ids;
    resource_ids_base_ = base;
  }
  // user_fields as a Map of Strings, its keys and values each plain or
  // LowCardinality (SetMap): every row's keys and values, kept for
  // ResolveUserFields. The LowCardinality parts' versions come first, then
  // the offsets, the keys, the values.
  Status ReadMap() {
    map_read_ = true;
    const bool parts_lc[2] = {map_keys_lc_, map_values_lc_};
    if (n_ > 0) {
      for (const bool lc : parts_lc) {
        if (!lc) continue;
        uint64_t version = 0;
        SH_RETURN_IF_ERROR(r_.Fixed(&version));
        if (version != 1) return Status::Internal("native: unknown LowCardinality version");
      }
    }
    SH_RETURN_IF_ERROR(Offsets(&map_offsets_));
    const uint64_t total = map_offsets_.empty() ? 0 : map_offsets_.back();
    if (total > r_.left()) return Status::Internal("native: map entries past the end");
    std::vector<std::string_view>* parts[2] = {&map_keys_, &map_values_};
    for (int k = 0; k < 2; ++k) {
      parts[k]->resize(total);
      lc_ = parts_lc[k];
      lc_loaded_ = false;
      for (auto& v : *parts[k]) SH_RETURN_IF_ERROR(lc_ ? LcNext(&v) : r_.String(&v));
      if (lc_ && lc_loaded_ && lc_next_ != lc_index_.size()) {
        return Status::Internal("native: LowCardinality map part longer than its entries");
      }
    }
    lc_ = false;
    return Status::Ok();
  }
  // The value of `key` in row `i`'s map, or false.
  bool MapValue(uint64_t i, std::string_view key, std::string_view* value) const {
    const uint64_t end = map_offsets_[i];
    for (uint64_t e = i == 0 ? 0 : map_offsets_[i - 1]; e < end; ++e) {
      if (map_keys_[e] == key) {
        *value = map_values_[e];
        return true;
      }
    }
    return false;
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
  // Span attributes whose value is in an attribute column (marked
  // kTypeInAttrColumn) get it from there too.
  Status ResolveUserFields() {
    std::unordered_map<std::string_view, const JsonPath*> by_name;
    bool indexed = false;
    std::string text;
    for (uint64_t i = 0; i < n_; ++i) {
      const uint32_t span = base_ + static_cast<uint32_t>(i);
      const Range r = b_.spans.attrs[span];
      for (uint32_t a = r.begin; a < r.end; ++a) {
        const auto t = static_cast<uint8_t>(b_.span_attrs.type[a]);
        if ((t & kTypeInAttrColumn) != 0) {
          const int k = AttrColumnOf(b_.Str(b_.span_attrs.key[a]));
          if (k < 0 || column_values_[k].size() != n_) {
            return Status::Internal("native: attribute " +
                                    std::string(b_.Str(b_.span_attrs.key[a])) +
                                    " has its value in an attribute column the block lacks");
          }
          b_.span_attrs.type[a] = static_cast<ValueType>(t & ~kTypeInAttrColumn);
          b_.span_attrs.value[a] = column_values_[k][i];
          continue;
        }
        if ((t & kTypeInUserFields) == 0) continue;
        if (map_read_) {
          // A map keeps the value's text; attr_types its type.
          std::string_view value;
          if (!MapValue(i, b_.Str(b_.span_attrs.key[a]), &value)) {
            return Status::Internal("native: attribute " +
                                    std::string(b_.Str(b_.span_attrs.key[a])) +
                                    " has its value in user_fields, which lacks it");
          }
          b_.span_attrs.type[a] = static_cast<ValueType>(t & ~kTypeInUserFields);
          b_.span_attrs.value[a] = b_.AddString(value);
          continue;
        }
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

  // Column `id` of every row: the columns of every layout here, the
  // resource's in ResourceColumn, the rare ones of schema 7's in RareColumn.
  Status Column(Col id) {
    auto& s = b_.spans;
    switch (id) {
      case Col::kTimestamp:
        return Each([&](uint32_t) {
          uint32_t t;
          return r_.Fixed(&t);
        });
      case Col::kTraceId:
        return Each([&](uint32_t i) { return Id(&s.trace_id[i]); });
      case Col::kSpanId:
        return Each([&](uint32_t i) { return Id(&s.span_id[i]); });
      case Col::kParentSpanId:
        return Each([&](uint32_t i) { return Id(&s.parent_span_id[i]); });
      case Col::kAttrNetworkPeerAddress:
      case Col::kAttrNetworkPeerPort:
      case Col::kAttrUserAgentOriginal:
      case Col::kAttrDbStatement: {
        auto& values = column_values_[static_cast<size_t>(id) -
                                      static_cast<size_t>(Col::kAttrNetworkPeerAddress)];
        values.resize(n_);
        return Each([&](uint32_t i) { return Str(&values[i - base_]); });
      }
      case Col::kSpanIds:  // a block in the spans table's layout (schema 11)
        return Each([&](uint32_t i) {
          SH_RETURN_IF_ERROR(Id(&s.span_id[i]));
          return Id(&s.parent_span_id[i]);
        });
      case Col::kTraceState:
        return Each([&](uint32_t i) { return Str(&s.trace_state[i]); });
      case Col::kFlags:
        return Each([&](uint32_t i) { return Num<uint32_t>(&s.flags[i]); });
      case Col::kName:
        return Each([&](uint32_t i) { return Str(&s.name[i]); });
      case Col::kKind:
        return Each([&](uint32_t i) { return Num<uint8_t>(&s.kind[i]); });
      case Col::kStartTime:
        return Each([&](uint32_t i) { return Num<uint64_t>(&s.start_ns[i]); });
      case Col::kDurationNs:
        return Each([&](uint32_t i) {
          uint64_t d;
          SH_RETURN_IF_ERROR(r_.Fixed(&d));
          s.end_ns[i] = s.start_ns[i] + d;
          return Status::Ok();
        });
      case Col::kStatusCode:
        return Each([&](uint32_t i) { return Num<uint8_t>(&s.status_code[i]); });
      case Col::kStatusMessage:
        return Each([&](uint32_t i) { return Str(&s.status_message[i]); });
      case Col::kServiceName:
      case Col::kResourceAttrKeys:
      case Col::kResourceAttrTypes:
      case Col::kResourceAttrValues:
      case Col::kResourceDroppedAttrs:
      case Col::kResourceSchemaUrl:
        return ResourceColumn(id);
      case Col::kScopeName:
        return Each([&](uint32_t i) { return Str(&b_.scopes.name[s.scope[i]]); });
      case Col::kScopeVersion:
        return Each([&](uint32_t i) { return Str(&b_.scopes.version[s.scope[i]]); });
      case Col::kAttrKeys:
        return Attrs(b_.span_attrs, s.attrs, base_, Part::kKey);
      case Col::kAttrTypes:
        return Attrs(b_.span_attrs, s.attrs, base_, Part::kType);
      case Col::kAttrValues:
        return Attrs(b_.span_attrs, s.attrs, base_, Part::kValue);
      case Col::kDroppedAttrs:
        return Each([&](uint32_t i) { return Num<uint32_t>(&s.dropped_attributes_count[i]); });
      case Col::kResourceId:
        return Each([&](uint32_t i) {
          uint64_t id;
          SH_RETURN_IF_ERROR(r_.Fixed(&id));
          if (resource_ids_ != nullptr) (*resource_ids_)[resource_ids_base_ + (i - base_)] = id;
          return Status::Ok();
        });
      case Col::kUserFields:
        // Read for the values the attribute arrays leave to it; as JSON text
        // (engines without the JSON type) a copy of attributes the span has.
        if (map_) return ReadMap();
        if (json_) return ReadFlattenedJson();
        return Each([&](uint32_t) {
          std::string_view json;
          return r_.String(&json);
        });
      case Col::kExtras:
        // Each row has a scope of its own and no events or links yet.
        return Each([&](uint32_t i) {
          std::string_view value;
          SH_RETURN_IF_ERROR(r_.String(&value));
          return DecodeSpanExtras(value, &b_, i);
        });
      case Col::kCount:
        break;
      default:  // RareColumns(): scope attributes, events, links
        return RareColumn(id);
    }
    return Status::Internal("native: unknown column");
  }

 private:
  // `fn(span)` for the span of every row.
  template <typename Fn>
  Status Each(Fn&& fn) {
    for (uint64_t i = 0; i < n_; ++i) SH_RETURN_IF_ERROR(fn(base_ + static_cast<uint32_t>(i)));
    return Status::Ok();
  }

  // A column of the row's resource (a read joins them back to the spans).
  Status ResourceColumn(Col id) {
    auto& s = b_.spans;
    switch (id) {
      case Col::kServiceName:
        return Each([&](uint32_t i) { return Str(&b_.resources.service_name[s.resource[i]]); });
      case Col::kResourceAttrKeys:
        return Attrs(b_.resource_attrs, b_.resources.attrs, ResBase(), Part::kKey);
      case Col::kResourceAttrTypes:
        return Attrs(b_.resource_attrs, b_.resources.attrs, ResBase(), Part::kType);
      case Col::kResourceAttrValues:
        return Attrs(b_.resource_attrs, b_.resources.attrs, ResBase(), Part::kValue);
      case Col::kResourceDroppedAttrs:
        return Each([&](uint32_t i) {
          return Num<uint32_t>(&b_.resources.dropped_attributes_count[s.resource[i]]);
        });
      case Col::kResourceSchemaUrl:
        return Each([&](uint32_t i) { return Str(&b_.resources.schema_url[s.resource[i]]); });
      default:
        return Status::Internal("native: unknown column");
    }
  }

  // One of the 21 rare columns (schema 7's layout; the extras column holds
  // them since).
  Status RareColumn(Col id) {
    auto& s = b_.spans;
    auto event = [&] { return b_.AddEvent(); };
    auto link = [&] { return b_.AddLink(); };
    switch (id) {
      case Col::kScopeAttrKeys:
        return Attrs(b_.scope_attrs, b_.scopes.attrs, ScopeBase(), Part::kKey);
      case Col::kScopeAttrTypes:
        return Attrs(b_.scope_attrs, b_.scopes.attrs, ScopeBase(), Part::kType);
      case Col::kScopeAttrValues:
        return Attrs(b_.scope_attrs, b_.scopes.attrs, ScopeBase(), Part::kValue);
      case Col::kScopeDroppedAttrs:
        return Each([&](uint32_t i) {
          return Num<uint32_t>(&b_.scopes.dropped_attributes_count[s.scope[i]]);
        });
      case Col::kScopeSchemaUrl:
        return Each([&](uint32_t i) { return Str(&b_.scopes.schema_url[s.scope[i]]); });
      case Col::kEventTimes:
        return Children(s.events, event,
                        [&](uint32_t e) { return Num<uint64_t>(&b_.events.time_ns[e]); });
      case Col::kEventNames:
        return Children(s.events, event, [&](uint32_t e) { return Str(&b_.events.name[e]); });
      case Col::kEventAttrKeys:
        return NestedAttrs(s.events, b_.events.attrs, b_.event_attrs, Part::kKey, true);
      case Col::kEventAttrTypes:
        return NestedAttrs(s.events, b_.events.attrs, b_.event_attrs, Part::kType, true);
      case Col::kEventAttrValues:
        return NestedAttrs(s.events, b_.events.attrs, b_.event_attrs, Part::kValue, true);
      case Col::kEventDroppedAttrs:
        return Children(s.events, event, [&](uint32_t e) {
          return Num<uint32_t>(&b_.events.dropped_attributes_count[e]);
        });
      case Col::kDroppedEvents:
        return Each([&](uint32_t i) { return Num<uint32_t>(&s.dropped_events_count[i]); });
      case Col::kLinkTraceIds:
        return Children(s.links, link, [&](uint32_t l) { return Id(&b_.links.trace_id[l]); });
      case Col::kLinkSpanIds:
        return Children(s.links, link, [&](uint32_t l) { return Id(&b_.links.span_id[l]); });
      case Col::kLinkTraceStates:
        return Children(s.links, link, [&](uint32_t l) { return Str(&b_.links.trace_state[l]); });
      case Col::kLinkFlags:
        return Children(s.links, link,
                        [&](uint32_t l) { return Num<uint32_t>(&b_.links.flags[l]); });
      case Col::kLinkAttrKeys:
        return NestedAttrs(s.links, b_.links.attrs, b_.link_attrs, Part::kKey, false);
      case Col::kLinkAttrTypes:
        return NestedAttrs(s.links, b_.links.attrs, b_.link_attrs, Part::kType, false);
      case Col::kLinkAttrValues:
        return NestedAttrs(s.links, b_.links.attrs, b_.link_attrs, Part::kValue, false);
      case Col::kLinkDroppedAttrs:
        return Children(s.links, link, [&](uint32_t l) {
          return Num<uint32_t>(&b_.links.dropped_attributes_count[l]);
        });
      case Col::kDroppedLinks:
        return Each([&](uint32_t i) { return Num<uint32_t>(&s.dropped_links_count[i]); });
      default:
        return Status::Internal("native: unknown column");
    }
  }

  Reader& r_;
  SpanBatch& b_;
  uint32_t base_;
  uint64_t n_;
  bool json_ = false;  // the current column is of the JSON type
  bool map_ = false;   // the current column is a Map
  bool map_keys_lc_ = false;
  bool map_values_lc_ = false;
  // The block's user_fields as a Map (ReadMap): offsets per row, entries.
  bool map_read_ = false;
  std::vector<uint64_t> map_offsets_;
  std::vector<std::string_view> map_keys_;
  std::vector<std::string_view> map_values_;
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
  // Each attribute column's value per row, where the block has it.
  std::array<std::vector<StrRef>, kAttrColumnCount> column_values_;
};

}  // namespace

Status DecodeSpanBlocks(std::string_view data, SpanBatch* out,
                        std::vector<uint64_t>* resource_ids) {
  static const std::unordered_map<std::string_view, Col> by_name = [] {
    std::unordered_map<std::string_view, Col> m;
    for (const auto& c : ReadColumns(true, true)) m.emplace(c.name, c.id);
    for (const auto& c : RareColumns()) m.emplace(c.name, c.id);
    m.emplace("span_ids", Col::kSpanIds);
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
      // A Map reads its LowCardinality parts' versions itself (ReadMap).
      const bool map = type.substr(0, 4) == "Map(";
      SH_RETURN_IF_ERROR(
          dec.BeginColumn(!map && type.find("LowCardinality(") != std::string_view::npos));
      dec.SetJson(type.substr(0, 4) == "JSON");
      dec.SetMap(map, type.starts_with("Map(LowCardinality("),
                 type.ends_with(", LowCardinality(String))"));
      SH_RETURN_IF_ERROR(dec.Column(it->second));
    }
    SH_RETURN_IF_ERROR(dec.BeginColumn(false));  // checks the last column
    SH_RETURN_IF_ERROR(dec.ResolveUserFields());
  }
  return Status::Ok();
}

}  // namespace spanhouse::storage
