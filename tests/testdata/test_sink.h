// A sink for tests of what feeds sinks (the durable queue, the receivers):
// it keeps every item it is handed in a queue the test pops from, and can be
// made to refuse (a sink that is full, or down).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sink/ledger.h"
#include "sink/sink.h"
#include "sink/span_queue.h"

namespace spanhouse::testdata {

class TestSink final : public sink::Sink {
 public:
  explicit TestSink(std::string name = "test", size_t max_bytes = size_t{1} << 40)
      : name_(std::move(name)), queue_(max_bytes) {}

  const std::string& name() const override { return name_; }
  void Attach(sink::BlockLedger& cursor) override { cursor_ = &cursor; }
  // Its blocks' keys: "day:<days since the epoch>", holding the spans that
  // start on that day (as a store partitioned by day would seal them).
  static std::string DayKey(uint32_t day) { return "day:" + std::to_string(day); }
  bool BlockMembers(std::string_view key, const SpanBatch& batch,
                    std::vector<uint32_t>* idx) const override {
    if (key.substr(0, 4) != "day:") return false;
    const uint64_t day = std::stoull(std::string(key.substr(4)));
    idx->clear();
    for (uint32_t i = 0; i < batch.span_count(); ++i) {
      if (batch.spans.start_ns[i] / 86400000000000ull == day) idx->push_back(i);
    }
    return true;
  }
  Status Start() override {
    started_ = true;
    return Status::Ok();
  }
  Status Push(sink::QueuedBatch& item) override {
    pushes_++;
    if (refuse_.load()) return Status::Exhausted("test sink: full");
    if (auto_finish_.load() && cursor_ != nullptr) {
      // Written at once, as a sink whose store never fails.
      std::vector<sink::Ticket> tickets;
      sink::SealedBlock sealed;
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
  std::optional<sink::QueuedBatch> Pop(
      std::chrono::milliseconds wait = std::chrono::milliseconds(2000)) {
    return queue_.Pop(wait);
  }
  sink::SpanQueue& queue() { return queue_; }
  sink::BlockLedger* cursor() { return cursor_; }
  void Refuse(bool on) { refuse_ = on; }
  // Acknowledges what it is handed at once (kept in the queue all the same).
  void AutoFinish(bool on) { auto_finish_ = on; }
  uint64_t pushes() const { return pushes_.load(); }
  bool started() const { return started_; }
  sink::SinkStats& mutable_stats() { return stats_; }

 private:
  const std::string name_;
  sink::SpanQueue queue_;
  sink::BlockLedger* cursor_ = nullptr;
  sink::SinkStats stats_;
  std::atomic<bool> refuse_{false};
  std::atomic<bool> auto_finish_{false};
  std::atomic<uint64_t> pushes_{0};
  bool started_ = false;
};

}  // namespace spanhouse::testdata
