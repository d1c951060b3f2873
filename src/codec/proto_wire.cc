// The protobuf field loop's slow and error paths (proto_wire.h).
#include "codec/proto_wire.h"

#include <string>

namespace spanhouse::codec::wire {

bool Reader::ReadVarintSlow(std::string_view& in, uint64_t& v) {
  v = 0;
  const size_t n = in.size() < 10 ? in.size() : 10;
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<uint8_t>(in[i]);
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      in.remove_prefix(i + 1);
      return true;
    }
  }
  if (n == 10) {
    return Fail("varint longer than 10 bytes at offset " + std::to_string(Offset(in)));
  }
  return Fail("truncated varint at offset " + std::to_string(Offset(in)));
}

Step Reader::BadFieldNumber(uint64_t number, const char* msg, size_t at) {
  Fail("invalid field number " + std::to_string(number) + " in " + msg + " at offset " +
       std::to_string(at));
  return Step::kError;
}

Step Reader::LengthTooLong(uint64_t len, uint32_t number, const char* msg, size_t len_at,
                           size_t left) {
  Fail("length " + std::to_string(len) + " of field " + std::to_string(number) + " in " + msg +
       " at offset " + std::to_string(len_at) + " exceeds the " + std::to_string(left) +
       " bytes left");
  return Step::kError;
}

Step Reader::TruncatedFixed(size_t n, uint32_t number, const char* msg, size_t at) {
  Fail(std::string("truncated ") + (n == 8 ? "fixed64" : "fixed32") + " for field " +
       std::to_string(number) + " in " + msg + " at offset " + std::to_string(at));
  return Step::kError;
}

Step Reader::BadWireType(uint32_t wire, uint32_t number, const char* msg) {
  Fail("invalid wire type " + std::to_string(wire) + " for field " + std::to_string(number) +
       " in " + msg + (wire == 3 || wire == 4 ? " (groups are not supported)" : ""));
  return Step::kError;
}

bool Reader::WrongWire(const Field& f, uint32_t wire, const char* msg, const char* name) {
  return Fail("wrong wire type " + std::to_string(f.wire) + " for field " +
              std::to_string(f.number) + " (" + name + ") in " + msg + ", expected " +
              std::to_string(wire));
}

}  // namespace spanhouse::codec::wire
