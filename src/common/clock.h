// The wall clock as Unix nanoseconds: the time spans, receive times and
// sampling decisions are stamped with; the steady clock as nanoseconds, for
// durations kept in an atomic.
#pragma once

#include <chrono>
#include <cstdint>

namespace spanhouse {

inline uint64_t WallClockNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

inline int64_t SteadyClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace spanhouse
