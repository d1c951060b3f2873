// The spans accepted in the last `window_s`, so that a retried request's
// spans are dropped at intake, before the durable queue: every sink, view
// and sampler then sees a span once.
//
// A span is known by its SpanContentKey (trace id, span id, a hash of its content:
// model/span_batch.h), so the two halves of a Zipkin shared span are two
// spans. Two parts hold the keys:
//   - a table in memory, of fixed size (max_bytes): 64-byte buckets of 16
//     slots, two buckets per key (the emptier one takes it). A slot is 32
//     bits: the key's generation (5 bits), whether its request was
//     accepted (1 bit) and a 26-bit fingerprint. It answers "maybe seen";
//   - one file of exact keys per generation (<dir>/<generation>.keys, 32
//     bytes a key), appended when a request is accepted. A "maybe" is
//     confirmed there, so a fingerprint that collides never drops a span
//     that was not seen; it costs a read of that generation's file.
// Generations are window_s / 30 long (wall clock), so the window is 30 whole
// generations and the current one. A full table forgets its oldest
// generation early (the window shrinks, counted). At Open the table is
// filled again from the files of the generations still in the window, so a
// retry after a restart is still caught.
//
// A request's keys are provisional from Admit until Commit (accepted: the
// keys go to the file and count as seen) or Forget (refused: removed). A
// span that matches only a provisional key is kept: while the first request
// may still be refused, dropping its copy could lose both; storing both is
// the safe side (the readers show one).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/prom_text.h"
#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::pipeline {

struct DedupOptions {
  bool enabled = true;
  uint32_t window_s = 600;
  // The table's memory; it holds about 0.85 * max_bytes / 4 keys (e.g.
  // 10 minutes at 250k spans/s: 150M keys, 720 MiB).
  size_t max_bytes = size_t{128} << 20;
  std::string dir;  // the key files
  // Bits of a key's fingerprint kept in its slot (26; fewer only in tests,
  // to make collisions common).
  uint32_t fingerprint_bits = 26;
};

struct DedupStats {
  std::atomic<uint64_t> admitted{0};             // spans noted (new)
  std::atomic<uint64_t> duplicates{0};           // spans dropped as seen
  std::atomic<uint64_t> candidates{0};           // "maybe seen" looked up in a file
  std::atomic<uint64_t> false_positives{0};      // of those, not in the file: kept
  std::atomic<uint64_t> in_flight_matches{0};    // matched a provisional key only: kept
  std::atomic<uint64_t> unindexed{0};            // no room even after forgetting: kept, not noted
  std::atomic<uint64_t> evicted_generations{0};  // forgotten early for room
  std::atomic<uint64_t> file_bytes_read{0};      // by confirmations
  std::atomic<uint64_t> file_errors{0};          // key files not written or read
  std::atomic<uint64_t> slots_used{0};           // at the last rotation
};

class DedupIndex {
 public:
  static constexpr uint32_t kGenerations = 30;  // whole generations in the window

  // Makes `options.dir`, removes key files older than the window and fills
  // the table from the rest. `now_ns`: the wall clock.
  static Status Open(const DedupOptions& options, uint64_t now_ns,
                     std::unique_ptr<DedupIndex>* out);
  ~DedupIndex();
  DedupIndex(const DedupIndex&) = delete;
  DedupIndex& operator=(const DedupIndex&) = delete;

  // One request's new keys, provisional until Commit or Forget.
  struct Admission {
    std::vector<SpanContentKey> keys;
    std::vector<uint64_t> generations;  // per key
    std::vector<size_t> slots;          // per key: where it is in the table
    std::vector<uint32_t> values;       // per key: that slot's provisional value
    bool empty() const { return keys.empty(); }
    void Add(const SpanContentKey& k, uint64_t generation, size_t slot, uint32_t value) {
      keys.push_back(k);
      generations.push_back(generation);
      slots.push_back(slot);
      values.push_back(value);
    }
    void Reserve(size_t n) {
      keys.reserve(n);
      generations.reserve(n);
      slots.reserve(n);
      values.reserve(n);
    }
    void Clear() {
      keys.clear();
      generations.clear();
      slots.clear();
      values.clear();
    }
  };

  // For each span of `batch` sets (*seen)[i] to 1 if an accepted request
  // had it within the window, else 0 and notes it in `admission`
  // (provisional). Returns how many were seen. Thread-safe.
  size_t Admit(const SpanBatch& batch, uint64_t now_ns, std::vector<uint8_t>* seen,
               Admission* admission);
  // Notes the spans of `batch` as accepted (a request record found in the
  // durable queue at start: stored, or about to be by the replay).
  void Note(const SpanBatch& batch, uint64_t now_ns);
  // The request was accepted: its keys count as seen from now on.
  void Commit(Admission& admission);
  // The request was refused: its keys are forgotten.
  void Forget(Admission& admission);

  const DedupOptions& options() const { return opts_; }
  const DedupStats& stats() const { return stats_; }
  size_t table_bytes() const { return buckets_ * kBucketBytes; }
  // The seconds of keys the table holds now (the window, unless it forgot
  // generations early).
  double window_held_s(uint64_t now_ns) const;
  // spanhouse_dedup_* families.
  void AppendMetrics(PromText& out, uint64_t now_ns) const;

 private:
  static constexpr size_t kSlots = 16;
  static constexpr size_t kBucketBytes = kSlots * sizeof(uint32_t);
  struct alignas(64) Bucket {
    uint32_t slot[kSlots];
  };
  explicit DedupIndex(const DedupOptions& options);
  uint64_t SeqOf(uint64_t now_ns) const { return now_ns / 1000000000ull / gen_s_; }
  // Under mu_: moves the current generation to `seq`, clearing every slot
  // of a generation that leaves the window.
  void Rotate(uint64_t seq);
  // Under mu_: drops the oldest generation early; false if only the current one is left.
  bool EvictOldest();
  // Under mu_: clears the slots whose generation is not in [oldest, current].
  void Sweep();
  uint32_t LiveMask() const;  // under mu_: bit g set for each live generation id
  static constexpr size_t kNoSlot = ~size_t{0};
  // Under mu_: inserts `h` as of generation `seq`; returns its slot, or
  // kNoSlot if there is no room.
  size_t Insert(uint64_t h, uint64_t seq, bool committed);
  uint32_t* SlotAt(size_t at);  // under mu_
  // The keys of `candidates` found in generation `seq`'s file.
  std::vector<uint8_t> Confirm(uint64_t seq, const std::vector<SpanContentKey>& candidates);
  std::string FilePath(uint64_t seq) const;
  void WriteKeys(uint64_t seq, const SpanContentKey* keys, size_t n);
  void RemoveFilesBefore(uint64_t seq);

  const DedupOptions opts_;
  const uint64_t gen_s_;
  const size_t buckets_;
  const uint32_t fp_mask_;
  DedupStats stats_;

  mutable std::mutex mu_;
  Bucket* table_ = nullptr;  // guarded by mu_
  uint64_t current_ = 0;     // guarded by mu_: generation (seq) now written
  uint64_t oldest_ = 0;      // guarded by mu_: oldest generation still held

  std::mutex file_mu_;
  std::map<uint64_t, int> files_;  // guarded by file_mu_: open key files by generation
};

}  // namespace spanhouse::pipeline
