// What a writer logs (RecordKind::kBlock) before it inserts a block: which
// records' spans the block holds (those of one shard and one day), so that
// after a crash the block can be formed again from the log and inserted
// with the same deduplication token: stored once whether or not the first
// attempt reached the engine.
//
// Payload, little-endian: u32 shard, u32 shard count, u32 day (days since
// the epoch, the partition), u32 n, then n u64 LSNs of kSpans records, then
// (only when more than one) u32 chunks: how many spooled blocks the insert
// read. The engine's deduplication id of an INSERT ... SELECT depends on the
// token and on the number of blocks it read (measured on chDB 26.5: two
// files then one file with the same rows and token were stored twice; two
// files split differently, once), so the replay reads as many.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spanhouse::pipeline::durable {

// Little-endian fields of the records below.
inline void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
inline uint64_t GetLe(std::string_view p, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[off + i]);
  return v;
}

struct BlockRecord {
  uint32_t shard = 0;
  uint32_t shards = 1;
  uint32_t day = 0;
  std::vector<uint64_t> lsns;
  uint32_t chunks = 1;

  std::string Encode() const {
    std::string out;
    out.reserve(20 + 8 * lsns.size());
    PutLe(&out, shard, 4);
    PutLe(&out, shards, 4);
    PutLe(&out, day, 4);
    PutLe(&out, lsns.size(), 4);
    for (uint64_t l : lsns) PutLe(&out, l, 8);
    if (chunks != 1) PutLe(&out, chunks, 4);  // absent: 1 (records of earlier versions)
    return out;
  }

  bool Decode(std::string_view p) {
    if (p.size() < 16) return false;
    shard = static_cast<uint32_t>(GetLe(p, 0, 4));
    shards = static_cast<uint32_t>(GetLe(p, 4, 4));
    day = static_cast<uint32_t>(GetLe(p, 8, 4));
    const uint64_t n = GetLe(p, 12, 4);
    chunks = 1;
    if (p.size() == 20 + 8 * n) {
      chunks = static_cast<uint32_t>(GetLe(p, 16 + 8 * n, 4));
      if (chunks == 0) return false;
    } else if (p.size() != 16 + 8 * n) {
      return false;
    }
    lsns.resize(n);
    for (uint64_t i = 0; i < n; ++i) lsns[i] = GetLe(p, 16 + 8 * i, 8);
    return true;
  }
};

// What the start logs (RecordKind::kReplayed) once it has inserted the
// logged blocks again, with their tokens, into a table it is about to copy
// for a schema upgrade (schema.h: SchemaOptions::before_copy): the copy
// starts the engine's deduplication history afresh, so those tokens would
// no longer keep a later replay from storing the blocks twice; this record
// does. It lies after the block records it names, so the log keeps it as
// long as them (segments go oldest first).
//
// Payload, little-endian: u32 n, then n u64 LSNs of kBlock records.
struct ReplayedBlocks {
  std::vector<uint64_t> block_lsns;

  std::string Encode() const {
    std::string out;
    out.reserve(4 + 8 * block_lsns.size());
    PutLe(&out, block_lsns.size(), 4);
    for (uint64_t l : block_lsns) PutLe(&out, l, 8);
    return out;
  }

  bool Decode(std::string_view p) {
    if (p.size() < 4) return false;
    const uint64_t n = GetLe(p, 0, 4);
    if (p.size() != 4 + 8 * n) return false;
    block_lsns.resize(n);
    for (uint64_t i = 0; i < n; ++i) block_lsns[i] = GetLe(p, 4 + 8 * i, 8);
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
