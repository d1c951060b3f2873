#include "server/durable_replay.h"

#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include <spdlog/spdlog.h>

#include "codec/otlp.h"
#include "pipeline/durable/block_record.h"

namespace spanhouse::server {

namespace {

using pipeline::durable::RecordKind;
using pipeline::durable::SegmentLog;

// Which (shard, day) parts of a record a logged block covers.
struct Covered {
  uint32_t shard;
  uint32_t day;
  uint64_t block_lsn;
};

// The covered parts by record LSN, from the replayed block records of the
// current shard count (blocks of another count cannot be formed again).
std::unordered_map<uint64_t, std::vector<Covered>> CoveredParts(SegmentLog& log, size_t shards) {
  std::unordered_map<uint64_t, std::vector<Covered>> covered;
  size_t skipped = 0;
  log.ReadReplay([&](const SegmentLog::Record& r, uint64_t) {
    if (r.kind != RecordKind::kBlock) return;
    pipeline::durable::BlockRecord b;
    if (!b.Decode(r.payload) || b.shards != shards || b.shard >= shards) {
      ++skipped;
      return;
    }
    for (uint64_t lsn : b.lsns) covered[lsn].push_back({b.shard, b.day, r.lsn});
  });
  if (skipped > 0) {
    spdlog::warn(
        "durable queue: {} logged block(s) of another writer.threads ignored: their "
        "spans are stored again, possibly twice",
        skipped);
  }
  return covered;
}

bool Decode(std::string_view payload, SpanBatch* batch) {
  return codec::DecodeOtlpProtoOwned(std::string(payload), *batch).ok();
}

bool IsCovered(const std::vector<Covered>* parts, uint32_t shard, uint32_t day) {
  if (parts == nullptr) return false;
  for (const Covered& c : *parts) {
    if (c.shard == shard && c.day == day) return true;
  }
  return false;
}

}  // namespace

void ReplayLoggedBlocks(SegmentLog& log,
                        const std::vector<std::unique_ptr<storage::EmbeddedWriter>>& writers,
                        ReplayCounts* counts) {
  const auto covered = CoveredParts(log, writers.size());
  if (covered.empty()) return;
  struct Block {
    uint32_t shard = 0;
    uint32_t day = 0;
    std::vector<std::unique_ptr<SpanBatch>> parts;
    std::vector<SegmentLog::Ref> refs;
  };
  std::map<uint64_t, Block> blocks;  // by block LSN: inserted in the order they were logged
  log.ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    if (r.kind != RecordKind::kSpans) return;
    auto it = covered.find(r.lsn);
    if (it == covered.end()) return;
    SpanBatch batch;
    if (!Decode(r.payload, &batch)) return;  // counted in the second phase
    const size_t shards = writers.size();
    for (const Covered& c : it->second) {
      std::vector<uint32_t> idx;
      for (uint32_t i = 0; i < batch.span_count(); ++i) {
        if (pipeline::ShardOf(batch.spans.trace_id[i], shards) == c.shard &&
            storage::PartitionDay(batch.spans.start_ns[i]) == c.day) {
          idx.push_back(i);
        }
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
    writers[b.shard]->InsertReplayed(b.day, pipeline::durable::DedupToken(log.epoch(), lsn),
                                     std::move(b.parts), std::move(b.refs));
  }
  spdlog::info("durable queue: {} logged block(s), {} spans, inserted again with their tokens",
               counts->blocks, counts->block_spans);
}

void ReplayRemainingRecords(SegmentLog& log, pipeline::ShardedQueue& queue,
                            pipeline::MemoryBudget& budget, ReplayCounts* counts) {
  const auto covered = CoveredParts(log, queue.shards());
  log.ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    if (r.kind != RecordKind::kSpans) return;
    counts->records++;
    auto batch = std::make_unique<SpanBatch>();
    if (!Decode(r.payload, batch.get())) {
      // Its CRC matched, so it is what was written; a newer or broken
      // encoder could still write what this decoder refuses.
      counts->bad_records++;
      spdlog::error("durable queue: record {} does not decode; skipped", r.lsn);
      return;
    }
    auto it = covered.find(r.lsn);
    if (it != covered.end()) {
      std::vector<uint32_t> idx;
      for (uint32_t i = 0; i < batch->span_count(); ++i) {
        const auto shard =
            static_cast<uint32_t>(pipeline::ShardOf(batch->spans.trace_id[i], queue.shards()));
        if (!IsCovered(&it->second, shard, storage::PartitionDay(batch->spans.start_ns[i]))) {
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
    // The writers are running: memory comes back as they store.
    while (!budget.ReserveWithin(bytes, std::chrono::milliseconds(1000))) {
    }
    queue.Push(std::move(batch), pipeline::Reservation(&budget, bytes), log.Hold(segment, r.lsn));
  });
  log.EndReplay();
  spdlog::info("durable queue: {} record(s) replayed, {} spans queued again, {} bad",
               counts->records, counts->queued_spans, counts->bad_records);
}

}  // namespace spanhouse::server
