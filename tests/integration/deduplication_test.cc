// Insert deduplication against the real engine: a block inserted again with
// its token (a replay after a crash) is stored once, in the spans table and
// in the tables its views feed; another token stores it again.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "codec/otlp_encode.h"
#include "engine.h"
#include "pipeline/durable/durable_queue.h"
#include "pipeline/durable/records.h"
#include "pipeline/durable/segment_log.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/embedded_sink.h"
#include "storage/clickhouse/span_extras.h"
#include "testdata/legacy_records.h"
#include "testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

// Has a writer insert `parts` (all of day `day`) as a block sealed with
// `token`, read as `chunks` spooled blocks: the way a replayed block comes,
// through the writer's queue like any item. `extras_column`: the table's
// (false: schema 7's rare columns).
void InsertBlock(std::vector<std::unique_ptr<SpanBatch>> parts, uint32_t day,
                 const Capabilities& caps, const std::string& token, uint32_t chunks = 1,
                 bool extras_column = true) {
  testdata::OneWriter writer(
      Engine::conn.get(), caps, TestWriter(), nullptr,
      // Schema 7's table (no extras) has schema 10's two id columns and
      // no attribute columns too.
      LegacyLayout{UserFieldValues::kMarked, extras_column, extras_column, extras_column});
  size_t n = 0;
  for (const auto& p : parts) n += p->span_count();
  sink::QueuedBatch item;
  item.block = std::make_unique<sink::ReplayBlock>();
  item.block->key = InsertKey{0, 1, day}.Encode();
  item.block->chunks = chunks;
  item.block->sealed = {1, token};
  item.block->parts = std::move(parts);
  ASSERT_TRUE(writer.Push(item).ok());
  writer.Close();
  EXPECT_EQ(writer.stats().rows_written.load(), n);
}

// Inserts `b` as one block with `token`, the way the replay does.
void InsertWithToken(const SpanBatch& b, const Capabilities& caps, const std::string& token,
                     bool extras_column = true) {
  std::vector<std::unique_ptr<SpanBatch>> parts;
  parts.push_back(std::make_unique<SpanBatch>(b));
  InsertBlock(std::move(parts), PartitionDay(b.spans.start_ns[0]), caps, token, 1, extras_column);
}

TEST(ChdbDeduplication, ABlockInsertedAgainWithItsTokenIsStoredOnce) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  const Status st = EnableInsertDeduplication(*Engine::conn, caps);
  ASSERT_TRUE(st.ok()) << st.message();
  // Recent spans: red_1m's TTL (7 days) drops older rows as they are inserted.
  const auto now_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  const SpanBatch b = testdata::SampleBatch(3, now_ns - 3600000000000ull);
  const size_t n = b.span_count();
  ASSERT_GT(n, 0u);

  InsertWithToken(b, caps, "sh-test-1");
  InsertWithToken(b, caps, "sh-test-1");  // the replay of a block that was stored
  const std::string once = std::to_string(n) + "\n";
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)), once);
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)), once);
  // The cascade of views too (red_1m's inserts feed red_service_1m).
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_service_1m", kDatabase)), once);

  InsertWithToken(b, caps, "sh-test-2");  // another block with the same rows
  const std::string twice = std::to_string(2 * n) + "\n";
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)), twice);
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)), twice);
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_service_1m", kDatabase)), twice);
}

// An insert of several spooled blocks (writer.insert_rows): the replay of
// its logged block forms as many blocks again, and is stored once. The
// engine's deduplication id counts the blocks an INSERT ... SELECT read: the
// same spans and token read as one block are stored again.
TEST(ChdbDeduplication, AnInsertOfSeveralSpooledBlocksReplayedIsStoredOnce) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  ASSERT_TRUE(EnableInsertDeduplication(*Engine::conn, caps).ok());
  const auto now_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  std::vector<SpanBatch> batches;
  for (int k = 0; k < 3; ++k) {
    SpanBatch b = testdata::SampleBatch(2, now_ns - 3600000000000ull + k * 1000000ull);
    for (auto& id : b.spans.trace_id) id[14] = static_cast<uint8_t>(0x40 + k);  // other traces
    batches.push_back(std::move(b));
  }
  const uint32_t day = PartitionDay(batches[0].spans.start_ns[0]);
  size_t n = 0;
  for (const auto& b : batches) n += b.span_count();
  auto replay = [&](const std::string& token, uint32_t chunks) {
    std::vector<std::unique_ptr<SpanBatch>> parts;
    for (const auto& b : batches) parts.push_back(std::make_unique<SpanBatch>(b));
    InsertBlock(std::move(parts), day, caps, token, chunks);
  };
  replay("sh-test-chunks", 3);  // the first insert: three blocks
  EXPECT_EQ(Q(fmt::format("SELECT count(), count(DISTINCT _part) FROM {}.spans", kDatabase)),
            fmt::format("{}\t1\n", n));
  replay("sh-test-chunks", 3);  // its replay
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)), fmt::format("{}\n", n));
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)), fmt::format("{}\n", n));
  replay("sh-test-chunks", 1);  // the same spans and token as one block
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)), fmt::format("{}\n", 2 * n));
}

using pipeline::durable::BlockRecord;
using pipeline::durable::DurableQueue;
using pipeline::durable::RecordKind;
using pipeline::durable::SegmentLog;
using sink::Ticket;

pipeline::durable::DurableOptions LogAt(const std::string& dir) {
  pipeline::durable::DurableOptions o;
  o.log.dir = dir;
  o.log.fsync_always = true;
  return o;
}

// Logs `b` as a request and then a block naming it, as the embedded sink
// seals one before its insert; returns the block's token. `legacy`: as
// older builds logged it (kBlock, no sink name).
std::string LogBlock(SegmentLog& log, const SpanBatch& b, bool legacy) {
  Ticket spans;
  EXPECT_TRUE(log.Append(RecordKind::kSpans, codec::EncodeOtlpProto(b), &spans).ok());
  BlockRecord rec;
  rec.sink = "chdb";
  rec.key = InsertKey{0, 1, PartitionDay(b.spans.start_ns[0])}.Encode();
  rec.lsns = {spans.lsn()};
  const std::string payload = legacy ? testdata::LegacyBlockPayload(rec, false) : rec.Encode();
  Ticket block;
  EXPECT_TRUE(
      log.Append(legacy ? RecordKind::kBlock : RecordKind::kKeyedBlock, payload, &block, true)
          .ok());
  EXPECT_TRUE(log.WaitDurable(block.lsn(), std::chrono::seconds(10)));
  return pipeline::durable::DedupToken(log.epoch(), block.lsn());
}

// The embedded sink as serve makes it, over the test engine.
std::unique_ptr<sink::RuntimeSink> Sink(const Capabilities& caps) {
  EmbeddedSinkOptions o;
  o.writer = TestWriter();
  return MakeClickHouseSink(LentConnections(), caps, o);
}

// A start as serve makes it: the schema ensured (its copying upgrade
// writing the unfinished blocks into the old tables first when `fixed`),
// then the durable queue's replay to the embedded sink.
void Start(const std::string& log_dir, Capabilities* caps, bool fixed) {
  MemoryBudget budget(1ull << 30);
  std::unique_ptr<DurableQueue> queue;
  ASSERT_TRUE(DurableQueue::Open(LogAt(log_dir), budget, nullptr, &queue).ok());
  SchemaOptions opts;
  if (fixed) {
    opts.before_copy = [&](const Capabilities& c) -> Status {
      if (Status st = EnableInsertDeduplication(*Engine::conn, c); !st.ok()) return st;
      auto sink = Sink(c);
      return queue->ReplaySealedBlocks(*sink);
    };
  }
  Status st = EnsureSchema(*Engine::conn, caps, opts);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(EnableInsertDeduplication(*Engine::conn, *caps).ok());
  auto sink = Sink(*caps);
  queue->AddSink(*sink);
  ASSERT_TRUE(sink->Start().ok());
  queue->Start();
  queue->StopBacklogs();
  sink->Drain();
  EXPECT_EQ(sink->stats().rows_lost.load(), 0u);
}

// Two blocks logged under schema 4 when the process died: the first's
// insert had reached the engine (the answer was lost), the second's had
// not. The restart upgrades to schema 5 by copying, which starts the spans
// table's deduplication history afresh; each block must still be stored
// once, and so on every later restart.
// `with_extras`: the stored spans with a rare field (events, links, scope
// attributes), which schema 4 kept in their own columns and the copy turns
// into extras.
void AmbiguousBlocksAcrossTheUpgrade(bool fixed, size_t* stored, uint64_t* red_calls,
                                     size_t* with_extras) {
  Reset();
  const std::string log_dir = Engine::dir + "/durable-upgrade";
  std::filesystem::remove_all(log_dir);
  Capabilities caps;
  SchemaOptions v4;
  v4.layout = Schema4Layout();
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, v4).ok());
  ASSERT_TRUE(EnableInsertDeduplication(*Engine::conn, caps).ok());
  const auto now_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  const SpanBatch a = testdata::SampleBatch(3, now_ns - 3600000000000ull);
  SpanBatch b = testdata::SampleBatch(2, now_ns - 3500000000000ull);
  for (auto& id : b.spans.trace_id) id[15] ^= 0x5a;  // other traces
  {
    pipeline::durable::LogOptions o = LogAt(log_dir).log;
    std::unique_ptr<SegmentLog> log;
    ASSERT_TRUE(SegmentLog::Open(o, &log).ok());
    // One as older builds logged blocks, one as this one does.
    const std::string token_a = LogBlock(*log, a, /*legacy=*/true);
    LogBlock(*log, b, /*legacy=*/false);
    InsertWithToken(a, caps, token_a,
                    v4.layout.extras_column);  // stored; the writer never learnt it
    log->Close();                              // the crash: nothing acknowledged
  }
  for (int restart = 0; restart < 2; ++restart) {
    // Each start stops before the log is cleaned up (the records of the
    // replayed blocks are held until then).
    Start(log_dir, &caps, fixed);
  }
  *stored = std::stoul(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)));
  *red_calls = std::stoull(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)));
  *with_extras =
      std::stoul(Q(fmt::format("SELECT countIf(extras != '') FROM {}.spans", kDatabase)));
  EXPECT_EQ(Q(fmt::format("SELECT max(version) FROM {}.schema_version", kDatabase)),
            fmt::format("{}\n", kSchemaVersion));
}

// The first block is stored once with the replay before the copy; without
// it, twice: what the replay guards against happens on this engine (red_1m
// was not copied, so its deduplication history holds either way).
// Spans of `b` with a rare field.
size_t WithExtras(const SpanBatch& b) {
  size_t n = 0;
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    std::string value;
    EncodeSpanExtras(b, i, &value);
    n += !value.empty();
  }
  return n;
}

TEST(ChdbDeduplication, AnAmbiguousBlockFromBeforeACopyingUpgradeIsStoredOnce) {
  const size_t a = testdata::SampleBatch(3).span_count();
  const size_t b = testdata::SampleBatch(2).span_count();
  const size_t a_extras = WithExtras(testdata::SampleBatch(3));
  const size_t b_extras = WithExtras(testdata::SampleBatch(2));
  ASSERT_GT(a_extras, 0u);
  ASSERT_GT(b_extras, 0u);
  for (const bool fixed : {true, false}) {
    SCOPED_TRACE(fixed ? "replayed before the copy" : "replayed after the copy only");
    size_t stored = 0;
    uint64_t red = 0;
    size_t extras = 0;
    AmbiguousBlocksAcrossTheUpgrade(fixed, &stored, &red, &extras);
    EXPECT_EQ(stored, (fixed ? a : 2 * a) + b);
    EXPECT_EQ(red, a + b);
    // The block stored by schema 4's writer (rare columns) and the one
    // replayed (extras, into the old table or the new) keep their events.
    EXPECT_EQ(extras, (fixed ? a_extras : 2 * a_extras) + b_extras);
  }
}

}  // namespace
}  // namespace spanhouse::storage
