// Jaeger's Elasticsearch/OpenSearch document format, both ways: the span
// documents of the daily `[<prefix>-]jaeger-span-YYYY-MM-DD` indices and the
// service/operation documents of `[<prefix>-]jaeger-service-YYYY-MM-DD`, as
// Jaeger v2 writes them from OTLP, so that a Jaeger query service on the same
// cluster reads what spanhouse wrote, and spanhouse reads what Jaeger wrote.
//
// OTLP -> document (what Jaeger's own writer does with the same spans):
// - tags: the scope's otel.scope.name / otel.scope.version, the span's
//   attributes, span.kind, then the status (OK: otel.status_code "OK"; ERROR:
//   error = true), otel.status_description, w3c.tracestate. Dropped counts
//   are not kept (Jaeger's format has no place for them).
// - the parent is the first reference (CHILD_OF); each link a FOLLOWS_FROM
//   reference, or CHILD_OF when its opentracing.ref_type attribute says so; a
//   link to the parent only sets the parent reference's type. Link attributes
//   and trace state are not kept.
// - events are logs; the event's name is the field "event" (first), unless
//   the event has an attribute of that name.
// - the process is the resource: serviceName = service.name (Jaeger's names
//   when it is missing, empty or not a string: "missing-service-name",
//   "empty-service-name", "service-name-wrong-type"), the other resource
//   attributes its tags, except span.kind and error, which Jaeger always keeps
//   as fields of `tag` ('.' written '@'), on the span too.
// - values: string, bool, int64 and float64 as JSON values of that type,
//   bytes as lowercase hex ("binary"), arrays and maps as their JSON text
//   ("string"); non-finite doubles as strings ("NaN").
//
// document -> OTLP reverses each rule, also for documents other writers made:
// legacy ids without leading zeros, the deprecated parentSpanID field, tags
// stored as fields (`tag`, `process.tag`, '@' for '.' in keys).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::storage::opensearch {

// "jaeger-span-" or "<prefix>-jaeger-span-" (Jaeger's rule for a prefix).
std::string SpanIndexBase(std::string_view prefix);
std::string ServiceIndexBase(std::string_view prefix);
// The base followed by the UTC date of `time_ns` as YYYY-MM-DD.
std::string DailyIndex(std::string_view base, uint64_t time_ns);

// A span document's _id: its trace id and span id in hex (a retried write of
// the same span is then the same document, refused with 409 by `create`).
std::string SpanDocumentId(const SpanBatch& b, uint32_t span);
void AppendSpanDocumentId(std::string& out, const SpanBatch& b, uint32_t span);
// A service document's _id as Jaeger makes it: FNV-1a (64) of the service
// name then the operation name, in lowercase hex without leading zeros.
std::string ServiceDocumentId(std::string_view service, std::string_view operation);
// That hash as a number (ServiceDocumentId is its hex).
uint64_t ServiceDocumentHash(std::string_view service, std::string_view operation);
void AppendServiceDocumentId(std::string& out, uint64_t hash);

// Renders span documents. Processes are rendered once per resource of the
// batch it was built for.
class DocumentWriter {
 public:
  explicit DocumentWriter(const SpanBatch& batch);
  // Appends the span document of `span` (no trailing newline).
  void AppendSpan(std::string& out, uint32_t span);
  // {"serviceName":..,"operationName":..}
  static void AppendService(std::string& out, std::string_view service, std::string_view operation);

 private:
  const std::string& Process(uint32_t resource);

  const SpanBatch& b_;
  std::vector<std::string> processes_;  // rendered "process" values; "" not yet
};

// Appends the span of one document (its _source JSON) to `out`, with a
// resource and a scope of its own. kInvalidArgument, naming the field, when
// the document is not a span (ids missing or not hex, times not numbers);
// `out` is then unchanged.
Status AppendSpanFromDocument(std::string_view json, SpanBatch* out);

// Decodes many documents into one batch (an import's page): the spans of
// one process share one resource, of one scope one scope, and keys and
// names are stored once, so the batch is as compact as an OTLP
// request of the same spans (a Jaeger document repeats its process, ~1 KB,
// in every span). Append is AppendSpanFromDocument otherwise; it parses in
// place when the caller says 64 bytes past `json`'s end may be read (any
// content), as in a request's body.
class DocumentDecoder {
 public:
  explicit DocumentDecoder(SpanBatch* out);
  ~DocumentDecoder();
  DocumentDecoder(const DocumentDecoder&) = delete;
  DocumentDecoder& operator=(const DocumentDecoder&) = delete;
  Status Append(std::string_view json, size_t readable_past_end = 0);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace spanhouse::storage::opensearch
