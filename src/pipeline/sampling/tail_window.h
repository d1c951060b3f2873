// Tail sampling's window in the intake: each request's spans wait here,
// after their record is in the durable queue, until every trace they belong
// to is decided (TailSampler), then go to the sinks marked by the decisions.
//
// A request is held decision_wait from its arrival: its traces opened no
// later than that, so their windows have closed by then. Requests leave in
// the order they came, from one thread that ticks every tenth of the wait
// (at most 100 ms): it decides the traces whose window closed, then hands
// on the requests whose wait is over, then forgets old decisions (not while
// a sink has a backlog to read back). A
// request whose traces do not fit in the memory budget is not held (Hold
// says false): the caller spills it to the durable queue, where it is
// decided when read back. A request of late spans only (every trace of it
// decided) is marked and handed on at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "pipeline/delivery.h"
#include "pipeline/sampling/tail_sampler.h"

namespace spanhouse::pipeline {

class TailWindow {
 public:
  // `sampler` and `queue` must outlive the window.
  TailWindow(TailSampler& sampler, Delivery& queue);
  ~TailWindow();

  // Holds an appended request (its arguments as for DurableQueue::Deliver),
  // received at `now_ns`. False, and nothing taken, when its traces do not
  // fit in the memory budget.
  bool Hold(std::unique_ptr<SpanBatch>& batch, Reservation& reservation, sink::Ticket& ticket,
            size_t bytes, size_t spans, uint64_t now_ns);

  // Decides every open trace now and hands every held request on; later
  // ones are handed on at once. For shutdown, after the receivers stopped.
  void Flush();

  size_t held_requests() const;
  size_t held_spans() const;

 private:
  struct Held {
    uint64_t due_ns;
    std::unique_ptr<SpanBatch> batch;
    Reservation reservation;
    sink::Ticket ticket;
    size_t bytes;
    size_t spans;
  };
  void Loop();
  // Marks `h`'s spans by their traces' decisions and delivers it.
  void HandOn(Held& h, uint64_t now_ns);
  // Decides, hands on what is due (everything when `all`), forgets.
  void Tick(uint64_t now_ns, bool all);

  TailSampler& sampler_;
  Delivery& queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Held> held_;  // by mu_, in arrival order
  size_t held_spans_ = 0;  // by mu_
  uint64_t last_ns_ = 0;   // by mu_: the latest arrival time
  bool stop_ = false;      // by mu_
  bool flushed_ = false;   // by mu_: everything goes through at once
  std::mutex tick_mu_;     // one Tick at a time
  std::thread thread_;
};

}  // namespace spanhouse::pipeline
