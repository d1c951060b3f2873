// A fixed-bucket latency histogram, lock-free to record, rendered in
// Prometheus text format. Buckets in seconds, cumulative on output.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace spanhouse {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
  void Record(double seconds) {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_micros_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
  }
  uint64_t count() const {
    uint64_t n = 0;
    for (const auto& c : counts_) n += c.load(std::memory_order_relaxed);
    return n;
  }
  // Appends `name`_bucket/_sum/_count lines (with `labels`, e.g. `sink="chdb"`).
  void AppendPrometheus(std::string& out, const std::string& name,
                        const std::string& labels) const {
    uint64_t cum = 0;
    const std::string sep = labels.empty() ? "" : ",";
    for (size_t i = 0; i <= kBounds.size(); ++i) {
      cum += counts_[i].load(std::memory_order_relaxed);
      std::string le = i < kBounds.size() ? FormatBound(kBounds[i]) : "+Inf";
      out += name + "_bucket{" + labels + sep + "le=\"" + le + "\"} " + std::to_string(cum) + "\n";
    }
    const std::string braces = labels.empty() ? "" : "{" + labels + "}";
    out += name + "_sum" + braces + " " +
           std::to_string(static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6) +
           "\n";
    out += name + "_count" + braces + " " + std::to_string(cum) + "\n";
  }

 private:
  static std::string FormatBound(double b) {
    std::string s = std::to_string(b);
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_micros_{0};
};

}  // namespace spanhouse
