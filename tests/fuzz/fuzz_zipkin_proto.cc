// libFuzzer target: the Zipkin protobuf decoder (codec/zipkin_proto.cc), borrowing the body
// and with the body kept as the batch's source (strings then point into it).
#include <string>
#include <string_view>

#include "codec/zipkin.h"
#include "invariants.h"
#include "model/span_batch.h"

namespace spanhouse::fuzz {
namespace {

Status DecodeOwned(std::string_view body, SpanBatch& b) {
  std::string copy(body);
  if (b.source().empty() && !copy.empty() && b.AdoptSource(copy)) {
    return codec::DecodeZipkinProto(b.source(), b);
  }
  return codec::DecodeZipkinProto(copy, b);
}

}  // namespace

int TestOne(std::string_view body) {
  SpanBatch borrowed;
  const Status st = codec::DecodeZipkinProto(body, borrowed);
  SpanBatch owned;
  const Status st_owned = DecodeOwned(body, owned);

  // Where strings live changes nothing: same verdict, same message, same spans.
  if (st.ok() != st_owned.ok() || st.message() != st_owned.message()) {
    Fail("borrowed and owned bodies disagree", st.message() + " | " + st_owned.message());
  }
  CheckAppends(st, borrowed, [&](SpanBatch& b) { return codec::DecodeZipkinProto(body, b); });
  if (!st.ok()) return 0;
  std::string why;
  if (!borrowed.LogicallyEquals(owned, &why)) Fail("owned body decodes differently", why);
  CheckZipkinMapping(owned);
  // What the receiver logs (the durable queue) and stores is this batch as OTLP protobuf.
  CheckReencodes(owned);
  return 0;
}

}  // namespace spanhouse::fuzz
