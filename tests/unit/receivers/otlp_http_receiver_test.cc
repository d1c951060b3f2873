// Tests for the OTLP/HTTP receiver's request handler, called directly (no
// socket): routing, media types and content codings, size limits before and
// after decompression, the error bodies the OTLP/HTTP specification asks for
// (google.rpc.Status in the request's encoding), back-pressure answers from
// the durable queue and its sink, the stats counters; with the durable queue,
// requests over the memory budget or refused by the sink waiting on disk and
// reaching the sink later, in order, and with its "always" fsync the answer
// deferred until the sync, its I/O thread free meanwhile (that one over a
// socket, the receiver started).
#include <gtest/gtest.h>
#include <simdjson.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/memory_budget.h"
#include "model/span_batch.h"
#include "net/http_server.h"
#include "pipeline/durable/durable_queue.h"
#include "pipeline/durable/records.h"
#include "pipeline/durable/segment_log.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "unit/net/http_client.h"
#include "unit/pipeline/sync_gate.h"
#include "unit/receivers/requests.h"
#include "unit/receivers/test_pipeline.h"

namespace spanhouse::receivers {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kJsonUtf8 = "application/json; charset=utf-8";
constexpr std::string_view kProto = "application/x-protobuf";

net::HttpRequest Post(std::string_view content_type, std::string body,
                      std::string_view encoding = "") {
  return HttpPost("/v1/traces", content_type, std::move(body), encoding);
}

// ---- reading answers ----

std::optional<std::string> Header(const net::HttpResponse& resp, std::string_view name) {
  for (const auto& [k, v] : resp.headers)
    if (k == name) return v;
  return std::nullopt;
}

struct RpcStatus {
  int64_t code = -1;
  std::string message;
};

// google.rpc.Status as JSON: {"code":N,"message":"..."}.
std::optional<RpcStatus> JsonRpcStatus(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body).get(root) != simdjson::SUCCESS) return std::nullopt;
  RpcStatus st;
  std::string_view msg;
  if (root["code"].get_int64().get(st.code) != simdjson::SUCCESS) return std::nullopt;
  if (root["message"].get_string().get(msg) != simdjson::SUCCESS) return std::nullopt;
  st.message = std::string(msg);
  return st;
}

// google.rpc.Status as protobuf: {int32 code = 1; string message = 2;}.
std::optional<RpcStatus> ProtoRpcStatus(const std::string& body) {
  Fields f;
  if (!ParseFields(body, &f) || f.ints.size() > 1 || f.bytes.size() > 1 ||
      f.ints.size() + f.bytes.size() != f.ints.count(1) + f.bytes.count(2)) {
    return std::nullopt;
  }
  RpcStatus st;
  if (f.ints.count(1) != 0) st.code = static_cast<int64_t>(f.ints.find(1)->second);
  if (f.bytes.count(2) != 0) st.message = f.bytes.find(2)->second;
  return st;
}

void ExpectJsonRpcError(const net::HttpResponse& resp, int http, int64_t rpc) {
  EXPECT_EQ(resp.status, http) << resp.body;
  EXPECT_EQ(resp.content_type, "application/json");
  auto st = JsonRpcStatus(resp.body);
  ASSERT_TRUE(st.has_value()) << "not a google.rpc.Status JSON body: " << resp.body;
  EXPECT_EQ(st->code, rpc) << resp.body;
  EXPECT_FALSE(st->message.empty());
}

void ExpectProtoRpcError(const net::HttpResponse& resp, int http, int64_t rpc) {
  EXPECT_EQ(resp.status, http) << resp.body;
  EXPECT_EQ(resp.content_type, "application/x-protobuf");
  auto st = ProtoRpcStatus(resp.body);
  ASSERT_TRUE(st.has_value()) << "not a google.rpc.Status protobuf body";
  EXPECT_EQ(st->code, rpc);
  EXPECT_FALSE(st->message.empty());
}

std::string TraceHexOf(const SpanBatch& b, size_t i) {
  return ToHex(b.spans.trace_id[i]);
}

// Stands in for the HTTP server's deferral: keeps a deferred answer.
class TestDeferral : public net::HttpDeferral {
 public:
  net::HttpResponder Defer() override {
    deferred_ = true;
    return net::HttpResponder([this](net::HttpResponse&& r) { answer_.set_value(std::move(r)); });
  }
  bool deferred() const { return deferred_; }
  bool answered() const { return future_.wait_for(milliseconds(0)) == std::future_status::ready; }
  // The deferred answer; a 0 status if none came within 10 s.
  net::HttpResponse Wait() {
    if (future_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return net::HttpResponse{0, "", "no answer", {}};
    }
    return future_.get();
  }

 private:
  bool deferred_ = false;
  std::promise<net::HttpResponse> answer_;
  std::future<net::HttpResponse> future_ = answer_.get_future();
};

// The receiver's answer to `req`, deferred or not.
net::HttpResponse Answer(OtlpHttpReceiver& receiver, net::HttpRequest& req) {
  net::HttpResponse resp;
  TestDeferral later;
  receiver.Handle(req, resp, later);
  return later.deferred() ? later.Wait() : resp;
}

IntakeOptions Limits(size_t max_body_bytes) {
  IntakeOptions o;
  o.max_body_bytes = max_body_bytes;
  return o;
}

// A receiver over a memory budget and a queue without a log, never started.
// `queue` is its one sink's queue, where every accepted batch lands.
struct Fixture {
  explicit Fixture(size_t max_body_bytes = 1 << 20, size_t queue_bytes = 64 << 20,
                   size_t budget_bytes = 1ull << 30)
      : p({.budget_bytes = budget_bytes, .sink_bytes = queue_bytes}),
        budget(p.budget),
        receiver(Listener(), Limits(max_body_bytes), *p.queue),
        queue(p.sink.queue()) {}
  // By value: the receiver may take the body, as it does from the server.
  net::HttpResponse Do(net::HttpRequest req) { return Answer(receiver, req); }
  TestPipeline p;
  MemoryBudget& budget;
  OtlpHttpReceiver receiver;
  sink::SpanQueue& queue;
};

// ---- routing ----

TEST(OtlpHttpReceiver, OtherPathsAre404) {
  Fixture f;
  for (const char* target : {"/", "/v1/metrics", "/v1/logs", "/v1/traces/", "/v1/tracesx",
                             "/v1/Traces", "/api/traces/abc", ""}) {
    net::HttpRequest req = Post(kJson, JsonRequest());
    req.target = target;
    net::HttpResponse resp = f.Do(req);
    EXPECT_EQ(resp.status, 404) << "'" << target << "'";
  }
  EXPECT_EQ(f.receiver.stats().requests, 8u);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 0u);
  EXPECT_FALSE(f.queue.Pop(milliseconds(0)).has_value());
}

TEST(OtlpHttpReceiver, QueryStringIsIgnored) {
  Fixture f;
  net::HttpRequest req = Post(kJson, JsonRequest());
  req.target = "/v1/traces?tenant=a";
  EXPECT_EQ(f.Do(req).status, 200);
}

TEST(OtlpHttpReceiver, NonPostIs405WithAllow) {
  Fixture f;
  for (const char* method : {"GET", "PUT", "DELETE", "HEAD", "post"}) {
    net::HttpRequest req = Post(kJson, JsonRequest());
    req.method = method;
    net::HttpResponse resp = f.Do(req);
    EXPECT_EQ(resp.status, 405) << method;
    EXPECT_EQ(Header(resp, "Allow"), std::optional<std::string>("POST")) << method;
  }
  EXPECT_EQ(f.receiver.stats().spans_accepted, 0u);
}

// ---- media types and content codings ----

TEST(OtlpHttpReceiver, UnsupportedContentTypeIs415) {
  Fixture f;
  for (const char* ct : {"text/plain", "", "application/grpc", "application/jsonx",
                         "application/x-protobufx", "json", "multipart/form-data"}) {
    net::HttpResponse resp = f.Do(Post(ct, JsonRequest()));
    EXPECT_EQ(resp.status, 415) << "'" << ct << "'";
    EXPECT_NE(resp.body.find("application/x-protobuf"), std::string::npos) << resp.body;
  }
  EXPECT_EQ(f.receiver.stats().rejected_media_type, 7u);
  EXPECT_EQ(f.receiver.stats().requests, 7u);
  EXPECT_FALSE(f.queue.Pop(milliseconds(0)).has_value());
}

TEST(OtlpHttpReceiver, ContentTypeParametersAndAliasesAreAccepted) {
  Fixture f;
  for (const char* ct : {"application/json; charset=utf-8", "application/json;charset=UTF-8",
                         "application/json ", "application/json ; charset=utf-8"}) {
    EXPECT_EQ(f.Do(Post(ct, JsonRequest())).status, 200) << "'" << ct << "'";
  }
  for (const char* ct : {"application/x-protobuf", "application/protobuf",
                         "application/x-protobuf; proto=opentelemetry"}) {
    EXPECT_EQ(f.Do(Post(ct, ProtoRequest())).status, 200) << "'" << ct << "'";
  }
}

TEST(OtlpHttpReceiver, UnsupportedContentEncodingIs415) {
  Fixture f;
  net::HttpResponse resp = f.Do(Post(kJson, JsonRequest(), "br"));
  ExpectJsonRpcError(resp, 415, 3);
  EXPECT_NE(resp.body.find("br"), std::string::npos) << resp.body;
  resp = f.Do(Post(kProto, ProtoRequest(), "br"));
  ExpectProtoRpcError(resp, 415, 3);
  EXPECT_EQ(f.receiver.stats().rejected_media_type, 2u);
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 0u);
}

TEST(OtlpHttpReceiver, IdentityContentEncodingIsPlain) {
  Fixture f;
  EXPECT_EQ(f.Do(Post(kJson, JsonRequest(), "identity")).status, 200);
}

TEST(OtlpHttpReceiver, GzipBodiesAreDecoded) {
  Fixture f;
  net::HttpResponse resp = f.Do(Post(kJson, Gzip(JsonRequest()), "gzip"));
  EXPECT_EQ(resp.status, 200) << resp.body;
  resp = f.Do(Post(kProto, Gzip(ProtoRequest()), "gzip"));
  EXPECT_EQ(resp.status, 200) << resp.body;
  EXPECT_EQ(f.receiver.stats().spans_accepted, 2u);
}

TEST(OtlpHttpReceiver, CorruptGzipIs400) {
  Fixture f;
  std::string gz = Gzip(JsonRequest());
  ExpectJsonRpcError(f.Do(Post(kJson, gz.substr(0, gz.size() / 2), "gzip")), 400, 3);
  ExpectProtoRpcError(f.Do(Post(kProto, "not gzip", "gzip")), 400, 3);
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 2u);
}

// RFC 9110: media type and subtype (8.3.1) and content codings (8.4.1) are
// case-insensitive; the Collector's receiver (Go's mime.ParseMediaType)
// accepts "Application/JSON".
TEST(OtlpHttpReceiver, MediaTypeAndContentCodingAreCaseInsensitive) {
  Fixture f;
  EXPECT_EQ(f.Do(Post("Application/JSON", JsonRequest())).status, 200);
  EXPECT_EQ(f.Do(Post("application/X-Protobuf", ProtoRequest())).status, 200);
  EXPECT_EQ(f.Do(Post(kJson, Gzip(JsonRequest()), "GZIP")).status, 200);
}

// ---- bad payloads ----

TEST(OtlpHttpReceiver, BadJsonIs400WithJsonRpcStatus) {
  Fixture f;
  for (const std::string& body :
       {std::string("{not json"), std::string(""), std::string("[]"),
        std::string("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"zz\"}]}]}]}"),
        JsonRequest("0123")}) {
    net::HttpResponse resp = f.Do(Post(kJson, body));
    ExpectJsonRpcError(resp, 400, 3);
    EXPECT_EQ(resp.body.rfind("{\"code\":3,\"message\":", 0), 0u) << resp.body;
  }
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 5u);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 0u);
  EXPECT_FALSE(f.queue.Pop(milliseconds(0)).has_value());
}

TEST(OtlpHttpReceiver, ErrorMessageIsEscapedInTheJsonBody) {
  // The unsupported-encoding message quotes the header; the body must stay
  // valid JSON and carry the text unchanged.
  Fixture f;
  const std::string enc = "x\"y\t\\z";  // inner tab: outer whitespace is not part of a header value
  net::HttpResponse resp = f.Do(Post(kJsonUtf8, JsonRequest(), enc));
  ExpectJsonRpcError(resp, 415, 3);
  auto st = JsonRpcStatus(resp.body);
  ASSERT_TRUE(st.has_value());
  EXPECT_NE(st->message.find(enc), std::string::npos) << resp.body;
}

TEST(OtlpHttpReceiver, BadProtobufIs400WithProtoRpcStatus) {
  Fixture f;
  const std::string good = ProtoRequest();
  for (const std::string& body : {std::string("\x0a\xff\xff\xff\x0f", 5),  // length past the end
                                  good.substr(0, good.size() - 3),         // truncated
                                  std::string("\x0f", 1),                  // wire type 7
                                  ProtoRequest("0102")}) {                 // 2-byte trace id
    net::HttpResponse resp = f.Do(Post(kProto, body));
    ExpectProtoRpcError(resp, 400, 3);
    ASSERT_GE(resp.body.size(), 3u);
    EXPECT_EQ(resp.body.substr(0, 3), std::string("\x08\x03\x12", 3));
  }
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 4u);
  EXPECT_FALSE(f.queue.Pop(milliseconds(0)).has_value());
}

// ---- size limits ----

TEST(OtlpHttpReceiver, PlainBodyOverLimitIs413) {
  constexpr size_t kMax = 1024;
  Fixture f(kMax);
  net::HttpResponse resp = f.Do(Post(kJson, JsonRequestOfSize(kMax)));
  EXPECT_EQ(resp.status, 200) << resp.body;  // exactly at the limit
  resp = f.Do(Post(kJson, JsonRequestOfSize(kMax + 1)));
  ExpectJsonRpcError(resp, 413, 3);
  std::string proto = ProtoRequest();
  proto.resize(kMax + 1, '\0');  // padding is irrelevant: the size is checked first
  ExpectProtoRpcError(f.Do(Post(kProto, proto)), 413, 3);
  resp = f.Do(Post(kJson, JsonRequestOfSize(kMax + 1), "identity"));
  EXPECT_EQ(resp.status, 413);
  EXPECT_EQ(f.receiver.stats().rejected_too_large, 3u);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 1u);
}

TEST(OtlpHttpReceiver, GzipBodyOverLimitAfterDecompressionIs413) {
  constexpr size_t kMax = 1024;
  Fixture f(kMax);
  // Small on the wire, over the limit once inflated.
  const std::string gz = Gzip(JsonRequestOfSize(64 * 1024));
  ASSERT_LT(gz.size(), kMax);
  ExpectJsonRpcError(f.Do(Post(kJson, gz, "gzip")), 413, 3);
  std::string proto = ProtoRequest(kTraceHex, 100);
  ASSERT_GT(proto.size(), kMax);
  const std::string pgz = Gzip(proto);
  ASSERT_LT(pgz.size(), kMax);
  ExpectProtoRpcError(f.Do(Post(kProto, pgz, "gzip")), 413, 3);
  // Exactly at the limit once inflated is fine.
  EXPECT_EQ(f.Do(Post(kJson, Gzip(JsonRequestOfSize(kMax)), "gzip")).status, 200);
  EXPECT_EQ(f.receiver.stats().rejected_too_large, 2u);
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 0u);
}

// ---- success ----

TEST(OtlpHttpReceiver, ValidJsonIs200WithEmptyObjectAndQueuesTheSpans) {
  Fixture f;
  net::HttpResponse resp = f.Do(Post(kJsonUtf8, JsonRequest(kTraceHex, "checkout")));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.content_type, "application/json");
  EXPECT_EQ(resp.body, "{}");
  EXPECT_EQ(f.receiver.stats().spans_accepted, 1u);
  EXPECT_EQ(f.receiver.stats().requests, 1u);

  auto got = f.queue.Pop(milliseconds(100));
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->batch->span_count(), 1u);
  EXPECT_EQ(TraceHexOf(*got->batch, 0), kTraceHex);
  EXPECT_EQ(ToHex(got->batch->spans.span_id[0]), kSpanHex);
  EXPECT_EQ(got->batch->Str(got->batch->spans.name[0]), "checkout");
  EXPECT_FALSE(f.queue.Pop(milliseconds(0)).has_value());
}

TEST(OtlpHttpReceiver, ValidProtobufIs200WithEmptyBodyAndQueuesTheSpans) {
  Fixture f;
  const std::string other = "0af7651916cd43dd8448eb211c80319c";
  net::HttpResponse resp = f.Do(Post(kProto, ProtoRequest(other, 3)));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.content_type, "application/x-protobuf");
  EXPECT_TRUE(resp.body.empty());
  EXPECT_EQ(f.receiver.stats().spans_accepted, 3u);

  auto got = f.queue.Pop(milliseconds(100));
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->batch->span_count(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(TraceHexOf(*got->batch, i), other);
    EXPECT_EQ(got->batch->Str(got->batch->spans.name[i]), "span-" + std::to_string(i));
  }
}

TEST(OtlpHttpReceiver, EmptyRequestIs200AndQueuesNothing) {
  Fixture f;
  EXPECT_EQ(f.Do(Post(kJson, "{}")).status, 200);
  EXPECT_EQ(f.Do(Post(kJson, "{\"resourceSpans\":[]}")).status, 200);
  EXPECT_EQ(f.Do(Post(kProto, "")).status, 200);
  EXPECT_FALSE(f.queue.Pop(milliseconds(0)).has_value());
  EXPECT_EQ(f.receiver.stats().spans_accepted, 0u);
  EXPECT_EQ(f.receiver.stats().requests, 3u);
}

TEST(OtlpHttpReceiver, RequestsQueueInOrder) {
  Fixture f;
  const std::string a = "00000000000000000000000000000001";
  const std::string b = "00000000000000000000000000000002";
  ASSERT_EQ(f.Do(Post(kJson, JsonRequest(a))).status, 200);
  ASSERT_EQ(f.Do(Post(kProto, ProtoRequest(b))).status, 200);
  auto first = f.queue.Pop(milliseconds(100));
  auto second = f.queue.Pop(milliseconds(100));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(TraceHexOf(*first->batch, 0), a);
  EXPECT_EQ(TraceHexOf(*second->batch, 0), b);
}

// ---- back-pressure ----

TEST(OtlpHttpReceiver, FullQueueIs429WithRetryAfter) {
  Fixture f(1 << 20, /*queue_bytes=*/1);  // the first batch fills it
  ASSERT_EQ(f.Do(Post(kJson, JsonRequest())).status, 200);
  ASSERT_GT(f.queue.bytes(), f.queue.max_bytes());

  net::HttpResponse resp = f.Do(Post(kJson, JsonRequest()));
  ExpectJsonRpcError(resp, 429, 8);
  EXPECT_EQ(Header(resp, "Retry-After"), std::optional<std::string>("1"));
  resp = f.Do(Post(kProto, ProtoRequest()));
  ExpectProtoRpcError(resp, 429, 8);
  EXPECT_EQ(Header(resp, "Retry-After"), std::optional<std::string>("1"));
  EXPECT_EQ(f.receiver.stats().rejected_queue_full, 2u);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 1u);

  // An empty request needs no room.
  EXPECT_EQ(f.Do(Post(kJson, "{}")).status, 200);

  // Once the writer drains the queue, requests go through again.
  ASSERT_TRUE(f.queue.Pop(milliseconds(100)).has_value());
  EXPECT_EQ(f.Do(Post(kJson, JsonRequest())).status, 200);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 2u);
}

TEST(OtlpHttpReceiver, ClosedQueueIs503WithRetryAfter) {
  Fixture f;
  f.p.sink.Drain();
  net::HttpResponse resp = f.Do(Post(kJson, JsonRequest()));
  ExpectJsonRpcError(resp, 503, 14);
  auto retry = Header(resp, "Retry-After");
  ASSERT_TRUE(retry.has_value());
  EXPECT_GT(std::stoi(*retry), 0);
  resp = f.Do(Post(kProto, ProtoRequest()));
  ExpectProtoRpcError(resp, 503, 14);
  EXPECT_TRUE(Header(resp, "Retry-After").has_value());
  EXPECT_EQ(f.receiver.stats().rejected_shutting_down, 2u);
  EXPECT_EQ(f.receiver.stats().spans_accepted, 0u);
  EXPECT_TRUE(f.queue.closed_and_empty());
}

TEST(OtlpHttpReceiver, MemoryBudgetExhaustedIs429BeforeDecoding) {
  constexpr size_t kBudget = 4096;
  Fixture f(1 << 20, 64 << 20, kBudget);
  // Something else holds part of the budget: a request whose estimate (twice
  // its body) does not fit is refused before it is even decoded.
  ASSERT_TRUE(f.budget.TryReserve(100));
  const std::string big = JsonRequestOfSize(kBudget);  // estimate 2 x 4096 > budget
  net::HttpResponse resp = f.Do(Post(kJson, big));
  ExpectJsonRpcError(resp, 429, 8);
  EXPECT_EQ(Header(resp, "Retry-After"), std::optional<std::string>("1"));
  resp = f.Do(Post(kProto, std::string(kBudget, '\xff')));  // garbage: not decoded
  ExpectProtoRpcError(resp, 429, 8);
  EXPECT_EQ(f.receiver.stats().rejected_malformed, 0u);
  EXPECT_EQ(f.budget.used(), 100u);  // refusals hold nothing

  // With the budget free, a request larger than all of it is still let in.
  f.budget.Release(100);
  EXPECT_EQ(f.Do(Post(kJson, big)).status, 200);
  EXPECT_EQ(f.receiver.stats().rejected_queue_full, 2u);
}

TEST(OtlpHttpReceiver, ReservationFollowsTheBatchAndIsReleasedOnRejection) {
  Fixture f(2048);
  // Rejected requests give back what they reserved.
  f.Do(Post(kJson, "{bad"));
  f.Do(Post(kProto, "\x0f"));
  f.Do(Post(kJson, JsonRequestOfSize(4096)));
  f.Do(Post(kJson, Gzip(JsonRequestOfSize(8192)), "gzip"));
  f.Do(Post(kJson, "x", "br"));
  f.Do(Post(kJson, "{}"));
  EXPECT_EQ(f.budget.used(), 0u);

  // An accepted batch holds its decoded size until the writer drops it.
  ASSERT_EQ(f.Do(Post(kJson, Gzip(JsonRequest()), "gzip")).status, 200);
  {
    auto got = f.queue.Pop(milliseconds(100));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->reservation.bytes(), got->batch->MemoryBytes());
    EXPECT_EQ(f.budget.used(), got->batch->MemoryBytes());
  }
  EXPECT_EQ(f.budget.used(), 0u);

  // So does a batch the queue refused.
  f.p.sink.Drain();
  EXPECT_EQ(f.Do(Post(kJson, JsonRequest())).status, 503);
  EXPECT_EQ(f.budget.used(), 0u);
}

// ---- counters ----

TEST(OtlpHttpReceiver, StatsCountEveryOutcome) {
  Fixture f(1024, /*queue_bytes=*/1);
  f.Do(Post(kJson, JsonRequest()));                // accepted, fills the queue
  f.Do(Post(kProto, ProtoRequest(kTraceHex, 2)));  // queue full
  f.Do(Post("text/plain", "x"));                   // media type
  f.Do(Post(kJson, "{", "zstd"));                  // malformed (zstd)
  f.Do(Post(kJson, "{"));                          // malformed (json)
  f.Do(Post(kJson, JsonRequestOfSize(2000)));      // too large
  ASSERT_TRUE(f.queue.Pop(milliseconds(100)).has_value());
  f.Do(Post(kProto, ProtoRequest(kTraceHex, 4)));  // accepted
  f.p.sink.Drain();
  f.Do(Post(kJson, JsonRequest()));  // shutting down
  net::HttpRequest get = Post(kJson, "");
  get.method = "GET";
  f.Do(get);  // 405: counted as a request only
  const OtlpHttpStats& s = f.receiver.stats();
  EXPECT_EQ(s.requests, 9u);
  EXPECT_EQ(s.requests_accepted, 2u);
  EXPECT_EQ(s.spans_accepted, 5u);
  EXPECT_EQ(s.rejected_queue_full, 1u);
  EXPECT_EQ(s.rejected_media_type, 1u);
  EXPECT_EQ(s.rejected_malformed, 2u);
  EXPECT_EQ(s.rejected_too_large, 1u);
  EXPECT_EQ(s.rejected_shutting_down, 1u);
}

// ---- limits and the filter ----

TEST(OtlpHttpReceiver, TooManySpansIs413AndQueuesNothing) {
  TestPipeline p;
  MemoryBudget& budget = p.budget;
  IntakeOptions o = Limits(1 << 20);
  o.max_spans_per_request = 3;
  OtlpHttpReceiver receiver(Listener(), o, *p.queue);
  net::HttpRequest ok = Post(kProto, ProtoRequest(kTraceHex, 3));  // at the limit
  net::HttpResponse resp = Answer(receiver, ok);
  EXPECT_EQ(resp.status, 200);
  ASSERT_TRUE(p.sink.Pop(milliseconds(100)).has_value());

  net::HttpRequest over = Post(kProto, ProtoRequest(kTraceHex, 4));
  resp = Answer(receiver, over);
  ExpectProtoRpcError(resp, 413, 3);
  EXPECT_NE(ProtoRpcStatus(resp.body)->message.find("4 spans, over the limit of 3"),
            std::string::npos);
  EXPECT_FALSE(p.sink.Pop(milliseconds(0)).has_value());
  EXPECT_EQ(receiver.stats().rejected_too_many_spans, 1u);
  EXPECT_EQ(receiver.stats().spans_received, 7u);
  EXPECT_EQ(receiver.stats().spans_accepted, 3u);
  EXPECT_EQ(budget.used(), 0u);
}

// ExportTraceServiceResponse{partial_success = 1 {rejected_spans = 1, error_message = 2}}.
std::optional<std::pair<int64_t, std::string>> ProtoPartialSuccess(const std::string& body) {
  if (body.size() < 2 || body[0] != 0x0a) return std::nullopt;
  // The inner message has the google.rpc.Status layout: varint 1, string 2.
  auto inner = ProtoRpcStatus(body.substr(2));
  if (!inner || static_cast<uint8_t>(body[1]) != body.size() - 2) return std::nullopt;
  return std::make_pair(inner->code, inner->message);
}

TEST(OtlpHttpReceiver, FilteredSpansAreReportedAsPartialSuccess) {
  pipeline::SpanFilter filter(pipeline::FilterLimits{});
  TestPipeline p({.filter = &filter});
  MemoryBudget& budget = p.budget;
  OtlpHttpReceiver receiver(Listener(), Limits(1 << 20), *p.queue);
  // The helpers' spans have no times: start 0 is older than any retention.
  net::HttpRequest req = Post(kProto, ProtoRequest(kTraceHex, 2));
  net::HttpResponse resp = Answer(receiver, req);
  EXPECT_EQ(resp.status, 200);
  auto ps = ProtoPartialSuccess(resp.body);
  ASSERT_TRUE(ps.has_value()) << "no partial_success in the response";
  EXPECT_EQ(ps->first, 2);
  EXPECT_NE(ps->second.find("rejected 2 spans: 2 too_old"), std::string::npos) << ps->second;
  EXPECT_FALSE(p.sink.Pop(milliseconds(0)).has_value());  // nothing left to queue

  net::HttpRequest json = Post(kJson, JsonRequest());
  resp = Answer(receiver, json);
  EXPECT_EQ(resp.status, 200);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(resp.body).get(root), simdjson::SUCCESS) << resp.body;
  std::string_view rejected;
  std::string_view message;
  ASSERT_EQ(root["partialSuccess"]["rejectedSpans"].get_string().get(rejected), simdjson::SUCCESS)
      << resp.body;
  EXPECT_EQ(rejected, "1");
  ASSERT_EQ(root["partialSuccess"]["errorMessage"].get_string().get(message), simdjson::SUCCESS);
  EXPECT_NE(message.find("1 too_old"), std::string_view::npos) << message;

  EXPECT_EQ(filter.stats().rejected[static_cast<size_t>(pipeline::RejectReason::kTooOld)], 3u);
  EXPECT_EQ(receiver.stats().spans_received, 3u);
  EXPECT_EQ(receiver.stats().spans_accepted, 0u);
  EXPECT_EQ(receiver.stats().requests_accepted, 2u);
  EXPECT_EQ(budget.used(), 0u);
}

// ---- the durable queue: spill to disk, read back filtered as received ----

class DurableReceiverTest : public ::testing::Test {
 protected:
  // A receiver over the durable queue (a log, the filter) and a
  // `budget_bytes` budget, the sink's backlog started.
  void Make(size_t budget_bytes, uint64_t log_max_bytes = uint64_t{1} << 30,
            uint64_t segment_bytes = uint64_t{64} << 20) {
    p_ = std::make_unique<TestPipeline>(PipelineOptions{.budget_bytes = budget_bytes,
                                                        .log_dir = dir_.path,
                                                        .log_max_bytes = log_max_bytes,
                                                        .segment_bytes = segment_bytes,
                                                        .filter = &filter_});
    ASSERT_TRUE(p_->queue->durable());
    IntakeOptions o = Limits(1 << 20);
    o.memory_wait = milliseconds(0);
    receiver_ = std::make_unique<OtlpHttpReceiver>(Listener(), o, *p_->queue);
  }
  net::HttpResponse Do(net::HttpRequest req) { return Answer(*receiver_, req); }
  // Waits up to 1 s for the sink's backlog to empty.
  bool BacklogDrains() {
    for (int i = 0; i < 100 && p_->backlogged(); ++i) std::this_thread::sleep_for(10ms);
    return !p_->backlogged();
  }

  // In destruction order: the receiver, the queue and its sink, the filter,
  // the log's directory.
  TestLogDir dir_{"receiver-spill"};
  pipeline::SpanFilter filter_{pipeline::FilterLimits{}};
  std::unique_ptr<TestPipeline> p_;
  std::unique_ptr<OtlpHttpReceiver> receiver_;
};

TEST_F(DurableReceiverTest, OverTheMemoryBudgetRequestsWaitOnDiskAndAreQueuedInOrderLater) {
  Make(1 << 20);
  MemoryBudget& budget = p_->budget;
  ASSERT_TRUE(budget.TryReserve(1 << 20));  // the sinks hold all the memory
  const uint64_t now = NowNs();
  const std::string traces[] = {"0102030405060708090a0b0c0d0e0f10",
                                "1102030405060708090a0b0c0d0e0f10",
                                "2102030405060708090a0b0c0d0e0f10"};
  for (const auto& t : traces) {
    // One span now, one two hours ahead: rejected by the filter.
    net::HttpResponse resp = Do(Post(kProto, TimedProtoRequest(t, {now, now + 2 * kHourNs})));
    ASSERT_EQ(resp.status, 200) << resp.body;
    auto ps = ProtoPartialSuccess(resp.body);
    ASSERT_TRUE(ps.has_value());
    EXPECT_EQ(ps->first, 1);
  }
  EXPECT_EQ(p_->cursor().spilled_requests, 3u);
  EXPECT_EQ(p_->cursor().spilled_spans, 3u);
  EXPECT_TRUE(p_->backlogged());
  EXPECT_EQ(receiver_->stats().spans_accepted, 3u);
  EXPECT_EQ(receiver_->stats().rejected_queue_full, 0u);
  EXPECT_EQ(budget.used(), size_t{1} << 20);  // the spilled batches hold no memory
  EXPECT_FALSE(p_->sink.Pop(milliseconds(50)).has_value());

  // Memory comes back: the sink's backlog reads the records back, filters
  // them as they were filtered when received (the future span stays out, and
  // is not counted again), and hands them to the sink in the order they came.
  budget.Release(1 << 20);
  for (const auto& t : traces) {
    auto got = p_->sink.Pop(milliseconds(5000));
    ASSERT_TRUE(got.has_value()) << "spilled request not queued";
    ASSERT_NE(got->batch, nullptr);
    ASSERT_EQ(got->batch->span_count(), 1u);
    EXPECT_EQ(TraceHexOf(*got->batch, 0), t);
    EXPECT_EQ(got->batch->spans.start_ns[0], now);
    EXPECT_TRUE(got->ticket.valid());
    EXPECT_EQ(got->reservation.bytes(), got->batch->MemoryBytes());
    got->ticket.Ack();
  }
  EXPECT_EQ(filter_.stats().rejected[static_cast<size_t>(pipeline::RejectReason::kFutureStart)],
            3u);
  EXPECT_TRUE(BacklogDrains());
  EXPECT_EQ(p_->cursor().queued_spans, 3u);

  // Drained: a new request takes memory and goes straight to the sink.
  ASSERT_EQ(Do(Post(kProto, TimedProtoRequest(traces[0], {now}))).status, 200);
  EXPECT_EQ(p_->cursor().spilled_requests, 3u);
  EXPECT_TRUE(p_->sink.Pop(milliseconds(1000)).has_value());
}

TEST_F(DurableReceiverTest, WhatStillWaitsAtStopIsLeftInTheLogForTheReplay) {
  Make(1 << 20);
  ASSERT_TRUE(p_->budget.TryReserve(1 << 20));
  const uint64_t now = NowNs();
  ASSERT_EQ(Do(Post(kProto, TimedProtoRequest(kTraceHex, {now, now + 1}))).status, 200);
  ASSERT_EQ(Do(Post(kJson, JsonRequest())).status, 200);  // start 0: filtered out, nothing logged
  p_->queue->StopBacklogs();
  EXPECT_EQ(p_->cursor().spilled_requests, 1u);
  EXPECT_FALSE(p_->sink.Pop(milliseconds(0)).has_value());
  receiver_.reset();
  p_.reset();

  pipeline::durable::LogOptions lo;
  lo.dir = dir_.path;
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
  int records = 0;
  log->ReadReplay([&](const pipeline::durable::SegmentLog::Record& r, uint64_t) {
    ++records;
    EXPECT_EQ(r.kind, pipeline::durable::RecordKind::kEncodedRequest);
    SpanBatch batch;
    ASSERT_TRUE(
        pipeline::durable::DecodeRequestRecord(r.kind, std::string(r.payload), &filter_, &batch)
            .ok());
    EXPECT_EQ(batch.span_count(), 2u);
  });
  EXPECT_EQ(records, 1);
}

// With the durable queue a sink that cannot take a request now (full) does
// not refuse the client: the request waits on disk for that sink, and so do
// the ones after it, and they reach it in order once it takes again.
TEST_F(DurableReceiverTest, ARequestTheSinkRefusesWaitsOnDiskAndReachesItLater) {
  Make(1ull << 30);
  p_->sink.Refuse(true);
  const uint64_t now = NowNs();
  const std::string traces[] = {"0102030405060708090a0b0c0d0e0f10",
                                "1102030405060708090a0b0c0d0e0f10"};
  for (const auto& t : traces) {
    net::HttpResponse resp = Do(Post(kProto, TimedProtoRequest(t, {now})));
    ASSERT_EQ(resp.status, 200) << resp.body;
  }
  EXPECT_EQ(p_->cursor().spilled_requests, 2u);
  EXPECT_EQ(receiver_->stats().requests_accepted, 2u);
  EXPECT_EQ(receiver_->stats().spans_accepted, 2u);
  EXPECT_EQ(receiver_->stats().rejected_queue_full, 0u);
  EXPECT_FALSE(p_->sink.Pop(milliseconds(50)).has_value());

  p_->sink.Refuse(false);
  for (const auto& t : traces) {
    auto got = p_->sink.Pop(milliseconds(5000));
    ASSERT_TRUE(got.has_value()) << "refused request not handed over again";
    ASSERT_NE(got->batch, nullptr);
    ASSERT_EQ(got->batch->span_count(), 1u);
    EXPECT_EQ(TraceHexOf(*got->batch, 0), t);
    EXPECT_TRUE(got->ticket.valid());
    got->ticket.Ack();
  }
  EXPECT_TRUE(BacklogDrains());
  EXPECT_EQ(p_->cursor().queued_spans, 2u);
  EXPECT_EQ(p_->budget.used(), 0u);
}

// Back-pressure with the durable queue comes from the log: full (its records
// held until the sink acknowledges them), a request is 429 with Retry-After;
// once the sink acknowledges what it holds, requests go through again.
TEST_F(DurableReceiverTest, AFullDurableQueueIs429UntilTheSinkAcknowledges) {
  Make(1ull << 30, /*log_max_bytes=*/8192, /*segment_bytes=*/2048);
  const uint64_t now = NowNs();
  const std::string body = TimedProtoRequest(kTraceHex, std::vector<uint64_t>(10, now));
  net::HttpResponse resp;
  int accepted = 0;
  while (accepted < 100) {
    resp = Do(Post(kProto, body));
    if (resp.status != 200) break;
    ++accepted;
  }
  ASSERT_GT(accepted, 0);
  ExpectProtoRpcError(resp, 429, 8);
  EXPECT_EQ(Header(resp, "Retry-After"), std::optional<std::string>("1"));
  EXPECT_EQ(receiver_->stats().rejected_durable_full, 1u);
  EXPECT_EQ(receiver_->stats().rejected_queue_full, 0u);
  EXPECT_EQ(receiver_->stats().requests_accepted, static_cast<uint64_t>(accepted));
  EXPECT_EQ(p_->queue->log()->stats().rejected_full, 1u);
  EXPECT_EQ(p_->cursor().spilled_requests, 0u);

  for (int i = 0; i < accepted; ++i) {
    auto got = p_->sink.Pop(milliseconds(1000));
    ASSERT_TRUE(got.has_value());
    got->ticket.Ack();
  }
  EXPECT_EQ(Do(Post(kProto, body)).status, 200);
}

TEST(LoggedRequest, ARequestIsFilteredAgainstTheClockItWasReceivedAt) {
  pipeline::SpanFilter filter{pipeline::FilterLimits{}};
  const uint64_t received = NowNs() - 24 * kHourNs;  // replayed a day later
  const std::string body = TimedProtoRequest(kTraceHex, {received, received + 2 * kHourNs});
  using pipeline::durable::DecodeRequestRecord;
  using pipeline::durable::RecordKind;
  // kRequest (older logs): u64 receive time, then OTLP protobuf.
  std::string head;
  pipeline::durable::PutLe(&head, received, 8);
  SpanBatch batch;
  ASSERT_TRUE(DecodeRequestRecord(RecordKind::kRequest, head + body, &filter, &batch).ok());
  // Against the receive time the second span is 2 h in the future: dropped,
  // although by now it is in the past; the first is kept, although it is a
  // day old by now. Nothing is counted: the receiver counted it then.
  ASSERT_EQ(batch.span_count(), 1u);
  EXPECT_EQ(batch.spans.start_ns[0], received);
  EXPECT_EQ(filter.stats().rejected[static_cast<size_t>(pipeline::RejectReason::kFutureStart)], 0u);
  // The same in what the receivers log now (kEncodedRequest).
  SpanBatch encoded;
  ASSERT_TRUE(
      DecodeRequestRecord(
          RecordKind::kEncodedRequest,
          pipeline::durable::EncodedRequestHead(received, codec::BodyFormat::kOtlpProto) + body,
          &filter, &encoded)
          .ok());
  ASSERT_EQ(encoded.span_count(), 1u);
  EXPECT_EQ(encoded.spans.start_ns[0], received);
  EXPECT_EQ(filter.stats().rejected[static_cast<size_t>(pipeline::RejectReason::kFutureStart)], 0u);

  // Without a filter, or in the old record kind (no receive time), as sent.
  SpanBatch unfiltered;
  ASSERT_TRUE(DecodeRequestRecord(RecordKind::kRequest, head + body, nullptr, &unfiltered).ok());
  EXPECT_EQ(unfiltered.span_count(), 2u);
  SpanBatch old;
  ASSERT_TRUE(DecodeRequestRecord(RecordKind::kSpans, body, &filter, &old).ok());
  EXPECT_EQ(old.span_count(), 2u);
  // A truncated record or another kind is an error.
  SpanBatch bad;
  EXPECT_FALSE(DecodeRequestRecord(RecordKind::kRequest, "1234", &filter, &bad).ok());
  EXPECT_FALSE(DecodeRequestRecord(RecordKind::kBlock, body, &filter, &bad).ok());
}

// ---- the durable queue: the answer deferred until the fsync ----

// A receiver whose accepted requests go to a durable queue in a fresh
// directory, its fsyncs held back by a gate until the test opens it.
struct DurableFixture {
  explicit DurableFixture(bool fsync_always = true)
      : p({.log_dir = dir.path, .fsync_always = fsync_always, .hooks = {gate.Hook()}}),
        receiver(std::make_unique<OtlpHttpReceiver>(Listener(), Limits(1 << 20), *p.queue)) {}
  ~DurableFixture() {
    gate.Open();
    receiver.reset();
    p.CloseQueue();
  }

  TestLogDir dir{"receiver-durable"};
  pipeline::durable::SyncGate gate;
  TestDeferral later;  // outlives the log, which may still answer through it
  TestPipeline p;      // its budget outlives the batches' reservations
  std::unique_ptr<OtlpHttpReceiver> receiver;
};

TEST(OtlpHttpReceiver, FsyncAlwaysAnswersAfterTheSyncThatCoversTheRequest) {
  DurableFixture f;
  net::HttpRequest req = Post(kProto, ProtoRequest(kTraceHex, 2));
  net::HttpResponse resp;
  f.receiver->Handle(req, resp, f.later);
  ASSERT_TRUE(f.later.deferred());
  ASSERT_TRUE(f.gate.WaitEntered());  // the fsync that covers it has begun
  // No sink has the spans before the record is durable (decision 0053).
  EXPECT_FALSE(f.p.sink.Pop(milliseconds(0)).has_value());
  EXPECT_FALSE(f.later.answered());
  EXPECT_EQ(f.receiver->stats().requests_accepted, 0u);
  f.gate.Open();
  const net::HttpResponse answer = f.later.Wait();
  EXPECT_EQ(answer.status, 200);
  EXPECT_TRUE(f.p.sink.Pop(milliseconds(0)).has_value());
  EXPECT_EQ(answer.content_type, "application/x-protobuf");
  EXPECT_EQ(f.receiver->stats().requests_accepted, 1u);
  EXPECT_EQ(f.receiver->stats().spans_accepted, 2u);
  EXPECT_EQ(f.p.queue->log()->stats().fsyncs, 1u);
}

TEST(OtlpHttpReceiver, IntervalFsyncAnswersAtOnce) {
  DurableFixture f(/*fsync_always=*/false);
  net::HttpRequest req = Post(kJson, JsonRequest());
  net::HttpResponse resp;
  f.receiver->Handle(req, resp, f.later);
  EXPECT_FALSE(f.later.deferred());
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(f.p.queue->log()->stats().records_appended, 1u);
  EXPECT_EQ(f.receiver->stats().requests_accepted, 1u);
}

TEST(OtlpHttpReceiver, DurableQueueClosedBeforeTheSyncIs503) {
  DurableFixture f;
  f.p.queue->Close();  // the log
  net::HttpRequest req = Post(kJson, JsonRequest());
  net::HttpResponse resp;
  f.receiver->Handle(req, resp, f.later);
  ASSERT_TRUE(f.later.deferred());
  const net::HttpResponse answer = f.later.Wait();
  ExpectJsonRpcError(answer, 503, 14);
  EXPECT_EQ(Header(answer, "Retry-After"), "5");
  EXPECT_EQ(f.receiver->stats().durable_errors, 1u);
  EXPECT_EQ(f.receiver->stats().requests_accepted, 0u);
  EXPECT_FALSE(f.p.sink.Pop(milliseconds(0)).has_value());  // no sink got the spans
}

// The point of deferring: while one request waits for its fsync, its I/O
// thread (the only one) answers another connection.
TEST(OtlpHttpReceiver, AnIoThreadWhoseRequestWaitsForItsFsyncServesOthers) {
  DurableFixture f;
  ASSERT_TRUE(f.receiver->Start().ok());
  net::Client waiting(f.receiver->port());
  ASSERT_TRUE(waiting.Send(
      net::Post("/v1/traces", ProtoRequest(), "Content-Type: application/x-protobuf\r\n")));
  ASSERT_TRUE(f.gate.WaitEntered());  // its fsync is under way, and held there
  net::Client other(f.receiver->port());
  ASSERT_TRUE(other.Send(net::Get("/elsewhere")));
  net::Response r;
  ASSERT_TRUE(other.ReadResponse(&r));
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(waiting.NothingYet());
  f.gate.Open();
  ASSERT_TRUE(waiting.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/x-protobuf");
  f.receiver->Stop();
}

}  // namespace
}  // namespace spanhouse::receivers
