// The fuzz targets' entry point, and the checks they make on what a decoder accepted. A broken
// invariant aborts, which libFuzzer reports as a crash and saves the input, like a sanitizer
// report.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "codec/otlp.h"
#include "codec/otlp_encode.h"
#include "model/span_batch.h"

namespace spanhouse::fuzz {

// Each target's check of one input, called by libFuzzer through entry.cc. Returns 0 (libFuzzer
// reserves other values); a finding aborts.
int TestOne(std::string_view input);

[[noreturn]] inline void Fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "invariant broken: %.*s: %.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// A batch a decoder accepted must survive the protobuf encoder: what the encoder writes decodes
// to the same spans (every field, attribute, event and link, as the writer would store them),
// and encoding that again gives the same bytes. Anything the decoders let in that the encoder
// or the other decoder cannot represent shows up here, not later as a silent difference
// between a span sent as protobuf and the same span sent as JSON.
// A batch that already holds a request: its span's strings in the arena and in a source body
// of its own, as DecodeOtlpProtoOwned leaves them.
inline SpanBatch Prefilled() {
  static const std::string body = [] {
    SpanBatch b;
    const uint32_t r = b.AddResource();
    SpanBatch::AddAttr(b.resource_attrs, b.AddString("service.name"), ValueType::kString,
                       b.AddString("earlier"));
    b.resources.attrs[r].end = 1;
    b.ResolveServiceName(r);
    const uint32_t s = b.AddSpan(r, b.AddScope());
    b.spans.trace_id[s][0] = 1;
    b.spans.span_id[s][0] = 2;
    b.spans.name[s] = b.AddString("earlier span");
    return codec::EncodeOtlpProto(b);
  }();
  SpanBatch b;
  if (!codec::DecodeOtlpProtoOwned(body, b).ok()) Fail("prefilled batch", "does not decode");
  return b;
}

// The decoders append: decoding into a batch that already holds spans gives the same verdict
// and message as decoding alone and, when it accepts, adds exactly the spans decoding alone
// gave. `decode(batch)` decodes the input into `batch`; `alone` is the input decoded alone.
template <typename Decode>
void CheckAppends(const Status& st_alone, const SpanBatch& alone, Decode decode) {
  SpanBatch combined = Prefilled();
  const Status st = decode(combined);
  if (st.ok() != st_alone.ok() || st.message() != st_alone.message()) {
    Fail("decoding after other spans answers differently",
         st.message() + " | " + st_alone.message());
  }
  if (!st.ok()) return;
  SpanBatch expected = Prefilled();
  expected.Append(alone);
  std::string why;
  if (!combined.LogicallyEquals(expected, &why)) Fail("decoding after other spans differs", why);
}

inline void CheckReencodes(const SpanBatch& decoded) {
  const std::string encoded = codec::EncodeOtlpProto(decoded);
  SpanBatch again;
  const Status st = codec::DecodeOtlpProto(encoded, again);
  if (!st.ok()) Fail("re-encoded request does not decode", st.message());
  std::string why;
  if (!decoded.LogicallyEquals(again, &why)) Fail("re-encoded request decodes differently", why);
  if (codec::EncodeOtlpProto(again) != encoded) Fail("encoding is not stable", "second encoding");
}

}  // namespace spanhouse::fuzz
