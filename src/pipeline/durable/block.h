// A sink's block as the durable queue knows it: which records' spans one
// write of the sink holds, sealed in the log before the write so that a write
// interrupted by a crash is repeated exactly (records.h: kSinkBlock).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/span_batch.h"
#include "pipeline/durable/segment_log.h"

namespace spanhouse::pipeline::durable {

// Which spans of its records a block holds: those whose trace falls in shard
// `shard` of `shards` (pipeline::ShardOf) and that start on `day` (days since
// the epoch).
struct BlockKey {
  uint32_t shard = 0;
  uint32_t shards = 1;
  uint32_t day = 0;
};

// A block sealed in the log: the LSN of its record, and the deduplication
// token made from it. Unsealed (no log, or no records): lsn 0, no token.
struct SealedBlock {
  uint64_t lsn = 0;
  std::string token;
  bool sealed() const { return lsn != 0; }
};

// A block sealed before a crash and not acknowledged, formed again from its
// records at the next start: the sink writes it as it did then (the same
// spans, read as `chunks` pieces, with the same token), so the store keeps
// it once whether or not the first write reached it, then acknowledges it
// like any block.
struct ReplayBlock {
  BlockKey key;
  uint32_t chunks = 1;
  SealedBlock sealed;
  std::vector<std::unique_ptr<SpanBatch>> parts;  // at most one per record
  std::vector<Ticket> tickets;                    // the records', for this sink
  size_t spans() const {
    size_t n = 0;
    for (const auto& p : parts) n += p->span_count();
    return n;
  }
};

}  // namespace spanhouse::pipeline::durable
