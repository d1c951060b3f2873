#include "storage/clickhouse/span_extras.h"

#include <cstring>
#include <vector>

#include "storage/clickhouse/native.h"

namespace spanhouse::storage {

namespace {

enum class Part { kKey, kType, kValue };
constexpr Part kParts[] = {Part::kKey, Part::kType, Part::kValue};

bool AllEmpty(const SpanBatch& b, uint32_t i) {
  const uint32_t sc = b.spans.scope[i];
  return b.scopes.attrs[sc].size() == 0 && b.scopes.dropped_attributes_count[sc] == 0 &&
         b.Str(b.scopes.schema_url[sc]).empty() && b.spans.events[i].size() == 0 &&
         b.spans.dropped_events_count[i] == 0 && b.spans.links[i].size() == 0 &&
         b.spans.dropped_links_count[i] == 0;
}

// Array(T) of `r`: its size, then each(k) for every k in it.
template <typename Fn>
void Each(native::Writer& w, Range r, Fn&& each) {
  w.Varint(r.size());
  for (uint32_t k = r.begin; k < r.end; ++k) each(k);
}

// Array(String) of the keys or values, or Array(UInt8) of the types, of
// the attributes `r` of `cols`.
void Attrs(native::Writer& w, const SpanBatch& b, const AttrColumns& cols, Range r, Part p) {
  Each(w, r, [&](uint32_t a) {
    switch (p) {
      case Part::kKey:
        w.String(b.Str(cols.key[a]));
        break;
      case Part::kType:
        w.Fixed<uint8_t>(static_cast<uint8_t>(cols.type[a]));
        break;
      case Part::kValue:
        w.String(b.Str(cols.value[a]));
        break;
    }
  });
}

// An array's size, bounded by the bytes left (each element takes one at
// least), so a damaged value cannot make a huge allocation.
Status Size(native::Reader& r, uint64_t* n) {
  if (Status st = r.Varint(n); !st.ok()) return st;
  if (*n > r.left()) return Status::Internal("span extras: array larger than the value");
  return Status::Ok();
}

template <typename T, typename Fn>
Status ReadArray(native::Reader& r, std::vector<T>* out, Fn&& one) {
  uint64_t n = 0;
  if (Status st = Size(r, &n); !st.ok()) return st;
  out->resize(n);
  for (auto& v : *out) {
    if (Status st = one(&v); !st.ok()) return st;
  }
  return Status::Ok();
}

// One attribute list as three parallel arrays.
struct AttrList {
  std::vector<std::string_view> keys;
  std::vector<uint8_t> types;
  std::vector<std::string_view> values;
};

Status ReadPart(native::Reader& r, Part p, AttrList* list) {
  switch (p) {
    case Part::kKey:
      return ReadArray(r, &list->keys, [&](std::string_view* s) { return r.String(s); });
    case Part::kType:
      return ReadArray(r, &list->types, [&](uint8_t* t) { return r.Fixed(t); });
    case Part::kValue:
      return ReadArray(r, &list->values, [&](std::string_view* s) { return r.String(s); });
  }
  return Status::Ok();
}

// Array(Array(...)) of the attribute lists of `n` events or links.
Status ReadNestedAttrs(native::Reader& r, size_t n, std::vector<AttrList>* lists) {
  lists->resize(n);
  for (Part p : kParts) {
    uint64_t count = 0;
    if (Status st = Size(r, &count); !st.ok()) return st;
    if (count != n) return Status::Internal("span extras: arrays of different sizes");
    for (AttrList& l : *lists) {
      if (Status st = ReadPart(r, p, &l); !st.ok()) return st;
    }
  }
  return Status::Ok();
}

// Appends `l` to `cols`; its range there.
Status AddAttrs(SpanBatch& b, AttrColumns& cols, const AttrList& l, Range* range) {
  if (l.keys.size() != l.types.size() || l.keys.size() != l.values.size()) {
    return Status::Internal("span extras: attribute arrays of different sizes");
  }
  const auto begin = static_cast<uint32_t>(cols.size());
  for (size_t k = 0; k < l.keys.size(); ++k) {
    SpanBatch::AddAttr(cols, b.AddString(l.keys[k]), static_cast<ValueType>(l.types[k]),
                       b.AddString(l.values[k]));
  }
  *range = {begin, static_cast<uint32_t>(cols.size())};
  return Status::Ok();
}

}  // namespace

void EncodeSpanExtras(const SpanBatch& b, uint32_t i, std::string* out) {
  if (AllEmpty(b, i)) return;
  native::Writer w(out);
  const uint32_t sc = b.spans.scope[i];
  for (Part p : kParts) Attrs(w, b, b.scope_attrs, b.scopes.attrs[sc], p);
  w.Fixed<uint32_t>(b.scopes.dropped_attributes_count[sc]);
  w.String(b.Str(b.scopes.schema_url[sc]));

  const Range ev = b.spans.events[i];
  Each(w, ev, [&](uint32_t e) { w.Fixed<uint64_t>(b.events.time_ns[e]); });
  Each(w, ev, [&](uint32_t e) { w.String(b.Str(b.events.name[e])); });
  for (Part p : kParts) {
    Each(w, ev, [&](uint32_t e) { Attrs(w, b, b.event_attrs, b.events.attrs[e], p); });
  }
  Each(w, ev, [&](uint32_t e) { w.Fixed<uint32_t>(b.events.dropped_attributes_count[e]); });
  w.Fixed<uint32_t>(b.spans.dropped_events_count[i]);

  const Range ln = b.spans.links[i];
  Each(w, ln, [&](uint32_t l) { w.Bytes(b.links.trace_id[l].data(), 16); });
  Each(w, ln, [&](uint32_t l) { w.Bytes(b.links.span_id[l].data(), 8); });
  Each(w, ln, [&](uint32_t l) { w.String(b.Str(b.links.trace_state[l])); });
  Each(w, ln, [&](uint32_t l) { w.Fixed<uint32_t>(b.links.flags[l]); });
  for (Part p : kParts) {
    Each(w, ln, [&](uint32_t l) { Attrs(w, b, b.link_attrs, b.links.attrs[l], p); });
  }
  Each(w, ln, [&](uint32_t l) { w.Fixed<uint32_t>(b.links.dropped_attributes_count[l]); });
  w.Fixed<uint32_t>(b.spans.dropped_links_count[i]);
}

Status DecodeSpanExtras(std::string_view value, SpanBatch* out, uint32_t span) {
  if (value.empty()) return Status::Ok();
  SpanBatch& b = *out;
  native::Reader r(value);

  const uint32_t sc = b.spans.scope[span];
  AttrList scope;
  for (Part p : kParts) SH_RETURN_IF_ERROR(ReadPart(r, p, &scope));
  SH_RETURN_IF_ERROR(AddAttrs(b, b.scope_attrs, scope, &b.scopes.attrs[sc]));
  SH_RETURN_IF_ERROR(r.Fixed(&b.scopes.dropped_attributes_count[sc]));
  std::string_view url;
  SH_RETURN_IF_ERROR(r.String(&url));
  b.scopes.schema_url[sc] = b.AddString(url);

  std::vector<uint64_t> times;
  SH_RETURN_IF_ERROR(ReadArray(r, &times, [&](uint64_t* t) { return r.Fixed(t); }));
  std::vector<std::string_view> names;
  SH_RETURN_IF_ERROR(ReadArray(r, &names, [&](std::string_view* s) { return r.String(s); }));
  std::vector<AttrList> event_attrs;
  SH_RETURN_IF_ERROR(ReadNestedAttrs(r, times.size(), &event_attrs));
  std::vector<uint32_t> event_dropped;
  SH_RETURN_IF_ERROR(ReadArray(r, &event_dropped, [&](uint32_t* d) { return r.Fixed(d); }));
  if (names.size() != times.size() || event_dropped.size() != times.size()) {
    return Status::Internal("span extras: event arrays of different sizes");
  }
  const auto first_event = static_cast<uint32_t>(b.events.time_ns.size());
  for (size_t e = 0; e < times.size(); ++e) {
    const uint32_t k = b.AddEvent();
    b.events.time_ns[k] = times[e];
    b.events.name[k] = b.AddString(names[e]);
    SH_RETURN_IF_ERROR(AddAttrs(b, b.event_attrs, event_attrs[e], &b.events.attrs[k]));
    b.events.dropped_attributes_count[k] = event_dropped[e];
  }
  b.spans.events[span] = {first_event, static_cast<uint32_t>(b.events.time_ns.size())};
  SH_RETURN_IF_ERROR(r.Fixed(&b.spans.dropped_events_count[span]));

  std::vector<std::string_view> trace_ids;
  SH_RETURN_IF_ERROR(ReadArray(r, &trace_ids, [&](std::string_view* s) { return r.Bytes(16, s); }));
  std::vector<std::string_view> span_ids;
  SH_RETURN_IF_ERROR(ReadArray(r, &span_ids, [&](std::string_view* s) { return r.Bytes(8, s); }));
  std::vector<std::string_view> states;
  SH_RETURN_IF_ERROR(ReadArray(r, &states, [&](std::string_view* s) { return r.String(s); }));
  std::vector<uint32_t> flags;
  SH_RETURN_IF_ERROR(ReadArray(r, &flags, [&](uint32_t* f) { return r.Fixed(f); }));
  std::vector<AttrList> link_attrs;
  SH_RETURN_IF_ERROR(ReadNestedAttrs(r, trace_ids.size(), &link_attrs));
  std::vector<uint32_t> link_dropped;
  SH_RETURN_IF_ERROR(ReadArray(r, &link_dropped, [&](uint32_t* d) { return r.Fixed(d); }));
  const size_t n = trace_ids.size();
  if (span_ids.size() != n || states.size() != n || flags.size() != n || link_dropped.size() != n) {
    return Status::Internal("span extras: link arrays of different sizes");
  }
  const auto first_link = static_cast<uint32_t>(b.links.trace_id.size());
  for (size_t l = 0; l < n; ++l) {
    const uint32_t k = b.AddLink();
    std::memcpy(b.links.trace_id[k].data(), trace_ids[l].data(), 16);
    std::memcpy(b.links.span_id[k].data(), span_ids[l].data(), 8);
    b.links.trace_state[k] = b.AddString(states[l]);
    b.links.flags[k] = flags[l];
    SH_RETURN_IF_ERROR(AddAttrs(b, b.link_attrs, link_attrs[l], &b.links.attrs[k]));
    b.links.dropped_attributes_count[k] = link_dropped[l];
  }
  b.spans.links[span] = {first_link, static_cast<uint32_t>(b.links.trace_id.size())};
  SH_RETURN_IF_ERROR(r.Fixed(&b.spans.dropped_links_count[span]));
  if (!r.eof()) return Status::Internal("span extras: bytes after the value");
  return Status::Ok();
}

}  // namespace spanhouse::storage
