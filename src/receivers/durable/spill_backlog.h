// Requests that wait on disk, not in memory: the durable queue's spill.
//
// With the durable queue on, a request is in the log before it is answered.
// When the memory budget is spent (the store is slow or down), a receiver
// still takes the request: it decodes and filters it as usual (transient
// memory, bounded by its I/O threads), appends the record, answers 200, and
// instead of queuing the batch it hands the record's hold to this backlog
// and frees the batch. So the disk, not the memory budget, is what a long
// outage fills, and 429 comes only when the durable queue is full.
//
// One thread feeds the backlog to the queue in arrival order: it reserves
// the request's memory (waiting for the writers to release some), reads the
// record back, decodes and filters it as when it was received
// (logged_request.h), and queues it with its hold. While anything waits
// here, receivers spill every new request too, so the backlog drains first
// and memory that comes free goes to the oldest spans.
//
// Stop() leaves what still waits in the log: those records are replayed at
// the next start, like any record not yet stored.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"

namespace spanhouse::receivers {

struct SpillStats {
  std::atomic<uint64_t> spilled_requests{0};  // handed over by receivers
  std::atomic<uint64_t> spilled_spans{0};
  std::atomic<uint64_t> queued_requests{0};  // read back and queued
  std::atomic<uint64_t> queued_spans{0};
  std::atomic<uint64_t> read_errors{0};  // records that could not be read back (kept for replay)
  std::atomic<uint64_t> waiting_requests{0};
  std::atomic<uint64_t> waiting_spans{0};
};

class SpillBacklog {
 public:
  // `filter` may be null.
  SpillBacklog(pipeline::durable::SegmentLog& log, pipeline::ShardedQueue& queue,
               pipeline::MemoryBudget& budget, pipeline::SpanFilter* filter);
  ~SpillBacklog();
  SpillBacklog(const SpillBacklog&) = delete;
  SpillBacklog& operator=(const SpillBacklog&) = delete;

  void Start();
  // Stops feeding; what still waits stays in the log for the next start.
  void Stop();

  // True while requests wait (from the first Add until the last is queued):
  // receivers spill instead of reserving memory meanwhile.
  bool waiting() const { return stats_.waiting_requests.load(std::memory_order_acquire) > 0; }
  // A record appended by a receiver (`ref` from SegmentLog::Append) whose
  // decoded batch took `bytes` of memory and held `spans` spans.
  void Add(pipeline::durable::SegmentLog::Ref ref, size_t bytes, size_t spans);

  const SpillStats& stats() const { return stats_; }

 private:
  struct Entry {
    pipeline::durable::SegmentLog::Ref ref;
    size_t bytes = 0;
    size_t spans = 0;
  };
  void Loop();
  bool Feed(Entry& e);  // false: stop feeding

  pipeline::durable::SegmentLog& log_;
  pipeline::ShardedQueue& queue_;
  pipeline::MemoryBudget& budget_;
  pipeline::SpanFilter* filter_;
  SpillStats stats_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> entries_;  // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace spanhouse::receivers
