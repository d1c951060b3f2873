#include "receivers/intake/intake.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "codec/compression.h"
#include "codec/otlp_encode.h"
#include "receivers/durable/logged_request.h"

namespace spanhouse::receivers {

namespace {

std::string_view TrimCoding(std::string_view coding) {
  while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) {
    coding.remove_prefix(1);
  }
  while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
    coding.remove_suffix(1);
  return coding;
}

void Count(IntakeStats& stats, Outcome outcome) {
  switch (outcome) {
    case Outcome::kAccepted:
      stats.requests_accepted++;
      break;
    case Outcome::kBadData:
      stats.rejected_malformed++;
      break;
    case Outcome::kTooLarge:
      stats.rejected_too_large++;
      break;
    case Outcome::kTooManySpans:
      stats.rejected_too_many_spans++;
      break;
    case Outcome::kUnsupported:
      stats.rejected_media_type++;
      break;
    case Outcome::kMemoryFull:
      stats.rejected_queue_full++;
      break;
    case Outcome::kDurableFull:
      stats.rejected_durable_full++;
      break;
    case Outcome::kShuttingDown:
      stats.rejected_shutting_down++;
      break;
    case Outcome::kDurableError:
      stats.durable_errors++;
      break;
  }
}

int RetryAfterS(Outcome outcome) {
  switch (outcome) {
    case Outcome::kMemoryFull:
    case Outcome::kDurableFull:
      return 1;
    case Outcome::kShuttingDown:
    case Outcome::kDurableError:
      return 5;
    default:
      return 0;
  }
}

IntakeResult Accepted(const pipeline::FilterReport& filtered, const pipeline::SpanFilter* filter) {
  IntakeResult r;
  r.rejected_spans = filtered.rejected_spans();
  // A report that is not clean came from `filter`.
  if (!filtered.clean()) r.message = filtered.Message(filter->limits());
  return r;
}

}  // namespace

int HttpStatusOf(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAccepted:
      return 200;
    case Outcome::kBadData:
      return 400;
    case Outcome::kTooLarge:
    case Outcome::kTooManySpans:
      return 413;
    case Outcome::kUnsupported:
      return 415;
    case Outcome::kMemoryFull:
    case Outcome::kDurableFull:
      return 429;
    case Outcome::kShuttingDown:
    case Outcome::kDurableError:
      return 503;
  }
  return 500;
}

bool IsCompressed(std::string_view coding) {
  while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) {
    coding.remove_prefix(1);
  }
  while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
    coding.remove_suffix(1);
  if (coding.empty()) return false;
  constexpr std::string_view kIdentity = "identity";
  return !std::equal(
      coding.begin(), coding.end(), kIdentity.begin(), kIdentity.end(),
      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

Intake::Intake(IntakeOptions options, pipeline::ShardedQueue& queue, pipeline::MemoryBudget& budget,
               pipeline::SpanFilter* filter, std::shared_ptr<IntakeStats> stats)
    : opts_(options), queue_(queue), budget_(budget), filter_(filter), stats_(std::move(stats)) {}

IntakeResult Intake::Refuse(Outcome outcome, std::string message) {
  Count(*stats_, outcome);
  IntakeResult r;
  r.outcome = outcome;
  r.message = std::move(message);
  r.retry_after_s = RetryAfterS(outcome);
  return r;
}

Intake::Submitted Intake::Submit(pipeline::durable::BodyFormat format, std::string body,
                                 std::string_view content_encoding, const Later& later) {
  stats_->requests++;
  content_encoding = TrimCoding(content_encoding);
  // Reserve before decoding: twice the body (decoded columns plus the body
  // itself), or for a compressed body twice a bounded guess at its
  // decompressed size. Corrected to the batch's real size once decoded.
  const bool compressed = IsCompressed(content_encoding);
  const size_t estimate =
      compressed ? std::min<size_t>(body.size() * 8, opts_.max_body_bytes) * 2 : body.size() * 2;
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
      return {false, Refuse(Outcome::kMemoryFull, "spanhouse is at its memory limit, retry later")};
    }
  }

  if (compressed) {
    std::string decompressed;
    Status st = codec::Decompress(content_encoding, body, opts_.max_body_bytes, &decompressed);
    if (!st.ok()) {
      const Outcome o = st.code() == StatusCode::kTooLarge           ? Outcome::kTooLarge
                        : st.code() == StatusCode::kUnsupportedMedia ? Outcome::kUnsupported
                                                                     : Outcome::kBadData;
      return {false, Refuse(o, st.message())};
    }
    body = std::move(decompressed);
  } else if (body.size() > opts_.max_body_bytes) {
    return {false, Refuse(Outcome::kTooLarge, "body exceeds the size limit")};
  }

  // A protobuf body becomes the batch's source (the batch points into it);
  // a JSON one is read in place and freed once decoded.
  auto batch = std::make_unique<SpanBatch>();
  const Status st = DecodeBody(format, body, batch.get());
  body = std::string();
  if (!st.ok()) return {false, Refuse(Outcome::kBadData, st.message())};
  stats_->spans_received += batch->span_count();
  if (batch->span_count() > opts_.max_spans_per_request) {
    return {false,
            Refuse(Outcome::kTooManySpans, "request has " + std::to_string(batch->span_count()) +
                                               " spans, over the limit of " +
                                               std::to_string(opts_.max_spans_per_request) +
                                               " per request: send smaller batches")};
  }
  pipeline::FilterReport filtered;
  const auto now_ns = static_cast<uint64_t>(
      std::chrono::nanoseconds(std::chrono::system_clock::now().time_since_epoch()).count());
  if (filter_ != nullptr) filter_->Apply(*batch, now_ns, &filtered);
  const size_t n = batch->span_count();
  if (n == 0) {
    stats_->requests_accepted++;
    return {false, Accepted(filtered, filter_)};
  }
  pipeline::durable::SegmentLog::Ref ref;
  if (opts_.log != nullptr) {
    // The receive time, the body's format and the body: read back, it is
    // decoded and filtered again against that time (logged_request.h). A
    // protobuf body (OTLP or Zipkin) is logged as it came, the batch's
    // source; a JSON one as OTLP protobuf encoded from the (filtered) batch:
    // smaller on disk than the JSON, and filtering it again changes nothing.
    pipeline::durable::BodyFormat logged = format;
    std::string encoded;
    std::string_view record = batch->source();
    if (record.empty()) {
      encoded = codec::EncodeOtlpProto(*batch);
      record = encoded;
      logged = pipeline::durable::BodyFormat::kOtlpProto;
    }
    switch (opts_.log->Append(pipeline::durable::RecordKind::kEncodedRequest,
                              pipeline::durable::EncodedRequestRecordHead(now_ns, logged), record,
                              &ref)) {
      case pipeline::durable::SegmentLog::AppendResult::kOk:
        break;
      case pipeline::durable::SegmentLog::AppendResult::kFull:
        return {false, Refuse(Outcome::kDurableFull, "durable queue full, retry later")};
      case pipeline::durable::SegmentLog::AppendResult::kError:
        return {false, Refuse(Outcome::kDurableError, "cannot write the durable queue")};
    }
  }
  if (!spilled) reservation.Resize(batch->MemoryBytes());
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
        return {false, Refuse(Outcome::kMemoryFull, "queue full, retry later")};
      case pipeline::SpanQueue::PushResult::kClosed:
        return {false, Refuse(Outcome::kShuttingDown, "shutting down, retry later")};
    }
  }
  // Queued (or spilled) first, so the writer works on the spans while the
  // fsync runs. The answer waits for the fdatasync that covers the record
  // (group commit: one for every request written meanwhile), but the
  // receiver's thread does not: the log's sync thread answers.
  if (opts_.log != nullptr && opts_.log->options().fsync_always) {
    auto accepted = std::make_shared<IntakeResult>(Accepted(filtered, filter_));
    opts_.log->OnDurable(lsn, [answer = later(), accepted, stats = stats_, n](bool durable) {
      if (!durable) {
        stats->durable_errors++;
        IntakeResult failed;
        failed.outcome = Outcome::kDurableError;
        failed.message = "the durable queue could not sync the request";
        failed.retry_after_s = RetryAfterS(Outcome::kDurableError);
        return answer(std::move(failed));
      }
      stats->requests_accepted++;
      stats->spans_accepted += n;
      answer(std::move(*accepted));
    });
    return {true, {}};
  }
  stats_->requests_accepted++;
  stats_->spans_accepted += n;
  return {false, Accepted(filtered, filter_)};
}

}  // namespace spanhouse::receivers
