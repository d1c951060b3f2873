// Jaeger query-service JSON (the body of Jaeger's /api/traces and
// /api/traces/{id}), which Grafana's Jaeger data source and the Jaeger UI read.
//
// The OTLP -> Jaeger mapping follows the OpenTelemetry Collector's translator:
// the parent becomes a CHILD_OF reference and links FOLLOWS_FROM references;
// span kind, status, scope, trace state and dropped counts become the extra
// tags Jaeger users expect ("span.kind", "error", "otel.status_code", ...);
// events become logs whose first field is "event" = the event name; each
// distinct (service name, resource attributes) pair in a trace becomes a
// process "p1", "p2", ... in order of first use.
#pragma once

#include <string>
#include <string_view>

#include "model/span_batch.h"

namespace spanhouse::query {

// Renders every span of `batch` as Jaeger query-service JSON:
//   {"data":[trace...],"total":0,"limit":0,"offset":0,"errors":null}
// Spans are grouped by trace id (traces in order of first appearance; spans
// within a trace sorted by start time, then span id). The output is always
// valid JSON: strings are escaped and invalid UTF-8 replaced by U+FFFD.
// `errors` is the JSON of the envelope's errors member ("null", or Jaeger's
// per-trace errors of a lookup by several ids).
std::string RenderJaegerTraces(const SpanBatch& batch, std::string_view errors = "null");

// {"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]}
std::string RenderJaegerError(int code, std::string_view message);

}  // namespace spanhouse::query
