// SpanBatch's columnar bytes: the batch as it is in memory, written and read
// with copies and bounds checks, not parsed (span_batch.h: ToColumnar).
//
// Layout: [source][arena][columns][trailer]. The source comes first, so the
// strings that point into it keep their offsets when the whole record is
// taken as the source of the batch read back. Each column is a u32 row count
// and its rows' bytes. The trailer: u64 source bytes, u64 arena bytes,
// u32 version, the 4-byte magic "SHCB"; little-endian, as this machine.
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "model/span_batch.h"

namespace spanhouse {

namespace {

constexpr char kMagic[4] = {'S', 'H', 'C', 'B'};
constexpr uint32_t kVersion = 1;
constexpr size_t kTrailerBytes = 8 + 8 + 4 + 4;

// Calls `f` on every column of `b`, in the order they are written.
template <typename Batch, typename F>
void ForEachColumn(Batch& b, F&& f) {
  auto attrs = [&](auto& cols) {
    f(cols.key);
    f(cols.type);
    f(cols.value);
  };
  f(b.resources.attrs);
  f(b.resources.dropped_attributes_count);
  f(b.resources.schema_url);
  f(b.resources.service_name);
  attrs(b.resource_attrs);
  f(b.scopes.name);
  f(b.scopes.version);
  f(b.scopes.attrs);
  f(b.scopes.dropped_attributes_count);
  f(b.scopes.schema_url);
  attrs(b.scope_attrs);
  auto& s = b.spans;
  f(s.trace_id);
  f(s.span_id);
  f(s.parent_span_id);
  f(s.trace_state);
  f(s.flags);
  f(s.name);
  f(s.kind);
  f(s.start_ns);
  f(s.end_ns);
  f(s.status_code);
  f(s.status_message);
  f(s.resource);
  f(s.scope);
  f(s.attrs);
  f(s.dropped_attributes_count);
  f(s.events);
  f(s.dropped_events_count);
  f(s.links);
  f(s.dropped_links_count);
  f(s.metrics_only);
  attrs(b.span_attrs);
  f(b.events.time_ns);
  f(b.events.name);
  f(b.events.attrs);
  f(b.events.dropped_attributes_count);
  attrs(b.event_attrs);
  f(b.links.trace_id);
  f(b.links.span_id);
  f(b.links.trace_state);
  f(b.links.flags);
  f(b.links.attrs);
  f(b.links.dropped_attributes_count);
  attrs(b.link_attrs);
}

template <typename T>
void PutRaw(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

void SpanBatch::AppendColumnar(std::string* out) const {
  out->append(src_);
  out->append(arena_);
  ForEachColumn(*this, [&](const auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    static_assert(std::is_trivially_copyable_v<T>);
    PutRaw(*out, static_cast<uint32_t>(col.size()));
    if (!col.empty()) {
      out->append(reinterpret_cast<const char*>(col.data()), col.size() * sizeof(T));
    }
  });
  PutRaw(*out, static_cast<uint64_t>(src_.size()));
  PutRaw(*out, static_cast<uint64_t>(arena_.size()));
  PutRaw(*out, kVersion);
  out->append(kMagic, sizeof(kMagic));
}

bool SpanBatch::ReadColumnar(std::string& bytes, std::string* why) {
  auto fail = [&](const char* what) {
    if (why != nullptr) *why = std::string("columnar batch: ") + what;
    Clear();
    return false;
  };
  if (!empty() || !src_.empty()) return fail("read into a batch that is not empty");
  if (bytes.size() < kTrailerBytes ||
      std::memcmp(bytes.data() + bytes.size() - 4, kMagic, 4) != 0) {
    return fail("no trailer");
  }
  const char* t = bytes.data() + bytes.size() - kTrailerBytes;
  uint64_t src_bytes;
  uint64_t arena_bytes;
  uint32_t version;
  std::memcpy(&src_bytes, t, 8);
  std::memcpy(&arena_bytes, t + 8, 8);
  std::memcpy(&version, t + 16, 4);
  if (version != kVersion) return fail("unknown version");
  const size_t body = bytes.size() - kTrailerBytes;
  if (src_bytes > body || arena_bytes > body - src_bytes || src_bytes >= kSourceBit ||
      arena_bytes >= kSourceBit) {
    return fail("sections past the end");
  }
  size_t at = src_bytes + arena_bytes;
  bool ok = true;
  ForEachColumn(*this, [&](auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    uint32_t n = 0;
    if (!ok || body - at < 4) {
      ok = false;
      return;
    }
    std::memcpy(&n, bytes.data() + at, 4);
    at += 4;
    if ((body - at) / sizeof(T) < n) {
      ok = false;
      return;
    }
    col.resize(n);
    if (n != 0) std::memcpy(static_cast<void*>(col.data()), bytes.data() + at, n * sizeof(T));
    at += n * sizeof(T);
  });
  if (!ok || at != body) return fail("columns do not fill the record");
  arena_.assign(bytes, src_bytes, arena_bytes);
  // Every column of a group has one row per row of the group; every string,
  // range and index points inside what it names.
  auto same = [](size_t n, std::initializer_list<size_t> sizes) {
    for (size_t s : sizes)
      if (s != n) return false;
    return true;
  };
  auto attrs_ok = [&](const AttrColumns& c) {
    return same(c.key.size(), {c.type.size(), c.value.size()});
  };
  const Spans& s = spans;
  const size_t n = s.trace_id.size();
  if (!same(resources.attrs.size(), {resources.dropped_attributes_count.size(),
                                     resources.schema_url.size(), resources.service_name.size()}) ||
      !same(scopes.name.size(),
            {scopes.version.size(), scopes.attrs.size(), scopes.dropped_attributes_count.size(),
             scopes.schema_url.size()}) ||
      !same(n,
            {s.span_id.size(), s.parent_span_id.size(), s.trace_state.size(), s.flags.size(),
             s.name.size(), s.kind.size(), s.start_ns.size(), s.end_ns.size(), s.status_code.size(),
             s.status_message.size(), s.resource.size(), s.scope.size(), s.attrs.size(),
             s.dropped_attributes_count.size(), s.events.size(), s.dropped_events_count.size(),
             s.links.size(), s.dropped_links_count.size(), s.metrics_only.size()}) ||
      !same(events.time_ns.size(),
            {events.name.size(), events.attrs.size(), events.dropped_attributes_count.size()}) ||
      !same(links.trace_id.size(),
            {links.span_id.size(), links.trace_state.size(), links.flags.size(), links.attrs.size(),
             links.dropped_attributes_count.size()}) ||
      !attrs_ok(resource_attrs) || !attrs_ok(scope_attrs) || !attrs_ok(span_attrs) ||
      !attrs_ok(event_attrs) || !attrs_ok(link_attrs)) {
    return fail("columns of one group differ in rows");
  }
  bool valid = true;
  auto str = [&](const std::vector<StrRef>& refs) {
    for (const StrRef& r : refs) {
      const bool in_src = (r.off & kSourceBit) != 0;
      const uint64_t off = r.off & ~kSourceBit;
      if (off + r.len > (in_src ? src_bytes : arena_bytes)) valid = false;
    }
  };
  auto ranges = [&](const std::vector<Range>& rs, size_t rows) {
    for (const Range& r : rs) {
      if (r.begin > r.end || r.end > rows) valid = false;
    }
  };
  auto attr_strs = [&](const AttrColumns& c) {
    str(c.key);
    str(c.value);
    for (ValueType v : c.type) {
      if (static_cast<uint8_t>(v) > static_cast<uint8_t>(ValueType::kKvList)) valid = false;
    }
  };
  str(resources.schema_url);
  str(resources.service_name);
  str(scopes.name);
  str(scopes.version);
  str(scopes.schema_url);
  str(s.trace_state);
  str(s.name);
  str(s.status_message);
  str(events.name);
  str(links.trace_state);
  attr_strs(resource_attrs);
  attr_strs(scope_attrs);
  attr_strs(span_attrs);
  attr_strs(event_attrs);
  attr_strs(link_attrs);
  ranges(resources.attrs, resource_attrs.size());
  ranges(scopes.attrs, scope_attrs.size());
  ranges(s.attrs, span_attrs.size());
  ranges(s.events, events.time_ns.size());
  ranges(s.links, links.trace_id.size());
  ranges(events.attrs, event_attrs.size());
  ranges(links.attrs, link_attrs.size());
  for (size_t i = 0; i < n && valid; ++i) {
    valid = s.resource[i] < resources.attrs.size() && s.scope[i] < scopes.name.size();
  }
  if (!valid) return fail("a string, range or index points outside the batch");
  if (src_bytes != 0) {
    // The whole record becomes the source: the strings in it keep their offsets.
    std::string taken = std::move(bytes);
    bytes.clear();
    AdoptSource(taken);
  }
  return true;
}

}  // namespace spanhouse
