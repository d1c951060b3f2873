#include "tools/loadgen/payload.h"

#include <cstring>

namespace spanhouse::loadgen {

void BuildPayload(TraceGenerator& gen, size_t min_spans, uint64_t base_ns, Payload* out) {
  SpanBatch batch;
  out->spans = static_cast<uint32_t>(gen.AppendTraces(base_ns, kTraceSpacingNs, min_spans, &batch));
  out->base_ns = base_ns;
  out->body.clear();
  out->offsets.clear();
  codec::EncodeOtlpProto(batch, &out->body, &out->offsets);
}

std::vector<Payload> BuildPayloads(uint64_t seed, std::string_view run_id, size_t count,
                                   size_t min_spans, uint64_t base_ns) {
  TraceGenerator gen(CorpusOptions{seed});
  gen.SetRunId(run_id);
  std::vector<Payload> out(count);
  uint64_t t = base_ns;
  for (Payload& p : out) {
    BuildPayload(gen, min_spans, t, &p);
    t += kTraceSpacingNs * (p.spans / 4 + 1);  // ~4 spans a trace at least
  }
  return out;
}

Patch Patch::Random(Rng& rng, int64_t time_delta_ns) {
  Patch p;
  do {
    p.trace_mask[0] = rng.Next();
    p.trace_mask[1] = rng.Next();
  } while (p.trace_mask[0] == 0 && p.trace_mask[1] == 0);
  do p.span_mask = rng.Next();
  while (p.span_mask == 0);
  p.time_delta_ns = time_delta_ns;
  return p;
}

namespace {

inline void Xor64(char* at, uint64_t mask) {
  uint64_t v;
  std::memcpy(&v, at, 8);
  v ^= mask;
  std::memcpy(at, &v, 8);
}

inline void AddLe64(char* at, int64_t delta) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(at[i])) << (8 * i);
  v += static_cast<uint64_t>(delta);
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(v >> (8 * i));
}

}  // namespace

void ApplyPatchInPlace(const codec::IdOffsets& offsets, const Patch& patch, std::string* body) {
  char* b = body->data();
  for (uint32_t off : offsets.trace_ids) {
    Xor64(b + off, patch.trace_mask[0]);
    Xor64(b + off + 8, patch.trace_mask[1]);
  }
  for (uint32_t off : offsets.span_ids) Xor64(b + off, patch.span_mask);
  if (patch.time_delta_ns != 0) {
    for (uint32_t off : offsets.times) AddLe64(b + off, patch.time_delta_ns);
  }
}

void ApplyPatch(const Payload& p, const Patch& patch, std::string* out) {
  out->assign(p.body);
  ApplyPatchInPlace(p.offsets, patch, out);
}

}  // namespace spanhouse::loadgen
