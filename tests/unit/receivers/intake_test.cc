// The shared intake on its own: each protocol-neutral outcome and its
// counter, the record it logs for each body format (kEncodedRequest: receive
// time, format, body as decoded) and that record decoded back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/durable/request_record.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "receivers/durable/logged_request.h"
#include "receivers/intake/intake.h"
#include "testdata/zipkin_spans.h"
#include "unit/receivers/requests.h"

namespace spanhouse::receivers {
namespace {

using pipeline::durable::BodyFormat;
using pipeline::durable::RecordKind;
using std::chrono::milliseconds;

Intake::Later NoLater() {
  return [] {
    ADD_FAILURE() << "deferred without fsync always";
    return Intake::Answer([](IntakeResult&&) {});
  };
}

struct IntakeFixture {
  explicit IntakeFixture(pipeline::durable::SegmentLog* log = nullptr,
                         pipeline::SpanFilter* filter = nullptr)
      : intake({.max_body_bytes = 4096,
                .max_spans_per_request = 3,
                .memory_wait = milliseconds(0),
                .log = log},
               sharded, budget, filter, stats) {}
  IntakeResult Submit(BodyFormat f, std::string body, std::string_view coding = "") {
    Intake::Submitted s = intake.Submit(f, std::move(body), coding, NoLater());
    EXPECT_FALSE(s.deferred);
    return s.result;
  }
  pipeline::ShardedQueue sharded{1, 64 << 20};
  pipeline::MemoryBudget budget{1 << 20};
  std::shared_ptr<IntakeStats> stats = std::make_shared<IntakeStats>();
  Intake intake;
};

TEST(Intake, EveryOutcomeIsCountedOnce) {
  IntakeFixture f;
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 2)).outcome,
            Outcome::kAccepted);
  ASSERT_TRUE(f.sharded.shard(0).Pop(milliseconds(0)).has_value());  // its memory released
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpJson, "{").outcome, Outcome::kBadData);
  EXPECT_EQ(f.Submit(BodyFormat::kZipkinJson, std::string(5000, ' ')).outcome, Outcome::kTooLarge);
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 4)).outcome,
            Outcome::kTooManySpans);
  EXPECT_EQ(f.Submit(BodyFormat::kOtlpProto, ProtoRequest(), "br").outcome, Outcome::kUnsupported);
  ASSERT_TRUE(f.budget.TryReserve(1 << 20));
  IntakeResult full = f.Submit(BodyFormat::kOtlpProto, ProtoRequest());
  f.budget.Release(1 << 20);
  EXPECT_EQ(full.outcome, Outcome::kMemoryFull);
  EXPECT_EQ(full.retry_after_s, 1);
  f.sharded.Close();
  IntakeResult closed = f.Submit(BodyFormat::kOtlpProto, ProtoRequest());
  EXPECT_EQ(closed.outcome, Outcome::kShuttingDown);
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
  for (Outcome o : {Outcome::kBadData, Outcome::kTooLarge, Outcome::kUnsupported,
                    Outcome::kMemoryFull, Outcome::kShuttingDown}) {
    EXPECT_NE(HttpStatusOf(o), 200);
  }
}

TEST(Intake, TheFilterReportComesBackWithTheAcceptance) {
  pipeline::SpanFilter filter{pipeline::FilterLimits{}};
  IntakeFixture f(nullptr, &filter);
  const uint64_t now = NowNs();
  IntakeResult r =
      f.Submit(BodyFormat::kOtlpProto, TimedProtoRequest(kTraceHex, {now, now + 2 * kHourNs}));
  EXPECT_EQ(r.outcome, Outcome::kAccepted);
  EXPECT_EQ(r.rejected_spans, 1u);
  EXPECT_NE(r.message.find("future_start"), std::string::npos) << r.message;
  EXPECT_EQ(f.stats->spans_received, 2u);
  EXPECT_EQ(f.stats->spans_accepted, 1u);
}

// A protobuf body is logged as it came, with its format; a JSON one as OTLP
// protobuf. Each decodes back as the request did; so do JSON records.
TEST(Intake, RecordsNameTheirDecoderAndDecodeBack) {
  const std::string dir = ::testing::TempDir() + "intake-records-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  pipeline::durable::LogOptions lo;
  lo.dir = dir;
  lo.fsync_always = false;
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
  const std::vector<testdata::ZSpan> zipkin = {testdata::ZipkinFullSpan()};
  const std::vector<std::pair<BodyFormat, std::string>> sent = {
      {BodyFormat::kOtlpProto, ProtoRequest(kTraceHex, 2)},
      {BodyFormat::kOtlpJson, JsonRequest()},
      {BodyFormat::kZipkinJson, testdata::ZipkinJson(zipkin)},
      {BodyFormat::kZipkinProto, testdata::ZipkinProto(zipkin)}};
  {
    IntakeFixture f(log.get());
    for (const auto& [format, body] : sent) {
      // The Zipkin JSON one gzipped: the record holds it decompressed.
      const bool gzip = format == BodyFormat::kZipkinJson;
      ASSERT_TRUE(f.Submit(format, gzip ? Gzip(body) : body, gzip ? "gzip" : "").ok());
    }
    while (f.sharded.shard(0).Pop(milliseconds(0))) {
    }
  }
  log.reset();
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
  size_t i = 0;
  log->ReadReplay([&](const pipeline::durable::SegmentLog::Record& r, uint64_t) {
    ASSERT_LT(i, sent.size());
    EXPECT_EQ(r.kind, RecordKind::kEncodedRequest);
    BodyFormat format{};
    ASSERT_TRUE(pipeline::durable::EncodedRequestFormat(r.payload, &format));
    const bool json =
        sent[i].first == BodyFormat::kOtlpJson || sent[i].first == BodyFormat::kZipkinJson;
    EXPECT_EQ(format, json ? BodyFormat::kOtlpProto : sent[i].first);
    if (!json) {
      EXPECT_EQ(r.payload.substr(pipeline::durable::kEncodedRequestHeadBytes), sent[i].second);
    }
    SpanBatch back, direct;
    ASSERT_TRUE(DecodeLoggedRequest(r.kind, std::string(r.payload), nullptr, &back).ok());
    std::string body = sent[i].second;
    ASSERT_TRUE(DecodeBody(sent[i].first, body, &direct).ok());
    std::string why;
    EXPECT_TRUE(direct.LogicallyEquals(back, &why)) << why;
    ++i;
  });
  EXPECT_EQ(i, sent.size());
  log.reset();
  std::filesystem::remove_all(dir);

  // JSON records (another build may write them) decode too.
  for (const auto& [format, body] : sent) {
    SpanBatch back, direct;
    std::string copy = body;
    ASSERT_TRUE(DecodeBody(format, copy, &direct).ok());
    ASSERT_TRUE(
        DecodeLoggedRequest(RecordKind::kEncodedRequest,
                            pipeline::durable::EncodedRequestRecordHead(NowNs(), format) + body,
                            nullptr, &back)
            .ok());
    std::string why;
    EXPECT_TRUE(direct.LogicallyEquals(back, &why)) << why;
  }

  // A format this build does not know is a bad record, not a guess.
  std::string unknown = pipeline::durable::RequestRecordHead(NowNs());
  unknown.push_back('\x09');
  unknown += ProtoRequest();
  SpanBatch bad;
  EXPECT_FALSE(DecodeLoggedRequest(RecordKind::kEncodedRequest, unknown, nullptr, &bad).ok());
}

}  // namespace
}  // namespace spanhouse::receivers
