#include "pipeline/dedup/dedup_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "common/hash.h"

namespace spanhouse::pipeline {

namespace {

constexpr uint32_t kIdBits = 5;  // 32 generation ids for 31 live generations
constexpr uint32_t kIds = 1u << kIdBits;
constexpr uint32_t kCommittedBit = 1u << 26;
constexpr uint32_t kFpMask = kCommittedBit - 1;
static_assert(DedupIndex::kGenerations + 1 < kIds);

// GCC 12 drops __builtin_prefetch (and _mm_prefetch) of an address computed
// as Bucket1's is; the instruction itself it keeps.
inline void Prefetch(const void* p) {
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
}

uint64_t Rotl(uint64_t x, int r) {
  return x << r | x >> (64 - r);
}

uint64_t KeyHash(const SpanContentKey& k) {
  uint64_t a;
  uint64_t b;
  uint64_t c;
  std::memcpy(&a, k.trace_id.data(), 8);
  std::memcpy(&b, k.trace_id.data() + 8, 8);
  std::memcpy(&c, k.span_id.data(), 8);
  uint64_t h = k.content ^ a * 0x9e3779b97f4a7c15ull ^ Rotl(b * 0xc2b2ae3d27d4eb4full, 29) ^
               Rotl(c * 0x165667b19e3779f9ull, 43);
  return Murmur3Fmix(h);
}

uint32_t Fingerprint(uint64_t h, uint32_t mask) {
  const auto fp = static_cast<uint32_t>(h) & mask;
  return fp == 0 ? 1 : fp;
}

uint32_t Id(uint32_t slot) {
  return slot >> (32 - kIdBits);
}

uint32_t SlotOf(uint64_t h, uint64_t seq, bool committed, uint32_t fp_mask) {
  return static_cast<uint32_t>(seq % kIds) << (32 - kIdBits) | (committed ? kCommittedBit : 0) |
         Fingerprint(h, fp_mask);
}

// Two buckets per key: from the hash's high half, and from a remix of it.
size_t Bucket1(uint64_t h, size_t n) {
  return static_cast<size_t>(((h >> 32) * n) >> 32);
}
size_t Bucket2(uint64_t h, size_t n) {
  const uint64_t g = (h ^ h >> 29) * 0x94d049bb133111ebull;
  return static_cast<size_t>(((g >> 32) * n) >> 32);
}

bool ParseSeq(const std::string& name, uint64_t* seq) {
  constexpr std::string_view kExt = ".keys";
  if (name.size() <= kExt.size() || !name.ends_with(kExt)) return false;
  const char* end = name.data() + name.size() - kExt.size();
  auto [p, ec] = std::from_chars(name.data(), end, *seq);
  return ec == std::errc() && p == end;
}

}  // namespace

DedupIndex::DedupIndex(const DedupOptions& options)
    : opts_(options),
      gen_s_(std::max<uint64_t>(1, (options.window_s + kGenerations - 1) / kGenerations)),
      buckets_(std::max<size_t>(
          1, std::min<size_t>(options.max_bytes / kBucketBytes, (size_t{1} << 32) - 1))),
      fp_mask_(static_cast<uint32_t>(
          (uint64_t{1} << std::clamp<uint32_t>(options.fingerprint_bits, 1, 26)) - 1)) {
  // Zeroed pages from the kernel, in huge pages where it gives them: every
  // lookup lands on a random page, and 4 KiB pages make each a TLB miss.
  const size_t bytes = buckets_ * sizeof(Bucket);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    spdlog::critical("dedup: cannot map {} bytes for the table", bytes);
    std::abort();
  }
  ::madvise(p, bytes, MADV_HUGEPAGE);
  table_ = static_cast<Bucket*>(p);
}

DedupIndex::~DedupIndex() {
  ::munmap(table_, buckets_ * sizeof(Bucket));
  for (auto& [seq, fd] : files_) ::close(fd);
}

Status DedupIndex::Open(const DedupOptions& options, uint64_t now_ns,
                        std::unique_ptr<DedupIndex>* out) {
  std::unique_ptr<DedupIndex> idx(new DedupIndex(options));
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return Status::Internal("dedup: cannot make " + options.dir + ": " + ec.message());
  const uint64_t now = idx->SeqOf(now_ns);
  idx->current_ = now;
  idx->oldest_ = now >= kGenerations ? now - kGenerations : 0;
  std::map<uint64_t, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(options.dir, ec)) {
    uint64_t seq;
    if (!ParseSeq(e.path().filename().string(), &seq)) continue;
    if (seq < idx->oldest_ || seq > now) {
      std::filesystem::remove(e.path(), ec);
    } else {
      files[seq] = e.path().string();
    }
  }
  uint64_t loaded = 0;
  std::lock_guard lock(idx->mu_);
  for (const auto& [seq, path] : files) {
    if (seq < idx->oldest_) continue;  // forgotten for room meanwhile
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      idx->stats_.file_errors++;
      continue;
    }
    std::vector<SpanContentKey> buf(1 << 15);
    for (;;) {
      const ssize_t r = ::read(fd, buf.data(), buf.size() * sizeof(SpanContentKey));
      if (r <= 0) break;  // a torn last key (a crash mid-write) is ignored
      const size_t n = static_cast<size_t>(r) / sizeof(SpanContentKey);
      for (size_t i = 0; i < n; ++i) {
        if (seq < idx->oldest_) break;
        if (idx->Insert(KeyHash(buf[i]), seq, true) == kNoSlot) idx->stats_.unindexed++;
      }
      loaded += n;
      if (static_cast<size_t>(r) % sizeof(SpanContentKey) != 0) break;
    }
    ::close(fd);
  }
  // Generations before the first file held nothing: none to forget for room.
  idx->oldest_ = files.empty() ? now : std::max(idx->oldest_, files.begin()->first);
  if (loaded > 0) {
    spdlog::info("dedup: {} span keys of the last {} s loaded from {}", loaded,
                 (now - idx->oldest_ + 1) * idx->gen_s_, options.dir);
  }
  *out = std::move(idx);
  return Status::Ok();
}

uint32_t DedupIndex::LiveMask() const {
  // Generations oldest_..current_ (at most 31): a run of bits from oldest_'s id.
  const uint32_t count = static_cast<uint32_t>(current_ - oldest_ + 1);
  const uint32_t run = count >= kIds ? ~0u : (1u << count) - 1;
  const auto from = static_cast<uint32_t>(oldest_ % kIds);
  return from == 0 ? run : (run << from | run >> (kIds - from));
}

void DedupIndex::Sweep() {
  const uint32_t mask = LiveMask();
  uint64_t used = 0;
  for (size_t b = 0; b < buckets_; ++b) {
    for (uint32_t& s : table_[b].slot) {
      s = ((mask >> Id(s)) & 1) != 0 ? s : 0;
      used += s != 0;
    }
  }
  stats_.slots_used = used;
}

void DedupIndex::Rotate(uint64_t seq) {
  const uint64_t keep_from = std::max(oldest_, seq >= kGenerations ? seq - kGenerations : 0);
  // Clear what leaves the window before the new generations take ids: an id
  // comes back every 32 generations, and its old slots must be gone by then.
  if (keep_from > current_) {
    oldest_ = current_ = seq;
    std::memset(static_cast<void*>(table_), 0, buckets_ * sizeof(Bucket));
    stats_.slots_used = 0;
  } else {
    oldest_ = keep_from;
    Sweep();
    current_ = seq;
  }
  RemoveFilesBefore(oldest_);
}

bool DedupIndex::EvictOldest() {
  if (oldest_ >= current_) return false;
  ++oldest_;
  stats_.evicted_generations++;
  return true;
}

size_t DedupIndex::Insert(uint64_t h, uint64_t seq, bool committed) {
  const uint32_t value = SlotOf(h, seq, committed, fp_mask_);
  const size_t i1 = Bucket1(h, buckets_);
  const size_t i2 = Bucket2(h, buckets_);
  for (;;) {
    const uint32_t mask = LiveMask();
    auto free_slot = [mask](Bucket& b, int* n) {
      int first = -1;
      for (int i = 0; i < static_cast<int>(kSlots); ++i) {
        const uint32_t s = b.slot[i];
        if (s == 0 || ((mask >> Id(s)) & 1) == 0) {
          ++*n;
          if (first < 0) first = i;
        }
      }
      return first;
    };
    int n1 = 0;
    int n2 = 0;
    const int f1 = free_slot(table_[i1], &n1);
    const int f2 = free_slot(table_[i2], &n2);
    const bool one = n1 >= n2;
    const int at = one ? f1 : f2;
    if (at >= 0) {
      const size_t b = one ? i1 : i2;
      table_[b].slot[at] = value;
      return b * kSlots + static_cast<size_t>(at);
    }
    if (seq < oldest_ + 1 || !EvictOldest()) return kNoSlot;
  }
}

uint32_t* DedupIndex::SlotAt(size_t at) {
  return &table_[at / kSlots].slot[at % kSlots];
}

size_t DedupIndex::Admit(const SpanBatch& batch, uint64_t now_ns, std::vector<uint8_t>* seen,
                         Admission* admission) {
  const size_t n = batch.span_count();
  seen->assign(n, 0);
  admission->Clear();
  if (n == 0) return 0;
  admission->Reserve(n);
  std::vector<SpanContentKey> keys;
  SpanContentKeys(batch, &keys);
  std::vector<uint64_t> hashes(n);
  for (size_t i = 0; i < n; ++i) hashes[i] = KeyHash(keys[i]);
  // Spans whose fingerprint matches an accepted key: (span, generation).
  std::vector<std::pair<uint32_t, uint64_t>> candidates;
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    if (SeqOf(now_ns) > current_) Rotate(SeqOf(now_ns));
    seq = current_;  // a clock set back writes into the current generation
    const uint32_t mask = LiveMask();
    // The table is far bigger than the caches: each key's two buckets are
    // fetched a few keys ahead, so their misses overlap.
    constexpr size_t kAhead = 8;
    auto prefetch = [&](size_t i) {
      Prefetch(&table_[Bucket1(hashes[i], buckets_)]);
      Prefetch(&table_[Bucket2(hashes[i], buckets_)]);
    };
    for (size_t i = 0; i < std::min(n, kAhead); ++i) prefetch(i);
    for (uint32_t i = 0; i < n; ++i) {
      if (i + kAhead < n) prefetch(i + kAhead);
      const uint64_t h = hashes[i];
      const uint32_t fp = Fingerprint(h, fp_mask_);
      bool provisional = false;
      bool committed = false;
      // One pass over both buckets: the key's matches, and where it would go
      // (the bucket with more free slots, its first free one).
      const size_t at[2] = {Bucket1(h, buckets_), Bucket2(h, buckets_)};
      int free_n[2] = {0, 0};
      int free_at[2] = {-1, -1};
      for (int k = 0; k < 2; ++k) {
        const uint32_t* slot = table_[at[k]].slot;
        for (int j = 0; j < static_cast<int>(kSlots); ++j) {
          const uint32_t sv = slot[j];
          if (sv == 0 || ((mask >> Id(sv)) & 1) == 0) {
            if (free_n[k]++ == 0) free_at[k] = j;
            continue;
          }
          if ((sv & kFpMask) != fp) continue;
          if ((sv & kCommittedBit) == 0) {
            provisional = true;
            continue;
          }
          committed = true;
          // The generation of this id within [oldest_, current_].
          const uint64_t gen = current_ - (current_ + kIds - Id(sv)) % kIds;
          candidates.emplace_back(i, gen);
        }
        if (at[0] == at[1]) break;
      }
      if (committed) continue;
      if (provisional) stats_.in_flight_matches++;
      const int k = free_n[0] >= free_n[1] ? 0 : 1;
      const uint32_t value = SlotOf(h, seq, false, fp_mask_);
      size_t where = kNoSlot;
      if (free_at[k] >= 0) {
        table_[at[k]].slot[free_at[k]] = value;
        where = at[k] * kSlots + static_cast<size_t>(free_at[k]);
      } else {
        where = Insert(h, seq, false);  // both full: forgets a generation for room
      }
      if (where != kNoSlot) {
        admission->Add(keys[i], seq, where, value);
      } else {
        stats_.unindexed++;
      }
    }
  }
  if (candidates.empty()) {
    stats_.admitted += admission->keys.size();
    return 0;
  }
  // Confirmed against the exact keys, one read of each generation's file.
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<uint8_t> confirmed(n, 0);
  std::vector<uint8_t> candidate(n, 0);
  for (size_t c = 0; c < candidates.size();) {
    size_t e = c;
    std::vector<SpanContentKey> ask;
    std::vector<uint32_t> which;
    while (e < candidates.size() && candidates[e].second == candidates[c].second) {
      candidate[candidates[e].first] = 1;
      if (!confirmed[candidates[e].first]) {
        ask.push_back(keys[candidates[e].first]);
        which.push_back(candidates[e].first);
      }
      ++e;
    }
    stats_.candidates += ask.size();
    const std::vector<uint8_t> found = Confirm(candidates[c].second, ask);
    for (size_t k = 0; k < which.size(); ++k) confirmed[which[k]] |= found[k];
    c = e;
  }
  size_t dups = 0;
  std::lock_guard lock(mu_);
  for (uint32_t i = 0; i < n; ++i) {
    if (!candidate[i]) continue;
    if (confirmed[i]) {
      (*seen)[i] = 1;
      ++dups;
      continue;
    }
    stats_.false_positives++;
    const uint64_t h = KeyHash(keys[i]);
    if (const size_t at = Insert(h, current_, false); at != kNoSlot) {
      admission->Add(keys[i], current_, at, SlotOf(h, current_, false, fp_mask_));
    } else {
      stats_.unindexed++;
    }
  }
  stats_.duplicates += dups;
  stats_.admitted += admission->keys.size();
  return dups;
}

std::vector<uint8_t> DedupIndex::Confirm(uint64_t seq,
                                         const std::vector<SpanContentKey>& candidates) {
  std::vector<uint8_t> found(candidates.size(), 0);
  if (candidates.empty()) return found;
  // A first look by 16 bits of the content hash; the whole key only where they match.
  std::vector<uint64_t> bits(1 << 10, 0);
  std::unordered_multimap<uint64_t, size_t> by_content;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const uint64_t c = candidates[i].content;
    bits[(c >> 6) & 1023] |= uint64_t{1} << (c & 63);
    by_content.emplace(c, i);
  }
  const int fd = ::open(FilePath(seq).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    stats_.file_errors++;
    return found;  // not found: the spans are kept
  }
  std::vector<SpanContentKey> buf(1 << 15);
  size_t left = candidates.size();
  for (;;) {
    const ssize_t r = ::read(fd, buf.data(), buf.size() * sizeof(SpanContentKey));
    if (r <= 0) break;
    stats_.file_bytes_read += static_cast<uint64_t>(r);
    const size_t n = static_cast<size_t>(r) / sizeof(SpanContentKey);
    for (size_t k = 0; k < n && left > 0; ++k) {
      const uint64_t c = buf[k].content;
      if (((bits[(c >> 6) & 1023] >> (c & 63)) & 1) == 0) continue;
      auto [lo, hi] = by_content.equal_range(c);
      for (auto it = lo; it != hi; ++it) {
        if (!found[it->second] && candidates[it->second] == buf[k]) {
          found[it->second] = 1;
          --left;
        }
      }
    }
    if (left == 0 || static_cast<size_t>(r) % sizeof(SpanContentKey) != 0) break;
  }
  ::close(fd);
  return found;
}

void DedupIndex::Note(const SpanBatch& batch, uint64_t now_ns) {
  std::vector<uint8_t> seen;
  Admission admission;
  Admit(batch, now_ns, &seen, &admission);  // those seen are in the files already
  Commit(admission);
}

void DedupIndex::Commit(Admission& admission) {
  if (admission.empty()) return;
  // Written to the file first: a match on a committed slot is looked up there.
  for (size_t i = 0; i < admission.keys.size();) {
    size_t e = i;
    while (e < admission.keys.size() && admission.generations[e] == admission.generations[i]) ++e;
    WriteKeys(admission.generations[i], admission.keys.data() + i, e - i);
    i = e;
  }
  std::lock_guard lock(mu_);
  // A slot still holding this key's provisional value is this key's (or an
  // equal fingerprint's, which the same answer fits).
  for (size_t i = 0; i < admission.keys.size(); ++i) {
    uint32_t* s = SlotAt(admission.slots[i]);
    if (*s == admission.values[i]) *s |= kCommittedBit;
  }
  admission.Clear();
}

void DedupIndex::Forget(Admission& admission) {
  if (admission.empty()) return;
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < admission.keys.size(); ++i) {
    uint32_t* s = SlotAt(admission.slots[i]);
    if (*s == admission.values[i]) *s = 0;
  }
  admission.Clear();
}

std::string DedupIndex::FilePath(uint64_t seq) const {
  return opts_.dir + "/" + std::to_string(seq) + ".keys";
}

void DedupIndex::WriteKeys(uint64_t seq, const SpanContentKey* keys, size_t n) {
  std::lock_guard lock(file_mu_);
  auto it = files_.find(seq);
  if (it == files_.end()) {
    const int fd = ::open(FilePath(seq).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      stats_.file_errors++;
      spdlog::warn("dedup: cannot open {}: {}", FilePath(seq), std::strerror(errno));
      return;
    }
    it = files_.emplace(seq, fd).first;
  }
  const char* p = reinterpret_cast<const char*>(keys);
  size_t left = n * sizeof(SpanContentKey);
  while (left > 0) {
    const ssize_t w = ::write(it->second, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      stats_.file_errors++;
      return;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
}

void DedupIndex::RemoveFilesBefore(uint64_t seq) {
  std::lock_guard lock(file_mu_);
  for (auto it = files_.begin(); it != files_.end() && it->first + 1 < current_;) {
    ::close(it->second);  // written no more (a late commit opens it again)
    it = files_.erase(it);
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(opts_.dir, ec)) {
    uint64_t s;
    if (ParseSeq(e.path().filename().string(), &s) && s < seq) {
      std::filesystem::remove(e.path(), ec);
    }
  }
}

double DedupIndex::window_held_s(uint64_t now_ns) const {
  std::lock_guard lock(mu_);
  const double now_s = static_cast<double>(now_ns) / 1e9;
  return std::max(0.0, now_s - static_cast<double>(oldest_ * gen_s_));
}

void DedupIndex::AppendMetrics(PromText& out, uint64_t now_ns) const {
  const std::pair<const char*, const std::atomic<uint64_t>*> counters[] = {
      {"spanhouse_dedup_candidates_total", &stats_.candidates},
      {"spanhouse_dedup_false_positives_total", &stats_.false_positives},
      {"spanhouse_dedup_in_flight_matches_total", &stats_.in_flight_matches},
      {"spanhouse_dedup_unindexed_spans_total", &stats_.unindexed},
      {"spanhouse_dedup_evicted_generations_total", &stats_.evicted_generations},
      {"spanhouse_dedup_file_read_bytes_total", &stats_.file_bytes_read},
      {"spanhouse_dedup_file_errors_total", &stats_.file_errors}};
  const char* helps[] = {
      "Spans whose fingerprint matched an accepted key, looked up in the key files.",
      "Of those, spans not found there: kept (the fingerprint collided).",
      "Spans that matched only a key of a request not yet answered: kept.",
      "Spans not noted for lack of room (kept; a retry of them is not caught).",
      "Generations of keys forgotten before the window's end to make room.",
      "Bytes of key files read to confirm candidates.",
      "Key files that could not be written or read."};
  for (size_t i = 0; i < std::size(counters); ++i) {
    out.Family(counters[i].first, "counter", helps[i]);
    out.Sample(counters[i].first, "", counters[i].second->load());
  }
  out.One("spanhouse_dedup_table_bytes", "gauge", "Memory of the dedup index's table.", "",
          table_bytes());
  out.One("spanhouse_dedup_table_slots_used", "gauge",
          "Slots of the table in use, at the last change of generation.", "",
          stats_.slots_used.load());
  out.One("spanhouse_dedup_window_seconds", "gauge",
          "Seconds of accepted span keys the index holds now (dedup.window_s, unless it "
          "forgot generations early for room).",
          "", static_cast<uint64_t>(window_held_s(now_ns)));
}

}  // namespace spanhouse::pipeline
