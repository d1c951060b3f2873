#include "model/span_batch.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <tuple>

#include "model/service_name.h"

namespace spanhouse {

StrRef SpanBatch::AddString(std::string_view s) {
  StrRef r{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(s.size())};
  arena_.append(s);
  return r;
}

uint32_t SpanBatch::AddResource() {
  auto i = static_cast<uint32_t>(resources.attrs.size());
  auto a = static_cast<uint32_t>(resource_attrs.size());
  resources.attrs.push_back({a, a});
  resources.dropped_attributes_count.push_back(0);
  resources.schema_url.emplace_back();
  resources.service_name.emplace_back();
  return i;
}

uint32_t SpanBatch::AddScope() {
  auto i = static_cast<uint32_t>(scopes.name.size());
  auto a = static_cast<uint32_t>(scope_attrs.size());
  scopes.name.emplace_back();
  scopes.version.emplace_back();
  scopes.attrs.push_back({a, a});
  scopes.dropped_attributes_count.push_back(0);
  scopes.schema_url.emplace_back();
  return i;
}

uint32_t SpanBatch::AddSpan(uint32_t resource, uint32_t scope) {
  auto i = static_cast<uint32_t>(spans.trace_id.size());
  auto a = static_cast<uint32_t>(span_attrs.size());
  auto e = static_cast<uint32_t>(events.time_ns.size());
  auto l = static_cast<uint32_t>(links.trace_id.size());
  spans.trace_id.emplace_back();
  spans.span_id.emplace_back();
  spans.parent_span_id.emplace_back();
  spans.trace_state.emplace_back();
  spans.flags.push_back(0);
  spans.name.emplace_back();
  spans.kind.push_back(0);
  spans.start_ns.push_back(0);
  spans.end_ns.push_back(0);
  spans.status_code.push_back(0);
  spans.status_message.emplace_back();
  spans.resource.push_back(resource);
  spans.scope.push_back(scope);
  spans.attrs.push_back({a, a});
  spans.dropped_attributes_count.push_back(0);
  spans.events.push_back({e, e});
  spans.dropped_events_count.push_back(0);
  spans.links.push_back({l, l});
  spans.dropped_links_count.push_back(0);
  spans.metrics_only.push_back(0);
  return i;
}

uint32_t SpanBatch::AddEvent() {
  auto i = static_cast<uint32_t>(events.time_ns.size());
  auto a = static_cast<uint32_t>(event_attrs.size());
  events.time_ns.push_back(0);
  events.name.emplace_back();
  events.attrs.push_back({a, a});
  events.dropped_attributes_count.push_back(0);
  return i;
}

uint32_t SpanBatch::AddLink() {
  auto i = static_cast<uint32_t>(links.trace_id.size());
  auto a = static_cast<uint32_t>(link_attrs.size());
  links.trace_id.emplace_back();
  links.span_id.emplace_back();
  links.trace_state.emplace_back();
  links.flags.push_back(0);
  links.attrs.push_back({a, a});
  links.dropped_attributes_count.push_back(0);
  return i;
}

void SpanBatch::AddAttr(AttrColumns& cols, StrRef key, ValueType type, StrRef value) {
  cols.key.push_back(key);
  cols.type.push_back(type);
  cols.value.push_back(value);
}

namespace {

// The index in resource_attrs of resource `r`'s first service.name, or -1.
int64_t FirstServiceNameAttr(const SpanBatch& b, uint32_t r) {
  const Range range = r < b.resources.attrs.size() ? b.resources.attrs[r] : Range{};
  for (uint32_t i = range.begin; i < range.end && i < b.resource_attrs.size(); ++i) {
    if (b.Str(b.resource_attrs.key[i]) == "service.name") return i;
  }
  return -1;
}

}  // namespace

std::string_view JaegerServiceName(const SpanBatch& b, uint32_t r) {
  const int64_t i = FirstServiceNameAttr(b, r);
  if (i < 0) return kMissingServiceName;
  if (b.resource_attrs.type[i] != ValueType::kString) return kWrongTypeServiceName;
  const std::string_view name = b.Str(b.resource_attrs.value[i]);
  return name.empty() ? kEmptyServiceName : name;
}

void SpanBatch::ResolveServiceName(uint32_t r) {
  const int64_t i = FirstServiceNameAttr(*this, r);
  if (i >= 0 && resource_attrs.type[i] == ValueType::kString && resource_attrs.value[i].len != 0) {
    resources.service_name[r] = resource_attrs.value[i];  // no copy: the attribute's text
  } else {
    resources.service_name[r] = AddString(JaegerServiceName(*this, r));
  }
}

namespace {

// 64-bit hashing of byte strings: 8 bytes at a time, each word mixed in with
// a multiply-xorshift step and a final avalanche (the murmur3 finalizer).
// Not cryptographic; collisions between the resources one deployment ever
// sends are vanishingly unlikely at 64 bits.
class Hasher {
 public:
  void Bytes(std::string_view s) {
    Word(s.size());
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      Word(w);
    }
    uint64_t tail = 0;
    if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
    Word(tail);
  }
  void Word(uint64_t w) {
    h_ ^= w * 0x9e3779b97f4a7c15ull;
    h_ = (h_ << 27 | h_ >> 37) * 0xff51afd7ed558ccdull + 0x52dce729;
  }
  uint64_t Done() const {
    uint64_t h = h_;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
  }

 private:
  uint64_t h_ = 0x243f6a8885a308d3ull;
};

template <typename V>
size_t Cap(const V& v) {
  return v.capacity() * sizeof(typename V::value_type);
}

size_t AttrBytes(const AttrColumns& c) {
  return Cap(c.key) + Cap(c.type) + Cap(c.value);
}

}  // namespace

uint64_t ResourceFingerprint(const SpanBatch& b, uint32_t resource) {
  Hasher h;
  const Range r = b.resources.attrs[resource];
  h.Word(r.size());
  for (uint32_t a = r.begin; a < r.end; ++a) {
    h.Bytes(b.Str(b.resource_attrs.key[a]));
    h.Word(static_cast<uint64_t>(b.resource_attrs.type[a]));
    h.Bytes(b.Str(b.resource_attrs.value[a]));
  }
  h.Bytes(b.Str(b.resources.schema_url[resource]));
  h.Word(b.resources.dropped_attributes_count[resource]);
  return h.Done();
}

uint64_t SpanContentHash(const SpanBatch& b, uint32_t s) {
  // What tells two spans with the same ids apart, in a few words: a retry is
  // the same bytes, and the halves of a shared span differ in kind and times.
  // Attributes, events and links count by number only (hashing their text
  // cost ~0.6 us a span on the loadgen's corpus, ~8% of ingest).
  Hasher h;
  const SpanBatch::Spans& sp = b.spans;
  uint64_t parent;
  std::memcpy(&parent, sp.parent_span_id[s].data(), 8);
  h.Word(parent);
  h.Word(sp.kind[s] | uint64_t{sp.status_code[s]} << 8 | uint64_t{sp.flags[s]} << 16);
  h.Word(sp.start_ns[s]);
  h.Word(sp.end_ns[s]);
  h.Word(uint64_t{sp.attrs[s].size()} | uint64_t{sp.events[s].size()} << 24 |
         uint64_t{sp.links[s].size()} << 48);
  h.Bytes(b.Str(sp.name[s]));
  h.Bytes(b.Str(b.resources.service_name[sp.resource[s]]));
  if (sp.status_message[s].len != 0) h.Bytes(b.Str(sp.status_message[s]));
  if (sp.trace_state[s].len != 0) h.Bytes(b.Str(sp.trace_state[s]));
  return h.Done();
}

void SpanContentKeys(const SpanBatch& b, std::vector<SpanContentKey>* keys) {
  const size_t n = b.span_count();
  keys->resize(n);
  for (uint32_t s = 0; s < n; ++s) {
    (*keys)[s] = {b.spans.trace_id[s], b.spans.span_id[s], SpanContentHash(b, s)};
  }
}

size_t DropRepeatedSpans(SpanBatch* b) {
  const size_t n = b->span_count();
  if (n < 2) return 0;
  // Content is hashed only for spans whose ids repeat: most reads have none.
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  const auto& tid = b->spans.trace_id;
  const auto& sid = b->spans.span_id;
  auto ids_less = [&](uint32_t x, uint32_t y) {
    return std::tie(tid[x], sid[x], x) < std::tie(tid[y], sid[y], y);
  };
  std::sort(order.begin(), order.end(), ids_less);
  std::vector<uint8_t> drop;
  for (size_t i = 0; i + 1 < n;) {
    size_t e = i + 1;
    while (e < n && tid[order[e]] == tid[order[i]] && sid[order[e]] == sid[order[i]]) ++e;
    if (e - i > 1) {
      if (drop.empty()) drop.assign(n, 0);
      std::vector<uint64_t> seen;
      for (size_t k = i; k < e; ++k) {
        const uint32_t s = order[k];  // in batch order within the group
        const uint64_t h = SpanContentHash(*b, s);
        if (std::find(seen.begin(), seen.end(), h) != seen.end()) {
          drop[s] = 1;
        } else {
          seen.push_back(h);
        }
      }
    }
    i = e;
  }
  if (drop.empty()) return 0;
  std::vector<uint32_t> keep;
  for (uint32_t i = 0; i < n; ++i) {
    if (drop[i] == 0) keep.push_back(i);
  }
  if (keep.size() == n) return 0;
  SpanBatch out;
  out.AppendSpans(*b, keep.data(), keep.size());
  *b = std::move(out);
  return n - keep.size();
}

void SpanBatch::Reserve(const Shape& shape) {
  auto attrs = [](AttrColumns& c, size_t n) {
    c.key.reserve(n);
    c.type.reserve(n);
    c.value.reserve(n);
  };
  Spans& s = spans;
  const size_t n = shape.spans;
  s.trace_id.reserve(n);
  s.span_id.reserve(n);
  s.parent_span_id.reserve(n);
  s.trace_state.reserve(n);
  s.flags.reserve(n);
  s.name.reserve(n);
  s.kind.reserve(n);
  s.start_ns.reserve(n);
  s.end_ns.reserve(n);
  s.status_code.reserve(n);
  s.status_message.reserve(n);
  s.resource.reserve(n);
  s.scope.reserve(n);
  s.attrs.reserve(n);
  s.dropped_attributes_count.reserve(n);
  s.events.reserve(n);
  s.dropped_events_count.reserve(n);
  s.links.reserve(n);
  s.dropped_links_count.reserve(n);
  s.metrics_only.reserve(n);
  attrs(span_attrs, shape.span_attrs);
  events.time_ns.reserve(shape.events);
  events.name.reserve(shape.events);
  events.attrs.reserve(shape.events);
  events.dropped_attributes_count.reserve(shape.events);
  attrs(event_attrs, shape.event_attrs);
  links.trace_id.reserve(shape.links);
  links.span_id.reserve(shape.links);
  links.trace_state.reserve(shape.links);
  links.flags.reserve(shape.links);
  links.attrs.reserve(shape.links);
  links.dropped_attributes_count.reserve(shape.links);
  attrs(link_attrs, shape.link_attrs);
}

SpanBatch::Shape SpanBatch::shape() const {
  return {spans.trace_id.size(), span_attrs.size(),     events.time_ns.size(),
          event_attrs.size(),    links.trace_id.size(), link_attrs.size()};
}

bool SpanBatch::AdoptSource(std::string& body) {
  if (!src_.empty() || body.size() >= kSourceBit) return false;
  auto adopted = std::make_shared<const std::string>(std::move(body));
  src_ = *adopted;
  source_ = std::move(adopted);
  return true;
}

size_t SpanBatch::MemoryBytes() const {
  size_t n = arena_.capacity() + (source_ != nullptr ? source_->capacity() : 0);
  n += AttrBytes(resource_attrs) + AttrBytes(scope_attrs) + AttrBytes(span_attrs) +
       AttrBytes(event_attrs) + AttrBytes(link_attrs);
  n += Cap(resources.attrs) + Cap(resources.dropped_attributes_count) + Cap(resources.schema_url) +
       Cap(resources.service_name);
  n += Cap(scopes.name) + Cap(scopes.version) + Cap(scopes.attrs) +
       Cap(scopes.dropped_attributes_count) + Cap(scopes.schema_url);
  const Spans& s = spans;
  n += Cap(s.trace_id) + Cap(s.span_id) + Cap(s.parent_span_id) + Cap(s.trace_state) +
       Cap(s.flags) + Cap(s.name) + Cap(s.kind) + Cap(s.start_ns) + Cap(s.end_ns) +
       Cap(s.status_code) + Cap(s.status_message) + Cap(s.resource) + Cap(s.scope) + Cap(s.attrs) +
       Cap(s.dropped_attributes_count) + Cap(s.events) + Cap(s.dropped_events_count) +
       Cap(s.links) + Cap(s.dropped_links_count) + Cap(s.metrics_only);
  n += Cap(events.time_ns) + Cap(events.name) + Cap(events.attrs) +
       Cap(events.dropped_attributes_count);
  n += Cap(links.trace_id) + Cap(links.span_id) + Cap(links.trace_state) + Cap(links.flags) +
       Cap(links.attrs) + Cap(links.dropped_attributes_count);
  return n;
}

void SpanBatch::Clear() {
  *this = SpanBatch();
}

namespace {

// Copies attributes [r) of `from` into `to`, re-homing strings in `dst`.
Range CopyAttrs(const SpanBatch& src, const AttrColumns& from, Range r, SpanBatch& dst,
                AttrColumns& to) {
  auto begin = static_cast<uint32_t>(to.size());
  for (uint32_t i = r.begin; i < r.end; ++i) {
    SpanBatch::AddAttr(to, dst.AddString(src.Str(from.key[i])), from.type[i],
                       dst.AddString(src.Str(from.value[i])));
  }
  return {begin, static_cast<uint32_t>(to.size())};
}

}  // namespace

void SpanBatch::Append(const SpanBatch& o) {
  AppendSpans(o, nullptr, o.span_count());
}

void SpanBatch::AppendSpans(const SpanBatch& o, const uint32_t* which, size_t n) {
  if (empty()) peer_view = o.peer_view;
  // Resources and scopes are copied once each, on first use, so a subset of
  // spans brings only what it refers to.
  constexpr uint32_t kNone = ~0u;
  std::vector<uint32_t> res_map(o.resources.attrs.size(), kNone);
  std::vector<uint32_t> scope_map(o.scopes.name.size(), kNone);
  auto map_resource = [&](uint32_t r) {
    if (res_map[r] != kNone) return res_map[r];
    uint32_t nr = AddResource();
    resources.attrs[nr] =
        CopyAttrs(o, o.resource_attrs, o.resources.attrs[r], *this, resource_attrs);
    resources.dropped_attributes_count[nr] = o.resources.dropped_attributes_count[r];
    resources.schema_url[nr] = AddString(o.Str(o.resources.schema_url[r]));
    resources.service_name[nr] = AddString(o.Str(o.resources.service_name[r]));
    return res_map[r] = nr;
  };
  auto map_scope = [&](uint32_t s) {
    if (scope_map[s] != kNone) return scope_map[s];
    uint32_t ns = AddScope();
    scopes.name[ns] = AddString(o.Str(o.scopes.name[s]));
    scopes.version[ns] = AddString(o.Str(o.scopes.version[s]));
    scopes.attrs[ns] = CopyAttrs(o, o.scope_attrs, o.scopes.attrs[s], *this, scope_attrs);
    scopes.dropped_attributes_count[ns] = o.scopes.dropped_attributes_count[s];
    scopes.schema_url[ns] = AddString(o.Str(o.scopes.schema_url[s]));
    return scope_map[s] = ns;
  };
  const Spans& os = o.spans;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = which == nullptr ? static_cast<uint32_t>(k) : which[k];
    uint32_t nr = map_resource(os.resource[i]);
    uint32_t ns = map_scope(os.scope[i]);
    uint32_t dst = AddSpan(nr, ns);
    spans.trace_id[dst] = os.trace_id[i];
    spans.span_id[dst] = os.span_id[i];
    spans.parent_span_id[dst] = os.parent_span_id[i];
    spans.trace_state[dst] = AddString(o.Str(os.trace_state[i]));
    spans.flags[dst] = os.flags[i];
    spans.name[dst] = AddString(o.Str(os.name[i]));
    spans.kind[dst] = os.kind[i];
    spans.start_ns[dst] = os.start_ns[i];
    spans.end_ns[dst] = os.end_ns[i];
    spans.status_code[dst] = os.status_code[i];
    spans.status_message[dst] = AddString(o.Str(os.status_message[i]));
    spans.attrs[dst] = CopyAttrs(o, o.span_attrs, os.attrs[i], *this, span_attrs);
    spans.dropped_attributes_count[dst] = os.dropped_attributes_count[i];
    spans.dropped_events_count[dst] = os.dropped_events_count[i];
    spans.dropped_links_count[dst] = os.dropped_links_count[i];
    spans.metrics_only[dst] = os.metrics_only[i];
    auto eb = static_cast<uint32_t>(events.time_ns.size());
    for (uint32_t e = os.events[i].begin; e < os.events[i].end; ++e) {
      uint32_t ne = AddEvent();
      events.time_ns[ne] = o.events.time_ns[e];
      events.name[ne] = AddString(o.Str(o.events.name[e]));
      events.attrs[ne] = CopyAttrs(o, o.event_attrs, o.events.attrs[e], *this, event_attrs);
      events.dropped_attributes_count[ne] = o.events.dropped_attributes_count[e];
    }
    spans.events[dst] = {eb, static_cast<uint32_t>(events.time_ns.size())};
    auto lb = static_cast<uint32_t>(links.trace_id.size());
    for (uint32_t l = os.links[i].begin; l < os.links[i].end; ++l) {
      uint32_t nl = AddLink();
      links.trace_id[nl] = o.links.trace_id[l];
      links.span_id[nl] = o.links.span_id[l];
      links.trace_state[nl] = AddString(o.Str(o.links.trace_state[l]));
      links.flags[nl] = o.links.flags[l];
      links.attrs[nl] = CopyAttrs(o, o.link_attrs, o.links.attrs[l], *this, link_attrs);
      links.dropped_attributes_count[nl] = o.links.dropped_attributes_count[l];
    }
    spans.links[dst] = {lb, static_cast<uint32_t>(links.trace_id.size())};
  }
}

namespace {

struct Cmp {
  const SpanBatch& a;
  const SpanBatch& b;
  std::string* why;
  bool ok = true;

  void Fail(const std::string& what) {
    if (ok && why != nullptr) *why = what;
    ok = false;
  }
  void Str(StrRef x, StrRef y, const std::string& what) {
    if (a.Str(x) != b.Str(y))
      Fail(what + ": '" + std::string(a.Str(x)) + "' != '" + std::string(b.Str(y)) + "'");
  }
  template <typename T>
  void Eq(const T& x, const T& y, const std::string& what) {
    if (!(x == y)) Fail(what);
  }
  void Attrs(const AttrColumns& ca, Range ra, const AttrColumns& cb, Range rb,
             const std::string& what) {
    if (ra.size() != rb.size())
      return Fail(what + ": attribute count " + std::to_string(ra.size()) +
                  " != " + std::to_string(rb.size()));
    for (uint32_t i = 0; i < ra.size(); ++i) {
      Str(ca.key[ra.begin + i], cb.key[rb.begin + i], what + " attr key");
      Eq(ca.type[ra.begin + i], cb.type[rb.begin + i], what + " attr type");
      Str(ca.value[ra.begin + i], cb.value[rb.begin + i], what + " attr value");
    }
  }
};

}  // namespace

bool SpanBatch::LogicallyEquals(const SpanBatch& o, std::string* why) const {
  Cmp c{*this, o, why};
  if (span_count() != o.span_count()) {
    c.Fail("span count " + std::to_string(span_count()) + " != " + std::to_string(o.span_count()));
    return false;
  }
  for (uint32_t i = 0; i < span_count() && c.ok; ++i) {
    const std::string at = "span " + std::to_string(i);
    const Spans& x = spans;
    const Spans& y = o.spans;
    c.Eq(x.trace_id[i], y.trace_id[i], at + " trace_id");
    c.Eq(x.span_id[i], y.span_id[i], at + " span_id");
    c.Eq(x.parent_span_id[i], y.parent_span_id[i], at + " parent_span_id");
    c.Str(x.trace_state[i], y.trace_state[i], at + " trace_state");
    c.Eq(x.flags[i], y.flags[i], at + " flags");
    c.Str(x.name[i], y.name[i], at + " name");
    c.Eq(x.kind[i], y.kind[i], at + " kind");
    c.Eq(x.start_ns[i], y.start_ns[i], at + " start");
    c.Eq(x.end_ns[i], y.end_ns[i], at + " end");
    c.Eq(x.status_code[i], y.status_code[i], at + " status code");
    c.Str(x.status_message[i], y.status_message[i], at + " status message");
    c.Attrs(span_attrs, x.attrs[i], o.span_attrs, y.attrs[i], at);
    c.Eq(x.dropped_attributes_count[i], y.dropped_attributes_count[i], at + " dropped attrs");
    c.Eq(x.dropped_events_count[i], y.dropped_events_count[i], at + " dropped events");
    c.Eq(x.dropped_links_count[i], y.dropped_links_count[i], at + " dropped links");
    c.Eq(x.metrics_only[i], y.metrics_only[i], at + " metrics only");
    uint32_t r = x.resource[i];
    uint32_t ro = y.resource[i];
    c.Attrs(resource_attrs, resources.attrs[r], o.resource_attrs, o.resources.attrs[ro],
            at + " resource");
    c.Eq(resources.dropped_attributes_count[r], o.resources.dropped_attributes_count[ro],
         at + " resource dropped");
    c.Str(resources.schema_url[r], o.resources.schema_url[ro], at + " resource schema_url");
    // A batch built without ResolveServiceName has "" where a decoded one
    // has Jaeger's name: both mean the service its attributes give.
    auto service = [](const SpanBatch& sb, uint32_t res) {
      std::string_view name = sb.Str(sb.resources.service_name[res]);
      return name.empty() ? JaegerServiceName(sb, res) : name;
    };
    if (service(*this, r) != service(o, ro)) {
      c.Fail(at + " service name: '" + std::string(service(*this, r)) + "' != '" +
             std::string(service(o, ro)) + "'");
    }
    uint32_t s = x.scope[i];
    uint32_t so = y.scope[i];
    c.Str(scopes.name[s], o.scopes.name[so], at + " scope name");
    c.Str(scopes.version[s], o.scopes.version[so], at + " scope version");
    c.Attrs(scope_attrs, scopes.attrs[s], o.scope_attrs, o.scopes.attrs[so], at + " scope");
    c.Eq(scopes.dropped_attributes_count[s], o.scopes.dropped_attributes_count[so],
         at + " scope dropped");
    c.Str(scopes.schema_url[s], o.scopes.schema_url[so], at + " scope schema_url");
    Range ex = x.events[i];
    Range ey = y.events[i];
    if (ex.size() != ey.size()) {
      c.Fail(at + " event count");
      break;
    }
    for (uint32_t k = 0; k < ex.size(); ++k) {
      uint32_t e1 = ex.begin + k;
      uint32_t e2 = ey.begin + k;
      const std::string ev = at + " event " + std::to_string(k);
      c.Eq(events.time_ns[e1], o.events.time_ns[e2], ev + " time");
      c.Str(events.name[e1], o.events.name[e2], ev + " name");
      c.Attrs(event_attrs, events.attrs[e1], o.event_attrs, o.events.attrs[e2], ev);
      c.Eq(events.dropped_attributes_count[e1], o.events.dropped_attributes_count[e2],
           ev + " dropped");
    }
    Range lx = x.links[i];
    Range ly = y.links[i];
    if (lx.size() != ly.size()) {
      c.Fail(at + " link count");
      break;
    }
    for (uint32_t k = 0; k < lx.size(); ++k) {
      uint32_t l1 = lx.begin + k;
      uint32_t l2 = ly.begin + k;
      const std::string lk = at + " link " + std::to_string(k);
      c.Eq(links.trace_id[l1], o.links.trace_id[l2], lk + " trace_id");
      c.Eq(links.span_id[l1], o.links.span_id[l2], lk + " span_id");
      c.Str(links.trace_state[l1], o.links.trace_state[l2], lk + " trace_state");
      c.Eq(links.flags[l1], o.links.flags[l2], lk + " flags");
      c.Attrs(link_attrs, links.attrs[l1], o.link_attrs, o.links.attrs[l2], lk);
      c.Eq(links.dropped_attributes_count[l1], o.links.dropped_attributes_count[l2],
           lk + " dropped");
    }
  }
  return c.ok;
}

std::string ToHex(const uint8_t* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[data[i] >> 4];
    s[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return s;
}

namespace {
// A digit's value, 0x10 for any other byte: ids are decoded on every span of
// every request (a table: no branch per digit).
constexpr std::array<uint8_t, 256> kHexValue = [] {
  std::array<uint8_t, 256> t{};
  for (auto& v : t) v = 0x10;
  for (int c = '0'; c <= '9'; ++c) t[c] = static_cast<uint8_t>(c - '0');
  for (int c = 'a'; c <= 'f'; ++c) t[c] = static_cast<uint8_t>(c - 'a' + 10);
  for (int c = 'A'; c <= 'F'; ++c) t[c] = static_cast<uint8_t>(c - 'A' + 10);
  return t;
}();
}  // namespace

bool FromHex(std::string_view hex, uint8_t* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  const auto* in = reinterpret_cast<const unsigned char*>(hex.data());
  uint8_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t hi = kHexValue[in[2 * i]];
    const uint8_t lo = kHexValue[in[2 * i + 1]];
    bad |= static_cast<uint8_t>(hi | lo);
    out[i] = static_cast<uint8_t>(hi << 4 | (lo & 0xf));
  }
  return (bad & 0x10) == 0;
}

namespace {
constexpr std::string_view kSpanKindNames[] = {"",       "internal", "server",
                                               "client", "producer", "consumer"};
}  // namespace

std::string_view SpanKindName(uint8_t kind) {
  return kind < std::size(kSpanKindNames) ? kSpanKindNames[kind] : std::string_view();
}

bool ParseSpanKind(std::string_view name, uint8_t* kind) {
  std::string lower(name);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  std::string_view s = lower;
  if (s.substr(0, 10) == "span_kind_") {
    s.remove_prefix(10);
    if (s.empty()) return false;
  }
  if (s == "unspecified") s = "";
  for (size_t k = 0; k < std::size(kSpanKindNames); ++k) {
    if (s == kSpanKindNames[k]) {
      *kind = static_cast<uint8_t>(k);
      return true;
    }
  }
  return false;
}

std::string_view JaegerRefType(const SpanBatch& b, uint32_t l) {
  const Range r = b.links.attrs[l];
  for (uint32_t i = r.begin; i < r.end && i < b.link_attrs.size(); ++i) {
    if (b.Str(b.link_attrs.key[i]) == "opentracing.ref_type") {
      return b.Str(b.link_attrs.value[i]) == "child_of" ? "CHILD_OF" : "FOLLOWS_FROM";
    }
  }
  return "FOLLOWS_FROM";
}

bool LinksToParent(const SpanBatch& b, uint32_t s, uint32_t l) {
  return !IsZero(b.spans.parent_span_id[s]) && b.links.trace_id[l] == b.spans.trace_id[s] &&
         b.links.span_id[l] == b.spans.parent_span_id[s];
}

}  // namespace spanhouse
