// Tests for the Zipkin v2 receiver: its handler called directly (routing,
// media types, content codings, Zipkin's 202, the intake's refusals as HTTP
// statuses) and over a socket (the token guard, a request end to end).
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/zipkin.h"
#include "common/memory_budget.h"
#include "model/span_batch.h"
#include "net/http_server.h"
#include "receivers/zipkin/zipkin_receiver.h"
#include "testdata/zipkin_spans.h"
#include "unit/net/http_client.h"
#include "unit/receivers/requests.h"
#include "unit/receivers/test_pipeline.h"

namespace spanhouse::receivers {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kZipkinJsonType = "application/json";
constexpr std::string_view kZipkinProtoType = "application/x-protobuf";

std::vector<testdata::ZSpan> TwoSpans() {
  testdata::ZSpan a = testdata::ZipkinFullSpan();
  testdata::ZSpan b = a;
  b.id = "eee19b7ec3c1b175";
  b.parent_id = a.id;
  b.kind = "CLIENT";
  b.local = testdata::ZEndpoint{"cart", "10.0.0.2", "", 0};
  return {a, b};
}

net::HttpRequest ZipkinPost(std::string_view content_type, std::string body,
                            std::string_view encoding = "") {
  return HttpPost("/api/v2/spans", content_type, std::move(body), encoding);
}

class NoDeferral : public net::HttpDeferral {
 public:
  net::HttpResponder Defer() override {
    ADD_FAILURE() << "deferred without a durable queue";
    return {};
  }
};

IntakeOptions Limits(size_t max_body_bytes) {
  IntakeOptions o;
  o.max_body_bytes = max_body_bytes;
  o.max_spans_per_request = 3;
  o.memory_wait = milliseconds(0);
  return o;
}

// A receiver over a queue without a log and one sink, never started.
struct ZipkinFixture {
  explicit ZipkinFixture(size_t max_body_bytes = 1 << 20, size_t budget_bytes = 1ull << 30)
      : p({.budget_bytes = budget_bytes}),
        budget(p.budget),
        receiver(Listener(), Limits(max_body_bytes), *p.queue) {}
  net::HttpResponse Do(net::HttpRequest req) {
    net::HttpResponse resp;
    NoDeferral later;
    receiver.Handle(req, resp, later);
    return resp;
  }
  std::unique_ptr<SpanBatch> Popped() {
    auto item = p.sink.Pop(milliseconds(0));
    return item ? std::move(item->batch) : nullptr;
  }
  TestPipeline p;
  MemoryBudget& budget;
  ZipkinReceiver receiver;
};

std::optional<std::string> RetryAfter(const net::HttpResponse& resp) {
  for (const auto& [k, v] : resp.headers)
    if (k == "Retry-After") return v;
  return std::nullopt;
}

TEST(ZipkinReceiver, JsonIs202AndQueuesTheMappedSpans) {
  ZipkinFixture f;
  const std::string body = testdata::ZipkinJson(TwoSpans());
  const net::HttpResponse resp = f.Do(ZipkinPost(kZipkinJsonType, body));
  EXPECT_EQ(resp.status, 202) << resp.body;
  EXPECT_TRUE(resp.body.empty());
  auto got = f.Popped();
  ASSERT_NE(got, nullptr);
  SpanBatch want;
  ASSERT_TRUE(codec::DecodeZipkinJson(body, want).ok());
  std::string why;
  EXPECT_TRUE(want.LogicallyEquals(*got, &why)) << why;
  EXPECT_EQ(got->span_count(), 2u);
  EXPECT_EQ(f.receiver.stats().requests_accepted, 1u);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 2u);
}

TEST(ZipkinReceiver, NoContentTypeMeansJsonAsInZipkin) {
  ZipkinFixture f;
  EXPECT_EQ(f.Do(ZipkinPost("", testdata::ZipkinJson(TwoSpans()))).status, 202);
  EXPECT_NE(f.Popped(), nullptr);
}

TEST(ZipkinReceiver, ProtobufIs202AndDecodesLikeJson) {
  ZipkinFixture f;
  const net::HttpResponse resp =
      f.Do(ZipkinPost("Application/X-Protobuf", testdata::ZipkinProto(TwoSpans())));
  EXPECT_EQ(resp.status, 202) << resp.body;
  auto got = f.Popped();
  ASSERT_NE(got, nullptr);
  SpanBatch want;
  ASSERT_TRUE(codec::DecodeZipkinJson(testdata::ZipkinJson(TwoSpans()), want).ok());
  std::string why;
  EXPECT_TRUE(want.LogicallyEquals(*got, &why)) << why;
}

TEST(ZipkinReceiver, GzipBodiesAreDecoded) {
  ZipkinFixture f;
  EXPECT_EQ(
      f.Do(ZipkinPost(kZipkinJsonType, Gzip(testdata::ZipkinJson(TwoSpans())), "gzip")).status,
      202);
  auto got = f.Popped();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->span_count(), 2u);
}

TEST(ZipkinReceiver, BadDataIs400WithATextMessage) {
  ZipkinFixture f;
  net::HttpResponse resp = f.Do(ZipkinPost(kZipkinJsonType, "[{\"traceId\": 12}]"));
  EXPECT_EQ(resp.status, 400);
  EXPECT_EQ(resp.content_type, "text/plain");
  EXPECT_FALSE(resp.body.empty());
  EXPECT_EQ(f.Do(ZipkinPost(kZipkinProtoType, "\xff\xff\xff")).status, 400);
  EXPECT_EQ(f.Do(ZipkinPost(kZipkinJsonType, "not gzip", "gzip")).status, 400);
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 3u);
  EXPECT_EQ(f.Popped(), nullptr);
}

TEST(ZipkinReceiver, UnknownMediaTypeOrCodingIs415) {
  ZipkinFixture f;
  EXPECT_EQ(f.Do(ZipkinPost("text/plain", "[]")).status, 415);
  EXPECT_EQ(f.Do(ZipkinPost(kZipkinJsonType, "[]", "br")).status, 415);
  EXPECT_EQ(f.receiver.stats().rejected_media_type, 2u);
}

TEST(ZipkinReceiver, TooLargeOrTooManySpansIs413) {
  ZipkinFixture f(/*max_body_bytes=*/4096);
  EXPECT_EQ(f.Do(ZipkinPost(kZipkinJsonType, std::string(5000, ' '))).status, 413);
  std::vector<testdata::ZSpan> four = TwoSpans();
  const std::vector<testdata::ZSpan> more = TwoSpans();
  four.insert(four.end(), more.begin(), more.end());
  EXPECT_EQ(f.Do(ZipkinPost(kZipkinJsonType, testdata::ZipkinJson(four))).status, 413);
  EXPECT_EQ(f.receiver.stats().rejected_too_large, 1u);
  EXPECT_EQ(f.receiver.stats().rejected_too_many_spans, 1u);
  EXPECT_EQ(f.Popped(), nullptr);
}

TEST(ZipkinReceiver, FullIs429AndClosedIs503WithRetryAfter) {
  ZipkinFixture f(1 << 20, /*budget_bytes=*/1 << 20);
  ASSERT_TRUE(f.budget.TryReserve(1 << 20));  // all of it taken
  net::HttpResponse full = f.Do(ZipkinPost(kZipkinJsonType, testdata::ZipkinJson(TwoSpans())));
  EXPECT_EQ(full.status, 429);
  EXPECT_EQ(RetryAfter(full), "1");
  ZipkinFixture g;
  g.p.sink.Drain();
  net::HttpResponse closed = g.Do(ZipkinPost(kZipkinJsonType, testdata::ZipkinJson(TwoSpans())));
  EXPECT_EQ(closed.status, 503);
  EXPECT_EQ(RetryAfter(closed), "5");
  EXPECT_EQ(f.receiver.stats().rejected_queue_full, 1u);
  f.budget.Release(1 << 20);
  EXPECT_EQ(g.receiver.stats().rejected_shutting_down, 1u);
}

TEST(ZipkinReceiver, OtherPathsAre404AndOtherMethods405) {
  ZipkinFixture f;
  net::HttpRequest get = ZipkinPost(kZipkinJsonType, "");
  get.method = "GET";
  EXPECT_EQ(f.Do(get).status, 405);
  net::HttpRequest v1 = ZipkinPost(kZipkinJsonType, "[]");
  v1.target = "/api/v1/spans";
  EXPECT_EQ(f.Do(v1).status, 404);
}

// Over a socket: the listener's authorizer runs before the body is read.
TEST(ZipkinReceiver, ServesOverHttpBehindTheTokenGuard) {
  TestPipeline p;
  HttpListenerOptions o = Listener();
  o.authorize = [](const net::HttpRequest&, const net::AuthorizationHeader& auth,
                   net::HttpResponse& resp) {
    if (auth.count == 1 && auth.value == "Bearer zipkin-test-token-0123") return true;
    resp.status = 401;
    return false;
  };
  ZipkinReceiver receiver(o, Limits(1 << 20), *p.queue);
  ASSERT_TRUE(receiver.Start().ok());
  const std::string body = testdata::ZipkinJson(TwoSpans());
  {
    net::Client c(receiver.port());
    ASSERT_TRUE(c.Send(net::Post("/api/v2/spans", body, "Content-Type: application/json\r\n")));
    net::Response r;
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.status, 401);
  }
  {
    net::Client c(receiver.port());
    ASSERT_TRUE(c.Send(net::Post("/api/v2/spans", body,
                                 "Content-Type: application/json\r\nAuthorization: Bearer "
                                 "zipkin-test-token-0123\r\n")));
    net::Response r;
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.status, 202) << r.body;
  }
  receiver.Stop();
  auto item = p.sink.Pop(milliseconds(0));
  ASSERT_TRUE(item.has_value());
  EXPECT_EQ(item->batch->span_count(), 2u);
}

}  // namespace
}  // namespace spanhouse::receivers
