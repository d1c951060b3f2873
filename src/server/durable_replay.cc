#include "server/durable_replay.h"

#include <map>
#include <string>
#include <unordered_map>
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
    for (uint64_t lsn : b.lsns) covered[lsn].push_back({b.shard, b.shards, b.day, r.lsn});
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

}  // namespace

void ReplayLoggedBlocks(SegmentLog& log,
                        const std::vector<std::unique_ptr<storage::EmbeddedWriter>>& writers,
                        pipeline::SpanFilter* filter, ReplayCounts* counts) {
  const auto covered = CoveredParts(log);
  if (covered.empty()) return;
  struct Block {
    uint32_t shard = 0;
    uint32_t day = 0;
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
      continue;
    }
    // Any writer can insert it: the token, not the writer, makes it once.
    writers[b.shard % writers.size()]->InsertReplayed(
        b.day, pipeline::durable::DedupToken(log.epoch(), lsn), std::move(b.parts),
        std::move(b.refs));
  }
  spdlog::info("durable queue: {} logged block(s), {} spans, inserted again with their tokens",
               counts->blocks, counts->block_spans);
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
