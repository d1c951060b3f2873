// OTLP/protobuf encoder: SpanBatch -> ExportTraceServiceRequest bytes. The inverse of
// DecodeOtlpProto (otlp.h): decoding what this writes gives a batch that LogicallyEquals the
// one encoded. Used by the load generator and by tests; not on the server's ingest path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/span_batch.h"

namespace spanhouse::codec {

// Where, in an encoded request, the ids and timestamps lie: byte offsets of the raw values
// (after the tag and length). A load generator rewrites them in place between sends.
struct IdOffsets {
  std::vector<uint32_t> trace_ids;  // 16 bytes each: span trace_id, link trace_id
  std::vector<uint32_t> span_ids;   // 8 bytes each: span_id, parent_span_id, link span_id
  std::vector<uint32_t> times;      // fixed64 little-endian: span start/end, event time

  void clear() {
    trace_ids.clear();
    span_ids.clear();
    times.clear();
  }
};

// One ResourceSpans per run of consecutive spans with the same resource, one ScopeSpans per
// run with the same (resource, scope) inside it, spans in batch order. A batch whose spans are
// grouped by resource therefore gives one ResourceSpans per resource used; resources and
// scopes no span uses are left out. Attribute values go back from their stored text
// (value_text.h) to typed AnyValues: arrays and kvlists are parsed from their JSON text.
std::string EncodeOtlpProto(const SpanBatch& batch);

// The same, appending to `out` (its capacity is reused) and, if `offsets` is not null,
// appending the offsets (relative to the start of `out`) of every id and timestamp to it.
void EncodeOtlpProto(const SpanBatch& batch, std::string* out, IdOffsets* offsets);

}  // namespace spanhouse::codec
