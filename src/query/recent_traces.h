// The spans of the last seconds or minutes, indexed by trace id in memory,
// so a trace is readable the moment its request is answered: the writer
// stores spans seconds later (writer.max_age_ms), and a lookup of a fresh
// trace need not ask the store at all.
//
// Fed with a copy of every batch the primary sink takes (ObservedSink:
// live requests, read-backs and the replay after a restart alike), so it
// holds at least every span accepted and not yet stored. Bounded in bytes
// (counted against the memory budget too) and in age; the oldest batches go
// first.
//
// Two tiers. The newest batches are held whole in memory (max_bytes). One
// let go for want of room keeps, with a durable queue, only its traces' id
// hashes in memory and a keep on its request record (segment_log.h: kept
// segments, at most disk_max_bytes of them): a lookup that finds the hash
// reads the record back and decodes it as the queue's read-back does, the
// same spans filtered and sampled the same. So the index covers minutes of
// traffic for ~8 bytes of memory per trace and batch, on disk the log
// already wrote. Searches, services and operations see the memory tier.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/memory_budget.h"
#include "common/prom_text.h"
#include "model/span_batch.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "query/span_reader.h"
#include "sink/observed_sink.h"

namespace spanhouse::query {

struct RecentTracesOptions {
  size_t max_bytes = 64u << 20;  // 0: the index is off
  std::chrono::milliseconds max_age{std::chrono::minutes(15)};
  // The disk tier: the durable queue's log (null: none) and its filter (as
  // DurableQueue::filter()), and the most bytes of kept segments.
  pipeline::durable::SegmentLog* log = nullptr;
  pipeline::SpanFilter* filter = nullptr;
  uint64_t disk_max_bytes = 2ull << 30;
};

// What the index holds of one trace.
struct RecentHit {
  size_t spans = 0;
  // The trace's root span (no parent) is held: its start time, else 0.
  uint64_t root_start_ns = 0;
};

class RecentTraces final : public sink::BatchObserver {
 public:
  // `budget` (may be null): each batch held is charged to it as well; a
  // batch that finds no room there after the oldest went is not held.
  // `start_ns`: the process's start; nothing received before it is held
  // (except what the durable queue replays), so it bounds horizon_ns().
  RecentTraces(RecentTracesOptions options, MemoryBudget* budget, uint64_t start_ns);
  ~RecentTraces() override;
  RecentTraces(const RecentTraces&) = delete;
  RecentTraces& operator=(const RecentTraces&) = delete;

  // Holds `batch` (its spans not sampled out), received at `now_ns`;
  // `keep`: its record's keep, for the disk tier (may be empty).
  void Add(std::unique_ptr<SpanBatch> batch, uint64_t now_ns, sink::Ticket keep = {});

  // sink::BatchObserver: Add at the wall clock's now.
  void Observe(std::unique_ptr<SpanBatch> copy, sink::Ticket keep) override;
  // Only with a disk tier.
  bool wants_keeps() const override {
    return opts_.max_bytes != 0 && opts_.log != nullptr && opts_.disk_max_bytes != 0;
  }

  // Appends the trace's held spans to `out` (each span once, however often
  // it was received), from memory and from the records of the disk tier.
  RecentHit Collect(const TraceId& id, SpanBatch* out);

  // Every span received after this time is held: the latest of the
  // process's start and the receive time of the newest batch let go (or
  // not taken for want of room).
  uint64_t horizon_ns() const;

  // The traces with a held span matching every condition of `q` (as the
  // stores match them: the span's or its resource's attributes, and the
  // tags Jaeger derives from span fields), newest first, at most q.limit.
  void Find(const TraceQuery& q, std::vector<TraceId>* out);

  // The services of the spans held (added to `out`, unsorted), and the
  // operations of `service` (of `kind` only unless `any_kind`), so that a
  // service is listed the moment its first span is accepted.
  void Services(std::vector<std::string>* out);
  void Operations(const std::string& service, bool any_kind, uint8_t kind,
                  std::vector<OperationInfo>* out);

  // Drops what is older than max_age (also done by Add).
  void Expire(uint64_t now_ns);

  void AppendMetrics(PromText& out) const;

 private:
  struct Held {
    std::unique_ptr<SpanBatch> batch;
    // (hash of the trace id, span) of its spans not sampled out, sorted:
    // a lookup is a binary search per batch held, and holding a batch
    // costs one sort, no allocation per trace.
    std::vector<std::pair<uint64_t, uint32_t>> keys;
    uint64_t received_ns = 0;
    size_t bytes = 0;
    sink::Ticket keep;
  };
  // A batch of the disk tier: its record, and its traces' id hashes
  // (sorted, each once; of its spans not sampled out).
  struct Kept {
    std::vector<uint64_t> traces;
    sink::Ticket keep;
    uint64_t received_ns = 0;
    size_t bytes = 0;  // memory
    size_t spans = 0;
  };

  // Under mu_.
  // Of the memory tier: to the disk tier (when `to_disk` and it can), or let go.
  void DropOldest(bool to_disk = true);
  void DropOldestKept();  // of the disk tier: let go
  void LetGo(uint64_t received_ns);
  void ExpireLocked(uint64_t now_ns);

  const RecentTracesOptions opts_;
  MemoryBudget* const budget_;
  const uint64_t start_ns_;

  mutable std::mutex mu_;
  std::deque<Held> held_;  // oldest first
  std::deque<Kept> kept_;  // oldest first, all older than held_
  size_t bytes_ = 0;
  size_t spans_ = 0;
  size_t kept_bytes_ = 0;  // memory of kept_
  size_t kept_spans_ = 0;
  uint64_t let_go_ns_ = 0;  // received time of the newest batch let go or not taken

  // Counters for /metrics (under mu_).
  uint64_t batches_total_ = 0;
  uint64_t dropped_batches_total_ = 0;  // let go before max_age: no room
  uint64_t refused_batches_total_ = 0;  // not taken: no room in the budget
  uint64_t lookups_total_ = 0;
  uint64_t lookup_hits_total_ = 0;
  uint64_t kept_batches_total_ = 0;  // moved to the disk tier
  uint64_t record_reads_total_ = 0;  // records read back by lookups
  uint64_t record_read_errors_total_ = 0;
};

}  // namespace spanhouse::query
