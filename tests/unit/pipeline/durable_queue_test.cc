// The durable queue with fake sinks (testdata/test_sink.h): every sink gets
// every request through its own cursor; a sink that cannot take spans holds
// back only itself (its backlog read back from disk, in order); a segment is
// freed once every sink acked it; and a restart replays to each sink exactly
// what it had not finished: its unfinished sealed blocks, whole and with
// their tokens, then the spans none of its blocks held.
#include "pipeline/durable/durable_queue.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "codec/body.h"
#include "codec/otlp_encode.h"
#include "common/clock.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/sampling/tail_policy.h"
#include "pipeline/sampling/tail_sampler.h"
#include "sink/ticket_latch.h"
#include "testdata/test_sink.h"

namespace spanhouse::pipeline::durable {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testdata::TestSink;

constexpr uint64_t kDayNs = 86400000000000ull;
constexpr uint64_t kStartNs = 20000 * kDayNs + 3600000000000ull;  // day 20000, 01:00

// `n` spans of trace `trace`, span ids tag*1000 + i, starting at `start_ns`.
SpanBatch Request(uint64_t tag, size_t n, uint64_t start_ns = kStartNs) {
  SpanBatch b;
  const uint32_t r = b.AddResource();
  const uint32_t s = b.AddScope();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t sp = b.AddSpan(r, s);
    b.spans.trace_id[sp][0] = static_cast<uint8_t>(tag);
    b.spans.trace_id[sp][1] = static_cast<uint8_t>(tag >> 8);
    b.spans.trace_id[sp][15] = 1;
    const uint64_t id = tag * 1000 + i + 1;
    for (int k = 0; k < 8; ++k) b.spans.span_id[sp][k] = static_cast<uint8_t>(id >> (8 * k));
    b.spans.name[sp] = b.AddString("op-" + std::to_string(i));
    b.spans.start_ns[sp] = start_ns + i;
    b.spans.end_ns[sp] = start_ns + i + 1000;
  }
  return b;
}

uint64_t SpanIdOf(const SpanBatch& b, uint32_t i) {
  uint64_t id = 0;
  for (int k = 0; k < 8; ++k) id |= static_cast<uint64_t>(b.spans.span_id[i][k]) << (8 * k);
  return id;
}

// Every span id an item holds (a request's spans, or a replayed block's).
std::vector<uint64_t> SpanIds(const QueuedBatch& item) {
  std::vector<uint64_t> ids;
  auto add = [&](const SpanBatch& b) {
    for (uint32_t i = 0; i < b.span_count(); ++i) ids.push_back(SpanIdOf(b, i));
  };
  if (item.batch != nullptr) add(*item.batch);
  if (item.block != nullptr) {
    for (const auto& p : item.block->parts) add(*p);
  }
  return ids;
}

DurableOptions OptionsAt(const fs::path& dir, bool enabled = true) {
  DurableOptions o;
  o.enabled = enabled;
  o.log.dir = dir.string();
  o.log.segment_bytes = 4096;
  o.log.max_bytes = 64 << 20;
  o.log.fsync_always = false;
  return o;
}

// A queue on `dir` with test sinks of these names, started. Its backlogs stop
// reading into the sinks before they go, and the sinks (whose batches hold
// memory of the budget and of the queue's shares) go before the queue.
// `before`: what the start does before the sinks are added (an upgrade).
struct Running {
  Running(const fs::path& dir, std::initializer_list<const char*> names,
          size_t budget_bytes = size_t{1} << 30, bool enabled = true,
          const std::function<void(DurableQueue&)>& before = {})
      : budget(budget_bytes) {
    EXPECT_TRUE(DurableQueue::Open(OptionsAt(dir, enabled), budget, nullptr, &q).ok());
    if (before) before(*q);
    for (const char* n : names) sinks.push_back(std::make_unique<TestSink>(n));
    for (auto& s : sinks) q->AddSink(*s);
    q->Start();
  }
  ~Running() { q->StopBacklogs(); }
  TestSink& sink(size_t i) { return *sinks[i]; }
  MemoryBudget budget;
  std::unique_ptr<DurableQueue> q;
  std::vector<std::unique_ptr<TestSink>> sinks;
};

class DurableQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("durable_queue_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<DurableQueue> Open(MemoryBudget& budget, bool enabled = true) {
    std::unique_ptr<DurableQueue> q;
    EXPECT_TRUE(DurableQueue::Open(OptionsAt(dir_, enabled), budget, nullptr, &q).ok());
    return q;
  }

  // What a receiver does: the record, then the spans to every sink.
  static Status Send(DurableQueue& q, MemoryBudget& budget, const SpanBatch& request,
                     bool spilled = false) {
    Ticket ticket;
    const std::string body = codec::EncodeOtlpProto(request);
    SH_RETURN_IF_ERROR(q.Append(1, codec::BodyFormat::kOtlpProto, body, &ticket));
    auto batch = std::make_unique<SpanBatch>();
    batch->Append(request);
    const size_t bytes = batch->MemoryBytes();
    const size_t n = batch->span_count();
    if (spilled) return q.Deliver(nullptr, Reservation(), std::move(ticket), bytes, n);
    if (!budget.TryReserve(bytes)) return Status::Exhausted("test: budget");
    return q.Deliver(std::move(batch), Reservation(&budget, bytes), std::move(ticket), bytes, n);
  }

  // Pops `items` items from `sink` and returns them.
  static std::vector<QueuedBatch> Take(TestSink& sink, size_t items) {
    std::vector<QueuedBatch> out;
    while (out.size() < items) {
      auto item = sink.Pop(5s);
      if (!item) break;
      out.push_back(std::move(*item));
    }
    return out;
  }

  fs::path dir_;
};

TEST_F(DurableQueueTest, EverySinkGetsEveryRequestAndASegmentGoesOnlyWhenAllAcked) {
  Running r(dir_, {"a", "b"}, 1 << 30);
  auto& q = r.q;
  MemoryBudget& budget = r.budget;
  TestSink& a = r.sink(0);
  TestSink& b = r.sink(1);
  for (uint64_t t = 1; t <= 40; ++t) ASSERT_TRUE(Send(*q, budget, Request(t, 10)).ok());
  std::vector<QueuedBatch> got_a = Take(a, 40);
  std::vector<QueuedBatch> got_b = Take(b, 40);
  ASSERT_EQ(got_a.size(), 40u);
  ASSERT_EQ(got_b.size(), 40u);
  std::set<uint64_t> ids_a;
  std::set<uint64_t> ids_b;
  for (size_t i = 0; i < 40; ++i) {
    ASSERT_TRUE(got_a[i].ticket.valid());
    ASSERT_TRUE(got_b[i].ticket.valid());
    EXPECT_EQ(got_a[i].ticket.lsn(), got_b[i].ticket.lsn());
    // Each sink has spans of its own (the second a copy), from memory.
    ASSERT_NE(got_a[i].batch.get(), got_b[i].batch.get());
    for (uint64_t id : SpanIds(got_a[i])) ids_a.insert(id);
    for (uint64_t id : SpanIds(got_b[i])) ids_b.insert(id);
  }
  EXPECT_EQ(ids_a.size(), 400u);
  EXPECT_EQ(ids_a, ids_b);
  const SegmentLog& log = *q->log();
  for (auto& item : got_a) item.ticket.Ack();
  EXPECT_EQ(log.stats().segments_deleted.load(), 0u) << "b still holds every record";
  for (auto& item : got_b) item.ticket.Ack();
  EXPECT_GE(log.stats().segments_deleted.load(), 3u);
}

TEST_F(DurableQueueTest, BeforeTailSinksTakeARequestAtOnceTheOthersAfter) {
  // With tail sampling and several nodes: the peer sinks (before tail) get their copy while
  // the request waits in the tail window; the stores get it once decided. Each holds a claim.
  MemoryBudget budget(size_t{1} << 30);
  std::unique_ptr<DurableQueue> q = Open(budget);
  TestSink store("store");
  TestSink peer("peer:b");
  q->AddSink(store);
  q->AddSink(peer, /*before_tail=*/true);
  q->Start();
  Ticket ticket;
  const SpanBatch request = Request(1, 10);
  ASSERT_TRUE(
      q->Append(1, codec::BodyFormat::kOtlpProto, codec::EncodeOtlpProto(request), &ticket).ok());
  auto batch = std::make_unique<SpanBatch>(request);
  const size_t bytes = batch->MemoryBytes();
  ASSERT_TRUE(budget.TryReserve(bytes));
  q->DeliverBeforeTail(batch.get(), ticket, bytes, 10);
  auto early = peer.Pop(0s);
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(SpanIds(*early).size(), 10u);
  EXPECT_FALSE(store.Pop(0s).has_value()) << "the store waits for the decision";
  ASSERT_TRUE(q->DeliverAfterTail(std::move(batch), Reservation(&budget, bytes), std::move(ticket),
                                  bytes, 10)
                  .ok());
  auto late = store.Pop(0s);
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(SpanIds(*late), SpanIds(*early));
  EXPECT_FALSE(peer.Pop(0s).has_value()) << "not twice";
  early->ticket.Ack();
  late->ticket.Ack();
  // Spilled (no batch): both read it back from the log.
  Ticket spilled;
  ASSERT_TRUE(
      q->Append(2, codec::BodyFormat::kOtlpProto, codec::EncodeOtlpProto(Request(2, 4)), &spilled)
          .ok());
  q->DeliverBeforeTail(nullptr, spilled, 1000, 4);
  ASSERT_TRUE(q->DeliverAfterTail(nullptr, Reservation(), std::move(spilled), 1000, 4).ok());
  for (TestSink* s : {&peer, &store}) {
    auto back = Take(*s, 1);
    ASSERT_EQ(back.size(), 1u) << s->name();
    EXPECT_EQ(SpanIds(back[0]).size(), 4u);
    back[0].ticket.Ack();
  }
  q->StopBacklogs();
}

TEST_F(DurableQueueTest, ASinkThatRefusesHoldsBackOnlyItselfAndCatchesUpInOrder) {
  Running r(dir_, {"a", "b"}, 1 << 30);
  auto& q = r.q;
  MemoryBudget& budget = r.budget;
  TestSink& a = r.sink(0);
  TestSink& b = r.sink(1);
  b.Refuse(true);
  for (uint64_t t = 1; t <= 30; ++t) ASSERT_TRUE(Send(*q, budget, Request(t, 5)).ok());
  // The healthy sink got everything from memory, at once.
  std::vector<QueuedBatch> got_a = Take(a, 30);
  ASSERT_EQ(got_a.size(), 30u);
  for (auto& item : got_a) item.ticket.Ack();
  const SinkCursor& cb = *q->cursors()[1];
  EXPECT_TRUE(cb.backlogged());
  EXPECT_FALSE(q->AllBacklogged());
  EXPECT_EQ(cb.stats().spilled_requests.load(), 30u);
  EXPECT_EQ(b.queue().bytes(), 0u);
  // Back up: its backlog is read back from the log, in the order sent, once.
  b.Refuse(false);
  std::vector<QueuedBatch> got_b = Take(b, 30);
  ASSERT_EQ(got_b.size(), 30u);
  EXPECT_FALSE(b.Pop(200ms).has_value());
  uint64_t last = 0;
  std::set<uint64_t> ids;
  for (auto& item : got_b) {
    ASSERT_TRUE(item.ticket.valid());
    EXPECT_GT(item.ticket.lsn(), last);
    last = item.ticket.lsn();
    for (uint64_t id : SpanIds(item)) ids.insert(id);
    item.ticket.Ack();
  }
  EXPECT_EQ(ids.size(), 150u);
  EXPECT_EQ(cb.stats().queued_requests.load(), 30u);
  EXPECT_FALSE(cb.backlogged());
}

TEST_F(DurableQueueTest, ASinkThatStopsWritingGetsNoMoreThanItsShareOfMemory) {
  Running r(dir_, {"a", "b"}, 1 << 20);  // each of two sinks: 512 KiB
  auto& q = r.q;
  MemoryBudget& budget = r.budget;
  TestSink& a = r.sink(0);
  TestSink& b = r.sink(1);  // never popped: its spans stay in memory
  size_t a_items = 0;
  for (uint64_t t = 1; t <= 200; ++t) {
    ASSERT_TRUE(Send(*q, budget, Request(t, 20)).ok()) << t;
    while (auto item = a.Pop(0ms)) {  // a writes as it goes
      ++a_items;
      item->ticket.Ack();
    }
    ASSERT_LE(budget.used(), budget.limit());
  }
  EXPECT_EQ(a_items, 200u);
  EXPECT_LE(b.queue().bytes(), (1u << 20) / 2 + 64 * 1024);
  EXPECT_GT(q->cursors()[1]->stats().spilled_requests.load(), 0u);
  EXPECT_EQ(q->cursors()[0]->stats().spilled_requests.load(), 0u);
}

TEST_F(DurableQueueTest, WithoutTheLogAFullSinkRefusesTheRequest) {
  Running r(dir_, {"a"}, 1 << 30, /*enabled=*/false);
  auto& q = r.q;
  MemoryBudget& budget = r.budget;
  TestSink& a = r.sink(0);
  EXPECT_FALSE(q->durable());
  ASSERT_TRUE(Send(*q, budget, Request(1, 3)).ok());
  a.Refuse(true);
  EXPECT_EQ(Send(*q, budget, Request(2, 3)).code(), StatusCode::kResourceExhausted);
  auto item = a.Pop(1s);
  ASSERT_TRUE(item.has_value());
  EXPECT_FALSE(item->ticket.valid());
  EXPECT_EQ(SpanIds(*item).size(), 3u);
}

TEST_F(DurableQueueTest, ARestartReplaysToEachSinkWhatItHadNotFinished) {
  std::string token;
  {
    Running r(dir_, {"a", "b"}, 1 << 30);
    auto& q = r.q;
    MemoryBudget& budget = r.budget;
    TestSink& a = r.sink(0);
    TestSink& b = r.sink(1);
    for (uint64_t t = 1; t <= 6; ++t) ASSERT_TRUE(Send(*q, budget, Request(t, 10)).ok());
    // a: the first three requests as one sealed block, finished; the next two
    // sealed and not finished (a crash during the write); the last not even
    // sealed. b: nothing finished at all.
    std::vector<QueuedBatch> got = Take(a, 6);
    ASSERT_EQ(got.size(), 6u);
    std::vector<Ticket> done;
    std::vector<Ticket> open;
    for (int i = 0; i < 3; ++i) done.push_back(std::move(got[i].ticket));
    for (int i = 3; i < 5; ++i) open.push_back(std::move(got[i].ticket));
    sink::BlockLedger& ca = *a.cursor();
    const SealedBlock finished = ca.Seal(TestSink::DayKey(20000), done, 1);
    ASSERT_TRUE(finished.sealed());
    ca.Done(finished, &done);
    const SealedBlock unfinished = ca.Seal(TestSink::DayKey(20000), open, 2);
    ASSERT_TRUE(unfinished.sealed());
    token = unfinished.token;
    EXPECT_NE(token, finished.token);
    ASSERT_EQ(Take(b, 6).size(), 6u);  // taken, never acked
  }                                    // the process dies: nothing else acked
  Running r(dir_, {"a", "b"}, 1 << 30);
  auto& q = r.q;
  TestSink& a = r.sink(0);
  TestSink& b = r.sink(1);
  // a: the unfinished block, whole, as sealed; then the request no block held.
  auto block = a.Pop(5s);
  ASSERT_TRUE(block.has_value());
  ASSERT_NE(block->block, nullptr);
  EXPECT_EQ(block->block->sealed.token, token);
  EXPECT_EQ(block->block->chunks, 2u);
  EXPECT_EQ(block->block->key, TestSink::DayKey(20000));
  EXPECT_EQ(block->block->tickets.size(), 2u);
  std::vector<uint64_t> ids = SpanIds(*block);
  std::set<uint64_t> block_ids(ids.begin(), ids.end());
  EXPECT_EQ(block_ids,
            (std::set<uint64_t>{4001, 4002, 4003, 4004, 4005, 4006, 4007, 4008, 4009, 4010,
                                5001, 5002, 5003, 5004, 5005, 5006, 5007, 5008, 5009, 5010}));
  auto rest = a.Pop(5s);
  ASSERT_TRUE(rest.has_value());
  ASSERT_EQ(rest->block, nullptr);
  EXPECT_EQ(SpanIds(*rest).front(), 6001u);
  EXPECT_EQ(SpanIds(*rest).size(), 10u);
  EXPECT_FALSE(a.Pop(300ms).has_value()) << "the finished block was handed over again";
  EXPECT_EQ(q->cursors()[0]->stats().skipped_blocks.load(), 1u);
  // b: all six requests, as new.
  std::set<uint64_t> b_ids;
  for (auto& item : Take(b, 6)) {
    EXPECT_EQ(item.block, nullptr);
    for (uint64_t id : SpanIds(item)) b_ids.insert(id);
  }
  EXPECT_EQ(b_ids.size(), 60u);
  EXPECT_FALSE(b.Pop(300ms).has_value());
}

TEST_F(DurableQueueTest, ARecordPartlyInAFinishedBlockReplaysTheRestOnly) {
  {
    Running r(dir_, {"a"}, 1 << 30);
    auto& q = r.q;
    MemoryBudget& budget = r.budget;
    TestSink& a = r.sink(0);
    // One request across midnight: 5 spans of day 20000, 5 of day 20001.
    SpanBatch request = Request(1, 5, 20001 * kDayNs - 100);
    SpanBatch late = Request(2, 5, 20001 * kDayNs + 100);
    request.Append(late);
    ASSERT_TRUE(Send(*q, budget, request).ok());
    auto item = a.Pop(5s);
    ASSERT_TRUE(item.has_value());
    // As a writer splits a request across midnight: a part per day, each
    // with a ticket of its own. The first day's is written and finished.
    [[maybe_unused]] Ticket day1 = item->ticket.Clone();  // the next day's part: held
    std::vector<Ticket> tickets;
    tickets.push_back(std::move(item->ticket));
    sink::BlockLedger& c = *a.cursor();
    const SealedBlock day0 = c.Seal(TestSink::DayKey(20000), tickets, 1);
    c.Done(day0, &tickets);
  }
  Running r(dir_, {"a"}, 1 << 30);
  TestSink& a = r.sink(0);
  auto item = a.Pop(5s);
  ASSERT_TRUE(item.has_value());
  EXPECT_EQ(SpanIds(*item), (std::vector<uint64_t>{2001, 2002, 2003, 2004, 2005}));
  EXPECT_FALSE(a.Pop(300ms).has_value());
}

TEST_F(DurableQueueTest, BlocksStoredBeforeAnUpgradeAreNotHandedOverAgain) {
  {
    Running r(dir_, {"a"}, 1 << 30);
    auto& q = r.q;
    MemoryBudget& budget = r.budget;
    TestSink& a = r.sink(0);
    ASSERT_TRUE(Send(*q, budget, Request(1, 4)).ok());
    auto item = a.Pop(5s);
    ASSERT_TRUE(item.has_value());
    std::vector<Ticket> tickets;
    tickets.push_back(std::move(item->ticket));
    ASSERT_TRUE(a.cursor()->Seal(TestSink::DayKey(20000), tickets, 1).sealed());  // never finished
  }
  // The upgrade's own sink writes the block into the old table and finishes
  // it before the copy.
  const std::function<void(DurableQueue&)> upgrade = [](DurableQueue& q) {
    TestSink upgrade("a");
    upgrade.AutoFinish(true);
    ASSERT_TRUE(q.ReplaySealedBlocks(upgrade).ok());
    EXPECT_TRUE(upgrade.started());
    auto got = upgrade.Pop(1s);
    ASSERT_TRUE(got.has_value());
    ASSERT_NE(got->block, nullptr);
    EXPECT_EQ(SpanIds(*got).size(), 4u);
  };
  for (int start = 0; start < 2; ++start) {
    Running r(dir_, {"a"}, 1 << 30, true,
              start == 0 ? upgrade : std::function<void(DurableQueue&)>());
    EXPECT_FALSE(r.sink(0).Pop(300ms).has_value()) << "start " << start;
  }
}

// Two sinks, each with an unfinished block over records the other's block
// holds some of, and the observer (the dedup index's): each record is
// decoded once at the restart however many of them want it
// (codec::BodyDecodes counts every OTLP decode in the process).
TEST_F(DurableQueueTest, ARestartDecodesEachRecordOnceForEverySinkAndBlock) {
  constexpr uint64_t kRecords = 8;
  {
    Running r(dir_, {"a", "b"}, 1 << 30);
    for (uint64_t t = 1; t <= kRecords; ++t) {
      ASSERT_TRUE(Send(*r.q, r.budget, Request(t, 10)).ok());
    }
    // a sealed records 1-4 in a block, b records 3-6; neither finished.
    for (size_t k = 0; k < 2; ++k) {
      std::vector<QueuedBatch> got = Take(r.sink(k), kRecords);
      ASSERT_EQ(got.size(), kRecords);
      std::vector<Ticket> sealed;
      for (size_t i = 2 * k; i < 2 * k + 4; ++i) sealed.push_back(std::move(got[i].ticket));
      ASSERT_TRUE(r.sink(k).cursor()->Seal(TestSink::DayKey(20000), sealed, 1).sealed());
    }
  }
  std::vector<uint64_t> observed;  // the first span id of each record observed
  const uint64_t before = codec::BodyDecodes();
  Running r(dir_, {"a", "b"}, 1 << 30, true, [&](DurableQueue& q) {
    q.set_replay_observer([&](const SpanBatch& b) { observed.push_back(SpanIdOf(b, 0)); });
  });
  EXPECT_EQ(codec::BodyDecodes() - before, kRecords);
  EXPECT_EQ(observed, (std::vector<uint64_t>{1001, 2001, 3001, 4001, 5001, 6001, 7001, 8001}));
  // Each sink: its block whole, then the records it did not hold, once.
  for (size_t k = 0; k < 2; ++k) {
    std::vector<QueuedBatch> got = Take(r.sink(k), 1 + kRecords - 4);
    ASSERT_EQ(got.size(), 1 + kRecords - 4) << k;
    ASSERT_NE(got[0].block, nullptr) << k;
    EXPECT_EQ(SpanIds(got[0]).size(), 40u);
    EXPECT_EQ(SpanIds(got[0]).front(), (2 * k + 1) * 1000 + 1);
    std::set<uint64_t> ids;
    for (size_t i = 1; i < got.size(); ++i) {
      EXPECT_EQ(got[i].block, nullptr);
      for (uint64_t id : SpanIds(got[i])) ids.insert(id);
    }
    EXPECT_EQ(ids.size(), 40u);
    for (uint64_t t = 2 * k + 1; t <= 2 * k + 4; ++t) EXPECT_EQ(ids.count(t * 1000 + 1), 0u) << t;
    EXPECT_FALSE(r.sink(k).Pop(200ms).has_value());
  }
  EXPECT_EQ(codec::BodyDecodes() - before, kRecords);
}

// A filter with tail sampling keeping traces with an error, as serve makes it.
std::unique_ptr<SpanFilter> TailFilter(MemoryBudget& budget, std::unique_ptr<TailSampler>* tail) {
  std::unique_ptr<TailPolicies> policies;
  EXPECT_TRUE(TailPolicies::Parse("error", &policies).ok());
  *tail = std::make_unique<TailSampler>(TailSamplingOptions{}, std::move(policies), &budget);
  auto filter = std::make_unique<SpanFilter>(FilterLimits{});
  filter->set_tail(tail->get());
  return filter;
}

// With tail sampling the replay reads the log twice (every trace decided
// before any record is marked): a record held decoded between the reads is
// decoded once, the observer sees it unmarked (as the dedup index keyed
// it), and the sink marked by the decisions, as a second decode marks it.
TEST_F(DurableQueueTest, WithTailSamplingARestartDecodesARecordOnceAndMarksItLater) {
  constexpr uint64_t kRecords = 4;
  const uint64_t now = WallClockNs();
  {
    MemoryBudget budget(1 << 30);
    std::unique_ptr<TailSampler> tail;
    auto filter = TailFilter(budget, &tail);
    std::unique_ptr<DurableQueue> q;
    ASSERT_TRUE(DurableQueue::Open(OptionsAt(dir_), budget, filter.get(), &q).ok());
    for (uint64_t t = 1; t <= kRecords; ++t) {
      SpanBatch request = Request(t, 2, now - 1000000000);
      if (t == 1) request.spans.status_code[0] = static_cast<uint8_t>(StatusCodeOtlp::kError);
      Ticket ticket;
      ASSERT_TRUE(
          q->Append(now, codec::BodyFormat::kOtlpProto, codec::EncodeOtlpProto(request), &ticket)
              .ok());
    }
  }  // killed before any trace was decided
  MemoryBudget budget(1 << 30);
  std::unique_ptr<TailSampler> tail;
  auto filter = TailFilter(budget, &tail);
  std::unique_ptr<DurableQueue> q;
  ASSERT_TRUE(DurableQueue::Open(OptionsAt(dir_), budget, filter.get(), &q).ok());
  TestSink sink("a");
  q->AddSink(sink);
  size_t observed = 0;
  size_t observed_marked = 0;  // spans sampled out or named by a policy, as observed
  q->set_replay_observer([&](const SpanBatch& b) {
    ++observed;
    for (uint32_t i = 0; i < b.span_count(); ++i) {
      observed_marked += b.spans.metrics_only[i] + (b.spans.attrs[i].end - b.spans.attrs[i].begin);
    }
  });
  const uint64_t before = codec::BodyDecodes();
  q->Start();
  EXPECT_EQ(codec::BodyDecodes() - before, kRecords);
  EXPECT_EQ(observed, kRecords);
  EXPECT_EQ(observed_marked, 0u);
  std::vector<QueuedBatch> got = Take(sink, kRecords);
  ASSERT_EQ(got.size(), kRecords);
  for (size_t r = 0; r < got.size(); ++r) {
    const SpanBatch& b = *got[r].batch;
    ASSERT_EQ(b.span_count(), 2u);
    for (uint32_t i = 0; i < 2; ++i) {
      // Trace 1 (an error) kept, its roots naming the policy; the rest out.
      EXPECT_EQ(b.spans.metrics_only[i], r == 0 ? 0 : 1) << r;
      EXPECT_EQ(b.spans.attrs[i].end - b.spans.attrs[i].begin, r == 0 ? 1u : 0u) << r;
    }
  }
  q->StopBacklogs();
}

}  // namespace
}  // namespace spanhouse::pipeline::durable

namespace spanhouse::pipeline::durable {
namespace {

// An import's record (a columnar batch for some sinks only) reaches those
// sinks only: live, read back from a backlog through a latch's claim, and
// replayed after a restart; the latch opens once every target acked.
TEST_F(DurableQueueTest, ARequestForSomeSinksReachesThoseOnlyAndIsReplayedToThem) {
  const std::vector<std::string> targets = {"a", "c"};
  {
    Running r(dir_, {"a", "b", "c"}, 1 << 30);
    r.sink(2).Refuse(true);  // c reads it back from its backlog
    const SpanBatch request = Request(7, 4);
    std::string record;
    request.AppendColumnar(&record);
    Ticket ticket;
    ASSERT_TRUE(r.q->Append(1, codec::BodyFormat::kColumnar, record, &ticket, targets).ok());
    const auto latch = sink::TicketLatch::Create(std::move(ticket));
    auto batch = std::make_unique<SpanBatch>();
    batch->Append(request);
    const size_t bytes = batch->MemoryBytes();
    ASSERT_TRUE(r.budget.TryReserve(bytes));
    ASSERT_TRUE(r.q->DeliverTo(targets, std::move(batch), Reservation(&r.budget, bytes),
                               latch->Take(), bytes, 4)
                    .ok());
    std::vector<QueuedBatch> got_a = Take(r.sink(0), 1);
    ASSERT_EQ(got_a.size(), 1u);
    EXPECT_EQ(SpanIds(got_a[0]).size(), 4u);
    EXPECT_FALSE(r.sink(1).Pop(200ms).has_value());  // not b's
    EXPECT_FALSE(latch->WaitUntil(std::chrono::steady_clock::now()));
    got_a[0].ticket.Ack();
    EXPECT_FALSE(latch->WaitUntil(std::chrono::steady_clock::now() + 50ms));  // c has not
    r.sink(2).Refuse(false);
    std::vector<QueuedBatch> got_c = Take(r.sink(2), 1);
    ASSERT_EQ(got_c.size(), 1u);
    EXPECT_EQ(SpanIds(got_c[0]), SpanIds(got_a[0]));
    // Not acked by c: kept for the next start.
    EXPECT_FALSE(latch->WaitUntil(std::chrono::steady_clock::now() + 50ms));
    got_c.clear();  // dropped unacked
    // Appended for sinks none of which is configured: refused.
    Ticket other;
    ASSERT_TRUE(r.q->Append(2, codec::BodyFormat::kColumnar, record, &other, {"x"}).ok());
    EXPECT_EQ(r.q->DeliverTo({"x"}, nullptr, Reservation(), std::move(other), bytes, 4).code(),
              StatusCode::kInvalidArgument);
  }
  // Restarted: the record is still there (c never acked), replayed to its
  // sinks (a too: a sink that seals no block is handed what is in the log
  // again), never to b; the record for "x" goes to none of them.
  Running again(dir_, {"a", "b", "c"}, 1 << 30);
  for (size_t k : {0u, 2u}) {
    std::vector<QueuedBatch> replayed = Take(again.sink(k), 1);
    ASSERT_EQ(replayed.size(), 1u) << k;
    EXPECT_EQ(SpanIds(replayed[0]).size(), 4u);
    EXPECT_FALSE(again.sink(k).Pop(200ms).has_value());
  }
  EXPECT_FALSE(again.sink(1).Pop(200ms).has_value());
}

}  // namespace
}  // namespace spanhouse::pipeline::durable
