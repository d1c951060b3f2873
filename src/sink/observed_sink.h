// A sink in front of another that shows a copy of every batch the other
// took to an observer: how the recent-traces index (query/recent_traces.h)
// sees what the primary store is about to hold, live requests, read-backs
// and the replay after a restart alike. Everything else is the inner sink's.
#pragma once

#include <memory>
#include <string>

#include "model/span_batch.h"
#include "sink/sink.h"
#include "sink/ticket.h"

namespace spanhouse::sink {

// What an ObservedSink shows its batches to. Called from the pushing
// threads.
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  // A copy of a batch the inner sink took (sharing its source: SpanBatch),
  // and a keep on its record in the durable queue (segment_log.h; empty
  // without the queue, or for a part of a replayed block), so that the
  // observer can read the batch again once it let the copy go.
  virtual void Observe(std::unique_ptr<SpanBatch> copy, Ticket keep) = 0;
  // Whether Observe is handed keeps at all: one not used would hold its
  // segment on disk for nothing.
  virtual bool wants_keeps() const { return false; }
};

class ObservedSink final : public Sink {
 public:
  ObservedSink(std::unique_ptr<Sink> inner, BatchObserver& observer)
      : inner_(std::move(inner)), observer_(observer) {}

  const std::string& name() const override { return inner_->name(); }
  void Attach(BlockLedger& cursor) override { inner_->Attach(cursor); }
  bool BlockMembers(std::string_view key, const SpanBatch& batch,
                    std::vector<uint32_t>* idx) const override {
    return inner_->BlockMembers(key, batch, idx);
  }
  Status Start() override { return inner_->Start(); }
  Status Push(sink::QueuedBatch& item) override;
  void Drain() override { inner_->Drain(); }
  const SinkStats& stats() const override { return inner_->stats(); }
  size_t queued_bytes() const override { return inner_->queued_bytes(); }
  void AppendMetrics(PromText& out) const override { inner_->AppendMetrics(out); }

  Sink& inner() { return *inner_; }

 private:
  std::unique_ptr<Sink> inner_;
  BatchObserver& observer_;
};

}  // namespace spanhouse::sink
