#include "pipeline/durable/durable_queue.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "sink/sink.h"

namespace spanhouse::pipeline::durable {

DurableQueue::DurableQueue(DurableOptions options, MemoryBudget& budget, SpanFilter* filter)
    : opts_(std::move(options)), budget_(budget), filter_(filter) {}

Status DurableQueue::Open(const DurableOptions& options, MemoryBudget& budget, SpanFilter* filter,
                          std::unique_ptr<DurableQueue>* out, LogTestHooks hooks) {
  std::unique_ptr<DurableQueue> q(new DurableQueue(options, budget, filter));
  if (options.enabled) {
    if (Status st = SegmentLog::Open(options.log, &q->log_, std::move(hooks)); !st.ok()) {
      return st;
    }
    if (filter != nullptr && filter->tail() != nullptr) {
      // Tail sampling's decisions go into the log, after the records that
      // use them and before the blocks that hold their spans.
      filter->tail()->set_persist([log = q->log_.get()](std::string_view payload) -> uint64_t {
        Ticket t;
        if (!log->Append(RecordKind::kTailDecisions, payload, &t, /*past_limit=*/true).ok()) {
          return 0;
        }
        const uint64_t lsn = t.lsn();
        t.Ack();  // nobody consumes it: its segment goes when older ones have
        return lsn;
      });
    }
  }
  *out = std::move(q);
  return Status::Ok();
}

DurableQueue::~DurableQueue() {
  StopBacklogs();
  Close();
}

SinkCursor& DurableQueue::AddSink(sink::Sink& sink, bool before_tail) {
  cursors_.push_back(std::unique_ptr<SinkCursor>(new SinkCursor(*this, sink)));
  sink.Attach(*cursors_.back());
  (before_tail ? before_tail_ : after_tail_).push_back(cursors_.back().get());
  return *cursors_.back();
}

bool DurableQueue::AllBacklogged() const {
  if (log_ == nullptr || cursors_.empty()) return false;
  for (const auto& c : cursors_) {
    if (!c->backlogged()) return false;
  }
  return true;
}

bool DurableQueue::AnyBacklogged() const {
  for (const auto& c : cursors_) {
    if (c->backlogged()) return true;
  }
  return false;
}

Status DurableQueue::Append(uint64_t received_ns, codec::BodyFormat format, std::string_view body,
                            Ticket* ticket, const std::vector<std::string>& targets,
                            uint64_t view) {
  if (log_ == nullptr) return Status::Ok();
  if (!targets.empty()) {
    return log_->Append(RecordKind::kTargetedRequest,
                        TargetedRequestHead(received_ns, format, targets), body, ticket);
  }
  if (view != 0) {
    std::string head = EncodedRequestHead(received_ns, format);
    PutLe(&head, view, 8);
    return log_->Append(RecordKind::kViewedRequest, head, body, ticket);
  }
  return log_->Append(RecordKind::kEncodedRequest, EncodedRequestHead(received_ns, format), body,
                      ticket);
}

Status DurableQueue::Deliver(std::unique_ptr<SpanBatch> batch, Reservation reservation,
                             Ticket ticket, size_t bytes, size_t spans) {
  return DeliverTo({}, std::move(batch), std::move(reservation), std::move(ticket), bytes, spans);
}

Status DurableQueue::DeliverTo(const std::vector<std::string>& targets,
                               std::unique_ptr<SpanBatch> batch, Reservation reservation,
                               Ticket ticket, size_t bytes, size_t spans) {
  if (cursors_.empty()) return Status::Unavailable("no sink");
  std::vector<SinkCursor*> to;
  for (auto& c : cursors_) {
    if (targets.empty() || std::find(targets.begin(), targets.end(), c->name()) != targets.end()) {
      to.push_back(c.get());
    }
  }
  if (to.empty()) {
    ticket.Ack();  // no sink will ever take it
    return Status::Invalid("none of the sinks a request is for is configured");
  }
  return DeliverToCursors(to, std::move(batch), std::move(reservation), std::move(ticket), bytes,
                          spans);
}

void DurableQueue::DeliverBeforeTail(const SpanBatch* batch, const Ticket& ticket, size_t bytes,
                                     size_t spans) {
  std::vector<uint32_t> idx;
  for (SinkCursor* c : before_tail_) {
    if (Status st = OfferCopy(*c, batch, ticket, bytes, spans, idx); !st.ok()) {
      // Only without a log (none is kept for such a sink) or while shutting down.
      spdlog::warn("sink {}: a request was not handed on: {}", c->name(), st.message());
    }
  }
}

Status DurableQueue::DeliverAfterTail(std::unique_ptr<SpanBatch> batch, Reservation reservation,
                                      Ticket ticket, size_t bytes, size_t spans) {
  if (before_tail_.empty() || after_tail_.empty()) {
    return Deliver(std::move(batch), std::move(reservation), std::move(ticket), bytes, spans);
  }
  return DeliverToCursors(after_tail_, std::move(batch), std::move(reservation), std::move(ticket),
                          bytes, spans);
}

Status DurableQueue::OfferCopy(SinkCursor& c, const SpanBatch* batch, const Ticket& ticket,
                               size_t bytes, size_t spans, std::vector<uint32_t>& idx) {
  QueuedBatch item;
  item.ticket = ticket.Clone();
  if (batch != nullptr && !(log_ != nullptr && c.backlogged())) {
    const bool subset = c.sink_.Select(*batch, &idx);
    if (subset && idx.empty()) {
      item.ticket.Ack();  // none of it is this sink's
      return Status::Ok();
    }
    auto copy = std::make_unique<SpanBatch>();
    copy->AppendSpans(*batch, subset ? idx.data() : nullptr,
                      subset ? idx.size() : batch->span_count());
    if (c.Reserve(copy->MemoryBytes(), std::chrono::milliseconds(0), &item.reservation)) {
      item.batch = std::move(copy);
    }
  }
  return Offer(c, item, bytes, spans);
}

Status DurableQueue::DeliverToCursors(const std::vector<SinkCursor*>& to,
                                      std::unique_ptr<SpanBatch> batch, Reservation reservation,
                                      Ticket ticket, size_t bytes, size_t spans) {
  Status result;
  std::vector<uint32_t> idx;
  // Every sink but the last gets a copy with memory of its own, of the
  // spans it stores (a cluster shard's sink: its shard's); the last gets
  // the batch itself, or its own spans of it.
  for (size_t i = 0; i + 1 < to.size(); ++i) {
    if (Status st = OfferCopy(*to[i], batch.get(), ticket, bytes, spans, idx); !st.ok()) {
      result = st;
    }
  }
  SinkCursor& last = *to.back();
  QueuedBatch item;
  item.ticket = std::move(ticket);
  if (batch != nullptr && !(log_ != nullptr && last.backlogged()) &&
      (last.share() == nullptr || reservation.TakeShare(last.share()))) {
    if (last.sink_.Select(*batch, &idx) && idx.size() != batch->span_count()) {
      if (idx.empty()) {
        item.ticket.Ack();
        return result;
      }
      auto own = std::make_unique<SpanBatch>();
      own->AppendSpans(*batch, idx.data(), idx.size());
      batch = std::move(own);
      reservation.Resize(std::min(reservation.bytes(), batch->MemoryBytes()));
    }
    item.batch = std::move(batch);
    item.reservation = std::move(reservation);
  }
  if (Status st = Offer(last, item, bytes, spans); !st.ok()) result = st;
  return result;
}

Status DurableQueue::Offer(SinkCursor& c, QueuedBatch& item, size_t bytes, size_t spans) {
  if (item.batch != nullptr) {
    Status st = c.sink_.Push(item);
    // Full: the request waits in the sink's backlog, read back from the log.
    if (st.ok() || log_ == nullptr || st.code() != StatusCode::kResourceExhausted) return st;
  } else if (log_ == nullptr) {
    return Status::Exhausted("spanhouse is at its memory limit, retry later");
  }
  c.Backlog(std::move(item.ticket), bytes, spans);
  return Status::Ok();
}

void DurableQueue::OnDurable(uint64_t lsn, std::function<void(bool ok)> done) {
  if (log_ == nullptr) return done(true);
  log_->OnDurable(lsn, std::move(done));
}

void DurableQueue::StopBacklogs() {
  for (auto& c : cursors_) c->StopFeeding();
}

void DurableQueue::Close() {
  if (log_ != nullptr) log_->Close();
}

void DurableQueue::NoteAck(const std::string& sink, uint64_t block_lsn) {
  if (started_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(acked_mu_);
  acked_early_[sink].insert(block_lsn);
}

void DurableQueue::AppendMetrics(PromText& out) const {
  if (log_ == nullptr) return;
  const LogStats& s = log_->stats();
  out.One("spanhouse_durable_queue_bytes", "gauge", "The durable queue's segments on disk.", "",
          log_->bytes());
  out.One("spanhouse_durable_queue_limit_bytes", "gauge",
          "durable.max_bytes: past it, requests are answered 429.", "", log_->options().max_bytes);
  const std::tuple<const char*, const char*, uint64_t> counters[] = {
      {"spanhouse_durable_queue_records_total", "Records appended.", s.records_appended.load()},
      {"spanhouse_durable_queue_appended_bytes_total", "Bytes appended.", s.bytes_appended.load()},
      {"spanhouse_durable_queue_fsyncs_total", "fdatasync calls.", s.fsyncs.load()},
      {"spanhouse_durable_queue_rejected_full_total", "Appends refused: the queue was full.",
       s.rejected_full.load()},
      {"spanhouse_durable_queue_segments_deleted_total",
       "Segments every sink was done with (deleted or kept to be written over).",
       s.segments_deleted.load()},
      {"spanhouse_durable_queue_segments_recycled_total",
       "New segments written over a released segment's file.", s.segments_recycled.load()},
      {"spanhouse_durable_queue_corrupt_tails_total",
       "Segments whose tail was skipped at start (torn or corrupt).", s.corrupt_tails.load()},
      {"spanhouse_durable_queue_corrupt_bytes_total", "Bytes skipped in them.",
       s.corrupt_bytes.load()},
      {"spanhouse_durable_queue_replayed_records_total",
       "Records read back by the last start's replay.", s.records_replayed.load()},
      {"spanhouse_durable_queue_bad_records_total",
       "Request records the last start could not decode (skipped).", replay_.bad_records.load()}};
  for (const auto& [name, help, v] : counters) out.One(name, "counter", help, "", v);

  using Field = std::atomic<uint64_t> CursorStats::*;
  const std::tuple<const char*, const char*, const char*, Field> per_sink[] = {
      {"spanhouse_durable_queue_spilled_waiting_requests", "gauge",
       "Requests waiting on disk for the sink (its backlog).", &CursorStats::waiting_requests},
      {"spanhouse_durable_queue_spilled_waiting_spans", "gauge", "Spans in them.",
       &CursorStats::waiting_spans},
      {"spanhouse_durable_queue_spilled_requests_total", "counter",
       "Requests that waited on disk for the sink.", &CursorStats::spilled_requests},
      {"spanhouse_durable_queue_spilled_spans_total", "counter", "Spans in them.",
       &CursorStats::spilled_spans},
      {"spanhouse_durable_queue_spilled_queued_spans_total", "counter",
       "Spans read back from the backlog and handed to the sink.", &CursorStats::queued_spans},
      {"spanhouse_durable_queue_spilled_read_errors_total", "counter",
       "Backlog records that could not be read back (kept for the next start).",
       &CursorStats::read_errors},
      {"spanhouse_durable_queue_blocks_sealed_total", "counter",
       "Blocks the sink sealed before writing them.", &CursorStats::blocks_sealed},
      {"spanhouse_durable_queue_blocks_acked_total", "counter", "Sealed blocks the sink finished.",
       &CursorStats::blocks_acked},
      {"spanhouse_durable_queue_replayed_blocks_total", "counter",
       "Unfinished blocks the last start wrote again with their tokens.",
       &CursorStats::replayed_blocks},
      {"spanhouse_durable_queue_replayed_spans_total", "counter",
       "Spans the last start handed the sink again (in unfinished blocks or none).",
       &CursorStats::replayed_spans},
      {"spanhouse_durable_queue_replay_skipped_blocks_total", "counter",
       "Finished blocks the last start did not write again.", &CursorStats::skipped_blocks}};
  for (const auto& [name, type, help, field] : per_sink) {
    out.Family(name, type, help);
    for (const auto& c : cursors_) {
      uint64_t v = (c->stats().*field).load();
      if (field == &CursorStats::replayed_spans) v += c->stats().replayed_block_spans.load();
      out.Sample(name, PromText::Label("sink", c->name()), v);
    }
  }
  // Every store's lag as the queue sees it (the OpenSearch sink's
  // spanhouse_sink_lag_milliseconds adds the write it holds).
  out.Family("spanhouse_durable_queue_spilled_oldest_waiting_milliseconds", "gauge",
             "How long the oldest request waiting on disk for the sink has waited (0: none).");
  for (const auto& c : cursors_) {
    out.Sample("spanhouse_durable_queue_spilled_oldest_waiting_milliseconds",
               PromText::Label("sink", c->name()),
               static_cast<uint64_t>(c->OldestWaitingSeconds() * 1000));
  }
}

}  // namespace spanhouse::pipeline::durable
