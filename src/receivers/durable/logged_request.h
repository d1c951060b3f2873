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

// Decodes a request body (decompressed) of `format` into `batch`, which must
// be empty. A protobuf body is taken (moved into the batch as its source,
// which the batch's strings point into; `body` is left empty); a JSON body is
// only read (its strings are copied), so the caller keeps it, e.g. to log it.
// The one decoder every receiver and the replay use.
Status DecodeBody(pipeline::durable::BodyFormat format, std::string& body, SpanBatch* batch);

// Decodes a kEncodedRequest, kRequest or kSpans record's payload (taken) into
// `batch`. A kEncodedRequest or kRequest record's spans go through `filter`
// (when given) with the clock they were received at, uncounted: the spans
// the client was told were rejected are dropped again, the same values
// trimmed. A kSpans record (written before receive times were logged) is
// not filtered.
Status DecodeLoggedRequest(pipeline::durable::RecordKind kind, std::string payload,
                           pipeline::SpanFilter* filter, SpanBatch* batch);

}  // namespace spanhouse::receivers
