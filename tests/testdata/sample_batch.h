// A hand-built SpanBatch that uses every field and value type: shared by the
// storage unit tests and the chDB integration tests.
#pragma once

#include <cstdint>
#include <string>

#include "model/span_batch.h"

namespace spanhouse::testdata {

inline TraceId MakeTraceId(uint8_t seed) {
  TraceId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(seed * 31 + i + 1);
  return id;
}

inline SpanId MakeSpanId(uint8_t seed) {
  SpanId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(seed * 17 + i + 1);
  return id;
}

// `traces` traces of 3 spans each over 2 resources; span i starts at base + i ms.
inline SpanBatch SampleBatch(int traces = 2, uint64_t base_ns = 1700000000000000000ull) {
  SpanBatch b;
  auto s = [&](std::string_view x) { return b.AddString(x); };
  auto add = [&](AttrColumns& cols, std::string_view k, ValueType t, std::string_view v) {
    SpanBatch::AddAttr(cols, s(k), t, s(v));
  };
  uint32_t r0 = b.AddResource();
  add(b.resource_attrs, "service.name", ValueType::kString, "frontend");
  add(b.resource_attrs, "host.cores", ValueType::kInt, "8");
  b.resources.attrs[r0].end = static_cast<uint32_t>(b.resource_attrs.size());
  b.resources.schema_url[r0] = s("https://opentelemetry.io/schemas/1.21.0");
  b.resources.dropped_attributes_count[r0] = 1;
  b.ResolveServiceName(r0);
  uint32_t r1 = b.AddResource();
  add(b.resource_attrs, "service.name", ValueType::kString, "db");
  add(b.resource_attrs, "tags", ValueType::kArray, "[\"a\",1,true]");
  b.resources.attrs[r1].begin = 2;
  b.resources.attrs[r1].end = static_cast<uint32_t>(b.resource_attrs.size());
  b.ResolveServiceName(r1);
  uint32_t sc = b.AddScope();
  b.scopes.name[sc] = s("io.opentelemetry.test");
  b.scopes.version[sc] = s("1.2.3");
  add(b.scope_attrs, "scope.attr", ValueType::kBool, "true");
  b.scopes.attrs[sc].end = 1;
  b.scopes.schema_url[sc] = s("https://example.com/scope");

  uint64_t t = base_ns;
  for (int tr = 0; tr < traces; ++tr) {
    for (int i = 0; i < 3; ++i, t += 1000000) {
      uint32_t sp = b.AddSpan(i == 2 ? r1 : r0, sc);
      b.spans.trace_id[sp] = MakeTraceId(static_cast<uint8_t>(tr));
      b.spans.span_id[sp] = MakeSpanId(static_cast<uint8_t>(tr * 3 + i));
      if (i > 0) b.spans.parent_span_id[sp] = MakeSpanId(static_cast<uint8_t>(tr * 3 + i - 1));
      b.spans.trace_state[sp] = s(i == 0 ? "vendor=x" : "");
      b.spans.flags[sp] = 1;
      b.spans.name[sp] = s(i == 0 ? "GET /cart" : i == 1 ? "cart.load" : "SELECT carts");
      b.spans.kind[sp] = static_cast<uint8_t>(i == 0 ? SpanKind::kServer : SpanKind::kClient);
      b.spans.start_ns[sp] = t;
      b.spans.end_ns[sp] = t + 1234567 + static_cast<uint64_t>(i);
      b.spans.status_code[sp] =
          static_cast<uint8_t>(i == 2 ? StatusCodeOtlp::kError : StatusCodeOtlp::kUnset);
      b.spans.status_message[sp] = s(i == 2 ? "deadlock\ndetected" : "");
      uint32_t a0 = static_cast<uint32_t>(b.span_attrs.size());
      add(b.span_attrs, "http.method", ValueType::kString, "GET");
      add(b.span_attrs, "http.status_code", ValueType::kInt, "-200");
      add(b.span_attrs, "ratio", ValueType::kDouble, "0.25");
      add(b.span_attrs, "cached", ValueType::kBool, "false");
      add(b.span_attrs, "blob", ValueType::kBytes, std::string("\x00\xff\x01", 3));
      add(b.span_attrs, "list", ValueType::kArray, "[1,2,3]");
      add(b.span_attrs, "map", ValueType::kKvList, "{\"k\":\"v\"}");
      add(b.span_attrs, "nothing", ValueType::kEmpty, "");
      b.spans.attrs[sp] = {a0, static_cast<uint32_t>(b.span_attrs.size())};
      b.spans.dropped_attributes_count[sp] = static_cast<uint32_t>(i);
      if (i == 1) {
        uint32_t e0 = b.AddEvent();
        b.events.time_ns[e0] = t + 10;
        b.events.name[e0] = s("cache miss");
        uint32_t ea = static_cast<uint32_t>(b.event_attrs.size());
        add(b.event_attrs, "key", ValueType::kString, "cart:42");
        add(b.event_attrs, "tries", ValueType::kInt, "3");
        b.events.attrs[e0] = {ea, static_cast<uint32_t>(b.event_attrs.size())};
        b.events.dropped_attributes_count[e0] = 2;
        uint32_t e1 = b.AddEvent();
        b.events.time_ns[e1] = t + 20;
        b.events.name[e1] = s("retry");
        b.spans.events[sp] = {e0, e1 + 1};
        b.spans.dropped_events_count[sp] = 4;
      }
      if (i == 2) {
        uint32_t l0 = b.AddLink();
        b.links.trace_id[l0] = MakeTraceId(99);
        b.links.span_id[l0] = MakeSpanId(99);
        b.links.trace_state[l0] = s("other=1");
        b.links.flags[l0] = 257;
        uint32_t la = static_cast<uint32_t>(b.link_attrs.size());
        add(b.link_attrs, "link.kind", ValueType::kString, "batch");
        b.links.attrs[l0] = {la, static_cast<uint32_t>(b.link_attrs.size())};
        b.links.dropped_attributes_count[l0] = 5;
        b.spans.links[sp] = {l0, l0 + 1};
        b.spans.dropped_links_count[sp] = 6;
      }
    }
  }
  return b;
}

// What the spans table keeps of a batch: everything but the resources' own
// columns (attributes, schema URL, dropped count), which the resources table
// holds; the service name stays with the span.
inline SpanBatch StoredPart(SpanBatch b) {
  for (size_t r = 0; r < b.resources.attrs.size(); ++r) {
    b.resources.attrs[r] = Range{};
    b.resources.schema_url[r] = StrRef{};
    b.resources.dropped_attributes_count[r] = 0;
  }
  return b;
}

}  // namespace spanhouse::testdata
