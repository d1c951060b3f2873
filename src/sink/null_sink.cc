#include "sink/null_sink.h"

#include <vector>

#include "pipeline/durable/sink_cursor.h"

namespace spanhouse::sink {

Status NullSink::Push(pipeline::QueuedBatch& item) {
  size_t rows = item.batch != nullptr ? item.batch->span_count() : 0;
  std::vector<pipeline::durable::Ticket> tickets;
  if (item.ticket.valid()) tickets.push_back(std::move(item.ticket));
  pipeline::durable::SealedBlock sealed;
  if (item.block != nullptr) {
    rows += item.block->spans();
    sealed = item.block->sealed;
    for (auto& t : item.block->tickets) tickets.push_back(std::move(t));
  }
  if (cursor_ != nullptr) {
    cursor_->Done(sealed, &tickets);
  } else {
    for (auto& t : tickets) t.Ack();
  }
  stats_.rows_written += rows;
  stats_.writes += 1;
  return Status::Ok();
}

}  // namespace spanhouse::sink
