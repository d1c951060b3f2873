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
  // A decoded batch's columnar bytes (SpanBatch::AppendColumnar): what the
  // durable queue logs for a request it will read back, so the read-back is
  // copies, not a second decode. Never a receiver's.
  kColumnar = 5,
};

inline bool IsBodyFormat(uint8_t v) {
  return v >= static_cast<uint8_t>(BodyFormat::kOtlpProto) &&
         v <= static_cast<uint8_t>(BodyFormat::kColumnar);
}

// Decodes a request body (decompressed) of `format` into `batch`, which must
// be empty. A protobuf body is taken (moved into the batch as its source,
// which the batch's strings point into; `body` is left empty); a JSON body is
// only read (its strings are copied), so the caller keeps it, e.g. to log it.
// A columnar body is taken too.
Status DecodeBody(BodyFormat format, std::string& body, SpanBatch* batch);

// Request bodies decoded by DecodeBody in this process (OTLP and Zipkin;
// columnar bodies are read, not decoded): what the tests count to check
// that a request is decoded once.
uint64_t BodyDecodes();

}  // namespace spanhouse::codec
