// libFuzzer target: the OTLP/protobuf decoder (codec/otlp_proto.cc), on both of its entry
// points, the borrowing one and the one that keeps the body as the batch's source (the
// receiver's path, where strings point into the body instead of being copied).
#include <string>
#include <string_view>

#include "codec/otlp.h"
#include "invariants.h"
#include "model/span_batch.h"

namespace spanhouse::fuzz {

int TestOne(std::string_view body) {
  SpanBatch borrowed;
  const Status st = codec::DecodeOtlpProto(body, borrowed);
  SpanBatch owned;
  const Status st_owned = codec::DecodeOtlpProtoOwned(std::string(body), owned);

  // The two entry points differ only in where strings live: same verdict, same message.
  if (st.ok() != st_owned.ok() || st.message() != st_owned.message()) {
    Fail("entry points disagree", st.message() + " | " + st_owned.message());
  }
  CheckAppends(st_owned, owned,
               [&](SpanBatch& b) { return codec::DecodeOtlpProtoOwned(std::string(body), b); });
  if (!st.ok()) return 0;
  std::string why;
  if (!borrowed.LogicallyEquals(owned, &why)) Fail("entry points decode differently", why);
  CheckReencodes(owned);
  return 0;
}

}  // namespace spanhouse::fuzz
