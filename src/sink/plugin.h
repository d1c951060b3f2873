// What a store adds to the sink runtime (runtime.h): how to gather queued
// spans into writes (encode), how to write one (write with its token), what a
// failure means (Classify) and where a write refused for good goes. The
// runtime does the rest, the same for every store: the queue sharded by
// trace id, the threads, retry with backoff, sealing and acknowledging, the
// drain at shutdown and the per-sink metrics.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/prom_text.h"
#include "common/status.h"
#include "sink/block.h"
#include "sink/retry.h"

namespace spanhouse::sink {

// One write a plugin made of queued spans: what the runtime seals, retries,
// acknowledges and dead-letters. A plugin derives from it to hold its
// encoded data.
struct Write {
  virtual ~Write() = default;
  size_t rows = 0;  // spans it stores (the sink's counters)
  // Spans it took from the queue and stores otherwise, not as spans (a
  // ClickHouse sink's sampled-out spans: narrow rows), so not in
  // rows_written.
  size_t other_rows = 0;
  // Of `rows`, refused one by one and dead-lettered by the plugin itself
  // while the write as a whole succeeded.
  size_t dead_lettered = 0;
  // Of `rows`, stored by an attempt although the write then failed for good
  // (the rest was refused): set by DeadLetter, counted as written.
  size_t stored = 0;
  size_t bytes_sent = 0;        // over the network to the store, every attempt (0: in this process)
  std::vector<Ticket> tickets;  // the records it holds: acked once it is stored or dead-lettered
  // Sealed under `key` before its first attempt (empty: never sealed; a
  // store idempotent by content needs no seal). A replayed block comes
  // sealed already.
  std::string key;
  uint32_t chunks = 1;  // how many pieces the store reads it as (the seal keeps it)
  SealedBlock sealed;   // its token: written with sealed.token
  std::chrono::steady_clock::time_point since;  // when its oldest span was queued
};

class Plugin {
 public:
  virtual ~Plugin() = default;

  // Shards of the sink's queue, each with an encoding and a writing thread.
  virtual size_t shards() const { return 1; }
  // Before the threads start (the store's set-up: templates, schema checks).
  virtual Status Start() { return Status::Ok(); }
  // After the threads stopped (Drain): what the store holds is let go.
  virtual void Stop() {}

  // The sink's counters: the runtime counts its writes there, the plugin
  // what it counts itself. A store with counters of its own returns an
  // extension of SinkStats.
  virtual SinkStats& stats() { return stats_; }

  // Which spans of a request this sink stores (Sink::Select).
  virtual bool Select(const SpanBatch& /*batch*/, std::vector<uint32_t>* /*idx*/) const {
    return false;
  }
  // Before an item is queued: drops what this sink does not store (a
  // replayed block holds whole records; Select made a live request's copy).
  virtual void Keep(QueuedBatch& /*item*/) const {}

  // Spans of `item` this sink stores (its pending rows).
  virtual size_t Rows(const QueuedBatch& item) const;
  // Which spans of a record a block sealed under `key` held (Sink::BlockMembers).
  virtual bool BlockMembers(std::string_view key, const SpanBatch& batch,
                            std::vector<uint32_t>* idx) const;
  // The shard a replayed block sealed under `key` goes to.
  virtual size_t BlockShard(std::string_view /*key*/) const { return 0; }

  // On shard `shard`'s encoding thread: takes one item into what it gathers.
  virtual void Add(size_t shard, QueuedBatch item) = 0;
  // Moves the writes due now into `out`: `idle`, the queue had nothing more
  // to give; `flush`, the sink stops: everything it holds.
  virtual void TakeDue(size_t shard, bool idle, bool flush,
                       std::vector<std::unique_ptr<Write>>* out) = 0;
  // How long the encoding thread may wait for the next item before a write
  // it holds is due.
  virtual std::chrono::milliseconds NextDue(size_t /*shard*/) const {
    return std::chrono::milliseconds(100);
  }

  // On shard `shard`'s writing thread: one attempt (the runtime retries).
  virtual Status WriteOnce(size_t shard, Write& w) = 0;
  virtual Failure Classify(const Status& st) const = 0;
  // Keeps a write refused for good (`why`) where an operator finds it; an
  // error leaves its records in the durable queue.
  virtual Status DeadLetter(size_t shard, Write& w, const Status& why) = 0;
  // The write is stored, dead-lettered or left in the durable queue
  // (`stored`: the first): what it holds may be let go.
  virtual void Finished(size_t /*shard*/, Write& /*w*/, bool /*stored*/) {}

  // The store's own /metrics families, labelled sink="<name>".
  virtual void AppendMetrics(const std::string& /*name*/, PromText& /*out*/) const {}

 private:
  SinkStats stats_;
};

}  // namespace spanhouse::sink
