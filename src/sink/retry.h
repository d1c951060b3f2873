// The one retry loop of every sink: a write is attempted until it is stored,
// refused for good (then dead-lettered), or the sink stops past its limits
// (then left in the durable queue for the next start). What a failure means
// is the sink's answer (Classify); how long to wait between attempts
// (exponential backoff with jitter), how often an unknown failure is tried
// and when a stopping sink gives up are the loop's, the same for every sink.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string_view>

#include "common/status.h"
#include "sink/sink.h"

namespace spanhouse::sink {

// What a failed write's status says: the sink's Classify.
enum class Failure {
  kRetryable,  // the store is busy, down or slow: retried with backoff, for as long as it takes
  kPermanent,  // the data itself is refused: a retry cannot help, dead-lettered at once
  kUnknown,    // neither: retried RetryPolicy::unknown_attempts times, then permanent
};

struct RetryPolicy {
  // The wait between attempts doubles from backoff_min up to backoff_max;
  // each wait is 50-100% of its step, so writers that failed together do
  // not retry in lockstep.
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{5000};
  int unknown_attempts = 10;
  // Once the sink stops, a write failing for the stopping_attempts-th time
  // (counted from its first) stays in the durable queue, as does one still
  // failing at the drain deadline (counted from Stop).
  int stopping_attempts = 5;
  std::chrono::milliseconds drain_timeout{15000};
};

// Doubling waits with jitter.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max);
  // The next wait: 50-100% of the current step, which then doubles.
  std::chrono::milliseconds Next();

 private:
  std::chrono::milliseconds step_;
  const std::chrono::milliseconds max_;
  std::minstd_rand rng_{std::random_device{}()};
};

// Whether a sink is stopping, and its drain deadline. Stop wakes every
// retry loop that waits, so a drain never sleeps out a long backoff.
class StopSignal {
 public:
  using Clock = std::chrono::steady_clock;
  void Stop(std::chrono::milliseconds drain_timeout);
  bool stopping() const { return stopping_.load(); }
  bool past_deadline() const;
  // Waits `d`, less if the deadline comes first; returns early on Stop.
  void Sleep(std::chrono::milliseconds d);

 private:
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point deadline_ = Clock::time_point::max();  // guarded by mu_
};

enum class Delivered {
  kStored,      // the write succeeded
  kDeadLetter,  // refused for good: the caller dead-letters it
  kLeftQueued,  // the sink stopped before it was stored: it stays in the durable queue
};

// Attempts `attempt` until it succeeds, fails for good, or the sink is
// stopping and out of attempts or time. Counts attempts, failures by class
// and the time of each attempt in `stats`; logs each failure with `what`.
// The status of the last failure goes to `last` (if given).
Delivered Deliver(const std::function<Status()>& attempt,
                  const std::function<Failure(const Status&)>& classify, const RetryPolicy& policy,
                  StopSignal& stop, SinkStats& stats, std::string_view what,
                  Status* last = nullptr);

}  // namespace spanhouse::sink
