// OTLP trace decoders and response encoders shared by the receivers.
//
// Both decoders append to a SpanBatch and never allocate per span. On an
// error the batch holds a partial request and must be discarded by the caller;
// the Status carries a message fit for the client (HTTP 400 body).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::codec {

// opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest, protobuf wire format.
Status DecodeOtlpProto(std::string_view body, SpanBatch& out);

// The same message in the OTLP/JSON mapping: lowerCamelCase field names
// (snake_case accepted too), hex trace/span ids, enums as numbers or names,
// 64-bit integers as strings or numbers, bytes as base64.
Status DecodeOtlpJson(std::string_view body, SpanBatch& out);

// ExportTraceServiceResponse. With rejected == 0 and an empty message,
// partial_success is left out, as the specification asks.
std::string EncodeExportResponseProto(int64_t rejected_spans, std::string_view error_message);
std::string EncodeExportResponseJson(int64_t rejected_spans, std::string_view error_message);

}  // namespace spanhouse::codec
