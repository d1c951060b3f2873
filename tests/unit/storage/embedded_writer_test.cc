// The writer's batching, partitioning, retries and memory release, in a
// ClickHouse sink as serve makes one, without an engine: a fake connection
// (and the fault switch) stands in for it.
#include "storage/clickhouse/embedded_writer.h"

#include "../../testdata/one_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../testdata/sample_batch.h"
#include "common/memory_budget.h"
#include "sink/block.h"
#include "storage/clickhouse/native.h"

namespace spanhouse::storage {
namespace {

using namespace std::chrono_literals;

// Takes every statement and stores nothing; says which tables it was asked
// to insert into, and checks that each insert's spool files are there.
class FakeEngine final : public SqlConnection {
 public:
  Status Run(std::string_view sql, std::string_view, QueryResult*,
             const std::vector<QueryParam>& params) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (sql.find("INSERT INTO spanhouse.spans") != std::string_view::npos) {
      ++span_inserts_;
      if (params.empty() || params[0].first != "path") missing_files_++;
    }
    return Status::Ok();
  }
  bool local_files() const override { return true; }
  void Close() override {}
  int span_inserts() {
    std::lock_guard<std::mutex> lock(mu_);
    return span_inserts_;
  }
  int missing_files() {
    std::lock_guard<std::mutex> lock(mu_);
    return missing_files_;
  }

 private:
  std::mutex mu_;
  int span_inserts_ = 0;
  int missing_files_ = 0;
};

WriterOptions NullSink() {
  WriterOptions o;
  // One directory per test process: ctest runs these tests in parallel, and
  // every writer names its spool files alike.
  o.spool_dir = ::testing::TempDir() + "/writer-test-" + std::to_string(getpid());
  o.max_backoff = 10ms;
  o.insert_rows = 0;  // every encoded block an insert of its own
  return o;
}

// A null sink cutting blocks at `max_rows` and inserting `insert_rows` at a
// time, or when the oldest span is `max_age` old.
WriterOptions Batching(size_t max_rows, size_t insert_rows, std::chrono::milliseconds max_age) {
  WriterOptions o = NullSink();
  o.max_rows = max_rows;
  o.insert_rows = insert_rows;
  o.max_age = max_age;
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

using testdata::OneWriter;

void Push(OneWriter& w, MemoryBudget& budget, SpanBatch b, size_t bytes) {
  ASSERT_TRUE(budget.TryReserve(bytes));
  Reservation r(&budget, bytes);
  sink::QueuedBatch item;
  item.batch = std::make_unique<SpanBatch>(std::move(b));
  item.reservation = std::move(r);
  ASSERT_TRUE(w.Push(item).ok());
}

// A started writer over a fake engine, a queue and a memory budget of its own.
struct Rig {
  explicit Rig(WriterOptions o) : w(&engine, Caps(), std::move(o)) {}
  ~Rig() { Stop(); }  // a failed assertion returns early: the writer still stops
  // `batches` batches of `traces` traces (3 spans each), each reserving `bytes`.
  void PushBatches(int batches, size_t traces = 2, size_t bytes = 100) {
    for (int i = 0; i < batches; ++i) Push(w, budget, testdata::SampleBatch(traces), bytes);
  }
  void Stop() { w.Close(); }
  MemoryBudget budget{1ull << 30};
  FakeEngine engine;
  OneWriter w;
};

TEST(EmbeddedWriter, ManyProducersEveryRowWrittenOnceAndMemoryReleased) {
  MemoryBudget budget(1ull << 34);
  WriterOptions o = NullSink();
  o.max_rows = 1000;
  o.max_age = 20ms;
  FakeEngine engine;
  OneWriter w(&engine, Caps(), o);
  constexpr int kProducers = 4;
  constexpr int kBatches = 150;
  std::vector<std::thread> ts;
  for (int p = 0; p < kProducers; ++p) {
    ts.emplace_back([&] {
      for (int i = 0; i < kBatches; ++i) Push(w, budget, testdata::SampleBatch(2), 100);
    });
  }
  for (auto& t : ts) t.join();
  w.Close();
  EXPECT_EQ(w.stats().rows_written.load(), static_cast<uint64_t>(kProducers * kBatches * 6));
  EXPECT_EQ(w.stats().pending_rows.load(), 0u);
  EXPECT_EQ(w.stats().rows_lost.load(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(static_cast<uint64_t>(engine.span_inserts()), w.stats().writes.load());
  EXPECT_EQ(engine.missing_files(), 0);
}

// A server over the network: the rows travel as the insert's body, the
// settings beside it; nothing is read from files.
class FakeServer final : public SqlConnection {
 public:
  Status Run(std::string_view sql, std::string_view, QueryResult*,
             const std::vector<QueryParam>&) override {
    std::lock_guard<std::mutex> lock(mu_);
    statements.emplace_back(sql);
    return Status::Ok();
  }
  Status Insert(std::string_view insert, std::string data,
                const std::vector<QueryParam>& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    inserts.push_back({std::string(insert), std::move(data), settings});
    return Status::Ok();
  }
  void Close() override {}
  struct Call {
    std::string insert;
    std::string body;
    std::vector<QueryParam> settings;
  };
  std::mutex mu_;
  std::vector<std::string> statements;
  std::vector<Call> inserts;
};

TEST(EmbeddedWriter, ARemoteInsertCarriesItsBlocksAsTheBody) {
  MemoryBudget budget(1ull << 30);
  FakeServer server;
  OneWriter w(&server, Capabilities::FromVersion("18.16.1"), Batching(6, 12, 1h));
  for (int i = 0; i < 4; ++i) Push(w, budget, testdata::SampleBatch(2), 100);
  w.Close();
  EXPECT_EQ(w.stats().rows_written.load(), 24u);
  EXPECT_TRUE(server.statements.empty());  // no file() reads
  size_t rows = 0;
  size_t span_inserts = 0;
  for (const auto& call : server.inserts) {
    EXPECT_FALSE(call.body.empty());
    if (call.insert != "INSERT INTO spanhouse.spans FORMAT Native") {
      EXPECT_EQ(call.insert, "INSERT INTO spanhouse.resources FORMAT Native");
      continue;
    }
    ++span_inserts;
    for (const auto& [name, value] : call.settings) {
      // 18.16 has neither the JSON type nor deduplication tokens.
      EXPECT_NE(name, "insert_deduplication_token");
      EXPECT_NE(name, "type_json_skip_duplicated_paths");
      if (name == "min_insert_block_size_rows") rows += std::stoul(value);
    }
  }
  EXPECT_EQ(span_inserts, 2u);  // two blocks of 6 rows per insert of 12
  EXPECT_EQ(rows, 24u);
}

// The number of rows of the Native block at the start of `body`.
uint64_t BlockRows(const std::string& body, uint64_t* columns = nullptr) {
  native::Reader r(body);
  uint64_t cols = 0;
  uint64_t rows = 0;
  EXPECT_TRUE(r.Varint(&cols).ok());
  EXPECT_TRUE(r.Varint(&rows).ok());
  if (columns != nullptr) *columns = cols;
  return rows;
}

// Spans sampled out (metrics_only) are no spans rows: their narrow rows go
// to sampled_spans in the same insert cycle, one block, with the spans'
// token; the resources only their spans used are not written.
TEST(EmbeddedWriter, SpansSampledOutGoToSampledSpansWithTheSpansToken) {
  MemoryBudget budget(1ull << 30);
  FakeServer server;
  OneWriter w(&server, Caps(), Batching(6, 12, 1h));
  // A replayed block of three records: all sampled out, mixed (the "db"
  // service's spans sampled out), all kept; first read as two blocks of
  // spans.
  sink::QueuedBatch item;
  item.block = std::make_unique<sink::ReplayBlock>();
  item.block->key =
      InsertKey{0, 1, PartitionDay(testdata::SampleBatch(1).spans.start_ns[0])}.Encode();
  item.block->chunks = 2;
  item.block->sealed = {1, "sh-token-7"};
  size_t kept = 0;
  for (int k = 0; k < 3; ++k) {
    auto b = std::make_unique<SpanBatch>(testdata::SampleBatch(2));
    for (uint32_t i = 0; i < b->span_count(); ++i) {
      b->spans.metrics_only[i] = k == 0 || (k == 1 && i % 3 == 2) ? 1 : 0;
      kept += b->spans.metrics_only[i] == 0 ? 1 : 0;
    }
    item.block->parts.push_back(std::move(b));
  }
  ASSERT_TRUE(w.Push(item).ok());
  w.Close();
  EXPECT_EQ(kept, 10u);
  EXPECT_EQ(w.stats().rows_written.load(), 10u);
  EXPECT_EQ(w.stats().sampled_rows_written.load(), 8u);
  EXPECT_EQ(w.stats().pending_rows.load(), 0u);
  std::vector<std::string> tables;
  for (const auto& call : server.inserts) {
    tables.push_back(call.insert);
    std::string token;
    std::string rows;
    for (const auto& [name, value] : call.settings) {
      if (name == "insert_deduplication_token") token = value;
      if (name == "min_insert_block_size_rows") rows = value;
    }
    if (call.insert == "INSERT INTO spanhouse.resources FORMAT Native") continue;
    EXPECT_EQ(token, "sh-token-7") << call.insert;
    if (call.insert == "INSERT INTO spanhouse.sampled_spans FORMAT Native") {
      uint64_t columns = 0;
      EXPECT_EQ(BlockRows(call.body, &columns), 8u);  // one block, all of them
      EXPECT_EQ(columns, SampledColumns().size());
      EXPECT_EQ(rows, "8");
    } else {
      EXPECT_EQ(rows, "10");
    }
  }
  EXPECT_EQ(tables,
            (std::vector<std::string>{"INSERT INTO spanhouse.resources FORMAT Native",
                                      "INSERT INTO spanhouse.spans FORMAT Native",
                                      "INSERT INTO spanhouse.sampled_spans FORMAT Native"}));
}

// A batch whose spans were all sampled out writes no spans and no
// resources; one of another resource sampled out writes its spans and
// only their resource.
TEST(EmbeddedWriter, OnlyWhatIsStoredIsInserted) {
  MemoryBudget budget(1ull << 30);
  FakeServer server;
  OneWriter w(&server, Caps(), NullSink());
  SpanBatch all_out = testdata::SampleBatch(2);
  for (auto& m : all_out.spans.metrics_only) m = 1;
  Push(w, budget, std::move(all_out), 100);
  ASSERT_TRUE(WaitFor([&] { return w.stats().sampled_rows_written.load() == 6; }));
  {
    std::lock_guard<std::mutex> lock(server.mu_);
    ASSERT_EQ(server.inserts.size(), 1u);
    EXPECT_EQ(server.inserts[0].insert, "INSERT INTO spanhouse.sampled_spans FORMAT Native");
    server.inserts.clear();
  }
  // The sampled rows' memory is held until their insert is done.
  EXPECT_TRUE(WaitFor([&] { return budget.used() == 0; }));
  SpanBatch db_out = testdata::SampleBatch(2);
  for (uint32_t i = 0; i < db_out.span_count(); ++i) db_out.spans.metrics_only[i] = i % 3 == 2;
  Push(w, budget, std::move(db_out), 100);
  w.Close();
  EXPECT_EQ(w.stats().rows_written.load(), 4u);
  EXPECT_EQ(w.stats().sampled_rows_written.load(), 8u);
  ASSERT_EQ(server.inserts.size(), 3u);
  EXPECT_EQ(server.inserts[0].insert, "INSERT INTO spanhouse.resources FORMAT Native");
  EXPECT_EQ(BlockRows(server.inserts[0].body), 1u);  // "frontend" only
  EXPECT_EQ(BlockRows(server.inserts[1].body), 4u);
  EXPECT_EQ(BlockRows(server.inserts[2].body), 2u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(EmbeddedWriter, CutsABatchAtMaxRows) {
  Rig r(Batching(6, 0, 1h));
  r.PushBatches(5);
  // Each batch reaches max_rows on its own: one insert each, without waiting for age.
  EXPECT_TRUE(WaitFor([&] { return r.w.stats().rows_written.load() == 30; }));
  EXPECT_EQ(r.w.stats().writes.load(), 5u);
  // Each block an insert alone: sorted by the table key, so the engine
  // need not sort it.
  EXPECT_EQ(r.w.stats().blocks_spooled.load(), 5u);
  EXPECT_EQ(r.w.stats().blocks_sorted.load(), 5u);
  r.Stop();
}

TEST(EmbeddedWriter, CutsABatchAtMaxAge) {
  Rig r(Batching(1000000, 0, 50ms));
  r.PushBatches(1, 1);
  // The queue stays open: only the age can flush it.
  EXPECT_TRUE(WaitFor([&] { return r.w.stats().rows_written.load() == 3; }));
  EXPECT_TRUE(WaitFor([&] { return r.budget.used() == 0; }));
  r.Stop();
}

TEST(EmbeddedWriter, OneInsertPerDayPartition) {
  WriterOptions o = NullSink();
  o.max_age = 1h;
  Rig r(o);
  // 6 spans 1 ms apart, starting 3 ms before midnight: 3 on each day.
  const uint64_t midnight = 1700006400ull * 1000000000ull;  // 2023-11-15 00:00:00 UTC
  Push(r.w, r.budget, testdata::SampleBatch(2, midnight - 3000000), 1000);
  r.Stop();
  EXPECT_EQ(r.w.stats().rows_written.load(), 6u);
  EXPECT_EQ(r.w.stats().writes.load(), 2u);
  EXPECT_EQ(r.budget.used(), 0u);
}

TEST(EmbeddedWriter, FailingInsertsAreRetriedAndStopTheQueueFromDraining) {
  MemoryBudget budget(1ull << 30);
  SinkFaults faults;
  faults.fail_inserts = true;
  WriterOptions o = NullSink();
  o.max_rows = 3;  // a batch of 3 spans is a block (and an insert) of its own
  o.max_age = 1ms;
  FakeEngine engine;
  OneWriter w(&engine, Caps(), o, &faults);
  // The first is being inserted (and fails), the second waits for its
  // turn, the third is encoded and waits to be handed over: the fourth
  // stays queued, its memory reserved.
  for (int i = 0; i < 4; ++i) Push(w, budget, testdata::SampleBatch(1), 500);
  ASSERT_TRUE(WaitFor([&] { return w.stats().write_errors.load() >= 3; }));
  // Back-pressure: the fourth is not drained while inserts fail (and it
  // stays so while they keep failing).
  ASSERT_TRUE(WaitFor([&] { return budget.used() == 500u; }));
  const uint64_t errors = w.stats().write_errors.load();
  ASSERT_TRUE(WaitFor([&] { return w.stats().write_errors.load() >= errors + 3; }));
  EXPECT_EQ(budget.used(), 500u);
  EXPECT_EQ(w.stats().rows_written.load(), 0u);
  faults.fail_inserts = false;
  EXPECT_TRUE(WaitFor([&] { return w.stats().rows_written.load() == 12; }));
  EXPECT_TRUE(WaitFor([&] { return budget.used() == 0; }));
  w.Close();
  EXPECT_EQ(w.stats().rows_lost.load(), 0u);
}

TEST(EmbeddedWriter, BlocksOfADayAreInsertedTogetherUpToInsertRows) {
  Rig r(Batching(6, 18, 1h));
  r.PushBatches(1);
  // Encoded (a block of 6 rows), its memory released, but not inserted:
  // the insert waits for 18 rows.
  EXPECT_TRUE(WaitFor([&] { return r.budget.used() == 0; }));
  EXPECT_EQ(r.w.stats().writes.load(), 0u);
  r.PushBatches(5);
  // Six blocks of 6 rows: two inserts of 18, without waiting for age.
  EXPECT_TRUE(WaitFor([&] { return r.w.stats().rows_written.load() == 36; }));
  EXPECT_EQ(r.w.stats().writes.load(), 2u);
  // Blocks of an insert of several stay in arrival order: the engine sorts
  // them together, sorted runs or not.
  EXPECT_EQ(r.w.stats().blocks_spooled.load(), 6u);
  EXPECT_EQ(r.w.stats().blocks_sorted.load(), 0u);
  // A last block, inserted alone when the queue closes.
  r.PushBatches(1);
  r.Stop();
  EXPECT_EQ(r.w.stats().rows_written.load(), 42u);
  EXPECT_EQ(r.w.stats().writes.load(), 3u);
  EXPECT_EQ(r.budget.used(), 0u);
}

TEST(EmbeddedWriter, AtShutdownWhatIsLeftOfADayIsOneSortedBlock) {
  Rig r(Batching(1000000, 2000000, 1h));
  r.PushBatches(3);
  // Nothing is due (rows, bytes, age) until the queue closes: then the
  // day's spans are one block, an insert of its own, so sorted.
  r.Stop();
  EXPECT_EQ(r.w.stats().rows_written.load(), 18u);
  EXPECT_EQ(r.w.stats().writes.load(), 1u);
  EXPECT_EQ(r.w.stats().blocks_spooled.load(), 1u);
  EXPECT_EQ(r.w.stats().blocks_sorted.load(), 1u);
}

TEST(EmbeddedWriter, AnInsertIsDueWhenItsOldestSpanIsMaxAgeOld) {
  Rig r(Batching(6, 1000000, 50ms));
  r.PushBatches(3);
  // The queue stays open and insert_rows is never reached: only the age
  // can bring the blocks to the engine.
  EXPECT_TRUE(WaitFor([&] { return r.w.stats().rows_written.load() == 18; }));
  EXPECT_EQ(r.budget.used(), 0u);
  r.Stop();
}

TEST(EmbeddedWriter, AtShutdownGivesUpAfterItsRetriesAndCountsTheLoss) {
  MemoryBudget budget(1ull << 30);
  SinkFaults faults;
  faults.fail_inserts = true;
  WriterOptions o = NullSink();
  o.max_age = 1h;
  o.shutdown_retries = 2;
  FakeEngine engine;
  OneWriter w(&engine, Caps(), o, &faults);
  Push(w, budget, testdata::SampleBatch(1), 100);
  w.Close();
  EXPECT_EQ(w.stats().rows_lost.load(), 3u);
  EXPECT_EQ(w.stats().rows_written.load(), 0u);
  EXPECT_EQ(w.stats().write_errors.load(), 2u);
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace spanhouse::storage

namespace spanhouse::storage {
namespace {

TEST(InsertKey, RoundTripsAndHoldsItsShardsDayOnly) {
  const InsertKey k{1, 3, 20000};
  InsertKey d;
  ASSERT_TRUE(d.Decode(k.Encode()));
  EXPECT_EQ(d.shard, 1u);
  EXPECT_EQ(d.shards, 3u);
  EXPECT_EQ(d.day, 20000u);
  // A shard outside its shard count is not a key anyone sealed.
  EXPECT_FALSE(d.Decode(InsertKey{3, 3, 20000}.Encode()));
  EXPECT_FALSE(d.Decode(InsertKey{0, 0, 20000}.Encode()));
  EXPECT_FALSE(d.Decode("day:20000"));
  // Holds: the spans of its writer shard and its day.
  SpanBatch b = testdata::SampleBatch(50);
  const uint32_t day = PartitionDay(b.spans.start_ns[0]);
  size_t held = 0;
  for (uint32_t s = 0; s < 3; ++s) {
    for (uint32_t i = 0; i < b.span_count(); ++i) held += InsertKey{s, 3, day}.Holds(b, i);
    for (uint32_t i = 0; i < b.span_count(); ++i)
      EXPECT_FALSE((InsertKey{s, 3, day + 1}.Holds(b, i)));
  }
  EXPECT_EQ(held, b.span_count());
}

}  // namespace
}  // namespace spanhouse::storage
