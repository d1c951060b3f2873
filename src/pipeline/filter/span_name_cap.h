// A cap on distinct span names per service. Names are the operations of
// the service catalog, the RED metrics' rows and the sort of the UI's
// drop-downs; an instrumentation that puts ids or URLs with parameters in
// span names makes them unbounded and every one of those grows without end.
// The first `max_per_service` distinct names of a service are kept; a span
// with a name past the cap gets kOtherSpanName instead (the span is kept).
//
// The names seen are remembered since start (not persisted: after a restart
// the first names seen are kept again). Memory is bounded: at most
// max_per_service names per service and kMaxTrackedNames over all services;
// past that total, new names of any service are replaced too.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "model/span_batch.h"

namespace spanhouse::pipeline {

inline constexpr std::string_view kOtherSpanName = "(other)";

class SpanNameCap {
 public:
  static constexpr size_t kMaxTrackedNames = 1000000;

  explicit SpanNameCap(uint32_t max_per_service) : max_per_service_(max_per_service) {}

  // Renames the spans of `batch` whose names are past their service's cap;
  // returns how many. One lock per batch.
  uint64_t Apply(SpanBatch& batch);

 private:
  // Heterogeneous lookup: a batch's names are string_views into it.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using NameSet = std::unordered_set<std::string, Hash, std::equal_to<>>;

  const uint32_t max_per_service_;
  std::mutex mu_;
  std::unordered_map<std::string, NameSet, Hash, std::equal_to<>> services_;  // guarded by mu_
  size_t tracked_ = 0;                                                        // guarded by mu_
};

}  // namespace spanhouse::pipeline
