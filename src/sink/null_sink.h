// The null sink: takes spans and stores nothing, acknowledging each request
// at once. It measures the pipeline without a store (receivers, decoding,
// the filter, the durable queue) and shows the smallest sink there is.
#pragma once

#include <string>

#include "sink/sink.h"

namespace spanhouse::sink {

class NullSink final : public Sink {
 public:
  explicit NullSink(std::string name = "null") : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  void Attach(pipeline::durable::SinkCursor& cursor) override { cursor_ = &cursor; }
  Status Start() override { return Status::Ok(); }
  Status Push(pipeline::QueuedBatch& item) override;
  void Drain() override {}
  const SinkStats& stats() const override { return stats_; }
  size_t queued_bytes() const override { return 0; }
  void AppendMetrics(PromText& out) const override { AppendSinkMetrics(name_, stats_, out); }

 private:
  const std::string name_;
  pipeline::durable::SinkCursor* cursor_ = nullptr;
  SinkStats stats_;
};

}  // namespace spanhouse::sink
