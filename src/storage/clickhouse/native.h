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

// Appends to a std::string through a raw cursor: `out` is grown in chunks
// (at least kChunk bytes at a time) and each value is stored with a plain
// copy, not an append with its own capacity check per string or varint
// byte. The slack past what was written is trimmed when the Writer goes
// away (or at Trim()), so `out` must not be read while one is writing to it.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out), used_(out->size()) {}
  ~Writer() { Trim(); }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Cuts `out` to what was written so far (writing may go on after).
  void Trim() { out_->resize(used_); }

  void BlockHeader(uint64_t columns, uint64_t rows) {
    Varint(columns);
    Varint(rows);
  }
  void ColumnHeader(std::string_view name, std::string_view type) {
    String(name);
    String(type);
  }
  void Varint(uint64_t v) {
    char* p = Room(10);
    used_ += static_cast<size_t>(PutVarint(p, v) - p);
  }
  void String(std::string_view s) {
    char* p = Room(s.size() + 10);
    char* q = PutVarint(p, s.size());
    if (!s.empty()) std::memcpy(q, s.data(), s.size());
    used_ += static_cast<size_t>(q - p) + s.size();
  }
  void Bytes(const void* p, size_t n) {
    if (n == 0) return;
    std::memcpy(Room(n), p, n);
    used_ += n;
  }
  template <typename T>
  void Fixed(T v) {
    std::memcpy(Room(sizeof(T)), &v, sizeof(T));
    used_ += sizeof(T);
  }

 private:
  static constexpr size_t kChunk = 64u << 10;

  static char* PutVarint(char* p, uint64_t v) {
    while (v >= 0x80) {
      *p++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
  }
  // Space for `n` more bytes at the cursor.
  char* Room(size_t n) {
    if (out_->size() - used_ < n) [[unlikely]]
      out_->resize(used_ + (n > kChunk ? n : kChunk));
    return out_->data() + used_;
  }

  std::string* out_;
  size_t used_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool eof() const { return pos_ >= in_.size(); }
  size_t pos() const { return pos_; }
  size_t left() const { return in_.size() - pos_; }

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
