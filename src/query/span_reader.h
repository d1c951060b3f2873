// What the query API needs from a store. One implementation per backend
// (embedded ClickHouse now; remote ClickHouse and OpenSearch later).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::query {

class SpanReader {
 public:
  virtual ~SpanReader() = default;
  // Appends every stored span of the trace to `out`; kNotFound if none.
  virtual Status GetTrace(const TraceId& id, SpanBatch* out) = 0;
  // Counts stored spans whose resource (or, for kSpan, the span itself) has
  // attribute `key` equal to `value`. For verification by loadgen, tests and
  // benchmarks: a span attribute is a full scan of the spans table.
  // kUserField: a path in the user_fields JSON column (the span's and its
  // resource's user-defined attributes); an empty value matches any value.
  enum class AttrOwner { kResource, kSpan, kUserField };
  virtual Status CountSpansWithAttr(AttrOwner owner, const std::string& key,
                                    const std::string& value, uint64_t* count) = 0;
};

}  // namespace spanhouse::query
