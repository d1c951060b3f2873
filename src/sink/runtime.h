// The sink runtime: a Sink made of a store's Plugin (plugin.h). It owns,
// once for every store:
// - the queue, sharded by trace id (a trace's spans meet in one write),
//   bounded in bytes (full: kResourceExhausted, the durable queue keeps the
//   rest on disk for this sink);
// - per shard, an encoding thread (the plugin gathers items into writes)
//   and a writing thread, with at most one write waiting between them, so
//   the next write is prepared while the store takes this one and a slow
//   store turns into back-pressure;
// - sealing each write in the ledger before its first attempt (when the
//   plugin names a key), retry with backoff and jitter as the plugin's
//   Classify says (retry.h), the dead letter for writes refused for good,
//   acknowledging their records once stored or dead-lettered;
// - the drain at shutdown: what is queued is written until the drain
//   deadline; what is still failing then stays in the durable queue;
// - the per-sink metrics (SinkStats, the lag).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sink/plugin.h"
#include "sink/sharded_queue.h"
#include "sink/sink.h"

namespace spanhouse::sink {

struct RuntimeOptions {
  std::string name;
  // The bound on the bytes queued in all its shards together: full, a push
  // is refused whole (kResourceExhausted), never split.
  size_t queue_bytes = size_t{64} << 20;
  RetryPolicy retry;
};

class RuntimeSink final : public Sink {
 public:
  RuntimeSink(std::unique_ptr<Plugin> plugin, RuntimeOptions options);
  ~RuntimeSink() override;

  const std::string& name() const override { return opts_.name; }
  void Attach(BlockLedger& ledger) override { ledger_ = &ledger; }
  bool BlockMembers(std::string_view key, const SpanBatch& batch,
                    std::vector<uint32_t>* idx) const override {
    return plugin_->BlockMembers(key, batch, idx);
  }
  bool Select(const SpanBatch& batch, std::vector<uint32_t>* idx) const override {
    return plugin_->Select(batch, idx);
  }
  Status Start() override;
  Status Push(QueuedBatch& item) override;
  void Drain() override;
  const SinkStats& stats() const override { return stats_; }
  size_t queued_bytes() const override { return queue_.bytes(); }
  void AppendMetrics(PromText& out) const override;

  Plugin& plugin() { return *plugin_; }
  const Plugin& plugin() const { return *plugin_; }
  // Seconds the oldest span not written yet has waited, held by this sink
  // or waiting for it on disk (0: caught up).
  double LagSeconds() const;

 private:
  struct Shard {
    std::thread encoder;
    std::thread writer;
    std::mutex mu;
    std::condition_variable cv;
    std::unique_ptr<Write> waiting;  // handed over, not yet taken; guarded by mu
    bool encoding_done = false;      // guarded by mu
    // The oldest write the writing thread holds (epoch: none); guarded by mu.
    std::chrono::steady_clock::time_point writing_since;
  };
  void Encode(size_t s);
  void WriteLoop(size_t s);
  void HandOff(size_t s, std::unique_ptr<Write> w);  // blocks while one waits
  void Deliver(size_t s, Write& w);
  void Ack(Write& w);
  void Join();

  const std::unique_ptr<Plugin> plugin_;
  const RuntimeOptions opts_;
  BlockLedger* ledger_ = nullptr;
  ShardedQueue queue_;
  SinkStats& stats_;  // the plugin's
  StopSignal stop_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_{false};  // the plugin's Stop called
};

}  // namespace spanhouse::sink
