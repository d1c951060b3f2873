#include "pipeline/durable/sink_cursor.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>

#include "pipeline/durable/durable_queue.h"
#include "pipeline/durable/records.h"
#include "sink/sink.h"

namespace spanhouse::pipeline::durable {

SinkCursor::SinkCursor(DurableQueue& queue, sink::Sink& sink)
    : queue_(queue), sink_(sink), name_(sink.name()) {}

SinkCursor::~SinkCursor() {
  StopFeeding();
}

SealedBlock SinkCursor::Seal(std::string_view key, const std::vector<Ticket>& tickets,
                             uint32_t chunks) {
  SegmentLog* log = queue_.log();
  if (log == nullptr || tickets.empty()) return {};
  BlockRecord rec;
  rec.sink = name_;
  rec.key.assign(key);
  rec.chunks = chunks;
  for (const auto& t : tickets) rec.lsns.push_back(t.lsn());
  std::sort(rec.lsns.begin(), rec.lsns.end());
  rec.lsns.erase(std::unique(rec.lsns.begin(), rec.lsns.end()), rec.lsns.end());
  // Not refused when the log is full: sinks are what empty it. Its segment
  // needs no hold: segments go oldest first, so this record (after the ones
  // it names) outlives them.
  Ticket ref;
  if (!log->Append(RecordKind::kKeyedBlock, rec.Encode(), &ref, /*past_limit=*/true).ok() ||
      !log->WaitDurable(ref.lsn(), std::chrono::seconds(30))) {
    spdlog::warn(
        "sink {}: cannot seal a block in the durable queue; writing it without a token (a crash "
        "before it is acknowledged would store it twice)",
        name_);
    ref.Ack();
    return {};
  }
  ref.Ack();
  stats_.blocks_sealed++;
  return {ref.lsn(), DedupToken(log->epoch(), ref.lsn())};
}

void SinkCursor::Done(const SealedBlock& block, std::vector<Ticket>* tickets) {
  SegmentLog* log = queue_.log();
  if (block.sealed() && log != nullptr) {
    AckRecord rec;
    rec.sink = name_;
    rec.block_lsns.push_back(block.lsn);
    Ticket ref;
    // Unsynced: lost, the block is written again with its token.
    if (log->Append(RecordKind::kSinkAck, rec.Encode(), &ref, /*past_limit=*/true).ok()) {
      ref.Ack();
      queue_.NoteAck(name_, block.lsn);
      stats_.blocks_acked++;
    }
  }
  for (auto& t : *tickets) t.Ack();
  tickets->clear();
}

bool SinkCursor::Reserve(size_t bytes, std::chrono::milliseconds wait, Reservation* out) {
  MemoryBudget& budget = queue_.budget();
  if (!budget.ReserveWithin(bytes, wait)) return false;
  if (share_ != nullptr && !share_->ReserveWithin(bytes, wait)) {
    budget.Release(bytes);
    return false;
  }
  *out = Reservation(&budget, bytes, share_.get());
  return true;
}

void SinkCursor::Backlog(Ticket ticket, size_t bytes, size_t spans) {
  stats_.spilled_requests++;
  stats_.spilled_spans += spans;
  stats_.waiting_spans += spans;
  stats_.waiting_requests.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back({std::move(ticket), bytes, spans, std::chrono::steady_clock::now()});
  }
  cv_.notify_one();
}

double SinkCursor::OldestWaitingSeconds() {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.empty()) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - entries_.front().since)
      .count();
}

void SinkCursor::StartFeeding() {
  if (queue_.log() == nullptr || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void SinkCursor::StopFeeding() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stopping_ = true;
  cv_.notify_all();
  if (!thread_.joinable()) return;
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!entries_.empty()) {
    spdlog::info("sink {}: {} request(s) in its backlog: replayed at the next start", name_,
                 entries_.size());
  }
}

void SinkCursor::Loop() {
  for (;;) {
    Entry e;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !entries_.empty(); });
      if (stop_) return;
      e = std::move(entries_.front());
      entries_.pop_front();
    }
    const bool go_on = Feed(e);
    // Counted as waiting until handed over, so new requests keep joining
    // the backlog meanwhile (and come after it).
    stats_.waiting_spans -= e.spans;
    stats_.waiting_requests.fetch_sub(1, std::memory_order_acq_rel);
    if (!go_on) return;
  }
}

bool SinkCursor::Feed(Entry& e) {
  Reservation reservation;
  while (!Reserve(e.bytes, std::chrono::milliseconds(200), &reservation)) {
    if (stopping_.load()) return false;  // e.ticket dropped unacked: replayed at the next start
  }
  RecordKind kind{};
  std::string payload;
  auto batch = std::make_unique<SpanBatch>();
  Status st = queue_.log()->Read(e.ticket, &kind, &payload);
  if (st.ok())
    st = DecodeRequestRecord(kind, std::move(payload), queue_.filter_, batch.get(), e.ticket.lsn());
  if (!st.ok()) {
    // Its ticket is dropped unacked: the record stays for the next start's
    // replay, which counts it again if it is really unreadable.
    stats_.read_errors++;
    spdlog::error("sink {}: record {} cannot be read back from the durable queue: {}", name_,
                  e.ticket.lsn(), st.message());
    return true;
  }
  const size_t spans = batch->span_count();
  if (spans == 0) {
    e.ticket.Ack();
    return true;
  }
  reservation.Resize(batch->MemoryBytes());
  QueuedBatch item;
  item.batch = std::move(batch);
  item.reservation = std::move(reservation);
  item.ticket = std::move(e.ticket);
  for (;;) {
    const Status pushed = sink_.Push(item);
    if (pushed.ok()) break;
    // Full: the sink's own bound, which the memory share normally keeps it
    // under; it comes back as the sink writes. Draining: the record stays.
    if (pushed.code() != StatusCode::kResourceExhausted || stopping_.load()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stats_.queued_requests++;
  stats_.queued_spans += spans;
  return true;
}

}  // namespace spanhouse::pipeline::durable
