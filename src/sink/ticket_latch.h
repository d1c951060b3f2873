// A ticket a caller can wait on: handed on in place of a record's ticket, it
// is cloned for each sink as usual; once every sink acknowledged its claim,
// the record's own ticket is acked and the waiter wakes. For a request whose
// answer says it is stored (an import from another store), without the
// sinks knowing anything of it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "sink/ticket.h"

namespace spanhouse::sink {

class TicketLatch final : public TicketIssuer {
 public:
  // Holds `inner` (maybe empty: no log) until every claim is released. The
  // latch lives until then, whatever its owner does.
  static std::shared_ptr<TicketLatch> Create(Ticket inner) {
    std::shared_ptr<TicketLatch> latch(new TicketLatch(std::move(inner)));
    latch->self_ = latch;
    return latch;
  }
  ~TicketLatch() = default;

  // The first claim (call once): what the sinks are handed.
  Ticket Take() {
    std::lock_guard<std::mutex> lock(mu_);
    ++claims_;
    return Make(this, SegmentOf(inner_), inner_.lsn(), OffsetOf(inner_), false);
  }
  // True once every claim was acknowledged; false at `deadline` (the claims
  // outstanding then are released later, or never: the record stays).
  bool WaitUntil(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return done_; });
  }
  // `fn` runs once every claim was acknowledged (at once if they were), on
  // the thread that acknowledged the last. One callback; a second replaces it.
  void OnDone(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_) {
        on_done_ = std::move(fn);
        return;
      }
    }
    fn();
  }

 private:
  explicit TicketLatch(Ticket inner) : inner_(std::move(inner)) {}

  Ticket Reclaim(uint64_t segment, uint64_t lsn, uint64_t offset, bool keep) override {
    if (keep) return inner_.Keep();  // a keep is on the record itself
    std::lock_guard<std::mutex> lock(mu_);
    ++claims_;
    return Make(this, segment, lsn, offset, false);
  }
  void Release(uint64_t /*segment*/, bool /*keep*/) override {
    std::shared_ptr<TicketLatch> self;  // the last claim: let go after the lock
    std::function<void()> on_done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--claims_ > 0) return;
      inner_.Ack();
      done_ = true;
      self = std::move(self_);
      on_done = std::move(on_done_);
      cv_.notify_all();
    }
    if (on_done) on_done();
  }

  Ticket inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  int claims_ = 0;                 // guarded by mu_
  bool done_ = false;              // guarded by mu_
  std::function<void()> on_done_;  // guarded by mu_
  std::shared_ptr<TicketLatch> self_;
};

}  // namespace spanhouse::sink
