// Per-sink queue sharded by trace id (the case study's queues "keyed by
// TraceId"): all spans of a trace go to one shard, so one writer sees a whole
// trace and an insert keeps a trace's spans together.
#pragma once

#include <memory>
#include <vector>

#include "common/memory_budget.h"
#include "sink/span_queue.h"

namespace spanhouse::sink {

// The shard of a trace id among `shards` (stable across restarts).
size_t ShardOf(const TraceId& id, size_t shards);

class ShardedQueue {
 public:
  ShardedQueue(size_t shards, size_t max_bytes_per_shard);

  size_t shards() const { return shards_.size(); }
  SpanQueue& shard(size_t i) { return *shards_[i]; }

  // Splits the item's batch by trace id and queues each part with its share
  // of the reservation and a ticket of its own; a replayed block goes whole
  // to the shard it was sealed by (any shard could write it: its token makes
  // it once). What bounds the pipeline is the memory budget behind the
  // reservation, checked before decoding: give each shard a bound no smaller
  // than the budget, so a shard never refuses a part. Refused whole (closed,
  // or full with one shard), the item is the caller's again; a part refused
  // keeps its ticket unacked, so the record stays for the next start. Takes
  // the item (moved from) when it returns OK.
  Status Push(QueuedBatch& item);

  // The whole item to shard `shard` (modulo the count).
  Status PushTo(size_t shard, QueuedBatch& item);

  void Close();
  size_t bytes() const;

 private:
  std::vector<std::unique_ptr<SpanQueue>> shards_;
};

}  // namespace spanhouse::sink
