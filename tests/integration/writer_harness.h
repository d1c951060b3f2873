// The integration tests' way of storing one batch through the real writer
// path: one EmbeddedWriter, its queue, one flush at Close.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "sink/span_queue.h"
#include "storage/clickhouse/embedded_writer.h"

namespace spanhouse::storage {

// Spans of `b` not sampled out.
inline size_t KeptSpans(const SpanBatch& b) {
  size_t kept = 0;
  for (const uint8_t m : b.spans.metrics_only) kept += m == 0 ? 1 : 0;
  return kept;
}

// Writes `b` through one writer on `conn` and checks it stored every kept
// span as a span and every sampled-out one as a sampled_spans row, without
// an error or anything left pending.
inline void WriteOneBatch(SqlConnection* conn, const Capabilities& caps, const WriterOptions& o,
                          const SpanBatch& b, LegacyLayout layout = {}) {
  sink::SpanQueue queue(64u << 20);
  EmbeddedWriter writer(conn, caps, queue, o, nullptr, nullptr, layout);
  writer.Start();
  sink::QueuedBatch item;
  item.batch = std::make_unique<SpanBatch>(b);
  ASSERT_TRUE(queue.Push(item).ok());
  queue.Close();
  writer.Join();
  const size_t kept = KeptSpans(b);
  EXPECT_EQ(writer.stats().rows_written.load(), kept);
  EXPECT_EQ(writer.stats().sampled_rows_written.load(), b.span_count() - kept);
  EXPECT_EQ(writer.stats().pending_rows.load(), 0u);
  EXPECT_EQ(writer.stats().write_errors.load(), 0u);
}

}  // namespace spanhouse::storage
