// Where a stage hands accepted requests on: the durable queue's Deliver, seen
// by the stages before it (tail sampling's window) without their knowing the
// queue, so the folders import one way.
#pragma once

#include <cstddef>
#include <memory>

#include "common/memory_budget.h"
#include "common/status.h"
#include "model/span_batch.h"
#include "sink/ticket.h"

namespace spanhouse::pipeline {

class Delivery {
 public:
  virtual ~Delivery() = default;
  // Hands an appended request's spans on (`batch` null: spilled, read back
  // from the log later). `bytes` and `spans`: the decoded batch's memory and
  // span count.
  virtual Status Deliver(std::unique_ptr<SpanBatch> batch, Reservation reservation,
                         sink::Ticket ticket, size_t bytes, size_t spans) = 0;
  // Deliver, after tail sampling decided the request: to the sinks that did not take it
  // before (the durable queue's before-tail sinks). Default: Deliver.
  virtual Status DeliverAfterTail(std::unique_ptr<SpanBatch> batch, Reservation reservation,
                                  sink::Ticket ticket, size_t bytes, size_t spans) {
    return Deliver(std::move(batch), std::move(reservation), std::move(ticket), bytes, spans);
  }
  // True when some sink is behind, reading requests back from disk.
  virtual bool AnyBacklogged() const = 0;
};

}  // namespace spanhouse::pipeline
