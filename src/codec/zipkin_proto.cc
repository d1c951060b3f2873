// Zipkin v2 protobuf decoder (zipkin.proto3.ListOfSpans), written against the
// wire format by hand like otlp_proto.cc and sharing its field loop
// (proto_wire.h): each span is walked once, straight from the request bytes
// into the batch's columns through the shared mapping (zipkin_mapping.h).
//
// Semantics as in otlp_proto.cc: fields in any order, unknown fields skipped,
// the last occurrence of a scalar wins, a repeated endpoint merges into the
// first, a known field with the wrong wire type is an error.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "codec/arena_room.h"
#include "codec/proto_wire.h"
#include "codec/zipkin.h"
#include "codec/zipkin_mapping.h"

namespace spanhouse::codec {
namespace {

using wire::Field;
using wire::kFixed64;
using wire::kLen;
using wire::kVarint;
using zipkin::SpanFields;

class Decoder : public wire::Reader {
 public:
  Decoder(std::string_view body, SpanBatch& out)
      : Reader(body), out_(out), map_(out), first_span_(static_cast<uint32_t>(out.span_count())) {}

  Status Run(std::string_view in) {
    const bool ok = Fields(in, "ListOfSpans", [&](const Field& f) {
      return f.number != 1 || (Expect(f, kLen, "ListOfSpans", "spans") && Span(f.bytes));
    });
    return ok ? Status::Ok() : TakeError();
  }

 private:
  bool Span(std::string_view in) {
    SpanFields zf;
    const uint32_t i = map_.BeginSpan(zf);
    const uint32_t n = i - first_span_;  // number within this request, for messages
    SpanBatch::Spans& sp = out_.spans;
    bool have_trace_id = false;
    bool have_id = false;
    uint32_t annotations = 0;
    const bool ok = Fields(in, "Span", [&](const Field& f) {
      switch (f.number) {
        case 1:  // trace_id: 8 or 16 bytes, big-endian
          if (!Expect(f, kLen, "Span", "trace_id")) return false;
          if (f.bytes.size() != 8 && f.bytes.size() != 16) {
            return Fail(SpanPrefix(n) + ": trace_id must be 8 or 16 bytes, got " +
                        std::to_string(f.bytes.size()));
          }
          sp.trace_id[i] = TraceId{};
          std::memcpy(sp.trace_id[i].data() + 16 - f.bytes.size(), f.bytes.data(), f.bytes.size());
          have_trace_id = true;
          break;
        case 2:  // parent_id
          if (!Expect(f, kLen, "Span", "parent_id")) return false;
          if (f.bytes.empty()) {
            sp.parent_span_id[i] = SpanId{};
          } else if (f.bytes.size() == 8) {
            std::memcpy(sp.parent_span_id[i].data(), f.bytes.data(), 8);
          } else {
            return Fail(SpanPrefix(n) + ": parent_id must be empty or 8 bytes, got " +
                        std::to_string(f.bytes.size()));
          }
          break;
        case 3:  // id
          if (!Expect(f, kLen, "Span", "id")) return false;
          if (f.bytes.size() != 8) {
            return Fail(SpanPrefix(n) + ": id must be 8 bytes, got " +
                        std::to_string(f.bytes.size()));
          }
          std::memcpy(sp.span_id[i].data(), f.bytes.data(), 8);
          have_id = true;
          break;
        case 4:  // kind: an int32 enum, a negative value arrives sign-extended
          if (!Expect(f, kVarint, "Span", "kind")) return false;
          if (const auto kind = static_cast<int32_t>(f.num);
              kind < 0 || kind > static_cast<int32_t>(zipkin::Kind::kConsumer)) {
            return Fail(SpanPrefix(n) + ": kind " + std::to_string(kind) +
                        " is not a valid Span.Kind (0-4)");
          }
          zf.kind = static_cast<zipkin::Kind>(f.num);
          break;
        case 5:
          if (!Expect(f, kLen, "Span", "name")) return false;
          sp.name[i] = out_.RefString(f.bytes);
          break;
        case 6:
          if (!Expect(f, kFixed64, "Span", "timestamp") || !Micros(f.num, n, "timestamp")) {
            return false;
          }
          zf.timestamp_us = f.num;
          break;
        case 7:
          if (!Expect(f, kVarint, "Span", "duration") || !Micros(f.num, n, "duration")) {
            return false;
          }
          zf.duration_us = f.num;
          break;
        case 8:
          if (!Expect(f, kLen, "Span", "local_endpoint") ||
              !Endpoint(f.bytes, zf.local, n, "local_endpoint")) {
            return false;
          }
          break;
        case 9:
          if (!Expect(f, kLen, "Span", "remote_endpoint") ||
              !Endpoint(f.bytes, zf.remote, n, "remote_endpoint")) {
            return false;
          }
          break;
        case 10:
          if (!Expect(f, kLen, "Span", "annotations") ||
              !Annotation(f.bytes, i, n, annotations++)) {
            return false;
          }
          break;
        case 11:
          if (!Expect(f, kLen, "Span", "tags") || !Tag(f.bytes, i, zf)) return false;
          break;
        case 12:
          if (!Expect(f, kVarint, "Span", "debug")) return false;
          zf.debug = f.num != 0;
          break;
        case 13:
          if (!Expect(f, kVarint, "Span", "shared")) return false;
          zf.shared = f.num != 0;
          break;
        default:
          break;
      }
      return true;
    });
    if (!ok) return false;
    // proto3 leaves empty bytes off the wire, so "missing" and "empty" are the same here.
    if (!have_trace_id) return Fail(SpanPrefix(n) + ": missing trace_id");
    if (!have_id) return Fail(SpanPrefix(n) + ": missing id");
    if (sp.parent_span_id[i] == sp.span_id[i]) sp.parent_span_id[i] = SpanId{};
    if (!map_.Finish(i, zf)) {
      return Fail(SpanPrefix(n) + ": timestamp + duration is past the largest time (" +
                  std::to_string(zipkin::kMaxMicros) + " microseconds)");
    }
    return true;
  }

  bool Endpoint(std::string_view in, zipkin::Endpoint& e, uint32_t n, const char* name) {
    return Fields(in, "Endpoint", [&](const Field& f) {
      switch (f.number) {
        case 1:
          if (!Expect(f, kLen, "Endpoint", "service_name")) return false;
          e.service_name = f.bytes;
          break;
        case 2:
          if (!Expect(f, kLen, "Endpoint", "ipv4")) return false;
          if (!f.bytes.empty() && f.bytes.size() != 4) {
            return Fail(SpanPrefix(n) + ": " + name + ".ipv4 must be empty or 4 bytes, got " +
                        std::to_string(f.bytes.size()));
          }
          e.has_ipv4 = !f.bytes.empty();
          if (e.has_ipv4) std::memcpy(e.ipv4.data(), f.bytes.data(), 4);
          break;
        case 3:
          if (!Expect(f, kLen, "Endpoint", "ipv6")) return false;
          if (!f.bytes.empty() && f.bytes.size() != 16) {
            return Fail(SpanPrefix(n) + ": " + name + ".ipv6 must be empty or 16 bytes, got " +
                        std::to_string(f.bytes.size()));
          }
          e.has_ipv6 = !f.bytes.empty();
          if (e.has_ipv6) std::memcpy(e.ipv6.data(), f.bytes.data(), 16);
          break;
        case 4: {
          if (!Expect(f, kVarint, "Endpoint", "port")) return false;
          const auto port = static_cast<int32_t>(f.num);
          if (port > 65535) {
            return Fail(SpanPrefix(n) + ": " + name + ".port " + std::to_string(port) +
                        " is out of range (at most 65535)");
          }
          e.port = port > 0 ? port : 0;  // Zipkin: zero or negative is no port
          break;
        }
        default:
          break;
      }
      return true;
    });
  }

  bool Annotation(std::string_view in, uint32_t i, uint32_t n, uint32_t k) {
    uint64_t timestamp = 0;
    std::string_view value;
    const bool ok = Fields(in, "Annotation", [&](const Field& f) {
      if (f.number == 1) {
        if (!Expect(f, kFixed64, "Annotation", "timestamp")) return false;
        timestamp = f.num;
      } else if (f.number == 2) {
        if (!Expect(f, kLen, "Annotation", "value")) return false;
        value = f.bytes;
      }
      return true;
    });
    if (!ok) return false;
    if (timestamp > zipkin::kMaxMicros) {
      return Fail(SpanPrefix(n) + " annotation " + std::to_string(k) + ": timestamp " +
                  std::to_string(timestamp) + " is past the largest time (" +
                  std::to_string(zipkin::kMaxMicros) + " microseconds)");
    }
    map_.Annotation(i, timestamp, value);
    return true;
  }

  // One entry of the tags map: key = 1, value = 2.
  bool Tag(std::string_view in, uint32_t i, SpanFields& zf) {
    std::string_view key, value;
    const bool ok = Fields(in, "Span.TagsEntry", [&](const Field& f) {
      if (f.number == 1) {
        if (!Expect(f, kLen, "Span.TagsEntry", "key")) return false;
        key = f.bytes;
      } else if (f.number == 2) {
        if (!Expect(f, kLen, "Span.TagsEntry", "value")) return false;
        value = f.bytes;
      }
      return true;
    });
    if (!ok) return false;
    map_.Tag(i, zf, key, value);
    return true;
  }

  bool Micros(uint64_t v, uint32_t n, const char* name) {
    if (v <= zipkin::kMaxMicros) return true;
    return Fail(SpanPrefix(n) + ": " + name + " " + std::to_string(v) +
                " microseconds is past the largest time (" + std::to_string(zipkin::kMaxMicros) +
                " microseconds)");
  }

  static std::string SpanPrefix(uint32_t n) { return "span " + std::to_string(n); }

  SpanBatch& out_;
  zipkin::RequestMapper map_;
  const uint32_t first_span_;
};

}  // namespace

Status DecodeZipkinProto(std::string_view body, SpanBatch& out) {
  // StrRef offsets into the arena are 31-bit, and an address of 4 bytes is
  // stored as up to 15 characters: refuse a body that could push the arena
  // past 2 GiB rather than hand out wrapped offsets.
  if (Status st = CheckArenaRoom(body.size(), out, SpanBatch::kSourceBit - 1, 8); !st.ok()) {
    return st;
  }
  return Decoder(body, out).Run(body);
}

}  // namespace spanhouse::codec
