// What a writer logs (RecordKind::kBlock) before it inserts a block: which
// records' spans the block holds (those of one shard and one day), so that
// after a crash the block can be formed again from the log and inserted
// with the same deduplication token: stored once whether or not the first
// attempt reached the engine.
//
// Payload, little-endian: u32 shard, u32 shard count, u32 day (days since
// the epoch, the partition), u32 n, then n u64 LSNs of kSpans records.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spanhouse::pipeline::durable {

struct BlockRecord {
  uint32_t shard = 0;
  uint32_t shards = 1;
  uint32_t day = 0;
  std::vector<uint64_t> lsns;

  std::string Encode() const {
    std::string out;
    out.reserve(16 + 8 * lsns.size());
    auto put = [&](uint64_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
    };
    put(shard, 4);
    put(shards, 4);
    put(day, 4);
    put(lsns.size(), 4);
    for (uint64_t l : lsns) put(l, 8);
    return out;
  }

  bool Decode(std::string_view p) {
    auto get = [&](size_t off, int bytes) {
      uint64_t v = 0;
      for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[off + i]);
      return v;
    };
    if (p.size() < 16) return false;
    shard = static_cast<uint32_t>(get(0, 4));
    shards = static_cast<uint32_t>(get(4, 4));
    day = static_cast<uint32_t>(get(8, 4));
    const uint64_t n = get(12, 4);
    if (p.size() != 16 + 8 * n) return false;
    lsns.resize(n);
    for (uint64_t i = 0; i < n; ++i) lsns[i] = get(16 + 8 * i, 8);
    return true;
  }
};

// The deduplication token of the block logged as record `block_lsn`.
inline std::string DedupToken(uint64_t epoch, uint64_t block_lsn) {
  static const char kHex[] = "0123456789abcdef";
  std::string t = "sh-";
  for (int i = 60; i >= 0; i -= 4) t.push_back(kHex[(epoch >> i) & 0xf]);
  t += "-" + std::to_string(block_lsn);
  return t;
}

}  // namespace spanhouse::pipeline::durable
