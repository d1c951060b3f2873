#include "receivers/otlp_http/otlp_http_receiver.h"

#include <algorithm>
#include <cctype>

#include "codec/compression.h"
#include "codec/otlp.h"
#include "codec/otlp_encode.h"
#include "codec/value_text.h"
#include "pipeline/durable/request_record.h"

namespace spanhouse::receivers {

namespace {

enum class Encoding { kProto, kJson, kUnknown };

// Media types and content codings are case-insensitive (RFC 9110).
std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return t;
}

Encoding EncodingOf(std::string_view content_type) {
  const std::string t = Lower(Trim(content_type.substr(0, content_type.find(';'))));
  if (t == "application/x-protobuf" || t == "application/protobuf") return Encoding::kProto;
  if (t == "application/json") return Encoding::kJson;
  return Encoding::kUnknown;
}

// google.rpc.Status {int32 code = 1; string message = 2;}, the error body the
// OTLP/HTTP specification asks for, in the request's encoding.
void ErrorBody(Encoding enc, int http_status, int rpc_code, const std::string& message,
               net::HttpResponse& resp) {
  resp.status = http_status;
  if (enc == Encoding::kJson) {
    resp.content_type = "application/json";
    resp.body = "{\"code\":" + std::to_string(rpc_code) + ",\"message\":";
    codec::AppendJsonString(resp.body, message);
    resp.body += "}";
    return;
  }
  resp.content_type = "application/x-protobuf";
  resp.body.clear();
  auto varint = [&](uint64_t v) {
    while (v >= 0x80) {
      resp.body.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    resp.body.push_back(static_cast<char>(v));
  };
  resp.body.push_back(0x08);
  varint(static_cast<uint64_t>(rpc_code));
  resp.body.push_back(0x12);
  varint(message.size());
  resp.body += message;
}

// The 200. Spans the filter dropped are reported, not retried (OTLP partial
// success); with trims only, the message alone is a warning. A report that
// is not clean came from `filter`.
void Accepted(Encoding enc, const pipeline::FilterReport& filtered,
              const pipeline::SpanFilter* filter, net::HttpResponse& resp) {
  resp.status = 200;
  const std::string message = filtered.clean() ? "" : filtered.Message(filter->limits());
  if (enc == Encoding::kJson) {
    resp.content_type = "application/json";
    resp.body = codec::EncodeExportResponseJson(filtered.rejected_spans(), message);
  } else {
    resp.content_type = "application/x-protobuf";
    resp.body = codec::EncodeExportResponseProto(filtered.rejected_spans(), message);
  }
}

// gRPC codes used in google.rpc.Status bodies.
constexpr int kRpcInvalidArgument = 3;
constexpr int kRpcResourceExhausted = 8;
constexpr int kRpcUnavailable = 14;

}  // namespace

OtlpHttpReceiver::OtlpHttpReceiver(OtlpHttpOptions options, pipeline::ShardedQueue& queue,
                                   pipeline::MemoryBudget& budget, pipeline::SpanFilter* filter)
    : opts_(std::move(options)),
      queue_(queue),
      budget_(budget),
      filter_(filter),
      server_({.name = "otlp-http",
               .address = opts_.address,
               .max_body_bytes = opts_.max_body_bytes,
               .threads = opts_.threads,
               .authorize = opts_.authorize,
               .tls = opts_.tls},
              [this](net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later) {
                Handle(req, resp, later);
              }) {}

Status OtlpHttpReceiver::Start() {
  return server_.Start();
}
void OtlpHttpReceiver::Stop() {
  server_.Stop();
}

void OtlpHttpReceiver::Handle(net::HttpRequest& req, net::HttpResponse& resp,
                              net::HttpDeferral& later) {
  stats_->requests++;
  if (req.path() != "/v1/traces") {
    resp.status = 404;
    resp.body = "not found: this endpoint serves POST /v1/traces\n";
    return;
  }
  if (req.method != "POST") {
    resp.status = 405;
    resp.headers.emplace_back("Allow", "POST");
    resp.body = "method not allowed: use POST\n";
    return;
  }
  const Encoding enc = EncodingOf(req.content_type);
  if (enc == Encoding::kUnknown) {
    stats_->rejected_media_type++;
    resp.status = 415;
    resp.body = "unsupported Content-Type '" + req.content_type +
                "': use application/x-protobuf or application/json\n";
    return;
  }
  // Reserve before decoding: twice the body (decoded columns plus the body
  // itself), or for a compressed body twice a bounded guess at its
  // decompressed size. Corrected to the batch's real size once decoded.
  const std::string_view coding = Trim(req.content_encoding);
  const bool compressed = !coding.empty() && Lower(coding) != "identity";
  const size_t estimate = compressed
                              ? std::min<size_t>(req.body.size() * 8, opts_.max_body_bytes) * 2
                              : req.body.size() * 2;
  // With the durable queue a request the memory budget cannot take now
  // waits on disk (spill_backlog.h); so does every request while others
  // wait there, so that they are queued in order.
  SpillBacklog* const spill = opts_.log != nullptr ? opts_.spill : nullptr;
  bool spilled = spill != nullptr && spill->waiting();
  pipeline::Reservation reservation;
  if (!spilled) {
    if (budget_.ReserveWithin(estimate, opts_.memory_wait)) {
      reservation = pipeline::Reservation(&budget_, estimate);
    } else if (spill != nullptr) {
      spilled = true;
    } else {
      stats_->rejected_queue_full++;
      resp.headers.emplace_back("Retry-After", "1");
      return ErrorBody(enc, 429, kRpcResourceExhausted,
                       "spanhouse is at its memory limit, retry later", resp);
    }
  }

  std::string decompressed;
  std::string_view body = req.body;
  if (compressed) {
    Status st = codec::Decompress(coding, req.body, opts_.max_body_bytes, &decompressed);
    if (!st.ok()) {
      if (st.code() == StatusCode::kTooLarge) {
        stats_->rejected_too_large++;
        return ErrorBody(enc, 413, kRpcInvalidArgument, st.message(), resp);
      }
      if (st.code() == StatusCode::kUnsupportedMedia) {
        stats_->rejected_media_type++;
        return ErrorBody(enc, 415, kRpcInvalidArgument, st.message(), resp);
      }
      stats_->rejected_malformed++;
      return ErrorBody(enc, 400, kRpcInvalidArgument, st.message(), resp);
    }
    body = decompressed;
  } else if (body.size() > opts_.max_body_bytes) {
    stats_->rejected_too_large++;
    return ErrorBody(enc, 413, kRpcInvalidArgument, "body exceeds the size limit", resp);
  }

  auto batch = std::make_unique<SpanBatch>();
  Status st;
  if (enc == Encoding::kProto) {
    // The batch keeps the (decompressed) body and points into it rather
    // than copying every string out of it.
    st = codec::DecodeOtlpProtoOwned(compressed ? std::move(decompressed) : std::move(req.body),
                                     *batch);
  } else {
    st = codec::DecodeOtlpJson(body, *batch);
  }
  if (!st.ok()) {
    stats_->rejected_malformed++;
    return ErrorBody(enc, 400, kRpcInvalidArgument, st.message(), resp);
  }
  stats_->spans_received += batch->span_count();
  if (batch->span_count() > opts_.max_spans_per_request) {
    stats_->rejected_too_many_spans++;
    return ErrorBody(
        enc, 413, kRpcInvalidArgument,
        "request has " + std::to_string(batch->span_count()) + " spans, over the limit of " +
            std::to_string(opts_.max_spans_per_request) + " per request: send smaller batches",
        resp);
  }
  pipeline::FilterReport filtered;
  const auto now_ns = static_cast<uint64_t>(
      std::chrono::nanoseconds(std::chrono::system_clock::now().time_since_epoch()).count());
  if (filter_ != nullptr) filter_->Apply(*batch, now_ns, &filtered);
  const size_t n = batch->span_count();
  if (n > 0) {
    decompressed = std::string();  // give the transient memory back before it is accounted
    if (!spilled) reservation.Resize(batch->MemoryBytes());
    pipeline::durable::SegmentLog::Ref ref;
    if (opts_.log != nullptr) {
      // The record is the receive time, then the request as OTLP protobuf:
      // a protobuf body as it came (the batch keeps it as its source), JSON
      // encoded again (filtered already; filtering it again changes nothing).
      std::string encoded;
      std::string_view record = batch->source();
      if (enc != Encoding::kProto || record.empty()) {
        encoded = codec::EncodeOtlpProto(*batch);
        record = encoded;
      }
      switch (opts_.log->Append(pipeline::durable::RecordKind::kRequest,
                                pipeline::durable::RequestRecordHead(now_ns), record, &ref)) {
        case pipeline::durable::SegmentLog::AppendResult::kOk:
          break;
        case pipeline::durable::SegmentLog::AppendResult::kFull:
          stats_->rejected_durable_full++;
          resp.headers.emplace_back("Retry-After", "1");
          return ErrorBody(enc, 429, kRpcResourceExhausted, "durable queue full, retry later",
                           resp);
        case pipeline::durable::SegmentLog::AppendResult::kError:
          stats_->durable_errors++;
          resp.headers.emplace_back("Retry-After", "5");
          return ErrorBody(enc, 503, kRpcUnavailable, "cannot write the durable queue", resp);
      }
    }
    const uint64_t lsn = ref.lsn();
    if (spilled) {
      // The batch goes; the backlog reads the record back when memory allows.
      const size_t bytes = batch->MemoryBytes();
      batch.reset();
      spill->Add(std::move(ref), bytes, n);
    } else {
      switch (queue_.Push(std::move(batch), std::move(reservation), std::move(ref))) {
        case pipeline::SpanQueue::PushResult::kOk:
          break;
        case pipeline::SpanQueue::PushResult::kFull:
          stats_->rejected_queue_full++;
          resp.headers.emplace_back("Retry-After", "1");
          return ErrorBody(enc, 429, kRpcResourceExhausted, "queue full, retry later", resp);
        case pipeline::SpanQueue::PushResult::kClosed:
          stats_->rejected_shutting_down++;
          resp.headers.emplace_back("Retry-After", "5");
          return ErrorBody(enc, 503, kRpcUnavailable, "shutting down, retry later", resp);
      }
    }
    // Queued (or spilled) first, so the writer works on the spans while the
    // fsync runs. The answer waits for the fdatasync that covers the record
    // (group commit: one for every request written meanwhile), but this I/O
    // thread does not: the log's sync thread answers, and the connection
    // reads no further request until then.
    if (opts_.log != nullptr && opts_.log->options().fsync_always) {
      struct Pending {
        net::HttpResponder responder;
        net::HttpResponse accepted;
      };
      auto pending = std::make_shared<Pending>(Pending{later.Defer(), {}});
      Accepted(enc, filtered, filter_, pending->accepted);
      opts_.log->OnDurable(lsn, [pending, stats = stats_, enc, n](bool durable) {
        if (!durable) {
          stats->durable_errors++;
          net::HttpResponse failed;
          failed.headers.emplace_back("Retry-After", "5");
          ErrorBody(enc, 503, kRpcUnavailable, "the durable queue could not sync the request",
                    failed);
          return pending->responder.Respond(std::move(failed));
        }
        stats->requests_accepted++;
        stats->spans_accepted += n;
        pending->responder.Respond(std::move(pending->accepted));
      });
      return;
    }
  }
  stats_->requests_accepted++;
  stats_->spans_accepted += n;
  Accepted(enc, filtered, filter_, resp);
}

}  // namespace spanhouse::receivers
