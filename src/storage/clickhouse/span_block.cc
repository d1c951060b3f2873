#include "storage/clickhouse/span_block.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace spanhouse::storage {

namespace {

using native::Reader;
using native::Writer;

// Writes the spans table's columns for a list of rows, each a span of some
// batch: one block may gather spans from many batches, in any order (the
// writer's order is the table's sort key, so the engine need not sort).
class Encoder {
 public:
  Encoder(const std::vector<SpanRow>& rows, Writer& w) : rows_(rows), w_(w) {}

  enum class Part { kKey, kType, kValue };

  void AttrPart(const SpanBatch& b, const AttrColumns& cols, Range r, Part p) {
    for (uint32_t a = r.begin; a < r.end; ++a) {
      switch (p) {
        case Part::kKey:
          w_.String(b.Str(cols.key[a]));
          break;
        case Part::kType:
          w_.Fixed<uint8_t>(static_cast<uint8_t>(cols.type[a]));
          break;
        case Part::kValue:
          w_.String(b.Str(cols.value[a]));
          break;
      }
    }
  }
  // Array(T) of one attribute list per row; `list(b, i)` gives the row's
  // attribute columns and range.
  template <typename List>
  void Attrs(List&& list, Part p) {
    uint64_t total = 0;
    for (const SpanRow& r : rows_) {
      total += list(*r.batch, r.index).second.size();
      w_.Fixed<uint64_t>(total);
    }
    for (const SpanRow& r : rows_) {
      const auto [cols, range] = list(*r.batch, r.index);
      AttrPart(*r.batch, *cols, range, p);
    }
  }
  // Array offsets of a row's events or links (`children` picks the ranges).
  template <typename Children>
  void ChildOffsets(Children&& children) {
    uint64_t total = 0;
    for (const SpanRow& r : rows_) {
      total += children(*r.batch)[r.index].size();
      w_.Fixed<uint64_t>(total);
    }
  }
  // Array(T) over a row's events or links: `each(batch, child)` writes one.
  template <typename Children, typename Fn>
  void Nested(Children&& children, Fn&& each) {
    ChildOffsets(children);
    for (const SpanRow& r : rows_) {
      const Range rg = children(*r.batch)[r.index];
      for (uint32_t c = rg.begin; c < rg.end; ++c) each(*r.batch, c);
    }
  }
  // Array(Array(T)) over the attributes of a row's events or links.
  template <typename Children, typename ChildAttrs>
  void NestedAttrs(Children&& children, ChildAttrs&& child_attrs, Part p) {
    ChildOffsets(children);
    uint64_t total = 0;
    for (const SpanRow& r : rows_) {
      const Range rg = children(*r.batch)[r.index];
      for (uint32_t c = rg.begin; c < rg.end; ++c) {
        total += (*child_attrs(*r.batch).second)[c].size();
        w_.Fixed<uint64_t>(total);
      }
    }
    for (const SpanRow& r : rows_) {
      const Range rg = children(*r.batch)[r.index];
      const auto [cols, ranges] = child_attrs(*r.batch);
      for (uint32_t c = rg.begin; c < rg.end; ++c) AttrPart(*r.batch, *cols, (*ranges)[c], p);
    }
  }
  // One fixed-width or string value per row.
  template <typename Fn>
  void Each(Fn&& fn) {
    for (const SpanRow& r : rows_) fn(*r.batch, r.index, r);
  }

  void Column(Col id) {
    using B = const SpanBatch&;
    using AttrList = std::pair<const AttrColumns*, Range>;
    auto scope_attrs = [](B b, uint32_t i) {
      return AttrList{&b.scope_attrs, b.scopes.attrs[b.spans.scope[i]]};
    };
    auto span_attrs = [](B b, uint32_t i) { return AttrList{&b.span_attrs, b.spans.attrs[i]}; };
    auto events = [](B b) -> const std::vector<Range>& { return b.spans.events; };
    auto links = [](B b) -> const std::vector<Range>& { return b.spans.links; };
    auto event_attrs = [](B b) { return std::pair{&b.event_attrs, &b.events.attrs}; };
    auto link_attrs = [](B b) { return std::pair{&b.link_attrs, &b.links.attrs}; };
    switch (id) {
      case Col::kTimestamp:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.Fixed<uint32_t>(static_cast<uint32_t>(b.spans.start_ns[i] / 1000000000));
        });
        break;
      case Col::kTraceId:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.Bytes(b.spans.trace_id[i].data(), 16); });
        break;
      case Col::kSpanId:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.Bytes(b.spans.span_id[i].data(), 8); });
        break;
      case Col::kParentSpanId:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.Bytes(b.spans.parent_span_id[i].data(), 8);
        });
        break;
      case Col::kTraceState:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.String(b.Str(b.spans.trace_state[i])); });
        break;
      case Col::kFlags:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.Fixed<uint32_t>(b.spans.flags[i]); });
        break;
      case Col::kName:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.String(b.Str(b.spans.name[i])); });
        break;
      case Col::kKind:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.Fixed<uint8_t>(b.spans.kind[i]); });
        break;
      case Col::kStartTime:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.Fixed<uint64_t>(b.spans.start_ns[i]); });
        break;
      case Col::kDurationNs:
        Each([&](B b, uint32_t i, const SpanRow&) {
          const uint64_t start = b.spans.start_ns[i];
          const uint64_t end = b.spans.end_ns[i];
          w_.Fixed<uint64_t>(end >= start ? end - start : 0);
        });
        break;
      case Col::kStatusCode:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.Fixed<uint8_t>(b.spans.status_code[i]); });
        break;
      case Col::kStatusMessage:
        Each([&](B b, uint32_t i, const SpanRow&) { w_.String(b.Str(b.spans.status_message[i])); });
        break;
      case Col::kServiceName:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.String(b.Str(b.resources.service_name[b.spans.resource[i]]));
        });
        break;
      case Col::kResourceAttrKeys:  // not in the spans table: EncodeResourceBlock
      case Col::kResourceAttrTypes:
      case Col::kResourceAttrValues:
      case Col::kResourceDroppedAttrs:
      case Col::kResourceSchemaUrl:
        break;
      case Col::kScopeName:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.String(b.Str(b.scopes.name[b.spans.scope[i]]));
        });
        break;
      case Col::kScopeVersion:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.String(b.Str(b.scopes.version[b.spans.scope[i]]));
        });
        break;
      case Col::kScopeAttrKeys:
        Attrs(scope_attrs, Part::kKey);
        break;
      case Col::kScopeAttrTypes:
        Attrs(scope_attrs, Part::kType);
        break;
      case Col::kScopeAttrValues:
        Attrs(scope_attrs, Part::kValue);
        break;
      case Col::kScopeDroppedAttrs:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.Fixed<uint32_t>(b.scopes.dropped_attributes_count[b.spans.scope[i]]);
        });
        break;
      case Col::kScopeSchemaUrl:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.String(b.Str(b.scopes.schema_url[b.spans.scope[i]]));
        });
        break;
      case Col::kAttrKeys:
        Attrs(span_attrs, Part::kKey);
        break;
      case Col::kAttrTypes:
        Attrs(span_attrs, Part::kType);
        break;
      case Col::kAttrValues:
        Attrs(span_attrs, Part::kValue);
        break;
      case Col::kDroppedAttrs:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.Fixed<uint32_t>(b.spans.dropped_attributes_count[i]);
        });
        break;
      case Col::kEventTimes:
        Nested(events, [&](B b, uint32_t e) { w_.Fixed<uint64_t>(b.events.time_ns[e]); });
        break;
      case Col::kEventNames:
        Nested(events, [&](B b, uint32_t e) { w_.String(b.Str(b.events.name[e])); });
        break;
      case Col::kEventAttrKeys:
        NestedAttrs(events, event_attrs, Part::kKey);
        break;
      case Col::kEventAttrTypes:
        NestedAttrs(events, event_attrs, Part::kType);
        break;
      case Col::kEventAttrValues:
        NestedAttrs(events, event_attrs, Part::kValue);
        break;
      case Col::kEventDroppedAttrs:
        Nested(events,
               [&](B b, uint32_t e) { w_.Fixed<uint32_t>(b.events.dropped_attributes_count[e]); });
        break;
      case Col::kDroppedEvents:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.Fixed<uint32_t>(b.spans.dropped_events_count[i]);
        });
        break;
      case Col::kLinkTraceIds:
        Nested(links, [&](B b, uint32_t l) { w_.Bytes(b.links.trace_id[l].data(), 16); });
        break;
      case Col::kLinkSpanIds:
        Nested(links, [&](B b, uint32_t l) { w_.Bytes(b.links.span_id[l].data(), 8); });
        break;
      case Col::kLinkTraceStates:
        Nested(links, [&](B b, uint32_t l) { w_.String(b.Str(b.links.trace_state[l])); });
        break;
      case Col::kLinkFlags:
        Nested(links, [&](B b, uint32_t l) { w_.Fixed<uint32_t>(b.links.flags[l]); });
        break;
      case Col::kLinkAttrKeys:
        NestedAttrs(links, link_attrs, Part::kKey);
        break;
      case Col::kLinkAttrTypes:
        NestedAttrs(links, link_attrs, Part::kType);
        break;
      case Col::kLinkAttrValues:
        NestedAttrs(links, link_attrs, Part::kValue);
        break;
      case Col::kLinkDroppedAttrs:
        Nested(links,
               [&](B b, uint32_t l) { w_.Fixed<uint32_t>(b.links.dropped_attributes_count[l]); });
        break;
      case Col::kDroppedLinks:
        Each([&](B b, uint32_t i, const SpanRow&) {
          w_.Fixed<uint32_t>(b.spans.dropped_links_count[i]);
        });
        break;
      case Col::kResourceId:
        Each([&](B, uint32_t, const SpanRow& r) { w_.Fixed<uint64_t>(r.resource_id); });
        break;
      case Col::kCount:
        break;
    }
  }

 private:
  const std::vector<SpanRow>& rows_;
  Writer& w_;
};

#define SH_TRY(expr)           \
  do {                         \
    Status _st = (expr);       \
    if (!_st.ok()) return _st; \
  } while (0)

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
      SH_TRY(r_.Fixed(&(*offs)[i]));
      if ((*offs)[i] < prev) return Status::Internal("native: offsets go backwards");
      prev = (*offs)[i];
    }
    return Status::Ok();
  }
  Status Str(StrRef* out) {
    std::string_view s;
    SH_TRY(r_.String(&s));
    *out = b_.AddString(s);
    return Status::Ok();
  }
  template <typename T, typename U>
  Status Num(U* out) {
    T v{};
    SH_TRY(r_.Fixed(&v));
    *out = static_cast<U>(v);
    return Status::Ok();
  }
  template <size_t N>
  Status Id(std::array<uint8_t, N>* out) {
    std::string_view s;
    SH_TRY(r_.Bytes(N, &s));
    std::memcpy(out->data(), s.data(), N);
    return Status::Ok();
  }

  // Attribute lists of one owner per row. Keys create the rows; types and
  // values must come with the same offsets and fill them in.
  enum class Part { kKey, kType, kValue };
  Status Attrs(AttrColumns& cols, std::vector<Range>& ranges, uint32_t owner_base, Part p) {
    std::vector<uint64_t> offs;
    SH_TRY(Offsets(&offs));
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      Range& rg = ranges[owner_base + i];
      uint64_t count = offs[i] - prev;
      prev = offs[i];
      SH_TRY(AttrRun(cols, rg, count, p));
    }
    return Status::Ok();
  }
  Status AttrRun(AttrColumns& cols, Range& rg, uint64_t count, Part p) {
    if (p == Part::kKey) {
      rg.begin = static_cast<uint32_t>(cols.size());
      for (uint64_t k = 0; k < count; ++k) {
        StrRef key;
        SH_TRY(Str(&key));
        SpanBatch::AddAttr(cols, key, ValueType::kEmpty, StrRef{});
      }
      rg.end = static_cast<uint32_t>(cols.size());
      return Status::Ok();
    }
    if (count != rg.size()) return Status::Internal("native: attribute columns disagree in length");
    for (uint32_t a = rg.begin; a < rg.end; ++a) {
      if (p == Part::kType) {
        uint8_t t;
        SH_TRY(r_.Fixed(&t));
        cols.type[a] = static_cast<ValueType>(t);
      } else {
        SH_TRY(Str(&cols.value[a]));
      }
    }
    return Status::Ok();
  }
  // Array(T) over a span's events or links: the first such column creates
  // the children, later ones must agree.
  template <typename Make, typename Fill>
  Status Children(std::vector<Range>& ranges, Make&& make, Fill&& fill) {
    std::vector<uint64_t> offs;
    SH_TRY(Offsets(&offs));
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
      for (uint32_t c = rg.begin; c < rg.end; ++c) SH_TRY(fill(c));
    }
    return Status::Ok();
  }
  Status NestedAttrs(std::vector<Range>& children, std::vector<Range>& child_attrs,
                     AttrColumns& cols, Part p, bool events) {
    std::vector<uint64_t> outer;
    SH_TRY(Offsets(&outer));
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
    for (uint64_t k = 0; k < total; ++k) SH_TRY(r_.Fixed(&inner[k]));
    uint64_t iprev = 0;
    size_t k = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      const Range rg = children[base_ + i];
      for (uint32_t c = rg.begin; c < rg.end; ++c, ++k) {
        if (inner[k] < iprev) return Status::Internal("native: offsets go backwards");
        uint64_t count = inner[k] - iprev;
        iprev = inner[k];
        SH_TRY(AttrRun(cols, child_attrs[c], count, p));
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
      for (uint64_t i = 0; i < n_; ++i) SH_TRY(fn(base_ + static_cast<uint32_t>(i)));
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
          SH_TRY(r_.Fixed(&d));
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
      case Col::kResourceId:  // the resource's own columns, when joined in, say the rest
        return each([&](uint32_t) {
          uint64_t id;
          return r_.Fixed(&id);
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
};

}  // namespace

std::vector<uint64_t> ResourceIds(const SpanBatch& batch) {
  std::vector<uint64_t> ids(batch.resources.attrs.size());
  for (uint32_t r = 0; r < ids.size(); ++r) ids[r] = ResourceFingerprint(batch, r);
  return ids;
}

void SortByTableKey(std::vector<SpanRow>* rows) {
  // Hours in UTC, as the engine's toStartOfHour in its default (UTC) zone.
  std::stable_sort(rows->begin(), rows->end(), [](const SpanRow& x, const SpanRow& y) {
    const uint64_t hx = x.batch->spans.start_ns[x.index] / 3600000000000ull;
    const uint64_t hy = y.batch->spans.start_ns[y.index] / 3600000000000ull;
    if (hx != hy) return hx < hy;
    return std::memcmp(x.batch->spans.trace_id[x.index].data(),
                       y.batch->spans.trace_id[y.index].data(), 16) < 0;
  });
}

void EncodeSpanRows(const std::vector<SpanRow>& rows, const Capabilities& caps, std::string* out) {
  Writer w(out);
  const auto& cols = SpanColumns();
  w.BlockHeader(cols.size(), rows.size());
  Encoder enc(rows, w);
  for (const auto& c : cols) {
    w.ColumnHeader(c.name, WireType(c.logical, caps));
    enc.Column(c.id);
  }
}

void EncodeSpanBlock(const SpanBatch& batch, const Capabilities& caps, std::string* out,
                     const std::vector<uint64_t>* resource_ids) {
  std::vector<uint64_t> computed;
  if (resource_ids == nullptr) {
    computed = ResourceIds(batch);
    resource_ids = &computed;
  }
  std::vector<SpanRow> rows(batch.span_count());
  for (uint32_t i = 0; i < rows.size(); ++i) {
    rows[i] = {&batch, i, (*resource_ids)[batch.spans.resource[i]]};
  }
  EncodeSpanRows(rows, caps, out);
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

Status DecodeSpanBlocks(std::string_view data, SpanBatch* out) {
  static const std::unordered_map<std::string_view, Col> by_name = [] {
    std::unordered_map<std::string_view, Col> m;
    for (const auto& c : ReadColumns()) m.emplace(c.name, c.id);
    return m;
  }();
  Reader r(data);
  while (!r.eof()) {
    uint64_t ncols = 0;
    uint64_t nrows = 0;
    SH_TRY(r.Varint(&ncols));
    SH_TRY(r.Varint(&nrows));
    if (nrows > data.size()) return Status::Internal("native: row count larger than the data");
    auto base = static_cast<uint32_t>(out->span_count());
    for (uint64_t i = 0; i < nrows; ++i) {
      uint32_t res = out->AddResource();
      uint32_t scope = out->AddScope();
      out->AddSpan(res, scope);
    }
    Decoder dec(r, *out, base, nrows);
    for (uint64_t c = 0; c < ncols; ++c) {
      std::string_view name;
      std::string_view type;
      SH_TRY(r.String(&name));
      SH_TRY(r.String(&type));
      auto it = by_name.find(name);
      if (it == by_name.end())
        return Status::Internal("native: unexpected column " + std::string(name));
      SH_TRY(dec.Column(it->second));
    }
  }
  return Status::Ok();
}

}  // namespace spanhouse::storage
