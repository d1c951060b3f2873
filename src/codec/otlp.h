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
// Strings are copied into the batch's arena, unless `body` is the batch's
// source (SpanBatch::AdoptSource), in which case they are referenced there.
Status DecodeOtlpProto(std::string_view body, SpanBatch& out);
// The same, the batch taking the body as its source (when it has none yet)
// so names, keys and string values are not copied but pointed to: the
// receiver's path, where the body would be freed right after anyway.
Status DecodeOtlpProtoOwned(std::string body, SpanBatch& out);

// The same message in the OTLP/JSON mapping: lowerCamelCase field names
// (snake_case accepted too), hex trace/span ids, enums as numbers or names,
// 64-bit integers as strings or numbers, bytes as base64.
Status DecodeOtlpJson(std::string_view body, SpanBatch& out);

// ExportTraceServiceResponse. With rejected == 0 and an empty message,
// partial_success is left out, as the specification asks.
std::string EncodeExportResponseProto(int64_t rejected_spans, std::string_view error_message);
std::string EncodeExportResponseJson(int64_t rejected_spans, std::string_view error_message);

}  // namespace spanhouse::codec
