#include "query/jaeger_json.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codec/json_writer.h"
#include "codec/value_text.h"
#include "model/service_name.h"

namespace spanhouse::query {

namespace {

using codec::Commas;

void AppendStringTag(std::string& out, std::string_view key, std::string_view value) {
  codec::AppendKeyValueHead(out, key, "string");
  codec::AppendJsonString(out, value);
  out += '}';
}

void AppendBoolTag(std::string& out, std::string_view key, bool value) {
  codec::AppendKeyValueHead(out, key, "bool");
  out += value ? "true" : "false";
  out += '}';
}

void AppendInt64Tag(std::string& out, std::string_view key, int64_t value) {
  codec::AppendKeyValueHead(out, key, "int64");
  codec::AppendInt(out, value);
  out += '}';
}

// The value of an int attribute (stored as decimal text) as a JSON number.
// Text that is not an int64 cannot come from the decoders; it is written as a
// JSON string so the document stays valid.
void AppendIntValue(std::string& out, std::string_view text) {
  int64_t v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  // Beyond +-(2^53 - 1) a JavaScript client (the Jaeger UI, Grafana, the
  // web UI) would round the number: such a value goes as a string, as
  // Jaeger's own query service sends it.
  constexpr int64_t kMaxSafe = (int64_t{1} << 53) - 1;
  if (res.ec == std::errc() && res.ptr == text.data() + text.size() && !text.empty() &&
      v >= -kMaxSafe && v <= kMaxSafe) {
    codec::AppendInt(out, v);
  } else {
    codec::AppendJsonString(out, text);
  }
}

// The value of a double attribute (stored as round-trip text, or "NaN",
// "Infinity", "-Infinity") as a JSON number; non-finite values as strings.
void AppendDoubleValue(std::string& out, std::string_view text) {
  if (text == "NaN" || text == "Infinity" || text == "-Infinity") {
    codec::AppendJsonString(out, text);
    return;
  }
  double v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec == std::errc() && res.ptr == text.data() + text.size() && !text.empty()) {
    codec::AppendJsonDouble(out, v);  // quotes any non-finite spelling too
  } else {
    codec::AppendJsonString(out, text);
  }
}

// One attribute as a typed Jaeger tag.
void AppendAttrTag(std::string& out, std::string_view key, ValueType type, std::string_view value) {
  switch (type) {
    case ValueType::kString:
      AppendStringTag(out, key, value);
      return;
    case ValueType::kBool:
      AppendBoolTag(out, key, value == "true");
      return;
    case ValueType::kInt:
      codec::AppendKeyValueHead(out, key, "int64");
      AppendIntValue(out, value);
      out += '}';
      return;
    case ValueType::kDouble:
      codec::AppendKeyValueHead(out, key, "float64");
      AppendDoubleValue(out, value);
      out += '}';
      return;
    case ValueType::kBytes:
      codec::AppendKeyValueHead(out, key, "binary");
      out += '"';
      codec::AppendBase64(out, value);
      out += "\"}";
      return;
    case ValueType::kArray:
    case ValueType::kKvList:
      // Jaeger has no structured tag type: the JSON text becomes a string.
      AppendStringTag(out, key, value);
      return;
    case ValueType::kEmpty:
    default:
      AppendStringTag(out, key, "");
      return;
  }
}

// Appends attributes [range) of `cols` as tags, skipping `skip_key` if given.
void AppendAttrTags(std::string& out, Commas& commas, const SpanBatch& b, const AttrColumns& cols,
                    Range range, std::string_view skip_key = {}) {
  for (uint32_t i = range.begin; i < range.end && i < cols.size(); ++i) {
    std::string_view key = b.Str(cols.key[i]);
    if (!skip_key.empty() && key == skip_key) continue;
    commas.Next();
    AppendAttrTag(out, key, cols.type[i], b.Str(cols.value[i]));
  }
}

// The body of a process object, without braces: "serviceName":..,"tags":[..].
// Two resources with equal bodies are the same Jaeger process.
std::string RenderProcessBody(const SpanBatch& b, uint32_t r) {
  std::string out;
  std::string_view service;
  Range attrs{};
  if (r < b.resources.attrs.size()) {
    service = b.Str(b.resources.service_name[r]);
    attrs = b.resources.attrs[r];
  }
  // Spans stored before the service was named at intake keep "".
  if (service.empty()) service = JaegerServiceName(b, r);
  out += "\"serviceName\":";
  codec::AppendJsonString(out, service);
  out += ",\"tags\":[";
  Commas commas(out);
  AppendAttrTags(out, commas, b, b.resource_attrs, attrs, "service.name");
  out += ']';
  return out;
}

void AppendSpanTags(std::string& out, const SpanBatch& b, uint32_t s) {
  const SpanBatch::Spans& sp = b.spans;
  out += "\"tags\":[";
  Commas commas(out);
  AppendAttrTags(out, commas, b, b.span_attrs, sp.attrs[s]);

  std::string_view kind = SpanKindName(sp.kind[s]);
  if (!kind.empty()) {
    commas.Next();
    AppendStringTag(out, "span.kind", kind);
  }
  switch (static_cast<StatusCodeOtlp>(sp.status_code[s])) {
    case StatusCodeOtlp::kError:
      commas.Next();
      AppendBoolTag(out, "error", true);
      commas.Next();
      AppendStringTag(out, "otel.status_code", "ERROR");
      break;
    case StatusCodeOtlp::kOk:
      commas.Next();
      AppendStringTag(out, "otel.status_code", "OK");
      break;
    default:
      break;
  }
  std::string_view status_message = b.Str(sp.status_message[s]);
  if (!status_message.empty()) {
    commas.Next();
    AppendStringTag(out, "otel.status_description", status_message);
  }
  uint32_t scope = sp.scope[s];
  if (scope < b.scopes.name.size()) {
    std::string_view name = b.Str(b.scopes.name[scope]);
    std::string_view version = b.Str(b.scopes.version[scope]);
    if (!name.empty()) {
      commas.Next();
      AppendStringTag(out, "otel.scope.name", name);
    }
    if (!version.empty()) {
      commas.Next();
      AppendStringTag(out, "otel.scope.version", version);
    }
  }
  std::string_view trace_state = b.Str(sp.trace_state[s]);
  if (!trace_state.empty()) {
    commas.Next();
    AppendStringTag(out, "w3c.tracestate", trace_state);
  }
  if (sp.dropped_attributes_count[s] != 0) {
    commas.Next();
    AppendInt64Tag(out, "otel.dropped_attributes_count", sp.dropped_attributes_count[s]);
  }
  if (sp.dropped_events_count[s] != 0) {
    commas.Next();
    AppendInt64Tag(out, "otel.dropped_events_count", sp.dropped_events_count[s]);
  }
  if (sp.dropped_links_count[s] != 0) {
    commas.Next();
    AppendInt64Tag(out, "otel.dropped_links_count", sp.dropped_links_count[s]);
  }
  out += ']';
}

// The parent first, then the links, as Jaeger's translator makes them: a
// link to the parent is folded into the parent's reference (which takes the
// link's type), and a link keeps the type its opentracing.ref_type names.
void AppendReferences(std::string& out, const SpanBatch& b, uint32_t s) {
  const SpanBatch::Spans& sp = b.spans;
  out += "\"references\":[";
  Commas commas(out);
  const Range links = sp.links[s];
  if (!IsZero(sp.parent_span_id[s])) {
    std::string_view type = "CHILD_OF";
    for (uint32_t l = links.begin; l < links.end; ++l) {
      if (LinksToParent(b, s, l)) type = JaegerRefType(b, l);
    }
    commas.Next();
    codec::AppendJaegerReference(out, type, sp.trace_id[s], sp.parent_span_id[s]);
  }
  for (uint32_t l = links.begin; l < links.end; ++l) {
    if (LinksToParent(b, s, l)) continue;
    commas.Next();
    codec::AppendJaegerReference(out, JaegerRefType(b, l), b.links.trace_id[l], b.links.span_id[l]);
  }
  out += ']';
}

void AppendLogs(std::string& out, const SpanBatch& b, uint32_t s) {
  out += "\"logs\":[";
  const Range events = b.spans.events[s];
  for (uint32_t e = events.begin; e < events.end; ++e) {
    if (e != events.begin) out += ',';
    out += "{\"timestamp\":";
    codec::AppendUint(out, b.events.time_ns[e] / 1000);
    out += ",\"fields\":[";
    Commas commas(out);
    commas.Next();
    AppendStringTag(out, "event", b.Str(b.events.name[e]));
    AppendAttrTags(out, commas, b, b.event_attrs, b.events.attrs[e]);
    if (b.events.dropped_attributes_count[e] != 0) {
      commas.Next();
      AppendInt64Tag(out, "otel.dropped_attributes_count", b.events.dropped_attributes_count[e]);
    }
    out += "]}";
  }
  out += ']';
}

void AppendSpan(std::string& out, const SpanBatch& b, uint32_t s, uint32_t process_number) {
  const SpanBatch::Spans& sp = b.spans;
  out += "{\"traceID\":";
  codec::AppendHexString(out, sp.trace_id[s]);
  out += ",\"spanID\":";
  codec::AppendHexString(out, sp.span_id[s]);
  // Jaeger's flags are the W3C trace flags (bit 0: sampled); OTLP keeps
  // more in the upper bits (e.g. 0x100: the parent's remoteness), which
  // Jaeger would misread. Left out when 0, as Jaeger does.
  if (const uint32_t flags = sp.flags[s] & 0xffu; flags != 0) {
    out += ",\"flags\":";
    codec::AppendUint(out, flags);
  }
  out += ",\"operationName\":";
  codec::AppendJsonString(out, b.Str(sp.name[s]));
  out += ',';
  AppendReferences(out, b, s);
  const uint64_t start = sp.start_ns[s];
  const uint64_t end = sp.end_ns[s];
  out += ",\"startTime\":";
  codec::AppendUint(out, start / 1000);
  out += ",\"duration\":";
  codec::AppendUint(out, end > start ? (end - start) / 1000 : 0);
  out += ',';
  AppendSpanTags(out, b, s);
  out += ',';
  AppendLogs(out, b, s);
  out += ",\"processID\":\"p";
  codec::AppendUint(out, process_number);
  out += "\",\"warnings\":null}";
}

}  // namespace

std::string RenderJaegerTraces(const SpanBatch& batch, std::string_view errors) {
  const SpanBatch::Spans& sp = batch.spans;
  const auto n = static_cast<uint32_t>(batch.span_count());

  // Group spans by trace, traces in order of first appearance.
  std::unordered_map<TraceId, uint32_t, TraceIdHash> trace_index;
  std::vector<std::vector<uint32_t>> traces;
  for (uint32_t s = 0; s < n; ++s) {
    auto [it, inserted] =
        trace_index.try_emplace(sp.trace_id[s], static_cast<uint32_t>(traces.size()));
    if (inserted) traces.emplace_back();
    traces[it->second].push_back(s);
  }

  // Process bodies, rendered once per resource row and compared by content.
  std::vector<std::string> process_body(batch.resources.attrs.size());
  std::vector<bool> process_rendered(batch.resources.attrs.size(), false);
  auto body_of = [&](uint32_t r) -> const std::string& {  // r < process_body.size()
    if (!process_rendered[r]) {
      process_body[r] = RenderProcessBody(batch, r);
      process_rendered[r] = true;
    }
    return process_body[r];
  };
  std::string orphan_body;  // for a span whose resource index is out of range

  std::string out;
  out.reserve(64 + static_cast<size_t>(n) * 512);
  out += "{\"data\":[";
  std::vector<uint32_t> process_of_span;
  std::vector<std::string_view> processes;  // bodies of this trace's processes, p1 first
  std::unordered_map<std::string_view, uint32_t> process_by_body;
  std::unordered_map<uint32_t, uint32_t> process_by_resource;
  for (size_t t = 0; t < traces.size(); ++t) {
    std::vector<uint32_t>& members = traces[t];
    std::stable_sort(members.begin(), members.end(), [&](uint32_t a, uint32_t b) {
      if (sp.start_ns[a] != sp.start_ns[b]) return sp.start_ns[a] < sp.start_ns[b];
      return sp.span_id[a] < sp.span_id[b];
    });

    processes.clear();
    process_by_body.clear();
    process_by_resource.clear();
    process_of_span.clear();
    for (uint32_t s : members) {
      const uint32_t r = sp.resource[s];
      auto known = process_by_resource.find(r);
      if (known != process_by_resource.end()) {
        process_of_span.push_back(known->second);
        continue;
      }
      std::string_view body;
      if (r < process_body.size()) {
        body = body_of(r);
      } else {
        if (orphan_body.empty()) orphan_body = RenderProcessBody(batch, r);
        body = orphan_body;
      }
      auto [it, inserted] =
          process_by_body.try_emplace(body, static_cast<uint32_t>(processes.size() + 1));
      if (inserted) processes.push_back(body);
      process_by_resource.emplace(r, it->second);
      process_of_span.push_back(it->second);
    }

    if (t != 0) out += ',';
    out += "{\"traceID\":";
    codec::AppendHexString(out, sp.trace_id[members.front()]);
    out += ",\"spans\":[";
    for (size_t k = 0; k < members.size(); ++k) {
      if (k != 0) out += ',';
      AppendSpan(out, batch, members[k], process_of_span[k]);
    }
    out += "],\"processes\":{";
    for (size_t p = 0; p < processes.size(); ++p) {
      if (p != 0) out += ',';
      out += "\"p";
      codec::AppendUint(out, p + 1);
      out += "\":{";
      out += processes[p];
      out += '}';
    }
    out += "},\"warnings\":null}";
  }
  out += "],\"total\":0,\"limit\":0,\"offset\":0,\"errors\":";
  out += errors;
  out += '}';
  return out;
}

std::string RenderJaegerError(int code, std::string_view message) {
  std::string out = "{\"data\":null,\"total\":0,\"limit\":0,\"offset\":0,\"errors\":[{\"code\":";
  codec::AppendInt(out, code);
  out += ",\"msg\":";
  codec::AppendJsonString(out, message);
  out += "}]}";
  return out;
}

}  // namespace spanhouse::query
