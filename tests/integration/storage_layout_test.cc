// The storage layouts against real chDB: every layout `spanhouse bench
// storage` measures (its DDL must be valid and spans must come back
// unchanged through it).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "pipeline/queue/span_queue.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "tools/bench/storage_variants.h"

namespace spanhouse::storage {
namespace {

// Through the writer, as `serve` stores spans.
void Write(const SpanBatch& b, const Capabilities& caps) {
  pipeline::SpanQueue queue(64u << 20);
  WriterOptions opts;
  opts.spool_dir = Engine::dir + "/spool";
  EmbeddedWriter writer(Engine::conn.get(), caps, queue, opts);
  writer.Start();
  auto copy = std::make_unique<SpanBatch>(b);
  ASSERT_EQ(queue.TryPush(copy), pipeline::SpanQueue::PushResult::kOk);
  queue.Close();
  writer.Join();
  EXPECT_EQ(writer.stats().rows_written.load(), b.span_count());
  EXPECT_EQ(writer.stats().insert_errors.load(), 0u);
}

void ExpectRoundTrip(const Capabilities& caps, const std::string& label) {
  SpanBatch in = testdata::SampleBatch(2);
  Write(in, caps);
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  for (uint8_t t = 0; t < 2; ++t) {
    Status st = reader.GetTrace(testdata::MakeTraceId(t), &out);
    ASSERT_TRUE(st.ok()) << label << ": " << st.message();
  }
  std::string why;
  EXPECT_TRUE(in.LogicallyEquals(out, &why)) << label << ": " << why;
}

// Every layout the storage benchmark measures is valid DDL and stores and
// returns spans unchanged (the writer sorts by the default key; a layout
// with another key has the engine sort).
TEST(StorageLayout, EveryBenchVariantRoundTripsSpans) {
  for (const auto& v : bench::StorageVariants()) {
    SCOPED_TRACE(v.name);
    Reset();
    Capabilities caps;
    SchemaOptions options;
    options.layout = v.layout;
    Status st = EnsureSchema(*Engine::conn, &caps, options);
    ASSERT_TRUE(st.ok()) << v.name << ": " << st.message();
    ExpectRoundTrip(caps, v.name);
  }
}

}  // namespace
}  // namespace spanhouse::storage
