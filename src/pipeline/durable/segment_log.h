// The durable queue's log: append-only segment files on disk, so that spans
// answered 200 survive a crash of the process (or of the machine, with
// fsync) and are stored after the restart.
//
// A segment starts with a header (magic, format version, the log's epoch,
// the first record's sequence number); then records, each
//   u32 length | u32 CRC32C(body) | body = u8 kind, payload
// little-endian. A torn or corrupt record (a crash in the middle of a write,
// a bad disk) fails its length or CRC check: the rest of that segment is
// skipped, logged with the segment and offset, and counted; the next
// segment is read as usual.
//
// Every record gets a sequence number (LSN), consecutive in the log and
// recomputed identically when the log is read back, so anything derived
// from LSNs (the writer's insert deduplication tokens) comes out the same
// after a restart. The epoch, random per new log, keeps the tokens of a log
// that was deleted from matching those of its successor.
//
// Durability (fsync policy): with `fsync_always` an append is durable once
// the group commit that covers it has run: one thread calls fdatasync for
// every record appended since the last one, so concurrent requests share
// it. Otherwise the thread syncs every `fsync_interval` and an append counts
// as durable once written (it survives the process, not the machine). Who
// must not block while it waits (an HTTP I/O thread) asks to be called back
// instead (OnDurable): the sync thread calls it right after that fdatasync.
//
// Segments are deleted oldest first, once sealed (no longer appended to)
// and released: each record's consumers take tickets (Ticket) on its
// segment and ack them when its spans are stored. The active segment is
// sealed (and a new one begun) once all its records are released and it is
// at least early_seal_age old, so a stored record is mostly not read again
// after a restart. A ticket dropped without Ack() keeps the segment, for the
// next start to replay.
//
// Kept segments: a consumer that reads records again after they are stored
// (the recent-traces index, query/recent_traces.h) takes a keep (Keep) on a
// record. A released segment with keeps is not deleted but renamed
// `<n>.kept` and leaves the log: it no longer counts in max_bytes, a replay
// never reads it (nothing in it is unfinished), and it is removed (or
// recycled) once its last keep is given up, or at the next Open.
//
// Recycling: up to `recycled_segments` released segments are not deleted
// but renamed `<n>.free` and written over by later segments (a new header,
// then records from its start; the file is cut to its records when sealed
// and at Close). Writing over a file's cached, allocated pages costs the
// kernel a fraction of filling a new file (this VM: ~3x less CPU per
// byte appended with fdatasync, BENCHMARKS.md), and every accepted request
// passes through here. A recycled file still holds the old records past
// the new ones: format 2 makes them fail their check, which is
//   CRC32C(body) XOR CRC32C(the segment's 32-byte header)
// and the header differs in its first LSN. Format 2's header adds a flags
// word (bit 0: recycled file) to format 1's; a replay reads both. The tail
// of the newest segment of a recycled file (the active one at a crash) is
// skipped without being counted as corrupt. `.free` files are removed at
// Open and Close.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "sink/ticket.h"

namespace spanhouse::pipeline::durable {

// What a record holds (records.h has the payloads). Stored on disk: never
// renumber.
enum class RecordKind : uint8_t {
  kSpans = 1,             // older logs: an OTLP request (protobuf)
  kBlock = 2,             // older logs: the embedded sink's sealed block
  kRequest = 3,           // older logs: receive time + OTLP request (protobuf)
  kReplayed = 4,          // older logs: the embedded sink's acknowledged blocks
  kEncodedRequest = 5,    // a request: receive time, body format, body
  kSinkBlock = 6,         // older logs: a sink's sealed block, the embedded sink's key
  kSinkAck = 7,           // a sink's acknowledgement of sealed blocks
  kTailDecisions = 8,     // tail sampling's decisions (pipeline/sampling/tail_sampler.h)
  kKeyedBlock = 9,        // a sink's sealed block: its key and which records' spans it holds
  kTargetedRequest = 10,  // a request for some sinks only (an import): records.h
  kViewedRequest = 11,    // a request and the nodes up when it came (peers): records.h
};

struct LogOptions {
  std::string dir;
  uint64_t max_bytes = 1ull << 30;       // live segments, headers included
  uint64_t segment_bytes = 64ull << 20;  // a segment is sealed once this large
  // Released segments kept to be written over (not counted in max_bytes);
  // only those of at least a quarter of segment_bytes (smaller ones save
  // little).
  size_t recycled_segments = 4;
  bool fsync_always = true;
  std::chrono::milliseconds fsync_interval{200};
  // The active segment is sealed early, when all its records are released,
  // only once it is this old: a sink that acks every request at once would
  // otherwise seal (fdatasync, a new file) after each one.
  std::chrono::milliseconds early_seal_age{1000};
};

struct LogStats {
  std::atomic<uint64_t> records_appended{0};
  std::atomic<uint64_t> bytes_appended{0};
  std::atomic<uint64_t> fsyncs{0};
  std::atomic<uint64_t> records_replayed{0};
  std::atomic<uint64_t> corrupt_tails{0};      // segments whose tail was skipped
  std::atomic<uint64_t> corrupt_bytes{0};      // bytes skipped in them
  std::atomic<uint64_t> segments_deleted{0};   // released: deleted or recycled
  std::atomic<uint64_t> segments_recycled{0};  // new segments written over a released file
  std::atomic<uint64_t> rejected_full{0};
};

// CRC32C (Castagnoli), as in the record format.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);
// The same by table lookups only (what Crc32c falls back to without the
// CPU's crc32 instruction); for tests.
uint32_t Crc32cPortable(std::string_view data, uint32_t crc = 0);

// A consumer's claim on a record (sink/ticket.h): while any is held, the
// record's segment stays on disk.
using sink::Ticket;

// Test hooks, apart from the options a deployment sets.
struct LogTestHooks {
  // Runs on the sync thread before each fdatasync, to make it as slow as a
  // test needs (a slow disk) without sleeping for a guessed time.
  std::function<void()> before_sync{};
};

class SegmentLog final : public sink::TicketIssuer {
 public:
  // A record read back by Replay; `ref` holds its segment.
  struct Record {
    uint64_t lsn = 0;
    RecordKind kind = RecordKind::kSpans;
    std::string_view payload;
    uint64_t offset = 0;  // in its segment (for Hold)
  };

  // Opens (creating) the directory and indexes the segments already there;
  // appends go to a new segment. Errors only for an unusable directory.
  static Status Open(LogOptions options, std::unique_ptr<SegmentLog>* out, LogTestHooks hooks = {});
  ~SegmentLog();

  // Calls `fn` for every valid record of the segments found at Open, in LSN
  // order; `payload` is valid during the call. May be called more than once
  // (a replay in passes). Those segments are pinned until EndReplay, so
  // holds released meanwhile delete none of them.
  void ReadReplay(const std::function<void(const Record&, uint64_t segment)>& fn);
  void EndReplay();
  // A hold on `segment`, for a consumer of its record `lsn` (replay); with
  // the record's `offset` the hold can Read() it back.
  Ticket Hold(uint64_t segment, uint64_t lsn, uint64_t offset = 0);

  // Appends one record; on success `*ref` holds its segment and carries its
  // LSN. Refused: kResourceExhausted when the log is at max_bytes (unless
  // `past_limit`: the sinks' block and ack records, which refusing would
  // stop what empties the log), kUnavailable when the disk write failed.
  Status Append(RecordKind kind, std::string_view payload, Ticket* ref, bool past_limit = false) {
    return Append(kind, {}, payload, ref, past_limit);
  }
  // The same with the payload in two pieces, `head` then `payload` (written
  // together, without joining them in memory first).
  Status Append(RecordKind kind, std::string_view head, std::string_view payload, Ticket* ref,
                bool past_limit = false);
  // Reads back the record `ref` was appended as (a Ticket from Append, still
  // held; or from Hold with an offset): its kind and payload, the CRC checked. Any thread; the
  // record need not be durable yet.
  Status Read(const Ticket& ref, RecordKind* kind, std::string* payload);
  // Waits until the record `lsn` is durable by the fsync policy; false if
  // that took longer than `timeout` (or the log failed or closed).
  bool WaitDurable(uint64_t lsn, std::chrono::milliseconds timeout);
  // Calls `done` once, when the record `lsn` is durable by the fsync policy:
  // done(true) on the sync thread right after the fdatasync that covers it,
  // or at once on this thread if it is durable already (always so by the
  // interval policy); done(false) if the log failed or closes first. No lock
  // is held during the call, so `done` may use the log again; it delays the
  // next group commit, so it should only hand the news on.
  void OnDurable(uint64_t lsn, std::function<void(bool ok)> done);

  // Syncs what was appended and stops the sync thread. Holds still
  // outstanding keep their segments.
  void Close();

  uint64_t epoch() const { return epoch_; }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // Bytes of the released segments still kept (not in bytes()).
  uint64_t kept_bytes() const { return kept_bytes_.load(std::memory_order_relaxed); }
  const LogOptions& options() const { return opts_; }
  const LogStats& stats() const { return stats_; }

 private:
  struct File;  // an open segment file, shared with the sync thread
  struct Segment {
    std::string path;
    uint64_t first_lsn = 0;
    uint64_t bytes = 0;
    int64_t holds = 0;
    int64_t keeps = 0;  // Ticket::Keep
    bool sealed = false;
    uint32_t key = 0;  // XORed into its records' CRCs (format 2; 0 in format 1)
  };
  SegmentLog(LogOptions options, LogTestHooks hooks);
  Status Scan();
  Status OpenNewSegment();  // under mu_
  // Cuts a recycled active file to its records and syncs it; under mu_.
  bool SyncActiveForSeal();
  // A released file to write the next segment over, or -1; under mu_.
  int TakeFreeFile(const std::string& path, const char* header);
  // sink::TicketIssuer
  Ticket Reclaim(uint64_t segment, uint64_t lsn, uint64_t offset, bool keep) override;
  void Release(uint64_t segment, bool keep) override;
  void ReleaseHold(uint64_t segment);
  Ticket KeepRecord(uint64_t segment, uint64_t lsn, uint64_t offset);
  void ReleaseKeep(uint64_t segment);
  void DeleteReleased();  // under mu_
  // Removes a released file, or keeps it to be written over; under mu_.
  void Discard(const Segment& s);
  void SyncLoop();
  void FailWaiters();

  const LogOptions opts_;
  const LogTestHooks hooks_;
  LogStats stats_;
  uint64_t epoch_ = 0;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> kept_bytes_{0};

  std::mutex mu_;
  std::map<uint64_t, Segment> segments_;                // guarded by mu_; by number, oldest first
  uint64_t next_segment_ = 1;                           // guarded by mu_
  std::map<uint64_t, Segment> kept_;                    // guarded by mu_: released, with keeps
  std::vector<std::string> free_files_;                 // guarded by mu_: released, to write over
  uint64_t next_lsn_ = 1;                               // guarded by mu_
  std::shared_ptr<File> active_;                        // guarded by mu_
  uint64_t active_number_ = 0;                          // guarded by mu_
  std::chrono::steady_clock::time_point active_since_;  // guarded by mu_
  uint64_t replay_end_ = 0;                             // segments below this number are from Open
  bool replay_read_ = false;    // corrupt tails are counted on the first read only
  bool replay_pinned_ = false;  // guarded by mu_

  // Group commit.
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;     // wakes the sync thread
  std::condition_variable durable_cv_;  // wakes appenders waiting for durability
  uint64_t written_lsn_ = 0;            // guarded by sync_mu_: last LSN written
  uint64_t durable_lsn_ = 0;            // guarded by sync_mu_: last LSN synced
  bool failed_ = false;                 // guarded by sync_mu_: a sync failed
  bool closing_ = false;                // guarded by sync_mu_
  bool sync_ended_ = false;             // guarded by sync_mu_: the sync thread has returned
  // OnDurable callbacks by LSN, waiting for the fdatasync that covers it.
  std::multimap<uint64_t, std::function<void(bool)>> waiters_;  // guarded by sync_mu_
  std::thread sync_thread_;
};

}  // namespace spanhouse::pipeline::durable
