// Zipkin v2 JSON decoder (zipkin2-api.yaml: a JSON array of spans).
//
// The body is parsed into a simdjson DOM tree by one parser per thread, then
// walked once; each span's fields are read in whatever order they come and
// handed to the shared mapping (zipkin_mapping.h), so a span sent as JSON is
// stored exactly as the same span sent as protobuf (zipkin_proto.cc).
//
// Leniency, as Zipkin's own server: ids shorter than 16 / 32 hex digits are
// left-padded, a null member is an absent one, unknown members are skipped,
// a tag value may be a number or a boolean (kept as its text), an empty
// address is no address, a port of zero or less is no port.
#include <arpa/inet.h>
#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>

#include "codec/arena_room.h"
#include "codec/json_common.h"
#include "codec/value_text.h"
#include "codec/zipkin.h"
#include "codec/zipkin_mapping.h"

namespace spanhouse::codec {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;
using zipkin::SpanFields;

// Longest text of a key or value quoted in an error message.
constexpr size_t kMaxQuoted = 64;

const char* TypeName(element e) {
  switch (e.type()) {
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return "a number";
    case element_type::STRING:
      return "a string";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "an unknown value";
}

// `s` in quotes, cut to kMaxQuoted bytes on a UTF-8 character boundary.
std::string Quote(std::string_view s) {
  size_t n = s.size();
  if (n > kMaxQuoted) {
    n = kMaxQuoted;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  }
  std::string q = "\"";
  q += s.substr(0, n);
  if (n < s.size()) q += "...";
  q += '"';
  return q;
}

class Decoder {
 public:
  explicit Decoder(SpanBatch& out) : out_(out), map_(out) {}

  Status Request(element root) {
    array spans;
    if (root.get_array().get(spans) != simdjson::SUCCESS) {
      return Status::Invalid(std::string("expected a JSON array of spans (Zipkin v2), got ") +
                             TypeName(root));
    }
    uint32_t n = 0;
    for (element e : spans) SH_RETURN_IF_ERROR(Span(e, n++));
    return Status::Ok();
  }

 private:
  // "span N: FIELD: WHAT" (N counts from 0 within the request).
  static Status Err(uint32_t n, std::string_view field, std::string_view what) {
    std::string m = "span " + std::to_string(n);
    if (!field.empty()) {
      m += ": ";
      m += field;
    }
    m += ": ";
    m += what;
    return Status::Invalid(std::move(m));
  }

  static Status Expected(uint32_t n, std::string_view field, std::string_view want, element got) {
    return Err(n, field, "expected " + std::string(want) + ", got " + TypeName(got));
  }

  static Status GetString(element e, uint32_t n, std::string_view field, std::string_view& out) {
    if (e.get_string().get(out) != simdjson::SUCCESS) return Expected(n, field, "a string", e);
    return Status::Ok();
  }

  static Status GetBool(element e, uint32_t n, std::string_view field, bool& out) {
    if (e.get_bool().get(out) != simdjson::SUCCESS) return Expected(n, field, "true or false", e);
    return Status::Ok();
  }

  // A JSON integer (or an integral number such as 1.5e15) as its sign and magnitude.
  static Status GetInteger(element e, uint32_t n, std::string_view field, bool& negative,
                           uint64_t& mag) {
    switch (json::ReadInteger(e, negative, mag)) {
      case json::IntegerRead::kOk:
        return Status::Ok();
      case json::IntegerRead::kNotInteger:
        return Expected(n, field, "an integer", e);
      case json::IntegerRead::kOutOfRange:
        break;
    }
    return Err(n, field, "integer out of range");
  }

  // Epoch or duration microseconds: 0 .. kMaxMicros (the nanoseconds fit in 64 bits).
  static Status GetMicros(element e, uint32_t n, std::string_view field, uint64_t& out) {
    bool negative;
    SH_RETURN_IF_ERROR(GetInteger(e, n, field, negative, out));
    if (negative || out > zipkin::kMaxMicros) {
      return Err(n, field,
                 (negative ? "-" : "") + std::to_string(out) + " is out of range 0.." +
                     std::to_string(zipkin::kMaxMicros));
    }
    return Status::Ok();
  }

  // A hex id of up to 2 * size digits, left-padded.
  static Status GetHexId(element e, uint32_t n, std::string_view field, uint8_t* id, size_t size) {
    std::string_view s;
    SH_RETURN_IF_ERROR(GetString(e, n, field, s));
    if (zipkin::ParseHexId(s, id, size)) return Status::Ok();
    const std::string most = std::to_string(2 * size);
    if (s.empty()) return Err(n, field, "empty, expected up to " + most + " hex digits");
    if (s.size() > 2 * size) {
      return Err(n, field,
                 std::to_string(s.size()) + " characters, expected up to " + most + " hex digits");
    }
    return Err(n, field, Quote(s) + " is not hex");
  }

  Status Span(element e, uint32_t n) {
    object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) return Expected(n, "", "an object", e);
    SpanFields zf;
    const uint32_t i = map_.BeginSpan(zf);
    SpanBatch::Spans& sp = out_.spans;
    bool have_trace_id = false;
    bool have_id = false;
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      const std::string_view k = field.key;
      const element v = field.value;
      if (k == "traceId") {
        SH_RETURN_IF_ERROR(GetHexId(v, n, "traceId", sp.trace_id[i].data(), 16));
        have_trace_id = true;
      } else if (k == "id") {
        SH_RETURN_IF_ERROR(GetHexId(v, n, "id", sp.span_id[i].data(), 8));
        have_id = true;
      } else if (k == "parentId") {
        std::string_view s;
        SH_RETURN_IF_ERROR(GetString(v, n, "parentId", s));
        if (s.empty()) {
          sp.parent_span_id[i] = SpanId{};
        } else {
          SH_RETURN_IF_ERROR(GetHexId(v, n, "parentId", sp.parent_span_id[i].data(), 8));
        }
      } else if (k == "name") {
        std::string_view s;
        SH_RETURN_IF_ERROR(GetString(v, n, "name", s));
        sp.name[i] = out_.AddString(s);
      } else if (k == "kind") {
        SH_RETURN_IF_ERROR(GetKind(v, n, zf.kind));
      } else if (k == "timestamp") {
        SH_RETURN_IF_ERROR(GetMicros(v, n, "timestamp", zf.timestamp_us));
      } else if (k == "duration") {
        SH_RETURN_IF_ERROR(GetMicros(v, n, "duration", zf.duration_us));
      } else if (k == "debug") {
        SH_RETURN_IF_ERROR(GetBool(v, n, "debug", zf.debug));
      } else if (k == "shared") {
        SH_RETURN_IF_ERROR(GetBool(v, n, "shared", zf.shared));
      } else if (k == "localEndpoint") {
        SH_RETURN_IF_ERROR(Endpoint(v, n, "localEndpoint", zf.local));
      } else if (k == "remoteEndpoint") {
        SH_RETURN_IF_ERROR(Endpoint(v, n, "remoteEndpoint", zf.remote));
      } else if (k == "annotations") {
        SH_RETURN_IF_ERROR(Annotations(v, n, i));
      } else if (k == "tags") {
        SH_RETURN_IF_ERROR(Tags(v, n, i, zf));
      }
    }
    if (!have_trace_id) return Err(n, "", "missing traceId");
    if (!have_id) return Err(n, "", "missing id");
    if (sp.parent_span_id[i] == sp.span_id[i]) sp.parent_span_id[i] = SpanId{};
    if (!map_.Finish(i, zf)) {
      return Err(n, "",
                 "timestamp + duration is past the largest time (" +
                     std::to_string(zipkin::kMaxMicros) + " microseconds)");
    }
    return Status::Ok();
  }

  static Status GetKind(element v, uint32_t n, zipkin::Kind& kind) {
    std::string_view s;
    SH_RETURN_IF_ERROR(GetString(v, n, "kind", s));
    if (s == "CLIENT") {
      kind = zipkin::Kind::kClient;
    } else if (s == "SERVER") {
      kind = zipkin::Kind::kServer;
    } else if (s == "PRODUCER") {
      kind = zipkin::Kind::kProducer;
    } else if (s == "CONSUMER") {
      kind = zipkin::Kind::kConsumer;
    } else {
      return Err(n, "kind", "expected CLIENT, SERVER, PRODUCER or CONSUMER, got " + Quote(s));
    }
    return Status::Ok();
  }

  // An address in text; "" is none. inet_pton wants it NUL-terminated.
  static Status Address(element v, uint32_t n, const std::string& field, int family, uint8_t* bytes,
                        bool& set) {
    std::string_view s;
    SH_RETURN_IF_ERROR(GetString(v, n, field, s));
    set = false;
    if (s.empty()) return Status::Ok();
    char text[INET6_ADDRSTRLEN + 1];
    if (s.size() < sizeof(text)) {
      std::memcpy(text, s.data(), s.size());
      text[s.size()] = '\0';
      set = inet_pton(family, text, bytes) == 1;
    }
    if (!set) {
      return Err(n, field,
                 Quote(s) + " is not an " + (family == AF_INET ? "IPv4" : "IPv6") + " address");
    }
    return Status::Ok();
  }

  static Status Endpoint(element e, uint32_t n, std::string_view name, zipkin::Endpoint& out) {
    object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) return Expected(n, name, "an object", e);
    const std::string prefix = std::string(name) + '.';
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      const std::string_view k = field.key;
      const element v = field.value;
      if (k == "serviceName") {
        SH_RETURN_IF_ERROR(GetString(v, n, prefix + "serviceName", out.service_name));
      } else if (k == "ipv4") {
        SH_RETURN_IF_ERROR(Address(v, n, prefix + "ipv4", AF_INET, out.ipv4.data(), out.has_ipv4));
      } else if (k == "ipv6") {
        SH_RETURN_IF_ERROR(Address(v, n, prefix + "ipv6", AF_INET6, out.ipv6.data(), out.has_ipv6));
      } else if (k == "port") {
        bool negative;
        uint64_t mag;
        SH_RETURN_IF_ERROR(GetInteger(v, n, prefix + "port", negative, mag));
        if (!negative && mag > 65535) {
          return Err(n, prefix + "port", std::to_string(mag) + " is out of range (at most 65535)");
        }
        out.port = negative ? 0 : static_cast<int32_t>(mag);  // Zipkin: negative is no port
      }
    }
    return Status::Ok();
  }

  Status Annotations(element e, uint32_t n, uint32_t i) {
    array arr;
    if (e.get_array().get(arr) != simdjson::SUCCESS) {
      return Expected(n, "annotations", "an array", e);
    }
    uint32_t k = 0;
    for (element item : arr) {
      const std::string at = "annotations[" + std::to_string(k++) + "]";
      object obj;
      if (item.get_object().get(obj) != simdjson::SUCCESS) {
        return Expected(n, at, "an object", item);
      }
      uint64_t timestamp = 0;
      std::string_view value;
      for (auto field : obj) {
        if (field.value.is_null()) continue;
        if (field.key == "timestamp") {
          SH_RETURN_IF_ERROR(GetMicros(field.value, n, at + ".timestamp", timestamp));
        } else if (field.key == "value") {
          SH_RETURN_IF_ERROR(GetString(field.value, n, at + ".value", value));
        }
      }
      map_.Annotation(i, timestamp, value);
    }
    return Status::Ok();
  }

  // Tag values are strings; a number or boolean is taken as its text, as
  // Zipkin's server takes a number.
  Status Tags(element e, uint32_t n, uint32_t i, SpanFields& zf) {
    object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) return Expected(n, "tags", "an object", e);
    for (auto field : obj) {
      const element v = field.value;
      std::string_view value;
      switch (v.type()) {
        case element_type::STRING:
          value = v.get_string().value_unsafe();
          break;
        case element_type::BOOL:
          value = v.get_bool().value_unsafe() ? "true" : "false";
          break;
        case element_type::INT64:
        case element_type::UINT64:
        case element_type::DOUBLE:
          value = NumberText(v);
          break;
        default:
          return Expected(n, "tags[" + Quote(field.key) + "]", "a string", v);
      }
      map_.Tag(i, zf, field.key, value);
    }
    return Status::Ok();
  }

  // The text of a number, kept until the request is decoded: the mapping may
  // hold on to a tag's value until its span is finished.
  std::string_view NumberText(element v) {
    std::string& s = numbers_.emplace_back();
    switch (v.type()) {
      case element_type::INT64:
        AppendInt(s, v.get_int64().value_unsafe());
        break;
      case element_type::UINT64:
        s = std::to_string(v.get_uint64().value_unsafe());
        break;
      default:
        AppendDouble(s, v.get_double().value_unsafe());
        break;
    }
    return s;
  }

  SpanBatch& out_;
  zipkin::RequestMapper map_;
  std::deque<std::string> numbers_;  // tag values sent as numbers, as text
};

}  // namespace

Status DecodeZipkinJson(std::string_view body, SpanBatch& out) {
  // StrRef offsets into the arena are 31-bit. Nothing stored is more than
  // twice the JSON it came from (a number tag value such as 1e9 is stored as
  // "1e+09"), so refuse a body that could push the arena past 2 GiB.
  SH_RETURN_IF_ERROR(CheckArenaRoom(body.size(), out, SpanBatch::kSourceBit - 1, 2));
  return json::Parse(body, [&](element root) { return Decoder(out).Request(root); });
}

}  // namespace spanhouse::codec
