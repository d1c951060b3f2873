#include "server/durable_replay.h"

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <spdlog/spdlog.h>

#include "pipeline/durable/block_record.h"
#include "receivers/durable/logged_request.h"

namespace spanhouse::server {

namespace {

using pipeline::durable::RecordKind;
using pipeline::durable::SegmentLog;

// Which (shard, day) parts of a record a logged block covers, the shard
// among the writer count the block was logged under.
struct Covered {
  uint32_t shard;
  uint32_t shards;
  uint32_t day;
  uint64_t block_lsn;
  uint32_t chunks;  // spooled blocks the insert read

  bool Has(const TraceId& trace, uint64_t start_ns) const {
    return pipeline::ShardOf(trace, shards) == shard && storage::PartitionDay(start_ns) == day;
  }
};

// The covered parts by record LSN, from the replayed block records. A block
// logged under another writer.threads is formed again all the same (its
// spans picked by the shard count it was logged under), so a change of the
// count between a crash and the restart stores nothing twice.
std::unordered_map<uint64_t, std::vector<Covered>> CoveredParts(SegmentLog& log) {
  std::unordered_map<uint64_t, std::vector<Covered>> covered;
  size_t skipped = 0;
  log.ReadReplay([&](const SegmentLog::Record& r, uint64_t) {
    if (r.kind != RecordKind::kBlock) return;
    pipeline::durable::BlockRecord b;
    if (!b.Decode(r.payload) || b.shards == 0 || b.shard >= b.shards) {
      ++skipped;
      return;
    }
    for (uint64_t lsn : b.lsns) {
      covered[lsn].push_back({b.shard, b.shards, b.day, r.lsn, b.chunks});
    }
  });
  if (skipped > 0) {
    spdlog::warn(
        "durable queue: {} logged block record(s) unreadable: their spans are queued "
        "again, possibly stored twice",
        skipped);
  }
  return covered;
}

bool IsSpanRecord(RecordKind kind) {
  return kind == RecordKind::kRequest || kind == RecordKind::kEncodedRequest ||
         kind == RecordKind::kSpans;
}

bool Decode(const SegmentLog::Record& r, pipeline::SpanFilter* filter, SpanBatch* batch) {
  return receivers::DecodeLoggedRequest(r.kind, std::string(r.payload), filter, batch).ok();
}

bool IsCovered(const std::vector<Covered>& parts, const TraceId& trace, uint64_t start_ns) {
  for (const Covered& c : parts) {
    if (c.Has(trace, start_ns)) return true;
  }
  return false;
}

// The logged blocks a start already inserted again and stored before a
// copying upgrade (kReplayed records).
std::unordered_set<uint64_t> ReplayedBlockLsns(SegmentLog& log) {
  std::unordered_set<uint64_t> done;
  log.ReadReplay([&](const SegmentLog::Record& r, uint64_t) {
    if (r.kind != RecordKind::kReplayed) return;
    pipeline::durable::ReplayedBlocks b;
    if (!b.Decode(r.payload)) {
      spdlog::error("durable queue: record {} (blocks replayed before an upgrade) unreadable",
                    r.lsn);
      return;
    }
    done.insert(b.block_lsns.begin(), b.block_lsns.end());
  });
  return done;
}

// Phase one with `writers` (any of them may insert any block).
void ReplayBlocks(SegmentLog& log, const std::vector<storage::EmbeddedWriter*>& writers,
                  pipeline::SpanFilter* filter, ReplayCounts* counts,
                  std::vector<uint64_t>* inserted) {
  auto covered = CoveredParts(log);
  // Blocks stored before a copying upgrade: the copied table no longer
  // knows their tokens, and they are there already. Their records stay
  // covered (the second phase must not queue their spans again).
  auto replayed = ReplayedBlockLsns(log);
  replayed.insert(counts->stored_before_copy.begin(), counts->stored_before_copy.end());
  size_t skipped = 0;
  if (!replayed.empty()) {
    std::unordered_set<uint64_t> seen;
    for (auto& [lsn, parts] : covered) {
      std::erase_if(parts, [&](const Covered& c) {
        if (replayed.count(c.block_lsn) == 0) return false;
        seen.insert(c.block_lsn);
        return true;
      });
    }
    std::erase_if(covered, [](const auto& kv) { return kv.second.empty(); });
    skipped = seen.size();
  }
  if (skipped > 0) {
    counts->blocks_replayed_before_upgrade += skipped;
    spdlog::info(
        "durable queue: {} logged block(s) stored before the schema upgrade's copy: not "
        "inserted again",
        skipped);
  }
  if (covered.empty()) return;
  struct Block {
    uint32_t shard = 0;
    uint32_t day = 0;
    uint32_t chunks = 1;
    std::vector<std::unique_ptr<SpanBatch>> parts;
    std::vector<SegmentLog::Ref> refs;
  };
  std::map<uint64_t, Block> blocks;  // by block LSN: inserted in the order they were logged
  log.ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    if (!IsSpanRecord(r.kind)) return;
    auto it = covered.find(r.lsn);
    if (it == covered.end()) return;
    SpanBatch batch;
    if (!Decode(r, filter, &batch)) return;  // counted in the second phase
    for (const Covered& c : it->second) {
      std::vector<uint32_t> idx;
      for (uint32_t i = 0; i < batch.span_count(); ++i) {
        if (c.Has(batch.spans.trace_id[i], batch.spans.start_ns[i])) idx.push_back(i);
      }
      Block& b = blocks[c.block_lsn];
      b.shard = c.shard;
      b.day = c.day;
      b.chunks = c.chunks;
      b.refs.push_back(log.Hold(segment, r.lsn));
      if (idx.empty()) continue;
      auto part = std::make_unique<SpanBatch>();
      part->AppendSpans(batch, idx.data(), idx.size());
      b.parts.push_back(std::move(part));
    }
  });
  for (auto& [lsn, b] : blocks) {
    size_t spans = 0;
    for (const auto& p : b.parts) spans += p->span_count();
    counts->blocks++;
    counts->block_spans += spans;
    if (spans == 0) {
      for (auto& r : b.refs) r.Done();
      if (inserted != nullptr) inserted->push_back(lsn);
      continue;
    }
    if (inserted != nullptr) inserted->push_back(lsn);
    // Any writer can insert it: the token, not the writer, makes it once.
    writers[b.shard % writers.size()]->InsertReplayed(
        b.day, pipeline::durable::DedupToken(log.epoch(), lsn), std::move(b.parts),
        std::move(b.refs), b.chunks);
  }
  spdlog::info("durable queue: {} logged block(s), {} spans, inserted again with their tokens",
               counts->blocks, counts->block_spans);
}

}  // namespace

void ReplayLoggedBlocks(SegmentLog& log,
                        const std::vector<std::unique_ptr<storage::EmbeddedWriter>>& writers,
                        pipeline::SpanFilter* filter, ReplayCounts* counts,
                        std::vector<uint64_t>* inserted) {
  std::vector<storage::EmbeddedWriter*> w;
  w.reserve(writers.size());
  for (const auto& p : writers) w.push_back(p.get());
  ReplayBlocks(log, w, filter, counts, inserted);
}

Status ReplayLoggedBlocksBeforeCopy(SegmentLog& log, storage::EmbeddedWriter& writer,
                                    pipeline::SpanFilter* filter, ReplayCounts* counts) {
  std::vector<uint64_t> inserted;
  const uint64_t lost_before = writer.stats().rows_lost.load();
  ReplayBlocks(log, {&writer}, filter, counts, &inserted);
  if (writer.stats().rows_lost.load() != lost_before) {
    // Neither stored nor dead-lettered: the blocks must stay to be replayed
    // into the old table, so the upgrade waits for the next start.
    return Status::Unavailable(
        "durable queue: logged blocks could not be stored before the schema upgrade");
  }
  if (inserted.empty()) return Status::Ok();
  pipeline::durable::ReplayedBlocks marker;
  marker.block_lsns = std::move(inserted);
  SegmentLog::Ref ref;
  if (log.Append(RecordKind::kReplayed, marker.Encode(), &ref, /*past_limit=*/true) !=
      SegmentLog::AppendResult::kOk) {
    return Status::Internal("durable queue: cannot log the blocks replayed before the upgrade");
  }
  const uint64_t lsn = ref.lsn();
  ref.Done();  // kept as long as the blocks it names: it lies after them
  if (!log.WaitDurable(lsn, std::chrono::minutes(1))) {
    return Status::Internal("durable queue: the blocks replayed before the upgrade are not synced");
  }
  counts->stored_before_copy = marker.block_lsns;
  spdlog::info("durable queue: {} logged block(s) stored before the schema upgrade's copy",
               marker.block_lsns.size());
  return Status::Ok();
}

void ReplayRemainingRecords(SegmentLog& log, pipeline::ShardedQueue& queue,
                            pipeline::MemoryBudget& budget, pipeline::SpanFilter* filter,
                            receivers::SpillBacklog* backlog, ReplayCounts* counts) {
  const auto covered = CoveredParts(log);
  log.ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    if (!IsSpanRecord(r.kind)) return;
    counts->records++;
    auto batch = std::make_unique<SpanBatch>();
    if (!Decode(r, filter, batch.get())) {
      // Its CRC matched, so it is what was written; a newer or broken
      // encoder could still write what this decoder refuses.
      counts->bad_records++;
      spdlog::error("durable queue: record {} does not decode; skipped", r.lsn);
      return;
    }
    auto it = covered.find(r.lsn);
    const bool whole = it == covered.end();
    if (!whole) {
      std::vector<uint32_t> idx;
      for (uint32_t i = 0; i < batch->span_count(); ++i) {
        if (!IsCovered(it->second, batch->spans.trace_id[i], batch->spans.start_ns[i])) {
          idx.push_back(i);
        }
      }
      if (idx.empty()) return;
      if (idx.size() < batch->span_count()) {
        auto part = std::make_unique<SpanBatch>();
        part->AppendSpans(*batch, idx.data(), idx.size());
        batch = std::move(part);
      }
    }
    if (batch->span_count() == 0) return;
    counts->queued_spans += batch->span_count();
    const size_t bytes = batch->MemoryBytes();
    // A whole record that does not fit the memory budget now waits in the
    // backlog (which reads it back), so the replay does not wait for the
    // writers and the receivers open soon; so does every whole record after
    // it, to keep them in order.
    if (whole && backlog != nullptr &&
        (backlog->waiting() || !budget.ReserveWithin(bytes, std::chrono::milliseconds(0)))) {
      const size_t spans = batch->span_count();
      batch.reset();
      backlog->Add(log.Hold(segment, r.lsn, r.offset), bytes, spans);
      return;
    }
    // Otherwise it waits for memory here; the writers are running, memory
    // comes back as they store.
    if (!whole || backlog == nullptr) {
      while (!budget.ReserveWithin(bytes, std::chrono::milliseconds(1000))) {
      }
    }
    queue.Push(std::move(batch), pipeline::Reservation(&budget, bytes), log.Hold(segment, r.lsn));
  });
  log.EndReplay();
  spdlog::info("durable queue: {} record(s) replayed, {} spans queued again, {} bad",
               counts->records, counts->queued_spans, counts->bad_records);
}

}  // namespace spanhouse::server
