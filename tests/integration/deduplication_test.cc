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
#include "pipeline/durable/block_record.h"
#include "pipeline/durable/segment_log.h"
#include "server/durable_replay.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/span_extras.h"
#include "testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

// Inserts `b` as one block with `token`, the way the replay does.
// `extras_column`: the table's (false: schema 7's rare columns).
void InsertWithToken(const SpanBatch& b, const Capabilities& caps, const std::string& token,
                     bool extras_column = true) {
  pipeline::SpanQueue queue(64u << 20);
  WriterOptions opts = TestWriter();
  opts.extras_column = extras_column;
  EmbeddedWriter writer(Engine::conn.get(), caps, queue, opts);
  std::vector<std::unique_ptr<SpanBatch>> parts;
  parts.push_back(std::make_unique<SpanBatch>(b));
  writer.InsertReplayed(PartitionDay(b.spans.start_ns[0]), token, std::move(parts), {});
  EXPECT_EQ(writer.stats().rows_written.load(), b.span_count());
  queue.Close();
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
    pipeline::SpanQueue queue(64u << 20);
    const WriterOptions opts = TestWriter();
    EmbeddedWriter writer(Engine::conn.get(), caps, queue, opts);
    std::vector<std::unique_ptr<SpanBatch>> parts;
    for (const auto& b : batches) parts.push_back(std::make_unique<SpanBatch>(b));
    writer.InsertReplayed(day, token, std::move(parts), {}, chunks);
    EXPECT_EQ(writer.stats().rows_written.load(), n);
    queue.Close();
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
using pipeline::durable::RecordKind;
using pipeline::durable::SegmentLog;

std::unique_ptr<SegmentLog> OpenLog(const std::string& dir) {
  pipeline::durable::LogOptions o;
  o.dir = dir;
  o.fsync_always = true;
  std::unique_ptr<SegmentLog> log;
  const Status st = SegmentLog::Open(o, &log);
  EXPECT_TRUE(st.ok()) << st.message();
  return log;
}

// Logs `b` as a request and then a block record naming it, as a writer
// does before its insert; returns the block's token.
std::string LogBlock(SegmentLog& log, const SpanBatch& b) {
  SegmentLog::Ref spans;
  EXPECT_EQ(log.Append(RecordKind::kSpans, codec::EncodeOtlpProto(b), &spans),
            SegmentLog::AppendResult::kOk);
  BlockRecord rec;
  rec.day = PartitionDay(b.spans.start_ns[0]);
  rec.lsns = {spans.lsn()};
  SegmentLog::Ref block;
  EXPECT_EQ(log.Append(RecordKind::kBlock, rec.Encode(), &block, true),
            SegmentLog::AppendResult::kOk);
  EXPECT_TRUE(log.WaitDurable(block.lsn(), std::chrono::seconds(10)));
  return pipeline::durable::DedupToken(log.epoch(), block.lsn());
}

// A start as serve makes it: the schema ensured (its copying upgrade
// replaying the logged blocks into the old tables first when `fixed`),
// then the first phase of the replay.
void Start(SegmentLog& log, Capabilities* caps, bool fixed, server::ReplayCounts* counts) {
  SchemaOptions opts;
  pipeline::SpanQueue none(1);
  const WriterOptions wopts = TestWriter();
  if (fixed) {
    opts.before_copy = [&](const Capabilities& c) -> Status {
      if (Status st = EnableInsertDeduplication(*Engine::conn, c); !st.ok()) return st;
      EmbeddedWriter writer(Engine::conn.get(), c, none, wopts);
      return server::ReplayLoggedBlocksBeforeCopy(log, writer, nullptr, counts);
    };
  }
  Status st = EnsureSchema(*Engine::conn, caps, opts);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(EnableInsertDeduplication(*Engine::conn, *caps).ok());
  std::vector<std::unique_ptr<EmbeddedWriter>> writers;
  writers.push_back(std::make_unique<EmbeddedWriter>(Engine::conn.get(), *caps, none, wopts));
  server::ReplayLoggedBlocks(log, writers, nullptr, counts);
  none.Close();
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
    auto log = OpenLog(log_dir);
    const std::string token_a = LogBlock(*log, a);
    LogBlock(*log, b);
    InsertWithToken(a, caps, token_a,
                    v4.layout.extras_column);  // stored; the writer never learnt it
    log->Close();                              // the crash: no hold released
  }
  for (int restart = 0; restart < 2; ++restart) {
    auto log = OpenLog(log_dir);
    server::ReplayCounts counts;
    Start(*log, &caps, fixed, &counts);
    log->Close();  // a crash again before the log is cleaned up
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
