// The trace copy (storage.trace_copy_s): a view copies every span inserted
// into spans; a lookup by id reads the copy, and the spans table when the
// copy lacks a trace or may hold only a part of it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "integration/trace_as_read.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/trace_copy.h"

namespace spanhouse::storage {
namespace {

constexpr std::string_view kCopyDb = "spanhouse_test_copy";

TEST(TraceCopy, ALookupReadsTheCopyAndTheSpansTableWithout) {
  Q(fmt::format("DROP DATABASE IF EXISTS {}", kCopyDb));
  SchemaOptions options;
  options.database = std::string(kCopyDb);
  Capabilities caps;
  Status st = EnsureSchema(*Engine::conn, &caps, options);
  ASSERT_TRUE(st.ok()) << st.message();
  const auto now_s = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  // A span stored before the copy is made: the copy says when the newest was.
  const SpanBatch before = testdata::SampleBatch(1, (now_s - 4 * 3600) * 1000000000ull);
  StoreBatch(kCopyDb, before, caps);
  const std::string newest =
      Q(fmt::format("SELECT toUInt32(max(timestamp)) FROM {}.spans", kCopyDb));
  uint64_t since_s = 0;
  st = EnsureTraceCopy(*Engine::conn, caps, kCopyDb, 86400, &since_s);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(fmt::format("{}\n", since_s), newest);
  EXPECT_LT(since_s, now_s - 3 * 3600);
  Q(fmt::format("TRUNCATE TABLE {}.spans", kCopyDb));
  // Made again at the next start: the same table, its time kept.
  uint64_t again_s = 0;
  st = EnsureTraceCopy(*Engine::conn, caps, kCopyDb, 2 * 86400, &again_s);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(again_s, since_s);

  // Spans of the last hour, of three traces.
  const uint64_t base_ns = (now_s - 3600) * 1000000000ull;
  const SpanBatch in = testdata::SampleBatch(3, base_ns);
  StoreBatch(kCopyDb, in, caps);
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.trace_copy", kCopyDb)),
            fmt::format("{}\n", in.span_count()));

  ChdbSpanReader plain(*Engine::conn, caps, {}, {}, std::string(kCopyDb));
  ChdbSpanReader copy(*Engine::conn, caps, {}, {}, std::string(kCopyDb));
  copy.set_trace_copy(since_s);  // made hours before these spans began: each is taken from it
  ChdbSpanReader young(*Engine::conn, caps, {}, {}, std::string(kCopyDb));
  young.set_trace_copy(now_s - 1800);  // as if made after they began: the spans table is read
  const std::vector<TraceId> ids = {testdata::MakeTraceId(2), testdata::MakeTraceId(0)};
  for (ChdbSpanReader* reader : {&plain, &copy, &young}) {
    for (const TraceId& id : ids) {
      SpanBatch out;
      st = reader->GetTrace(id, &out);
      ASSERT_TRUE(st.ok()) << st.message();
      std::string why;
      EXPECT_TRUE(TraceAsRead(in, id).LogicallyEquals(out, &why)) << ToHex(id) << ": " << why;
    }
    SpanBatch both;
    st = reader->GetTraces(ids, &both);
    ASSERT_TRUE(st.ok()) << st.message();
    SpanBatch want = TraceAsRead(in, ids[0]);
    const SpanBatch second = TraceAsRead(in, ids[1]);
    std::vector<uint32_t> all(second.span_count());
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
    want.AppendSpans(second, all.data(), all.size());
    std::string why;
    EXPECT_TRUE(want.LogicallyEquals(both, &why)) << why;
  }

  // Without the spans table's rows, only the copy answers; a reader that
  // may not trust it answers what the spans table holds.
  Q(fmt::format("TRUNCATE TABLE {}.spans", kCopyDb));
  SpanBatch out;
  st = copy.GetTrace(ids[0], &out);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string why;
  EXPECT_TRUE(TraceAsRead(in, ids[0]).LogicallyEquals(out, &why)) << why;
  for (ChdbSpanReader* reader : {&plain, &young}) {
    SpanBatch none;
    EXPECT_EQ(reader->GetTrace(ids[0], &none).code(), StatusCode::kNotFound);
  }
  // A trace the copy lacks is read from the spans table.
  Q(fmt::format("TRUNCATE TABLE {}.trace_copy", kCopyDb));
  StoreBatch(kCopyDb, in, caps);
  Q(fmt::format("TRUNCATE TABLE {}.trace_copy", kCopyDb));
  SpanBatch from_spans;
  st = copy.GetTrace(ids[1], &from_spans);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(TraceAsRead(in, ids[1]).LogicallyEquals(from_spans, &why)) << why;

  // Off: the view and the table are gone; spans go on being stored.
  st = EnsureTraceCopy(*Engine::conn, caps, kCopyDb, 0, &since_s);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(since_s, 0u);
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM system.tables WHERE database = '{}' AND name LIKE "
                          "'trace_copy%'",
                          kCopyDb)),
            "0\n");
  StoreBatch(kCopyDb, in, caps);
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kCopyDb)),
            fmt::format("{}\n", 2 * in.span_count()));
  Q(fmt::format("DROP DATABASE IF EXISTS {}", kCopyDb));
}

}  // namespace
}  // namespace spanhouse::storage
