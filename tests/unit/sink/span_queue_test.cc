// Tests for the byte-bounded SpanQueue between receivers and the writer:
// order, byte accounting, the full / closed answers, the ownership contract
// of Push, and a multi-producer stress run that checks every batch
// arrives exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/memory_budget.h"
#include "model/span_batch.h"
#include "sink/span_queue.h"

namespace spanhouse::sink {
namespace {

using std::chrono::milliseconds;

// A batch of one span whose trace id carries `tag` and whose name has
// `payload` bytes, so batches are told apart and sized at will.
std::unique_ptr<SpanBatch> MakeBatch(uint64_t tag, size_t payload = 16) {
  auto b = std::make_unique<SpanBatch>();
  uint32_t r = b->AddResource();
  uint32_t s = b->AddScope();
  uint32_t sp = b->AddSpan(r, s);
  for (int i = 0; i < 8; ++i) b->spans.trace_id[sp][i] = static_cast<uint8_t>(tag >> (8 * i));
  b->spans.name[sp] = b->AddString(std::string(payload, 'x'));
  return b;
}

uint64_t TagOf(const SpanBatch& b) {
  uint64_t tag = 0;
  for (int i = 0; i < 8; ++i) tag |= static_cast<uint64_t>(b.spans.trace_id[0][i]) << (8 * i);
  return tag;
}

// Pushes `b` (with `res`, if given); refused, both stay the caller's.
StatusCode TryPush(SpanQueue& q, std::unique_ptr<SpanBatch>& b, Reservation* res = nullptr) {
  QueuedBatch item;
  item.batch = std::move(b);
  if (res != nullptr) item.reservation = std::move(*res);
  const Status st = q.Push(item);
  if (!st.ok()) {
    b = std::move(item.batch);
    if (res != nullptr) *res = std::move(item.reservation);
  }
  return st.code();
}

TEST(SpanQueue, PopsInFifoOrder) {
  SpanQueue q(1 << 20);
  for (uint64_t i = 0; i < 10; ++i) {
    auto b = MakeBatch(i);
    ASSERT_EQ(TryPush(q, b), StatusCode::kOk);
  }
  for (uint64_t i = 0; i < 10; ++i) {
    std::optional<QueuedBatch> got = q.Pop(milliseconds(100));
    ASSERT_TRUE(got.has_value()) << i;
    ASSERT_NE(got->batch, nullptr);
    EXPECT_EQ(TagOf(*got->batch), i);
  }
  EXPECT_FALSE(q.Pop(milliseconds(1)).has_value());
}

TEST(SpanQueue, TryPushTakesTheBatchOnSuccess) {
  SpanQueue q(1 << 20);
  auto b = MakeBatch(7);
  SpanBatch* raw = b.get();
  ASSERT_EQ(TryPush(q, b), StatusCode::kOk);
  EXPECT_EQ(b, nullptr);
  auto got = q.Pop(milliseconds(100));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->batch.get(), raw);
}

TEST(SpanQueue, ByteAccountingFollowsMemoryBytes) {
  SpanQueue q(1 << 20);
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_EQ(q.max_bytes(), 1u << 20);
  auto a = MakeBatch(1, 100);
  auto b = MakeBatch(2, 5000);
  const size_t a_bytes = a->MemoryBytes();
  const size_t b_bytes = b->MemoryBytes();
  ASSERT_GT(a_bytes, 100u);
  ASSERT_GT(b_bytes, 5000u);

  ASSERT_EQ(TryPush(q, a), StatusCode::kOk);
  EXPECT_EQ(q.bytes(), a_bytes);
  ASSERT_EQ(TryPush(q, b), StatusCode::kOk);
  EXPECT_EQ(q.bytes(), a_bytes + b_bytes);

  auto got = q.Pop(milliseconds(100));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->bytes, a_bytes);
  EXPECT_EQ(got->bytes, got->batch->MemoryBytes());
  EXPECT_EQ(q.bytes(), b_bytes);

  got = q.Pop(milliseconds(100));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->bytes, b_bytes);
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(SpanQueue, FullWhenOverMaxBytesWhileNotEmpty) {
  auto a = MakeBatch(1, 1000);
  auto b = MakeBatch(2, 1000);
  const size_t a_bytes = a->MemoryBytes();
  const size_t b_bytes = b->MemoryBytes();

  // One byte short of room for both.
  SpanQueue q(a_bytes + b_bytes - 1);
  ASSERT_EQ(TryPush(q, a), StatusCode::kOk);
  EXPECT_EQ(TryPush(q, b), StatusCode::kResourceExhausted);
  EXPECT_EQ(q.bytes(), a_bytes);

  // Exactly room for both.
  SpanQueue exact(a_bytes + b_bytes);
  auto a2 = MakeBatch(1, 1000);
  auto b2 = MakeBatch(2, 1000);
  ASSERT_EQ(a2->MemoryBytes(), a_bytes);
  ASSERT_EQ(b2->MemoryBytes(), b_bytes);
  EXPECT_EQ(TryPush(exact, a2), StatusCode::kOk);
  EXPECT_EQ(TryPush(exact, b2), StatusCode::kOk);
  EXPECT_EQ(exact.bytes(), exact.max_bytes());
}

TEST(SpanQueue, FullLeavesTheCallersBatchIntact) {
  auto a = MakeBatch(1, 1000);
  SpanQueue q(a->MemoryBytes());
  ASSERT_EQ(TryPush(q, a), StatusCode::kOk);

  auto b = MakeBatch(42, 300);
  SpanBatch* raw = b.get();
  const size_t b_bytes = b->MemoryBytes();
  ASSERT_EQ(TryPush(q, b), StatusCode::kResourceExhausted);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b.get(), raw);
  EXPECT_EQ(b->span_count(), 1u);
  EXPECT_EQ(TagOf(*b), 42u);
  EXPECT_EQ(b->Str(b->spans.name[0]), std::string(300, 'x'));
  EXPECT_EQ(b->MemoryBytes(), b_bytes);

  // Once the queue drains, the same batch goes in.
  ASSERT_TRUE(q.Pop(milliseconds(100)).has_value());
  EXPECT_EQ(TryPush(q, b), StatusCode::kOk);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(q.bytes(), b_bytes);
}

TEST(SpanQueue, BatchLargerThanMaxIsAcceptedIntoAnEmptyQueueOnly) {
  SpanQueue q(1024);
  auto big = MakeBatch(1, 10000);
  const size_t big_bytes = big->MemoryBytes();
  ASSERT_GT(big_bytes, q.max_bytes());
  ASSERT_EQ(TryPush(q, big), StatusCode::kOk);
  EXPECT_EQ(q.bytes(), big_bytes);

  // Now over the cap: nothing else goes in, however small.
  auto small = MakeBatch(2, 1);
  EXPECT_EQ(TryPush(q, small), StatusCode::kResourceExhausted);
  ASSERT_NE(small, nullptr);
  auto big2 = MakeBatch(3, 10000);
  EXPECT_EQ(TryPush(q, big2), StatusCode::kResourceExhausted);

  auto got = q.Pop(milliseconds(100));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(TagOf(*got->batch), 1u);
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_EQ(TryPush(q, big2), StatusCode::kOk);
}

TEST(SpanQueue, CloseRejectsPushesAndDrainsWhatIsLeft) {
  SpanQueue q(1 << 20);
  for (uint64_t i = 0; i < 3; ++i) {
    auto b = MakeBatch(i);
    ASSERT_EQ(TryPush(q, b), StatusCode::kOk);
  }
  EXPECT_FALSE(q.closed_and_empty());
  q.Close();
  EXPECT_FALSE(q.closed_and_empty());

  auto late = MakeBatch(99);
  EXPECT_EQ(TryPush(q, late), StatusCode::kUnavailable);
  ASSERT_NE(late, nullptr);  // not taken
  EXPECT_EQ(TagOf(*late), 99u);

  for (uint64_t i = 0; i < 3; ++i) {
    auto got = q.Pop(milliseconds(100));
    ASSERT_TRUE(got.has_value()) << i;
    EXPECT_EQ(TagOf(*got->batch), i);
  }
  EXPECT_TRUE(q.closed_and_empty());
  EXPECT_EQ(q.bytes(), 0u);
  // Closed and empty: Pop answers at once, empty, whatever the timeout.
  EXPECT_FALSE(q.Pop(milliseconds(60000)).has_value());
  EXPECT_TRUE(q.closed_and_empty());
}

TEST(SpanQueue, ClosedEvenWhenFull) {
  auto a = MakeBatch(1, 1000);
  SpanQueue q(a->MemoryBytes());
  ASSERT_EQ(TryPush(q, a), StatusCode::kOk);
  q.Close();
  auto b = MakeBatch(2, 1000);
  EXPECT_EQ(TryPush(q, b), StatusCode::kUnavailable);
}

TEST(SpanQueue, CloseOnAnEmptyQueue) {
  SpanQueue q(1 << 20);
  q.Close();
  q.Close();  // idempotent
  EXPECT_TRUE(q.closed_and_empty());
  EXPECT_FALSE(q.Pop(milliseconds(60000)).has_value());
}

TEST(SpanQueue, PopTimesOutEmptyOnAnOpenQueue) {
  SpanQueue q(1 << 20);
  EXPECT_FALSE(q.Pop(milliseconds(20)).has_value());
  EXPECT_FALSE(q.Pop(milliseconds(0)).has_value());
  EXPECT_FALSE(q.closed_and_empty());
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(SpanQueue, WaitingPopIsWokenByAPush) {
  SpanQueue q(1 << 20);
  std::optional<QueuedBatch> got;
  std::thread consumer([&] { got = q.Pop(milliseconds(60000)); });
  std::this_thread::sleep_for(milliseconds(20));
  auto b = MakeBatch(5);
  ASSERT_EQ(TryPush(q, b), StatusCode::kOk);
  consumer.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(TagOf(*got->batch), 5u);
}

TEST(SpanQueue, WaitingPopIsWokenByClose) {
  SpanQueue q(1 << 20);
  std::optional<QueuedBatch> got;
  bool closed_and_empty = false;
  std::thread consumer([&] {
    got = q.Pop(milliseconds(60000));
    closed_and_empty = q.closed_and_empty();
  });
  std::this_thread::sleep_for(milliseconds(20));
  q.Close();
  consumer.join();
  EXPECT_FALSE(got.has_value());
  EXPECT_TRUE(closed_and_empty);
}

TEST(SpanQueue, ReservationTravelsWithTheBatchOnlyOnSuccess) {
  MemoryBudget budget(1 << 20);
  auto a = MakeBatch(1, 1000);
  SpanQueue q(a->MemoryBytes());

  ASSERT_TRUE(budget.TryReserve(100));
  Reservation ra(&budget, 100);
  ASSERT_EQ(TryPush(q, a, &ra), StatusCode::kOk);
  EXPECT_EQ(ra.bytes(), 0u);  // moved into the queue
  EXPECT_EQ(budget.used(), 100u);

  ASSERT_TRUE(budget.TryReserve(50));
  Reservation rb(&budget, 50);
  auto b = MakeBatch(2, 1000);
  ASSERT_EQ(TryPush(q, b, &rb), StatusCode::kResourceExhausted);
  EXPECT_EQ(rb.bytes(), 50u);  // still the caller's
  EXPECT_EQ(budget.used(), 150u);

  {
    auto got = q.Pop(milliseconds(100));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->reservation.bytes(), 100u);
    EXPECT_EQ(budget.used(), 150u);  // held until the writer drops the batch
  }
  EXPECT_EQ(budget.used(), 50u);

  q.Close();
  ASSERT_EQ(TryPush(q, b, &rb), StatusCode::kUnavailable);
  EXPECT_EQ(rb.bytes(), 50u);
  rb.Reset();
  EXPECT_EQ(budget.used(), 0u);
}

TEST(SpanQueue, StressFourProducersOneConsumerEveryBatchOnce) {
  constexpr int kProducers = 4;
  constexpr uint64_t kPerProducer = 5000;  // 20k batches in all
  // Room for a few dozen small batches, so producers also meet kFull.
  const size_t one = MakeBatch(0)->MemoryBytes();
  SpanQueue q(one * 32);

  std::atomic<uint64_t> full_answers{0};
  std::atomic<bool> give_up{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer && !give_up; ++i) {
        auto b = MakeBatch(static_cast<uint64_t>(p) << 32 | i);
        for (;;) {
          StatusCode r = TryPush(q, b);
          if (r == StatusCode::kOk) break;
          if (r == StatusCode::kUnavailable || give_up) return;
          ASSERT_NE(b, nullptr);
          full_answers++;
          std::this_thread::yield();
        }
      }
    });
  }

  std::vector<std::vector<uint8_t>> seen(kProducers, std::vector<uint8_t>(kPerProducer, 0));
  std::vector<int64_t> last(kProducers, -1);
  uint64_t received = 0;
  uint64_t duplicates = 0;
  uint64_t out_of_order = 0;
  uint64_t bad_tags = 0;
  // A generous bound so a lost batch fails the test instead of hanging it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (received < kProducers * kPerProducer) {
    if (std::chrono::steady_clock::now() > deadline) break;
    std::optional<QueuedBatch> got = q.Pop(milliseconds(100));
    if (!got) continue;
    ++received;
    const uint64_t tag = TagOf(*got->batch);
    const uint64_t p = tag >> 32;
    const uint64_t i = tag & 0xffffffffu;
    if (p >= kProducers || i >= kPerProducer) {
      ++bad_tags;
      continue;
    }
    if (seen[p][i]++ != 0) ++duplicates;
    // One queue, so each producer's batches keep their order.
    if (static_cast<int64_t>(i) <= last[p]) ++out_of_order;
    last[p] = static_cast<int64_t>(i);
  }
  give_up = true;
  q.Close();
  for (auto& t : producers) t.join();

  EXPECT_EQ(received, kProducers * kPerProducer);
  EXPECT_EQ(duplicates, 0u);
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(bad_tags, 0u);
  uint64_t missing = 0;
  for (const auto& v : seen)
    for (uint8_t n : v) missing += n == 0;
  EXPECT_EQ(missing, 0u);
  EXPECT_FALSE(q.Pop(milliseconds(10)).has_value());
  EXPECT_TRUE(q.closed_and_empty());
  EXPECT_EQ(q.bytes(), 0u);
  // Informational: how often the bound pushed back.
  RecordProperty("full_answers", std::to_string(full_answers.load()));
}

}  // namespace
}  // namespace spanhouse::sink
