#include "sink/retry.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace spanhouse::sink {

Backoff::Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max)
    : step_(std::max(min, std::chrono::milliseconds(1))), max_(std::max(max, step_)) {}

std::chrono::milliseconds Backoff::Next() {
  const auto step = step_;
  step_ = std::min(step_ * 2, max_);
  return step / 2 + std::chrono::milliseconds(rng_() % static_cast<uint64_t>(step.count() / 2 + 1));
}

void StopSignal::Stop(std::chrono::milliseconds drain_timeout) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    // A timeout past the clock's range: no deadline.
    deadline_ = drain_timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(
                                     Clock::time_point::max() - now)
                    ? Clock::time_point::max()
                    : now + drain_timeout;
    stopping_.store(true);
  }
  cv_.notify_all();
}

bool StopSignal::past_deadline() const {
  if (!stopping_.load()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return Clock::now() >= deadline_;
}

void StopSignal::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool was_stopping = stopping_.load();
  const auto now = Clock::now();
  auto until =
      d >= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)
          ? Clock::time_point::max()
          : now + d;
  until = std::min(until, deadline_);
  cv_.wait_until(lock, until, [&] { return stopping_.load() != was_stopping; });
}

Delivered Deliver(const std::function<Status()>& attempt,
                  const std::function<Failure(const Status&)>& classify, const RetryPolicy& policy,
                  StopSignal& stop, SinkStats& stats, std::string_view what, Status* last) {
  using Clock = std::chrono::steady_clock;
  Backoff backoff(policy.backoff_min, policy.backoff_max);
  int unknown = 0;
  for (int n = 1;; ++n) {
    // Stopping and out of time: not even one more attempt.
    if (stop.past_deadline()) return Delivered::kLeftQueued;
    const auto t0 = Clock::now();
    Status st = attempt();
    stats.write_seconds.Record(std::chrono::duration<double>(Clock::now() - t0).count());
    if (st.ok()) return Delivered::kStored;
    stats.write_errors += 1;
    if (last != nullptr) *last = st;
    const Failure kind = classify(st);
    if (kind == Failure::kUnknown) ++unknown;
    if (kind == Failure::kPermanent ||
        (kind == Failure::kUnknown && unknown >= policy.unknown_attempts)) {
      stats.permanent_errors += 1;
      return Delivered::kDeadLetter;
    }
    stats.retryable_errors += 1;
    spdlog::warn("{} failed (attempt {}): {}", what, n, st.message());
    if (stop.stopping() && (n >= policy.stopping_attempts || stop.past_deadline())) {
      return Delivered::kLeftQueued;
    }
    stop.Sleep(backoff.Next());
  }
}

}  // namespace spanhouse::sink
