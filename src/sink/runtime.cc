#include "sink/runtime.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace spanhouse::sink {

using Clock = std::chrono::steady_clock;

size_t Plugin::Rows(const QueuedBatch& item) const {
  size_t n = item.batch != nullptr ? item.batch->span_count() : 0;
  if (item.block != nullptr) n += item.block->spans();
  return n;
}

bool Plugin::BlockMembers(std::string_view, const SpanBatch& batch,
                          std::vector<uint32_t>* idx) const {
  idx->resize(batch.span_count());
  for (uint32_t i = 0; i < idx->size(); ++i) (*idx)[i] = i;
  return true;
}

RuntimeSink::RuntimeSink(std::unique_ptr<Plugin> plugin, RuntimeOptions options)
    : plugin_(std::move(plugin)),
      opts_(std::move(options)),
      // The sink's bound is on all its shards together (Push): a shard alone
      // never refuses, so a request split over shards is taken whole or not.
      queue_(std::max<size_t>(1, plugin_->shards()), std::numeric_limits<size_t>::max() / 2),
      stats_(plugin_->stats()) {}

RuntimeSink::~RuntimeSink() {
  // Not drained (a start that failed half-way): nothing more is written.
  if (!draining_.exchange(true)) stop_.Stop(std::chrono::milliseconds(0));
  queue_.Close();
  Join();
}

Status RuntimeSink::Start() {
  if (!shards_.empty()) return Status::Ok();
  SH_RETURN_IF_ERROR(plugin_->Start());
  for (size_t s = 0; s < queue_.shards(); ++s) shards_.push_back(std::make_unique<Shard>());
  for (size_t s = 0; s < shards_.size(); ++s) {
    shards_[s]->encoder = std::thread([this, s] { Encode(s); });
    shards_[s]->writer = std::thread([this, s] { WriteLoop(s); });
  }
  return Status::Ok();
}

Status RuntimeSink::Push(QueuedBatch& item) {
  if (draining_.load()) return Status::Unavailable("sink " + opts_.name + " is stopping");
  plugin_->Keep(item);
  size_t bytes = item.batch != nullptr ? item.batch->MemoryBytes() : 0;
  if (item.block != nullptr) {
    for (const auto& p : item.block->parts) bytes += p->MemoryBytes();
  }
  // Full (one item larger than the bound is still taken into an empty queue).
  const size_t queued = queue_.bytes();
  if (queued != 0 && queued + bytes > opts_.queue_bytes) {
    return Status::Exhausted("sink " + opts_.name + ": queue full, retry later");
  }
  // Counted before it is queued: the writing thread may be done with it
  // before Push returns.
  const size_t rows = plugin_->Rows(item);
  stats_.pending_rows += rows;
  Status st = item.block != nullptr ? queue_.PushTo(plugin_->BlockShard(item.block->key), item)
                                    : queue_.Push(item);
  if (!st.ok()) stats_.pending_rows -= rows;
  return st;
}

void RuntimeSink::Drain() {
  if (!draining_.exchange(true)) stop_.Stop(opts_.retry.drain_timeout);
  queue_.Close();
  Join();
  if (!stopped_.exchange(true)) plugin_->Stop();
}

void RuntimeSink::Join() {
  for (auto& s : shards_) {
    if (s->encoder.joinable()) s->encoder.join();
    if (s->writer.joinable()) s->writer.join();
  }
}

void RuntimeSink::Encode(size_t s) {
  SpanQueue& q = queue_.shard(s);
  Shard& shard = *shards_[s];
  bool idle = true;
  std::vector<std::unique_ptr<Write>> due;
  for (;;) {
    // After an item, whatever else is queued is taken at once (no wait):
    // a write gathers what is there.
    std::optional<QueuedBatch> item =
        q.Pop(idle ? plugin_->NextDue(s) : std::chrono::milliseconds(0));
    idle = !item.has_value();
    if (item) plugin_->Add(s, std::move(*item));
    const bool done = idle && q.closed_and_empty();
    plugin_->TakeDue(s, idle, done, &due);
    for (auto& w : due) HandOff(s, std::move(w));
    due.clear();
    if (done) {
      std::lock_guard<std::mutex> lock(shard.mu);
      shard.encoding_done = true;
      shard.cv.notify_all();
      return;
    }
  }
}

void RuntimeSink::HandOff(size_t s, std::unique_ptr<Write> w) {
  // Sealed before its first attempt: after a crash the queue forms it again.
  if (!w->key.empty() && !w->sealed.sealed() && ledger_ != nullptr && !w->tickets.empty()) {
    w->sealed = ledger_->Seal(w->key, w->tickets, w->chunks);
  }
  Shard& shard = *shards_[s];
  std::unique_lock<std::mutex> lock(shard.mu);
  shard.cv.wait(lock, [&] { return shard.waiting == nullptr; });
  shard.waiting = std::move(w);
  shard.cv.notify_all();
}

void RuntimeSink::WriteLoop(size_t s) {
  Shard& shard = *shards_[s];
  for (;;) {
    std::unique_ptr<Write> w;
    {
      std::unique_lock<std::mutex> lock(shard.mu);
      shard.cv.wait(lock, [&] { return shard.waiting != nullptr || shard.encoding_done; });
      if (shard.waiting == nullptr) return;
      w = std::move(shard.waiting);
      shard.writing_since = w->since;
      shard.cv.notify_all();  // the slot is free: the next write may be handed over
    }
    Deliver(s, *w);
    std::lock_guard<std::mutex> lock(shard.mu);
    shard.writing_since = Clock::time_point{};
  }
}

void RuntimeSink::Deliver(size_t s, Write& w) {
  Status last;
  const std::string what =
      fmt::format("sink {}: a write of {} spans", opts_.name, w.rows + w.other_rows);
  const Delivered d = sink::Deliver([&] { return plugin_->WriteOnce(s, w); },
                                    [&](const Status& st) { return plugin_->Classify(st); },
                                    opts_.retry, stop_, stats_, what, &last);
  stats_.bytes_sent += w.bytes_sent;
  const size_t taken = w.rows + w.other_rows;  // what the write took from the queue
  bool done = d == Delivered::kStored;
  if (d == Delivered::kStored) {
    stats_.rows_written += w.rows - std::min(w.rows, w.dead_lettered);
    stats_.writes += 1;
    if (w.dead_lettered != 0) {
      stats_.rows_dead_lettered += w.dead_lettered;
      stats_.blocks_dead_lettered += 1;
      stats_.permanent_errors += 1;
    }
  } else if (d == Delivered::kDeadLetter) {
    const Status st = plugin_->DeadLetter(s, w, last);
    const size_t refused = taken - std::min(taken, w.stored);  // `stored`: the plugin's answer
    if (st.ok()) {
      spdlog::error("sink {}: {} spans refused for good, dead-lettered: {}", opts_.name, refused,
                    last.message());
      stats_.rows_written += w.stored;
      stats_.rows_dead_lettered += refused;
      stats_.blocks_dead_lettered += 1;
      done = true;
    } else {
      spdlog::error("sink {}: {} spans refused for good ({}) and not dead-lettered: {}", opts_.name,
                    refused, last.message(), st.message());
    }
  }
  // Counted before the acknowledgement, so that a caller who sees the ack sees the counters.
  stats_.pending_rows -= std::min<uint64_t>(stats_.pending_rows.load(), taken);
  if (!done) {
    // Unacked, the records stay in the durable queue: the next start writes
    // them. Without records, they are lost.
    if (!w.tickets.empty()) {
      spdlog::error("sink {}: {} spans left in the durable queue", opts_.name, taken);
      stats_.rows_left_queued += taken;
    } else {
      spdlog::error("sink {}: giving up on {} spans", opts_.name, taken);
      stats_.rows_lost += taken;
    }
    w.tickets.clear();
  } else {
    Ack(w);
  }
  plugin_->Finished(s, w, d == Delivered::kStored);
}

void RuntimeSink::Ack(Write& w) {
  if (ledger_ != nullptr) {
    ledger_->Done(w.sealed, &w.tickets);
    return;
  }
  for (auto& t : w.tickets) t.Ack();
  w.tickets.clear();
}

double RuntimeSink::LagSeconds() const {
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& s : shards_) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->writing_since != Clock::time_point{}) oldest = std::min(oldest, s->writing_since);
    if (s->waiting != nullptr) oldest = std::min(oldest, s->waiting->since);
  }
  const double held = oldest == Clock::time_point::max()
                          ? 0
                          : std::chrono::duration<double>(Clock::now() - oldest).count();
  // What waits for it on disk is older still.
  return std::max(held, ledger_ != nullptr ? ledger_->OldestWaitingSeconds() : 0.0);
}

void RuntimeSink::AppendMetrics(PromText& out) const {
  AppendSinkMetrics(opts_.name, stats_, out);
  const std::string label = PromText::Label("sink", opts_.name);
  out.One("spanhouse_sink_lag_milliseconds", "gauge",
          "How long the oldest request this sink has not written has waited, in memory or in "
          "its backlog on disk (0: caught up).",
          label, static_cast<uint64_t>(LagSeconds() * 1000));
  out.One("spanhouse_queue_bytes", "gauge", "Bytes of spans waiting in the sink's queue.", label,
          queue_.bytes());
  plugin_->AppendMetrics(opts_.name, out);
}

}  // namespace spanhouse::sink
