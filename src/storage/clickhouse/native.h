// ClickHouse Native format: the columnar block format the engine reads and
// writes without parsing text. SpanBatch is columnar too, so a batch becomes
// a block column by column, with no per-row formatting.
//
// Block = varint(columns) varint(rows) then per column: name, type, data.
// Data: fixed-width values little-endian back to back; String = varint
// length + bytes per row; FixedString(N) = N bytes per row; Array(T) =
// UInt64 cumulative end offsets per row, then the flattened T column.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/status.h"

namespace spanhouse::storage::native {

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void BlockHeader(uint64_t columns, uint64_t rows) {
    Varint(columns);
    Varint(rows);
  }
  void ColumnHeader(std::string_view name, std::string_view type) {
    String(name);
    String(type);
  }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_->push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_->push_back(static_cast<char>(v));
  }
  void String(std::string_view s) {
    Varint(s.size());
    out_->append(s);
  }
  void Bytes(const void* p, size_t n) { out_->append(static_cast<const char*>(p), n); }
  template <typename T>
  void Fixed(T v) {
    Bytes(&v, sizeof(T));
  }

 private:
  std::string* out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool eof() const { return pos_ >= in_.size(); }
  size_t pos() const { return pos_; }

  Status Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in_.size()) return Truncated();
      auto b = static_cast<uint8_t>(in_[pos_++]);
      r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = r;
        return Status::Ok();
      }
    }
    return Status::Internal("native: varint too long");
  }
  Status String(std::string_view* s) {
    uint64_t n = 0;
    if (Status st = Varint(&n); !st.ok()) return st;
    return Bytes(n, s);
  }
  Status Bytes(uint64_t n, std::string_view* s) {
    if (n > in_.size() - pos_) return Truncated();
    *s = in_.substr(pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  template <typename T>
  Status Fixed(T* v) {
    std::string_view b;
    if (Status st = Bytes(sizeof(T), &b); !st.ok()) return st;
    std::memcpy(v, b.data(), sizeof(T));
    return Status::Ok();
  }

 private:
  Status Truncated() const {
    return Status::Internal("native: truncated block at byte " + std::to_string(pos_));
  }
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace spanhouse::storage::native
