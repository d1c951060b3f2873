#include "sink/observed_sink.h"

#include <utility>
#include <vector>

#include "pipeline/durable/block.h"

namespace spanhouse::sink {

Status ObservedSink::Push(pipeline::QueuedBatch& item) {
  // Copied before the push, which moves the item away; shown only once
  // taken, so a refused push that is tried again is shown once.
  std::vector<std::unique_ptr<SpanBatch>> copies;
  if (item.batch != nullptr) copies.push_back(std::make_unique<SpanBatch>(*item.batch));
  if (item.block != nullptr) {
    for (const auto& part : item.block->parts) copies.push_back(std::make_unique<SpanBatch>(*part));
  }
  Status st = inner_->Push(item);
  if (st.ok()) {
    for (auto& c : copies) observer_.Observe(std::move(c));
  }
  return st;
}

}  // namespace spanhouse::sink
