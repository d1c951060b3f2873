#include "receivers/durable/spill_backlog.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "receivers/durable/logged_request.h"

namespace spanhouse::receivers {

SpillBacklog::SpillBacklog(pipeline::durable::SegmentLog& log, pipeline::ShardedQueue& queue,
                           pipeline::MemoryBudget& budget, pipeline::SpanFilter* filter)
    : log_(log), queue_(queue), budget_(budget), filter_(filter) {}

SpillBacklog::~SpillBacklog() {
  Stop();
}

void SpillBacklog::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void SpillBacklog::Stop() {
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
    spdlog::info("durable queue: {} spilled request(s) not queued yet: replayed at the next start",
                 entries_.size());
  }
}

void SpillBacklog::Add(pipeline::durable::SegmentLog::Ref ref, size_t bytes, size_t spans) {
  stats_.spilled_requests++;
  stats_.spilled_spans += spans;
  stats_.waiting_spans += spans;
  stats_.waiting_requests.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back({std::move(ref), bytes, spans});
  }
  cv_.notify_one();
}

void SpillBacklog::Loop() {
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
    // Counted as waiting until queued, so receivers keep spilling meanwhile.
    stats_.waiting_spans -= e.spans;
    stats_.waiting_requests.fetch_sub(1, std::memory_order_acq_rel);
    if (!go_on) return;
  }
}

bool SpillBacklog::Feed(Entry& e) {
  while (!budget_.ReserveWithin(e.bytes, std::chrono::milliseconds(200))) {
    if (stopping_.load()) return false;  // e.ref dropped undone: replayed at the next start
  }
  pipeline::Reservation reservation(&budget_, e.bytes);
  pipeline::durable::RecordKind kind{};
  std::string payload;
  auto batch = std::make_unique<SpanBatch>();
  Status st = log_.Read(e.ref, &kind, &payload);
  if (st.ok()) st = DecodeLoggedRequest(kind, std::move(payload), filter_, batch.get());
  if (!st.ok()) {
    // Its hold is dropped undone: the record stays for the next start's
    // replay, which counts it again if it is really unreadable.
    stats_.read_errors++;
    spdlog::error("durable queue: spilled record {} cannot be read back: {}", e.ref.lsn(),
                  st.message());
    return true;
  }
  const size_t spans = batch->span_count();
  if (spans == 0) {
    e.ref.Done();
    return true;
  }
  reservation.Resize(batch->MemoryBytes());
  switch (queue_.Push(std::move(batch), std::move(reservation), std::move(e.ref))) {
    case pipeline::SpanQueue::PushResult::kOk:
      stats_.queued_requests++;
      stats_.queued_spans += spans;
      return true;
    case pipeline::SpanQueue::PushResult::kFull:
    case pipeline::SpanQueue::PushResult::kClosed:
      // Only at shutdown (the shards' bounds are the whole budget): the
      // record stays in the log.
      return false;
  }
  return false;
}

}  // namespace spanhouse::receivers
