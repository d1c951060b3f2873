// OTLP/protobuf encoder (see otlp_encode.h). Field numbers as in otlp_proto.cc's decoder.
//
// Nested messages are written in one pass: a message's length is not known until its
// content is written, so Open() leaves one byte for it and Close() widens that to the
// varint's real size, moving the content up (and the offsets recorded inside it). Content
// under 128 bytes, the common case for attributes, moves nothing.
#include <simdjson.h>

#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

#include "codec/otlp_encode.h"

namespace spanhouse::codec {
namespace {

constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLen = 2;
constexpr uint32_t kFixed32 = 5;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

class Writer {
 public:
  Writer(std::string* out, IdOffsets* offsets) : out_(*out), offs_(offsets) {}

  // A pending message: where its content starts and how many offsets had been
  // recorded when it was opened.
  struct Mark {
    size_t content = 0;
    size_t trace_ids = 0;
    size_t span_ids = 0;
    size_t times = 0;
  };

  void Tag(uint32_t field, uint32_t wire) { Varint(static_cast<uint64_t>(field) << 3 | wire); }

  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }

  void VarintField(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    Varint(v);
  }

  // Returns the offset of the 8 value bytes.
  size_t Fixed64Field(uint32_t field, uint64_t v) {
    Tag(field, kFixed64);
    const size_t at = out_.size();
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
    out_.append(b, 8);
    return at;
  }

  void Fixed32Field(uint32_t field, uint32_t v) {
    Tag(field, kFixed32);
    char b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
    out_.append(b, 4);
  }

  // Returns the offset of the value bytes.
  size_t BytesField(uint32_t field, std::string_view v) {
    Tag(field, kLen);
    Varint(v.size());
    const size_t at = out_.size();
    out_.append(v);
    return at;
  }

  void StringIfSet(uint32_t field, std::string_view v) {
    if (!v.empty()) BytesField(field, v);
  }

  Mark Open(uint32_t field) {
    Tag(field, kLen);
    out_ += '\0';
    Mark m;
    m.content = out_.size();
    if (offs_ != nullptr) {
      m.trace_ids = offs_->trace_ids.size();
      m.span_ids = offs_->span_ids.size();
      m.times = offs_->times.size();
    }
    return m;
  }

  void Close(const Mark& m) {
    const size_t len = out_.size() - m.content;
    const size_t n = VarintSize(len);
    if (n > 1) {
      out_.insert(m.content, n - 1, '\0');
      if (offs_ != nullptr) {
        const auto shift = static_cast<uint32_t>(n - 1);
        Shift(offs_->trace_ids, m.trace_ids, shift);
        Shift(offs_->span_ids, m.span_ids, shift);
        Shift(offs_->times, m.times, shift);
      }
    }
    uint64_t v = len;
    size_t p = m.content - 1;
    while (v >= 0x80) {
      out_[p++] = static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_[p] = static_cast<char>(v);
  }

  void RecordTraceId(size_t at) {
    if (offs_ != nullptr) offs_->trace_ids.push_back(static_cast<uint32_t>(at));
  }
  void RecordSpanId(size_t at) {
    if (offs_ != nullptr) offs_->span_ids.push_back(static_cast<uint32_t>(at));
  }
  void RecordTime(size_t at) {
    if (offs_ != nullptr) offs_->times.push_back(static_cast<uint32_t>(at));
  }

 private:
  static void Shift(std::vector<uint32_t>& v, size_t from, uint32_t by) {
    for (size_t i = from; i < v.size(); ++i) v[i] += by;
  }

  std::string& out_;
  IdOffsets* offs_;
};

// Copies JSON text to `out`, turning every integer token outside int64's range into a
// double token (".0" appended). Such tokens come from integral doubles, which to_chars
// writes without an exponent when that is shorter, and the DOM parser refuses them.
void WidenBigIntegers(std::string_view text, std::string& out) {
  out.clear();
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {  // copy a string literal whole, escapes included
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      j = j < text.size() ? j + 1 : text.size();
      out.append(text.substr(i, j - i));
      i = j;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i + 1;
      bool integral = true;
      while (j < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.' ||
              text[j] == 'e' || text[j] == 'E' || text[j] == '+' || text[j] == '-')) {
        if (!std::isdigit(static_cast<unsigned char>(text[j]))) integral = false;
        ++j;
      }
      const std::string_view token = text.substr(i, j - i);
      out.append(token);
      int64_t v;
      if (integral && std::from_chars(token.data(), token.data() + token.size(), v).ec ==
                          std::errc::result_out_of_range) {
        out += ".0";
      }
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
}

// Parses JSON text with one parser and one padded copy buffer per thread, both reused
// across values, so a value costs no allocation once they have grown.
simdjson::error_code ParseJson(std::string_view text, simdjson::dom::element* root) {
  thread_local simdjson::dom::parser parser;
  thread_local std::string padded;
  padded.assign(text);
  padded.append(simdjson::SIMDJSON_PADDING, '\0');
  simdjson::error_code err = parser.parse(padded.data(), text.size(), false).get(*root);
  if (err != simdjson::NUMBER_ERROR) return err;
  WidenBigIntegers(text, padded);
  const size_t n = padded.size();
  padded.append(simdjson::SIMDJSON_PADDING, '\0');
  return parser.parse(padded.data(), n, false).get(*root);
}

class Encoder {
 public:
  Encoder(const SpanBatch& b, std::string* out, IdOffsets* offs) : b_(b), w_(out, offs) {}

  void Run() {
    const SpanBatch::Spans& sp = b_.spans;
    const size_t n = b_.span_count();
    size_t i = 0;
    while (i < n) {
      const uint32_t r = sp.resource[i];
      const Writer::Mark rs = w_.Open(1);  // ExportTraceServiceRequest.resource_spans
      ResourceMsg(r);
      while (i < n && sp.resource[i] == r) {
        const uint32_t s = sp.scope[i];
        const Writer::Mark ss = w_.Open(2);  // ResourceSpans.scope_spans
        ScopeMsg(s);
        while (i < n && sp.resource[i] == r && sp.scope[i] == s) Span(i++);
        w_.StringIfSet(3, b_.Str(b_.scopes.schema_url[s]));
        w_.Close(ss);
      }
      w_.StringIfSet(3, b_.Str(b_.resources.schema_url[r]));
      w_.Close(rs);
    }
  }

 private:
  void ResourceMsg(uint32_t r) {
    const Range attrs = b_.resources.attrs[r];
    const uint32_t dropped = b_.resources.dropped_attributes_count[r];
    if (attrs.size() == 0 && dropped == 0) return;
    const Writer::Mark m = w_.Open(1);  // ResourceSpans.resource
    Attrs(1, b_.resource_attrs, attrs);
    if (dropped != 0) w_.VarintField(2, dropped);
    w_.Close(m);
  }

  void ScopeMsg(uint32_t s) {
    const SpanBatch::Scopes& sc = b_.scopes;
    const std::string_view name = b_.Str(sc.name[s]);
    const std::string_view version = b_.Str(sc.version[s]);
    if (name.empty() && version.empty() && sc.attrs[s].size() == 0 &&
        sc.dropped_attributes_count[s] == 0) {
      return;
    }
    const Writer::Mark m = w_.Open(1);  // ScopeSpans.scope
    w_.StringIfSet(1, name);
    w_.StringIfSet(2, version);
    Attrs(3, b_.scope_attrs, sc.attrs[s]);
    if (sc.dropped_attributes_count[s] != 0) w_.VarintField(4, sc.dropped_attributes_count[s]);
    w_.Close(m);
  }

  void Span(size_t i) {
    const SpanBatch::Spans& sp = b_.spans;
    const Writer::Mark m = w_.Open(2);  // ScopeSpans.spans
    w_.RecordTraceId(w_.BytesField(1, Id(sp.trace_id[i])));
    w_.RecordSpanId(w_.BytesField(2, Id(sp.span_id[i])));
    w_.StringIfSet(3, b_.Str(sp.trace_state[i]));
    if (!IsZero(sp.parent_span_id[i])) w_.RecordSpanId(w_.BytesField(4, Id(sp.parent_span_id[i])));
    w_.StringIfSet(5, b_.Str(sp.name[i]));
    if (sp.kind[i] != 0) w_.VarintField(6, sp.kind[i]);
    w_.RecordTime(w_.Fixed64Field(7, sp.start_ns[i]));
    w_.RecordTime(w_.Fixed64Field(8, sp.end_ns[i]));
    Attrs(9, b_.span_attrs, sp.attrs[i]);
    if (sp.dropped_attributes_count[i] != 0) w_.VarintField(10, sp.dropped_attributes_count[i]);
    const Range ev = sp.events[i];
    for (uint32_t e = ev.begin; e < ev.end; ++e) Event(e);
    if (sp.dropped_events_count[i] != 0) w_.VarintField(12, sp.dropped_events_count[i]);
    const Range ln = sp.links[i];
    for (uint32_t l = ln.begin; l < ln.end; ++l) Link(l);
    if (sp.dropped_links_count[i] != 0) w_.VarintField(14, sp.dropped_links_count[i]);
    const std::string_view msg = b_.Str(sp.status_message[i]);
    if (sp.status_code[i] != 0 || !msg.empty()) {
      const Writer::Mark st = w_.Open(15);
      w_.StringIfSet(2, msg);
      if (sp.status_code[i] != 0) w_.VarintField(3, sp.status_code[i]);
      w_.Close(st);
    }
    if (sp.flags[i] != 0) w_.Fixed32Field(16, sp.flags[i]);
    w_.Close(m);
  }

  void Event(uint32_t e) {
    const SpanBatch::Events& ev = b_.events;
    const Writer::Mark m = w_.Open(11);
    w_.RecordTime(w_.Fixed64Field(1, ev.time_ns[e]));
    w_.StringIfSet(2, b_.Str(ev.name[e]));
    Attrs(3, b_.event_attrs, ev.attrs[e]);
    if (ev.dropped_attributes_count[e] != 0) w_.VarintField(4, ev.dropped_attributes_count[e]);
    w_.Close(m);
  }

  void Link(uint32_t l) {
    const SpanBatch::Links& ln = b_.links;
    const Writer::Mark m = w_.Open(13);
    w_.RecordTraceId(w_.BytesField(1, Id(ln.trace_id[l])));
    w_.RecordSpanId(w_.BytesField(2, Id(ln.span_id[l])));
    w_.StringIfSet(3, b_.Str(ln.trace_state[l]));
    Attrs(4, b_.link_attrs, ln.attrs[l]);
    if (ln.dropped_attributes_count[l] != 0) w_.VarintField(5, ln.dropped_attributes_count[l]);
    if (ln.flags[l] != 0) w_.Fixed32Field(6, ln.flags[l]);
    w_.Close(m);
  }

  // Each attribute of `range` as a KeyValue in field `field`.
  void Attrs(uint32_t field, const AttrColumns& cols, Range range) {
    for (uint32_t a = range.begin; a < range.end; ++a) {
      const Writer::Mark kv = w_.Open(field);
      w_.BytesField(1, b_.Str(cols.key[a]));  // key: written even when empty
      const ValueType type = cols.type[a];
      if (type != ValueType::kEmpty) {
        const Writer::Mark v = w_.Open(2);
        AnyValueFromText(type, b_.Str(cols.value[a]));
        w_.Close(v);
      }
      w_.Close(kv);
    }
  }

  // The content of an AnyValue whose stored text is `text` (value_text.h).
  void AnyValueFromText(ValueType type, std::string_view text) {
    switch (type) {
      case ValueType::kString:
        w_.BytesField(1, text);
        return;
      case ValueType::kBool:
        w_.VarintField(2, text == "true" ? 1 : 0);
        return;
      case ValueType::kInt: {
        int64_t v = 0;
        const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
        if (res.ec != std::errc() || res.ptr != text.data() + text.size()) break;
        w_.VarintField(3, static_cast<uint64_t>(v));
        return;
      }
      case ValueType::kDouble: {
        double v = 0;
        if (!ParseDouble(text, &v)) break;
        w_.Fixed64Field(4, std::bit_cast<uint64_t>(v));
        return;
      }
      case ValueType::kBytes:
        w_.BytesField(7, text);
        return;
      case ValueType::kArray:
      case ValueType::kKvList: {
        simdjson::dom::element root;
        if (ParseJson(text, &root) != simdjson::SUCCESS) break;
        const bool want_array = type == ValueType::kArray;
        if (root.is_array() != want_array || (!want_array && !root.is_object())) break;
        JsonAnyValueContent(root);
        return;
      }
      case ValueType::kEmpty:
        return;
    }
    // Text that its type's rules could not have produced (a hand-built batch):
    // keep the bytes as a string rather than lose them.
    w_.BytesField(1, text);
  }

  static bool ParseDouble(std::string_view text, double* v) {
    if (text == "NaN") {
      *v = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
    if (text == "Infinity" || text == "-Infinity") {
      *v = text[0] == '-' ? -std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::infinity();
      return true;
    }
    const auto res = std::from_chars(text.data(), text.data() + text.size(), *v);
    return res.ec == std::errc() && res.ptr == text.data() + text.size();
  }

  // The content of an AnyValue for a JSON element of an array / kvlist's text. Each kind of
  // element maps to the AnyValue the decoder renders as that same text: numbers without a
  // fraction or exponent are ints (an integral double is rendered that way too), strings are
  // strings (bytes and non-finite doubles were rendered as strings), null is an empty AnyValue.
  void JsonAnyValueContent(simdjson::dom::element el) {
    using simdjson::dom::element_type;
    switch (el.type()) {
      case element_type::ARRAY: {
        const Writer::Mark m = w_.Open(5);
        simdjson::dom::array arr;
        if (el.get_array().get(arr) != simdjson::SUCCESS) return;
        for (simdjson::dom::element child : arr) {
          const Writer::Mark v = w_.Open(1);
          JsonAnyValueContent(child);
          w_.Close(v);
        }
        w_.Close(m);
        return;
      }
      case element_type::OBJECT: {
        const Writer::Mark m = w_.Open(6);
        simdjson::dom::object obj;
        if (el.get_object().get(obj) != simdjson::SUCCESS) return;
        for (simdjson::dom::key_value_pair kv : obj) {
          const Writer::Mark pair = w_.Open(1);
          w_.BytesField(1, kv.key);
          const Writer::Mark v = w_.Open(2);
          JsonAnyValueContent(kv.value);
          w_.Close(v);
          w_.Close(pair);
        }
        w_.Close(m);
        return;
      }
      case element_type::STRING:
        w_.BytesField(1, el.get_string().value_unsafe());
        return;
      case element_type::BOOL:
        w_.VarintField(2, el.get_bool().value_unsafe() ? 1 : 0);
        return;
      case element_type::INT64:
        w_.VarintField(3, static_cast<uint64_t>(el.get_int64().value_unsafe()));
        return;
      case element_type::UINT64:
        // Only an integral double beyond int64 is rendered this way.
        w_.Fixed64Field(
            4, std::bit_cast<uint64_t>(static_cast<double>(el.get_uint64().value_unsafe())));
        return;
      case element_type::DOUBLE:
        w_.Fixed64Field(4, std::bit_cast<uint64_t>(el.get_double().value_unsafe()));
        return;
      case element_type::NULL_VALUE:
        return;
    }
  }

  template <size_t N>
  static std::string_view Id(const std::array<uint8_t, N>& id) {
    return {reinterpret_cast<const char*>(id.data()), N};
  }

  const SpanBatch& b_;
  Writer w_;
};

}  // namespace

void EncodeOtlpProto(const SpanBatch& batch, std::string* out, IdOffsets* offsets) {
  Encoder(batch, out, offsets).Run();
}

std::string EncodeOtlpProto(const SpanBatch& batch) {
  std::string out;
  EncodeOtlpProto(batch, &out, nullptr);
  return out;
}

}  // namespace spanhouse::codec
