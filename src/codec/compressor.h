// Request body compression (gzip or zstd at a fast level): the load
// generator's requests and the inserts to a ClickHouse server, the state kept
// and reused from request to request.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace spanhouse::codec {

class Compressor {
 public:
  // `kind`: "none", "gzip" or "zstd".
  static bool Valid(std::string_view kind);
  explicit Compressor(std::string_view kind);
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // The Content-Encoding header value; empty for "none".
  std::string_view Encoding() const { return encoding_; }
  // Replaces `*out` with `in` compressed; false on an internal error.
  bool Compress(std::string_view in, std::string* out);

 private:
  struct State;
  std::string encoding_;
  std::unique_ptr<State> state_;
};

}  // namespace spanhouse::codec
