// Replays the durable queue at start, before the receivers open, so spans
// acknowledged before a crash are stored after it, once each.
//
// Two phases. First, with the writers not yet started, every block a
// writer logged (pipeline/durable/block_record.h) is formed again from the
// records it names and inserted with its old deduplication token: a block
// that was stored before the crash is refused by the engine as a duplicate,
// one that was not is stored. Then, with the writers running, the spans of
// every record that no logged block covered go through the queue like new
// spans (and get new blocks and tokens): queued while the memory budget
// allows, then handed to the spill backlog, which queues them as memory
// comes free (without a backlog: waiting for memory here).
//
// A schema upgrade that copies the spans table (schema.h: before_copy)
// starts the engine's deduplication history afresh, so a block whose
// insert was ambiguous before it and replayed after it would be stored
// twice. ReplayLoggedBlocksBeforeCopy runs the first phase into the old
// table, whose history still holds the tokens, then logs which blocks it
// stored (RecordKind::kReplayed, synced) before the copy begins; every
// later first phase skips those blocks, and the second still counts their
// records as covered.
//
// Records the receivers logged with their receive time are filtered again
// against it, so spans the client was told were rejected stay out.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "receivers/durable/spill_backlog.h"
#include "storage/clickhouse/embedded_writer.h"

namespace spanhouse::server {

struct ReplayCounts {
  uint64_t records = 0;       // span records read
  uint64_t blocks = 0;        // logged blocks inserted again (deduplicated if stored)
  uint64_t block_spans = 0;   // spans in them
  uint64_t queued_spans = 0;  // spans queued as new
  uint64_t bad_records = 0;   // records that would not decode (counted, skipped)
  // logged blocks found stored before a copying upgrade (not inserted again)
  uint64_t blocks_replayed_before_upgrade = 0;
  // The blocks ReplayLoggedBlocksBeforeCopy stored in this process: its
  // kReplayed record went to a new segment, which this process's replay
  // does not read.
  std::vector<uint64_t> stored_before_copy;
};

// Phase one: call before the writers start. `inserted` (may be null) gets
// the LSNs of the block records it inserted again.
void ReplayLoggedBlocks(pipeline::durable::SegmentLog& log,
                        const std::vector<std::unique_ptr<storage::EmbeddedWriter>>& writers,
                        pipeline::SpanFilter* filter, ReplayCounts* counts,
                        std::vector<uint64_t>* inserted = nullptr);
// Phase one into a table about to be copied by a schema upgrade, with
// `writer` (not started), then the kReplayed record, synced. Not OK: the
// upgrade must not begin.
Status ReplayLoggedBlocksBeforeCopy(pipeline::durable::SegmentLog& log,
                                    storage::EmbeddedWriter& writer, pipeline::SpanFilter* filter,
                                    ReplayCounts* counts);
// Phase two: call once the writers run; ends the replay (EndReplay).
// `filter` and `backlog` may be null.
void ReplayRemainingRecords(pipeline::durable::SegmentLog& log, pipeline::ShardedQueue& queue,
                            pipeline::MemoryBudget& budget, pipeline::SpanFilter* filter,
                            receivers::SpillBacklog* backlog, ReplayCounts* counts);

}  // namespace spanhouse::server
