// libFuzzer target: the OTLP/JSON decoder (codec/otlp_json.cc).
#include <string_view>

#include "codec/otlp.h"
#include "invariants.h"
#include "model/span_batch.h"

namespace spanhouse::fuzz {

int TestOne(std::string_view body) {
  SpanBatch batch;
  const Status st = codec::DecodeOtlpJson(body, batch);
  CheckAppends(st, batch, [&](SpanBatch& b) { return codec::DecodeOtlpJson(body, b); });
  // What JSON let in must be storable exactly as the same request sent as protobuf would be.
  if (st.ok()) CheckReencodes(batch);
  return 0;
}

}  // namespace spanhouse::fuzz
