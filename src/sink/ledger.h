// A sink's ledger: where it seals its blocks before writing them and says
// when they are done. The durable queue gives every sink one (its cursor,
// pipeline/durable/sink_cursor.h); a sink knows only this interface.
//
// Exactly once: a store that can deduplicate writes seals each write first
// (Seal: which records' spans it holds, synced; returns the token) and writes
// with the token. After a crash the queue forms each sealed, unfinished block
// again from its records, asking the sink which of a record's spans the block
// held (Sink::BlockMembers with the block's key), and hands it back
// (QueuedBatch::block) to be written exactly as before.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sink/block.h"
#include "sink/ticket.h"

namespace spanhouse::sink {

class BlockLedger {
 public:
  virtual ~BlockLedger() = default;
  // Logs which records a block holds (their tickets' LSNs) under the sink's
  // `key`, synced, before the sink writes it; the token is made from that
  // record. Unsealed (no token) without a log or tickets, or if the log cannot
  // take it (then a crash at the wrong moment stores the block twice).
  virtual SealedBlock Seal(std::string_view key, const std::vector<Ticket>& tickets,
                           uint32_t chunks) = 0;
  // The block is written (or dead-lettered): logged (a replay skips it) and
  // `tickets` acked, emptying it. For an unsealed block only the acks.
  virtual void Done(const SealedBlock& block, std::vector<Ticket>* tickets) = 0;
  // How long the oldest request waiting for this sink on disk has waited
  // (0: none): with the sink's own oldest write, how far behind it is.
  virtual double OldestWaitingSeconds() = 0;
};

}  // namespace spanhouse::sink
