// Reading the protobuf wire format by hand: the field loop the hand-written
// decoders (otlp_proto.cc, zipkin_proto.cc) share.
//
// Every read is bounds-checked against the enclosing message, so any input
// ends in a field or an error, never in an out-of-bounds read. The first
// error is kept, with a message fit for the client, until the decoder
// returns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace spanhouse::codec::wire {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLen = 2;
constexpr uint32_t kFixed32 = 5;

// One field of a message, as read from the wire.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t num = 0;        // value of a varint, fixed64 or fixed32 field
  std::string_view bytes;  // payload of a length-delimited field
};

enum class Step { kField, kEnd, kError };

// The field loop over one request body. A decoder derives from it, walks
// each message with Next() and reports its own errors with Fail().
class Reader {
 public:
  explicit Reader(std::string_view body) : body_(body) {}

  // The first error recorded (moved out).
  Status TakeError() { return std::move(err_); }

 protected:
  size_t Offset(std::string_view at) const { return static_cast<size_t>(at.data() - body_.data()); }

  bool Fail(std::string message) {
    err_ = Status::Invalid(std::move(message));
    return false;
  }

  // Most varints on the wire (tags, lengths of short strings) are one byte:
  // take that path inline and leave the loop to ReadVarintSlow.
  bool ReadVarint(std::string_view& in, uint64_t& v) {
    if (!in.empty() && static_cast<uint8_t>(in[0]) < 0x80) [[likely]] {
      v = static_cast<uint8_t>(in[0]);
      in.remove_prefix(1);
      return true;
    }
    return ReadVarintSlow(in, v);
  }

  // Reads the next field of the message whose remaining bytes are `in`.
  // Unknown wire types and groups are errors: their length cannot be known
  // (groups) or they are not protobuf at all (6, 7). Called for every field
  // of every span and attribute, so the error text is built out of line.
  [[gnu::always_inline]] Step Next(std::string_view& in, const char* msg, Field& f) {
    if (in.empty()) return Step::kEnd;
    const size_t at = Offset(in);
    uint64_t tag;
    if (!ReadVarint(in, tag)) [[unlikely]]
      return Step::kError;
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire = static_cast<uint32_t>(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff) [[unlikely]]
      return BadFieldNumber(tag >> 3, msg, at);
    switch (f.wire) {
      case kLen: {
        const size_t len_at = Offset(in);
        uint64_t len;
        if (!ReadVarint(in, len)) [[unlikely]]
          return Step::kError;
        if (len > in.size()) [[unlikely]]
          return LengthTooLong(len, f.number, msg, len_at, in.size());
        f.bytes = in.substr(0, static_cast<size_t>(len));
        in.remove_prefix(static_cast<size_t>(len));
        return Step::kField;
      }
      case kVarint:
        if (!ReadVarint(in, f.num)) [[unlikely]]
          return Step::kError;
        return Step::kField;
      case kFixed64:
      case kFixed32: {
        const size_t n = f.wire == kFixed64 ? 8 : 4;
        if (in.size() < n) [[unlikely]]
          return TruncatedFixed(n, f.number, msg, Offset(in));
        // Little-endian on the wire, whatever the host.
        f.num = 0;
        for (size_t i = 0; i < n; ++i) {
          f.num |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
        }
        in.remove_prefix(n);
        return Step::kField;
      }
      default:
        return BadWireType(f.wire, f.number, msg);
    }
  }

  // Deliberately stricter than protobuf: a known field sent with the wrong
  // wire type is an error rather than an unknown field, because it only ever
  // comes from a broken client and silently dropping e.g. a span's trace id
  // would turn into a more confusing error further on.
  [[gnu::always_inline]] bool Expect(const Field& f, uint32_t wire, const char* msg,
                                     const char* name) {
    if (f.wire == wire) [[likely]]
      return true;
    return WrongWire(f, wire, msg, name);
  }

  // Calls on_field(field) for each field of the message whose bytes are `in`,
  // until it returns false. False on a wire error or when on_field does.
  template <typename OnField>
  bool Fields(std::string_view in, const char* msg, OnField&& on_field) {
    Field f;
    for (;;) {
      const Step st = Next(in, msg, f);
      if (st == Step::kEnd) return true;
      if (st == Step::kError) return false;
      if (!on_field(static_cast<const Field&>(f))) return false;
    }
  }

 private:
  [[gnu::noinline]] bool ReadVarintSlow(std::string_view& in, uint64_t& v);
  [[gnu::noinline, gnu::cold]] Step BadFieldNumber(uint64_t number, const char* msg, size_t at);
  [[gnu::noinline, gnu::cold]] Step LengthTooLong(uint64_t len, uint32_t number, const char* msg,
                                                  size_t len_at, size_t left);
  [[gnu::noinline, gnu::cold]] Step TruncatedFixed(size_t n, uint32_t number, const char* msg,
                                                   size_t at);
  [[gnu::noinline, gnu::cold]] Step BadWireType(uint32_t wire, uint32_t number, const char* msg);
  [[gnu::noinline, gnu::cold]] bool WrongWire(const Field& f, uint32_t wire, const char* msg,
                                              const char* name);

  std::string_view body_;
  Status err_;
};

}  // namespace spanhouse::codec::wire
