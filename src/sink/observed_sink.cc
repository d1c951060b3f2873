#include "sink/observed_sink.h"

#include <utility>
#include <vector>

#include "sink/block.h"

namespace spanhouse::sink {

Status ObservedSink::Push(sink::QueuedBatch& item) {
  // Copied before the push, which moves the item away; shown only once
  // taken, so a refused push that is tried again is shown once.
  // A block's part is a piece of its record: only a whole request is kept
  // to be decoded again.
  std::vector<std::pair<std::unique_ptr<SpanBatch>, sink::Ticket>> copies;
  if (item.batch != nullptr) {
    copies.emplace_back(std::make_unique<SpanBatch>(*item.batch),
                        observer_.wants_keeps() ? item.ticket.Keep() : sink::Ticket());
  }
  if (item.block != nullptr) {
    for (const auto& part : item.block->parts) {
      copies.emplace_back(std::make_unique<SpanBatch>(*part), sink::Ticket());
    }
  }
  Status st = inner_->Push(item);
  for (auto& [copy, keep] : copies) {
    if (st.ok()) {
      observer_.Observe(std::move(copy), std::move(keep));
    } else {
      keep.Ack();
    }
  }
  return st;
}

}  // namespace spanhouse::sink
