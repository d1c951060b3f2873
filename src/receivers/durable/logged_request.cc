#include "receivers/durable/logged_request.h"

#include <utility>

#include "codec/otlp.h"
#include "pipeline/durable/request_record.h"

namespace spanhouse::receivers {

using pipeline::durable::RecordKind;

Status DecodeLoggedRequest(RecordKind kind, std::string payload, pipeline::SpanFilter* filter,
                           SpanBatch* batch) {
  uint64_t received_ns = 0;
  if (kind == RecordKind::kRequest) {
    if (!pipeline::durable::RequestReceivedNs(payload, &received_ns)) {
      return Status::Invalid("durable queue: request record too short");
    }
    payload.erase(0, pipeline::durable::kRequestHeadBytes);
  } else if (kind != RecordKind::kSpans) {
    return Status::Invalid("durable queue: not a span record");
  }
  if (Status st = codec::DecodeOtlpProtoOwned(std::move(payload), *batch); !st.ok()) return st;
  if (kind == RecordKind::kRequest && filter != nullptr) {
    pipeline::FilterReport report;
    filter->Apply(*batch, received_ns, &report, /*count=*/false);
  }
  return Status::Ok();
}

}  // namespace spanhouse::receivers
