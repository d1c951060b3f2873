// The sink in front of a local store when several nodes act as one system:
// only the traces this node owns reach the store, whether a request comes
// selected (live) or whole (read back, replayed).
#include "sink/owned_sink.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "testdata/sample_batch.h"
#include "testdata/test_sink.h"

namespace spanhouse::sink {
namespace {

// Owns the traces whose id's last byte is even (whatever the view).
bool Even(const TraceId& t, uint64_t /*view*/ = 0) {
  return t[15] % 2 == 0;
}

SpanBatch Mixed() {
  SpanBatch b = testdata::SampleBatch(4);  // 4 traces of 3 spans
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    b.spans.trace_id[i] = testdata::MakeTraceId(static_cast<uint8_t>(10 + i / 3));
  }
  return b;
}

TEST(OwnedSink, SelectsAndKeepsOnlyTheTracesThisNodeOwns) {
  auto inner = std::make_unique<testdata::TestSink>();
  testdata::TestSink* store = inner.get();
  OwnedSink sink(std::move(inner), Even);
  const SpanBatch b = Mixed();
  std::vector<uint32_t> idx;
  ASSERT_TRUE(sink.Select(b, &idx));
  EXPECT_EQ(idx, (std::vector<uint32_t>{0, 1, 2, 6, 7, 8}));  // traces 10 and 12
  // A record read back comes whole: narrowed in Push.
  QueuedBatch item;
  item.batch = std::make_unique<SpanBatch>(b);
  ASSERT_TRUE(sink.Push(item).ok());
  auto got = store->Pop();
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->batch->span_count(), 6u);
  for (const TraceId& t : got->batch->spans.trace_id) EXPECT_TRUE(Even(t));
}

TEST(OwnedSink, AsksWithTheViewTheRequestCarries) {
  // A record read back is judged under the nodes up when it was accepted, not now.
  std::vector<uint64_t> views;
  OwnedSink sink(std::make_unique<testdata::TestSink>(), [&](const TraceId&, uint64_t view) {
    views.push_back(view);
    return true;
  });
  SpanBatch b = Mixed();
  b.peer_view = 0b101;
  std::vector<uint32_t> idx;
  ASSERT_TRUE(sink.Select(b, &idx));
  EXPECT_EQ(idx.size(), b.span_count());
  ASSERT_FALSE(views.empty());
  for (const uint64_t v : views) EXPECT_EQ(v, 0b101u);
  // A part copied out of it keeps the view.
  SpanBatch part;
  const uint32_t first = 0;
  part.AppendSpans(b, &first, 1);
  EXPECT_EQ(part.peer_view, 0b101u);
}

TEST(OwnedSink, ARecordWithNothingOwnedHereIsDoneWithout) {
  auto inner = std::make_unique<testdata::TestSink>();
  testdata::TestSink* store = inner.get();
  OwnedSink sink(std::move(inner), [](const TraceId&, uint64_t) { return false; });
  QueuedBatch item;
  item.batch = std::make_unique<SpanBatch>(Mixed());
  ASSERT_TRUE(sink.Push(item).ok());
  EXPECT_EQ(store->pushes(), 0u);
  EXPECT_FALSE(store->Pop(std::chrono::milliseconds(0)).has_value());
}

TEST(OwnedSink, AReplayedBlockHoldsTheOwnedSpansOfItsDay) {
  auto inner = std::make_unique<testdata::TestSink>();
  testdata::TestSink* store = inner.get();
  OwnedSink sink(std::move(inner), Even);
  const SpanBatch b = Mixed();
  const auto day = static_cast<uint32_t>(b.spans.start_ns[0] / 86400000000000ull);
  std::vector<uint32_t> idx;
  ASSERT_TRUE(sink.BlockMembers(testdata::TestSink::DayKey(day), b, &idx));
  std::set<uint32_t> members(idx.begin(), idx.end());
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    EXPECT_EQ(members.count(i) == 1, Even(b.spans.trace_id[i])) << i;
  }
  EXPECT_FALSE(sink.BlockMembers("other", b, &idx));
  QueuedBatch item;
  item.block = std::make_unique<ReplayBlock>();
  item.block->key = testdata::TestSink::DayKey(day);
  item.block->parts.push_back(std::make_unique<SpanBatch>(b));
  ASSERT_TRUE(sink.Push(item).ok());
  auto got = store->Pop();
  ASSERT_TRUE(got.has_value());
  ASSERT_NE(got->block, nullptr);
  EXPECT_EQ(got->block->spans(), 6u);
}

}  // namespace
}  // namespace spanhouse::sink
