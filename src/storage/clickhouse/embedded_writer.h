// The sink writer for embedded ClickHouse: one thread per queue shard, each
// draining its shard and inserting in large batches over its own connection.
//
// Dequeued SpanBatches wait in a pending set per partition (day), so an
// insert touches one partition. A set is inserted when it holds enough rows
// or bytes, or when its oldest span has waited long enough: its spans are
// then encoded as one Native block sorted by the table's key. The insert reads the blocks from a
// spool file through the file() table function, which design.md measured as
// far cheaper than data inline in the query text. A failed insert is retried
// with backoff and the shard is not drained meanwhile, so a slow or failing
// store fills the memory budget and turns into back-pressure (429s).
// Two threads per shard: one drains the queue and encodes, the other
// inserts, so the next block is encoded while the engine stores this one. The
// memory reserved for a batch is released once its spans are stored.
//
// Resources (schema.h) are written once per fingerprint: a pending buffer
// also carries a resources block with the resources its spans use that this
// writer has not stored yet, inserted before the spans, so a stored span's
// resource is always there too. Once a day (resource_refresh) the writer
// stores the resources in use again, so retention (counted from a resource
// row's last_seen) never deletes a resource that stored spans still use.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/histogram.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/queue/span_queue.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {

// The spans table's partition key, toDate(timestamp), as days since the
// epoch: a writer's insert holds spans of one such day.
inline uint32_t PartitionDay(uint64_t start_ns) {
  return static_cast<uint32_t>(start_ns / 86400000000000ull);
}

struct WriterOptions {
  size_t max_rows = 200000;
  size_t max_bytes = 128u << 20;  // of batches in memory (SpanBatch::MemoryBytes)
  std::chrono::milliseconds max_age{1000};
  std::string spool_dir;   // where insert files are written
  std::string name = "0";  // tells shards' spool files and logs apart
  // Encode, then discard instead of inserting: measures the pipeline alone
  // (and lets the writer's batching be tested without an engine).
  bool null_sink = false;
  // Longest wait between retries of a failed insert (doubling from 100 ms).
  std::chrono::milliseconds max_backoff{5000};
  // At shutdown, how many times a failing insert is retried before the
  // pending spans are given up (and logged and counted as lost).
  int shutdown_retries = 5;
  // Attribute keys outside these namespaces are copied to user_fields.
  std::vector<std::string> well_known = UserFields::DefaultWellKnown();
  // Where a span's user fields keep their values: schema 5 stores them once
  // (kMarked); kInArrays writes as schema 4 did (the upgrade's tests).
  UserFieldValues user_field_values = UserFieldValues::kMarked;
  // How often the writer forgets which resources it has stored and stores
  // them again (with a fresh last_seen): the resources table's retention
  // (schema.cc) counts from last_seen, so a resource in use is never older
  // there than this.
  std::chrono::seconds resource_refresh{86400};
  // The durable queue's log (null: none). Before a block of logged batches
  // is inserted, the writer logs which records it holds (block_record.h)
  // and inserts it with a deduplication token made of that record's LSN.
  pipeline::durable::SegmentLog* log = nullptr;
  uint32_t shard = 0;
  uint32_t shards = 1;
  // Where blocks the engine refuses for good are written (dead_letter.h);
  // empty: <spool_dir>/../dead-letter.
  std::string dead_letter_dir;
  // An error neither known as retryable nor as permanent is retried this
  // many times, then the block is dead-lettered.
  int unknown_error_attempts = 10;
};

// Fault injection for tests (`debug.fault_injection` in the config): set at
// run time through the query listener's /debug/sink endpoint.
struct SinkFaults {
  std::atomic<uint32_t> insert_delay_ms{0};  // stall before every insert
  std::atomic<bool> fail_inserts{false};     // every insert fails (retryable)
  std::atomic<bool> fail_permanent{false};   // every insert fails as a type mismatch
  // The process kills itself (SIGKILL) right after an insert is stored and
  // before its records leave the durable queue: the replay must not store
  // that block again.
  std::atomic<bool> kill_after_insert{false};
};

struct WriterStats {
  std::atomic<uint64_t> rows_written{0};
  std::atomic<uint64_t> inserts{0};
  std::atomic<uint64_t> insert_errors{0};
  std::atomic<uint64_t> rows_lost{0};
  std::atomic<uint64_t> retryable_errors{0};
  std::atomic<uint64_t> permanent_errors{0};
  std::atomic<uint64_t> rows_dead_lettered{0};
  std::atomic<uint64_t> blocks_dead_lettered{0};
  // Left in the durable queue at shutdown (stored after the next start).
  std::atomic<uint64_t> rows_left_queued{0};
  std::atomic<uint64_t> pending_rows{0};
  LatencyHistogram insert_seconds;
};

class EmbeddedWriter {
 public:
  // `conn` may be null only with options.null_sink.
  EmbeddedWriter(ChdbConnection* conn, Capabilities caps, pipeline::SpanQueue& queue,
                 WriterOptions options, const SinkFaults* faults = nullptr);
  ~EmbeddedWriter();
  void Start();
  // Before Start: inserts one block re-formed from the durable log after a
  // restart (`parts`, all of day `day`) with the token it had before, so a
  // block that was stored already is not stored again. Retries like any
  // insert; the refs are released once it is stored.
  void InsertReplayed(uint32_t day, std::string token,
                      std::vector<std::unique_ptr<SpanBatch>> parts,
                      std::vector<pipeline::durable::SegmentLog::Ref> refs);
  // Returns once the queue is closed and drained and the last insert is done.
  void Join();
  const WriterStats& stats() const { return stats_; }

 private:
  // Spans waiting for one partition's next insert: whole batches, encoded
  // only at the flush, so the block can be written in the table's order.
  struct Pending {
    std::vector<std::unique_ptr<SpanBatch>> batches;
    std::vector<std::vector<uint64_t>> resource_ids;  // per batch, by resource index
    size_t rows = 0;
    size_t bytes = 0;                     // the batches' MemoryBytes
    std::string resource_blocks;          // Native blocks of the resources table
    std::vector<uint64_t> new_resources;  // ids in resource_blocks
    std::chrono::steady_clock::time_point since;
    std::vector<pipeline::Reservation> reservations;
    std::vector<pipeline::durable::SegmentLog::Ref> refs;  // the log records of the batches
  };
  // An encoded insert, handed from the encoding thread to the inserting one.
  struct Flight {
    uint32_t day = 0;
    size_t rows = 0;
    std::string resource_blocks;
    EncodedBlock block;
    std::vector<pipeline::Reservation> reservations;       // released once stored (or given up)
    std::vector<pipeline::durable::SegmentLog::Ref> refs;  // released once stored
    std::string token;  // insert_deduplication_token; empty: none
  };
  void Run();  // the encoding thread
  void Add(pipeline::QueuedBatch item);
  void AddTo(uint32_t day, std::unique_ptr<SpanBatch> part, pipeline::Reservation res,
             pipeline::durable::SegmentLog::Ref ref);
  std::string LogBlock(uint32_t day, const Pending& p);  // the block's token, or ""
  void DeadLetter(Flight& f, const Status& st);
  std::string DeadLetterDir() const;
  void HandOff(uint32_t day, Pending& p);
  void Encode(const Pending& p);  // into block_
  void InsertLoop();              // the inserting thread
  void Insert(Flight& f);         // with retries
  Status InsertOnce(const Flight& f);
  Status InsertFile(std::string_view table, std::span<const std::string> pieces,
                    const std::string& token = {});

  ChdbConnection* conn_;
  const Capabilities caps_;
  pipeline::SpanQueue& queue_;
  const WriterOptions opts_;
  const SinkFaults* faults_;
  std::thread thread_;    // encodes: drains the queue, sorts and encodes blocks
  std::thread inserter_;  // inserts the encoded blocks, one at a time, in order
  WriterStats stats_;
  // The hand-off: one block may wait while another is being inserted, so
  // encoding the next insert overlaps the engine's work on this one.
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Flight> flight_;         // guarded by mu_
  bool encoding_done_ = false;           // guarded by mu_
  EncodedBlock spare_block_;             // guarded by mu_: an inserted block's buffers, for reuse
  std::map<uint32_t, Pending> pending_;  // by partition (days since epoch); writer thread only
  UserFields user_fields_;
  std::minstd_rand jitter_{std::random_device{}()};  // inserting thread only: backoff jitter
  EncodedBlock block_;         // the spans block being encoded; writer thread only
  std::vector<SpanRow> rows_;  // its rows, sorted; writer thread only
  // Resources this writer has stored (writer thread only). Bounded: when it
  // grows past kMaxKnownResources it is cleared, which at worst stores some
  // resources again (merges keep one row per id).
  std::unordered_set<uint64_t> known_resources_;
  std::chrono::steady_clock::time_point known_since_ = std::chrono::steady_clock::now();
  static constexpr size_t kMaxKnownResources = 1u << 20;
};

}  // namespace spanhouse::storage
