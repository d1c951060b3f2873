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
//
// Marks (TraceMarks, `loadgen --error-traces / --slow-traces`) are decided
// per send and per trace from the trace's fresh id (TraceChosen), so a
// replayed payload's traces are failed or slow in the given share whatever
// the payload. Each payload knows where its traces' roots and ERROR statuses
// lie (TraceSite, found by walking the encoded body once). A trace not chosen
// to fail has each of its ERROR statuses cleared in place, same length:
// code 2 -> 0 and the message's tag turned into that of an unknown field
// (15), which every protobuf decoder skips, so it decodes as no status at
// all. A trace chosen to be slow has its root's start moved `slow_ns`
// earlier (its children keep their times, so they stay inside it, and the
// whole trace still ends in the past).
//
// Fresh values (`loadgen --fresh-values`): the values real traffic rarely
// repeats (ids and numbers in URLs, SQL literals, exception messages, log
// lines, message ids and keys, search queries) get fresh digits per send.
// Each payload knows where, inside the string values of span and event
// attributes with such keys (kFreshKeys in payload.cc), the runs of 3 or
// more decimal digits (not after ':': ports and source lines stay) and of 8
// or more hex digits (letters and digits mixed) lie (ValueSite); the patch
// writes new digits of the same kind over each, same length, so the body's
// encoding does not change and the cost is a few random draws per span.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "codec/otlp_encode.h"
#include "model/span_batch.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen {

inline constexpr uint32_t kNoOffset = UINT32_MAX;

// An ERROR status in an encoded body: the byte offsets of its message's tag
// (kNoOffset if it has no message) and of its code's value.
struct StatusSite {
  uint32_t message_tag = kNoOffset;
  uint32_t code = kNoOffset;
};

// One trace of an encoded body, as the send patch sees it.
struct TraceSite {
  uint64_t id[2] = {0, 0};          // its trace id as two 8-byte words (memcpy, host order)
  uint32_t root_start = kNoOffset;  // its root span's start time (fixed64), if found
  uint64_t root_ns = 0;             // how long its root lasts
  uint32_t status_begin = 0;        // its ERROR statuses: Payload::statuses[begin, end)
  uint32_t status_end = 0;
};

// A run of digits inside an attribute's string value that fresh values
// rewrite.
struct ValueSite {
  enum Kind : uint8_t { kDecimal, kHexLower, kHexUpper };
  uint32_t offset = 0;
  uint16_t length = 0;
  Kind kind = kDecimal;
};

struct Payload {
  std::string body;  // ExportTraceServiceRequest
  codec::IdOffsets offsets;
  uint64_t base_ns = 0;  // start of its first trace
  uint32_t spans = 0;
  std::vector<TraceSite> traces;  // in order of first span
  std::vector<StatusSite> statuses;
  std::vector<ValueSite> values;  // for fresh values
};

// Fills p->traces and p->statuses from p->body (EncodeOtlpProto's output).
// False if the body does not decode; then they are left empty.
bool IndexTraces(Payload* p);

// What the send patch does with each trace, decided from its fresh id.
struct TraceMarks {
  // 0..1: this share of traces keeps its ERROR statuses, the others lose
  // them (payloads built with MarkShape::markable_errors have one failure
  // path in every trace). < 0: statuses stay as generated.
  double error_share = -1;
  // 0..1: this share of traces gets its root stretched by slow_ns (built with
  // MarkShape::max_root_ns = slow_ns, no root is that long before). < 0: none.
  double slow_share = -1;
  uint64_t slow_ns = 2'000'000'000;
};

// The traces one patched request holds.
struct TraceCounts {
  uint64_t traces = 0;
  uint64_t error_traces = 0;  // with a span in status ERROR
  uint64_t slow_traces = 0;   // whose root lasts slow_ns or longer
};

// Salts of TraceChosen for the two choices: independent of each other.
inline constexpr uint64_t kErrorChoice = 0x6572726f72ull;
inline constexpr uint64_t kSlowChoice = 0x736c6f77ull;

// Whether the trace whose id's two 8-byte words are (w0, w1) is among the
// `share` (0..1) of all traces for choice `salt`: a 64-bit hash of the id
// (its top 53 bits) compared with share * 2^53. Deterministic, and for
// random ids true with probability `share`.
inline bool TraceChosen(uint64_t w0, uint64_t w1, uint64_t salt, double share) {
  uint64_t s0 = w0 ^ salt;
  uint64_t s1 = SplitMix64(s0) ^ w1;
  const uint64_t h = SplitMix64(s1);
  return static_cast<double>(h >> 11) < share * 0x1p53;
}
inline bool TraceChosen(const TraceId& id, uint64_t salt, double share) {
  uint64_t w[2];
  std::memcpy(w, id.data(), 16);
  return TraceChosen(w[0], w[1], salt, share);
}

// Gap between the roots of consecutive traces within a payload.
inline constexpr uint64_t kTraceSpacingNs = 100'000;

// Appends whole traces of `gen` (at least `min_spans` spans) starting at
// `base_ns` and encodes them into `out` (IndexTraces included).
void BuildPayload(TraceGenerator& gen, size_t min_spans, uint64_t base_ns, Payload* out);

// `count` payloads from one generator seeded with `seed`, resources tagged
// with `run_id` (if not empty), traces shaped by `shape`. Payload i starts
// at base_ns + i * (its span count's worth of trace spacing), so the corpus
// covers a stretch of time.
std::vector<Payload> BuildPayloads(uint64_t seed, std::string_view run_id, size_t count,
                                   size_t min_spans, uint64_t base_ns, const MarkShape& shape = {});
// The same from the corpus `corpus` names.
std::vector<Payload> BuildPayloads(const CorpusOptions& corpus, std::string_view run_id,
                                   size_t count, size_t min_spans, uint64_t base_ns,
                                   const MarkShape& shape = {});

struct Patch {
  uint64_t trace_mask[2] = {0, 0};
  uint64_t span_mask = 0;
  int64_t time_delta_ns = 0;
  // Not 0: the value sites get digits drawn from this seed (fresh values).
  uint64_t value_seed = 0;

  // Fresh random masks (never all zero).
  static Patch Random(Rng& rng, int64_t time_delta_ns);
};

// Copies `p.body` into `*out` (reusing its capacity) with `patch` applied.
void ApplyPatch(const Payload& p, const Patch& patch, std::string* out);
// The same with `marks` applied too; `*counts` (if not null) gets the
// request's traces, failed and slow ones counted.
void ApplyPatch(const Payload& p, const Patch& patch, const TraceMarks& marks, std::string* out,
                TraceCounts* counts);
// Whether fresh values rewrite the values of attributes named `key`.
bool IsFreshValueKey(std::string_view key);
// Writes fresh digits over `p`'s value sites in `body` (a copy of p.body),
// drawn from `seed`.
void FreshValues(const Payload& p, uint64_t seed, std::string* body);
// Applies `patch` in place to an encoded body whose offsets are `offsets`.
void ApplyPatchInPlace(const codec::IdOffsets& offsets, const Patch& patch, std::string* body);

}  // namespace spanhouse::loadgen
