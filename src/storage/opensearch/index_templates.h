// The index templates of Jaeger's span and service indices (the legacy
// `_template` API, which OpenSearch 1.x/2.x and Elasticsearch 7 take): the
// same field types Jaeger's own templates give, so that Jaeger's queries
// (nested tags, keyword terms, startTimeMillis as a date) work on indices
// spanhouse created.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spanhouse::storage::opensearch {

struct TemplateOptions {
  std::string index_prefix;  // "" or the prefix without its '-'
  uint32_t shards = 5;
  uint32_t replicas = 1;
};

// The template's name ("jaeger-span", "<prefix>-jaeger-span") and body.
std::string SpanTemplateName(const TemplateOptions& o);
std::string SpanTemplate(const TemplateOptions& o);
std::string ServiceTemplateName(const TemplateOptions& o);
std::string ServiceTemplate(const TemplateOptions& o);

}  // namespace spanhouse::storage::opensearch
