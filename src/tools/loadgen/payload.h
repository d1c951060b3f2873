// Pre-generated OTLP/protobuf request bodies, and the per-send patch that
// gives every send fresh ids and current timestamps without re-encoding.
//
// Each payload records where its ids and timestamps lie (codec::IdOffsets).
// A send copies the body and XORs one random 128-bit mask into every trace id
// and one random 64-bit mask into every span id (span_id, parent_span_id,
// link ids). XOR is a bijection applied alike to every occurrence, so ids stay
// unique within the request and parent/child and link references still match;
// fresh masks per send make ids unique across sends with overwhelming
// probability. A delta added to every fixed64 timestamp moves the traces to
// "now", so data lands in current partitions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/otlp_encode.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen {

struct Payload {
  std::string body;  // ExportTraceServiceRequest
  codec::IdOffsets offsets;
  uint64_t base_ns = 0;  // start of its first trace
  uint32_t spans = 0;
};

// Gap between the roots of consecutive traces within a payload.
inline constexpr uint64_t kTraceSpacingNs = 100'000;

// Appends whole traces of `gen` (at least `min_spans` spans) starting at
// `base_ns` and encodes them into `out`.
void BuildPayload(TraceGenerator& gen, size_t min_spans, uint64_t base_ns, Payload* out);

// `count` payloads from one generator seeded with `seed`, resources tagged
// with `run_id` (if not empty). Payload i starts at base_ns + i * (its span
// count's worth of trace spacing), so the corpus covers a stretch of time.
std::vector<Payload> BuildPayloads(uint64_t seed, std::string_view run_id, size_t count,
                                   size_t min_spans, uint64_t base_ns);

struct Patch {
  uint64_t trace_mask[2] = {0, 0};
  uint64_t span_mask = 0;
  int64_t time_delta_ns = 0;

  // Fresh random masks (never all zero).
  static Patch Random(Rng& rng, int64_t time_delta_ns);
};

// Copies `p.body` into `*out` (reusing its capacity) with `patch` applied.
void ApplyPatch(const Payload& p, const Patch& patch, std::string* out);
// Applies `patch` in place to an encoded body whose offsets are `offsets`.
void ApplyPatchInPlace(const codec::IdOffsets& offsets, const Patch& patch, std::string* body);

}  // namespace spanhouse::loadgen
