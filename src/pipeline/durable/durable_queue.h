// The durable queue: the one way from the receivers to the sinks.
//
// A receiver appends each accepted request to the log (Append: one record,
// the ticket), answers once it is durable by the fsync policy (OnDurable),
// and delivers the decoded spans (Deliver): every sink gets them through its
// own cursor (sink_cursor.h), from memory or, when it is behind, read back
// from the log. Sinks seal their blocks and acknowledge them through their
// cursor; a segment is freed once every sink has acked all its records.
//
// At start (Start), each sink is replayed what it had not finished, through
// the same Push as live traffic: first the blocks it sealed and did not
// acknowledge, formed again from their records and written with their old
// tokens (a block stored before the crash is kept once by the store), then
// the spans of every record no block of that sink held, like new requests.
// Records are filtered again against their receive time, so spans the
// client was told were rejected stay out. Each record is decoded once for
// all of that (every sink, every block, the replay observer), held between
// the replay's reads of the log up to a share of the memory budget.
//
// Without a log (durable.enabled: false) nothing is on disk: tickets are
// empty, a sink that cannot take spans now refuses the request (429), and
// nothing is replayed; one sink only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codec/body.h"
#include "common/memory_budget.h"
#include "common/prom_text.h"
#include "common/status.h"
#include "pipeline/delivery.h"
#include "pipeline/durable/records.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/durable/sink_cursor.h"
#include "pipeline/filter/span_filter.h"
#include "sink/block.h"

namespace spanhouse::pipeline {
class TailWindow;
}  // namespace spanhouse::pipeline

namespace spanhouse::pipeline::durable {

struct DurableOptions {
  bool enabled = true;  // false: no log
  LogOptions log;
};

// The last start's replay (also per sink in CursorStats).
struct ReplayStats {
  std::atomic<uint64_t> records{0};      // request records read
  std::atomic<uint64_t> bad_records{0};  // that would not decode (counted, skipped)
  std::atomic<uint64_t> bad_block_records{0};
};

class DecodedRecords;

class DurableQueue final : public Delivery {
 public:
  // Opens the log (indexing what a previous process left) when enabled.
  // `budget` and `filter` (may be null) must outlive the queue.
  static Status Open(const DurableOptions& options, MemoryBudget& budget, SpanFilter* filter,
                     std::unique_ptr<DurableQueue>* out, LogTestHooks hooks = {});
  ~DurableQueue() override;

  // Before Start: a sink and its cursor (attached to the sink). With several
  // sinks each may hold at most its share of the memory budget. `before_tail`:
  // the sink forwards spans to the node that owns their traces (a peer sink),
  // which samples them, so it takes a request before tail sampling decides it.
  SinkCursor& AddSink(sink::Sink& sink, bool before_tail = false);

  // Before Start, for a sink not added (its name the same as one that will
  // be): writes the blocks it sealed and did not finish, then logs, synced,
  // that they are done. For a store about to be copied by a schema upgrade,
  // whose copy forgets the tokens that would keep a later replay from
  // storing them twice. Starts and drains `sink`. Not OK: some were not
  // stored, and the copy must not begin.
  Status ReplaySealedBlocks(sink::Sink& sink);

  // Before Start: Start (with sinks) calls `fn` with the spans of every request record in
  // the log (decoded and filtered as the replay reads them, before tail
  // sampling's marks; undecodable ones skipped), before the receivers
  // open. Every one of them is stored, or will be by the replay.
  void set_replay_observer(std::function<void(const SpanBatch&)> fn) {
    replay_observer_ = std::move(fn);
  }

  // Replays to every sink what it had not finished, then starts the
  // backlogs' threads. Call once every sink is started, so that what it is
  // handed gets written.
  void Start();

  // ---- for the receivers ----
  bool durable() const { return log_ != nullptr; }
  bool fsync_always() const { return log_ != nullptr && log_->options().fsync_always; }
  // True when every sink has a backlog: a request then waits on disk, for
  // whatever memory there is, so that it comes after them.
  bool AllBacklogged() const;
  // True when some sink has a backlog (requests waiting on disk for it).
  bool AnyBacklogged() const override;
  // Appends a request: its receive time, body format and (decompressed)
  // body. kResourceExhausted: the log is full; kUnavailable: it cannot be
  // written. Without a log: OK with an empty ticket.
  // `targets`: the sinks it is for (an import; replayed to those only);
  // empty: every sink. `view`: the request's SpanBatch::peer_view (0: none),
  // logged with it when it is for every sink.
  Status Append(uint64_t received_ns, codec::BodyFormat format, std::string_view body,
                Ticket* ticket, const std::vector<std::string>& targets = {}, uint64_t view = 0);
  // Hands an appended request's spans to every sink. `batch` null: it was
  // not kept in memory (spilled), and every sink reads it back from the log.
  // `bytes` and `spans`: the decoded batch's memory and span count. Refused
  // only without a log (a full sink: kResourceExhausted) or while shutting
  // down (kUnavailable).
  Status Deliver(std::unique_ptr<SpanBatch> batch, Reservation reservation, Ticket ticket,
                 size_t bytes, size_t spans) override;
  // Deliver, to the sinks named in `targets` only (empty: every sink), for
  // a request appended with those targets. kInvalidArgument: none of them
  // is configured.
  Status DeliverTo(const std::vector<std::string>& targets, std::unique_ptr<SpanBatch> batch,
                   Reservation reservation, Ticket ticket, size_t bytes, size_t spans);
  // With tail sampling: the before-tail sinks' copies of a request (`batch`
  // null: spilled), at once, each with a claim of its own on `ticket`'s record.
  void DeliverBeforeTail(const SpanBatch* batch, const Ticket& ticket, size_t bytes, size_t spans);
  // Deliver, to the sinks DeliverBeforeTail does not serve (all without any).
  Status DeliverAfterTail(std::unique_ptr<SpanBatch> batch, Reservation reservation, Ticket ticket,
                          size_t bytes, size_t spans) override;
  // SegmentLog::OnDurable; done(true) at once without a log.
  void OnDurable(uint64_t lsn, std::function<void(bool ok)> done);

  // ---- shutdown, after the receivers stopped ----
  // Stops reading backlogs back: what waits stays in the log.
  void StopBacklogs();
  // After the sinks drained: syncs and closes the log.
  void Close();

  // Tail sampling's window, which delivers the requests it holds (the
  // intake hands requests to it instead of to Deliver); null: none.
  void set_tail_window(TailWindow* window) { tail_window_ = window; }
  TailWindow* tail_window() const { return tail_window_; }

  SegmentLog* log() { return log_.get(); }
  const std::vector<std::unique_ptr<SinkCursor>>& cursors() const { return cursors_; }
  const ReplayStats& replay_stats() const { return replay_; }
  MemoryBudget& budget() { return budget_; }
  SpanFilter* filter() const { return filter_; }
  // spanhouse_durable_queue_* families.
  void AppendMetrics(PromText& out) const;

 private:
  friend class SinkCursor;
  struct SinkBlocks {
    std::map<uint64_t, BlockRecord> sealed;  // by block LSN
    std::unordered_set<uint64_t> acked;      // block LSNs
  };
  DurableQueue(DurableOptions options, MemoryBudget& budget, SpanFilter* filter);
  // The sealed and acked blocks of every sink, from the log as found at Open
  // and this process's acks before Start.
  std::unordered_map<std::string, SinkBlocks> ScanBlocks();
  // Writes the unfinished blocks of each of `cursors` (its `blocks`, by
  // index) again, reading the log once; returns each one's block LSNs.
  std::vector<std::vector<uint64_t>> ReplayBlocks(const std::vector<SinkCursor*>& cursors,
                                                  const std::vector<const SinkBlocks*>& blocks,
                                                  DecodedRecords& decoded);
  // Tail sampling: the spans of every record read, their traces decided.
  void ObserveForTail(DecodedRecords& decoded);
  // Hands every sink the spans no block of its own held.
  void ReplayRecords(const std::unordered_map<std::string, SinkBlocks>& blocks,
                     DecodedRecords& decoded);
  void NoteAck(const std::string& sink, uint64_t block_lsn);
  // A sealed block of `cursor`'s whose key its sink refused (counted).
  void BadKey(SinkCursor& cursor, uint64_t block_lsn);
  // Hands the sinks `to` their spans of `batch`: copies to all but the last, which gets the
  // batch itself.
  Status DeliverToCursors(const std::vector<SinkCursor*>& to, std::unique_ptr<SpanBatch> batch,
                          Reservation reservation, Ticket ticket, size_t bytes, size_t spans);
  // A copy of `c`'s spans of `batch` (null: read back) with a claim of its own on the record.
  Status OfferCopy(SinkCursor& c, const SpanBatch* batch, const Ticket& ticket, size_t bytes,
                   size_t spans, std::vector<uint32_t>& idx);
  // `item` (its batch null: read back from the log) to `c`, or to its
  // backlog when it is full.
  Status Offer(SinkCursor& c, QueuedBatch& item, size_t bytes, size_t spans);

  const DurableOptions opts_;
  MemoryBudget& budget_;
  SpanFilter* filter_;
  std::unique_ptr<SegmentLog> log_;
  std::vector<std::unique_ptr<SinkCursor>> cursors_;
  std::vector<SinkCursor*> before_tail_;  // of cursors_: the peer sinks'
  std::vector<SinkCursor*> after_tail_;   // the others
  ReplayStats replay_;
  // Blocks acknowledged in this process before Start: their records went to
  // segments the replay does not read.
  std::mutex acked_mu_;
  std::unordered_map<std::string, std::unordered_set<uint64_t>> acked_early_;  // by acked_mu_
  std::atomic<bool> started_{false};
  TailWindow* tail_window_ = nullptr;
  std::function<void(const SpanBatch&)> replay_observer_;
};

}  // namespace spanhouse::pipeline::durable
