#include "sink/owned_sink.h"

#include <algorithm>

namespace spanhouse::sink {

void OwnedSink::Narrow(const SpanBatch& batch, std::vector<uint32_t>* idx) const {
  std::erase_if(*idx, [&](uint32_t i) { return !owns_(batch.spans.trace_id[i], batch.peer_view); });
}

bool OwnedSink::Select(const SpanBatch& batch, std::vector<uint32_t>* idx) const {
  if (!inner_->Select(batch, idx)) {
    idx->resize(batch.span_count());
    for (uint32_t i = 0; i < idx->size(); ++i) (*idx)[i] = i;
  }
  Narrow(batch, idx);
  return true;
}

bool OwnedSink::BlockMembers(std::string_view key, const SpanBatch& batch,
                             std::vector<uint32_t>* idx) const {
  // The block was sealed of the spans this node owned under each record's view, which the
  // record read back carries.
  if (!inner_->BlockMembers(key, batch, idx)) return false;
  Narrow(batch, idx);
  return true;
}

Status OwnedSink::Push(QueuedBatch& item) {
  // A live request comes selected already; a record read back comes whole.
  std::vector<uint32_t> idx;
  auto narrow = [&](std::unique_ptr<SpanBatch>& b) {
    if (b == nullptr) return;
    Select(*b, &idx);
    if (idx.size() == b->span_count()) return;
    auto part = std::make_unique<SpanBatch>();
    if (!idx.empty()) part->AppendSpans(*b, idx.data(), idx.size());
    b = std::move(part);
  };
  if (item.block != nullptr) {
    for (auto& p : item.block->parts) narrow(p);
  } else if (item.batch != nullptr) {
    narrow(item.batch);
    if (item.batch->span_count() == 0) {
      item.ticket.Ack();  // none of it is this node's to store
      item.batch.reset();
      item.reservation = {};
      return Status::Ok();
    }
    item.reservation.Resize(std::min(item.reservation.bytes(), item.batch->MemoryBytes()));
  }
  return inner_->Push(item);
}

}  // namespace spanhouse::sink
