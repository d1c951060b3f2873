#include "sink/sharded_queue.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "../../testdata/sample_batch.h"
#include "common/memory_budget.h"

namespace spanhouse::sink {
namespace {

using namespace std::chrono_literals;

TEST(MemoryBudget, ReservesUpToTheLimitAndReleases) {
  MemoryBudget b(100);
  EXPECT_TRUE(b.TryReserve(60));
  EXPECT_FALSE(b.TryReserve(50));
  EXPECT_TRUE(b.TryReserve(40));
  EXPECT_EQ(b.used(), 100u);
  b.Release(60);
  EXPECT_EQ(b.used(), 40u);
  b.Release(40);
  // One request larger than the whole budget still gets in when nothing else is held.
  EXPECT_TRUE(b.TryReserve(500));
  EXPECT_FALSE(b.TryReserve(1));
  b.Release(500);
}

TEST(MemoryBudget, ReservationResizesSplitsAndReleasesOnDestruction) {
  MemoryBudget b(1000);
  {
    ASSERT_TRUE(b.TryReserve(100));
    Reservation r(&b, 100);
    r.Resize(300);  // growth is not refused
    EXPECT_EQ(b.used(), 300u);
    Reservation part = r.Split(120);
    EXPECT_EQ(part.bytes(), 120u);
    EXPECT_EQ(r.bytes(), 180u);
    EXPECT_EQ(b.used(), 300u);
    Reservation moved = std::move(part);
    EXPECT_EQ(part.bytes(), 0u);  // NOLINT(bugprone-use-after-move): checking the move
    moved.Reset();
    EXPECT_EQ(b.used(), 180u);
  }
  EXPECT_EQ(b.used(), 0u);
}

TEST(MemoryBudget, ConcurrentReserveNeverExceedsTheLimit) {
  MemoryBudget b(1000);
  std::atomic<bool> over{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (b.TryReserve(10)) {
          if (b.used() > 1000) over = true;
          b.Release(10);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_FALSE(over.load());
  EXPECT_EQ(b.used(), 0u);
}

TEST(ShardedQueue, ShardOfIsStableAndSpreads) {
  std::vector<size_t> counts(4);
  for (uint8_t i = 0; i < 200; ++i) {
    TraceId id = testdata::MakeTraceId(i);
    size_t s = ShardOf(id, 4);
    EXPECT_EQ(s, ShardOf(id, 4));
    ASSERT_LT(s, 4u);
    counts[s]++;
  }
  for (size_t c : counts) EXPECT_GT(c, 20u);
  EXPECT_EQ(ShardOf(testdata::MakeTraceId(1), 1), 0u);
}

TEST(ShardedQueue, SplitsByTraceKeepingEverySpanAndSharingTheReservation) {
  MemoryBudget budget(1u << 30);
  ShardedQueue q(3, 1u << 30);
  SpanBatch in = testdata::SampleBatch(12);
  ASSERT_TRUE(budget.TryReserve(9000));
  QueuedBatch item{.batch = std::make_unique<SpanBatch>(in),
                   .reservation = Reservation(&budget, 9000)};
  ASSERT_TRUE(q.Push(item).ok());
  q.Close();
  size_t spans = 0;
  size_t reserved = 0;
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t s = 0; s < q.shards(); ++s) {
    while (auto item = q.shard(s).Pop(0ms)) {
      const SpanBatch& b = *item->batch;
      reserved += item->reservation.bytes();
      for (uint32_t i = 0; i < b.span_count(); ++i) {
        EXPECT_EQ(ShardOf(b.spans.trace_id[i], 3), s) << "span in the wrong shard";
        seen.emplace(ToHex(b.spans.trace_id[i]), ToHex(b.spans.span_id[i]));
        ++spans;
      }
      // A part carries the resources, attributes, events and links of its spans.
      SpanBatch expect;
      std::vector<uint32_t> idx;
      for (uint32_t i = 0; i < in.span_count(); ++i) {
        if (ShardOf(in.spans.trace_id[i], 3) == s) idx.push_back(i);
      }
      expect.AppendSpans(in, idx.data(), idx.size());
      std::string why;
      EXPECT_TRUE(expect.LogicallyEquals(b, &why)) << why;
    }
  }
  EXPECT_EQ(spans, in.span_count());
  EXPECT_EQ(seen.size(), in.span_count());
  EXPECT_EQ(reserved, 9000u);
}

TEST(ShardedQueue, ManyProducersOneConsumerPerShard) {
  MemoryBudget budget(1u << 30);
  ShardedQueue q(2, 1u << 30);
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 300;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        SpanBatch b = testdata::SampleBatch(1, 1700000000000000000ull + (p * kPerProducer + i));
        // Unique trace and span ids per batch.
        for (uint32_t k = 0; k < b.span_count(); ++k) {
          b.spans.trace_id[k][0] = static_cast<uint8_t>(p);
          b.spans.trace_id[k][1] = static_cast<uint8_t>(i);
          b.spans.trace_id[k][2] = static_cast<uint8_t>(i >> 8);
          b.spans.span_id[k][0] = static_cast<uint8_t>(p);
          b.spans.span_id[k][1] = static_cast<uint8_t>(i);
          b.spans.span_id[k][2] = static_cast<uint8_t>(i >> 8);
          b.spans.span_id[k][3] = static_cast<uint8_t>(k);
        }
        EXPECT_TRUE(budget.TryReserve(10));
        QueuedBatch item{.batch = std::make_unique<SpanBatch>(std::move(b)),
                         .reservation = Reservation(&budget, 10)};
        EXPECT_TRUE(q.Push(item).ok());
      }
    });
  }
  std::vector<std::set<std::string>> got(q.shards());
  std::vector<std::thread> consumers;
  for (size_t s = 0; s < q.shards(); ++s) {
    consumers.emplace_back([&, s] {
      while (true) {
        auto item = q.shard(s).Pop(50ms);
        if (!item) {
          if (q.shard(s).closed_and_empty()) return;
          continue;
        }
        for (uint32_t k = 0; k < item->batch->span_count(); ++k) {
          got[s].insert(ToHex(item->batch->spans.span_id[k]));
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  q.Close();
  for (auto& t : consumers) t.join();
  size_t total = 0;
  for (auto& g : got) total += g.size();
  EXPECT_EQ(total, static_cast<size_t>(kProducers * kPerProducer * 3));
  EXPECT_EQ(budget.used(), 0u);  // every reservation released with its batch
}

}  // namespace
}  // namespace spanhouse::sink
