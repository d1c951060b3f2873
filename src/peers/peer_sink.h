// The peer sink: forwards the spans of the traces another spanhouse node owns
// to that node over OTLP/gRPC. One sink per other node, fed by the durable
// queue like any store, so a peer that is down costs a bounded backlog on
// this node's disk, not lost spans. A plug-in of the sink runtime
// (sink/runtime.h): the runtime queues, retries with backoff, drains and
// acknowledges; this file gathers spans into Export calls, says what a gRPC
// code means, dead-letters refused requests and, once the peer has failed
// for longer than handoff_after, hands the spans to this node instead.
//
// No seal (Write::key empty): an Export whose answer was lost (a timeout, a
// crash before the ack) is sent again, so the owner may receive a request
// twice; the owner's dedup at intake (dedup.enabled) drops the retried
// spans. The same holds for a handoff after a timeout: the peer may have
// stored what this node then decides too.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/forwarding.h"
#include "common/status.h"
#include "model/span_batch.h"
#include "peers/otlp_grpc_client.h"
#include "sink/runtime.h"

namespace spanhouse::peers {

struct PeerSinkOptions {
  // The sink's name, stable across restarts (the durable queue keys its
  // acknowledgements by it): "peer:<node>".
  std::string name;
  std::string self;     // this node's name: sent as x-spanhouse-forwarded-by
  std::string peer;     // the peer's name: the metrics' peer label, dead-letter file names
  std::string address;  // the peer's OTLP/gRPC listener, host:port
  // TLS to the peer's OTLP/gRPC listener (the receivers' certificate,
  // otlp_http.tls_cert): its certificate is checked against tls_ca_file
  // (PEM; empty: the system's roots) for tls_server_name (empty: the
  // address's host).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_server_name;
  // Sent as `authorization: Bearer <token>` (one of the peer's
  // auth.ingest_tokens); empty: none.
  std::string bearer_token;
  std::chrono::milliseconds timeout{10000};  // one Export call
  std::chrono::milliseconds max_reconnect_backoff{5000};
  // An Export holds at most this many spans and about this many bytes (at
  // most the peer's otlp_http.max_body_bytes, its gRPC message limit).
  size_t max_export_spans = 8192;
  size_t max_export_bytes = size_t{8} << 20;
  size_t queue_bytes = size_t{64} << 20;  // the runtime's queue; more waits on disk
  size_t writers = 1;                     // Export calls in flight at once
  sink::RetryPolicy retry;
  // Which traces the peer owns under a request's view (SpanBatch::peer_view): the spans
  // Select picks (a live request) and Keep keeps (a record read back from the backlog).
  // Null: every span.
  std::function<bool(const TraceId&, uint64_t view)> owns;
  // After the peer has failed without a success for handoff_after, a write
  // is no longer sent (unless the channel is connected again): its spans go
  // to decide_here (processed on this node) and the write is done. An error
  // from decide_here is retried like a failed Export. Zero or no callback:
  // never; the spans wait for the peer, bounded by the durable queue.
  std::chrono::milliseconds handoff_after{0};
  std::function<Status(std::unique_ptr<SpanBatch>)> decide_here;
  // Where requests the peer refused for good are kept
  // (peer-<peer>-<time>.pb, the ExportTraceServiceRequest as sent). Empty:
  // nowhere, so they stay in the durable queue.
  std::string dead_letter_dir;
};

// The counters of one peer sink beyond SinkStats.
struct PeerStats : sink::SinkStats {
  std::atomic<uint64_t> spans_forwarded{0};  // taken by the peer (rejected ones not included)
  std::atomic<uint64_t> exports{0};          // Export calls answered OK
  std::atomic<uint64_t> failures_retryable{0};
  std::atomic<uint64_t> failures_permanent{0};
  std::atomic<uint64_t> failures_unknown{0};
  std::atomic<uint64_t> spans_rejected{0};  // refused by the peer in a partial success
  std::atomic<uint64_t> spans_decided_here{0};
  std::atomic<uint64_t> handoffs{0};  // writes handed to decide_here
  std::atomic<uint64_t> dead_letter_files{0};
};

class PeerPlugin;

// The peer sink, not started. Fails for a CA file that cannot be read or
// options that make no sense.
Status MakePeerSink(PeerSinkOptions options, std::unique_ptr<sink::RuntimeSink>* out);

// The peer sink's plug-in: what the lead's wiring asks of a peer (its state
// for /readyz and the ring's live nodes).
class PeerPlugin final : public sink::Plugin {
 public:
  explicit PeerPlugin(PeerSinkOptions options, std::string tls_ca_pem = "");
  ~PeerPlugin() override;

  // Whether the last Export reached the peer (true before any).
  bool up() const { return up_.load(); }
  // How long the peer has failed without a success (zero: it has not).
  std::chrono::milliseconds down_for() const;
  const PeerStats& peer_stats() const { return stats_; }

  size_t shards() const override { return pending_.size(); }
  sink::SinkStats& stats() override { return stats_; }
  bool Select(const SpanBatch& batch, std::vector<uint32_t>* idx) const override;
  void Keep(sink::QueuedBatch& item) const override;
  void Add(size_t shard, sink::QueuedBatch item) override;
  void TakeDue(size_t shard, bool idle, bool flush,
               std::vector<std::unique_ptr<sink::Write>>* out) override;
  Status WriteOnce(size_t shard, sink::Write& w) override;
  sink::Failure Classify(const Status& st) const override;
  Status DeadLetter(size_t shard, sink::Write& w, const Status& why) override;
  void AppendMetrics(const std::string& name, PromText& out) const override;

 private:
  struct PeerWrite;
  struct ShardState;
  // Adds `b` to the shard's writes, split where one Export would be too
  // large; each write it went into is appended to `touched` once.
  void AddBatch(size_t shard, std::unique_ptr<SpanBatch> b, std::vector<PeerWrite*>* touched);
  // Adds `b` (encoded as `body`) to the shard's write, flushing first what
  // would be too large with it.
  void Place(size_t shard, std::unique_ptr<SpanBatch> b, std::string body,
             std::vector<PeerWrite*>* touched);
  PeerWrite& Pending(size_t shard);
  void Flush(size_t shard);
  bool HandoffDue() const;
  void MarkDown();
  Status HandOver(PeerWrite& w);

  const PeerSinkOptions opts_;
  OtlpGrpcClient client_;
  PeerStats stats_;
  std::vector<std::unique_ptr<ShardState>> pending_;  // per shard, its encoding thread's
  std::atomic<bool> up_{true};
  // When the current run of failures began (steady clock ns; 0: none).
  std::atomic<int64_t> failing_since_ns_{0};
  std::atomic<uint64_t> dead_letter_seq_{0};
  std::atomic<bool> handing_over_{false};  // logged once per outage
};

}  // namespace spanhouse::peers
