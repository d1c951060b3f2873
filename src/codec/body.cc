#include "codec/body.h"

#include <atomic>
#include <utility>

#include "codec/otlp.h"
#include "codec/zipkin.h"

namespace spanhouse::codec {

namespace {
std::atomic<uint64_t> decodes{0};
}  // namespace

uint64_t BodyDecodes() {
  return decodes.load(std::memory_order_relaxed);
}

Status DecodeBody(BodyFormat format, std::string& body, SpanBatch* batch) {
  if (format == BodyFormat::kColumnar) {
    std::string why;
    if (!batch->ReadColumnar(body, &why)) return Status::Invalid(why);
    return Status::Ok();
  }
  decodes.fetch_add(1, std::memory_order_relaxed);
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
    case BodyFormat::kColumnar:
      break;  // read above
    case BodyFormat::kZipkinProto: {
      // Its strings point into the body, kept as the batch's source.
      if (!batch->AdoptSource(body)) return DecodeZipkinProto(body, *batch);
      return DecodeZipkinProto(batch->source(), *batch);
    }
  }
  return Status::Invalid("unknown request body format");
}

}  // namespace spanhouse::codec
