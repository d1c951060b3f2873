#include "receivers/intake/intake.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "codec/compression.h"
#include "codec/otlp_encode.h"
#include "pipeline/sampling/tail_window.h"

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

int RetryAfterS(StatusCode code) {
  switch (code) {
    case StatusCode::kResourceExhausted:
      return 1;
    case StatusCode::kUnavailable:
      return 5;
    default:
      return 0;
  }
}

// `duplicates`: spans accepted before, named in the message as a warning
// (not rejected: the client must not send them again).
IntakeResult Accepted(const pipeline::FilterReport& filtered, const pipeline::SpanFilter* filter,
                      size_t duplicates = 0) {
  IntakeResult r;
  r.rejected_spans = filtered.rejected_spans();
  // A report that is not clean came from `filter`.
  if (!filtered.clean()) r.message = filtered.Message(filter->limits());
  if (duplicates > 0) {
    if (!r.message.empty()) r.message += "; ";
    r.message +=
        std::to_string(duplicates) + " spans were accepted before (a retried request): kept once";
  }
  return r;
}

// Hands an appended request to the tail window (held until its traces are
// decided; spilled when they do not fit) or to every sink. `batch` null: it
// was spilled, and the sinks read its record back. With tail sampling, the
// peer sinks take their spans at once: their owners sample them.
Status Hand(pipeline::durable::DurableQueue& queue, std::unique_ptr<SpanBatch>& batch,
            Reservation& reservation, sink::Ticket& ticket, size_t bytes, size_t n,
            uint64_t now_ns) {
  pipeline::TailWindow* window = queue.tail_window();
  if (window != nullptr) {
    queue.DeliverBeforeTail(batch.get(), ticket, bytes, n);
    if (batch != nullptr && window->Hold(batch, reservation, ticket, bytes, n, now_ns)) {
      return Status::Ok();
    }
    batch.reset();  // spilled: decided when read back
    reservation.Reset();
    return queue.DeliverAfterTail(nullptr, std::move(reservation), std::move(ticket), bytes, n);
  }
  return queue.Deliver(std::move(batch), std::move(reservation), std::move(ticket), bytes, n);
}

// `b` without the spans `seen` marks.
std::unique_ptr<SpanBatch> WithoutSeen(const SpanBatch& b, const std::vector<uint8_t>& seen) {
  std::vector<uint32_t> keep;
  keep.reserve(b.span_count());
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    if (seen[i] == 0) keep.push_back(i);
  }
  auto out = std::make_unique<SpanBatch>();
  out->AppendSpans(b, keep.data(), keep.size());
  return out;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::nanoseconds(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

bool IsCompressed(std::string_view coding) {
  coding = TrimCoding(coding);
  if (coding.empty()) return false;
  constexpr std::string_view kIdentity = "identity";
  return !std::equal(
      coding.begin(), coding.end(), kIdentity.begin(), kIdentity.end(),
      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

Intake::Intake(IntakeOptions options, pipeline::durable::DurableQueue& queue,
               std::shared_ptr<IntakeStats> stats)
    : opts_(std::move(options)), queue_(queue), filter_(queue.filter()), stats_(std::move(stats)) {}

IntakeResult Intake::Refuse(const Status& st, std::atomic<uint64_t> IntakeStats::*counter) {
  ((*stats_).*counter)++;
  IntakeResult r;
  r.code = st.code();
  r.message = st.message();
  r.retry_after_s = RetryAfterS(st.code());
  return r;
}

IntakeResult Intake::Decode(codec::BodyFormat format, std::string body,
                            std::string_view content_encoding, SpanBatch* batch) {
  if (IsCompressed(content_encoding)) {
    std::string decompressed;
    Status st = codec::Decompress(content_encoding, body, opts_.max_body_bytes, &decompressed);
    if (!st.ok()) {
      auto counter = st.code() == StatusCode::kTooLarge ? &IntakeStats::rejected_too_large
                     : st.code() == StatusCode::kUnsupportedMedia
                         ? &IntakeStats::rejected_media_type
                         : &IntakeStats::rejected_malformed;
      if (counter == &IntakeStats::rejected_malformed) st = Status::Invalid(st.message());
      return Refuse(st, counter);
    }
    body = std::move(decompressed);
  } else if (body.size() > opts_.max_body_bytes) {
    return Refuse(Status::TooLarge("body exceeds the size limit"),
                  &IntakeStats::rejected_too_large);
  }
  // A protobuf body becomes the batch's source (the batch points into it);
  // a JSON one is read in place and freed once decoded.
  const Status st = codec::DecodeBody(format, body, batch);
  if (!st.ok()) return Refuse(Status::Invalid(st.message()), &IntakeStats::rejected_malformed);
  stats_->spans_received += batch->span_count();
  if (batch->span_count() > opts_.max_spans_per_request) {
    return Refuse(Status::TooLarge("request has " + std::to_string(batch->span_count()) +
                                   " spans, over the limit of " +
                                   std::to_string(opts_.max_spans_per_request) +
                                   " per request: send smaller batches"),
                  &IntakeStats::rejected_too_many_spans);
  }
  return {};
}

Intake::Submitted Intake::Submit(codec::BodyFormat format, std::string body,
                                 std::string_view content_encoding, const Later& later,
                                 bool from_peer) {
  stats_->requests++;
  if (from_peer) stats_->requests_from_peers++;
  content_encoding = TrimCoding(content_encoding);
  // Reserve before decoding: twice the body (decoded columns plus the body
  // itself), or for a compressed body twice a bounded guess at its
  // decompressed size. Corrected to the batch's real size once decoded.
  const size_t estimate = IsCompressed(content_encoding)
                              ? std::min<size_t>(body.size() * 8, opts_.max_body_bytes) * 2
                              : body.size() * 2;
  // With the durable queue a request the memory budget cannot take now
  // waits on disk, read back by each sink as memory comes; so does every
  // request while every sink has such a backlog, so that it comes after.
  const bool durable = queue_.durable();
  bool spilled = durable && queue_.AllBacklogged();
  MemoryBudget& budget = queue_.budget();
  Reservation reservation;
  if (!spilled) {
    if (budget.ReserveWithin(estimate, opts_.memory_wait)) {
      reservation = Reservation(&budget, estimate);
    } else if (durable) {
      spilled = true;
    } else {
      return {false, Refuse(Status::Exhausted("spanhouse is at its memory limit, retry later"),
                            &IntakeStats::rejected_queue_full)};
    }
  }

  auto batch = std::make_unique<SpanBatch>();
  if (IntakeResult r = Decode(format, std::move(body), content_encoding, batch.get()); !r.ok()) {
    return {false, std::move(r)};
  }
  batch->peer_view = from_peer ? SpanBatch::kViewHere : opts_.peer_view ? opts_.peer_view() : 0;
  pipeline::FilterReport filtered;
  const uint64_t now_ns = NowNs();
  if (filter_ != nullptr) filter_->Apply(*batch, now_ns, &filtered);
  // A retry's spans, accepted before, go no further; the rest are noted,
  // provisionally until this request is accepted (Commit) or refused (Forget).
  pipeline::DedupIndex* dedup = opts_.dedup;
  auto admission = dedup != nullptr ? std::make_shared<pipeline::DedupIndex::Admission>() : nullptr;
  size_t seen = 0;
  if (dedup != nullptr && !batch->empty()) {
    std::vector<uint8_t> was_seen;
    seen = dedup->Admit(*batch, now_ns, &was_seen, admission.get());
    if (seen > 0) {
      stats_->spans_duplicate += seen;
      batch = WithoutSeen(*batch, was_seen);  // no source: its record is encoded below
    }
  }
  const size_t n = batch->span_count();
  if (n == 0) {
    stats_->requests_accepted++;
    return {false, Accepted(filtered, filter_, seen)};
  }
  // Refused from here on: the spans noted are forgotten.
  auto refuse = [&](const Status& st, std::atomic<uint64_t> IntakeStats::*counter) {
    if (dedup != nullptr) dedup->Forget(*admission);
    return Submitted{false, Refuse(st, counter)};
  };
  sink::Ticket ticket;
  if (durable) {
    // Read back, the record is filtered again against `now_ns` (which
    // changes nothing of spans filtered once). A spilled request, which every
    // sink reads back from the log, is logged as the decoded batch's columnar
    // bytes: each read-back copies them instead of decoding again. Otherwise
    // (a sink with a backlog reads it back; a replay after a crash) the
    // smallest record: a protobuf body (OTLP or Zipkin) as it came, the
    // batch's source; one without a source (JSON, or a retry's spans taken
    // out) as OTLP protobuf encoded from the batch. (Columnar bytes are ~1.5x
    // larger; decision 0055.)
    codec::BodyFormat logged = format;
    std::string encoded;
    std::string_view record = batch->source();
    if (spilled) {
      batch->AppendColumnar(&encoded);
      record = encoded;
      logged = codec::BodyFormat::kColumnar;
    } else if (record.empty()) {
      encoded = codec::EncodeOtlpProto(*batch);
      record = encoded;
      logged = codec::BodyFormat::kOtlpProto;
    }
    if (Status st = queue_.Append(now_ns, logged, record, &ticket, {}, batch->peer_view);
        !st.ok()) {
      return refuse(st, st.code() == StatusCode::kResourceExhausted
                            ? &IntakeStats::rejected_durable_full
                            : &IntakeStats::durable_errors);
    }
    // In the log, so stored even if refused below (a replay at the next
    // start): a retry of it is a duplicate from now on, unless the answer
    // waits for an fsync, which decides.
    if (dedup != nullptr && !queue_.fsync_always()) dedup->Commit(*admission);
  }
  const uint64_t lsn = ticket.lsn();
  const size_t bytes = batch->MemoryBytes();
  if (!spilled) reservation.Resize(bytes);
  if (spilled) {
    batch.reset();  // the sinks read the record back when memory allows
    reservation.Reset();
  }
  auto counter_of = [](const Status& st) {
    return st.code() == StatusCode::kResourceExhausted ? &IntakeStats::rejected_queue_full
                                                       : &IntakeStats::rejected_shutting_down;
  };
  if (!queue_.fsync_always()) {
    // Delivered at once: with the interval policy the record is as durable
    // as it will be until the next sync, whoever holds the spans.
    if (Status st = Hand(queue_, batch, reservation, ticket, bytes, n, now_ns); !st.ok()) {
      // In the log (stored at the next start, so a retry is a duplicate), or
      // without a log (not stored: forgotten).
      if (durable) return {false, Refuse(st, counter_of(st))};
      return refuse(st, counter_of(st));
    }
    if (dedup != nullptr && !durable) dedup->Commit(*admission);
    stats_->requests_accepted++;
    stats_->spans_accepted += n;
    return {false, Accepted(filtered, filter_, seen)};
  }
  // The answer waits for the fdatasync that covers the record (group
  // commit: one for every request written meanwhile), but the receiver's
  // thread does not: the log's sync thread answers. No sink sees the spans
  // before that sync: a 503 for a failed one means no sink has them, and
  // the record, if it reached the disk anyway, is replayed at the next
  // start, its spans noted as seen then (decision 0053).
  struct Held {
    std::unique_ptr<SpanBatch> batch;
    Reservation reservation;
    sink::Ticket ticket;
  };
  auto held =
      std::make_shared<Held>(Held{std::move(batch), std::move(reservation), std::move(ticket)});
  auto accepted = std::make_shared<IntakeResult>(Accepted(filtered, filter_, seen));
  pipeline::durable::DurableQueue* queue = &queue_;
  queue_.OnDurable(lsn, [answer = later(), accepted, stats = stats_, n, bytes, now_ns, dedup,
                         admission, held, queue, counter_of](bool synced) {
    if (!synced) {
      // Not stored by this process; a retry must be taken again.
      if (dedup != nullptr) dedup->Forget(*admission);
      stats->durable_errors++;
      IntakeResult failed;
      failed.code = StatusCode::kUnavailable;
      failed.message = "the durable queue could not sync the request";
      failed.retry_after_s = RetryAfterS(StatusCode::kUnavailable);
      return answer(std::move(failed));
    }
    if (dedup != nullptr) dedup->Commit(*admission);  // durable: stored, now or at the next start
    if (Status st = Hand(*queue, held->batch, held->reservation, held->ticket, bytes, n, now_ns);
        !st.ok()) {
      ((*stats).*counter_of(st))++;
      IntakeResult refused;
      refused.code = st.code();
      refused.message = st.message();
      refused.retry_after_s = RetryAfterS(st.code());
      return answer(std::move(refused));
    }
    stats->requests_accepted++;
    stats->spans_accepted += n;
    answer(std::move(*accepted));
  });
  return {true, {}};
}

Status Intake::Redirect(std::unique_ptr<SpanBatch> batch, uint64_t view) {
  if (batch == nullptr || batch->empty()) return Status::Ok();
  batch->peer_view = view;
  const uint64_t now_ns = NowNs();
  const size_t n = batch->span_count();
  sink::Ticket ticket;
  if (queue_.durable()) {
    std::string record;
    batch->AppendColumnar(&record);
    SH_RETURN_IF_ERROR(
        queue_.Append(now_ns, codec::BodyFormat::kColumnar, record, &ticket, {}, view));
  }
  const size_t bytes = batch->MemoryBytes();
  MemoryBudget& budget = queue_.budget();
  Reservation reservation;
  if (budget.ReserveWithin(bytes, std::chrono::milliseconds(0))) {
    reservation = Reservation(&budget, bytes);
  } else if (queue_.durable()) {
    batch.reset();  // read back from its record when memory allows
  } else {
    return Status::Exhausted("spanhouse is at its memory limit, retry later");
  }
  SH_RETURN_IF_ERROR(Hand(queue_, batch, reservation, ticket, bytes, n, now_ns));
  stats_->requests_accepted++;
  stats_->spans_accepted += n;
  return Status::Ok();
}

}  // namespace spanhouse::receivers
