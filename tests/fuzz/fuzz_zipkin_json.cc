// libFuzzer target: the Zipkin JSON decoder (codec/zipkin_json.cc).
//
// Besides the invariants every decoder has, a differential check: a request the JSON decoder
// accepts is read again by a plain reference reader below into a span list, which is encoded
// as Zipkin protobuf (testdata/zipkin_spans.h) and decoded by the protobuf decoder. Both must
// give the same spans, so whatever the fuzzer finds in the JSON decoder is also checked
// against the other decoder and the shared mapping.
#include <simdjson.h>

#include <string>
#include <string_view>
#include <vector>

#include "codec/value_text.h"
#include "codec/zipkin.h"
#include "invariants.h"
#include "model/span_batch.h"
#include "testdata/zipkin_spans.h"

namespace spanhouse::fuzz {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using testdata::ZEndpoint;
using testdata::ZSpan;

// By value: a loop over `e.get_array().value_unsafe()` would outlive the result it points into.
simdjson::dom::array Arr(element e) {
  return e.get_array().value_unsafe();
}
simdjson::dom::object Obj(element e) {
  return e.get_object().value_unsafe();
}

// The value of a JSON integer the decoder accepted (a number, maybe written as a double).
int64_t Int(element e) {
  switch (e.type()) {
    case element_type::INT64:
      return e.get_int64().value_unsafe();
    case element_type::UINT64:
      return static_cast<int64_t>(e.get_uint64().value_unsafe());
    default:
      return static_cast<int64_t>(e.get_double().value_unsafe());
  }
}

uint64_t Uint(element e) {
  if (e.type() == element_type::DOUBLE) return static_cast<uint64_t>(e.get_double().value_unsafe());
  if (e.type() == element_type::UINT64) return e.get_uint64().value_unsafe();
  return static_cast<uint64_t>(e.get_int64().value_unsafe());
}

std::string Padded(std::string_view hex, size_t digits) {
  return std::string(digits - hex.size(), '0') + std::string(hex);
}

// A tag value as text: numbers and booleans as zipkin_json.cc stores them.
std::string TagText(element v) {
  std::string s;
  switch (v.type()) {
    case element_type::STRING:
      return std::string(v.get_string().value_unsafe());
    case element_type::BOOL:
      return v.get_bool().value_unsafe() ? "true" : "false";
    case element_type::INT64:
      codec::AppendInt(s, v.get_int64().value_unsafe());
      return s;
    case element_type::UINT64:
      return std::to_string(v.get_uint64().value_unsafe());
    default:
      codec::AppendDouble(s, v.get_double().value_unsafe());
      return s;
  }
}

void ReadEndpoint(element e, std::optional<ZEndpoint>& out) {
  if (!out) out = ZEndpoint{};
  for (auto f : Obj(e)) {
    if (f.value.is_null()) continue;
    if (f.key == "serviceName") out->service_name = f.value.get_string().value_unsafe();
    if (f.key == "ipv4") out->ipv4 = f.value.get_string().value_unsafe();
    if (f.key == "ipv6") out->ipv6 = f.value.get_string().value_unsafe();
    if (f.key == "port") {
      const int64_t port = Int(f.value);
      out->port = port > 0 ? static_cast<int32_t>(port) : 0;
    }
  }
}

// The spans of an accepted request, read the plain way: last member wins, as in the decoder.
std::vector<ZSpan> Reference(std::string_view body) {
  simdjson::dom::parser parser;
  std::vector<ZSpan> spans;
  const element root = parser.parse(body.data(), body.size(), true).value_unsafe();
  for (element e : Arr(root)) {
    ZSpan& s = spans.emplace_back();
    for (auto f : Obj(e)) {
      if (f.value.is_null()) continue;
      const std::string_view k = f.key;
      const element v = f.value;
      if (k == "traceId") {
        const std::string_view hex = v.get_string().value_unsafe();
        s.trace_id = Padded(hex, hex.size() <= 16 ? 16 : 32);
      } else if (k == "id") {
        s.id = Padded(v.get_string().value_unsafe(), 16);
      } else if (k == "parentId") {
        const std::string_view hex = v.get_string().value_unsafe();
        s.parent_id = hex.empty() ? "" : Padded(hex, 16);
      } else if (k == "name") {
        s.name = v.get_string().value_unsafe();
      } else if (k == "kind") {
        s.kind = v.get_string().value_unsafe();
      } else if (k == "timestamp") {
        s.timestamp = Uint(v);
      } else if (k == "duration") {
        s.duration = Uint(v);
      } else if (k == "debug") {
        s.debug = v.get_bool().value_unsafe();
      } else if (k == "shared") {
        s.shared = v.get_bool().value_unsafe();
      } else if (k == "localEndpoint") {
        ReadEndpoint(v, s.local);
      } else if (k == "remoteEndpoint") {
        ReadEndpoint(v, s.remote);
      } else if (k == "annotations") {
        for (element a : Arr(v)) {
          testdata::ZAnnotation& z = s.annotations.emplace_back();
          for (auto af : Obj(a)) {
            if (af.value.is_null()) continue;
            if (af.key == "timestamp") z.timestamp = Uint(af.value);
            if (af.key == "value") z.value = af.value.get_string().value_unsafe();
          }
        }
      } else if (k == "tags") {
        for (auto t : Obj(v)) {
          s.tags.emplace_back(std::string(t.key), TagText(t.value));
        }
      }
    }
  }
  return spans;
}

}  // namespace

int TestOne(std::string_view body) {
  SpanBatch batch;
  const Status st = codec::DecodeZipkinJson(body, batch);
  CheckAppends(st, batch, [&](SpanBatch& b) { return codec::DecodeZipkinJson(body, b); });
  if (!st.ok()) return 0;
  CheckZipkinMapping(batch);
  CheckReencodes(batch);

  // The same spans sent as protobuf decode to the same batch.
  const std::string proto = testdata::ZipkinProto(Reference(body));
  SpanBatch from_proto;
  const Status st_proto = codec::DecodeZipkinProto(proto, from_proto);
  if (!st_proto.ok()) Fail("the same spans as protobuf are refused", st_proto.message());
  std::string why;
  if (!batch.LogicallyEquals(from_proto, &why)) Fail("JSON and protobuf decode differently", why);
  return 0;
}

}  // namespace spanhouse::fuzz
