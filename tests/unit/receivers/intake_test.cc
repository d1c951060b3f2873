// The shared intake on its own: each protocol-neutral result (a StatusCode)
// and its counter, the record it logs for each body format (kEncodedRequest:
// receive time, format, body as decoded) and that record decoded back.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec/body.h"
#include "net/http_status.h"
#include "pipeline/dedup/dedup_index.h"
#include "pipeline/durable/records.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "receivers/intake/intake.h"
#include "testdata/zipkin_spans.h"
#include "unit/receivers/requests.h"
#include "unit/receivers/test_pipeline.h"

namespace spanhouse::receivers {
namespace {

using codec::BodyFormat;
using pipeline::durable::RecordKind;
using std::chrono::milliseconds;

Intake::Later NoLater() {
  return [] {
    ADD_FAILURE() << "deferred without fsync always";
    return Intake::Answer([](IntakeResult&&) {});
  };
}

// The intake over a 1 MiB budget and a queue (with a log in `log_dir`, or
// none) whose one sink keeps what it is handed.
struct IntakeFixture {
  explicit IntakeFixture(std::string log_dir = "", pipeline::SpanFilter* filter = nullptr)
      : p({.budget_bytes = 1 << 20, .log_dir = std::move(log_dir), .filter = filter}),
        intake({.max_body_bytes = 4096, .max_spans_per_request = 3, .memory_wait = milliseconds(0)},
               *p.queue, stats) {}
  IntakeResult Submit(BodyFormat f, std::string body, std::string_view coding = "") {
    Intake::Submitted s = intake.Submit(f, std::move(body), coding, NoLater());
    EXPECT_FALSE(s.deferred);
    return s.result;
  }
  TestPipeline p;
  std::shared_ptr<IntakeStats> stats = std::make_shared<IntakeStats>();
  Intake intake;
};

TEST(Intake, EveryOutcomeIsCountedOnce) {
  IntakeFixture f;
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 2)).code, StatusCode::kOk);
  ASSERT_TRUE(f.p.sink.Pop(milliseconds(0)).has_value());  // its memory released
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpJson, "{").code, StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Submit(BodyFormat::kZipkinJson, std::string(5000, ' ')).code, StatusCode::kTooLarge);
  // Too many spans is "too large" too; its own counter tells them apart.
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 4)).code,
            StatusCode::kTooLarge);
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpProto, ProtoRequest(), "br").code,
            StatusCode::kUnsupportedMedia);
  ASSERT_TRUE(f.p.budget.TryReserve(1 << 20));
  IntakeResult full = f.Submit(BodyFormat::kOtlpProto, ProtoRequest());
  f.p.budget.Release(1 << 20);
  EXPECT_EQ(full.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(full.retry_after_s, 1);
  f.p.sink.Drain();
  IntakeResult closed = f.Submit(BodyFormat::kOtlpProto, ProtoRequest());
  EXPECT_EQ(closed.code, StatusCode::kUnavailable);
  EXPECT_EQ(closed.retry_after_s, 5);
  const IntakeStats& s = *f.stats;
  EXPECT_EQ(s.requests, 7u);
  EXPECT_EQ(s.requests_accepted, 1u);
  EXPECT_EQ(s.spans_accepted, 2u);
  EXPECT_EQ(s.rejected_malformed, 1u);
  EXPECT_EQ(s.rejected_too_large, 1u);
  EXPECT_EQ(s.rejected_too_many_spans, 1u);
  EXPECT_EQ(s.rejected_media_type, 1u);
  EXPECT_EQ(s.rejected_queue_full, 1u);
  EXPECT_EQ(s.rejected_shutting_down, 1u);
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kTooLarge, StatusCode::kUnsupportedMedia,
        StatusCode::kResourceExhausted, StatusCode::kUnavailable}) {
    EXPECT_NE(net::HttpStatusOf(c), 200);
  }
}

TEST(Intake, TheFilterReportComesBackWithTheAcceptance) {
  pipeline::SpanFilter filter{pipeline::FilterLimits{}};
  IntakeFixture f("", &filter);
  const uint64_t now = NowNs();
  IntakeResult r =
      f.Submit(BodyFormat::kOtlpProto, TimedProtoRequest(kTraceHex, {now, now + 2 * kHourNs}));
  EXPECT_EQ(r.code, StatusCode::kOk);
  EXPECT_EQ(r.rejected_spans, 1u);
  EXPECT_NE(r.message.find("future_start"), std::string::npos) << r.message;
  EXPECT_EQ(f.stats->spans_received, 2u);
  EXPECT_EQ(f.stats->spans_accepted, 1u);
}

// A protobuf body is logged as it came, with its format; a JSON one as OTLP
// protobuf; each with the time it was received. Each decodes back as the
// request did; so do JSON records.
TEST(Intake, RecordsNameTheirDecoderAndDecodeBack) {
  TestLogDir dir("intake-records");
  const std::vector<testdata::ZSpan> zipkin = {testdata::ZipkinFullSpan()};
  const std::vector<std::pair<BodyFormat, std::string>> sent = {
      {BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 2)},
      {BodyFormat::kOtlpJson, JsonRequest()},
      {BodyFormat::kZipkinJson, testdata::ZipkinJson(zipkin)},
      {BodyFormat::kZipkinProto, testdata::ZipkinProto(zipkin)}};
  const uint64_t before = NowNs();
  {
    IntakeFixture f(dir.path);
    ASSERT_TRUE(f.p.queue->durable());
    for (const auto& [format, body] : sent) {
      // The Zipkin JSON one gzipped: the record holds it decompressed.
      const bool gzip = format == BodyFormat::kZipkinJson;
      ASSERT_TRUE(f.Submit(format, gzip ? Gzip(body) : body, gzip ? "gzip" : "").ok());
    }
    while (f.p.sink.Pop(milliseconds(0))) {
    }
  }
  const uint64_t after = NowNs();
  pipeline::durable::LogOptions lo;
  lo.dir = dir.path;
  lo.fsync_always = false;
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
  size_t i = 0;
  log->ReadReplay([&](const pipeline::durable::SegmentLog::Record& r, uint64_t) {
    ASSERT_LT(i, sent.size());
    EXPECT_EQ(r.kind, RecordKind::kEncodedRequest);
    ASSERT_GE(r.payload.size(), pipeline::durable::kEncodedRequestHeadBytes);
    // The head: u64 receive time, u8 body format.
    const uint64_t received = pipeline::durable::GetLe(r.payload, 0, 8);
    EXPECT_GE(received, before);
    EXPECT_LE(received, after);
    const auto format_byte = static_cast<uint8_t>(r.payload[8]);
    ASSERT_TRUE(codec::IsBodyFormat(format_byte));
    const auto format = static_cast<BodyFormat>(format_byte);
    const bool json =
        sent[i].first == BodyFormat::kOtlpJson || sent[i].first == BodyFormat::kZipkinJson;
    EXPECT_EQ(format, json ? BodyFormat::kOtlpProto : sent[i].first);
    if (!json) {
      EXPECT_EQ(r.payload.substr(pipeline::durable::kEncodedRequestHeadBytes), sent[i].second);
    }
    SpanBatch back, direct;
    ASSERT_TRUE(
        pipeline::durable::DecodeRequestRecord(r.kind, std::string(r.payload), nullptr, &back)
            .ok());
    std::string body = sent[i].second;
    ASSERT_TRUE(codec::DecodeBody(sent[i].first, body, &direct).ok());
    std::string why;
    EXPECT_TRUE(direct.LogicallyEquals(back, &why)) << why;
    ++i;
  });
  EXPECT_EQ(i, sent.size());
  log.reset();

  // JSON records (another build may write them) decode too.
  for (const auto& [format, body] : sent) {
    SpanBatch back, direct;
    std::string copy = body;
    ASSERT_TRUE(codec::DecodeBody(format, copy, &direct).ok());
    ASSERT_TRUE(pipeline::durable::DecodeRequestRecord(
                    RecordKind::kEncodedRequest,
                    pipeline::durable::EncodedRequestHead(NowNs(), format) + body, nullptr, &back)
                    .ok());
    std::string why;
    EXPECT_TRUE(direct.LogicallyEquals(back, &why)) << why;
  }
  // (A format this build does not know is a bad record: pipeline/records_test.cc.)
}

// Decoded once: a request its sink cannot take now waits on disk as its
// decoded batch's columnar bytes, and the sink reads those back without a
// second decode. Only the request that found the sink full, logged before
// the sink had a backlog, is decoded again when read back.
// Several nodes as one: each request carries the nodes up when it came, in its batch and its
// record; one forwarded by another node is this node's whole; spans handed on again
// (Redirect) are logged under the view given.
TEST(Intake, ARequestCarriesTheNodesUpWhenItCame) {
  TestLogDir dir("intake-views");
  {
    TestPipeline p({.budget_bytes = 1 << 20, .log_dir = dir.path});
    auto stats = std::make_shared<IntakeStats>();
    uint64_t up = 0b111;
    Intake intake({.max_body_bytes = 4096,
                   .max_spans_per_request = 3,
                   .memory_wait = milliseconds(0),
                   .peer_view = [&] { return up; }},
                  *p.queue, stats);
    ASSERT_TRUE(intake.Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 2), "", NoLater())
                    .result.ok());
    up = 0b101;
    ASSERT_TRUE(intake
                    .Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 1), "", NoLater(),
                            /*from_peer=*/true)
                    .result.ok());
    auto redirected = std::make_unique<SpanBatch>();
    std::string body = ProtoRequest(kTraceHex, 2);
    ASSERT_TRUE(codec::DecodeBody(BodyFormat::kOtlpProto, body, redirected.get()).ok());
    ASSERT_TRUE(intake.Redirect(std::move(redirected), 0b011).ok());
    std::vector<uint64_t> live;
    while (auto got = p.sink.Pop(milliseconds(0))) live.push_back(got->batch->peer_view);
    EXPECT_EQ(live, (std::vector<uint64_t>{0b111, SpanBatch::kViewHere, 0b011}));
    EXPECT_EQ(stats->requests_from_peers, 1u);
    EXPECT_EQ(stats->requests_accepted, 3u);
    EXPECT_EQ(stats->spans_accepted, 5u);
  }
  pipeline::durable::LogOptions lo;
  lo.dir = dir.path;
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
  std::vector<uint64_t> logged;
  log->ReadReplay([&](const pipeline::durable::SegmentLog::Record& r, uint64_t) {
    if (!pipeline::durable::IsRequestRecord(r.kind)) return;
    EXPECT_EQ(r.kind, RecordKind::kViewedRequest);
    SpanBatch back;
    ASSERT_TRUE(
        pipeline::durable::DecodeRequestRecord(r.kind, std::string(r.payload), nullptr, &back)
            .ok());
    logged.push_back(back.peer_view);
  });
  EXPECT_EQ(logged, (std::vector<uint64_t>{0b111, SpanBatch::kViewHere, 0b011}));
}

TEST(Intake, ARequestReadBackByItsSinkIsDecodedOnce) {
  TestLogDir dir("intake-decode-once");
  IntakeFixture f(dir.path);
  f.p.sink.Refuse(true);
  const uint64_t before = codec::BodyDecodes();
  constexpr int kRequests = 6;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(f.Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 2)).ok());
  }
  EXPECT_TRUE(f.p.backlogged());
  f.p.sink.Refuse(false);
  size_t spans = 0;
  for (int i = 0; i < kRequests; ++i) {
    std::optional<sink::QueuedBatch> got = f.p.sink.Pop(milliseconds(10000));
    ASSERT_TRUE(got.has_value());
    if (got->batch != nullptr) spans += got->batch->span_count();
  }
  EXPECT_EQ(spans, 2u * kRequests);
  // One decode at intake each, one more for the first read back.
  EXPECT_EQ(codec::BodyDecodes() - before, static_cast<uint64_t>(kRequests) + 1);
  // What the log holds: the first request as it came, the rest columnar.
  f.p.CloseQueue();
  pipeline::durable::LogOptions lo;
  lo.dir = dir.path;
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
  std::vector<BodyFormat> formats;
  log->ReadReplay([&](const pipeline::durable::SegmentLog::Record& r, uint64_t) {
    if (r.kind != RecordKind::kEncodedRequest) return;
    formats.push_back(static_cast<BodyFormat>(r.payload[8]));
  });
  std::vector<BodyFormat> want(kRequests, BodyFormat::kColumnar);
  want[0] = BodyFormat::kOtlpProto;
  EXPECT_EQ(formats, want);
}

// ---- spans accepted before (a retried request), dropped by the dedup index ----

std::unique_ptr<pipeline::DedupIndex> OpenDedup(const std::string& dir) {
  std::unique_ptr<pipeline::DedupIndex> idx;
  pipeline::DedupOptions o;
  o.max_bytes = 1 << 20;
  o.dir = dir;
  EXPECT_TRUE(pipeline::DedupIndex::Open(o, NowNs(), &idx).ok());
  return idx;
}

struct DedupFixture {
  DedupFixture(pipeline::DedupIndex* dedup, std::string log_dir, bool fsync_always = false)
      : p({.budget_bytes = 1 << 20, .log_dir = std::move(log_dir), .fsync_always = fsync_always}),
        intake({.max_body_bytes = 1 << 16,
                .max_spans_per_request = 100,
                .memory_wait = milliseconds(0),
                .dedup = dedup},
               *p.queue, stats) {}
  ~DedupFixture() { p.CloseQueue(); }
  IntakeResult Submit(std::string body) {
    Intake::Submitted s = intake.Submit(BodyFormat::kOtlpProto, std::move(body), "", NoLater());
    EXPECT_FALSE(s.deferred);
    return s.result;
  }
  size_t Queued() {
    size_t n = 0;
    while (auto b = p.sink.Pop(milliseconds(0))) n += b->batch->span_count();
    return n;
  }
  TestPipeline p;
  std::shared_ptr<IntakeStats> stats = std::make_shared<IntakeStats>();
  Intake intake;
};

TEST(Intake, ARetriedRequestIsAcceptedAndQueuedOnce) {
  TestLogDir dir("intake-dedup");
  auto dedup = OpenDedup(dir.path + "/dedup");
  DedupFixture f(dedup.get(), dir.path + "/queue");
  // Two spans with the same ids and different names: both are spans.
  IntakeResult first = f.Submit(ProtoRequest(kTraceHex, 2));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.message, "");
  EXPECT_EQ(f.Queued(), 2u);
  IntakeResult again = f.Submit(ProtoRequest(kTraceHex, 2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.rejected_spans, 0u);  // accepted: the client must not send them again
  EXPECT_NE(again.message.find("2 spans were accepted before"), std::string::npos) << again.message;
  EXPECT_EQ(f.Queued(), 0u);
  EXPECT_EQ(f.p.queue->log()->stats().records_appended, 1u);  // no record for nothing new
  // One new span among them: only it is queued, and only it is in the record.
  ASSERT_TRUE(f.Submit(ProtoRequest(kTraceHex, 3)).ok());
  EXPECT_EQ(f.Queued(), 1u);
  EXPECT_EQ(f.stats->spans_duplicate, 4u);
  EXPECT_EQ(f.stats->spans_accepted, 3u);
  EXPECT_EQ(f.stats->requests_accepted, 3u);
  f.p.CloseQueue();
  pipeline::durable::LogOptions lo;
  lo.dir = dir.path + "/queue";
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
  std::vector<size_t> spans;
  log->ReadReplay([&](const pipeline::durable::SegmentLog::Record& r, uint64_t) {
    if (r.kind != RecordKind::kEncodedRequest) return;
    SpanBatch back;
    ASSERT_TRUE(
        pipeline::durable::DecodeRequestRecord(r.kind, std::string(r.payload), nullptr, &back)
            .ok());
    spans.push_back(back.span_count());
  });
  EXPECT_EQ(spans, (std::vector<size_t>{2, 1}));
}

TEST(Intake, ARefusedRequestIsTakenWhenRetried) {
  TestLogDir dir("intake-dedup-refused");
  auto dedup = OpenDedup(dir.path);
  {
    DedupFixture f(dedup.get(), "");  // no log: refused means not stored
    f.p.sink.Drain();
    EXPECT_EQ(f.Submit(ProtoRequest(kTraceHex, 2)).code, StatusCode::kUnavailable);
  }
  DedupFixture f(dedup.get(), "");
  ASSERT_TRUE(f.Submit(ProtoRequest(kTraceHex, 2)).ok());
  EXPECT_EQ(f.Queued(), 2u);
  EXPECT_EQ(f.stats->spans_duplicate, 0u);
}

TEST(Intake, ARequestWhoseSyncFailedIsTakenWhenRetried) {
  TestLogDir dir("intake-dedup-sync");
  auto dedup = OpenDedup(dir.path + "/dedup");
  {
    DedupFixture f(dedup.get(), dir.path + "/q1", /*fsync_always=*/true);
    f.p.queue->Close();  // the log: the sync that would cover the request never comes
    std::promise<IntakeResult> answered;
    Intake::Submitted s =
        f.intake.Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 2), "", [&answered] {
          return Intake::Answer(
              [&answered](IntakeResult&& r) { answered.set_value(std::move(r)); });
        });
    ASSERT_TRUE(s.deferred);
    EXPECT_EQ(answered.get_future().get().code, StatusCode::kUnavailable);
  }
  DedupFixture f(dedup.get(), dir.path + "/q2");
  ASSERT_TRUE(f.Submit(ProtoRequest(kTraceHex, 2)).ok());
  EXPECT_EQ(f.Queued(), 2u);
  EXPECT_EQ(f.stats->spans_duplicate, 0u);
  // Once accepted, a retry is a duplicate.
  ASSERT_TRUE(f.Submit(ProtoRequest(kTraceHex, 2)).ok());
  EXPECT_EQ(f.stats->spans_duplicate, 2u);
}

}  // namespace
}  // namespace spanhouse::receivers
