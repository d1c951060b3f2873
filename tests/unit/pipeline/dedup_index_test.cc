#include "pipeline/dedup/dedup_index.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

namespace spanhouse::pipeline {
namespace {

constexpr uint64_t kSecond = 1000000000ull;
constexpr uint64_t kT0 = 1765000000ull * kSecond;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dedup_test_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// `n` spans with random ids (a fresh trace every 4 spans), one resource.
SpanBatch RandomBatch(size_t n, std::mt19937_64& rng) {
  SpanBatch b;
  const uint32_t r = b.AddResource();
  SpanBatch::AddAttr(b.resource_attrs, b.AddString("service.name"), ValueType::kString,
                     b.AddString("checkout"));
  b.resources.attrs[r].end = 1;
  b.ResolveServiceName(r);
  const uint32_t sc = b.AddScope();
  TraceId trace{};
  for (size_t i = 0; i < n; ++i) {
    const uint32_t s = b.AddSpan(r, sc);
    if (i % 4 == 0) {
      for (auto& x : trace) x = static_cast<uint8_t>(rng());
    }
    b.spans.trace_id[s] = trace;
    for (auto& x : b.spans.span_id[s]) x = static_cast<uint8_t>(rng());
    b.spans.name[s] = b.AddString("op-" + std::to_string(rng() % 50));
    b.spans.kind[s] = static_cast<uint8_t>(SpanKind::kServer);
    b.spans.start_ns[s] = kT0 + rng() % kSecond;
    b.spans.end_ns[s] = b.spans.start_ns[s] + 1000 + rng() % 1000000;
  }
  return b;
}

DedupOptions Options(const TempDir& dir, uint32_t window_s = 600, size_t max_bytes = 1 << 20) {
  DedupOptions o;
  o.window_s = window_s;
  o.max_bytes = max_bytes;
  o.dir = dir.path();
  return o;
}

std::unique_ptr<DedupIndex> OpenAt(const DedupOptions& o, uint64_t now_ns) {
  std::unique_ptr<DedupIndex> idx;
  const Status st = DedupIndex::Open(o, now_ns, &idx);
  EXPECT_TRUE(st.ok()) << st.message();
  return idx;
}

// Admits `b` at `now` and commits it; returns how many spans were seen.
size_t Send(DedupIndex& idx, const SpanBatch& b, uint64_t now) {
  std::vector<uint8_t> seen;
  DedupIndex::Admission adm;
  const size_t n = idx.Admit(b, now, &seen, &adm);
  idx.Commit(adm);
  return n;
}

TEST(DedupIndex, AnAcceptedRequestSentAgainIsSeenWhole) {
  TempDir dir;
  auto idx = OpenAt(Options(dir), kT0);
  std::mt19937_64 rng(1);
  const SpanBatch b = RandomBatch(500, rng);
  EXPECT_EQ(Send(*idx, b, kT0), 0u);
  std::vector<uint8_t> seen;
  DedupIndex::Admission adm;
  EXPECT_EQ(idx->Admit(b, kT0 + kSecond, &seen, &adm), 500u);
  EXPECT_TRUE(adm.empty());
  for (uint8_t s : seen) EXPECT_EQ(s, 1);
  EXPECT_EQ(idx->stats().duplicates.load(), 500u);
  EXPECT_EQ(idx->stats().false_positives.load(), 0u);
  // Another batch is new; a batch mixing both has exactly the old half seen.
  const SpanBatch other = RandomBatch(300, rng);
  SpanBatch mixed;
  mixed.Append(other);
  mixed.Append(b);
  EXPECT_EQ(Send(*idx, mixed, kT0 + 2 * kSecond), 500u);
  EXPECT_EQ(Send(*idx, other, kT0 + 3 * kSecond), 300u);
}

TEST(DedupIndex, ARequestNotAnsweredYetOrRefusedDropsNothing) {
  TempDir dir;
  auto idx = OpenAt(Options(dir), kT0);
  std::mt19937_64 rng(2);
  const SpanBatch b = RandomBatch(100, rng);
  std::vector<uint8_t> seen;
  DedupIndex::Admission first;
  EXPECT_EQ(idx->Admit(b, kT0, &seen, &first), 0u);
  // The first is not answered yet: its copy is kept, not dropped.
  DedupIndex::Admission second;
  EXPECT_EQ(idx->Admit(b, kT0, &seen, &second), 0u);
  EXPECT_EQ(idx->stats().in_flight_matches.load(), 100u);
  // Both refused: the spans are new again.
  idx->Forget(first);
  idx->Forget(second);
  DedupIndex::Admission third;
  EXPECT_EQ(idx->Admit(b, kT0, &seen, &third), 0u);
  EXPECT_EQ(idx->stats().in_flight_matches.load(), 100u);
  idx->Commit(third);
  EXPECT_EQ(Send(*idx, b, kT0), 100u);
}

TEST(DedupIndex, SpansSharingIdsButNotContentAreBothKept) {
  TempDir dir;
  auto idx = OpenAt(Options(dir), kT0);
  std::mt19937_64 rng(3);
  SpanBatch client = RandomBatch(20, rng);
  SpanBatch server;
  server.Append(client);
  for (size_t s = 0; s < server.span_count(); ++s) {
    server.spans.kind[s] = static_cast<uint8_t>(SpanKind::kClient);
  }
  SpanBatch later;
  later.Append(client);
  for (size_t s = 0; s < later.span_count(); ++s) later.spans.end_ns[s] += 1;
  EXPECT_EQ(Send(*idx, client, kT0), 0u);
  EXPECT_EQ(Send(*idx, server, kT0), 0u);
  EXPECT_EQ(Send(*idx, later, kT0), 0u);
  EXPECT_EQ(Send(*idx, server, kT0), 20u);
}

TEST(DedupIndex, KeysLeaveWithTheWindow) {
  TempDir dir;
  auto idx = OpenAt(Options(dir, /*window_s=*/60), kT0);  // generations of 2 s
  std::mt19937_64 rng(4);
  const SpanBatch b = RandomBatch(50, rng);
  EXPECT_EQ(Send(*idx, b, kT0), 0u);
  std::vector<uint8_t> seen;
  DedupIndex::Admission adm;
  EXPECT_EQ(idx->Admit(b, kT0 + 59 * kSecond, &seen, &adm), 50u);
  EXPECT_GE(idx->window_held_s(kT0 + 59 * kSecond), 58.0);
  // Past the window and its last generation: new again, and the file is gone.
  EXPECT_EQ(idx->Admit(b, kT0 + 63 * kSecond, &seen, &adm), 0u);
  idx->Forget(adm);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    files += e.path().extension() == ".keys";
  }
  EXPECT_EQ(files, 0u);
}

TEST(DedupIndex, IdsOfGenerationsComeBackWithoutOldKeys) {
  // 32 generation ids for 31 live generations: after 40 generations the
  // keys of generation 0 must not be believed under generation 32's id.
  TempDir dir;
  auto idx = OpenAt(Options(dir, /*window_s=*/30), kT0);  // generations of 1 s
  std::mt19937_64 rng(5);
  const SpanBatch b = RandomBatch(200, rng);
  EXPECT_EQ(Send(*idx, b, kT0), 0u);
  for (uint64_t s = 1; s <= 32; ++s) Send(*idx, RandomBatch(10, rng), kT0 + s * kSecond);
  std::vector<uint8_t> seen;
  DedupIndex::Admission adm;
  EXPECT_EQ(idx->Admit(b, kT0 + 32 * kSecond, &seen, &adm), 0u);
  EXPECT_EQ(idx->stats().candidates.load(), 0u);
}

TEST(DedupIndex, MemoryStaysWithinItsBoundAndOldestKeysGoFirst) {
  TempDir dir;
  const size_t bytes = 64 << 10;  // 16384 slots
  auto idx = OpenAt(Options(dir, /*window_s=*/600, bytes), kT0);
  EXPECT_EQ(idx->table_bytes(), bytes);
  std::mt19937_64 rng(6);
  std::vector<SpanBatch> sent;
  // 40 generations of 20 s, 1000 spans each: 40000 keys, more than the table holds.
  for (int g = 0; g < 40; ++g) {
    sent.push_back(RandomBatch(1000, rng));
    EXPECT_EQ(Send(*idx, sent.back(), kT0 + g * 20 * kSecond), 0u);
  }
  const uint64_t now = kT0 + 39 * 20 * kSecond;
  EXPECT_EQ(idx->table_bytes(), bytes);
  EXPECT_GT(idx->stats().evicted_generations.load(), 0u);
  EXPECT_LT(idx->window_held_s(now), 600.0);
  std::vector<uint8_t> seen;
  DedupIndex::Admission adm;
  // The newest requests are still caught ...
  EXPECT_EQ(idx->Admit(sent.back(), now, &seen, &adm), 1000u);
  EXPECT_EQ(idx->Admit(sent[sent.size() - 2], now, &seen, &adm), 1000u);
  // ... and spans never sent are never seen, however full the table is.
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(idx->Admit(RandomBatch(1000, rng), now, &seen, &adm), 0u);
    idx->Forget(adm);
  }
}

TEST(DedupIndex, KeysSurviveARestart) {
  TempDir dir;
  std::mt19937_64 rng(7);
  const SpanBatch b = RandomBatch(400, rng);
  const SpanBatch refused = RandomBatch(100, rng);
  {
    auto idx = OpenAt(Options(dir), kT0);
    EXPECT_EQ(Send(*idx, b, kT0), 0u);
    std::vector<uint8_t> seen;
    DedupIndex::Admission adm;
    idx->Admit(refused, kT0, &seen, &adm);  // never answered: not in the files
  }
  auto idx = OpenAt(Options(dir), kT0 + 100 * kSecond);
  std::vector<uint8_t> seen;
  DedupIndex::Admission adm;
  EXPECT_EQ(idx->Admit(b, kT0 + 100 * kSecond, &seen, &adm), 400u);
  EXPECT_EQ(idx->Admit(refused, kT0 + 100 * kSecond, &seen, &adm), 0u);
  idx->Forget(adm);
  // A restart after the window: forgotten, files removed.
  idx.reset();
  idx = OpenAt(Options(dir), kT0 + 700 * kSecond);
  EXPECT_EQ(idx->Admit(b, kT0 + 700 * kSecond, &seen, &adm), 0u);
}

TEST(DedupIndex, ACollidingFingerprintNeverDropsASpan) {
  // 4-bit fingerprints: most lookups collide, and each is settled by the
  // key files.
  TempDir dir;
  DedupOptions o = Options(dir);
  o.fingerprint_bits = 4;
  auto idx = OpenAt(o, kT0);
  std::mt19937_64 rng(8);
  std::vector<SpanBatch> sent;
  for (int i = 0; i < 20; ++i) {
    sent.push_back(RandomBatch(500, rng));
    EXPECT_EQ(Send(*idx, sent.back(), kT0 + i * kSecond), 0u);
  }
  EXPECT_GT(idx->stats().false_positives.load(), 100u);
  for (const SpanBatch& b : sent) EXPECT_EQ(Send(*idx, b, kT0 + 30 * kSecond), 500u);
}

// The false-positive rate of the real 26-bit fingerprints with the table
// 85% full: the share of never-seen spans that cost a look in a key file.
TEST(DedupIndex, FalsePositiveRateAtAFullTable) {
  TempDir dir;
  const size_t bytes = 4 << 20;  // 1M slots
  auto idx = OpenAt(Options(dir, 600, bytes), kT0);
  std::mt19937_64 rng(9);
  const size_t fill = (bytes / 4) * 85 / 100;
  for (size_t i = 0; i < fill; i += 10000) Send(*idx, RandomBatch(10000, rng), kT0);
  EXPECT_EQ(idx->stats().evicted_generations.load(), 0u);
  EXPECT_EQ(idx->stats().unindexed.load(), 0u);
  const uint64_t before = idx->stats().candidates.load();
  const size_t probes = 1000000;
  std::vector<uint8_t> seen;
  for (size_t i = 0; i < probes; i += 10000) {
    DedupIndex::Admission adm;
    EXPECT_EQ(idx->Admit(RandomBatch(10000, rng), kT0, &seen, &adm), 0u);
    idx->Forget(adm);
  }
  const double rate = static_cast<double>(idx->stats().candidates.load() - before) / probes;
  std::printf("false-positive rate at 85%% full: %.2e (%zu probes)\n", rate, probes);
  EXPECT_LT(rate, 1e-5);  // expected ~4e-7: 32 slots x 0.85 / 2^26
}

}  // namespace
}  // namespace spanhouse::pipeline
