// A sink: where accepted spans are stored (the embedded ClickHouse, a
// ClickHouse cluster, OpenSearch, nowhere). The durable queue gives each sink
// its own cursor and hands it, in order, the spans of every accepted request;
// the sink writes them at its own pace and acknowledges each request's ticket
// once its spans are stored, so a slow or failing sink holds back only
// itself. Implementations live beside the store they write
// (storage/clickhouse/embedded_sink.h) or here (null_sink.h); README.md says
// how to add one.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/histogram.h"
#include "common/prom_text.h"
#include "common/status.h"
#include "model/span_batch.h"
#include "sink/block.h"
#include "sink/ledger.h"

namespace spanhouse::sink {

// What every sink counts, rendered per sink in /metrics (sink="<name>").
struct SinkStats {
  std::atomic<uint64_t> rows_written{0};
  std::atomic<uint64_t> writes{0};        // inserts or bulk requests that succeeded
  std::atomic<uint64_t> write_errors{0};  // attempts that failed (each retried or given up)
  std::atomic<uint64_t> retryable_errors{0};
  std::atomic<uint64_t> permanent_errors{0};
  std::atomic<uint64_t> rows_lost{0};  // neither stored, dead-lettered nor left queued
  std::atomic<uint64_t> rows_dead_lettered{0};
  std::atomic<uint64_t> blocks_dead_lettered{0};
  // Left in the durable queue at shutdown (written after the next start).
  std::atomic<uint64_t> rows_left_queued{0};
  std::atomic<uint64_t> pending_rows{0};  // taken and not yet written
  // Bytes of rows sent over the network to the store (request bodies, each
  // attempt); 0 for a store in this process.
  std::atomic<uint64_t> bytes_sent{0};
  LatencyHistogram write_seconds;
};

class Sink {
 public:
  virtual ~Sink() = default;

  // Stable across restarts: the durable queue keys this sink's sealed blocks
  // and acknowledgements by it.
  virtual const std::string& name() const = 0;

  // Called once, before Start, by the durable queue: the ledger this sink
  // seals its blocks with and acknowledges through (ledger.h).
  virtual void Attach(BlockLedger& ledger) = 0;

  // Which spans of `batch` (a record's, read back at start) a block this
  // sink sealed under `key` holds, into `idx`. False: a key it does not
  // know (the block is then treated as unreadable: its spans handed over
  // again as new). By default a block holds whole records.
  virtual bool BlockMembers(std::string_view key, const SpanBatch& batch,
                            std::vector<uint32_t>* idx) const;

  // Which spans of a request's `batch` this sink stores, into `idx`
  // (ascending; maybe none), so that the durable queue hands it a copy of
  // those only. False: every span (the default). A ClickHouse shard's sink
  // takes the traces its shard owns.
  virtual bool Select(const SpanBatch& /*batch*/, std::vector<uint32_t>* /*idx*/) const {
    return false;
  }

  // Starts the sink's threads. The durable queue then replays to it what it
  // had not stored, before any new request.
  virtual Status Start() = 0;

  // Takes one item (moved from) without blocking: a request's spans with
  // their ticket, or (item.block) a block sealed before a crash, to be
  // written again exactly as it was. Refused (kResourceExhausted: full;
  // kUnavailable: draining), the item is left as it was. Called from several
  // threads.
  virtual Status Push(QueuedBatch& item) = 0;

  // After the last Push: writes what it holds (a failing store is retried a
  // bounded number of times; what is left stays in the durable queue for the
  // next start), then returns. No I/O is left in its destructor.
  virtual void Drain() = 0;

  virtual const SinkStats& stats() const = 0;
  // Bytes of spans it holds in memory, for /metrics.
  virtual size_t queued_bytes() const = 0;
  // Its families in /metrics: AppendSinkMetrics (below) and any of its own.
  virtual void AppendMetrics(PromText& out) const = 0;
};

// The counters of SinkStats, labelled sink="<name>".
void AppendSinkMetrics(const std::string& name, const SinkStats& stats, PromText& out);

}  // namespace spanhouse::sink
