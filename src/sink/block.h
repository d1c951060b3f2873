// What a sink is handed and how it makes its writes exactly-once: the sink
// contract's data. The durable queue (pipeline/durable) builds on these; a
// sink never sees the queue itself, only a BlockLedger (ledger.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/memory_budget.h"
#include "model/span_batch.h"
#include "sink/ticket.h"

namespace spanhouse::sink {

// A block sealed in the ledger: the LSN of its seal, and the deduplication
// token made from it. Unsealed (no ledger, or no records): lsn 0, no token.
struct SealedBlock {
  uint64_t lsn = 0;
  std::string token;
  bool sealed() const { return lsn != 0; }
};

// A block sealed before a crash and not acknowledged, formed again from its
// records at the next start: the sink writes it as it did then (the same
// spans, read as `chunks` pieces, with the same token), so the store keeps
// it once whether or not the first write reached it, then acknowledges it
// like any block. `key` is the sink's own (Sink::BlockMembers reads it).
struct ReplayBlock {
  std::string key;
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

// What a sink is handed: one request's spans (or a part of them), or a whole
// block to write again after a restart.
struct QueuedBatch {
  std::unique_ptr<SpanBatch> batch;
  size_t bytes = 0;  // set by the sink's queue
  // The batch's share of the memory budget, released by the sink once the
  // spans no longer need memory (written, or spooled to disk).
  Reservation reservation;
  // The request's record in the durable queue (none without it): acked once
  // the spans are stored.
  Ticket ticket;
  // Set (and `batch` null): a block sealed before a crash, formed again.
  std::unique_ptr<ReplayBlock> block;
};

}  // namespace spanhouse::sink
