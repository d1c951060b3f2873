// One sink's place in the durable queue. Every sink has its own, so each
// consumes and acknowledges at its own pace:
//   - live: a request's spans go to the sink's Push from memory;
//   - backlogged: when the sink cannot take them now (its memory share is
//     spent, or it refuses), the request's ticket waits here instead, and one
//     thread reads such records back from the log, in order, as the sink's
//     memory comes free. While anything waits, every new request waits too,
//     so the sink sees them in the order they came. A slow or dead sink thus
//     holds back only itself: its backlog is on disk, bounded by the log's
//     size, and receivers see back-pressure only when the log is full.
//   - acknowledgements: the sink seals a block (which records' spans one write
//     holds) before writing it and says when it is done; both go to the log,
//     so a replay writes an unfinished block again with the same token and
//     skips a finished one. A record's segment is freed once every sink has
//     acked its ticket for it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/memory_budget.h"
#include "common/status.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "sink/block.h"
#include "sink/ledger.h"

namespace spanhouse::sink {
class Sink;
}

namespace spanhouse::pipeline::durable {

using sink::QueuedBatch;
using sink::ReplayBlock;
using sink::SealedBlock;

class DurableQueue;

// A cursor's counters (spanhouse_durable_queue_*{sink="<name>"}).
struct CursorStats {
  std::atomic<uint64_t> spilled_requests{0};  // tickets that waited in the backlog
  std::atomic<uint64_t> spilled_spans{0};
  std::atomic<uint64_t> queued_requests{0};  // read back and handed to the sink
  std::atomic<uint64_t> queued_spans{0};
  std::atomic<uint64_t> read_errors{0};  // records that could not be read back (kept for replay)
  std::atomic<uint64_t> waiting_requests{0};
  std::atomic<uint64_t> waiting_spans{0};
  std::atomic<uint64_t> blocks_sealed{0};
  std::atomic<uint64_t> blocks_acked{0};
  // The last start's replay to this sink.
  std::atomic<uint64_t> replayed_blocks{0};       // unfinished blocks written again
  std::atomic<uint64_t> replayed_block_spans{0};  // spans in them
  std::atomic<uint64_t> replayed_spans{0};        // spans no block held, handed over as new
  std::atomic<uint64_t> skipped_blocks{0};        // finished blocks not written again
};

class SinkCursor final : public sink::BlockLedger {
 public:
  ~SinkCursor() override;
  SinkCursor(const SinkCursor&) = delete;
  SinkCursor& operator=(const SinkCursor&) = delete;

  const std::string& name() const { return name_; }

  // For the sink. Logs which records a block holds (their tickets' LSNs),
  // synced, before the sink writes it; the block's token is made from that
  // record's LSN. Unsealed (no token) without a log or tickets, or if the
  // log cannot take it (then a crash at the wrong moment stores the block
  // twice: logged as a warning).
  SealedBlock Seal(std::string_view key, const std::vector<Ticket>& tickets,
                   uint32_t chunks) override;
  // The block is written (or dead-lettered): logs that (a replay skips it)
  // and acks `tickets`, emptying it. For an unsealed block only the acks.
  void Done(const SealedBlock& block, std::vector<Ticket>* tickets) override;

  // True while requests wait in the backlog.
  bool backlogged() const { return stats_.waiting_requests.load(std::memory_order_acquire) > 0; }
  // How long the oldest request waiting in the backlog has waited (0: none):
  // with the sink's own oldest write, how far behind the sink is.
  double OldestWaitingSeconds() override;
  // The sink's cap on the memory budget (null: it may use all of it).
  MemoryBudget* share() { return share_.get(); }
  const CursorStats& stats() const { return stats_; }
  sink::Sink& sink() { return sink_; }

 private:
  friend class DurableQueue;
  struct Entry {
    Ticket ticket;
    size_t bytes = 0;
    size_t spans = 0;
    std::chrono::steady_clock::time_point since{};  // when it joined the backlog
  };
  SinkCursor(DurableQueue& queue, sink::Sink& sink);

  // `bytes` of the budget (and of the share), waiting up to `wait`.
  bool Reserve(size_t bytes, std::chrono::milliseconds wait, Reservation* out);
  // A request whose spans the sink reads back later (its ticket, the memory
  // its decoded batch took, its span count).
  void Backlog(Ticket ticket, size_t bytes, size_t spans);
  void StartFeeding();
  // What still waits stays in the log, for the next start.
  void StopFeeding();
  void Loop();
  bool Feed(Entry& e);  // false: stop feeding

  DurableQueue& queue_;
  sink::Sink& sink_;
  const std::string name_;
  std::unique_ptr<MemoryBudget> share_;
  CursorStats stats_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> entries_;  // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace spanhouse::pipeline::durable
