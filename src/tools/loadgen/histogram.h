// Request latencies in log-spaced buckets (HDR-like): exact below 16 us, then
// 16 buckets per power of two, so any percentile is within ~6% of the truth.
// Fixed size, no allocation per value; one per connection, merged at the end.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace spanhouse::loadgen {

class LatencyHistogram {
 public:
  void Record(uint64_t us) {
    ++counts_[Index(us)];
    ++total_;
    if (us > max_) max_ = us;
  }

  void Merge(const LatencyHistogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    if (o.max_ > max_) max_ = o.max_;
  }

  uint64_t Count() const { return total_; }
  uint64_t MaxUs() const { return max_; }

  // The q-quantile (0 < q <= 1) in microseconds: the middle of the bucket that
  // holds it, capped at the largest value seen. 0 when empty.
  double PercentileUs(double q) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<uint64_t>(q * static_cast<double>(total_) + 0.999999);
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        const double lo = static_cast<double>(Lower(i));
        const double hi = static_cast<double>(Lower(i + 1));
        const double mid = i < 16 ? lo : (lo + hi) / 2;
        return mid < static_cast<double>(max_) ? mid : static_cast<double>(max_);
      }
    }
    return static_cast<double>(max_);
  }

  static size_t Index(uint64_t us) {
    if (us < 16) return static_cast<size_t>(us);
    const int e = std::bit_width(us) - 1;  // >= 4
    const uint64_t sub = (us >> (e - 4)) & 15;
    return static_cast<size_t>(e - 3) * 16 + sub;
  }
  static uint64_t Lower(size_t idx) {
    if (idx < 16) return idx;
    const size_t e = idx / 16 + 3;
    const uint64_t sub = idx % 16;
    return (16 + sub) << (e - 4);
  }

 private:
  std::array<uint64_t, 61 * 16> counts_{};  // up to 2^64 us
  uint64_t total_ = 0;
  uint64_t max_ = 0;
};

}  // namespace spanhouse::loadgen
