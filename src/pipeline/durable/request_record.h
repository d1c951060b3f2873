// What a receiver logs for a request it accepts (RecordKind::kRequest): the
// receiver's clock when it took the request, then the request as OTLP
// protobuf. Read back (replay, or a request that waited on disk for memory)
// the spans are filtered again against that clock, so the same spans are
// dropped as when the client was answered, however late the read.
//
// Payload, little-endian: u64 receive time (Unix ns), then the
// ExportTraceServiceRequest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spanhouse::pipeline::durable {

inline constexpr size_t kRequestHeadBytes = 8;

inline std::string RequestRecordHead(uint64_t received_ns) {
  std::string head(kRequestHeadBytes, '\0');
  for (size_t i = 0; i < kRequestHeadBytes; ++i)
    head[i] = static_cast<char>(received_ns >> (8 * i));
  return head;
}

// The receive time of a kRequest payload; false if it is too short.
inline bool RequestReceivedNs(std::string_view payload, uint64_t* received_ns) {
  if (payload.size() < kRequestHeadBytes) return false;
  uint64_t v = 0;
  for (size_t i = kRequestHeadBytes; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(payload[i]);
  *received_ns = v;
  return true;
}

}  // namespace spanhouse::pipeline::durable
