// OTLP/protobuf trace decoder and response encoder, written against the wire
// format by hand.
//
// Why not libprotobuf: this is the ingest hot path. Building a message tree
// per request costs a heap object per span, attribute and event, only to copy
// everything once more into the columnar SpanBatch. Here each message is
// walked once, straight from the request bytes into the batch's columns, and
// the only allocations are the (amortised) growth of those vectors and of the
// batch's string arena.
//
// Safety: every read is bounds-checked against the enclosing message, so any
// input — truncated, hostile or fuzzed — ends in an error Status, never in an
// out-of-bounds read. Recursion happens only for nested AnyValues and is
// capped at kMaxValueDepth.
//
// Semantics follow protobuf where that is cheap: fields in any order, unknown
// fields skipped, the last occurrence of a scalar wins, a repeated occurrence
// of a singular message (resource, scope, status) merges into the first.
// Deliberately stricter than protobuf: a known field sent with the wrong wire
// type is an error rather than an unknown field, because it only ever comes
// from a broken client and silently dropping e.g. a span's trace_id would turn
// into a more confusing error further on.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "codec/arena_room.h"
#include "codec/otlp.h"
#include "codec/proto_wire.h"
#include "codec/value_text.h"

namespace spanhouse::codec {
namespace {

using wire::Field;
using wire::kFixed32;
using wire::kFixed64;
using wire::kLen;
using wire::kVarint;
using wire::Step;

// Deepest AnyValue accepted: an attribute's own value is level 1, each
// array / kvlist element one level more. Bounds the recursion of the renderer.
constexpr int kMaxValueDepth = 16;

// Longest attribute key quoted in an error message.
constexpr size_t kMaxKeyInError = 64;

// AnyValue's oneof members, indexed by field number.
struct AnyMember {
  uint32_t wire;
  const char* name;
};
constexpr AnyMember kAnyMembers[8] = {
    {0, nullptr},           {kLen, "string_value"},     {kVarint, "bool_value"},
    {kVarint, "int_value"}, {kFixed64, "double_value"}, {kLen, "array_value"},
    {kLen, "kvlist_value"}, {kLen, "bytes_value"},
};

// Where an attribute list belongs, for error messages only.
struct Owner {
  const char* what;  // "resource", "scope", "span"
  uint32_t index;
  const char* child = nullptr;  // "event", "link" or null
  uint32_t child_index = 0;
};

std::string OwnerText(const Owner& o) {
  std::string s = o.what;
  s += ' ';
  s += std::to_string(o.index);
  if (o.child != nullptr) {
    s += ' ';
    s += o.child;
    s += ' ';
    s += std::to_string(o.child_index);
  }
  return s;
}

// Value text (numbers, and the JSON of arrays and kvlists) is rendered here
// and then copied into the arena in one piece, because the value_text.h
// helpers write to a std::string and the arena is not one we can hand out.
// thread_local so its capacity is reused across values and requests instead
// of allocated per value.
std::string& Scratch() {
  thread_local std::string scratch;
  return scratch;
}

class Decoder : public wire::Reader {
 public:
  Decoder(std::string_view body, SpanBatch& out)
      : Reader(body), out_(out), first_span_(static_cast<uint32_t>(out.span_count())) {}

  Status Run(std::string_view in) {
    Field f;
    for (;;) {
      Step st = Next(in, "ExportTraceServiceRequest", f);
      if (st == Step::kEnd) return Status::Ok();
      if (st == Step::kError) return TakeError();
      if (f.number == 1) {
        if (!Expect(f, kLen, "ExportTraceServiceRequest", "resource_spans") ||
            !ResourceSpans(f.bytes)) {
          return TakeError();
        }
      }
    }
  }

 private:
  // ---- messages ----

  bool ResourceSpans(std::string_view in) {
    // Added up front so the spans get this index whatever the field order.
    const uint32_t r = out_.AddResource();
    Field f;
    for (;;) {
      Step st = Next(in, "ResourceSpans", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) break;
      switch (f.number) {
        case 1:
          if (!Expect(f, kLen, "ResourceSpans", "resource") || !Resource(f.bytes, r)) return false;
          break;
        case 2:
          if (!Expect(f, kLen, "ResourceSpans", "scope_spans") || !ScopeSpans(f.bytes, r, false)) {
            return false;
          }
          break;
        case 1000:  // deprecated instrumentation_library_spans: same layout as scope_spans
          if (!Expect(f, kLen, "ResourceSpans", "instrumentation_library_spans") ||
              !ScopeSpans(f.bytes, r, true)) {
            return false;
          }
          break;
        case 3:
          if (!Expect(f, kLen, "ResourceSpans", "schema_url")) return false;
          out_.resources.schema_url[r] = out_.RefString(f.bytes);
          break;
        default:
          break;
      }
    }
    out_.ResolveServiceName(r);
    return true;
  }

  bool Resource(std::string_view in, uint32_t r) {
    Field f;
    for (;;) {
      Step st = Next(in, "Resource", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) return true;
      switch (f.number) {
        case 1:
          if (!Expect(f, kLen, "Resource", "attributes") ||
              !KeyValue(f.bytes, out_.resource_attrs, Owner{"resource", r - first_resource_})) {
            return false;
          }
          out_.resources.attrs[r].end = static_cast<uint32_t>(out_.resource_attrs.size());
          break;
        case 2:
          if (!Expect(f, kVarint, "Resource", "dropped_attributes_count")) return false;
          out_.resources.dropped_attributes_count[r] = static_cast<uint32_t>(f.num);
          break;
        default:
          break;
      }
    }
  }

  bool ScopeSpans(std::string_view in, uint32_t r, bool legacy) {
    const char* msg = legacy ? "InstrumentationLibrarySpans" : "ScopeSpans";
    const uint32_t s = out_.AddScope();
    Field f;
    for (;;) {
      Step st = Next(in, msg, f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) return true;
      switch (f.number) {
        case 1:
          if (!Expect(f, kLen, msg, legacy ? "instrumentation_library" : "scope") ||
              !Scope(f.bytes, s, legacy)) {
            return false;
          }
          break;
        case 2:
          if (!Expect(f, kLen, msg, "spans") || !Span(f.bytes, r, s)) return false;
          break;
        case 3:
          if (!Expect(f, kLen, msg, "schema_url")) return false;
          out_.scopes.schema_url[s] = out_.RefString(f.bytes);
          break;
        default:
          break;
      }
    }
  }

  // InstrumentationScope, or the deprecated InstrumentationLibrary, whose
  // name = 1 and version = 2 are the same fields.
  bool Scope(std::string_view in, uint32_t s, bool legacy) {
    const char* msg = legacy ? "InstrumentationLibrary" : "InstrumentationScope";
    Field f;
    for (;;) {
      Step st = Next(in, msg, f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) return true;
      switch (f.number) {
        case 1:
          if (!Expect(f, kLen, msg, "name")) return false;
          out_.scopes.name[s] = out_.RefString(f.bytes);
          break;
        case 2:
          if (!Expect(f, kLen, msg, "version")) return false;
          out_.scopes.version[s] = out_.RefString(f.bytes);
          break;
        case 3:
          if (legacy) break;
          if (!Expect(f, kLen, msg, "attributes") ||
              !KeyValue(f.bytes, out_.scope_attrs, Owner{"scope", s - first_scope_})) {
            return false;
          }
          out_.scopes.attrs[s].end = static_cast<uint32_t>(out_.scope_attrs.size());
          break;
        case 4:
          if (legacy) break;
          if (!Expect(f, kVarint, msg, "dropped_attributes_count")) return false;
          out_.scopes.dropped_attributes_count[s] = static_cast<uint32_t>(f.num);
          break;
        default:
          break;
      }
    }
  }

  bool Span(std::string_view in, uint32_t r, uint32_t s) {
    const uint32_t i = out_.AddSpan(r, s);
    const uint32_t n = i - first_span_;  // number within this request, for messages
    SpanBatch::Spans& sp = out_.spans;
    bool have_trace_id = false;
    bool have_span_id = false;
    Field f;
    for (;;) {
      Step st = Next(in, "Span", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) break;
      switch (f.number) {
        case 1:
          if (!Expect(f, kLen, "Span", "trace_id") ||
              !CopyId(f.bytes, sp.trace_id[i], "trace_id", n)) {
            return false;
          }
          have_trace_id = true;
          break;
        case 2:
          if (!Expect(f, kLen, "Span", "span_id") ||
              !CopyId(f.bytes, sp.span_id[i], "span_id", n)) {
            return false;
          }
          have_span_id = true;
          break;
        case 3:
          if (!Expect(f, kLen, "Span", "trace_state")) return false;
          sp.trace_state[i] = out_.RefString(f.bytes);
          break;
        case 4:
          if (!Expect(f, kLen, "Span", "parent_span_id")) return false;
          if (f.bytes.empty()) {
            sp.parent_span_id[i] = SpanId{};  // explicitly empty: a root span
          } else if (f.bytes.size() == 8) {
            std::memcpy(sp.parent_span_id[i].data(), f.bytes.data(), 8);
          } else {
            return Fail(SpanPrefix(n) + ": parent_span_id must be empty or 8 bytes, got " +
                        std::to_string(f.bytes.size()));
          }
          break;
        case 5:
          if (!Expect(f, kLen, "Span", "name")) return false;
          sp.name[i] = out_.RefString(f.bytes);
          break;
        case 6:
          if (!Expect(f, kVarint, "Span", "kind")) return false;
          // Enums are int32: protobuf keeps the low 32 bits of the varint, and a
          // negative value arrives sign-extended.
          if (const auto kind = static_cast<int32_t>(f.num);
              kind < 0 || kind > static_cast<int32_t>(SpanKind::kConsumer)) {
            return Fail(SpanPrefix(n) + ": kind " + std::to_string(kind) +
                        " is not a valid SpanKind (0-5)");
          }
          sp.kind[i] = static_cast<uint8_t>(f.num);
          break;
        case 7:
          if (!Expect(f, kFixed64, "Span", "start_time_unix_nano")) return false;
          sp.start_ns[i] = f.num;
          break;
        case 8:
          if (!Expect(f, kFixed64, "Span", "end_time_unix_nano")) return false;
          sp.end_ns[i] = f.num;
          break;
        case 9:
          if (!Expect(f, kLen, "Span", "attributes") ||
              !KeyValue(f.bytes, out_.span_attrs, Owner{"span", n})) {
            return false;
          }
          sp.attrs[i].end = static_cast<uint32_t>(out_.span_attrs.size());
          break;
        case 10:
          if (!Expect(f, kVarint, "Span", "dropped_attributes_count")) return false;
          sp.dropped_attributes_count[i] = static_cast<uint32_t>(f.num);
          break;
        case 11:
          if (!Expect(f, kLen, "Span", "events") || !Event(f.bytes, n, sp.events[i].size())) {
            return false;
          }
          sp.events[i].end = static_cast<uint32_t>(out_.events.time_ns.size());
          break;
        case 12:
          if (!Expect(f, kVarint, "Span", "dropped_events_count")) return false;
          sp.dropped_events_count[i] = static_cast<uint32_t>(f.num);
          break;
        case 13:
          if (!Expect(f, kLen, "Span", "links") || !Link(f.bytes, n, sp.links[i].size())) {
            return false;
          }
          sp.links[i].end = static_cast<uint32_t>(out_.links.trace_id.size());
          break;
        case 14:
          if (!Expect(f, kVarint, "Span", "dropped_links_count")) return false;
          sp.dropped_links_count[i] = static_cast<uint32_t>(f.num);
          break;
        case 15:
          if (!Expect(f, kLen, "Span", "status") || !SpanStatus(f.bytes, i, n)) return false;
          break;
        case 16:
          if (!Expect(f, kFixed32, "Span", "flags")) return false;
          sp.flags[i] = static_cast<uint32_t>(f.num);
          break;
        default:
          break;
      }
    }
    // proto3 leaves empty bytes off the wire, so "missing" and "empty" are
    // the same thing here; either way the span cannot be stored or joined.
    if (!have_trace_id) return Fail(SpanPrefix(n) + ": missing trace_id");
    if (!have_span_id) return Fail(SpanPrefix(n) + ": missing span_id");
    return true;
  }

  bool SpanStatus(std::string_view in, uint32_t i, uint32_t n) {
    Field f;
    for (;;) {
      Step st = Next(in, "Status", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) return true;
      switch (f.number) {
        case 2:
          if (!Expect(f, kLen, "Status", "message")) return false;
          out_.spans.status_message[i] = out_.RefString(f.bytes);
          break;
        case 3:
          if (!Expect(f, kVarint, "Status", "code")) return false;
          if (const auto code = static_cast<int32_t>(f.num);
              code < 0 || code > static_cast<int32_t>(StatusCodeOtlp::kError)) {
            return Fail(SpanPrefix(n) + ": status code " + std::to_string(code) +
                        " is not a valid StatusCode (0-2)");
          }
          out_.spans.status_code[i] = static_cast<uint8_t>(f.num);
          break;
        default:  // 1 is the deprecated code, ignored like any unknown field
          break;
      }
    }
  }

  bool Event(std::string_view in, uint32_t n, uint32_t k) {
    const uint32_t e = out_.AddEvent();
    SpanBatch::Events& ev = out_.events;
    Field f;
    for (;;) {
      Step st = Next(in, "Span.Event", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) return true;
      switch (f.number) {
        case 1:
          if (!Expect(f, kFixed64, "Span.Event", "time_unix_nano")) return false;
          ev.time_ns[e] = f.num;
          break;
        case 2:
          if (!Expect(f, kLen, "Span.Event", "name")) return false;
          ev.name[e] = out_.RefString(f.bytes);
          break;
        case 3:
          if (!Expect(f, kLen, "Span.Event", "attributes") ||
              !KeyValue(f.bytes, out_.event_attrs, Owner{"span", n, "event", k})) {
            return false;
          }
          ev.attrs[e].end = static_cast<uint32_t>(out_.event_attrs.size());
          break;
        case 4:
          if (!Expect(f, kVarint, "Span.Event", "dropped_attributes_count")) return false;
          ev.dropped_attributes_count[e] = static_cast<uint32_t>(f.num);
          break;
        default:
          break;
      }
    }
  }

  bool Link(std::string_view in, uint32_t n, uint32_t k) {
    const uint32_t l = out_.AddLink();
    SpanBatch::Links& ln = out_.links;
    bool have_trace_id = false;
    bool have_span_id = false;
    Field f;
    for (;;) {
      Step st = Next(in, "Span.Link", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) break;
      switch (f.number) {
        case 1:
          if (!Expect(f, kLen, "Span.Link", "trace_id") ||
              !CopyId(f.bytes, ln.trace_id[l], "trace_id", n, k)) {
            return false;
          }
          have_trace_id = true;
          break;
        case 2:
          if (!Expect(f, kLen, "Span.Link", "span_id") ||
              !CopyId(f.bytes, ln.span_id[l], "span_id", n, k)) {
            return false;
          }
          have_span_id = true;
          break;
        case 3:
          if (!Expect(f, kLen, "Span.Link", "trace_state")) return false;
          ln.trace_state[l] = out_.RefString(f.bytes);
          break;
        case 4:
          if (!Expect(f, kLen, "Span.Link", "attributes") ||
              !KeyValue(f.bytes, out_.link_attrs, Owner{"span", n, "link", k})) {
            return false;
          }
          ln.attrs[l].end = static_cast<uint32_t>(out_.link_attrs.size());
          break;
        case 5:
          if (!Expect(f, kVarint, "Span.Link", "dropped_attributes_count")) return false;
          ln.dropped_attributes_count[l] = static_cast<uint32_t>(f.num);
          break;
        case 6:
          if (!Expect(f, kFixed32, "Span.Link", "flags")) return false;
          ln.flags[l] = static_cast<uint32_t>(f.num);
          break;
        default:
          break;
      }
    }
    // A link names another span; without both ids it points nowhere.
    if (!have_trace_id) return Fail(LinkPrefix(n, k) + ": missing trace_id");
    if (!have_span_id) return Fail(LinkPrefix(n, k) + ": missing span_id");
    return true;
  }

  // ---- attributes ----

  // Finds the key and the (last) value of a KeyValue. Key first, whatever the
  // field order, so the key can be named in errors about the value.
  bool ScanKeyValue(std::string_view in, std::string_view& key, std::string_view& value,
                    bool& has_value) {
    key = {};
    value = {};
    has_value = false;
    Field f;
    for (;;) {
      Step st = Next(in, "KeyValue", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) return true;
      if (f.number == 1) {
        if (!Expect(f, kLen, "KeyValue", "key")) return false;
        key = f.bytes;
      } else if (f.number == 2) {
        if (!Expect(f, kLen, "KeyValue", "value")) return false;
        value = f.bytes;
        has_value = true;
      }
    }
  }

  // Finds which member of an AnyValue's oneof is set: the last one on the
  // wire, as protobuf does. `set` stays false for an AnyValue with none.
  bool ScanAnyValue(std::string_view in, Field& value, bool& set) {
    set = false;
    Field f;
    for (;;) {
      Step st = Next(in, "AnyValue", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) return true;
      if (f.number < 1 || f.number > 7) continue;  // not in the oneof: unknown
      const AnyMember& m = kAnyMembers[f.number];
      if (!Expect(f, m.wire, "AnyValue", m.name)) return false;
      value = f;
      set = true;
    }
  }

  // A varint of at most two bytes (a length below 16 KiB) at `p`.
  static bool ShortVarint(const uint8_t* u, size_t n, size_t& p, size_t& v) {
    if (p >= n) return false;
    if (u[p] < 0x80) {
      v = u[p++];
      return true;
    }
    if (p + 1 >= n || u[p + 1] >= 0x80) return false;
    v = (u[p] & 0x7fu) | (static_cast<size_t>(u[p + 1]) << 7);
    p += 2;
    return true;
  }

  // The layout every SDK writes for an attribute: the key, then a value
  // holding one string, int, bool or double. Read here without the general
  // field loop (most of a span's bytes are attributes); false, having added
  // nothing, for anything else (other field order, repeated or unknown
  // fields, arrays, kvlists, bytes, malformed input), which the general path
  // then reads, to the same result for the layouts taken here.
  bool FastKeyValue(std::string_view in, AttrColumns& cols) {
    const auto* u = reinterpret_cast<const uint8_t*>(in.data());
    const size_t n = in.size();
    if (n < 4 || u[0] != 0x0a) return false;  // key = 1, length-delimited
    size_t p = 1;
    size_t klen;
    if (!ShortVarint(u, n, p, klen) || klen >= n - p) return false;
    const std::string_view key = in.substr(p, klen);
    p += klen;
    if (u[p] != 0x12) return false;  // value = 2, length-delimited
    ++p;
    size_t vlen;
    if (!ShortVarint(u, n, p, vlen) || vlen != n - p || vlen < 2) return false;
    const uint8_t tag = u[p++];
    ValueType type;
    StrRef value;
    switch (tag) {
      case 0x0a: {  // string_value = 1
        size_t slen;
        if (!ShortVarint(u, n, p, slen) || slen != n - p) return false;
        type = ValueType::kString;
        value = out_.RefString(in.substr(p, slen));
        break;
      }
      case 0x18: {  // int_value = 3, varint
        uint64_t v = 0;
        size_t i = 0;
        for (;; ++i) {
          if (p + i >= n || i == 10) return false;
          v |= static_cast<uint64_t>(u[p + i] & 0x7f) << (7 * i);
          if (u[p + i] < 0x80) break;
        }
        if (p + i + 1 != n) return false;
        std::string& text = Scratch();
        text.clear();
        AppendInt(text, static_cast<int64_t>(v));
        type = ValueType::kInt;
        value = out_.AddString(text);
        break;
      }
      case 0x10:  // bool_value = 2, one-byte varint
        if (p + 1 != n || u[p] >= 0x80) return false;
        type = ValueType::kBool;
        value = out_.AddString(u[p] != 0 ? "true" : "false");
        break;
      case 0x21: {  // double_value = 4, fixed64
        if (n - p != 8) return false;
        uint64_t bits = 0;
        for (size_t i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(u[p + i]) << (8 * i);
        std::string& text = Scratch();
        text.clear();
        AppendDouble(text, std::bit_cast<double>(bits));
        type = ValueType::kDouble;
        value = out_.AddString(text);
        break;
      }
      default:
        return false;
    }
    SpanBatch::AddAttr(cols, out_.RefString(key), type, value);
    return true;
  }

  // Appends one KeyValue to `cols`, its value as text per value_text.h.
  bool KeyValue(std::string_view in, AttrColumns& cols, const Owner& owner) {
    if (FastKeyValue(in, cols)) return true;
    std::string_view key, value_bytes;
    bool has_value;
    if (!ScanKeyValue(in, key, value_bytes, has_value)) return false;
    Field v;
    bool set = false;
    if (has_value && !ScanAnyValue(value_bytes, v, set)) return false;
    const StrRef key_ref = out_.RefString(key);
    if (!set) {
      SpanBatch::AddAttr(cols, key_ref, ValueType::kEmpty, StrRef{});
      return true;
    }
    ValueType type;
    StrRef value_ref;
    switch (v.number) {
      case 1:
        type = ValueType::kString;
        value_ref = out_.RefString(v.bytes);
        break;
      case 2:
        type = ValueType::kBool;
        value_ref = out_.AddString(v.num != 0 ? "true" : "false");
        break;
      case 3: {
        type = ValueType::kInt;
        std::string& text = Scratch();
        text.clear();
        AppendInt(text, static_cast<int64_t>(v.num));
        value_ref = out_.AddString(text);
        break;
      }
      case 4: {
        type = ValueType::kDouble;
        std::string& text = Scratch();
        text.clear();
        AppendDouble(text, std::bit_cast<double>(v.num));
        value_ref = out_.AddString(text);
        break;
      }
      case 5:
      case 6: {
        type = v.number == 5 ? ValueType::kArray : ValueType::kKvList;
        std::string& text = Scratch();
        text.clear();
        const bool ok = v.number == 5 ? JsonArray(v.bytes, text, 2, owner, key)
                                      : JsonKvList(v.bytes, text, 2, owner, key);
        if (!ok) return false;
        value_ref = out_.AddString(text);
        break;
      }
      default:  // 7
        type = ValueType::kBytes;
        value_ref = out_.RefString(v.bytes);
        break;
    }
    SpanBatch::AddAttr(cols, key_ref, type, value_ref);
    return true;
  }

  // JSON text of an ArrayValue / KeyValueList whose element AnyValues sit at
  // nesting level `depth`. Recursion is bounded by the check in JsonValue.
  bool JsonArray(std::string_view in, std::string& out, int depth, const Owner& owner,
                 std::string_view key) {
    out += '[';
    bool first = true;
    Field f;
    for (;;) {
      Step st = Next(in, "ArrayValue", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) break;
      if (f.number != 1) continue;
      if (!Expect(f, kLen, "ArrayValue", "values")) return false;
      if (!first) out += ',';
      first = false;
      if (!JsonValue(f.bytes, out, depth, owner, key)) return false;
    }
    out += ']';
    return true;
  }

  bool JsonKvList(std::string_view in, std::string& out, int depth, const Owner& owner,
                  std::string_view key) {
    out += '{';
    bool first = true;
    Field f;
    for (;;) {
      Step st = Next(in, "KeyValueList", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) break;
      if (f.number != 1) continue;
      if (!Expect(f, kLen, "KeyValueList", "values")) return false;
      std::string_view k, value;
      bool has_value;
      if (!ScanKeyValue(f.bytes, k, value, has_value)) return false;
      if (!first) out += ',';
      first = false;
      AppendJsonString(out, k);
      out += ':';
      if (!has_value) {
        out += "null";
      } else if (!JsonValue(value, out, depth, owner, key)) {
        return false;
      }
    }
    out += '}';
    return true;
  }

  bool JsonValue(std::string_view in, std::string& out, int depth, const Owner& owner,
                 std::string_view key) {
    if (depth > kMaxValueDepth) return TooDeep(owner, key);
    Field v;
    bool set;
    if (!ScanAnyValue(in, v, set)) return false;
    if (!set) {
      out += "null";
      return true;
    }
    switch (v.number) {
      case 1:
        AppendJsonString(out, v.bytes);
        return true;
      case 2:
        out += v.num != 0 ? "true" : "false";
        return true;
      case 3:
        AppendInt(out, static_cast<int64_t>(v.num));
        return true;
      case 4:
        AppendJsonDouble(out, std::bit_cast<double>(v.num));
        return true;
      case 5:
        return JsonArray(v.bytes, out, depth + 1, owner, key);
      case 6:
        return JsonKvList(v.bytes, out, depth + 1, owner, key);
      default:  // 7
        out += '"';
        AppendBase64(out, v.bytes);
        out += '"';
        return true;
    }
  }

  bool TooDeep(const Owner& owner, std::string_view key) {
    std::string k(key.substr(0, kMaxKeyInError));
    return Fail(OwnerText(owner) + " attribute '" + k + "': value nested deeper than " +
                std::to_string(kMaxValueDepth) + " levels");
  }

  // ---- small helpers ----

  // Copies an id of span `n` (or of its link `link`), checking the length.
  // The location is formatted only on failure: this runs for every span.
  template <size_t N>
  bool CopyId(std::string_view bytes, std::array<uint8_t, N>& id, const char* name, uint32_t n,
              int64_t link = -1) {
    if (bytes.size() != N) {
      const std::string where =
          link < 0 ? SpanPrefix(n) : LinkPrefix(n, static_cast<uint32_t>(link));
      return Fail(where + ": " + name + " must be " + std::to_string(N) + " bytes, got " +
                  std::to_string(bytes.size()));
    }
    std::memcpy(id.data(), bytes.data(), N);
    return true;
  }

  static std::string SpanPrefix(uint32_t n) { return "span " + std::to_string(n); }
  static std::string LinkPrefix(uint32_t n, uint32_t k) {
    return "span " + std::to_string(n) + " link " + std::to_string(k);
  }

  SpanBatch& out_;
  const uint32_t first_span_;
  const uint32_t first_resource_ = static_cast<uint32_t>(out_.resources.attrs.size());
  const uint32_t first_scope_ = static_cast<uint32_t>(out_.scopes.name.size());
};

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

}  // namespace

Status DecodeOtlpProto(std::string_view body, SpanBatch& out) {
  // StrRef offsets into the arena are 31-bit. Rendered attribute text is at
  // most ~6x the bytes it came from (\u00XX escapes), so refuse a body that
  // could push the arena past 2 GiB rather than hand out wrapped offsets.
  if (Status st = CheckArenaRoom(body.size(), out, SpanBatch::kSourceBit - 1, 8); !st.ok()) {
    return st;
  }
  return Decoder(body, out).Run(body);
}

Status DecodeOtlpProtoOwned(std::string body, SpanBatch& out) {
  // Requests from one client look alike, so this thread's last request says
  // how many spans, attributes, events and links a byte of body brings:
  // reserve that much (and a little more) up front instead of growing every
  // column by doubling while decoding.
  struct Rates {
    double spans = 0, span_attrs = 0, events = 0, event_attrs = 0, links = 0, link_attrs = 0;
  };
  thread_local Rates rates;
  const auto bytes = static_cast<double>(body.size());
  if (out.span_count() == 0 && rates.spans > 0) {
    auto n = [&](double rate) { return static_cast<size_t>(rate * bytes * 1.1) + 4; };
    out.Reserve({n(rates.spans), n(rates.span_attrs), n(rates.events), n(rates.event_attrs),
                 n(rates.links), n(rates.link_attrs)});
  }
  const SpanBatch::Shape before = out.shape();
  Status st;
  if (out.source().empty() && !body.empty() && out.AdoptSource(body)) {
    st = DecodeOtlpProto(out.source(), out);
  } else {
    st = DecodeOtlpProto(body, out);
  }
  if (st.ok() && bytes > 0) {
    const SpanBatch::Shape after = out.shape();
    auto rate = [&](size_t a, size_t b) { return static_cast<double>(a - b) / bytes; };
    rates = {rate(after.spans, before.spans),   rate(after.span_attrs, before.span_attrs),
             rate(after.events, before.events), rate(after.event_attrs, before.event_attrs),
             rate(after.links, before.links),   rate(after.link_attrs, before.link_attrs)};
  }
  return st;
}

std::string EncodeExportResponseProto(int64_t rejected_spans, std::string_view error_message) {
  if (rejected_spans == 0 && error_message.empty()) return {};
  // ExportTracePartialSuccess { int64 rejected_spans = 1; string error_message = 2; }
  std::string inner;
  if (rejected_spans != 0) {
    inner += '\x08';
    PutVarint(inner, static_cast<uint64_t>(rejected_spans));
  }
  if (!error_message.empty()) {
    inner += '\x12';
    PutVarint(inner, error_message.size());
    inner.append(error_message);
  }
  // ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
  std::string out;
  out += '\x0a';
  PutVarint(out, inner.size());
  out += inner;
  return out;
}

}  // namespace spanhouse::codec
