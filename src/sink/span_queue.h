// A bounded, byte-accounted queue of SpanBatches between the receivers
// (producers) and one sink writer (the consumer).
//
// Bounded in bytes, not items: a request's memory is reserved when it is
// queued and released when the writer takes it, so a burst of large requests
// gets "retry later" instead of exhausting memory. Never blocks a producer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "common/status.h"
#include "model/span_batch.h"
#include "sink/block.h"

namespace spanhouse::sink {

class SpanQueue {
 public:
  explicit SpanQueue(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Takes `item` (moved from) unless refused: kResourceExhausted when full,
  // kUnavailable once closed; the item is then untouched.
  Status Push(QueuedBatch& item);

  // Waits up to `timeout` for a batch. Empty when the wait timed out, or when
  // the queue is closed and drained (then closed_and_empty() is true).
  std::optional<QueuedBatch> Pop(std::chrono::milliseconds timeout);

  // No more pushes; Pop keeps returning what is left.
  void Close();
  bool closed_and_empty() const;
  bool closed() const;

  size_t bytes() const;
  size_t max_bytes() const { return max_bytes_; }

 private:
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<QueuedBatch> items_;  // guarded by mu_
  size_t bytes_ = 0;               // guarded by mu_
  bool closed_ = false;            // guarded by mu_
};

}  // namespace spanhouse::sink
