// The writer's batching, partitioning, retries and memory release, without
// an engine: a null sink (and the fault switch) stands in for the insert.
#include "storage/clickhouse/embedded_writer.h"

#include <gtest/gtest.h>

#include <thread>

#include "../../testdata/sample_batch.h"
#include "pipeline/memory_budget.h"

namespace spanhouse::storage {
namespace {

using namespace std::chrono_literals;

WriterOptions NullSink() {
  WriterOptions o;
  o.null_sink = true;
  o.spool_dir = ::testing::TempDir() + "/writer-test";
  o.max_backoff = 10ms;
  o.insert_rows = 0;  // every encoded block an insert of its own
  return o;
}

Capabilities Caps() {
  return Capabilities::FromVersion("26.5");
}

template <typename F>
bool WaitFor(F&& pred) {
  for (int i = 0; i < 3000; ++i) {  // up to ~30 s; never a timing assertion
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

void Push(pipeline::SpanQueue& q, pipeline::MemoryBudget& budget, SpanBatch b, size_t bytes) {
  ASSERT_TRUE(budget.TryReserve(bytes));
  pipeline::Reservation r(&budget, bytes);
  auto p = std::make_unique<SpanBatch>(std::move(b));
  ASSERT_EQ(q.TryPush(p, r), pipeline::SpanQueue::PushResult::kOk);
}

TEST(EmbeddedWriter, ManyProducersEveryRowWrittenOnceAndMemoryReleased) {
  pipeline::MemoryBudget budget(1ull << 34);
  pipeline::SpanQueue q(1ull << 34);
  WriterOptions o = NullSink();
  o.max_rows = 1000;
  o.max_age = 20ms;
  EmbeddedWriter w(nullptr, Caps(), q, o);
  w.Start();
  constexpr int kProducers = 4;
  constexpr int kBatches = 150;
  std::vector<std::thread> ts;
  for (int p = 0; p < kProducers; ++p) {
    ts.emplace_back([&] {
      for (int i = 0; i < kBatches; ++i) Push(q, budget, testdata::SampleBatch(2), 100);
    });
  }
  for (auto& t : ts) t.join();
  q.Close();
  w.Join();
  EXPECT_EQ(w.stats().rows_written.load(), static_cast<uint64_t>(kProducers * kBatches * 6));
  EXPECT_EQ(w.stats().pending_rows.load(), 0u);
  EXPECT_EQ(w.stats().rows_lost.load(), 0u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(EmbeddedWriter, CutsABatchAtMaxRows) {
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanQueue q(1ull << 30);
  WriterOptions o = NullSink();
  o.max_rows = 6;
  o.max_age = 1h;
  EmbeddedWriter w(nullptr, Caps(), q, o);
  w.Start();
  for (int i = 0; i < 5; ++i) Push(q, budget, testdata::SampleBatch(2), 10);
  // Each batch reaches max_rows on its own: one insert each, without waiting for age.
  EXPECT_TRUE(WaitFor([&] { return w.stats().rows_written.load() == 30; }));
  EXPECT_EQ(w.stats().inserts.load(), 5u);
  // Each block an insert alone: sorted by the table key, so the engine
  // need not sort it.
  EXPECT_EQ(w.stats().blocks_spooled.load(), 5u);
  EXPECT_EQ(w.stats().blocks_sorted.load(), 5u);
  q.Close();
  w.Join();
}

TEST(EmbeddedWriter, CutsABatchAtMaxAge) {
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanQueue q(1ull << 30);
  WriterOptions o = NullSink();
  o.max_rows = 1000000;
  o.max_age = 50ms;
  EmbeddedWriter w(nullptr, Caps(), q, o);
  w.Start();
  Push(q, budget, testdata::SampleBatch(1), 10);
  // The queue stays open: only the age can flush it.
  EXPECT_TRUE(WaitFor([&] { return w.stats().rows_written.load() == 3; }));
  EXPECT_TRUE(WaitFor([&] { return budget.used() == 0; }));
  q.Close();
  w.Join();
}

TEST(EmbeddedWriter, OneInsertPerDayPartition) {
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanQueue q(1ull << 30);
  WriterOptions o = NullSink();
  o.max_age = 1h;
  EmbeddedWriter w(nullptr, Caps(), q, o);
  w.Start();
  // 6 spans 1 ms apart, starting 3 ms before midnight: 3 on each day.
  const uint64_t midnight = 1700006400ull * 1000000000ull;  // 2023-11-15 00:00:00 UTC
  Push(q, budget, testdata::SampleBatch(2, midnight - 3000000), 1000);
  q.Close();
  w.Join();
  EXPECT_EQ(w.stats().rows_written.load(), 6u);
  EXPECT_EQ(w.stats().inserts.load(), 2u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(EmbeddedWriter, FailingInsertsAreRetriedAndStopTheQueueFromDraining) {
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanQueue q(1ull << 30);
  SinkFaults faults;
  faults.fail_inserts = true;
  WriterOptions o = NullSink();
  o.max_rows = 3;  // a batch of 3 spans is a block (and an insert) of its own
  o.max_age = 1ms;
  EmbeddedWriter w(nullptr, Caps(), q, o, &faults);
  w.Start();
  // The first is being inserted (and fails), the second waits for its
  // turn, the third is encoded and waits to be handed over: the fourth
  // stays queued, its memory reserved.
  for (int i = 0; i < 4; ++i) Push(q, budget, testdata::SampleBatch(1), 500);
  ASSERT_TRUE(WaitFor([&] { return w.stats().insert_errors.load() >= 3; }));
  // Back-pressure: the fourth is not drained while inserts fail (and it
  // stays so while they keep failing).
  ASSERT_TRUE(WaitFor([&] { return budget.used() == 500u; }));
  const uint64_t errors = w.stats().insert_errors.load();
  ASSERT_TRUE(WaitFor([&] { return w.stats().insert_errors.load() >= errors + 3; }));
  EXPECT_EQ(budget.used(), 500u);
  EXPECT_EQ(w.stats().rows_written.load(), 0u);
  faults.fail_inserts = false;
  EXPECT_TRUE(WaitFor([&] { return w.stats().rows_written.load() == 12; }));
  EXPECT_TRUE(WaitFor([&] { return budget.used() == 0; }));
  q.Close();
  w.Join();
  EXPECT_EQ(w.stats().rows_lost.load(), 0u);
}

TEST(EmbeddedWriter, BlocksOfADayAreInsertedTogetherUpToInsertRows) {
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanQueue q(1ull << 30);
  WriterOptions o = NullSink();
  o.max_rows = 6;
  o.insert_rows = 18;
  o.max_age = 1h;
  EmbeddedWriter w(nullptr, Caps(), q, o);
  w.Start();
  Push(q, budget, testdata::SampleBatch(2), 100);
  // Encoded (a block of 6 rows), its memory released, but not inserted:
  // the insert waits for 18 rows.
  EXPECT_TRUE(WaitFor([&] { return budget.used() == 0; }));
  EXPECT_EQ(w.stats().inserts.load(), 0u);
  for (int i = 0; i < 5; ++i) Push(q, budget, testdata::SampleBatch(2), 100);
  // Six blocks of 6 rows: two inserts of 18, without waiting for age.
  EXPECT_TRUE(WaitFor([&] { return w.stats().rows_written.load() == 36; }));
  EXPECT_EQ(w.stats().inserts.load(), 2u);
  // Blocks of an insert of several stay in arrival order: the engine sorts
  // them together, sorted runs or not.
  EXPECT_EQ(w.stats().blocks_spooled.load(), 6u);
  EXPECT_EQ(w.stats().blocks_sorted.load(), 0u);
  // A last block, inserted alone when the queue closes.
  Push(q, budget, testdata::SampleBatch(2), 100);
  q.Close();
  w.Join();
  EXPECT_EQ(w.stats().rows_written.load(), 42u);
  EXPECT_EQ(w.stats().inserts.load(), 3u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(EmbeddedWriter, AnInsertIsDueWhenItsOldestSpanIsMaxAgeOld) {
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanQueue q(1ull << 30);
  WriterOptions o = NullSink();
  o.max_rows = 6;
  o.insert_rows = 1000000;
  o.max_age = 50ms;
  EmbeddedWriter w(nullptr, Caps(), q, o);
  w.Start();
  for (int i = 0; i < 3; ++i) Push(q, budget, testdata::SampleBatch(2), 100);
  // The queue stays open and insert_rows is never reached: only the age
  // can bring the blocks to the engine.
  EXPECT_TRUE(WaitFor([&] { return w.stats().rows_written.load() == 18; }));
  EXPECT_EQ(budget.used(), 0u);
  q.Close();
  w.Join();
}

TEST(EmbeddedWriter, AtShutdownGivesUpAfterItsRetriesAndCountsTheLoss) {
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanQueue q(1ull << 30);
  SinkFaults faults;
  faults.fail_inserts = true;
  WriterOptions o = NullSink();
  o.max_age = 1h;
  o.shutdown_retries = 2;
  EmbeddedWriter w(nullptr, Caps(), q, o, &faults);
  w.Start();
  Push(q, budget, testdata::SampleBatch(1), 100);
  q.Close();
  w.Join();
  EXPECT_EQ(w.stats().rows_lost.load(), 3u);
  EXPECT_EQ(w.stats().rows_written.load(), 0u);
  EXPECT_EQ(w.stats().insert_errors.load(), 2u);
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace spanhouse::storage
