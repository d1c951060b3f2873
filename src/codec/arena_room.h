// The check every decoder makes before it starts: StrRef offsets are 32-bit
// (31-bit into the arena, whose top bit marks the source), so a body whose
// decoding could push the batch's arena past that is refused up front (413)
// rather than decoded into wrapped offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::codec {

// `limit`: the largest arena offset the decoder may hand out; `growth`: the
// most bytes the decoder stores for one byte of body.
inline Status CheckArenaRoom(size_t body_size, const SpanBatch& out, uint64_t limit,
                             uint64_t growth) {
  const uint64_t arena = out.BeginString();
  if (static_cast<uint64_t>(body_size) > (limit - arena) / growth) {
    return Status::TooLarge("request of " + std::to_string(body_size) +
                            " bytes is too large to decode into one batch");
  }
  return Status::Ok();
}

}  // namespace spanhouse::codec
