// Requests read back from the durable queue: the receivers log each
// accepted request as one record (pipeline/durable/request_record.h); this
// turns such a record into the SpanBatch the receiver queued for it, for
// the replay at start and for requests that waited on disk for memory
// (spill_backlog.h).
#pragma once

#include <string>

#include "common/status.h"
#include "model/span_batch.h"
#include "pipeline/durable/request_record.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"

namespace spanhouse::receivers {

// Decodes a request body (decompressed, taken: a protobuf body becomes the
// batch's source, which the batch points into) of `format` into `batch`, which
// must be empty. The one decoder every receiver and the replay use.
Status DecodeBody(pipeline::durable::BodyFormat format, std::string body, SpanBatch* batch);

// Decodes a kEncodedRequest, kRequest or kSpans record's payload (taken) into
// `batch`. A kEncodedRequest or kRequest record's spans go through `filter`
// (when given) with the clock they were received at, uncounted: the spans
// the client was told were rejected are dropped again, the same values
// trimmed. A kSpans record (written before receive times were logged) is
// not filtered.
Status DecodeLoggedRequest(pipeline::durable::RecordKind kind, std::string payload,
                           pipeline::SpanFilter* filter, SpanBatch* batch);

}  // namespace spanhouse::receivers
