// What the query API needs from a store. One implementation per backend
// (embedded ClickHouse now; remote ClickHouse and OpenSearch later).
#pragma once

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::query {

class SpanReader {
 public:
  virtual ~SpanReader() = default;
  // Appends every stored span of the trace to `out`; kNotFound if none.
  virtual Status GetTrace(const TraceId& id, SpanBatch* out) = 0;
};

}  // namespace spanhouse::query
