// The OpenTelemetry entry of a W3C tracestate: the sampling threshold and
// randomness consistent probability sampling reads and writes.
//
// A tracestate is a list of `key=value` members split by ','; OpenTelemetry's
// member is `ot`, whose value is `sub:value` pairs split by ';'. Two of them
// matter here: `th`, the rejection threshold the span was sampled with (up
// to 14 hex digits, trailing zeros dropped: 0x8 = keep R >= 2^55, i.e.
// probability 1/2), and `rv`, an explicit 56-bit randomness (exactly 14 hex
// digits) in place of the trace id's last 7 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/span_batch.h"

namespace spanhouse::pipeline {

// 2^56: thresholds and randomness values are 56-bit; a threshold of
// kMaxThreshold would keep nothing.
inline constexpr uint64_t kMaxThreshold = 1ull << 56;

struct OtTraceState {
  bool has_th = false;
  uint64_t th = 0;  // [0, 2^56): keep when randomness >= th
  bool has_rv = false;
  uint64_t rv = 0;         // [0, 2^56)
  bool malformed = false;  // an ot entry whose th or rv could not be read (then ignored)
};

// Reads the `ot` member of `tracestate`; fields it lacks (or cannot read)
// are absent. Never allocates.
OtTraceState ParseOtTraceState(std::string_view tracestate);

// The threshold that keeps a share `probability` (0..1] of traces, rounded
// to `precision` significant hex digits (1..14), as the threshold would
// read back from its tracestate encoding. Probability 1 is threshold 0.
uint64_t ThresholdOf(double probability, int precision = 4);
// The probability a threshold keeps: (2^56 - th) / 2^56.
double ProbabilityOf(uint64_t th);
// `th`'s tracestate form: hex, 14 digits with the trailing zeros dropped;
// "0" for 0.
std::string EncodeThreshold(uint64_t th);

// `tracestate` with the ot member's th set to `th`, the ot member moved to
// the front (W3C: a changed member goes first), every other member and ot
// sub-key kept as it was.
std::string WithThreshold(std::string_view tracestate, uint64_t th);

// The randomness of a trace: the tracestate's rv, else the trace id's last
// 7 bytes as a big-endian number.
inline uint64_t RandomnessOf(const TraceId& id, const OtTraceState& ts) {
  if (ts.has_rv) return ts.rv;
  uint64_t r = 0;
  for (size_t i = 9; i < 16; ++i) r = (r << 8) | id[i];
  return r;
}

}  // namespace spanhouse::pipeline
