// Request body decompression with a hard cap on the decompressed size, so a
// small compressed body cannot expand into gigabytes (a "zip bomb").
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace spanhouse::codec {

// Largest zstd window accepted (2^23 = 8 MiB): bounds the decoder's memory
// whatever frame header a client sends.
inline constexpr int kZstdMaxWindowLog = 23;

// `encoding` is the Content-Encoding header: "", "identity", "gzip", "deflate"
// or "zstd". Unknown encodings give kUnsupportedMedia, corrupt data
// kInvalidArgument, more than `max_bytes` of output kTooLarge.
Status Decompress(std::string_view encoding, std::string_view in, size_t max_bytes,
                  std::string* out);

}  // namespace spanhouse::codec
