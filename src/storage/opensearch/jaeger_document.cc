#include "storage/opensearch/jaeger_document.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <string>
#include <unordered_map>

#include "codec/json_writer.h"
#include "codec/value_text.h"
#include "model/service_name.h"

namespace spanhouse::storage::opensearch {

namespace {
// A field that may be absent: its lookup error is not one.
inline void Optional(simdjson::error_code /*absent*/) {}
}  // namespace

namespace {

using codec::Commas;

constexpr std::string_view kNoServiceName = "OTLPResourceNoServiceName";

void AppendStringKv(std::string& out, std::string_view key, std::string_view value) {
  codec::AppendKeyValueHead(out, key, "string");
  codec::AppendJsonString(out, value);
  out += '}';
}

bool IsWhole(std::string_view text, const char* end) {
  return !text.empty() && end == text.data() + text.size();
}

// The type name of an attribute's value in the document.
std::string_view TypeName(ValueType type) {
  switch (type) {
    case ValueType::kBool:
      return "bool";
    case ValueType::kInt:
      return "int64";
    case ValueType::kDouble:
      return "float64";
    case ValueType::kBytes:
      return "binary";
    case ValueType::kString:
    case ValueType::kArray:
    case ValueType::kKvList:
    case ValueType::kEmpty:
    default:
      return "string";
  }
}

// The JSON value of an attribute as the document holds it (of type TypeName(type)).
void AppendTypedValue(std::string& out, ValueType type, std::string_view value) {
  switch (type) {
    case ValueType::kBool:
      out += value == "true" ? "true" : "false";
      return;
    case ValueType::kInt: {
      int64_t v = 0;
      auto res = std::from_chars(value.data(), value.data() + value.size(), v);
      if (res.ec == std::errc() && IsWhole(value, res.ptr)) {
        codec::AppendInt(out, v);
      } else {
        codec::AppendJsonString(out, value);
      }
      return;
    }
    case ValueType::kDouble: {
      double v = 0;
      auto res = std::from_chars(value.data(), value.data() + value.size(), v);
      if (res.ec == std::errc() && IsWhole(value, res.ptr) && std::isfinite(v)) {
        out += value;  // already the shortest round-trip text
      } else {
        codec::AppendJsonString(out, value);
      }
      return;
    }
    case ValueType::kBytes:
      out += '"';
      codec::AppendHex(out, reinterpret_cast<const uint8_t*>(value.data()), value.size());
      out += '"';
      return;
    case ValueType::kString:
    case ValueType::kArray:
    case ValueType::kKvList:
    case ValueType::kEmpty:
    default:
      codec::AppendJsonString(out, value);
      return;
  }
}

// One attribute as a typed key-value of the document.
void AppendAttrKv(std::string& out, std::string_view key, ValueType type, std::string_view value) {
  codec::AppendKeyValueHead(out, key, TypeName(type));
  AppendTypedValue(out, type, value);
  out += '}';
}

// A span's or process's tags: the nested "tags" list, and the keys Jaeger
// always keeps as fields of "tag" instead (span.kind and error, '.' written
// '@'; binary values stay nested), as its v2 writer does. The list is written
// to `out` as the tags come (nothing else is written meanwhile), the two
// fields held until Finish: no buffer of its own per span.
class TagList {
 public:
  explicit TagList(std::string& out) : out_(out) { out_ += "\"tags\":["; }

  void AddAttr(std::string_view key, ValueType type, std::string_view value) {
    if (std::string* field = FieldOf(key, TypeName(type))) {
      field->clear();
      AppendTypedValue(*field, type, value);
      return;
    }
    Head(key, TypeName(type));
    AppendTypedValue(out_, type, value);
    out_ += '}';
  }
  void AddString(std::string_view key, std::string_view value) {
    if (std::string* field = FieldOf(key, "string")) {
      field->clear();
      codec::AppendJsonString(*field, value);
      return;
    }
    Head(key, "string");
    codec::AppendJsonString(out_, value);
    out_ += '}';
  }
  // A value already JSON.
  void AddJson(std::string_view key, std::string_view type, std::string_view value_json) {
    if (std::string* field = FieldOf(key, type)) {
      field->assign(value_json);
      return;
    }
    Head(key, type);
    out_ += value_json;
    out_ += '}';
  }
  void AddAttrs(const SpanBatch& b, const AttrColumns& cols, Range range,
                std::string_view skip_key = {}) {
    for (uint32_t i = range.begin; i < range.end && i < cols.size(); ++i) {
      std::string_view key = b.Str(cols.key[i]);
      if (!skip_key.empty() && key == skip_key) continue;
      AddAttr(key, cols.type[i], b.Str(cols.value[i]));
    }
  }
  // Closes "tags" then, when any, ,"tag":{...} (keys sorted: "error" before "span@kind").
  void Finish() {
    out_ += ']';
    if (!has_error_ && !has_kind_) return;
    out_ += ",\"tag\":{";
    if (has_error_) {
      out_ += "\"error\":";
      out_ += error_;
    }
    if (has_kind_) {
      if (has_error_) out_ += ',';
      out_ += "\"span@kind\":";
      out_ += kind_;
    }
    out_ += '}';
  }

 private:
  // The field a tag is kept in instead of the list (a later one replaces
  // it), or null.
  std::string* FieldOf(std::string_view key, std::string_view type) {
    if (type == "binary") return nullptr;
    if (key == "span.kind") {
      has_kind_ = true;
      return &kind_;
    }
    if (key == "error") {
      has_error_ = true;
      return &error_;
    }
    return nullptr;
  }
  void Head(std::string_view key, std::string_view type) {
    if (!first_) out_ += ',';
    first_ = false;
    codec::AppendKeyValueHead(out_, key, type);
  }

  std::string& out_;
  bool first_ = true;
  bool has_error_ = false;
  bool has_kind_ = false;
  std::string error_;  // the JSON values of the fields
  std::string kind_;
};

void AppendAttrKvs(std::string& out, Commas& commas, const SpanBatch& b, const AttrColumns& cols,
                   Range range, std::string_view skip_key = {}) {
  for (uint32_t i = range.begin; i < range.end && i < cols.size(); ++i) {
    std::string_view key = b.Str(cols.key[i]);
    if (!skip_key.empty() && key == skip_key) continue;
    commas.Next();
    AppendAttrKv(out, key, cols.type[i], b.Str(cols.value[i]));
  }
}

void AppendReferences(std::string& out, const SpanBatch& b, uint32_t s) {
  const SpanBatch::Spans& sp = b.spans;
  const bool has_parent = !IsZero(sp.parent_span_id[s]);
  const Range links = sp.links[s];
  if (!has_parent && links.size() == 0) {
    out += "null";
    return;
  }
  // The parent's reference type: CHILD_OF unless a link to the parent says otherwise.
  std::string_view parent_type = "CHILD_OF";
  for (uint32_t l = links.begin; l < links.end; ++l) {
    if (LinksToParent(b, s, l)) parent_type = JaegerRefType(b, l);
  }
  out += '[';
  Commas commas(out);
  if (has_parent) {
    commas.Next();
    codec::AppendJaegerReference(out, parent_type, sp.trace_id[s], sp.parent_span_id[s]);
  }
  for (uint32_t l = links.begin; l < links.end; ++l) {
    if (LinksToParent(b, s, l)) continue;
    commas.Next();
    codec::AppendJaegerReference(out, JaegerRefType(b, l), b.links.trace_id[l], b.links.span_id[l]);
  }
  out += ']';
}

void AppendTags(std::string& out, const SpanBatch& b, uint32_t s) {
  const SpanBatch::Spans& sp = b.spans;
  TagList tags(out);
  const uint32_t scope = sp.scope[s];
  if (scope < b.scopes.name.size()) {
    std::string_view name = b.Str(b.scopes.name[scope]);
    std::string_view version = b.Str(b.scopes.version[scope]);
    if (!name.empty()) tags.AddString("otel.scope.name", name);
    if (!version.empty()) tags.AddString("otel.scope.version", version);
  }
  tags.AddAttrs(b, b.span_attrs, sp.attrs[s]);
  std::string_view kind = SpanKindName(sp.kind[s]);
  if (!kind.empty()) tags.AddString("span.kind", kind);
  switch (static_cast<StatusCodeOtlp>(sp.status_code[s])) {
    case StatusCodeOtlp::kOk:
      tags.AddString("otel.status_code", "OK");
      break;
    case StatusCodeOtlp::kError:
      tags.AddJson("error", "bool", "true");
      break;
    default:
      break;
  }
  std::string_view message = b.Str(sp.status_message[s]);
  if (!message.empty()) tags.AddString("otel.status_description", message);
  std::string_view trace_state = b.Str(sp.trace_state[s]);
  if (!trace_state.empty()) tags.AddString("w3c.tracestate", trace_state);
  tags.Finish();
}

void AppendLogs(std::string& out, const SpanBatch& b, uint32_t s) {
  const Range events = b.spans.events[s];
  if (events.size() == 0) {
    out += "null";
    return;
  }
  out += '[';
  for (uint32_t e = events.begin; e < events.end; ++e) {
    if (e != events.begin) out += ',';
    out += "{\"timestamp\":";
    codec::AppendUint(out, b.events.time_ns[e] / 1000);
    out += ",\"fields\":[";
    Commas commas(out);
    std::string_view name = b.Str(b.events.name[e]);
    bool has_event_attr = false;
    const Range attrs = b.events.attrs[e];
    for (uint32_t i = attrs.begin; i < attrs.end && i < b.event_attrs.size(); ++i) {
      if (b.Str(b.event_attrs.key[i]) == "event") has_event_attr = true;
    }
    if (!name.empty() && !has_event_attr) {
      commas.Next();
      AppendStringKv(out, "event", name);
    }
    AppendAttrKvs(out, commas, b, b.event_attrs, attrs);
    out += "]}";
  }
  out += ']';
}

std::string RenderProcess(const SpanBatch& b, uint32_t r) {
  std::string out = "{\"serviceName\":";
  codec::AppendJsonString(out, JaegerServiceName(b, r));
  out += ',';
  TagList tags(out);
  const Range attrs = r < b.resources.attrs.size() ? b.resources.attrs[r] : Range{};
  tags.AddAttrs(b, b.resource_attrs, attrs, "service.name");
  tags.Finish();
  out += '}';
  return out;
}

}  // namespace

std::string SpanIndexBase(std::string_view prefix) {
  std::string out(prefix);
  if (!out.empty()) out += '-';
  out += "jaeger-span-";
  return out;
}

std::string ServiceIndexBase(std::string_view prefix) {
  std::string out(prefix);
  if (!out.empty()) out += '-';
  out += "jaeger-service-";
  return out;
}

std::string DailyIndex(std::string_view base, uint64_t time_ns) {
  const auto secs = static_cast<time_t>(time_ns / 1000000000ull);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  std::string out(base);
  out += buf;
  return out;
}

std::string SpanDocumentId(const SpanBatch& b, uint32_t span) {
  std::string out;
  out.reserve(48);
  AppendSpanDocumentId(out, b, span);
  return out;
}

void AppendSpanDocumentId(std::string& out, const SpanBatch& b, uint32_t span) {
  codec::AppendHex(out, b.spans.trace_id[span].data(), 16);
  codec::AppendHex(out, b.spans.span_id[span].data(), 8);
}

uint64_t ServiceDocumentHash(std::string_view service, std::string_view operation) {
  uint64_t h = 14695981039346656037ull;
  for (std::string_view part : {service, operation}) {
    for (unsigned char c : part) {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  return h;
}

void AppendServiceDocumentId(std::string& out, uint64_t hash) {
  char buf[17];
  auto res = std::to_chars(buf, buf + sizeof(buf), hash, 16);
  out.append(buf, res.ptr);
}

std::string ServiceDocumentId(std::string_view service, std::string_view operation) {
  std::string out;
  AppendServiceDocumentId(out, ServiceDocumentHash(service, operation));
  return out;
}

DocumentWriter::DocumentWriter(const SpanBatch& batch)
    : b_(batch), processes_(batch.resources.attrs.size()) {}

const std::string& DocumentWriter::Process(uint32_t resource) {
  if (resource >= processes_.size()) processes_.resize(resource + 1);
  std::string& p = processes_[resource];
  if (p.empty()) p = RenderProcess(b_, resource);
  return p;
}

void DocumentWriter::AppendSpan(std::string& out, uint32_t s) {
  const SpanBatch::Spans& sp = b_.spans;
  out += "{\"traceID\":";
  codec::AppendHexString(out, sp.trace_id[s]);
  out += ",\"spanID\":";
  codec::AppendHexString(out, sp.span_id[s]);
  if (sp.flags[s] != 0) {
    out += ",\"flags\":";
    codec::AppendUint(out, sp.flags[s]);
  }
  out += ",\"operationName\":";
  codec::AppendJsonString(out, b_.Str(sp.name[s]));
  out += ",\"references\":";
  AppendReferences(out, b_, s);
  const uint64_t start_us = sp.start_ns[s] / 1000;
  out += ",\"startTime\":";
  codec::AppendUint(out, start_us);
  out += ",\"startTimeMillis\":";
  codec::AppendUint(out, start_us / 1000);
  out += ",\"duration\":";
  // Jaeger's duration: the time between start and end, in whole microseconds.
  codec::AppendUint(out,
                    sp.end_ns[s] > sp.start_ns[s] ? (sp.end_ns[s] - sp.start_ns[s]) / 1000 : 0);
  out += ',';
  AppendTags(out, b_, s);
  out += ",\"logs\":";
  AppendLogs(out, b_, s);
  out += ",\"process\":";
  out += Process(sp.resource[s]);
  out += '}';
}

void DocumentWriter::AppendService(std::string& out, std::string_view service,
                                   std::string_view operation) {
  out += "{\"serviceName\":";
  codec::AppendJsonString(out, service);
  out += ",\"operationName\":";
  codec::AppendJsonString(out, operation);
  out += '}';
}

// ---------------------------------------------------------------------------
// document -> OTLP

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Hex id of at most 2*N digits, right-aligned (legacy writers dropped leading zeros).
template <size_t N>
bool ParseId(std::string_view hex, std::array<uint8_t, N>* out) {
  if (hex.empty() || hex.size() > 2 * N) return false;
  if (hex.size() == 2 * N) return FromHex(hex, out->data(), N);
  char padded[2 * N];
  std::memset(padded, '0', 2 * N - hex.size());
  std::memcpy(padded + 2 * N - hex.size(), hex.data(), hex.size());
  return FromHex(std::string_view(padded, 2 * N), out->data(), N);
}

bool GetU64(element e, uint64_t* out) {
  switch (e.type()) {
    case element_type::UINT64:
      *out = e.get_uint64().value_unsafe();
      return true;
    case element_type::INT64: {
      int64_t v = e.get_int64().value_unsafe();
      if (v < 0) return false;
      *out = static_cast<uint64_t>(v);
      return true;
    }
    case element_type::DOUBLE: {
      double v = e.get_double().value_unsafe();
      if (!(v >= 0) || v > 1.8e19) return false;
      *out = static_cast<uint64_t>(v);
      return true;
    }
    case element_type::STRING: {
      std::string_view s = e.get_string().value_unsafe();
      auto res = std::from_chars(s.data(), s.data() + s.size(), *out);
      return res.ec == std::errc() && IsWhole(s, res.ptr);
    }
    default:
      return false;
  }
}

// A JSON value as the text of a string attribute.
std::string ValueText(element v) {
  std::string out;
  switch (v.type()) {
    case element_type::STRING:
      return std::string(v.get_string().value_unsafe());
    case element_type::BOOL:
      return v.get_bool().value_unsafe() ? "true" : "false";
    case element_type::INT64:
      codec::AppendInt(out, v.get_int64().value_unsafe());
      return out;
    case element_type::UINT64:
      codec::AppendUint(out, v.get_uint64().value_unsafe());
      return out;
    case element_type::DOUBLE:
      codec::AppendDouble(out, v.get_double().value_unsafe());
      return out;
    case element_type::NULL_VALUE:
      return "";
    default:
      return simdjson::minify(v);
  }
}

struct TypedValue {
  ValueType type = ValueType::kString;
  std::string text;  // converted; or, `borrowed` set, `view` is the document's own text
  std::string_view view;
  bool borrowed = false;
  std::string_view str() const { return borrowed ? view : std::string_view(text); }
  bool operator==(const TypedValue& o) const { return type == o.type && str() == o.str(); }
};

// A string of the document as a string attribute, not copied.
TypedValue Borrowed(std::string_view s) {
  return {ValueType::kString, {}, s, true};
}

// A document key-value's value by its declared type ("" : by its JSON type,
// for tags stored as fields). What does not fit its type is kept as a string.
TypedValue ConvertValue(std::string_view type, element v) {
  TypedValue out;
  const element_type jt = v.type();
  if (type == "bool" || (type.empty() && jt == element_type::BOOL)) {
    if (jt == element_type::BOOL) {
      return {ValueType::kBool, v.get_bool().value_unsafe() ? "true" : "false", {}, false};
    }
    if (jt == element_type::STRING) {
      std::string_view s = v.get_string().value_unsafe();
      if (s == "true" || s == "false") return {ValueType::kBool, std::string(s), {}, false};
    }
  } else if (type == "int64" ||
             (type.empty() && (jt == element_type::INT64 || jt == element_type::UINT64))) {
    if (jt == element_type::INT64) {
      codec::AppendInt(out.text, v.get_int64().value_unsafe());
      out.type = ValueType::kInt;
      return out;
    }
    if (jt == element_type::DOUBLE) {
      double d = v.get_double().value_unsafe();
      if (std::trunc(d) == d && std::fabs(d) < 9.2e18) {
        codec::AppendInt(out.text, static_cast<int64_t>(d));
        out.type = ValueType::kInt;
        return out;
      }
    }
    if (jt == element_type::STRING) {
      std::string_view s = v.get_string().value_unsafe();
      int64_t i = 0;
      auto res = std::from_chars(s.data(), s.data() + s.size(), i);
      if (res.ec == std::errc() && IsWhole(s, res.ptr)) {
        codec::AppendInt(out.text, i);
        out.type = ValueType::kInt;
        return out;
      }
    }
  } else if (type == "float64" || (type.empty() && jt == element_type::DOUBLE)) {
    double d = 0;
    bool ok = true;
    if (jt == element_type::DOUBLE) {
      d = v.get_double().value_unsafe();
    } else if (jt == element_type::INT64) {
      d = static_cast<double>(v.get_int64().value_unsafe());
    } else if (jt == element_type::UINT64) {
      d = static_cast<double>(v.get_uint64().value_unsafe());
    } else if (jt == element_type::STRING) {
      std::string_view s = v.get_string().value_unsafe();
      if (s == "NaN") {
        d = std::nan("");
      } else if (s == "Infinity" || s == "+Inf") {
        d = HUGE_VAL;
      } else if (s == "-Infinity" || s == "-Inf") {
        d = -HUGE_VAL;
      } else {
        auto res = std::from_chars(s.data(), s.data() + s.size(), d);
        ok = res.ec == std::errc() && IsWhole(s, res.ptr);
      }
    } else {
      ok = false;
    }
    if (ok) {
      codec::AppendDouble(out.text, d);
      out.type = ValueType::kDouble;
      return out;
    }
  } else if (type == "binary" && jt == element_type::STRING) {
    std::string_view s = v.get_string().value_unsafe();
    if (s.size() % 2 == 0) {
      out.text.resize(s.size() / 2);
      if (FromHex(s, reinterpret_cast<uint8_t*>(out.text.data()), out.text.size())) {
        out.type = ValueType::kBytes;
        return out;
      }
    }
  }
  if (jt == element_type::STRING) return Borrowed(v.get_string().value_unsafe());
  return {ValueType::kString, ValueText(v), {}, false};
}

struct Kv {
  std::string_view key;
  std::string_view type;
  element value;
};

// Sets `out` to the key-values of a `tags`/`fields` array (entries without a
// string key are skipped).
void KeyValues(element arr, std::vector<Kv>* out) {
  out->clear();
  simdjson::dom::array a;
  if (arr.get_array().get(a) != simdjson::SUCCESS) return;
  for (element e : a) {
    simdjson::dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) continue;
    // One pass over the entry's fields (the first of each name counts).
    Kv kv;
    bool has_key = false, has_type = false, has_value = false;
    for (auto field : o) {
      if (field.key == "key") {
        if (!has_key && field.value.is_string()) kv.key = field.value.get_string().value_unsafe();
        has_key = true;
      } else if (field.key == "type") {
        if (!has_type && field.value.is_string()) kv.type = field.value.get_string().value_unsafe();
        has_type = true;
      } else if (field.key == "value" && !has_value) {
        kv.value = field.value;
        has_value = true;
      }
    }
    if (kv.key.data() == nullptr || !has_value) continue;
    if (kv.type.data() == nullptr) kv.type = "string";
    out->push_back(kv);
  }
}

// Tags stored as object fields (`tag`: {"http@method": "GET"}): '@' stood for '.'.
void AppendFieldTags(element obj, std::vector<std::pair<std::string, element>>* out) {
  simdjson::dom::object o;
  if (obj.get_object().get(o) != simdjson::SUCCESS) return;
  for (auto field : o) {
    std::string key(field.key);
    for (char& c : key) {
      if (c == '@') c = '.';
    }
    out->emplace_back(std::move(key), field.value);
  }
}

}  // namespace

// What a decoder keeps across the documents of one batch.
struct DocumentDecoder::State {
  explicit State(SpanBatch* b) : out(b) {}
  // Keys and names stored once per batch (values are mostly each their own).
  static constexpr size_t kMaxSharedText = 64;
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  StrRef Text(std::string_view s) {
    if (s.empty()) return {};
    if (s.size() > kMaxSharedText) return out->AddString(s);
    auto it = texts.find(s);
    if (it != texts.end()) return it->second;
    const StrRef ref = out->AddString(s);
    texts.emplace(std::string(s), ref);
    return ref;
  }

  void AddAttr(AttrColumns& cols, std::string_view key, const TypedValue& v) {
    SpanBatch::AddAttr(cols, Text(key), v.type, out->AddString(v.str()));
  }

  // The resource of a process: one per distinct list of attributes.
  uint32_t Resource(std::string_view service, const std::vector<Kv>& tags,
                    const std::vector<std::pair<std::string, element>>& fields) {
    std::vector<std::pair<std::string_view, TypedValue>>& attrs = resource_attrs;
    attrs.clear();
    if (!service.empty() && service != kNoServiceName) {
      attrs.emplace_back("service.name", Borrowed(service));
    }
    for (const Kv& kv : tags) attrs.emplace_back(kv.key, ConvertValue(kv.type, kv.value));
    for (const auto& [key, value] : fields) attrs.emplace_back(key, ConvertValue("", value));
    uint64_t h = attrs.size();
    for (const auto& [key, value] : attrs) {
      h = h * 0x9E3779B97F4A7C15ull ^ std::hash<std::string_view>()(key);
      h = h * 0x9E3779B97F4A7C15ull ^ std::hash<std::string_view>()(value.str());
      h = h * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(value.type);
    }
    SpanBatch& b = *out;
    if (auto it = resources.find(h); it != resources.end()) {
      const Range range = b.resources.attrs[it->second];
      bool same = range.end - range.begin == attrs.size();
      for (uint32_t i = 0; same && i < attrs.size(); ++i) {
        const uint32_t a = range.begin + i;
        same = b.Str(b.resource_attrs.key[a]) == attrs[i].first &&
               b.resource_attrs.type[a] == attrs[i].second.type &&
               b.Str(b.resource_attrs.value[a]) == attrs[i].second.str();
      }
      if (same) return it->second;
    }
    const uint32_t r = b.AddResource();
    const auto begin = static_cast<uint32_t>(b.resource_attrs.size());
    for (const auto& [key, value] : attrs) AddAttr(b.resource_attrs, key, value);
    b.resources.attrs[r] = {begin, static_cast<uint32_t>(b.resource_attrs.size())};
    b.ResolveServiceName(r);
    resources.emplace(h, r);
    return r;
  }

  // The scope of a span: one per resource, name and version.
  uint32_t Scope(uint32_t resource, std::string_view name, std::string_view version) {
    scope_key.assign(reinterpret_cast<const char*>(&resource), sizeof(resource));
    scope_key += name;
    scope_key += '\0';
    scope_key += version;
    if (auto it = scopes.find(scope_key); it != scopes.end()) return it->second;
    const uint32_t scope = out->AddScope();
    out->scopes.name[scope] = Text(name);
    out->scopes.version[scope] = Text(version);
    scopes.emplace(scope_key, scope);
    return scope;
  }

  SpanBatch* out;
  std::unordered_map<std::string, StrRef, TextHash, std::equal_to<>> texts;
  std::unordered_map<uint64_t, uint32_t> resources;  // by a hash of their attributes
  std::unordered_map<std::string, uint32_t> scopes;
  std::vector<std::pair<std::string_view, TypedValue>> resource_attrs;
  std::string scope_key;
  // A document's parts, kept to be reused by the next.
  std::vector<Kv> process_tags, tags, log_fields;
  std::vector<std::pair<std::string, element>> process_field_tags, field_tags;
  std::vector<std::pair<std::string_view, TypedValue>> attrs;
};

DocumentDecoder::DocumentDecoder(SpanBatch* out) : state_(std::make_unique<State>(out)) {}
DocumentDecoder::~DocumentDecoder() = default;

Status AppendSpanFromDocument(std::string_view json, SpanBatch* out) {
  DocumentDecoder decoder(out);
  return decoder.Append(json);
}

Status DocumentDecoder::Append(std::string_view json, size_t readable_past_end) {
  thread_local simdjson::dom::parser parser;
  State& st = *state_;
  SpanBatch* out = st.out;
  element doc;
  // In place where the bytes past the end may be read, else from a padded copy.
  const bool in_place = readable_past_end >= simdjson::SIMDJSON_PADDING;
  if (parser.parse(reinterpret_cast<const uint8_t*>(json.data()), json.size(), !in_place)
          .get(doc) != simdjson::SUCCESS) {
    return Status::Invalid("span document: not JSON");
  }
  simdjson::dom::object o;
  if (doc.get_object().get(o) != simdjson::SUCCESS) {
    return Status::Invalid("span document: not an object");
  }
  // The fields, in one pass (the first of each name counts).
  enum Field {
    kTraceId,
    kSpanId,
    kStartTime,
    kDuration,
    kProcess,
    kTags,
    kTag,
    kOperationName,
    kFlags,
    kParentSpanId,
    kReferences,
    kLogs,
    kFields
  };
  static constexpr std::string_view kNames[kFields] = {
      "traceID", "spanID",        "startTime", "duration",     "process",    "tags",
      "tag",     "operationName", "flags",     "parentSpanID", "references", "logs"};
  element fields[kFields];
  bool has[kFields] = {};
  for (auto field : o) {
    for (int f = 0; f < kFields; ++f) {
      if (field.key == kNames[f]) {
        if (!has[f]) fields[f] = field.value;
        has[f] = true;
        break;
      }
    }
  }
  std::string_view trace_hex;
  std::string_view span_hex;
  TraceId trace{};
  SpanId span{};
  if (!has[kTraceId] || fields[kTraceId].get_string().get(trace_hex) != simdjson::SUCCESS ||
      !ParseId(trace_hex, &trace)) {
    return Status::Invalid("span document: traceID missing or not hex");
  }
  if (!has[kSpanId] || fields[kSpanId].get_string().get(span_hex) != simdjson::SUCCESS ||
      !ParseId(span_hex, &span)) {
    return Status::Invalid("span document: spanID missing or not hex");
  }
  uint64_t start_us = 0;
  uint64_t duration_us = 0;
  if (!has[kStartTime] || !GetU64(fields[kStartTime], &start_us)) {
    return Status::Invalid("span document: startTime missing or not a number");
  }
  if (has[kDuration] && !GetU64(fields[kDuration], &duration_us)) {
    return Status::Invalid("span document: duration not a number");
  }

  // The resource: the process (one for every span of the same process).
  std::string_view service;
  std::vector<Kv>& process_tags = st.process_tags;
  std::vector<std::pair<std::string, element>>& process_field_tags = st.process_field_tags;
  process_tags.clear();
  process_field_tags.clear();
  if (has[kProcess] && fields[kProcess].is_object()) {
    const element process = fields[kProcess];
    Optional(process["serviceName"].get_string().get(service));
    element t;
    if (process["tags"].get(t) == simdjson::SUCCESS) KeyValues(t, &process_tags);
    if (process["tag"].get(t) == simdjson::SUCCESS) AppendFieldTags(t, &process_field_tags);
  }
  const uint32_t r = st.Resource(service, process_tags, process_field_tags);

  // Tags: the special ones become span fields, the others attributes.
  std::vector<Kv>& tags = st.tags;
  std::vector<std::pair<std::string, element>>& field_tags = st.field_tags;
  tags.clear();
  field_tags.clear();
  if (has[kTags]) KeyValues(fields[kTags], &tags);
  if (has[kTag]) AppendFieldTags(fields[kTag], &field_tags);
  std::string scope_name, scope_version, kind_name, status_code, status_message, trace_state;
  bool error_tag = false;
  bool has_status_message = false;
  std::vector<std::pair<std::string_view, TypedValue>>& attrs = st.attrs;
  attrs.clear();
  auto take = [&](std::string_view key, std::string_view type, element value) {
    if (key == "otel.scope.name" && value.is_string()) {
      scope_name = value.get_string().value_unsafe();
    } else if (key == "otel.scope.version" && value.is_string()) {
      scope_version = value.get_string().value_unsafe();
    } else if (key == "span.kind" && value.is_string()) {
      kind_name = value.get_string().value_unsafe();
    } else if (key == "otel.status_code" && value.is_string()) {
      status_code = value.get_string().value_unsafe();
    } else if (key == "otel.status_description" && value.is_string()) {
      status_message = value.get_string().value_unsafe();
      has_status_message = true;
    } else if (key == "w3c.tracestate" && value.is_string()) {
      trace_state = value.get_string().value_unsafe();
    } else if (key == "error" &&
               ConvertValue(type, value) == TypedValue{ValueType::kBool, "true", {}, false}) {
      error_tag = true;
    } else {
      attrs.emplace_back(key, ConvertValue(type, value));
    }
  };
  for (const Kv& kv : tags) take(kv.key, kv.type, kv.value);
  for (const auto& [key, value] : field_tags) take(key, "", value);

  uint8_t kind = 0;
  if (!kind_name.empty() && !ParseSpanKind(kind_name, &kind)) {
    attrs.emplace_back("span.kind", TypedValue{ValueType::kString, kind_name, {}, false});
    kind = 0;
  }
  StatusCodeOtlp status = StatusCodeOtlp::kUnset;
  if (error_tag) {
    status = StatusCodeOtlp::kError;
  } else if (status_code == "OK" || status_code == "ok") {
    status = StatusCodeOtlp::kOk;
  } else if (status_code == "ERROR" || status_code == "error") {
    status = StatusCodeOtlp::kError;
  }
  if (status == StatusCodeOtlp::kUnset && has_status_message) {
    // A description without a status is an ordinary attribute.
    attrs.emplace_back("otel.status_description",
                       TypedValue{ValueType::kString, status_message, {}, false});
    status_message.clear();
  }

  const uint32_t s = out->AddSpan(r, st.Scope(r, scope_name, scope_version));
  SpanBatch::Spans& sp = out->spans;
  sp.trace_id[s] = trace;
  sp.span_id[s] = span;
  std::string_view name;
  if (has[kOperationName]) Optional(fields[kOperationName].get_string().get(name));
  sp.name[s] = st.Text(name);
  uint64_t flags = 0;
  if (has[kFlags] && GetU64(fields[kFlags], &flags)) {
    sp.flags[s] = static_cast<uint32_t>(flags);
  }
  sp.kind[s] = kind;
  sp.start_ns[s] = start_us * 1000;
  sp.end_ns[s] = (start_us + duration_us) * 1000;
  sp.status_code[s] = static_cast<uint8_t>(status);
  sp.status_message[s] = st.Text(status_message);
  sp.trace_state[s] = st.Text(trace_state);
  const uint32_t attrs_begin = static_cast<uint32_t>(out->span_attrs.size());
  for (const auto& [key, value] : attrs) st.AddAttr(out->span_attrs, key, value);
  sp.attrs[s] = {attrs_begin, static_cast<uint32_t>(out->span_attrs.size())};

  // The parent: the deprecated field, else the first CHILD_OF reference in the trace.
  std::string_view parent_hex;
  bool has_parent = has[kParentSpanId] &&
                    fields[kParentSpanId].get_string().get(parent_hex) == simdjson::SUCCESS &&
                    !parent_hex.empty() && ParseId(parent_hex, &sp.parent_span_id[s]);
  // The parent, as Jaeger reads it: the first CHILD_OF reference within the
  // trace, else the first FOLLOWS_FROM one within it (a link to the parent
  // made the parent's reference FOLLOWS_FROM; it stays a link too). Every
  // other reference is a link; CHILD_OF ones say so in opentracing.ref_type.
  struct Ref {
    TraceId trace{};
    SpanId span{};
    bool child_of = false;
  };
  std::vector<Ref> parsed;
  simdjson::dom::array refs;
  if (has[kReferences] && fields[kReferences].get_array().get(refs) == simdjson::SUCCESS) {
    for (element ref : refs) {
      std::string_view type, rtrace_hex, rspan_hex;
      Ref r2;
      if (ref["traceID"].get_string().get(rtrace_hex) != simdjson::SUCCESS ||
          ref["spanID"].get_string().get(rspan_hex) != simdjson::SUCCESS ||
          !ParseId(rtrace_hex, &r2.trace) || !ParseId(rspan_hex, &r2.span)) {
        continue;
      }
      if (ref["refType"].get_string().get(type) != simdjson::SUCCESS) type = "CHILD_OF";
      r2.child_of = type == "CHILD_OF";
      parsed.push_back(r2);
    }
  }
  int parent_ref = -1;  // the CHILD_OF reference taken as the parent
  if (!has_parent) {
    for (size_t i = 0; i < parsed.size() && parent_ref < 0; ++i) {
      if (parsed[i].child_of && parsed[i].trace == trace) parent_ref = static_cast<int>(i);
    }
    if (parent_ref >= 0) {
      sp.parent_span_id[s] = parsed[static_cast<size_t>(parent_ref)].span;
    } else {
      for (const Ref& r2 : parsed) {
        if (r2.trace == trace) {
          sp.parent_span_id[s] = r2.span;
          break;
        }
      }
    }
  }
  const uint32_t links_begin = static_cast<uint32_t>(out->links.trace_id.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Ref& r2 = parsed[i];
    if (static_cast<int>(i) == parent_ref) continue;
    if (r2.child_of && r2.trace == trace && r2.span == sp.parent_span_id[s]) continue;
    const uint32_t l = out->AddLink();
    out->links.trace_id[l] = r2.trace;
    out->links.span_id[l] = r2.span;
    const uint32_t la = static_cast<uint32_t>(out->link_attrs.size());
    if (r2.child_of) {
      st.AddAttr(out->link_attrs, "opentracing.ref_type", Borrowed("child_of"));
    }
    out->links.attrs[l] = {la, static_cast<uint32_t>(out->link_attrs.size())};
  }
  sp.links[s] = {links_begin, static_cast<uint32_t>(out->links.trace_id.size())};

  const uint32_t events_begin = static_cast<uint32_t>(out->events.time_ns.size());
  simdjson::dom::array logs;
  if (has[kLogs] && fields[kLogs].get_array().get(logs) == simdjson::SUCCESS) {
    for (element log : logs) {
      uint64_t ts = 0;
      element t;
      if (log["timestamp"].get(t) != simdjson::SUCCESS || !GetU64(t, &ts)) continue;
      const uint32_t ev = out->AddEvent();
      out->events.time_ns[ev] = ts * 1000;
      std::vector<Kv>& fields = st.log_fields;
      fields.clear();
      if (log["fields"].get(t) == simdjson::SUCCESS) KeyValues(t, &fields);
      const uint32_t ea = static_cast<uint32_t>(out->event_attrs.size());
      bool named = false;
      for (const Kv& kv : fields) {
        if (!named && kv.key == "event" && kv.value.is_string()) {
          out->events.name[ev] = st.Text(kv.value.get_string().value_unsafe());
          named = true;
          continue;
        }
        st.AddAttr(out->event_attrs, kv.key, ConvertValue(kv.type, kv.value));
      }
      out->events.attrs[ev] = {ea, static_cast<uint32_t>(out->event_attrs.size())};
    }
  }
  sp.events[s] = {events_begin, static_cast<uint32_t>(out->events.time_ns.size())};
  return Status::Ok();
}

}  // namespace spanhouse::storage::opensearch
