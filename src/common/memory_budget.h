// Memory reserved for spans between the receiver and the store.
//
// A receiver reserves in proportion to a request's size *before* decoding
// it (Seastar/Redpanda habit), so a flood of large requests is refused with
// "retry later" up front instead of being decoded and then dropped. The
// reservation travels with the batch through the queue and is released only
// when the writer has stored its spans: the budget bounds everything in
// flight, not just what sits in the queue.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <utility>

namespace spanhouse {

class MemoryBudget {
 public:
  explicit MemoryBudget(size_t limit) : limit_(limit) {}

  // Takes `bytes` if they fit. A request larger than the whole budget is
  // still let in when nothing else is reserved, or it could never be.
  bool TryReserve(size_t bytes) {
    size_t cur = used_.load(std::memory_order_relaxed);
    while (true) {
      if (cur + bytes > limit_ && cur != 0) return false;
      if (used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel)) return true;
    }
  }
  // TryReserve, waiting up to `max_wait` for releases to make room. A short
  // wait smooths over the moments when the writer is busy with one insert:
  // refused at once, a client backs off for a second or more (Retry-After,
  // SDK backoff) although the room comes back within milliseconds.
  bool ReserveWithin(size_t bytes, std::chrono::milliseconds max_wait) {
    if (TryReserve(bytes)) return true;
    if (max_wait.count() <= 0) return false;
    std::unique_lock<std::mutex> lock(wait_mu_);
    waiters_.fetch_add(1);
    const bool ok = wait_cv_.wait_for(lock, max_wait, [&] { return TryReserve(bytes); });
    waiters_.fetch_sub(1);
    return ok;
  }
  // Unconditional: for growing a reservation that is already admitted.
  void ForceReserve(size_t bytes) { used_.fetch_add(bytes, std::memory_order_acq_rel); }
  void Release(size_t bytes) {
    used_.fetch_sub(bytes);
    // A waiter counts itself (under wait_mu_) before it tests for room, and
    // both sides use sequentially consistent operations: either it sees
    // this release, or this sees it waiting and wakes it.
    if (waiters_.load() > 0) {
      std::lock_guard<std::mutex> lock(wait_mu_);
      wait_cv_.notify_all();
    }
  }

  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
  std::atomic<int> waiters_{0};
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
};

// Owns `bytes` of a budget until destroyed or released; movable. With a
// `share` too, the same bytes of that second budget: a sink's cap on what
// it may hold of the whole (durable/sink_cursor.h), so that a sink that
// stops writing cannot take every byte from the others.
class Reservation {
 public:
  Reservation() = default;
  Reservation(MemoryBudget* budget, size_t bytes, MemoryBudget* share = nullptr)
      : budget_(budget), share_(share), bytes_(bytes) {}
  Reservation(Reservation&& o) noexcept
      : budget_(std::exchange(o.budget_, nullptr)),
        share_(std::exchange(o.share_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  Reservation& operator=(Reservation&& o) noexcept {
    if (this != &o) {
      Reset();
      budget_ = std::exchange(o.budget_, nullptr);
      share_ = std::exchange(o.share_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation() { Reset(); }

  // Grows or shrinks the reservation to `bytes` (growth is not refused:
  // the request was admitted on its estimate).
  void Resize(size_t bytes) {
    if (budget_ == nullptr) return;
    if (bytes > bytes_) Force(bytes - bytes_);
    if (bytes < bytes_) Give(bytes_ - bytes);
    bytes_ = bytes;
  }
  // Splits `bytes` off into a reservation of its own.
  Reservation Split(size_t bytes) {
    if (bytes > bytes_) bytes = bytes_;
    bytes_ -= bytes;
    return Reservation(budget_, bytes, share_);
  }
  // Takes the same bytes of `share` too, if it has room (and none is taken yet).
  bool TakeShare(MemoryBudget* share) {
    if (share_ != nullptr || !share->TryReserve(bytes_)) return false;
    share_ = share;
    return true;
  }
  void Reset() {
    if (budget_ != nullptr && bytes_ != 0) Give(bytes_);
    budget_ = nullptr;
    share_ = nullptr;
    bytes_ = 0;
  }
  size_t bytes() const { return bytes_; }

 private:
  void Force(size_t n) {
    budget_->ForceReserve(n);
    if (share_ != nullptr) share_->ForceReserve(n);
  }
  void Give(size_t n) {
    budget_->Release(n);
    if (share_ != nullptr) share_->Release(n);
  }
  MemoryBudget* budget_ = nullptr;
  MemoryBudget* share_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace spanhouse
