// DurableQueue's start: what each sink had not finished when the last
// process stopped (durable_queue.h).
#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "pipeline/durable/durable_queue.h"
#include "sink/sink.h"

namespace spanhouse::pipeline::durable {

namespace {

// Record LSN -> the blocks (of one sink) that hold some of its spans, with
// their LSNs.
using Coverage = std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, const BlockRecord*>>>;

// A sealed block whose key its sink does not know: its spans are handed to
// the sink again as new.
void BadKeyLog(const std::string& sink, uint64_t block_lsn) {
  spdlog::error(
      "sink {}: block {} has a key the sink does not know; its spans are handed over again as new",
      sink, block_lsn);
}

Coverage CoverageOf(const std::map<uint64_t, BlockRecord>& sealed) {
  Coverage c;
  for (const auto& [lsn, b] : sealed) {
    for (uint64_t r : b.lsns) c[r].emplace_back(lsn, &b);
  }
  return c;
}

}  // namespace

// The request records one start's replay has decoded, so that each is
// decoded once however many reads of the log (tail sampling's, the blocks',
// the records'), sinks and blocks want it: a read takes a record's batch
// (held, or decoded now) and holds it again for the next read that wants
// it. Held batches count against the memory budget, at most `max_bytes` of
// them, and a sink waiting for memory gets theirs: so a backlog of
// gigabytes is held a part at a time, and a record not held is decoded
// again when read.
class DecodedRecords {
 public:
  DecodedRecords(MemoryBudget& budget, size_t max_bytes, SpanFilter* filter)
      : budget_(budget), max_bytes_(max_bytes), filter_(filter) {}

  // Record `r`'s spans as the replay reads them, with tail sampling's marks
  // when `marked`; null: it does not decode.
  std::unique_ptr<SpanBatch> Take(const SegmentLog::Record& r, bool marked) {
    if (bad_.count(r.lsn) != 0) return nullptr;
    if (auto it = held_.find(r.lsn); it != held_.end()) {
      Held h = std::move(it->second);
      held_.erase(it);
      bytes_ -= h.reservation.bytes();
      if (marked && !h.marked) MarkRequestRecord(r.kind, filter_, h.batch.get(), r.lsn);
      return std::move(h.batch);
    }
    auto batch = std::make_unique<SpanBatch>();
    if (!DecodeRequestRecord(r.kind, std::string(r.payload), filter_, batch.get(), r.lsn, marked)
             .ok()) {
      bad_.insert(r.lsn);  // not decoded again: it would fail the same way
      return nullptr;
    }
    return batch;
  }
  // Keeps record `lsn`'s `batch` (with tail sampling's marks if `marked`)
  // for a later read, if there is room.
  void Hold(uint64_t lsn, std::unique_ptr<SpanBatch> batch, bool marked) {
    const size_t bytes = batch->MemoryBytes();
    if (bytes_ + bytes > max_bytes_ || !budget_.TryReserve(bytes)) return;
    bytes_ += bytes;
    held_.emplace(lsn, Held{std::move(batch), Reservation(&budget_, bytes), marked});
  }
  // Lets every held batch go; false: none was held.
  bool Clear() {
    if (held_.empty()) return false;
    held_.clear();
    bytes_ = 0;
    return true;
  }

 private:
  struct Held {
    std::unique_ptr<SpanBatch> batch;
    Reservation reservation;
    bool marked = false;
  };
  MemoryBudget& budget_;
  const size_t max_bytes_;
  SpanFilter* const filter_;
  size_t bytes_ = 0;
  std::unordered_map<uint64_t, Held> held_;  // by record LSN
  std::unordered_set<uint64_t> bad_;         // records that did not decode
};

std::unordered_map<std::string, DurableQueue::SinkBlocks> DurableQueue::ScanBlocks() {
  std::unordered_map<std::string, SinkBlocks> out;
  uint64_t bad = 0;
  const uint64_t now_ns = WallClockNs();
  log_->ReadReplay([&](const SegmentLog::Record& r, uint64_t) {
    if (IsBlockRecord(r.kind)) {
      BlockRecord b;
      if (!b.Decode(r.payload, r.kind)) {
        ++bad;
        return;
      }
      std::string sink = b.sink;
      out[sink].sealed.emplace(r.lsn, std::move(b));
    } else if (r.kind == RecordKind::kReplayed || r.kind == RecordKind::kSinkAck) {
      AckRecord a;
      if (!a.Decode(r.payload, r.kind == RecordKind::kSinkAck)) {
        ++bad;
        return;
      }
      out[a.sink].acked.insert(a.block_lsns.begin(), a.block_lsns.end());
    } else if (r.kind == RecordKind::kTailDecisions && filter_ != nullptr &&
               filter_->tail() != nullptr) {
      // Before any record is read back, so each is marked as it was.
      filter_->tail()->Load(r.payload, r.lsn, now_ns);
    }
  });
  {
    std::lock_guard<std::mutex> lock(acked_mu_);
    for (const auto& [sink, lsns] : acked_early_) out[sink].acked.insert(lsns.begin(), lsns.end());
  }
  if (bad > 0) {
    replay_.bad_block_records += bad;
    spdlog::warn(
        "durable queue: {} block or acknowledgement record(s) unreadable: their spans are "
        "handed to the sink again, possibly stored twice",
        bad);
  }
  return out;
}

void DurableQueue::BadKey(SinkCursor& cursor, uint64_t block_lsn) {
  replay_.bad_block_records++;
  BadKeyLog(cursor.name(), block_lsn);
}

std::vector<std::vector<uint64_t>> DurableQueue::ReplayBlocks(
    const std::vector<SinkCursor*>& cursors, const std::vector<const SinkBlocks*>& blocks,
    DecodedRecords& decoded) {
  struct Unfinished {
    std::map<uint64_t, BlockRecord> open;  // sealed, not acknowledged
    Coverage covered;
    std::map<uint64_t, std::unique_ptr<ReplayBlock>> formed;  // by block LSN: written in order
  };
  std::vector<Unfinished> of(cursors.size());
  bool any = false;
  for (size_t k = 0; k < cursors.size(); ++k) {
    for (const auto& [lsn, b] : blocks[k]->sealed) {
      if (blocks[k]->acked.count(lsn) == 0) of[k].open.emplace(lsn, b);
    }
    cursors[k]->stats_.skipped_blocks += blocks[k]->sealed.size() - of[k].open.size();
    of[k].covered = CoverageOf(of[k].open);
    any = any || !of[k].open.empty();
  }
  std::vector<std::vector<uint64_t>> lsns(cursors.size());
  if (!any) return lsns;
  log_->ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    if (!IsRequestRecord(r.kind)) return;
    std::unique_ptr<SpanBatch> batch;  // decoded once the first sink's block wants it
    for (size_t k = 0; k < cursors.size(); ++k) {
      auto it = of[k].covered.find(r.lsn);
      if (it == of[k].covered.end()) continue;
      if (batch == nullptr && (batch = decoded.Take(r, /*marked=*/true)) == nullptr) {
        return;  // counted by ReplayRecords
      }
      SinkCursor& cursor = *cursors[k];
      for (const auto& [block_lsn, b] : it->second) {
        auto& f = of[k].formed[block_lsn];
        if (f == nullptr) {
          f = std::make_unique<ReplayBlock>();
          f->key = b->key;
          f->chunks = b->chunks;
          f->sealed = {block_lsn, DedupToken(log_->epoch(), block_lsn)};
        }
        f->tickets.push_back(log_->Hold(segment, r.lsn));
        std::vector<uint32_t> idx;
        if (!cursor.sink_.BlockMembers(b->key, *batch, &idx)) {
          BadKey(cursor, block_lsn);
          continue;
        }
        if (idx.empty()) continue;
        auto part = std::make_unique<SpanBatch>();
        part->AppendSpans(*batch, idx.data(), idx.size());
        f->parts.push_back(std::move(part));
      }
    }
    // ReplayRecords reads it next, for the spans no block held.
    if (batch != nullptr) decoded.Hold(r.lsn, std::move(batch), /*marked=*/true);
  });
  for (size_t k = 0; k < cursors.size(); ++k) {
    if (of[k].open.empty()) continue;
    SinkCursor& cursor = *cursors[k];
    for (auto& [lsn, block] : of[k].formed) {
      lsns[k].push_back(lsn);
      const size_t spans = block->spans();
      cursor.stats_.replayed_blocks++;
      cursor.stats_.replayed_block_spans += spans;
      if (spans == 0) {
        cursor.Done(block->sealed, &block->tickets);
        continue;
      }
      QueuedBatch item;
      item.block = std::move(block);
      if (Status st = cursor.sink_.Push(item); !st.ok()) {
        spdlog::error("sink {}: a block to write again was refused ({}); left for the next start",
                      cursor.name(), st.message());
      }
    }
    spdlog::info("sink {}: {} unfinished block(s) written again with their tokens, {} skipped",
                 cursor.name(), of[k].formed.size(), cursor.stats_.skipped_blocks.load());
  }
  return lsns;
}

void DurableQueue::ReplayRecords(const std::unordered_map<std::string, SinkBlocks>& blocks,
                                 DecodedRecords& decoded) {
  std::vector<Coverage> covered;
  for (const auto& c : cursors_) {
    auto it = blocks.find(c->name());
    covered.push_back(it == blocks.end() ? Coverage() : CoverageOf(it->second.sealed));
  }
  // With tail sampling the observer saw the records unmarked, before.
  const bool observe = replay_observer_ && (filter_ == nullptr || filter_->tail() == nullptr);
  // A sink's memory first from the batches held for this read: they only
  // save decoding a record again.
  const auto reserve = [&](SinkCursor& c, size_t bytes, std::chrono::milliseconds wait,
                           Reservation* res) {
    if (c.Reserve(bytes, std::chrono::milliseconds(0), res)) return true;
    if (decoded.Clear() && c.Reserve(bytes, std::chrono::milliseconds(0), res)) return true;
    return wait.count() > 0 && c.Reserve(bytes, wait, res);
  };
  log_->ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    if (!IsRequestRecord(r.kind)) return;
    replay_.records++;
    std::unique_ptr<SpanBatch> batch = decoded.Take(r, /*marked=*/true);
    if (batch == nullptr) {
      // Its CRC matched, so it is what was written; a newer or broken
      // encoder could still write what this decoder refuses.
      replay_.bad_records++;
      spdlog::error("durable queue: record {} does not decode; skipped", r.lsn);
      return;
    }
    if (observe) replay_observer_(*batch);
    const size_t n = batch->span_count();
    const SpanBatch* source = batch.get();  // copies come from it; the last sink may take it
    std::vector<std::string> targets;       // an import's: those sinks only
    const bool targeted = RequestTargets(r.kind, r.payload, &targets);
    size_t last = cursors_.size();  // the last sink it is for
    for (size_t k = 0; k < cursors_.size(); ++k) {
      if (!targeted || std::count(targets.begin(), targets.end(), cursors_[k]->name()) != 0) {
        last = k;
      }
    }
    for (size_t k = 0; k < cursors_.size(); ++k) {
      SinkCursor& c = *cursors_[k];
      if (targeted && std::count(targets.begin(), targets.end(), c.name()) == 0) continue;
      auto it = covered[k].find(r.lsn);
      std::vector<uint32_t> idx;  // the spans none of this sink's blocks held
      if (it == covered[k].end()) {
        idx.resize(n);
        for (uint32_t i = 0; i < n; ++i) idx[i] = i;
      } else {
        std::vector<char> held(n, 0);
        std::vector<uint32_t> members;
        for (const auto& [lsn, b] : it->second) {
          if (!c.sink_.BlockMembers(b->key, *source, &members)) continue;  // counted above
          for (uint32_t i : members) held[i] = 1;
        }
        for (uint32_t i = 0; i < n; ++i) {
          if (held[i] == 0) idx.push_back(i);
        }
      }
      if (idx.empty()) continue;
      const bool whole = idx.size() == n;
      std::unique_ptr<SpanBatch> part;
      if (whole && k == last) {
        part = std::move(batch);  // the last sink takes the decoded batch itself
      } else {
        part = std::make_unique<SpanBatch>();
        part->AppendSpans(*source, idx.data(), idx.size());
      }
      const size_t bytes = part->MemoryBytes();
      c.stats_.replayed_spans += idx.size();
      // A whole record the memory does not take now waits in the backlog
      // (which reads it back), so the replay does not wait for the sinks and
      // the receivers open soon; so does every whole record after it, to
      // keep them in order. A part waits for memory here.
      Reservation res;
      if (whole && (c.backlogged() || !reserve(c, bytes, std::chrono::milliseconds(0), &res))) {
        c.Backlog(log_->Hold(segment, r.lsn, r.offset), bytes, idx.size());
        continue;
      }
      if (!whole) {
        while (!reserve(c, bytes, std::chrono::milliseconds(1000), &res)) {
        }
      }
      QueuedBatch item;
      item.batch = std::move(part);
      item.reservation = std::move(res);
      item.ticket = log_->Hold(segment, r.lsn);
      if (Status st = c.sink_.Push(item); !st.ok()) {
        spdlog::error("sink {}: replayed record {} refused ({}); left for the next start", c.name(),
                      r.lsn, st.message());
      }
    }
  });
  spdlog::info("durable queue: {} record(s) replayed, {} bad", replay_.records.load(),
               replay_.bad_records.load());
}

Status DurableQueue::ReplaySealedBlocks(sink::Sink& sink) {
  if (log_ == nullptr) return Status::Ok();
  SinkCursor cursor(*this, sink);
  sink.Attach(cursor);
  const auto blocks = ScanBlocks();
  if (Status st = sink.Start(); !st.ok()) return st;
  const uint64_t lost_before = sink.stats().rows_lost.load();
  const uint64_t left_before = sink.stats().rows_left_queued.load();
  auto it = blocks.find(sink.name());
  std::vector<uint64_t> lsns;
  if (it != blocks.end()) {
    DecodedRecords decoded(budget_, 0, filter_);  // one read: nothing to hold
    lsns = std::move(ReplayBlocks({&cursor}, {&it->second}, decoded).front());
  }
  sink.Drain();
  if (sink.stats().rows_lost.load() != lost_before ||
      sink.stats().rows_left_queued.load() != left_before) {
    return Status::Unavailable(
        "durable queue: unfinished blocks could not be stored before the schema upgrade");
  }
  if (lsns.empty()) return Status::Ok();
  // Their acknowledgements must survive a crash during the copy: synced.
  Ticket marker;
  AckRecord none;
  none.sink = sink.name();
  if (!log_->Append(RecordKind::kSinkAck, none.Encode(), &marker, /*past_limit=*/true).ok() ||
      !log_->WaitDurable(marker.lsn(), std::chrono::minutes(1))) {
    return Status::Internal("durable queue: the blocks stored before the upgrade are not synced");
  }
  marker.Ack();
  spdlog::info("sink {}: {} unfinished block(s) stored before the schema upgrade's copy",
               sink.name(), lsns.size());
  return Status::Ok();
}

void DurableQueue::ObserveForTail(DecodedRecords& decoded) {
  // Every record's spans inform their traces' decisions before any record
  // is read back and marked (those with a logged decision keep it): a read
  // of its own, whose batches are held unmarked and marked when read next.
  TailSampler& tail = *filter_->tail();
  tail.set_observing(true);
  log_->ReadReplay([&](const SegmentLog::Record& r, uint64_t) {
    if (!IsRequestRecord(r.kind)) return;
    std::unique_ptr<SpanBatch> batch = decoded.Take(r, /*marked=*/false);
    if (batch == nullptr) return;                            // counted by ReplayRecords
    MarkRequestRecord(r.kind, filter_, batch.get(), r.lsn);  // observing: noted, not marked
    if (replay_observer_) replay_observer_(*batch);
    decoded.Hold(r.lsn, std::move(batch), /*marked=*/false);
  });
  tail.set_observing(false);
  const uint64_t now_ns = WallClockNs();
  const size_t decided = tail.DecideDue(now_ns, /*all=*/true);
  if (decided > 0) spdlog::info("tail sampling: {} traces from the queue decided", decided);
}

void DurableQueue::Start() {
  if (log_ != nullptr && !cursors_.empty()) {
    // With several sinks each may hold at most its share of the budget, so
    // one that stops writing leaves the others theirs (and backlogs).
    if (cursors_.size() > 1) {
      for (auto& c : cursors_) {
        c->share_ = std::make_unique<MemoryBudget>(budget_.limit() / cursors_.size());
      }
    }
    const auto blocks = ScanBlocks();
    // Up to a quarter of the budget held decoded between the reads below,
    // so a record is decoded once however many of them want it.
    DecodedRecords decoded(budget_, budget_.limit() / 4, filter_);
    if (filter_ != nullptr && filter_->tail() != nullptr) ObserveForTail(decoded);
    started_ = true;
    std::vector<SinkCursor*> with_blocks;
    std::vector<const SinkBlocks*> their_blocks;
    for (auto& c : cursors_) {
      auto it = blocks.find(c->name());
      if (it == blocks.end()) continue;
      with_blocks.push_back(c.get());
      their_blocks.push_back(&it->second);
    }
    if (!with_blocks.empty()) ReplayBlocks(with_blocks, their_blocks, decoded);
    for (auto& c : cursors_) c->StartFeeding();
    ReplayRecords(blocks, decoded);
    log_->EndReplay();
    return;
  }
  started_ = true;
}

}  // namespace spanhouse::pipeline::durable
