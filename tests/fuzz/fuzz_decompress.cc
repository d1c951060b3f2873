// libFuzzer target: request body decompression with its size cap (codec/compression.cc).
//
// Input layout: byte 0 picks the Content-Encoding, byte 1 the cap on the decompressed size
// (kept small, so a bomb in the corpus costs little), the rest is the body.
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "codec/compression.h"
#include "invariants.h"

namespace spanhouse::fuzz {
namespace {

constexpr std::string_view kEncodings[] = {"gzip",     "deflate", "zstd", "",
                                           "identity", "x-gzip",  "GZIP", "br"};

}  // namespace

int TestOne(std::string_view input) {
  if (input.size() < 2) return 0;
  const auto selector = [&](size_t i) { return static_cast<uint8_t>(input[i]); };
  const std::string_view encoding = kEncodings[selector(0) % std::size(kEncodings)];
  // 0 .. 4 MiB in 64 uneven steps, 0 and 1 included.
  const size_t cap = selector(1) % 64 == 0 ? 0 : size_t{1} << (selector(1) % 64 * 22 / 63);
  const std::string_view body = input.substr(2);

  std::string out;
  const Status st = codec::Decompress(encoding, body, cap, &out);
  if (!st.ok()) {
    if (st.message().empty()) Fail("error without a message", std::string(encoding));
    return 0;
  }
  if (out.size() > cap) Fail("output over the cap", std::to_string(out.size()));

  // The cap is exact: the same body fits in exactly its output size and not in a byte less,
  // and then the answer is "too large" (413), not "corrupt" (400).
  std::string again;
  const Status exact = codec::Decompress(encoding, body, out.size(), &again);
  if (!exact.ok() || again != out) Fail("cap = output size fails", exact.message());
  if (!out.empty()) {
    const Status under = codec::Decompress(encoding, body, out.size() - 1, &again);
    if (under.code() != StatusCode::kTooLarge) {
      Fail("cap = output size - 1 is not 'too large'", under.message());
    }
  }
  return 0;
}

}  // namespace spanhouse::fuzz
