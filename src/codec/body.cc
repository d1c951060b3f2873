#include "codec/body.h"

#include <utility>

#include "codec/otlp.h"
#include "codec/zipkin.h"

namespace spanhouse::codec {

Status DecodeBody(BodyFormat format, std::string& body, SpanBatch* batch) {
  switch (format) {
    case BodyFormat::kOtlpProto: {
      std::string taken = std::move(body);
      body.clear();
      return DecodeOtlpProtoOwned(std::move(taken), *batch);
    }
    case BodyFormat::kOtlpJson:
      return DecodeOtlpJson(body, *batch);
    case BodyFormat::kZipkinJson:
      return DecodeZipkinJson(body, *batch);
    case BodyFormat::kZipkinProto: {
      // Its strings point into the body, kept as the batch's source.
      if (!batch->AdoptSource(body)) return DecodeZipkinProto(body, *batch);
      return DecodeZipkinProto(batch->source(), *batch);
    }
  }
  return Status::Invalid("unknown request body format");
}

}  // namespace spanhouse::codec
