// Tests for the OTLP/gRPC receiver over a real socket with a real gRPC client
// (grpc::GenericStub, the request bytes hand-encoded): success and partial
// success, bad data, too large, full -> UNAVAILABLE with RetryInfo, the
// bearer token, gzip, unknown methods, and the answer deferred until the
// durable queue's fsync.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <future>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/memory_budget.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "receivers/otlp_grpc/otlp_grpc_receiver.h"
#include "unit/pipeline/sync_gate.h"
#include "unit/receivers/requests.h"
#include "unit/receivers/test_pipeline.h"

namespace spanhouse::receivers {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kToken = "grpc-test-token-0123456789";

struct CallResult {
  grpc::Status status;
  std::string response;
};

CallResult Call(uint16_t port, const std::string& body, std::string method = kOtlpGrpcExportMethod,
                std::string_view token = "", bool gzip = false) {
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + std::string(token));
  if (gzip) ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  CallResult r;
  r.status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (r.status.ok() && response.Dump(&slices).ok()) {
    for (const auto& s : slices)
      r.response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return r;
}

// A receiver, started, over a queue (without a log unless `pipeline` names
// one) and one sink.
struct GrpcFixture {
  explicit GrpcFixture(OtlpGrpcOptions o = Options(), pipeline::SpanFilter* filter = nullptr,
                       size_t budget_bytes = 1ull << 30, PipelineOptions pipeline = {})
      : p(With(std::move(pipeline), filter, budget_bytes)),
        budget(p.budget),
        receiver(std::move(o), *p.queue) {
    EXPECT_TRUE(receiver.Start().ok());
  }
  static OtlpGrpcOptions Options() {
    OtlpGrpcOptions o;
    o.address = "127.0.0.1:0";
    o.intake.max_body_bytes = 64 << 10;
    o.intake.max_spans_per_request = 5;
    o.intake.memory_wait = milliseconds(0);
    return o;
  }
  static PipelineOptions With(PipelineOptions o, pipeline::SpanFilter* filter,
                              size_t budget_bytes) {
    o.filter = filter;
    o.budget_bytes = budget_bytes;
    return o;
  }
  std::unique_ptr<SpanBatch> Popped() {
    auto item = p.sink.Pop(milliseconds(0));
    return item ? std::move(item->batch) : nullptr;
  }
  TestPipeline p;
  MemoryBudget& budget;
  OtlpGrpcReceiver receiver;
};

TEST(OtlpGrpcReceiver, ExportIsOkAndQueuesTheSpans) {
  GrpcFixture f;
  CallResult r = Call(f.receiver.port(), ProtoRequest(kTraceHex, 3));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(r.response.empty());  // ExportTraceServiceResponse{}, no partial success
  auto got = f.Popped();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->span_count(), 3u);
  EXPECT_EQ(ToHex(got->spans.trace_id[0]), kTraceHex);
  EXPECT_EQ(f.receiver.stats().requests_accepted, 1u);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 3u);
}

TEST(OtlpGrpcReceiver, GzipRequestsAreDecompressed) {
  GrpcFixture f;
  CallResult r = Call(f.receiver.port(), ProtoRequest(kTraceHex, 2), kOtlpGrpcExportMethod, "",
                      /*gzip=*/true);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  auto got = f.Popped();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->span_count(), 2u);
}

TEST(OtlpGrpcReceiver, FilteredSpansAreAPartialSuccess) {
  pipeline::SpanFilter filter{pipeline::FilterLimits{}};
  GrpcFixture f(GrpcFixture::Options(), &filter);
  const uint64_t now = NowNs();
  CallResult r = Call(f.receiver.port(), TimedProtoRequest(kTraceHex, {now, now + 2 * kHourNs}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  // ExportTraceServiceResponse{partial_success = 1 {rejected_spans = 1, error_message = 2}}
  Fields response;
  ASSERT_TRUE(ParseFields(r.response, &response));
  ASSERT_EQ(response.bytes.count(1), 1u);
  Fields partial;
  ASSERT_TRUE(ParseFields(response.bytes.find(1)->second, &partial));
  EXPECT_EQ(partial.ints.find(1)->second, 1u);
  ASSERT_EQ(partial.bytes.count(2), 1u);
  EXPECT_NE(partial.bytes.find(2)->second.find("future_start"), std::string::npos);
  auto got = f.Popped();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->span_count(), 1u);
}

TEST(OtlpGrpcReceiver, BadDataAndTooManySpansAreInvalidArgument) {
  GrpcFixture f;
  CallResult bad = Call(f.receiver.port(), "\x0a\xff\xff\xff");
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(bad.status.error_message().empty());
  CallResult many = Call(f.receiver.port(), ProtoRequest(kTraceHex, 6));
  EXPECT_EQ(many.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(many.status.error_message().find("over the limit"), std::string::npos);
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 1u);
  EXPECT_EQ(f.receiver.stats().rejected_too_many_spans, 1u);
  EXPECT_EQ(f.Popped(), nullptr);
}

TEST(OtlpGrpcReceiver, AMessageOverTheBodyLimitIsRefusedByGrpc) {
  GrpcFixture f;
  std::string big = ProtoRequest(kTraceHex, 1);
  big += LenField(15, std::string(70 << 10, 'x'));  // an unknown field, over 64 KiB
  CallResult r = Call(f.receiver.port(), big);
  // gRPC's own answer, before the receiver: not retryable (no RetryInfo).
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(r.status.error_details().empty());
  EXPECT_EQ(f.Popped(), nullptr);
}

TEST(OtlpGrpcReceiver, FullIsUnavailableWithRetryInfo) {
  GrpcFixture f(GrpcFixture::Options(), nullptr, /*budget_bytes=*/1 << 20);
  ASSERT_TRUE(f.budget.TryReserve(1 << 20));
  CallResult r = Call(f.receiver.port(), ProtoRequest(kTraceHex, 1));
  f.budget.Release(1 << 20);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  // grpc-status-details-bin: google.rpc.Status{code = 1, message = 2, details = 3: Any}.
  Fields status;
  ASSERT_TRUE(ParseFields(r.status.error_details(), &status));
  EXPECT_EQ(status.ints.find(1)->second, 14u);
  ASSERT_EQ(status.bytes.count(3), 1u);
  Fields any;
  ASSERT_TRUE(ParseFields(status.bytes.find(3)->second, &any));
  EXPECT_EQ(any.bytes.find(1)->second, "type.googleapis.com/google.rpc.RetryInfo");
  Fields retry_info;
  ASSERT_TRUE(ParseFields(any.bytes.find(2)->second, &retry_info));
  Fields delay;  // google.protobuf.Duration{seconds = 1}
  ASSERT_TRUE(ParseFields(retry_info.bytes.find(1)->second, &delay));
  EXPECT_EQ(delay.ints.find(1)->second, 1u);
  EXPECT_EQ(f.receiver.stats().rejected_queue_full, 1u);
}

TEST(OtlpGrpcReceiver, ClosedQueueIsUnavailable) {
  GrpcFixture f;
  f.p.sink.Drain();
  CallResult r = Call(f.receiver.port(), ProtoRequest(kTraceHex, 1));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(r.status.error_details().empty());
  EXPECT_EQ(f.receiver.stats().rejected_shutting_down, 1u);
}

TEST(OtlpGrpcReceiver, ABearerTokenIsRequiredWhenTheGuardHasOne) {
  OtlpGrpcOptions o = GrpcFixture::Options();
  o.authorize = [](const net::HttpRequest& head, const net::AuthorizationHeader& auth,
                   net::HttpResponse&) {
    EXPECT_EQ(head.target, kOtlpGrpcExportMethod);
    return auth.count == 1 && auth.value == "Bearer " + std::string(kToken);
  };
  GrpcFixture f(o);
  CallResult none = Call(f.receiver.port(), ProtoRequest());
  EXPECT_EQ(none.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  CallResult wrong =
      Call(f.receiver.port(), ProtoRequest(), kOtlpGrpcExportMethod, "not-the-token-0123456789");
  EXPECT_EQ(wrong.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(f.Popped(), nullptr);
  CallResult ok = Call(f.receiver.port(), ProtoRequest(), kOtlpGrpcExportMethod, kToken);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_NE(f.Popped(), nullptr);
  EXPECT_EQ(f.receiver.stats().rejected_unauthenticated, 2u);
}

TEST(OtlpGrpcReceiver, OtherMethodsAreUnimplemented) {
  GrpcFixture f;
  CallResult r = Call(f.receiver.port(), ProtoRequest(),
                      "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export");
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// With fsync "always" the call finishes once the sync that covers it has
// run, from the log's sync thread; gRPC's threads serve other calls meanwhile.
TEST(OtlpGrpcReceiver, FsyncAlwaysAnswersAfterTheSync) {
  TestLogDir dir("grpc-durable");
  pipeline::durable::SyncGate gate;
  {
    GrpcFixture f(GrpcFixture::Options(), nullptr, 1ull << 30,
                  {.log_dir = dir.path, .fsync_always = true, .hooks = {gate.Hook()}});
    ASSERT_TRUE(f.p.queue->fsync_always());
    auto first = std::async(std::launch::async,
                            [&] { return Call(f.receiver.port(), ProtoRequest(kTraceHex, 2)); });
    ASSERT_TRUE(gate.WaitEntered());  // its sync has begun, and waits
    EXPECT_EQ(f.Popped(), nullptr);   // no sink has it before it is durable
    EXPECT_EQ(first.wait_for(milliseconds(100)), std::future_status::timeout);
    // Another call is served (its bad data refused) while the first waits.
    EXPECT_EQ(Call(f.receiver.port(), "\x0a\xff").status.error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(f.receiver.stats().requests_accepted, 0u);
    gate.Open();
    CallResult r = first.get();
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(f.receiver.stats().requests_accepted, 1u);
    EXPECT_NE(f.Popped(), nullptr);
    f.receiver.Stop();
  }
}

TEST(OtlpGrpcReceiver, RetryStatusDetailsIsAGoogleRpcStatus) {
  Fields status;
  ASSERT_TRUE(ParseFields(RetryStatusDetails(14, "full", 5), &status));
  EXPECT_EQ(status.ints.find(1)->second, 14u);
  EXPECT_EQ(status.bytes.find(2)->second, "full");
}

}  // namespace
}  // namespace spanhouse::receivers
