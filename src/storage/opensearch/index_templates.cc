#include "storage/opensearch/index_templates.h"

#include "storage/opensearch/jaeger_document.h"

namespace spanhouse::storage::opensearch {

namespace {

// A keyword field; values longer than 256 characters are kept in _source
// but not indexed (Jaeger's choice: tag values can be long).
constexpr std::string_view kKeyword = R"({"type":"keyword","ignore_above":256})";

std::string KeyValueMapping() {
  std::string m = R"({"type":"nested","dynamic":false,"properties":{"key":)";
  m += kKeyword;
  m += R"(,"value":)";
  m += kKeyword;
  m += R"(,"type":)";
  m += kKeyword;
  m += "}}";
  return m;
}

// Tags stored as fields (tag.*, process.tag.*) are keywords too.
std::string DynamicTemplates() {
  std::string m = R"("dynamic_templates":[{"span_tags_map":{"mapping":)";
  m += kKeyword;
  m += R"(,"path_match":"tag.*"}},{"process_tags_map":{"mapping":)";
  m += kKeyword;
  m += R"(,"path_match":"process.tag.*"}}])";
  return m;
}

std::string Head(std::string_view pattern, const TemplateOptions& o) {
  std::string t = R"({"index_patterns":[")";
  t += pattern;
  t += R"(*"],"settings":{"index.number_of_shards":)";
  t += std::to_string(o.shards);
  t += R"(,"index.number_of_replicas":)";
  t += std::to_string(o.replicas);
  t += R"(,"index.mapping.nested_fields.limit":50,"index.requests.cache.enable":true},)";
  t += R"("mappings":{)";
  t += DynamicTemplates();
  return t;
}

}  // namespace

std::string SpanTemplateName(const TemplateOptions& o) {
  std::string base = SpanIndexBase(o.index_prefix);
  base.pop_back();  // the trailing '-'
  return base;
}

std::string ServiceTemplateName(const TemplateOptions& o) {
  std::string base = ServiceIndexBase(o.index_prefix);
  base.pop_back();
  return base;
}

std::string SpanTemplate(const TemplateOptions& o) {
  const std::string kv = KeyValueMapping();
  std::string t = Head(SpanIndexBase(o.index_prefix), o);
  t += R"(,"properties":{)";
  for (std::string_view f : {"traceID", "parentSpanID", "spanID", "operationName"}) {
    t += '"';
    t += f;
    t += "\":";
    t += kKeyword;
    t += ',';
  }
  t += R"("startTime":{"type":"long"},"startTimeMillis":{"type":"date","format":"epoch_millis"},)";
  t += R"("duration":{"type":"long"},"flags":{"type":"integer"},)";
  t += R"("logs":{"type":"nested","dynamic":false,"properties":{"timestamp":{"type":"long"},)";
  t += R"("fields":)" + kv + "}},";
  t += R"("process":{"properties":{"serviceName":)";
  t += kKeyword;
  t += R"(,"tag":{"type":"object"},"tags":)" + kv + "}},";
  t += R"("references":{"type":"nested","dynamic":false,"properties":{"refType":)";
  t += kKeyword;
  t += R"(,"traceID":)";
  t += kKeyword;
  t += R"(,"spanID":)";
  t += kKeyword;
  t += "}},";
  t += R"("tag":{"type":"object"},"tags":)" + kv;
  t += "}}}";
  return t;
}

std::string ServiceTemplate(const TemplateOptions& o) {
  std::string t = Head(ServiceIndexBase(o.index_prefix), o);
  t += R"(,"properties":{"serviceName":)";
  t += kKeyword;
  t += R"(,"operationName":)";
  t += kKeyword;
  t += "}}}";
  return t;
}

}  // namespace spanhouse::storage::opensearch
