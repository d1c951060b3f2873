#include "storage/clickhouse/cluster_shard.h"

#include <cstring>

namespace spanhouse::storage {
namespace {

constexpr uint64_t Rotl(uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

struct SipState {
  uint64_t v0 = 0x736f6d6570736575ull;
  uint64_t v1 = 0x646f72616e646f6dull;
  uint64_t v2 = 0x6c7967656e657261ull;
  uint64_t v3 = 0x7465646279746573ull;

  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }
  void Compress(uint64_t m) {
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }
};

uint64_t LoadLe(const char* p, size_t n) {
  uint64_t m = 0;
  for (size_t i = 0; i < n; ++i) m |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return m;
}

}  // namespace

uint64_t SipHash64(std::string_view data) {
  SipState s;
  const size_t whole = data.size() / 8 * 8;
  for (size_t i = 0; i < whole; i += 8) s.Compress(LoadLe(data.data() + i, 8));
  s.Compress((uint64_t{data.size() & 0xff} << 56) |
             LoadLe(data.data() + whole, data.size() - whole));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace spanhouse::storage
