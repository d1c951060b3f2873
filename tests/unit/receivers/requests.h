// Request bodies the receivers' tests send: OTLP in protobuf (hand-encoded)
// and JSON, gzip, spans at given times.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/span_batch.h"
#include "net/http_server.h"
#include "testdata/gzip.h"

namespace spanhouse::receivers {

inline constexpr std::string_view kTraceHex = "5b8efff798038103d269b633813fc60c";
inline constexpr std::string_view kSpanHex = "eee19b7ec3c1b174";

// ---- payloads ----

inline std::string JsonRequest(std::string_view trace_hex = kTraceHex,
                               std::string_view name = "x") {
  return "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"" +
         std::string(trace_hex) + "\",\"spanId\":\"" + std::string(kSpanHex) + "\",\"name\":\"" +
         std::string(name) + "\"}]}]}]}";
}

// A tiny protobuf writer: just what ExportTraceServiceRequest needs.
inline void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
inline std::string LenField(uint32_t field, std::string_view payload) {
  std::string out;
  PutVarint(out, field << 3 | 2);
  PutVarint(out, payload.size());
  out.append(payload);
  return out;
}
inline std::string Unhex(std::string_view hex) {
  std::string out(hex.size() / 2, '\0');
  EXPECT_TRUE(FromHex(hex, reinterpret_cast<uint8_t*>(out.data()), out.size()));
  return out;
}

// ExportTraceServiceRequest{resource_spans{scope_spans{spans: n x Span}}}.
inline std::string ProtoRequest(std::string_view trace_hex = kTraceHex, int spans = 1) {
  std::string scope_spans;
  for (int i = 0; i < spans; ++i) {
    // Span{trace_id = 1, span_id = 2, name = 5}
    std::string span = LenField(1, Unhex(trace_hex)) + LenField(2, Unhex(kSpanHex)) +
                       LenField(5, "span-" + std::to_string(i));
    scope_spans += LenField(2, span);  // ScopeSpans.spans = 2
  }
  std::string resource_spans = LenField(2, scope_spans);  // ResourceSpans.scope_spans = 2
  return LenField(1, resource_spans);  // ExportTraceServiceRequest.resource_spans = 1
}

inline std::string Gzip(std::string_view in) {
  return testdata::Gzip(in, Z_BEST_COMPRESSION);
}

// A JSON request padded with trailing whitespace to exactly `size` bytes.
inline std::string JsonRequestOfSize(size_t size) {
  std::string body = JsonRequest();
  EXPECT_LE(body.size(), size);
  body.resize(size, ' ');
  return body;
}

inline void PutFixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// One span per start time, each 1 ms long (span ids from the index).
inline std::string TimedProtoRequest(std::string_view trace_hex,
                                     const std::vector<uint64_t>& starts) {
  std::string scope_spans;
  for (size_t i = 0; i < starts.size(); ++i) {
    std::string span_id(8, '\0');
    span_id[7] = static_cast<char>(i + 1);
    std::string span = LenField(1, Unhex(trace_hex)) + LenField(2, span_id) +
                       LenField(5, "span-" + std::to_string(i));
    PutVarint(span, 7 << 3 | 1);  // start_time_unix_nano, fixed64
    PutFixed64(span, starts[i]);
    PutVarint(span, 8 << 3 | 1);  // end_time_unix_nano
    PutFixed64(span, starts[i] + 1000000);
    scope_spans += LenField(2, span);
  }
  return LenField(1, LenField(2, scope_spans));
}

inline uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

inline constexpr uint64_t kHourNs = 3600ull * 1000000000ull;

// A protobuf message's fields by number: varints in `ints`, length-delimited
// ones in `bytes` (a test reads answers with it; other wire types fail).
struct Fields {
  std::multimap<uint32_t, uint64_t> ints;
  std::multimap<uint32_t, std::string> bytes;
};

inline bool ParseFields(std::string_view in, Fields* out) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; i < in.size() && shift < 64; shift += 7) {
      auto c = static_cast<uint8_t>(in[i++]);
      *v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  };
  while (i < in.size()) {
    uint64_t tag = 0;
    uint64_t v = 0;
    if (!varint(&tag)) return false;
    if ((tag & 7) == 0) {
      if (!varint(&v)) return false;
      out->ints.emplace(tag >> 3, v);
    } else if ((tag & 7) == 2) {
      if (!varint(&v) || v > in.size() - i) return false;
      out->bytes.emplace(tag >> 3, std::string(in.substr(i, v)));
      i += v;
    } else {
      return false;
    }
  }
  return true;
}

// A POST to `target` as the HTTP server hands it to a handler.
inline net::HttpRequest HttpPost(std::string_view target, std::string_view content_type,
                                 std::string body, std::string_view encoding = "") {
  net::HttpRequest r;
  r.method = "POST";
  r.target = std::string(target);
  r.content_type = std::string(content_type);
  r.content_encoding = std::string(encoding);
  r.body = std::move(body);
  return r;
}

}  // namespace spanhouse::receivers
