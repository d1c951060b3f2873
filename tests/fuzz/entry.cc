// libFuzzer's entry point, shared by every target: the input handed to the target's TestOne
// (invariants.h) as bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return spanhouse::fuzz::TestOne(std::string_view(reinterpret_cast<const char*>(data), size));
}
