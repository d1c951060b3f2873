// Small hashing helpers shared by the components that place or find things by id.
#pragma once

#include <cstdint>

namespace spanhouse {

// The murmur3 64-bit finalizer: every input bit flips about half the output
// bits, so ids that are not uniformly random (some SDKs') still spread.
inline uint64_t Murmur3Fmix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace spanhouse
