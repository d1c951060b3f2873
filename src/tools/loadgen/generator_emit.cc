// The scratch records written to a SpanBatch: one resource and one scope
// per (service, pod), each with its spans together.
#include "tools/loadgen/generator_builder.h"

namespace spanhouse::loadgen::corpus {
namespace {

void CopyAttrs(SpanBatch* out, AttrColumns& cols, const std::vector<AttrRec>& recs, uint32_t begin,
               uint32_t end, std::string_view text) {
  for (uint32_t a = begin; a < end; ++a) {
    const AttrRec& r = recs[a];
    SpanBatch::AddAttr(cols, out->AddString(r.key), r.type,
                       out->AddString(text.substr(r.off, r.len)));
  }
}

void AddResourceAttr(SpanBatch* out, std::string_view key, ValueType type, std::string_view value) {
  SpanBatch::AddAttr(out->resource_attrs, out->AddString(key), type, out->AddString(value));
}

}  // namespace

size_t TraceBuilder::Emit(SpanBatch* out) {
  GroupByResource();
  for (uint32_t g = 0; g < groups.size(); ++g) {
    uint32_t r = 0;
    uint32_t sc = 0;
    EmitResource(g, out, &r, &sc);
    for (size_t i = 0; i < spans.size(); ++i) {
      if (span_group[i] == g) EmitSpan(spans[i], r, sc, out);
    }
  }
  return spans.size();
}

// groups and span_group: each span's (service, pod), in order of first use.
void TraceBuilder::GroupByResource() {
  groups.clear();
  span_group.resize(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    const uint32_t key = static_cast<uint32_t>(spans[i].svc) << 16 | spans[i].pod;
    uint32_t g = 0;
    while (g < groups.size() && groups[g] != key) ++g;
    if (g == groups.size()) groups.push_back(key);
    span_group[i] = g;
  }
}

// The resource and scope of group `group`, added to `out`.
void TraceBuilder::EmitResource(uint32_t group, SpanBatch* out, uint32_t* resource,
                                uint32_t* scope) {
  const ServiceDef& sd = kServices[groups[group] >> 16];
  const Pod& pod = world.pods[groups[group] >> 16][groups[group] & 0xffff];
  const uint32_t r = out->AddResource();
  AddResourceAttr(out, "service.name", ValueType::kString, sd.name);
  AddResourceAttr(out, "service.version", ValueType::kString, sd.version);
  AddResourceAttr(out, "service.namespace", ValueType::kString, "shop");
  AddResourceAttr(out, "service.instance.id", ValueType::kString, pod.uid);
  AddResourceAttr(out, "deployment.environment", ValueType::kString, "production");
  AddResourceAttr(out, "host.name", ValueType::kString, pod.node);
  AddResourceAttr(out, "k8s.namespace.name", ValueType::kString, "shop");
  AddResourceAttr(out, "k8s.deployment.name", ValueType::kString, sd.name);
  AddResourceAttr(out, "k8s.pod.name", ValueType::kString, pod.name);
  AddResourceAttr(out, "k8s.node.name", ValueType::kString, pod.node);
  AddResourceAttr(out, "telemetry.sdk.name", ValueType::kString, "opentelemetry");
  AddResourceAttr(out, "telemetry.sdk.language", ValueType::kString, sd.language);
  AddResourceAttr(out, "telemetry.sdk.version", ValueType::kString, sd.sdk_version);
  if (!run_id.empty()) AddResourceAttr(out, "loadgen.run_id", ValueType::kString, run_id);
  out->resources.attrs[r].end = static_cast<uint32_t>(out->resource_attrs.size());
  out->resources.schema_url[r] = out->AddString("https://opentelemetry.io/schemas/1.24.0");
  out->ResolveServiceName(r);
  const uint32_t sc = out->AddScope();
  out->scopes.name[sc] = out->AddString(sd.scope);
  out->scopes.version[sc] = out->AddString(sd.scope_version);
  *resource = r;
  *scope = sc;
}

void TraceBuilder::EmitSpan(const SpanRec& s, uint32_t resource, uint32_t scope, SpanBatch* out) {
  const std::string_view txt = text;
  const uint32_t sp = out->AddSpan(resource, scope);
  SpanBatch::Spans& o = out->spans;
  o.trace_id[sp] = s.trace_id;
  o.span_id[sp] = s.id;
  o.parent_span_id[sp] = s.parent_id;
  o.flags[sp] = 0x101;  // sampled; has_is_remote known (false)
  o.name[sp] = out->AddString(s.name);
  o.kind[sp] = static_cast<uint8_t>(s.kind);
  o.start_ns[sp] = s.start;
  o.end_ns[sp] = s.end;
  o.status_code[sp] = static_cast<uint8_t>(s.status);
  if (!s.status_message.empty()) o.status_message[sp] = out->AddString(s.status_message);
  CopyAttrs(out, out->span_attrs, attrs, s.attr_begin, s.attr_end, txt);
  o.attrs[sp].end = static_cast<uint32_t>(out->span_attrs.size());
  for (uint32_t e = s.event_begin; e < s.event_end; ++e) {
    const EventRec& er = events[e];
    const uint32_t ei = out->AddEvent();
    out->events.time_ns[ei] = er.time;
    out->events.name[ei] = out->AddString(er.name);
    CopyAttrs(out, out->event_attrs, event_attrs, er.attr_begin, er.attr_end, txt);
    out->events.attrs[ei].end = static_cast<uint32_t>(out->event_attrs.size());
  }
  o.events[sp].end = static_cast<uint32_t>(out->events.time_ns.size());
  for (uint32_t l = s.link_begin; l < s.link_end; ++l) {
    const uint32_t li = out->AddLink();
    out->links.trace_id[li] = links[l].trace_id;
    out->links.span_id[li] = links[l].span_id;
    out->links.flags[li] = 0x101;
  }
  o.links[sp].end = static_cast<uint32_t>(out->links.trace_id.size());
}

}  // namespace spanhouse::loadgen::corpus
