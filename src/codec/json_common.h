// What the two JSON decoders (otlp_json.cc, zipkin_json.cc) share: the
// thread's simdjson parser and the reading of JSON integers.
#pragma once

#include <simdjson.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace spanhouse::codec::json {

// Largest body (and scratch text) whose buffers a thread keeps for the next request.
constexpr size_t kRetainedCapacity = size_t{4} << 20;

// Parses `body` with this thread's parser, whose buffers (the padded copy of
// the body included) are reused across requests, and returns walk(root).
template <typename Walk>
Status Parse(std::string_view body, Walk&& walk) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  const simdjson::error_code err = parser.parse(body.data(), body.size(), true).get(root);
  Status st = err != simdjson::SUCCESS
                  ? Status::Invalid(std::string("invalid JSON: ") + simdjson::error_message(err))
                  : walk(root);
  // The parser keeps buffers several times the size of the largest body it
  // has seen: do not let one huge request pin that memory on this thread.
  if (parser.capacity() > kRetainedCapacity) parser = simdjson::dom::parser();
  return st;
}

enum class IntegerRead { kOk, kNotInteger, kOutOfRange };

// A JSON number that holds an integer: an int64, a uint64 or an integral
// double (as in 1e3), as its sign and magnitude. Any other value (a string
// too) is kNotInteger; a double past the 64-bit range kOutOfRange.
inline IntegerRead ReadInteger(simdjson::dom::element e, bool& negative, uint64_t& mag) {
  using simdjson::dom::element_type;
  negative = false;
  mag = 0;
  switch (e.type()) {
    case element_type::INT64: {
      const int64_t v = e.get_int64().value_unsafe();
      negative = v < 0;
      mag = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      return IntegerRead::kOk;
    }
    case element_type::UINT64:
      mag = e.get_uint64().value_unsafe();
      return IntegerRead::kOk;
    case element_type::DOUBLE: {
      const double d = e.get_double().value_unsafe();
      if (!std::isfinite(d) || std::trunc(d) != d) return IntegerRead::kNotInteger;
      if (d < -9223372036854775808.0 || d >= 18446744073709551616.0) {
        return IntegerRead::kOutOfRange;
      }
      negative = d < 0;
      if (negative) {
        mag = d == -9223372036854775808.0 ? uint64_t{1} << 63 : static_cast<uint64_t>(-d);
      } else {
        mag = static_cast<uint64_t>(d);
      }
      return IntegerRead::kOk;
    }
    default:
      return IntegerRead::kNotInteger;
  }
}

}  // namespace spanhouse::codec::json
