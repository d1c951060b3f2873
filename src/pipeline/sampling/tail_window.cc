#include "pipeline/sampling/tail_window.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/clock.h"

namespace spanhouse::pipeline {

TailWindow::TailWindow(TailSampler& sampler, Delivery& queue) : sampler_(sampler), queue_(queue) {
  thread_ = std::thread([this] { Loop(); });
}

TailWindow::~TailWindow() {
  Flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool TailWindow::Hold(std::unique_ptr<SpanBatch>& batch, Reservation& reservation,
                      sink::Ticket& ticket, size_t bytes, size_t spans, uint64_t now_ns) {
  // Observed and queued under one lock with a clock that never goes back
  // (receiver threads read it at slightly different moments), so the
  // windows open in the order the requests are held and close before the
  // requests are due.
  std::unique_lock<std::mutex> lock(mu_);
  now_ns = std::max(now_ns, last_ns_);
  last_ns_ = now_ns;
  bool decided = false;
  if (!sampler_.Observe(*batch, now_ns, &decided)) return false;
  // Late spans only (their traces decided) need not wait; after Flush
  // nothing does.
  Held h{now_ns + sampler_.options().decision_wait_ns,
         std::move(batch),
         std::move(reservation),
         std::move(ticket),
         bytes,
         spans};
  if (flushed_ || decided) {
    const bool flushed = flushed_;
    lock.unlock();
    std::lock_guard<std::mutex> tick(tick_mu_);
    if (flushed) sampler_.DecideDue(now_ns, /*all=*/true);
    HandOn(h, now_ns);
    return true;
  }
  held_.push_back(std::move(h));
  held_spans_ += spans;
  return true;
}

void TailWindow::HandOn(Held& h, uint64_t now_ns) {
  sampler_.Apply(*h.batch, h.ticket.lsn(), now_ns, /*count=*/true);
  if (Status st = queue_.DeliverAfterTail(std::move(h.batch), std::move(h.reservation),
                                          std::move(h.ticket), h.bytes, h.spans);
      !st.ok()) {
    // Only while shutting down; the record is replayed at the next start.
    spdlog::warn("tail sampling: a held request was not handed on: {}", st.message());
  }
}

void TailWindow::Tick(uint64_t now_ns, bool all) {
  std::lock_guard<std::mutex> tick(tick_mu_);
  sampler_.DecideDue(now_ns, all);
  std::vector<Held> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!held_.empty() && (all || held_.front().due_ns <= now_ns)) {
      held_spans_ -= held_.front().spans;
      due.push_back(std::move(held_.front()));
      held_.pop_front();
    }
  }
  for (Held& h : due) HandOn(h, now_ns);
  // A sink behind reads records back later: their decisions are kept until
  // it has caught up, so that it marks them as the others did.
  if (!queue_.AnyBacklogged()) sampler_.Forget(now_ns);
}

void TailWindow::Loop() {
  const auto period = std::chrono::nanoseconds(
      std::clamp<uint64_t>(sampler_.options().decision_wait_ns / 10, 1000000, 100000000));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period);
    if (stop_) break;
    lock.unlock();
    Tick(WallClockNs(), /*all=*/false);
    lock.lock();
  }
}

void TailWindow::Flush() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flushed_ = true;
  }
  Tick(WallClockNs(), /*all=*/true);
}

size_t TailWindow::held_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

size_t TailWindow::held_spans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_spans_;
}

}  // namespace spanhouse::pipeline
