// The integration tests' way of storing one batch through the real writer
// path: a ClickHouse sink of one writer, one flush at Close.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "../testdata/one_writer.h"
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
  testdata::OneWriter writer(conn, caps, o, nullptr, layout);
  ASSERT_TRUE(writer.Push(std::make_unique<SpanBatch>(b)).ok());
  writer.Close();
  const size_t kept = KeptSpans(b);
  EXPECT_EQ(writer.stats().rows_written.load(), kept);
  EXPECT_EQ(writer.stats().sampled_rows_written.load(), b.span_count() - kept);
  EXPECT_EQ(writer.stats().pending_rows.load(), 0u);
  EXPECT_EQ(writer.stats().write_errors.load(), 0u);
}

}  // namespace spanhouse::storage
