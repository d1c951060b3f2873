// The request body formats spanhouse takes, and the one decoder for each:
// what every receiver and the durable queue's read-back call.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::codec {

// Which decoder a body needs. The values are stored in the durable queue's
// records: never renumber them.
enum class BodyFormat : uint8_t {
  kOtlpProto = 1,    // ExportTraceServiceRequest, protobuf
  kOtlpJson = 2,     // ExportTraceServiceRequest, OTLP/JSON
  kZipkinJson = 3,   // Zipkin v2 JSON list of spans
  kZipkinProto = 4,  // zipkin.proto3.ListOfSpans
};

inline bool IsBodyFormat(uint8_t v) {
  return v >= static_cast<uint8_t>(BodyFormat::kOtlpProto) &&
         v <= static_cast<uint8_t>(BodyFormat::kZipkinProto);
}

// Decodes a request body (decompressed) of `format` into `batch`, which must
// be empty. A protobuf body is taken (moved into the batch as its source,
// which the batch's strings point into; `body` is left empty); a JSON body is
// only read (its strings are copied), so the caller keeps it, e.g. to log it.
Status DecodeBody(BodyFormat format, std::string& body, SpanBatch* batch);

}  // namespace spanhouse::codec
