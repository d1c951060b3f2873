// The dictionaries a Native block is built with: the distinct strings of a
// block (KeyIndex) and a LowCardinality(String) column's keys and indexes
// (LcDict). Shared by the span block's encoder and the user_fields columns.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "storage/clickhouse/native.h"

namespace spanhouse::storage {

// Distinct strings of a block, each with a dense index (0, 1, 2, ... in
// order of first sight). The strings are not copied: they must outlive it.
class KeyIndex {
 public:
  KeyIndex() : slots_(64) {}

  // The index of `s`, new ones appended; `added` says whether it was new.
  uint32_t Find(std::string_view s, bool* added = nullptr) {
    const uint32_t h = Hash(s);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.key == kEmpty) {
        slot = {h, static_cast<uint32_t>(keys_.size())};
        keys_.push_back(s);
        if (keys_.size() * 2 > slots_.size()) Grow();
        if (added != nullptr) *added = true;
        return static_cast<uint32_t>(keys_.size() - 1);
      }
      if (slot.hash == h && keys_[slot.key] == s) {
        if (added != nullptr) *added = false;
        return slot.key;
      }
    }
  }
  const std::vector<std::string_view>& keys() const { return keys_; }

 private:
  // Keys are short (names, attribute keys) and a slot is confirmed by
  // comparing the string, so the hash is a few loads and multiplies, not a
  // general-purpose byte loop.
  static uint32_t Hash(std::string_view s) {
    const size_t n = s.size();
    const char* p = s.data();
    uint64_t a = 0;
    uint64_t b = 0;
    if (n >= 8) {
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + n - 8, 8);
      if (n > 16) {
        uint64_t m = 0;
        std::memcpy(&m, p + n / 2 - 4, 8);
        a ^= m * 0xc2b2ae3d27d4eb4full;
      }
    } else if (n >= 4) {
      uint32_t x = 0;
      uint32_t y = 0;
      std::memcpy(&x, p, 4);
      std::memcpy(&y, p + n - 4, 4);
      a = x;
      b = y;
    } else if (n > 0) {
      a = static_cast<uint8_t>(p[0]) | static_cast<uint64_t>(static_cast<uint8_t>(p[n / 2])) << 8 |
          static_cast<uint64_t>(static_cast<uint8_t>(p[n - 1])) << 16;
    }
    uint64_t h = (a ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    h ^= (b + n) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return static_cast<uint32_t>(h ^ (h >> 32));
  }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& o : old) {
      if (o.key == kEmpty) continue;
      size_t i = o.hash & mask;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask;
      slots_[i] = o;
    }
  }

  struct Slot {
    uint32_t hash = 0;
    uint32_t key = kEmpty;
  };
  static constexpr uint32_t kEmpty = ~0u;

  std::vector<std::string_view> keys_;
  std::vector<Slot> slots_;
};

// The dictionary of one LowCardinality(String) column of a block: each
// distinct string once, each value an index into it. The engine stores such
// a column this way; sent as plain strings, it would hash every value itself
// to build the dictionary.
class LcDict {
 public:
  LcDict() { keys_.Find(std::string_view()); }  // key 0: the default value

  void Add(std::string_view s) {
    // Rows come in the table's order (by trace): a value is often the
    // previous row's (its service, scope, name), which a compare finds
    // for less than a hash and a probe.
    if (s != last_) {
      last_ = s;
      last_index_ = keys_.Find(s);
    }
    index_.push_back(last_index_);
  }
  // The index of `s` in the dictionary (added if new), without a row: for
  // a caller that adds the row later with AddIndex, the same keys in the
  // same order.
  uint32_t Index(std::string_view s) { return keys_.Find(s); }
  void AddIndex(uint32_t k) { index_.push_back(k); }
  // Rows added.
  size_t rows() const { return index_.size(); }

  // The column's data after its array offsets, in the engine's layout
  // (keys as "additional keys" of the block, no shared dictionary): flags
  // (index width | has additional keys | dictionary update), the keys, then
  // the rows' indexes. Nothing when the column has no values.
  void Write(native::Writer& w) const {
    if (index_.empty()) return;
    const size_t n = keys_.keys().size();
    const uint64_t width = n <= 0x100 ? 0 : n <= 0x10000 ? 1 : 2;  // UInt8, UInt16, UInt32
    w.Fixed<uint64_t>(width | (1u << 9) | (1u << 10));
    w.Fixed<uint64_t>(n);
    for (std::string_view k : keys_.keys()) w.String(k);
    w.Fixed<uint64_t>(index_.size());
    for (uint32_t i : index_) {
      if (width == 0) {
        w.Fixed<uint8_t>(static_cast<uint8_t>(i));
      } else if (width == 1) {
        w.Fixed<uint16_t>(static_cast<uint16_t>(i));
      } else {
        w.Fixed<uint32_t>(i);
      }
    }
  }

 private:
  KeyIndex keys_;
  std::vector<uint32_t> index_;
  std::string_view last_;
  uint32_t last_index_ = 0;  // of last_ (key 0: "", which last_ starts as)
};

}  // namespace spanhouse::storage
