#include "sink/null_sink.h"

#include <vector>

#include "sink/plugin.h"
#include "sink/runtime.h"

namespace spanhouse::sink {

namespace {

// Gathers what is queued into one write, written as soon as the queue has
// nothing more to give.
class NullPlugin final : public Plugin {
 public:
  void Add(size_t /*shard*/, QueuedBatch item) override {
    if (pending_ == nullptr) {
      pending_ = std::make_unique<Write>();
      pending_->since = std::chrono::steady_clock::now();
    }
    pending_->rows += Rows(item);
    if (item.ticket.valid()) pending_->tickets.push_back(std::move(item.ticket));
    if (item.block != nullptr) {
      // A block sealed before a crash: finished now (one per write).
      pending_->sealed = item.block->sealed;
      for (auto& t : item.block->tickets) pending_->tickets.push_back(std::move(t));
      ready_.push_back(std::move(pending_));
    }
  }
  void TakeDue(size_t /*shard*/, bool idle, bool flush,
               std::vector<std::unique_ptr<Write>>* out) override {
    if (pending_ != nullptr && (idle || flush)) ready_.push_back(std::move(pending_));
    for (auto& w : ready_) out->push_back(std::move(w));
    ready_.clear();
  }
  Status WriteOnce(size_t /*shard*/, Write& /*w*/) override { return Status::Ok(); }
  Failure Classify(const Status& /*st*/) const override { return Failure::kRetryable; }
  Status DeadLetter(size_t /*shard*/, Write& /*w*/, const Status& why) override { return why; }

 private:
  std::unique_ptr<Write> pending_;
  std::vector<std::unique_ptr<Write>> ready_;
};

}  // namespace

std::unique_ptr<Sink> MakeNullSink(std::string name) {
  RuntimeOptions o;
  o.name = std::move(name);
  return std::make_unique<RuntimeSink>(std::make_unique<NullPlugin>(), std::move(o));
}

}  // namespace spanhouse::sink
