#include "receivers/durable/logged_request.h"

#include <utility>

#include "codec/otlp.h"
#include "codec/zipkin.h"

namespace spanhouse::receivers {

using pipeline::durable::BodyFormat;
using pipeline::durable::RecordKind;

Status DecodeBody(BodyFormat format, std::string& body, SpanBatch* batch) {
  switch (format) {
    case BodyFormat::kOtlpProto: {
      std::string taken = std::move(body);
      body.clear();
      return codec::DecodeOtlpProtoOwned(std::move(taken), *batch);
    }
    case BodyFormat::kOtlpJson:
      return codec::DecodeOtlpJson(body, *batch);
    case BodyFormat::kZipkinJson:
      return codec::DecodeZipkinJson(body, *batch);
    case BodyFormat::kZipkinProto: {
      // Its strings point into the body, kept as the batch's source.
      if (!batch->AdoptSource(body)) return codec::DecodeZipkinProto(body, *batch);
      return codec::DecodeZipkinProto(batch->source(), *batch);
    }
  }
  return Status::Invalid("unknown request body format");
}

Status DecodeLoggedRequest(RecordKind kind, std::string payload, pipeline::SpanFilter* filter,
                           SpanBatch* batch) {
  uint64_t received_ns = 0;
  BodyFormat format = BodyFormat::kOtlpProto;
  const bool timed = kind == RecordKind::kRequest || kind == RecordKind::kEncodedRequest;
  if (timed && !pipeline::durable::RequestReceivedNs(payload, &received_ns)) {
    return Status::Invalid("durable queue: request record too short");
  }
  if (kind == RecordKind::kEncodedRequest) {
    if (!pipeline::durable::EncodedRequestFormat(payload, &format)) {
      return Status::Invalid("durable queue: request record without a known body format");
    }
    payload.erase(0, pipeline::durable::kEncodedRequestHeadBytes);
  } else if (kind == RecordKind::kRequest) {
    payload.erase(0, pipeline::durable::kRequestHeadBytes);
  } else if (kind != RecordKind::kSpans) {
    return Status::Invalid("durable queue: not a span record");
  }
  if (Status st = DecodeBody(format, payload, batch); !st.ok()) return st;
  if (timed && filter != nullptr) {
    pipeline::FilterReport report;
    filter->Apply(*batch, received_ns, &report, /*count=*/false);
  }
  return Status::Ok();
}

}  // namespace spanhouse::receivers
