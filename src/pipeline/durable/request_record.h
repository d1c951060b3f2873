// What a receiver logs for a request it accepts: the receiver's clock when it
// took the request, then the request itself. Read back (replay, or a request
// that waited on disk for memory) the spans are filtered again against that
// clock, so the same spans are dropped as when the client was answered,
// however late the read.
//
// Two record kinds (segment_log.h):
//   kRequest (3), older logs: u64 receive time (Unix ns, little-endian), then
//     an OTLP ExportTraceServiceRequest in protobuf.
//   kEncodedRequest (4), written now: u64 receive time, u8 BodyFormat, then
//     the body in that format, after any Content-Encoding. The receivers log
//     a protobuf body (OTLP or Zipkin) as it came, and a JSON one (OTLP or
//     Zipkin) as OTLP protobuf encoded from the decoded batch (smaller); the
//     decoders read all four formats.
// Both replay; a kEncodedRequest with a format this build does not know is a
// bad record (counted and skipped, like a corrupt one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spanhouse::pipeline::durable {

// Which decoder a logged request body needs.
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

inline constexpr size_t kRequestHeadBytes = 8;         // kRequest
inline constexpr size_t kEncodedRequestHeadBytes = 9;  // kEncodedRequest

inline std::string RequestRecordHead(uint64_t received_ns) {
  std::string head(kRequestHeadBytes, '\0');
  for (size_t i = 0; i < kRequestHeadBytes; ++i)
    head[i] = static_cast<char>(received_ns >> (8 * i));
  return head;
}

inline std::string EncodedRequestRecordHead(uint64_t received_ns, BodyFormat format) {
  std::string head = RequestRecordHead(received_ns);
  head.push_back(static_cast<char>(format));
  return head;
}

// The receive time of a kRequest or kEncodedRequest payload; false if it is
// too short.
inline bool RequestReceivedNs(std::string_view payload, uint64_t* received_ns) {
  if (payload.size() < kRequestHeadBytes) return false;
  uint64_t v = 0;
  for (size_t i = kRequestHeadBytes; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(payload[i]);
  *received_ns = v;
  return true;
}

// The body format of a kEncodedRequest payload; false if it is too short or
// names no known format.
inline bool EncodedRequestFormat(std::string_view payload, BodyFormat* format) {
  if (payload.size() < kEncodedRequestHeadBytes) return false;
  const auto v = static_cast<uint8_t>(payload[kRequestHeadBytes]);
  if (!IsBodyFormat(v)) return false;
  *format = static_cast<BodyFormat>(v);
  return true;
}

}  // namespace spanhouse::pipeline::durable
