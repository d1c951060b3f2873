// `spanhouse loadgen`: sends generated traces to an OTLP/HTTP or OTLP/gRPC endpoint.
//
// Pre-generates --payloads OTLP/protobuf requests of whole traces (about
// --spans-per-request spans each) from --seed, then sends them round-robin
// over --connections keep-alive connections, flat out or at --rate spans/s,
// for --duration seconds or until --spans spans were sent. Every send patches
// fresh random ids and current timestamps into the bytes (payload.h), so the
// cost per request is a copy and a few XORs. 429/503 answers are retried
// after their Retry-After (at most 5 s, --max-retries times); other 4xx/5xx
// answers are counted as rejected. Progress goes to stderr once a second,
// the report to stdout (--json: one JSON line). --verify then polls the query
// API's span count for this run's loadgen.run_id resource attribute until it
// equals the accepted count.
//
// --corpus fresh generates the payloads from the fresh corpus (generator.h:
// concrete URLs, SQL literals, exception texts with ids, thousands of user
// agents) and implies --fresh-values, so replayed payloads stay fresh.
//
// --error-traces F makes exactly the share F of the traces sent (within
// rounding; per trace, from a hash of its fresh id, so also for replayed
// payloads) carry a failure: spans in status ERROR, one with a message; the
// others carry no ERROR status at all. --slow-traces F makes the share F
// (chosen the same way, independently) last --slow-ms or longer at the root;
// the others are shorter. The report counts the traces sent and accepted,
// failed and slow.
//
// Exit codes: 0 done; 1 --verify found stored != accepted, or nothing was
// accepted; 2 bad flags.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tools/loadgen/generator.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's namespace
class App;
}

namespace spanhouse::loadgen {

struct LoadgenOptions {
  // "http": OTLP/HTTP POSTs to `endpoint` over keep-alive connections.
  // "grpc": OTLP/gRPC Export calls to `endpoint` (host:port, or a URL whose
  // host and port are taken) over as many channels, `compression` gzip being
  // gRPC's own; UNAVAILABLE with RetryInfo is retried after its delay.
  std::string protocol = "http";
  std::string endpoint = "http://127.0.0.1:4318/v1/traces";
  int connections = 4;
  double rate = 0;         // spans/s over all connections; 0 = flat out
  double duration_s = 10;  // 0 = no time limit (then `spans` must be set)
  uint64_t spans = 0;      // stop after this many spans were sent; 0 = no limit
  size_t spans_per_request = 500;
  uint64_t seed = 1;
  size_t payloads = 64;  // 0 = generate every request afresh
  // Which corpus the payloads come from (generator.h); kFresh turns
  // fresh_values on too.
  CorpusKind corpus = CorpusKind::kReplay;
  // Fresh digits per send in the values real traffic rarely repeats
  // (payload.h: fresh values).
  bool fresh_values = false;
  std::string compression = "none";
  int max_retries = 5;
  double timeout_s = 10;
  bool verify = false;
  std::string query_endpoint = "http://127.0.0.1:16686";
  double verify_timeout_s = 60;
  bool json = false;
  bool quiet = false;
  // 0..1: the share of traces with a failure; < 0 (not given): the corpus's
  // own ~1% of failures, left as generated.
  double error_traces = -1;
  // 0..1: the share of traces whose root lasts slow_ms or longer, the others
  // kept shorter; < 0 (not given): durations as generated.
  double slow_traces = -1;
  uint64_t slow_ms = 2000;
};

struct LoadgenReport {
  std::string run_id;
  double elapsed_s = 0;
  uint64_t requests = 0;     // distinct requests sent (retries not counted)
  uint64_t requests_ok = 0;  // answered 2xx
  uint64_t spans_sent = 0;
  uint64_t spans_accepted = 0;
  // Traces in the requests sent, and in those answered 2xx (a partial
  // rejection of spans is not taken off): all, with a span in status ERROR,
  // with a root lasting slow_ms or longer.
  uint64_t traces_sent = 0;
  uint64_t traces_accepted = 0;
  uint64_t error_traces = 0;
  uint64_t error_traces_accepted = 0;
  uint64_t slow_traces = 0;
  uint64_t slow_traces_accepted = 0;
  uint64_t bytes_sent = 0;  // request bodies on the wire, retries included
  uint64_t rejected_requests = 0;
  uint64_t rejected_spans = 0;
  uint64_t retried = 0;    // attempts repeated after 429/503 or a connection error
  uint64_t throttled = 0;  // 429/503 answers
  uint64_t connection_errors = 0;
  double spans_per_s = 0;
  double latency_p50_ms = 0;
  double latency_p99_ms = 0;
  double latency_max_ms = 0;
  bool verified = false;  // --verify ran
  int64_t stored = -1;    // its last count; -1 if none was read
  // Seconds from the end of sending until the count read was all accepted
  // spans (polled every 0.5 s): how far storing lagged behind accepting.
  double verify_s = 0;
  bool verify_ok = false;
};

// Runs a load with `o`; fills `report` (if not null), prints progress and the
// report, and returns the exit code.
int RunLoadgen(const LoadgenOptions& o, LoadgenReport* report = nullptr);

// Adds the `loadgen` subcommand to `app`; after parsing, if it was chosen,
// `*run` runs it and returns the process exit code.
void AddLoadgenCommand(CLI::App& app, std::function<int()>* run);

}  // namespace spanhouse::loadgen
