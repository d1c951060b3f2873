#include "pipeline/durable/segment_log.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "unit/pipeline/sync_gate.h"

namespace spanhouse::pipeline::durable {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class SegmentLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("segment_log_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LogOptions Options(uint64_t max_bytes = 1 << 20, uint64_t segment = 4096) const {
    LogOptions o;
    o.dir = dir_.string();
    o.max_bytes = max_bytes;
    o.segment_bytes = segment;
    o.early_seal_age = 0ms;  // sealed as soon as released, whatever its age
    return o;
  }
  std::unique_ptr<SegmentLog> Open(uint64_t max_bytes = 1 << 20, uint64_t segment = 4096) {
    return Open(Options(max_bytes, segment));
  }
  static std::unique_ptr<SegmentLog> Open(const LogOptions& o, LogTestHooks hooks = {}) {
    std::unique_ptr<SegmentLog> log;
    EXPECT_TRUE(SegmentLog::Open(o, &log, std::move(hooks)).ok());
    return log;
  }
  // The records a fresh open replays: (lsn, kind, payload).
  struct Seen {
    uint64_t lsn;
    RecordKind kind;
    std::string payload;
  };
  static std::vector<Seen> ReadAll(SegmentLog& log) {
    std::vector<Seen> out;
    log.ReadReplay([&](const SegmentLog::Record& r, uint64_t) {
      out.push_back({r.lsn, r.kind, std::string(r.payload)});
    });
    return out;
  }
  // The segment files (not the released ones kept for recycling, *.free).
  std::vector<fs::path> Segments() const { return Files(".seg"); }
  std::vector<fs::path> Files(const std::string& ext) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ext) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST(Crc32c, KnownValue) {
  // The CRC-32C check value (RFC 3720's test vector "123456789").
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable("123456789"), 0xE3069283u);
}

// The instruction path and the table agree on every length and alignment
// (the 8-byte steps and the byte tail), and when continued from a prior CRC.
TEST(Crc32c, HardwareAndTableAgree) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 131 + (i >> 3)));
  for (size_t off = 0; off < 9; ++off) {
    for (size_t len : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 63u, 500u, 991u}) {
      const std::string_view v(data.data() + off, len);
      ASSERT_EQ(Crc32c(v), Crc32cPortable(v)) << off << " " << len;
      ASSERT_EQ(Crc32c(v, 0x12345678u), Crc32cPortable(v, 0x12345678u)) << off << " " << len;
    }
  }
  // Continuing is the same as one pass.
  EXPECT_EQ(
      Crc32c(std::string_view(data).substr(100), Crc32c(std::string_view(data).substr(0, 100))),
      Crc32c(data));
}

TEST_F(SegmentLogTest, RecordsComeBackAfterReopenInOrderWithTheirLsns) {
  std::vector<uint64_t> lsns;
  {
    auto log = Open(1 << 20, 512);
    for (int i = 0; i < 50; ++i) {
      Ticket ref;
      ASSERT_EQ(log->Append(i % 7 == 0 ? RecordKind::kBlock : RecordKind::kSpans,
                            "payload-" + std::to_string(i), &ref)
                    .code(),
                StatusCode::kOk);
      ASSERT_TRUE(log->WaitDurable(ref.lsn(), 10s));
      lsns.push_back(ref.lsn());
      // Dropped without Ack(): the record stays for the next start.
    }
  }
  EXPECT_GT(Segments().size(), 1u);  // 512-byte segments: it rolled
  auto log = Open(1 << 20, 512);
  auto seen = ReadAll(*log);
  ASSERT_EQ(seen.size(), 50u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(seen[i].lsn, lsns[i]);
    EXPECT_EQ(seen[i].payload, "payload-" + std::to_string(i));
    EXPECT_EQ(seen[i].kind, i % 7 == 0 ? RecordKind::kBlock : RecordKind::kSpans);
  }
  EXPECT_EQ(log->stats().corrupt_tails.load(), 0u);
  // New records go on numbering after the old ones.
  Ticket ref;
  ASSERT_EQ(log->Append(RecordKind::kSpans, "next", &ref).code(), StatusCode::kOk);
  EXPECT_EQ(ref.lsn(), lsns.back() + 1);
}

TEST_F(SegmentLogTest, ReleasedSegmentsAreDeletedOldestFirst) {
  auto log = Open(1 << 20, 256);
  std::vector<Ticket> refs;
  for (int i = 0; i < 20; ++i) {
    Ticket ref;
    ASSERT_EQ(log->Append(RecordKind::kSpans, std::string(100, 'x'), &ref).code(), StatusCode::kOk);
    refs.push_back(std::move(ref));
  }
  const size_t before = Segments().size();
  ASSERT_GT(before, 3u);
  // Releasing a later record first deletes nothing: the oldest still holds.
  refs[10].Ack();
  EXPECT_EQ(Segments().size(), before);
  for (int i = 0; i < 10; ++i) refs[i].Ack();
  const size_t after = Segments().size();
  EXPECT_LT(after, before);
  for (int i = 11; i < 20; ++i) refs[i].Ack();
  // The active segment stays (appends go on there).
  EXPECT_EQ(Segments().size(), 1u);
  EXPECT_GT(log->stats().segments_deleted.load(), 0u);
}

TEST_F(SegmentLogTest, AYoungActiveSegmentIsNotSealedEarlyWhenReleased) {
  LogOptions o = Options(1 << 20, 1 << 20);
  o.early_seal_age = 1h;
  auto log = Open(o);
  for (int i = 0; i < 5; ++i) {
    Ticket ref;
    ASSERT_EQ(log->Append(RecordKind::kSpans, "x", &ref).code(), StatusCode::kOk);
    ref.Ack();  // a sink that acks at once: no fdatasync and new file per record
  }
  EXPECT_EQ(Segments().size(), 1u);
  EXPECT_EQ(log->stats().segments_deleted.load(), 0u);
  // Old enough, the same release seals it and starts the next.
  LogOptions now = Options(1 << 20, 1 << 20);
  log.reset();
  fs::remove_all(dir_);
  log = Open(now);
  Ticket ref;
  ASSERT_EQ(log->Append(RecordKind::kSpans, "x", &ref).code(), StatusCode::kOk);
  ref.Ack();
  EXPECT_EQ(log->stats().segments_deleted.load(), 1u);
}

TEST_F(SegmentLogTest, ACloneKeepsTheSegmentUntilEveryHoldIsDone) {
  auto log = Open(1 << 20, 200);
  Ticket a;
  ASSERT_EQ(log->Append(RecordKind::kSpans, std::string(150, 'a'), &a).code(), StatusCode::kOk);
  Ticket b = a.Clone();
  Ticket c;
  ASSERT_EQ(log->Append(RecordKind::kSpans, std::string(150, 'c'), &c).code(),
            StatusCode::kOk);  // rolls: the first segment is sealed
  const size_t before = Segments().size();
  ASSERT_EQ(before, 2u);
  a.Ack();
  EXPECT_EQ(Segments().size(), before);
  b.Ack();
  EXPECT_EQ(Segments().size(), before - 1);
  c.Ack();
}

TEST_F(SegmentLogTest, AKeptRecordIsReadableAfterItsSegmentLeavesTheLog) {
  auto log = Open(1 << 20, 200);
  Ticket a;
  ASSERT_EQ(log->Append(RecordKind::kSpans, std::string(150, 'a'), &a).code(), StatusCode::kOk);
  Ticket keep = a.Keep();
  Ticket keep2 = keep.Clone();
  ASSERT_TRUE(keep.valid());
  EXPECT_EQ(keep.lsn(), a.lsn());
  Ticket c;
  ASSERT_EQ(log->Append(RecordKind::kSpans, std::string(150, 'c'), &c).code(),
            StatusCode::kOk);  // rolls: the first segment is sealed
  ASSERT_EQ(Segments().size(), 2u);
  const uint64_t bytes = log->bytes();
  // Every consumer done: the segment leaves the log (its bytes no longer
  // count against max_bytes, no replay reads it) but stays, renamed.
  a.Ack();
  EXPECT_EQ(Segments().size(), 1u);
  ASSERT_EQ(Files(".kept").size(), 1u);
  EXPECT_LT(log->bytes(), bytes);
  EXPECT_EQ(log->kept_bytes(), bytes - log->bytes());
  RecordKind kind{};
  std::string payload;
  ASSERT_TRUE(log->Read(keep, &kind, &payload).ok());
  EXPECT_EQ(payload, std::string(150, 'a'));
  // A keep taken on a record of a kept segment keeps it too.
  Ticket keep3 = keep.Keep();
  ASSERT_TRUE(keep3.valid());
  keep.Ack();
  keep2.Ack();
  ASSERT_TRUE(log->Read(keep3, &kind, &payload).ok());
  keep3.Ack();
  EXPECT_TRUE(Files(".kept").empty());
  EXPECT_EQ(log->kept_bytes(), 0u);
  EXPECT_FALSE(log->Read(keep3, &kind, &payload).ok());  // given up
  // A keep on a record whose segment is still in the log holds nothing back.
  Ticket k = c.Keep();
  c.Ack();
  Ticket d;
  ASSERT_EQ(log->Append(RecordKind::kSpans, std::string(150, 'd'), &d).code(), StatusCode::kOk);
  d.Ack();
  EXPECT_EQ(Files(".kept").size(), 1u);
  k.Ack();
  EXPECT_TRUE(Files(".kept").empty());
  // Kept files a crash left behind are removed at the next open, never replayed.
  log.reset();
  std::FILE* f = std::fopen((dir_ / "00000000000000000099.kept").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("stale", f);
  std::fclose(f);
  log = Open(1 << 20, 200);
  EXPECT_TRUE(Files(".kept").empty());
}

TEST_F(SegmentLogTest, FullLogRefusesUntilRecordsAreReleased) {
  auto log = Open(2048, 512);
  std::vector<Ticket> refs;
  StatusCode r = StatusCode::kOk;
  for (int i = 0; i < 100 && r == StatusCode::kOk; ++i) {
    Ticket ref;
    r = log->Append(RecordKind::kSpans, std::string(200, 'y'), &ref).code();
    if (r == StatusCode::kOk) refs.push_back(std::move(ref));
  }
  ASSERT_EQ(r, StatusCode::kResourceExhausted);
  EXPECT_LE(log->bytes(), 2048u);
  EXPECT_GT(log->stats().rejected_full.load(), 0u);
  // A writer's block record is never refused.
  Ticket block;
  EXPECT_EQ(log->Append(RecordKind::kBlock, "b", &block, true).code(), StatusCode::kOk);
  block.Ack();
  for (auto& ref : refs) ref.Ack();
  Ticket ref;
  EXPECT_EQ(log->Append(RecordKind::kSpans, std::string(200, 'y'), &ref).code(), StatusCode::kOk);
}

TEST_F(SegmentLogTest, TornTailIsSkippedCountedAndTheNextSegmentStillRead) {
  {
    auto log = Open(1 << 20, 1 << 20);
    for (int i = 0; i < 5; ++i) {
      Ticket ref;
      ASSERT_EQ(log->Append(RecordKind::kSpans, "rec" + std::to_string(i), &ref).code(),
                StatusCode::kOk);
    }
  }
  // A crash in the middle of a write: the last record is cut short.
  const fs::path first = Segments().back();
  fs::resize_file(first, fs::file_size(first) - 2);
  {
    auto log = Open(1 << 20, 1 << 20);  // appends go to a second segment
    ASSERT_EQ(ReadAll(*log).size(), 4u);
    Ticket ref;
    ASSERT_EQ(log->Append(RecordKind::kSpans, "after", &ref).code(), StatusCode::kOk);
  }
  auto log = Open(1 << 20, 1 << 20);
  auto seen = ReadAll(*log);
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[3].payload, "rec3");
  EXPECT_EQ(seen[4].payload, "after");
  EXPECT_EQ(log->stats().corrupt_tails.load(), 1u);
  EXPECT_GT(log->stats().corrupt_bytes.load(), 0u);
}

TEST_F(SegmentLogTest, FlippedByteFailsTheCrcAndEndsThatSegment) {
  {
    auto log = Open(1 << 20, 1 << 20);
    for (int i = 0; i < 3; ++i) {
      Ticket ref;
      ASSERT_EQ(log->Append(RecordKind::kSpans, "record-number-" + std::to_string(i), &ref).code(),
                StatusCode::kOk);
    }
  }
  const fs::path seg = Segments().back();
  std::string data;
  {
    std::ifstream in(seg, std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Inside the middle record's payload: segment header (32), first record
  // (8 + 1 + 15), the middle one's length, CRC and kind (9), 3 more.
  data[32 + 24 + 9 + 3] ^= 0x40;
  {
    std::ofstream out(seg, std::ios::binary | std::ios::trunc);
    out << data;
  }
  auto log = Open(1 << 20, 1 << 20);
  auto seen = ReadAll(*log);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].payload, "record-number-0");
  EXPECT_EQ(log->stats().corrupt_tails.load(), 1u);
}

TEST_F(SegmentLogTest, GarbageAndAbsurdLengthsAreNotBelieved) {
  {
    auto log = Open();
    Ticket ref;
    ASSERT_EQ(log->Append(RecordKind::kSpans, "ok", &ref).code(), StatusCode::kOk);
  }
  const fs::path seg = Segments().back();
  {
    std::ofstream out(seg, std::ios::binary | std::ios::app);
    out << std::string("\xff\xff\xff\x7f\x00\x00\x00\x00garbage", 15);
  }
  // A file that is not a segment at all, named like one.
  {
    std::ofstream out(dir_ / "00000000000000000099.seg", std::ios::binary);
    out << "not a segment";
  }
  auto log = Open();
  auto seen = ReadAll(*log);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].payload, "ok");
  EXPECT_EQ(log->stats().corrupt_tails.load(), 2u);
}

TEST_F(SegmentLogTest, ReplayedSegmentsGoOnceEveryHoldOnThemIsDone) {
  {
    auto log = Open(1 << 20, 256);
    for (int i = 0; i < 10; ++i) {
      Ticket ref;
      ASSERT_EQ(log->Append(RecordKind::kSpans, std::string(100, 'r'), &ref).code(),
                StatusCode::kOk);
    }
  }
  const size_t old = Segments().size();
  auto log = Open(1 << 20, 256);
  std::vector<Ticket> holds;
  log->ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    holds.push_back(log->Hold(segment, r.lsn));
  });
  ASSERT_EQ(holds.size(), 10u);
  // Released during the replay: pinned until it ends.
  for (size_t i = 0; i < 5; ++i) holds[i].Ack();
  EXPECT_EQ(Segments().size(), old + 1);
  log->EndReplay();
  EXPECT_LT(Segments().size(), old + 1);
  for (size_t i = 5; i < 10; ++i) holds[i].Ack();
  EXPECT_EQ(Segments().size(), 1u);
}

TEST_F(SegmentLogTest, GroupCommitMakesConcurrentAppendsDurable) {
  auto log = Open(64 << 20, 1 << 20);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Ticket ref;
        if (!log->Append(RecordKind::kSpans, std::to_string(t * 1000 + i), &ref).ok()) {
          return;
        }
        if (log->WaitDurable(ref.lsn(), 30s)) ok++;
        ref.Ack();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 400);
  EXPECT_GE(log->stats().fsyncs.load(), 1u);
  EXPECT_LE(log->stats().fsyncs.load(), 400u);
}

// What an OnDurable callback saw when it was called.
struct DurableCall {
  bool ok = false;
  std::thread::id thread;
  uint64_t fsyncs = 0;  // the log's count at the time
};

TEST_F(SegmentLogTest, OnDurableIsCalledRightAfterTheSyncThatCoversTheRecord) {
  SyncGate gate;
  LogOptions o = Options();
  auto log = Open(o, {gate.Hook()});
  Ticket ref;
  ASSERT_EQ(log->Append(RecordKind::kSpans, "a", &ref).code(), StatusCode::kOk);
  std::promise<DurableCall> called;
  log->OnDurable(ref.lsn(), [&](bool ok) {
    called.set_value({ok, std::this_thread::get_id(), log->stats().fsyncs.load()});
  });
  auto future = called.get_future();
  ASSERT_TRUE(gate.WaitEntered());  // the sync that covers it has begun
  EXPECT_EQ(future.wait_for(0s), std::future_status::timeout);
  gate.Open();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  const DurableCall call = future.get();
  EXPECT_TRUE(call.ok);
  EXPECT_NE(call.thread, std::this_thread::get_id());  // the sync thread's
  EXPECT_EQ(call.fsyncs, 1u);
}

TEST_F(SegmentLogTest, OnDurableForADurableRecordIsCalledAtOnce) {
  auto log = Open();
  Ticket ref;
  ASSERT_EQ(log->Append(RecordKind::kSpans, "a", &ref).code(), StatusCode::kOk);
  ASSERT_TRUE(log->WaitDurable(ref.lsn(), 10s));
  std::optional<DurableCall> call;
  log->OnDurable(ref.lsn(), [&](bool ok) { call = DurableCall{ok, std::this_thread::get_id()}; });
  ASSERT_TRUE(call.has_value());
  EXPECT_TRUE(call->ok);
  EXPECT_EQ(call->thread, std::this_thread::get_id());

  // By the interval policy a record counts as durable once written.
  log.reset();
  LogOptions o = Options();
  o.fsync_always = false;
  o.fsync_interval = 1h;
  log = Open(o);
  ASSERT_EQ(log->Append(RecordKind::kSpans, "b", &ref).code(), StatusCode::kOk);
  call.reset();
  log->OnDurable(ref.lsn(), [&](bool ok) { call = DurableCall{ok, std::this_thread::get_id()}; });
  ASSERT_TRUE(call.has_value());
  EXPECT_TRUE(call->ok);
}

// The sync thread calls back with no lock held: a callback may append and
// wait again (as a receiver answering on it could), without deadlock.
TEST_F(SegmentLogTest, OnDurableCallbacksMayUseTheLog) {
  auto log = Open();
  Ticket first;
  ASSERT_EQ(log->Append(RecordKind::kSpans, "a", &first).code(), StatusCode::kOk);
  std::promise<bool> second_durable;
  log->OnDurable(first.lsn(), [&](bool ok) {
    EXPECT_TRUE(ok);
    Ticket second;
    ASSERT_EQ(log->Append(RecordKind::kSpans, "b", &second).code(), StatusCode::kOk);
    log->OnDurable(second.lsn(), [&](bool ok2) { second_durable.set_value(ok2); });
  });
  auto future = second_durable.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(future.get());
}

// Waiters the log can no longer sync for are told so, once: at Close for a
// record never written, at once after it.
TEST_F(SegmentLogTest, OnDurableAfterTheLogClosesIsFalse) {
  auto log = Open();
  Ticket ref;
  ASSERT_EQ(log->Append(RecordKind::kSpans, "a", &ref).code(), StatusCode::kOk);
  std::vector<bool> calls;
  log->OnDurable(ref.lsn() + 1, [&](bool ok) { calls.push_back(ok); });
  log->Close();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0]);
  log->OnDurable(ref.lsn() + 1, [&](bool ok) { calls.push_back(ok); });
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_FALSE(calls[1]);
  // What was written before Close was synced by it.
  log->OnDurable(ref.lsn(), [&](bool ok) { calls.push_back(ok); });
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_TRUE(calls[2]);
}

TEST_F(SegmentLogTest, EpochSurvivesReopenAndANewLogGetsAnother) {
  uint64_t epoch = 0;
  {
    auto log = Open();
    epoch = log->epoch();
    Ticket ref;
    ASSERT_EQ(log->Append(RecordKind::kSpans, "x", &ref).code(), StatusCode::kOk);
  }
  EXPECT_EQ(Open()->epoch(), epoch);
  fs::remove_all(dir_);
  EXPECT_NE(Open()->epoch(), epoch);
}

TEST_F(SegmentLogTest, ARecordIsReadBackByItsRefWithTheHeadBeforeThePayload) {
  auto log = Open(1 << 20, 256);  // small segments: the records span several
  std::vector<Ticket> refs;
  std::vector<std::string> want;
  for (int i = 0; i < 20; ++i) {
    const std::string head = "h" + std::to_string(i);
    const std::string payload(50 + i * 7, static_cast<char>('a' + i));
    Ticket ref;
    ASSERT_EQ(log->Append(RecordKind::kRequest, head, payload, &ref).code(), StatusCode::kOk);
    refs.push_back(std::move(ref));
    want.push_back(head + payload);
  }
  for (int i = 19; i >= 0; --i) {  // any order, segments sealed or not
    RecordKind kind{};
    std::string got;
    ASSERT_TRUE(log->Read(refs[i], &kind, &got).ok()) << i;
    EXPECT_EQ(kind, RecordKind::kRequest);
    EXPECT_EQ(got, want[i]);
  }
  for (auto& r : refs) r.Ack();  // all stored: everything may go
  log.reset();

  // After a reopen the replay sees the same records; a hold taken with the
  // record's offset reads it back as well.
  log = Open(1 << 20, 256);
  for (int i = 0; i < 3; ++i) {
    Ticket ref;
    ASSERT_EQ(log->Append(RecordKind::kSpans, "", want[i], &ref).code(), StatusCode::kOk);
  }
  log.reset();
  log = Open(1 << 20, 256);
  std::vector<Ticket> held;
  log->ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    held.push_back(log->Hold(segment, r.lsn, r.offset));
  });
  log->EndReplay();
  ASSERT_EQ(held.size(), 3u);
  for (size_t i = 0; i < held.size(); ++i) {
    RecordKind kind{};
    std::string got;
    ASSERT_TRUE(log->Read(held[i], &kind, &got).ok());
    EXPECT_EQ(kind, RecordKind::kSpans);
    EXPECT_EQ(got, want[i]);
  }
  // A hold without an offset cannot be read: an error, not garbage.
  RecordKind kind{};
  std::string got;
  EXPECT_FALSE(log->Read(log->Hold(1, 1), &kind, &got).ok());
}

TEST_F(SegmentLogTest, ACorruptedRecordFailsItsReadBack) {
  auto log = Open();
  Ticket ref;
  ASSERT_EQ(log->Append(RecordKind::kRequest, "head", std::string(100, 'p'), &ref).code(),
            StatusCode::kOk);
  const fs::path seg = Segments().back();
  {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('X');
  }
  RecordKind kind{};
  std::string got;
  const Status st = log->Read(ref, &kind, &got);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("CRC"), std::string::npos) << st.message();
}

// Appends `n` records of `size` bytes of `fill` (the same size each: old
// and new records of a recycled file then start at the same offsets).
std::vector<Ticket> AppendEqual(SegmentLog& log, int n, char fill, size_t size = 100) {
  std::vector<Ticket> refs;
  for (int i = 0; i < n; ++i) {
    Ticket ref;
    EXPECT_EQ(log.Append(RecordKind::kSpans, std::string(size, fill), &ref).code(),
              StatusCode::kOk);
    refs.push_back(std::move(ref));
  }
  return refs;
}

TEST_F(SegmentLogTest, ReleasedSegmentsAreWrittenOverAndTheirOldRecordsNeverComeBack) {
  auto log = Open(1 << 20, 1024);  // 9 records of 108 bytes a segment
  for (auto& r : AppendEqual(*log, 40, 'o')) r.Ack();
  ASSERT_GT(Files(".free").size(), 0u);  // kept to be written over
  EXPECT_LE(Files(".free").size(), 4u);
  // Three new records, held: at a crash now they are all the log has; the
  // recycled file holds the old records after them, at the same offsets.
  auto held = AppendEqual(*log, 3, 'n');
  EXPECT_GT(log->stats().segments_recycled.load(), 0u);
  const fs::path active = Segments().back();
  ASSERT_GT(fs::file_size(active), 32u + 3 * 108);  // old bytes past the new records
  // The directory as a crash would leave it (the process gone, no Close).
  const fs::path crashed = dir_.string() + "_crashed";
  fs::remove_all(crashed);
  fs::create_directories(crashed);
  for (const auto& f : Segments()) fs::copy_file(f, crashed / f.filename());
  for (const auto& f : Files(".free")) fs::copy_file(f, crashed / f.filename());
  LogOptions o = Options(1 << 20, 1024);
  o.dir = crashed.string();
  {
    auto again = Open(o);
    auto seen = ReadAll(*again);
    ASSERT_EQ(seen.size(), 3u);
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].payload, std::string(100, 'n'));
      EXPECT_EQ(seen[i].lsn, held[i].lsn());
    }
    // The old bytes are expected there, not corruption.
    EXPECT_EQ(again->stats().corrupt_tails.load(), 0u);
    // Files kept for recycling by the crashed run are not kept for ever.
    bool free_left = false;
    for (const auto& e : fs::directory_iterator(crashed))
      free_left |= e.path().extension() == ".free";
    EXPECT_FALSE(free_left);
    // Numbering goes on after the last real record, not after old ones.
    Ticket next;
    ASSERT_EQ(again->Append(RecordKind::kSpans, "next", &next).code(), StatusCode::kOk);
    EXPECT_EQ(next.lsn(), held.back().lsn() + 1);
  }
  fs::remove_all(crashed);
  // A clean close cuts the active file to its records and removes the rest.
  for (auto& r : held) r.Ack();
  auto more = AppendEqual(*log, 2, 'm');
  log.reset();
  EXPECT_TRUE(Files(".free").empty());
  log = Open(1 << 20, 1024);
  auto seen = ReadAll(*log);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].payload, std::string(100, 'm'));
  EXPECT_EQ(log->stats().corrupt_tails.load(), 0u);
}

TEST_F(SegmentLogTest, ASealedRecycledSegmentIsCutToItsRecords) {
  auto log = Open(1 << 20, 1024);
  // 3 records of 309 bytes a segment: files of 959 bytes.
  for (auto& r : AppendEqual(*log, 40, 'o', 300)) r.Ack();
  // Smaller records over them (3 of 259 bytes: 809), held, three segments.
  auto held = AppendEqual(*log, 9, 'n', 250);
  ASSERT_GT(log->stats().segments_recycled.load(), 0u);
  const auto segs = Segments();
  ASSERT_EQ(segs.size(), 3u);
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    EXPECT_EQ(fs::file_size(segs[i]), 32u + 3 * 259) << segs[i];  // none of the old bytes
  }
  // A byte flipped in a sealed recycled segment is corruption, counted.
  const fs::path crashed = dir_.string() + "_crashed";
  fs::remove_all(crashed);
  fs::create_directories(crashed);
  for (const auto& f : segs) fs::copy_file(f, crashed / f.filename());
  {
    std::fstream f(crashed / segs.front().filename(),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('X');
  }
  LogOptions o = Options(1 << 20, 1024);
  o.dir = crashed.string();
  {
    auto again = Open(o);
    EXPECT_EQ(ReadAll(*again).size(), 8u);
    EXPECT_EQ(again->stats().corrupt_tails.load(), 1u);
  }
  fs::remove_all(crashed);
  for (auto& r : held) r.Ack();
}

TEST_F(SegmentLogTest, AFormat1SegmentIsReplayed) {
  // A segment as the previous format wrote it: a 24-byte header and plain
  // CRC32C of each record's body.
  fs::create_directories(dir_);
  std::string seg("SHDQ", 4);
  auto put32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) seg.push_back(static_cast<char>(v >> (8 * i)));
  };
  auto put64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) seg.push_back(static_cast<char>(v >> (8 * i)));
  };
  put32(1);
  put64(12345);  // epoch
  put64(7);      // first LSN
  for (const std::string payload : {"first", "second"}) {
    const std::string body = std::string(1, static_cast<char>(RecordKind::kSpans)) + payload;
    put32(static_cast<uint32_t>(body.size()));
    put32(Crc32c(body));
    seg += body;
  }
  {
    std::ofstream out(dir_ / "00000000000000000003.seg", std::ios::binary);
    out << seg;
  }
  auto log = Open();
  std::vector<Ticket> held;
  std::vector<Seen> seen;
  log->ReadReplay([&](const SegmentLog::Record& r, uint64_t segment) {
    seen.push_back({r.lsn, r.kind, std::string(r.payload)});
    held.push_back(log->Hold(segment, r.lsn, r.offset));
  });
  log->EndReplay();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].lsn, 7u);
  EXPECT_EQ(seen[1].payload, "second");
  EXPECT_EQ(log->stats().corrupt_tails.load(), 0u);
  EXPECT_EQ(log->epoch(), 12345u);
  RecordKind kind{};
  std::string got;
  ASSERT_TRUE(log->Read(held[1], &kind, &got).ok());
  EXPECT_EQ(got, "second");
  Ticket next;
  ASSERT_EQ(log->Append(RecordKind::kSpans, "new", &next).code(), StatusCode::kOk);
  EXPECT_EQ(next.lsn(), 9u);
  for (auto& h : held) h.Ack();
}

}  // namespace
}  // namespace spanhouse::pipeline::durable
