// A sink for tests of what feeds sinks (the durable queue, the receivers):
// it keeps every item it is handed in a queue the test pops from, and can be
// made to refuse (a sink that is full, or down).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/durable/sink_cursor.h"
#include "pipeline/queue/span_queue.h"
#include "sink/sink.h"

namespace spanhouse::testdata {

class TestSink final : public sink::Sink {
 public:
  explicit TestSink(std::string name = "test", size_t max_bytes = size_t{1} << 40)
      : name_(std::move(name)), queue_(max_bytes) {}

  const std::string& name() const override { return name_; }
  void Attach(pipeline::durable::SinkCursor& cursor) override { cursor_ = &cursor; }
  Status Start() override {
    started_ = true;
    return Status::Ok();
  }
  Status Push(pipeline::QueuedBatch& item) override {
    pushes_++;
    if (refuse_.load()) return Status::Exhausted("test sink: full");
    if (auto_finish_.load() && cursor_ != nullptr) {
      // Written at once, as a sink whose store never fails.
      std::vector<pipeline::durable::Ticket> tickets;
      pipeline::durable::SealedBlock sealed;
      if (item.ticket.valid()) tickets.push_back(std::move(item.ticket));
      if (item.block != nullptr) {
        sealed = item.block->sealed;
        for (auto& t : item.block->tickets) tickets.push_back(std::move(t));
        item.block->tickets.clear();
      }
      cursor_->Done(sealed, &tickets);
    }
    return queue_.Push(item);
  }
  void Drain() override { queue_.Close(); }
  const sink::SinkStats& stats() const override { return stats_; }
  size_t queued_bytes() const override { return queue_.bytes(); }
  void AppendMetrics(PromText&) const override {}

  // What it was handed, in order; empty after `wait`.
  std::optional<pipeline::QueuedBatch> Pop(
      std::chrono::milliseconds wait = std::chrono::milliseconds(2000)) {
    return queue_.Pop(wait);
  }
  pipeline::SpanQueue& queue() { return queue_; }
  pipeline::durable::SinkCursor* cursor() { return cursor_; }
  void Refuse(bool on) { refuse_ = on; }
  // Acknowledges what it is handed at once (kept in the queue all the same).
  void AutoFinish(bool on) { auto_finish_ = on; }
  uint64_t pushes() const { return pushes_.load(); }
  bool started() const { return started_; }
  sink::SinkStats& mutable_stats() { return stats_; }

 private:
  const std::string name_;
  pipeline::SpanQueue queue_;
  pipeline::durable::SinkCursor* cursor_ = nullptr;
  sink::SinkStats stats_;
  std::atomic<bool> refuse_{false};
  std::atomic<bool> auto_finish_{false};
  std::atomic<uint64_t> pushes_{0};
  bool started_ = false;
};

}  // namespace spanhouse::testdata
