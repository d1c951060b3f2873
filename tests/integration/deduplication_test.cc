// Insert deduplication against the real engine: a block inserted again with
// its token (a replay after a crash) is stored once, in the spans table and
// in the tables its views feed; another token stores it again.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "engine.h"
#include "storage/clickhouse/deduplication.h"
#include "testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

// Inserts `b` as one block with `token`, the way the replay does.
void InsertWithToken(const SpanBatch& b, const Capabilities& caps, const std::string& token) {
  pipeline::SpanQueue queue(64u << 20);
  WriterOptions opts;
  opts.spool_dir = Engine::dir + "/spool";
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

  InsertWithToken(b, caps, "sh-test-2");  // another block with the same rows
  const std::string twice = std::to_string(2 * n) + "\n";
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)), twice);
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)), twice);
}

}  // namespace
}  // namespace spanhouse::storage
