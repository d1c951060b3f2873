// One shard of a ClickHouse sink (embedded_sink.h): how the spans the sink
// runtime (sink/runtime.h) hands this shard become inserts, over the shard's
// own connection. The runtime runs two threads per shard: the encoding one
// calls Add and TakeDue, the writing one WriteOnce, DeadLetter and Finished,
// so the next insert is prepared while the engine stores this one; it
// retries, seals, acknowledges and drains.
//
// Added SpanBatches wait in a pending set per partition (day), so an
// insert touches one partition. A set is encoded when it holds enough rows
// or bytes (max_rows, max_bytes: the memory it holds), or when its oldest
// span has waited a quarter of max_age: its spans become one Native block
// (sorted by the table's key only if it will be an insert alone: the engine
// sorts an insert of several blocks as one), written to a spool file, and
// the batches and the memory reserved for them are released. The spooled
// blocks of a day are inserted together, as one part, once they hold
// insert_rows rows or their oldest span is max_age old; the insert reads
// them through the file() table function, which decision 0007 measured as
// far cheaper than data inline in the query text. One large part per insert is
// what saves the engine's CPU: the rows of small parts are merged again soon
// after (measured in chDB: 1M rows inserted as one part 4.1-4.7 CPU-s, as
// five parts of 200k 3.2-3.4 plus 7.6-7.9 to merge them into one).
//
// Resources (schema.h) are written once per fingerprint: a pending buffer
// also carries a resources block with the resources its spans use that this
// writer has not stored yet, inserted before the spans, so a stored span's
// resource is always there too.
//
// Spans sampled out (SpanBatch::Spans::metrics_only) are not spans rows
// (nor, for them alone, resources rows): each is a narrow row of the
// sampled_spans table, gathered over the day's insert into one block
// (SampledSpanRows) and inserted after the spans, with the same token (the
// engine keeps tokens per table: exactly once, like the spans). An insert
// whose spans were all sampled out inserts no spans, and one with none
// sampled out no sampled_spans. The rows' memory stays reserved until
// their insert is done. Once a day (resource_refresh) the writer
// stores the resources in use again, so retention (counted from a resource
// row's last_seen) never deletes a resource that stored spans still use.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/histogram.h"
#include "sink/plugin.h"
#include "sink/sink.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

// The spans table's partition key, toDate(timestamp), as days since the
// epoch: a writer's insert holds spans of one such day.
inline uint32_t PartitionDay(uint64_t start_ns) {
  return static_cast<uint32_t>(start_ns / 86400000000000ull);
}

// Which spans one insert of a writer holds: those whose trace falls in the
// writer's `shard` of `shards` (sink::ShardOf) and that start on `day`. The
// key it seals its inserts under (sink/ledger.h): 12 bytes, u32 shard, u32
// shard count, u32 day, little-endian (what older logs held in its place).
struct InsertKey {
  uint32_t shard = 0;
  uint32_t shards = 1;
  uint32_t day = 0;
  std::string Encode() const;
  // False: not a key of this form.
  bool Decode(std::string_view key);
  bool Holds(const SpanBatch& b, uint32_t i) const;
};

struct WriterOptions {
  size_t max_rows = 200000;       // per encoded block
  size_t max_bytes = 128u << 20;  // of batches in memory (SpanBatch::MemoryBytes), per block
  // Rows per insert: spooled blocks of one day are inserted together until
  // they hold this many (the engine holds the whole insert in memory while
  // it sorts and writes it: ~1.8 KB a row measured). At most max_rows:
  // every block is an insert of its own.
  size_t insert_rows = 400000;
  // How long a span waits at most for its insert (visible to queries after it).
  std::chrono::milliseconds max_age{3000};
  std::string spool_dir;   // where insert files are written
  std::string name = "0";  // tells shards' spool files and logs apart
  std::string database{kDatabase};
  // Longest wait between retries of a failed insert (doubling from 100 ms).
  std::chrono::milliseconds max_backoff{5000};
  // At shutdown, how many times a failing insert is retried before the
  // pending spans are given up (and logged and counted as lost).
  int shutdown_retries = 5;
  // Attribute keys outside these namespaces are copied to user_fields.
  std::vector<std::string> well_known = UserFields::DefaultWellKnown();
  // How often the writer forgets which resources it has stored and stores
  // them again (with a fresh last_seen): the resources table's retention
  // (schema.cc) counts from last_seen, so a resource in use is never older
  // there than this.
  std::chrono::seconds resource_refresh{86400};
  // The writer's shard of its sink's queue: it seals its inserts under
  // InsertKey{shard, shards, day} (the runtime inserts them with the
  // deduplication token made from that seal).
  uint32_t shard = 0;
  uint32_t shards = 1;
  // Where blocks the engine refuses for good are written (dead_letter.h);
  // empty: <spool_dir>/../dead-letter.
  std::string dead_letter_dir;
  // An error neither known as retryable nor as permanent is retried this
  // many times, then the block is dead-lettered.
  int unknown_error_attempts = 10;
};

// The layout of older schemas, for the upgrade tests and the storage
// benchmark; serve writes the current one, but for the span ids of a
// cluster's store made before schema 11 (SpansHaveSpanIds).
struct LegacyLayout {
  // Where a span's user fields keep their values: schema 5 stores them once
  // (kMarked); kInArrays writes as schema 4 did.
  UserFieldValues user_field_values = UserFieldValues::kMarked;
  // The rare fields as the extras column (schema 8); false: as schema 7's
  // 21 columns. StorageLayout::extras_column.
  bool extras_column = true;
  // Both span ids as span_ids (schema 11); false: as schema 10's two
  // columns, which a cluster's store made before keeps.
  // StorageLayout::span_ids_column.
  bool span_ids_column = true;
  // The attribute columns, where the engine has them (schema 12);
  // StorageLayout::attr_columns.
  bool attr_columns = true;
  // user_fields as a Map (schema 13) where the spans table has one: the
  // writer asks the table at Start (SpansUserFieldsMap); false: the JSON
  // type whatever the table has. StorageLayout::user_fields_map.
  bool user_fields_map = true;
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

// A sink's counters and the embedded writers' own; shared by a sink's
// writers.
struct WriterStats : sink::SinkStats {
  // Blocks encoded and spooled; those sorted by the table key (an insert
  // alone); the rest in arrival order (an insert of several, which the
  // engine sorts together).
  std::atomic<uint64_t> blocks_spooled{0};
  std::atomic<uint64_t> blocks_sorted{0};
  // Blocks written over a spool file an earlier insert was done with.
  std::atomic<uint64_t> spool_files_reused{0};
  // Spans sampled out stored as sampled_spans rows (not in rows_written).
  std::atomic<uint64_t> sampled_rows_written{0};
};

// One insert: spooled blocks of one day, collected by the encoding thread
// and handed to the writing one.
struct Flight final : sink::Write {
  uint32_t day = 0;
  std::string resource_blocks;              // Native blocks of the resources table
  std::vector<uint64_t> spooled;            // the spans blocks' spool files (rows: their spans)
  SampledSpanRows sampled;                  // the sampled_spans rows (other_rows): one block
  std::vector<Reservation> sampled_memory;  // their bytes, held until done
  // The resources and spans are stored (a retry inserts only what is
  // left: the sampled_spans rows).
  bool spans_stored = false;
};

class EmbeddedWriter {
 public:
  // `conn`: the engine (chDB, a server, or a test's fake). `stats`: the
  // sink's, shared with its other writers.
  EmbeddedWriter(SqlConnection* conn, Capabilities caps, WriterOptions options, WriterStats& stats,
                 const SinkFaults* faults = nullptr, LegacyLayout layout = {});
  ~EmbeddedWriter();

  // Before the first Add: the spans table's user_fields type, the spool.
  void Start();
  // Once its threads stopped: kept spool files removed.
  void Stop();

  // The encoding thread's (sink::Plugin::Add, TakeDue, NextDue).
  void Add(sink::QueuedBatch item);
  void TakeDue(bool flush, std::vector<std::unique_ptr<sink::Write>>* out);
  std::chrono::milliseconds NextDue() const;

  // The writing thread's (sink::Plugin::WriteOnce, DeadLetter, Finished).
  Status WriteOnce(Flight& f);
  Status DeadLetter(Flight& f, const Status& why);
  void Finished(Flight& f, bool stored);

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
    std::vector<Reservation> reservations;
    std::vector<sink::Ticket> tickets;  // the durable queue's records of the batches
  };
  void AddTo(uint32_t day, std::unique_ptr<SpanBatch> part, Reservation res, sink::Ticket ticket);
  // A block sealed before a crash, inserted again as it was: its parts
  // spooled as `chunks` blocks (the engine's deduplication id counts them),
  // with its token, in an insert of its own.
  void AddReplayed(sink::ReplayBlock& block);
  // One pass over the pending sets and open inserts (TakeDue).
  void TakeDueOnce(bool flush, std::vector<std::unique_ptr<sink::Write>>* out);
  // An insert leaves for the writing thread: its key, for the seal.
  void Due(std::unique_ptr<Flight> f, std::vector<std::unique_ptr<sink::Write>>* out) const;
  // Spans not stored when the service stops: left in the durable queue
  // (`logged`: the next start stores them) or counted as lost.
  void GiveUpAtShutdown(size_t rows, bool logged);
  std::string DeadLetterDir() const;
  // Encodes and spools a pending set into the day's open insert (its
  // memory released); false if spooling failed (nothing changed then).
  // `alone`: the insert will hold this block only (see Encode).
  bool Spool(uint32_t day, Pending& p, bool alone);
  // Into block_ (if any span is to be stored) and sampled_.
  void Encode(const Pending& p, bool sorted);
  Status InsertOnce(Flight& f);
  Status InsertFiles(std::string_view table, const std::string& path, size_t rows,
                     const std::string& token = {});
  // The insert as the request's body, for a server that cannot read this
  // process's files.
  Status InsertInline(Flight& f);
  // An insert's settings: of `rows` spans (0: another table), with the
  // block's `token` (none: "").
  std::vector<QueryParam> InsertSettings(std::string_view table, size_t rows,
                                         const std::string& token) const;
  // How long a pending set waits at most to be encoded and spooled.
  std::chrono::milliseconds BlockAge() const;
  // Whether an insert of `rows` spans, the oldest arrived at `since`, is
  // handed to the writing thread now.
  bool InsertDue(size_t rows, std::chrono::steady_clock::time_point since) const;
  std::string SpoolPath(uint64_t seq) const;
  // The file an insert's sampled_spans block is written to for file().
  std::string SampledSpoolPath() const;
  std::string SpoolPattern(const std::vector<uint64_t>& seqs) const;  // for file()
  // Done with `f`'s spool files: kept for reuse (up to kKeptSpoolFiles),
  // the rest removed.
  void ReleaseSpooled(const Flight& f);
  // The file a new spool file `seq` is written over: a kept one renamed to
  // its name (its pages already in the page cache), or none.
  void ReuseSpoolFile(uint64_t seq);
  void RemoveKeptSpoolFiles();
  void CleanSpool();  // files a previous process left

  SqlConnection* conn_;
  const Capabilities caps_;
  const WriterOptions opts_;
  const SinkFaults* faults_;
  const LegacyLayout layout_;
  WriterStats& stats_;
  // user_fields as a Map: layout_'s, and the spans table's (Start).
  bool user_fields_map_ = true;
  // The encoding thread's.
  std::map<uint32_t, Pending> pending_;               // by partition (days since epoch)
  std::map<uint32_t, std::unique_ptr<Flight>> open_;  // inserts being collected, by day
  std::vector<std::unique_ptr<Flight>> replayed_;     // replayed blocks, due at once
  uint64_t spool_seq_ = 0;                            // numbers the spool files
  int spool_failures_ = 0;                            // in a row
  // Spool files inserted and kept to be written over: a new file's pages
  // cost this VM's kernel ~15-38x what writing over cached ones does
  // (BENCHMARKS.md).
  static constexpr size_t kKeptSpoolFiles = 16;
  std::mutex kept_mu_;
  std::vector<uint64_t> kept_spool_files_;  // guarded by kept_mu_
  bool spool_cleaned_ = false;
  UserFields user_fields_;
  EncodedBlock block_;         // the spans block being encoded; encoding thread only
  std::vector<SpanRow> rows_;  // its rows, sorted; encoding thread only
  SampledSpanRows sampled_;    // the pending set's spans sampled out; encoding thread only
  // Resources this writer has stored (encoding thread only). Bounded: when it
  // grows past kMaxKnownResources it is cleared, which at worst stores some
  // resources again (merges keep one row per id).
  std::unordered_set<uint64_t> known_resources_;
  std::chrono::steady_clock::time_point known_since_ = std::chrono::steady_clock::now();
  static constexpr size_t kMaxKnownResources = 1u << 20;
};

}  // namespace spanhouse::storage
