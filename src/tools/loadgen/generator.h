// Deterministic generator of realistic e-commerce traces (the load and
// benchmark corpus). Same seed, same traces: benchmarks compare like with like.
//
// The world is fixed: 12 services (api-gateway, frontend, cart, checkout,
// payment, inventory, catalog, user, shipping, recommendation, email, search)
// on 296 pods, 60 gateway routes. A trace is the gateway's SERVER span for one
// route, an HTTP CLIENT/SERVER pair to the frontend, then gRPC CLIENT/SERVER
// pairs to services, database CLIENT spans (postgresql, redis, mongodb),
// INTERNAL spans and, on checkout and order cancellation, a kafka
// PRODUCER/CONSUMER pair (the consumer links to the producer). Spans carry
// about 20 attributes from the HTTP, RPC, DB and messaging semantic
// conventions plus app.* fields (user ids from 200k, random 63-bit order ids,
// skus from 20k, session and request ids, random client IPv4 addresses).
// About 1% of traces fail: a leaf span gets status ERROR with an exception
// event and its ancestors up to the root turn into 500s / gRPC INTERNAL.
// Durations are log-normal with rare 10x outliers; children lie inside their
// parent's time, except a kafka consumer, which runs after its producer.
// About 10% of spans have an event.
//
// Two corpora (CorpusOptions::kind). kReplay, the default, is the one every
// benchmark figure so far was measured on: URLs as route templates, SQL with
// placeholders, fixed exception texts, 12 user agents. kFresh draws, from a
// random stream of its own (so each trace is the replay corpus's same spans,
// times and attribute keys), the values real traffic carries there: concrete
// URLs with skus, order and user ids, SQL with literals, exception messages
// and stack traces with ids and addresses, log lines with the request id, and
// user agents from thousands, skewed as a real population is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "model/span_batch.h"

namespace spanhouse::loadgen {

namespace corpus {
struct TraceBuilder;
}  // namespace corpus

enum class CorpusKind : uint8_t { kReplay, kFresh };

struct CorpusOptions {
  uint64_t seed = 1;
  CorpusKind kind = CorpusKind::kReplay;
};

// "replay" / "fresh"; ParseCorpusKind is false for any other text.
const char* CorpusKindName(CorpusKind kind);
bool ParseCorpusKind(std::string_view text, CorpusKind* kind);

// Traces shaped so that the send patch (payload.h) can mark each one, per
// send, as failed or slow (`spanhouse loadgen --error-traces / --slow-traces`).
struct MarkShape {
  // No built-in failures; instead every trace carries one failure path in
  // status ERROR: a leaf with a status message, its ancestors up to the root
  // (stopping at a kafka consumer, as a built-in failure does; client spans
  // below the gateway with the message "INTERNAL"). No exception event and
  // no status-code attributes change: the patch keeps or clears the statuses
  // only. Drawn from a stream of its own, so the traces are otherwise the
  // default corpus's until its first built-in failure.
  bool markable_errors = false;
  // > 0: a trace whose root would last this long or longer is squeezed (every
  // time in it scaled about the root's start) so that its root lasts
  // max_root_ns - 1 ns: no trace is slow until the patch makes it so.
  uint64_t max_root_ns = 0;
};

class TraceGenerator {
 public:
  explicit TraceGenerator(CorpusOptions options);
  ~TraceGenerator();
  TraceGenerator(const TraceGenerator&) = delete;
  TraceGenerator& operator=(const TraceGenerator&) = delete;

  // Appends one whole trace (3-30 spans, its services' resources and scopes)
  // to `out`, the root span starting at `start_ns`. Returns the spans added.
  // The trace's spans are grouped by resource (one resource and one scope per
  // service the trace touches, each service on one pod drawn from all of its pods).
  size_t AppendTrace(uint64_t start_ns, SpanBatch* out);

  // Appends whole traces until at least `min_spans` spans were added, shaped
  // like one OTel Collector export: each service runs on up to 3 pods drawn for
  // this call, one resource and scope per (service, pod) used, the spans
  // grouped by resource (so EncodeOtlpProto writes one ResourceSpans each).
  // Trace k's root starts at start_ns + k * spacing_ns. Returns the spans added.
  size_t AppendTraces(uint64_t start_ns, uint64_t spacing_ns, size_t min_spans, SpanBatch* out);

  // Every resource generated from now on carries the string attribute
  // `loadgen.run_id` = `run_id` (nothing when empty, the default).
  void SetRunId(std::string_view run_id);

  // Traces generated from now on follow `shape` (default: not markable).
  void SetMarkShape(const MarkShape& shape);

 private:
  std::unique_ptr<corpus::TraceBuilder> builder_;
};

}  // namespace spanhouse::loadgen
