// What a trace lookup returns for a batch's trace: shared by the chDB
// integration tests.
#pragma once

#include <algorithm>
#include <tuple>
#include <vector>

#include "model/span_batch.h"

namespace spanhouse::storage {

// The spans of `in` as a lookup returns a trace's: ordered by start time,
// then span id.
inline SpanBatch TraceAsRead(const SpanBatch& in, const TraceId& id) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < in.span_count(); ++i) {
    if (in.spans.trace_id[i] == id) order.push_back(i);
  }
  const auto& sp = in.spans;
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return std::tie(sp.start_ns[x], sp.span_id[x]) < std::tie(sp.start_ns[y], sp.span_id[y]);
  });
  SpanBatch out;
  out.AppendSpans(in, order.data(), order.size());
  return out;
}

}  // namespace spanhouse::storage
