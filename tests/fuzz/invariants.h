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
  // What the durable queue logs for a request it reads back: the batch's columnar bytes.
  std::string columnar;
  decoded.AppendColumnar(&columnar);
  SpanBatch back;
  if (!back.ReadColumnar(columnar, &why)) Fail("columnar bytes do not read back", why);
  if (!decoded.LogicallyEquals(back, &why)) Fail("columnar bytes read back differently", why);
}

// What the Zipkin mapping (codec/zipkin_mapping.h) promises of any batch a Zipkin decoder
// accepted: no links; a resource holds only service.name and resources have distinct
// service names; the tags the mapping consumes are not left as attributes (error only as
// "false", otel.status_code only with a value it does not know); times are whole microseconds
// from start to end; the kind is never UNSPECIFIED.
inline void CheckZipkinMapping(const SpanBatch& b) {
  for (size_t r = 0; r < b.resources.attrs.size(); ++r) {
    const Range a = b.resources.attrs[r];
    if (a.size() > 1 || (a.size() == 1 && b.Str(b.resource_attrs.key[a.begin]) != "service.name")) {
      Fail("zipkin resource", "holds more than service.name");
    }
    for (size_t o = 0; o < r; ++o) {
      if (b.Str(b.resources.service_name[o]) == b.Str(b.resources.service_name[r])) {
        Fail("zipkin resource", "two resources of one service");
      }
    }
  }
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    if (b.spans.links[i].size() != 0) Fail("zipkin span", "has links");
    if (b.spans.kind[i] == static_cast<uint8_t>(SpanKind::kUnspecified)) {
      Fail("zipkin span", "kind UNSPECIFIED");
    }
    if (b.spans.start_ns[i] % 1000 != 0 || b.spans.end_ns[i] % 1000 != 0 ||
        b.spans.end_ns[i] < b.spans.start_ns[i]) {
      Fail("zipkin span", "times are not whole microseconds from start to end");
    }
    const Range a = b.spans.attrs[i];
    for (uint32_t k = a.begin; k < a.end; ++k) {
      const std::string_view key = b.Str(b.span_attrs.key[k]);
      const std::string_view value = b.Str(b.span_attrs.value[k]);
      const bool consumed =
          (key == "error" && value != "false") ||
          (key == "otel.status_code" &&
           (value == "OK" || value == "ERROR" || value == "UNSET" || value == "STATUS_CODE_OK" ||
            value == "STATUS_CODE_ERROR" || value == "STATUS_CODE_UNSET")) ||
          key == "otel.scope.name" || key == "otel.scope.version" || key == "otel.library.name" ||
          key == "otel.library.version" || key == "w3c.tracestate";
      if (consumed) Fail("zipkin tag kept as an attribute", key);
    }
  }
}

}  // namespace spanhouse::fuzz
