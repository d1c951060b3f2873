#include "sink/span_queue.h"

namespace spanhouse::sink {

Status SpanQueue::Push(QueuedBatch& item) {
  size_t bytes = 0;
  if (item.batch != nullptr) bytes = item.batch->MemoryBytes();
  if (item.block != nullptr) {
    for (const auto& p : item.block->parts) bytes += p->MemoryBytes();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Status::Unavailable("shutting down, retry later");
    // One batch larger than the whole queue is still accepted into an empty
    // queue, or it could never be.
    if (bytes_ + bytes > max_bytes_ && !items_.empty()) {
      return Status::Exhausted("queue full, retry later");
    }
    bytes_ += bytes;
    item.bytes = bytes;
    items_.push_back(std::move(item));
  }
  cv_.notify_one();
  return Status::Ok();
}

std::optional<QueuedBatch> SpanQueue::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; });
  if (items_.empty()) return std::nullopt;
  QueuedBatch b = std::move(items_.front());
  items_.pop_front();
  bytes_ -= b.bytes;
  return b;
}

void SpanQueue::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool SpanQueue::closed_and_empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_ && items_.empty();
}

bool SpanQueue::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

size_t SpanQueue::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace spanhouse::sink
