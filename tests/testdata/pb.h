// A tiny protobuf encoder for tests: every byte on the wire under the test's
// control (field order, unknown fields, broken lengths and wire types).
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace spanhouse::testdata {

class Pb {
 public:
  Pb& Varint(uint32_t field, uint64_t v) {
    Tag(field, 0);
    PutVarint(v);
    return *this;
  }
  Pb& Fixed64(uint32_t field, uint64_t v) {
    Tag(field, 1);
    for (int i = 0; i < 8; ++i) s_ += static_cast<char>(v >> (8 * i));
    return *this;
  }
  Pb& Double(uint32_t field, double v) { return Fixed64(field, std::bit_cast<uint64_t>(v)); }
  Pb& Fixed32(uint32_t field, uint32_t v) {
    Tag(field, 5);
    for (int i = 0; i < 4; ++i) s_ += static_cast<char>(v >> (8 * i));
    return *this;
  }
  Pb& Bytes(uint32_t field, std::string_view v) {
    Tag(field, 2);
    PutVarint(v.size());
    s_.append(v);
    return *this;
  }
  Pb& Msg(uint32_t field, const Pb& m) { return Bytes(field, m.str()); }
  // Raw bytes, for hand-made broken encodings.
  Pb& Raw(std::string_view v) {
    s_.append(v);
    return *this;
  }
  Pb& Tag(uint32_t field, uint32_t wire) {
    PutVarint(static_cast<uint64_t>(field) << 3 | wire);
    return *this;
  }
  Pb& PutVarint(uint64_t v) {
    while (v >= 0x80) {
      s_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    s_ += static_cast<char>(v);
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

}  // namespace spanhouse::testdata
