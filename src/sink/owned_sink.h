// A sink in front of another that stores only the spans of the traces this
// node owns, when several nodes act as one system (peers/ring.h): the other
// spans of a request go to their owners (the peer sinks). Its Select is the
// owner's test and the inner sink's together, so a live request hands it
// only its spans; a record read back (a backlog, the replay after a restart)
// comes whole and is narrowed in Push. Everything else is the inner sink's.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sink/sink.h"

namespace spanhouse::sink {

class OwnedSink final : public Sink {
 public:
  // `owns`: whether this node owns a trace under a request's view (SpanBatch::peer_view),
  // called from the pushing threads.
  using Owns = std::function<bool(const TraceId&, uint64_t view)>;
  OwnedSink(std::unique_ptr<Sink> inner, Owns owns)
      : inner_(std::move(inner)), owns_(std::move(owns)) {}

  const std::string& name() const override { return inner_->name(); }
  void Attach(BlockLedger& cursor) override { inner_->Attach(cursor); }
  bool BlockMembers(std::string_view key, const SpanBatch& batch,
                    std::vector<uint32_t>* idx) const override;
  bool Select(const SpanBatch& batch, std::vector<uint32_t>* idx) const override;
  Status Start() override { return inner_->Start(); }
  Status Push(QueuedBatch& item) override;
  void Drain() override { inner_->Drain(); }
  const SinkStats& stats() const override { return inner_->stats(); }
  size_t queued_bytes() const override { return inner_->queued_bytes(); }
  void AppendMetrics(PromText& out) const override { inner_->AppendMetrics(out); }

  Sink& inner() { return *inner_; }

 private:
  // Keeps the spans of `idx` (ascending) that this node owns.
  void Narrow(const SpanBatch& batch, std::vector<uint32_t>* idx) const;

  std::unique_ptr<Sink> inner_;
  Owns owns_;
};

}  // namespace spanhouse::sink
