// A slow disk for tests of the durable queue: LogTestHooks::before_sync
// set to Hook() holds each fdatasync back until Open(), so a test can act
// while a group commit is under way without guessing how long one takes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <semaphore>

namespace spanhouse::pipeline::durable {

class SyncGate {
 public:
  std::function<void()> Hook() {
    return [this] {
      entered_.release();
      std::unique_lock<std::mutex> lock(mu_);
      // Bounded, so that a test failing before Open() cannot hang the log's
      // Close() (it joins this thread).
      cv_.wait_for(lock, std::chrono::seconds(30), [this] { return open_; });
    };
  }
  // Waits until a sync has reached the gate; false after 10 s.
  bool WaitEntered() { return entered_.try_acquire_for(std::chrono::seconds(10)); }
  // Lets every sync through from now on.
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::counting_semaphore<> entered_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;  // guarded by mu_
};

}  // namespace spanhouse::pipeline::durable
