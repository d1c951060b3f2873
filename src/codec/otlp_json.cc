// OTLP/JSON trace decoder (ExportTraceServiceRequest) and response encoder.
//
// The body is parsed into a simdjson DOM tree by one parser per thread, then
// walked once, appending straight into the SpanBatch columns. Member order
// inside an object does not matter: every row is created when its JSON object
// starts, and fields are written into it by index as they are met. The path of
// the walk is kept as a stack of (name, index) pairs that is only turned into
// text when an error is reported, so a good request allocates nothing per span.
#include <simdjson.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

#include "codec/arena_room.h"
#include "codec/json_common.h"
#include "codec/otlp.h"
#include "codec/value_text.h"

namespace spanhouse::codec {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// A top-level attribute value is at depth 1; the values inside its array or
// kvlist at depth 2, and so on.
constexpr int kMaxAnyValueDepth = 16;

bool Is(std::string_view key, std::string_view camel, std::string_view snake) {
  return key == camel || key == snake;
}

// Where the walk is, e.g. resourceSpans[0].scopeSpans[1].spans[3].traceId.
class Path {
 public:
  void Push(std::string_view name, int64_t index) {
    if (n_ < kMax) segs_[n_] = {name, index};
    ++n_;
  }
  void Pop() { --n_; }

  std::string Format() const {
    if (n_ == 0) return "request";
    std::string s;
    for (size_t i = 0; i < n_ && i < kMax; ++i) {
      if (i > 0) s += '.';
      s += segs_[i].name;
      if (segs_[i].index >= 0) {
        s += '[';
        AppendInt(s, segs_[i].index);
        s += ']';
      }
    }
    if (n_ > kMax) s += "...";
    return s;
  }

 private:
  struct Seg {
    std::string_view name;
    int64_t index = -1;
  };
  // Deepest real path: 5 levels down to an attribute, then 3 per AnyValue level.
  static constexpr size_t kMax = 80;
  std::array<Seg, kMax> segs_{};
  size_t n_ = 0;
};

class Scoped {
 public:
  Scoped(Path& p, std::string_view name, int64_t index = -1) : p_(p) { p_.Push(name, index); }
  ~Scoped() { p_.Pop(); }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;

 private:
  Path& p_;
};

constexpr std::array<std::string_view, 6> kSpanKindNames = {
    "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",      "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
constexpr std::array<std::string_view, 3> kStatusCodeNames = {"STATUS_CODE_UNSET", "STATUS_CODE_OK",
                                                              "STATUS_CODE_ERROR"};

// One AnyValue, read and checked but not yet rendered.
struct Any {
  ValueType type = ValueType::kEmpty;
  std::string_view str;  // kString: the text; kBytes: the decoded bytes (in the bytes scratch)
  int64_t i = 0;
  double d = 0;
  bool b = false;
  element container;  // kArray: the ArrayValue object; kKvList: the KeyValueList object
};

class Decoder {
 public:
  Decoder(SpanBatch& out, std::string& json, std::string& bytes)
      : out_(out), json_(json), bytes_(bytes) {}

  Status Request(element root) {
    object obj;
    if (root.get_object().get(obj) != simdjson::SUCCESS) {
      return Err("expected a JSON object (ExportTraceServiceRequest)");
    }
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      if (Is(field.key, "resourceSpans", "resource_spans")) {
        SH_RETURN_IF_ERROR(
            ForEach(field.value, "resourceSpans", [&](element e) { return ResourceSpans(e); }));
      }
    }
    return Status::Ok();
  }

 private:
  // ---- errors and typed getters; the path names the current field ----

  Status Err(std::string_view what) const {
    std::string m = path_.Format();
    m += ": ";
    m += what;
    return Status::Invalid(std::move(m));
  }

  Status GetObject(element e, object& out) const {
    if (e.get_object().get(out) != simdjson::SUCCESS) return Err("expected an object");
    return Status::Ok();
  }

  Status GetString(element e, std::string_view& out) const {
    if (e.get_string().get(out) != simdjson::SUCCESS) return Err("expected a string");
    return Status::Ok();
  }

  Status GetStringRef(element e, StrRef& out) {
    std::string_view s;
    SH_RETURN_IF_ERROR(GetString(e, s));
    out = out_.AddString(s);
    return Status::Ok();
  }

  // Calls fn(element) for each element of the array `e`, with `name[i]` on the path.
  template <typename Fn>
  Status ForEach(element e, std::string_view name, Fn&& fn) {
    array arr;
    {
      Scoped at(path_, name);
      if (e.get_array().get(arr) != simdjson::SUCCESS) return Err("expected an array");
    }
    int64_t i = 0;
    for (element item : arr) {
      Scoped at(path_, name, i++);
      SH_RETURN_IF_ERROR(fn(item));
    }
    return Status::Ok();
  }

  // Any JSON integer form the protobuf JSON mapping allows: a number (an
  // integral double too, as in 1e3) or a string of decimal digits.
  Status GetInteger(element e, int64_t min, uint64_t max, bool& negative, uint64_t& mag) const {
    negative = false;
    mag = 0;
    switch (e.type()) {
      case element_type::STRING: {
        std::string_view s = e.get_string().value_unsafe();
        if (!s.empty() && s[0] == '-') {
          negative = true;
          s.remove_prefix(1);
        }
        if (s.empty()) return Err("expected an integer");
        for (char c : s) {
          if (c < '0' || c > '9') return Err("expected an integer");
        }
        auto res = std::from_chars(s.data(), s.data() + s.size(), mag);
        if (res.ec == std::errc::result_out_of_range) return Err("integer out of range");
        if (res.ec != std::errc() || res.ptr != s.data() + s.size()) {
          return Err("expected an integer");
        }
        if (negative && mag == 0) negative = false;
        break;
      }
      default:
        switch (json::ReadInteger(e, negative, mag)) {
          case json::IntegerRead::kOk:
            break;
          case json::IntegerRead::kNotInteger:
            return Err("expected an integer");
          case json::IntegerRead::kOutOfRange:
            return Err("integer out of range");
        }
    }
    const uint64_t min_mag = min < 0 ? 0 - static_cast<uint64_t>(min) : 0;
    if (negative ? mag > min_mag : mag > max) return Err("integer out of range");
    return Status::Ok();
  }

  Status GetUint64(element e, uint64_t& out) const {
    bool neg;
    return GetInteger(e, 0, std::numeric_limits<uint64_t>::max(), neg, out);
  }

  Status GetUint32(element e, uint32_t& out) const {
    bool neg;
    uint64_t v;
    SH_RETURN_IF_ERROR(GetInteger(e, 0, std::numeric_limits<uint32_t>::max(), neg, v));
    out = static_cast<uint32_t>(v);
    return Status::Ok();
  }

  Status GetInt64(element e, int64_t& out) const {
    bool neg;
    uint64_t mag;
    SH_RETURN_IF_ERROR(GetInteger(e, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max(), neg, mag));
    out = neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
    return Status::Ok();
  }

  // A number, or a string: "NaN", "Infinity", "-Infinity" or a decimal number.
  Status GetDouble(element e, double& out) const {
    switch (e.type()) {
      case element_type::INT64:
        out = static_cast<double>(e.get_int64().value_unsafe());
        return Status::Ok();
      case element_type::UINT64:
        out = static_cast<double>(e.get_uint64().value_unsafe());
        return Status::Ok();
      case element_type::DOUBLE:
        out = e.get_double().value_unsafe();
        return Status::Ok();
      case element_type::STRING: {
        std::string_view s = e.get_string().value_unsafe();
        if (s == "NaN") {
          out = std::numeric_limits<double>::quiet_NaN();
          return Status::Ok();
        }
        if (s == "Infinity" || s == "-Infinity") {
          out = s[0] == '-' ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
          return Status::Ok();
        }
        // from_chars also takes "inf" and "nan": insist on a digit or '.' first.
        size_t first = !s.empty() && s[0] == '-' ? 1 : 0;
        if (first >= s.size() || !((s[first] >= '0' && s[first] <= '9') || s[first] == '.')) {
          return Err("expected a number");
        }
        auto res = std::from_chars(s.data(), s.data() + s.size(), out);
        if (res.ec == std::errc::result_out_of_range) return Err("number out of range");
        if (res.ec != std::errc() || res.ptr != s.data() + s.size()) {
          return Err("expected a number");
        }
        return Status::Ok();
      }
      default:
        return Err("expected a number");
    }
  }

  // An enum as its number or its name.
  template <size_t N>
  Status GetEnum(element e, const std::array<std::string_view, N>& names, uint8_t& out) const {
    if (e.type() == element_type::STRING) {
      std::string_view s = e.get_string().value_unsafe();
      for (size_t i = 0; i < N; ++i) {
        if (s == names[i]) {
          out = static_cast<uint8_t>(i);
          return Status::Ok();
        }
      }
      // Quote at most 64 bytes, cut on a UTF-8 character boundary.
      size_t n = s.size();
      if (n > 64) {
        n = 64;
        while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
      }
      std::string m = "unknown enum value \"";
      m += s.substr(0, n);
      if (n < s.size()) m += "...";
      m += '"';
      return Err(m);
    }
    if (e.type() != element_type::INT64 && e.type() != element_type::UINT64 &&
        e.type() != element_type::DOUBLE) {
      return Err("expected an enum name or number");
    }
    bool neg;
    uint64_t v;
    const Status st = GetInteger(e, std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<uint64_t>::max(), neg, v);
    if (!st.ok()) return Err("expected an enum name or number");
    if (neg || v >= N) {
      std::string m = "enum value ";
      if (neg) m += '-';
      m += std::to_string(v);
      m += " out of range 0..";
      AppendInt(m, static_cast<int64_t>(N - 1));
      return Err(m);
    }
    out = static_cast<uint8_t>(v);
    return Status::Ok();
  }

  // Hex id of n bytes; "" leaves the id all zero when allow_empty.
  Status GetHexId(element e, uint8_t* id, size_t n, bool allow_empty) const {
    std::string_view s;
    SH_RETURN_IF_ERROR(GetString(e, s));
    if (s.empty() && allow_empty) {
      for (size_t i = 0; i < n; ++i) id[i] = 0;
      return Status::Ok();
    }
    if (!FromHex(s, id, n)) {
      std::string m = "expected ";
      AppendInt(m, static_cast<int64_t>(2 * n));
      m += " hex digits";
      return Err(m);
    }
    return Status::Ok();
  }

  // ---- AnyValue ----

  // Reads the AnyValue `e` (the path names it). Bytes are decoded into bytes_,
  // so the result must be used before the next ReadAny.
  Status ReadAny(element e, int depth, Any& a) {
    a = Any{};
    if (depth > kMaxAnyValueDepth) return Err("AnyValue nested deeper than 16 levels");
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    bool set = false;
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      ValueType type;
      std::string_view name;
      if (Is(k, "stringValue", "string_value")) {
        type = ValueType::kString, name = "stringValue";
      } else if (Is(k, "boolValue", "bool_value")) {
        type = ValueType::kBool, name = "boolValue";
      } else if (Is(k, "intValue", "int_value")) {
        type = ValueType::kInt, name = "intValue";
      } else if (Is(k, "doubleValue", "double_value")) {
        type = ValueType::kDouble, name = "doubleValue";
      } else if (Is(k, "bytesValue", "bytes_value")) {
        type = ValueType::kBytes, name = "bytesValue";
      } else if (Is(k, "arrayValue", "array_value")) {
        type = ValueType::kArray, name = "arrayValue";
      } else if (Is(k, "kvlistValue", "kvlist_value")) {
        type = ValueType::kKvList, name = "kvlistValue";
      } else {
        continue;  // unknown field
      }
      Scoped at(path_, name);
      if (set) return Err("AnyValue has more than one value set");
      set = true;
      a.type = type;
      element v = field.value;
      switch (type) {
        case ValueType::kString:
          SH_RETURN_IF_ERROR(GetString(v, a.str));
          break;
        case ValueType::kBool:
          if (v.get_bool().get(a.b) != simdjson::SUCCESS) return Err("expected true or false");
          break;
        case ValueType::kInt:
          SH_RETURN_IF_ERROR(GetInt64(v, a.i));
          break;
        case ValueType::kDouble:
          SH_RETURN_IF_ERROR(GetDouble(v, a.d));
          break;
        case ValueType::kBytes: {
          std::string_view b64;
          SH_RETURN_IF_ERROR(GetString(v, b64));
          bytes_.clear();
          if (!DecodeBase64(b64, bytes_)) return Err("invalid base64");
          a.str = bytes_;
          break;
        }
        case ValueType::kArray:
        case ValueType::kKvList:
          if (v.type() != element_type::OBJECT) return Err("expected an object");
          a.container = v;
          break;
        case ValueType::kEmpty:
          break;
      }
    }
    return Status::Ok();
  }

  // Appends `a` to json_ as an element of an array or kvlist text.
  Status WriteElement(const Any& a, int depth) {
    switch (a.type) {
      case ValueType::kEmpty:
        json_ += "null";
        break;
      case ValueType::kString:
        AppendJsonString(json_, a.str);
        break;
      case ValueType::kBool:
        json_ += a.b ? "true" : "false";
        break;
      case ValueType::kInt:
        AppendInt(json_, a.i);
        break;
      case ValueType::kDouble:
        AppendJsonDouble(json_, a.d);
        break;
      case ValueType::kBytes:
        json_ += '"';
        AppendBase64(json_, a.str);
        json_ += '"';
        break;
      case ValueType::kArray:
      case ValueType::kKvList:
        return WriteContainer(a, depth);
    }
    return Status::Ok();
  }

  // Appends the JSON text of an array or kvlist AnyValue (at `depth`) to json_.
  Status WriteContainer(const Any& a, int depth) {
    const bool is_array = a.type == ValueType::kArray;
    Scoped at(path_, is_array ? "arrayValue" : "kvlistValue");
    json_ += is_array ? '[' : '{';
    bool first = true;
    object obj = a.container.get_object().value_unsafe();
    for (auto field : obj) {
      if (field.key != "values" || field.value.is_null()) continue;
      SH_RETURN_IF_ERROR(ForEach(field.value, "values", [&](element item) -> Status {
        if (!first) json_ += ',';
        first = false;
        Any sub;
        if (is_array) {
          SH_RETURN_IF_ERROR(ReadAny(item, depth + 1, sub));
          return WriteElement(sub, depth + 1);
        }
        std::string_view key;
        element value;
        bool has_value = false;
        SH_RETURN_IF_ERROR(ReadKeyValue(item, key, value, has_value));
        AppendJsonString(json_, key);
        json_ += ':';
        if (!has_value) {
          json_ += "null";
          return Status::Ok();
        }
        Scoped v(path_, "value");
        SH_RETURN_IF_ERROR(ReadAny(value, depth + 1, sub));
        return WriteElement(sub, depth + 1);
      }));
    }
    json_ += is_array ? ']' : '}';
    return Status::Ok();
  }

  // A KeyValue object: its key ("" if absent) and value (if present, not null).
  Status ReadKeyValue(element e, std::string_view& key, element& value, bool& has_value) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    key = {};
    has_value = false;
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      if (field.key == "key") {
        Scoped at(path_, "key");
        SH_RETURN_IF_ERROR(GetString(field.value, key));
      } else if (field.key == "value") {
        value = field.value;
        has_value = true;
      }
    }
    return Status::Ok();
  }

  // Parses the attribute list `e` into cols, extending ranges[owner].end.
  Status Attributes(element e, AttrColumns& cols, std::vector<Range>& ranges, uint32_t owner) {
    return ForEach(e, "attributes", [&](element item) -> Status {
      std::string_view key;
      element value;
      bool has_value = false;
      SH_RETURN_IF_ERROR(ReadKeyValue(item, key, value, has_value));
      const StrRef key_ref = out_.AddString(key);
      ValueType type = ValueType::kEmpty;
      StrRef text{};
      if (has_value) {
        Scoped at(path_, "value");
        Any a;
        SH_RETURN_IF_ERROR(ReadAny(value, 1, a));
        type = a.type;
        switch (a.type) {
          case ValueType::kEmpty:
            break;
          case ValueType::kString:
          case ValueType::kBytes:
            text = out_.AddString(a.str);
            break;
          case ValueType::kBool:
            text = out_.AddString(a.b ? "true" : "false");
            break;
          case ValueType::kInt:
            json_.clear();
            AppendInt(json_, a.i);
            text = out_.AddString(json_);
            break;
          case ValueType::kDouble:
            json_.clear();
            AppendDouble(json_, a.d);
            text = out_.AddString(json_);
            break;
          case ValueType::kArray:
          case ValueType::kKvList:
            json_.clear();
            SH_RETURN_IF_ERROR(WriteContainer(a, 1));
            text = out_.AddString(json_);
            break;
        }
      }
      SpanBatch::AddAttr(cols, key_ref, type, text);
      ranges[owner].end = static_cast<uint32_t>(cols.size());
      return Status::Ok();
    });
  }

  // ---- messages ----

  Status ResourceSpans(element e) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    const uint32_t r = out_.AddResource();
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      element v = field.value;
      if (k == "resource") {
        Scoped at(path_, "resource");
        SH_RETURN_IF_ERROR(Resource(v, r));
      } else if (Is(k, "scopeSpans", "scope_spans")) {
        SH_RETURN_IF_ERROR(
            ForEach(v, "scopeSpans", [&](element item) { return ScopeSpans(item, r); }));
      } else if (Is(k, "instrumentationLibrarySpans", "instrumentation_library_spans")) {
        SH_RETURN_IF_ERROR(ForEach(v, "instrumentationLibrarySpans",
                                   [&](element item) { return ScopeSpans(item, r); }));
      } else if (Is(k, "schemaUrl", "schema_url")) {
        Scoped at(path_, "schemaUrl");
        SH_RETURN_IF_ERROR(GetStringRef(v, out_.resources.schema_url[r]));
      }
    }
    out_.ResolveServiceName(r);
    return Status::Ok();
  }

  Status Resource(element e, uint32_t r) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      if (k == "attributes") {
        SH_RETURN_IF_ERROR(Attributes(field.value, out_.resource_attrs, out_.resources.attrs, r));
      } else if (Is(k, "droppedAttributesCount", "dropped_attributes_count")) {
        Scoped at(path_, "droppedAttributesCount");
        SH_RETURN_IF_ERROR(GetUint32(field.value, out_.resources.dropped_attributes_count[r]));
      }
    }
    return Status::Ok();
  }

  Status ScopeSpans(element e, uint32_t r) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    const uint32_t s = out_.AddScope();
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      element v = field.value;
      if (k == "scope") {
        Scoped at(path_, "scope");
        SH_RETURN_IF_ERROR(Scope(v, s));
      } else if (Is(k, "instrumentationLibrary", "instrumentation_library")) {
        Scoped at(path_, "instrumentationLibrary");
        SH_RETURN_IF_ERROR(Scope(v, s));
      } else if (k == "spans") {
        SH_RETURN_IF_ERROR(ForEach(v, "spans", [&](element item) { return Span(item, r, s); }));
      } else if (Is(k, "schemaUrl", "schema_url")) {
        Scoped at(path_, "schemaUrl");
        SH_RETURN_IF_ERROR(GetStringRef(v, out_.scopes.schema_url[s]));
      }
    }
    return Status::Ok();
  }

  Status Scope(element e, uint32_t s) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      element v = field.value;
      if (k == "name") {
        Scoped at(path_, "name");
        SH_RETURN_IF_ERROR(GetStringRef(v, out_.scopes.name[s]));
      } else if (k == "version") {
        Scoped at(path_, "version");
        SH_RETURN_IF_ERROR(GetStringRef(v, out_.scopes.version[s]));
      } else if (k == "attributes") {
        SH_RETURN_IF_ERROR(Attributes(v, out_.scope_attrs, out_.scopes.attrs, s));
      } else if (Is(k, "droppedAttributesCount", "dropped_attributes_count")) {
        Scoped at(path_, "droppedAttributesCount");
        SH_RETURN_IF_ERROR(GetUint32(v, out_.scopes.dropped_attributes_count[s]));
      }
    }
    return Status::Ok();
  }

  Status Span(element e, uint32_t r, uint32_t s) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    const uint32_t i = out_.AddSpan(r, s);
    SpanBatch::Spans& sp = out_.spans;
    bool has_trace_id = false;
    bool has_span_id = false;
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      element v = field.value;
      if (Is(k, "traceId", "trace_id")) {
        Scoped at(path_, "traceId");
        SH_RETURN_IF_ERROR(GetHexId(v, sp.trace_id[i].data(), sp.trace_id[i].size(), false));
        has_trace_id = true;
      } else if (Is(k, "spanId", "span_id")) {
        Scoped at(path_, "spanId");
        SH_RETURN_IF_ERROR(GetHexId(v, sp.span_id[i].data(), sp.span_id[i].size(), false));
        has_span_id = true;
      } else if (Is(k, "parentSpanId", "parent_span_id")) {
        Scoped at(path_, "parentSpanId");
        SH_RETURN_IF_ERROR(
            GetHexId(v, sp.parent_span_id[i].data(), sp.parent_span_id[i].size(), true));
      } else if (Is(k, "traceState", "trace_state")) {
        Scoped at(path_, "traceState");
        SH_RETURN_IF_ERROR(GetStringRef(v, sp.trace_state[i]));
      } else if (k == "flags") {
        Scoped at(path_, "flags");
        SH_RETURN_IF_ERROR(GetUint32(v, sp.flags[i]));
      } else if (k == "name") {
        Scoped at(path_, "name");
        SH_RETURN_IF_ERROR(GetStringRef(v, sp.name[i]));
      } else if (k == "kind") {
        Scoped at(path_, "kind");
        SH_RETURN_IF_ERROR(GetEnum(v, kSpanKindNames, sp.kind[i]));
      } else if (Is(k, "startTimeUnixNano", "start_time_unix_nano")) {
        Scoped at(path_, "startTimeUnixNano");
        SH_RETURN_IF_ERROR(GetUint64(v, sp.start_ns[i]));
      } else if (Is(k, "endTimeUnixNano", "end_time_unix_nano")) {
        Scoped at(path_, "endTimeUnixNano");
        SH_RETURN_IF_ERROR(GetUint64(v, sp.end_ns[i]));
      } else if (k == "attributes") {
        SH_RETURN_IF_ERROR(Attributes(v, out_.span_attrs, sp.attrs, i));
      } else if (Is(k, "droppedAttributesCount", "dropped_attributes_count")) {
        Scoped at(path_, "droppedAttributesCount");
        SH_RETURN_IF_ERROR(GetUint32(v, sp.dropped_attributes_count[i]));
      } else if (k == "events") {
        SH_RETURN_IF_ERROR(ForEach(v, "events", [&](element item) { return Event(item, i); }));
      } else if (Is(k, "droppedEventsCount", "dropped_events_count")) {
        Scoped at(path_, "droppedEventsCount");
        SH_RETURN_IF_ERROR(GetUint32(v, sp.dropped_events_count[i]));
      } else if (k == "links") {
        SH_RETURN_IF_ERROR(ForEach(v, "links", [&](element item) { return Link(item, i); }));
      } else if (Is(k, "droppedLinksCount", "dropped_links_count")) {
        Scoped at(path_, "droppedLinksCount");
        SH_RETURN_IF_ERROR(GetUint32(v, sp.dropped_links_count[i]));
      } else if (k == "status") {
        Scoped at(path_, "status");
        SH_RETURN_IF_ERROR(SpanStatus(v, i));
      }
    }
    if (!has_trace_id) return Err("missing traceId");
    if (!has_span_id) return Err("missing spanId");
    return Status::Ok();
  }

  Status SpanStatus(element e, uint32_t i) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      if (field.key == "message") {
        Scoped at(path_, "message");
        SH_RETURN_IF_ERROR(GetStringRef(field.value, out_.spans.status_message[i]));
      } else if (field.key == "code") {
        Scoped at(path_, "code");
        SH_RETURN_IF_ERROR(GetEnum(field.value, kStatusCodeNames, out_.spans.status_code[i]));
      }
    }
    return Status::Ok();
  }

  Status Event(element e, uint32_t span) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    const uint32_t ev = out_.AddEvent();
    out_.spans.events[span].end = ev + 1;
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      element v = field.value;
      if (Is(k, "timeUnixNano", "time_unix_nano")) {
        Scoped at(path_, "timeUnixNano");
        SH_RETURN_IF_ERROR(GetUint64(v, out_.events.time_ns[ev]));
      } else if (k == "name") {
        Scoped at(path_, "name");
        SH_RETURN_IF_ERROR(GetStringRef(v, out_.events.name[ev]));
      } else if (k == "attributes") {
        SH_RETURN_IF_ERROR(Attributes(v, out_.event_attrs, out_.events.attrs, ev));
      } else if (Is(k, "droppedAttributesCount", "dropped_attributes_count")) {
        Scoped at(path_, "droppedAttributesCount");
        SH_RETURN_IF_ERROR(GetUint32(v, out_.events.dropped_attributes_count[ev]));
      }
    }
    return Status::Ok();
  }

  Status Link(element e, uint32_t span) {
    object obj;
    SH_RETURN_IF_ERROR(GetObject(e, obj));
    const uint32_t l = out_.AddLink();
    out_.spans.links[span].end = l + 1;
    SpanBatch::Links& ln = out_.links;
    bool has_trace_id = false;
    bool has_span_id = false;
    for (auto field : obj) {
      if (field.value.is_null()) continue;
      std::string_view k = field.key;
      element v = field.value;
      if (Is(k, "traceId", "trace_id")) {
        Scoped at(path_, "traceId");
        SH_RETURN_IF_ERROR(GetHexId(v, ln.trace_id[l].data(), ln.trace_id[l].size(), false));
        has_trace_id = true;
      } else if (Is(k, "spanId", "span_id")) {
        Scoped at(path_, "spanId");
        SH_RETURN_IF_ERROR(GetHexId(v, ln.span_id[l].data(), ln.span_id[l].size(), false));
        has_span_id = true;
      } else if (Is(k, "traceState", "trace_state")) {
        Scoped at(path_, "traceState");
        SH_RETURN_IF_ERROR(GetStringRef(v, ln.trace_state[l]));
      } else if (k == "flags") {
        Scoped at(path_, "flags");
        SH_RETURN_IF_ERROR(GetUint32(v, ln.flags[l]));
      } else if (k == "attributes") {
        SH_RETURN_IF_ERROR(Attributes(v, out_.link_attrs, ln.attrs, l));
      } else if (Is(k, "droppedAttributesCount", "dropped_attributes_count")) {
        Scoped at(path_, "droppedAttributesCount");
        SH_RETURN_IF_ERROR(GetUint32(v, ln.dropped_attributes_count[l]));
      }
    }
    if (!has_trace_id) return Err("missing traceId");
    if (!has_span_id) return Err("missing spanId");
    return Status::Ok();
  }

  SpanBatch& out_;
  std::string& json_;   // array / kvlist text and number text being built
  std::string& bytes_;  // decoded base64
  Path path_;
};

}  // namespace

Status DecodeOtlpJson(std::string_view body, SpanBatch& out) {
  // Reused across requests on the same thread: the scratch strings only grow.
  thread_local std::string json_scratch;
  thread_local std::string bytes_scratch;

  // StrRef offsets are 32-bit. Everything stored is a rendering of distinct
  // input bytes and no rendering is more than twice the JSON it came from
  // (the worst is an integral number in exponent form, {"intValue":1e18}), so
  // refuse a body that could push the arena past 4 GiB.
  SH_RETURN_IF_ERROR(CheckArenaRoom(body.size(), out, UINT32_MAX, 2));

  Status st = json::Parse(
      body, [&](element root) { return Decoder(out, json_scratch, bytes_scratch).Request(root); });
  // Do not let one huge request pin its scratch memory on this thread.
  if (json_scratch.capacity() > json::kRetainedCapacity) std::string().swap(json_scratch);
  if (bytes_scratch.capacity() > json::kRetainedCapacity) std::string().swap(bytes_scratch);
  return st;
}

std::string EncodeExportResponseJson(int64_t rejected_spans, std::string_view error_message) {
  if (rejected_spans == 0 && error_message.empty()) return "{}";
  // Fields left at their default are omitted, as the proto3 JSON mapping does.
  std::string s = "{\"partialSuccess\":{";
  if (rejected_spans != 0) {
    s += "\"rejectedSpans\":\"";
    AppendInt(s, rejected_spans);
    s += '"';
  }
  if (!error_message.empty()) {
    if (rejected_spans != 0) s += ',';
    s += "\"errorMessage\":";
    AppendJsonString(s, error_message);
  }
  s += "}}";
  return s;
}

}  // namespace spanhouse::codec
