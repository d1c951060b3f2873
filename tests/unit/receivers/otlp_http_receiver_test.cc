// Tests for the OTLP/HTTP receiver's request handler, called directly (no
// socket): routing, media types and content codings, size limits before and
// after decompression, the error bodies the OTLP/HTTP specification asks for
// (google.rpc.Status in the request's encoding), back-pressure answers from
// the queue, the stats counters, and with the durable queue's "always" fsync
// the answer deferred until the sync, its I/O thread free meanwhile (that
// one over a socket, the receiver started).
#include <gtest/gtest.h>
#include <simdjson.h>
#include <zlib.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "model/span_batch.h"
#include "net/http_server.h"
#include "pipeline/durable/request_record.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "pipeline/queue/span_queue.h"
#include "receivers/durable/logged_request.h"
#include "receivers/durable/spill_backlog.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "unit/net/http_client.h"
#include "unit/pipeline/sync_gate.h"
#include "unit/receivers/requests.h"

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

// A receiver on a one-shard queue and a memory budget, never started.
// `queue` is that one shard, where every accepted batch lands.
struct Fixture {
  explicit Fixture(size_t max_body_bytes = 1 << 20, size_t queue_bytes = 64 << 20,
                   size_t budget_bytes = 1ull << 30)
      : sharded(1, queue_bytes),
        budget(budget_bytes),
        receiver(Options(max_body_bytes), sharded, budget),
        queue(sharded.shard(0)) {}
  static OtlpHttpOptions Options(size_t max_body_bytes) {
    OtlpHttpOptions o;
    o.address = "127.0.0.1:0";
    o.max_body_bytes = max_body_bytes;
    o.threads = 1;
    return o;
  }
  // By value: the receiver may take the body, as it does from the server.
  net::HttpResponse Do(net::HttpRequest req) { return Answer(receiver, req); }
  pipeline::ShardedQueue sharded;
  pipeline::MemoryBudget budget;
  OtlpHttpReceiver receiver;
  pipeline::SpanQueue& queue;
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
  f.sharded.Close();
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
  f.sharded.Close();
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
  f.sharded.Close();
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
  pipeline::ShardedQueue sharded(1, 64 << 20);
  pipeline::MemoryBudget budget(1ull << 30);
  OtlpHttpOptions o = Fixture::Options(1 << 20);
  o.max_spans_per_request = 3;
  OtlpHttpReceiver receiver(o, sharded, budget);
  net::HttpRequest ok = Post(kProto, ProtoRequest(kTraceHex, 3));  // at the limit
  net::HttpResponse resp = Answer(receiver, ok);
  EXPECT_EQ(resp.status, 200);
  ASSERT_TRUE(sharded.shard(0).Pop(milliseconds(100)).has_value());

  net::HttpRequest over = Post(kProto, ProtoRequest(kTraceHex, 4));
  resp = Answer(receiver, over);
  ExpectProtoRpcError(resp, 413, 3);
  EXPECT_NE(ProtoRpcStatus(resp.body)->message.find("4 spans, over the limit of 3"),
            std::string::npos);
  EXPECT_FALSE(sharded.shard(0).Pop(milliseconds(0)).has_value());
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
  pipeline::ShardedQueue sharded(1, 64 << 20);
  pipeline::MemoryBudget budget(1ull << 30);
  pipeline::SpanFilter filter(pipeline::FilterLimits{});
  OtlpHttpReceiver receiver(Fixture::Options(1 << 20), sharded, budget, &filter);
  // The helpers' spans have no times: start 0 is older than any retention.
  net::HttpRequest req = Post(kProto, ProtoRequest(kTraceHex, 2));
  net::HttpResponse resp = Answer(receiver, req);
  EXPECT_EQ(resp.status, 200);
  auto ps = ProtoPartialSuccess(resp.body);
  ASSERT_TRUE(ps.has_value()) << "no partial_success in the response";
  EXPECT_EQ(ps->first, 2);
  EXPECT_NE(ps->second.find("rejected 2 spans: 2 too_old"), std::string::npos) << ps->second;
  EXPECT_FALSE(sharded.shard(0).Pop(milliseconds(0)).has_value());  // nothing left to queue

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
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("receiver_spill_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    pipeline::durable::LogOptions lo;
    lo.dir = dir_.string();
    lo.fsync_always = false;
    ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log_).ok());
  }
  void TearDown() override {
    backlog_.reset();
    log_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A receiver with the log and a spill backlog over a `budget_bytes` budget.
  void Make(size_t budget_bytes) {
    budget_ = std::make_unique<pipeline::MemoryBudget>(budget_bytes);
    backlog_ = std::make_unique<SpillBacklog>(*log_, sharded_, *budget_, &filter_);
    OtlpHttpOptions o = Fixture::Options(1 << 20);
    o.log = log_.get();
    o.spill = backlog_.get();
    o.memory_wait = milliseconds(0);
    receiver_ = std::make_unique<OtlpHttpReceiver>(o, sharded_, *budget_, &filter_);
  }
  net::HttpResponse Do(net::HttpRequest req) { return Answer(*receiver_, req); }

  std::filesystem::path dir_;
  std::unique_ptr<pipeline::durable::SegmentLog> log_;
  pipeline::ShardedQueue sharded_{1, 64 << 20};
  pipeline::SpanFilter filter_{pipeline::FilterLimits{}};
  std::unique_ptr<pipeline::MemoryBudget> budget_;
  std::unique_ptr<SpillBacklog> backlog_;
  std::unique_ptr<OtlpHttpReceiver> receiver_;
};

TEST_F(DurableReceiverTest, OverTheMemoryBudgetRequestsWaitOnDiskAndAreQueuedInOrderLater) {
  Make(1 << 20);
  ASSERT_TRUE(budget_->TryReserve(1 << 20));  // the writers hold all the memory
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
  backlog_->Start();
  EXPECT_EQ(backlog_->stats().spilled_requests, 3u);
  EXPECT_EQ(backlog_->stats().spilled_spans, 3u);
  EXPECT_TRUE(backlog_->waiting());
  EXPECT_EQ(receiver_->stats().spans_accepted, 3u);
  EXPECT_EQ(receiver_->stats().rejected_queue_full, 0u);
  EXPECT_EQ(budget_->used(), size_t{1} << 20);  // the spilled batches hold no memory
  EXPECT_FALSE(sharded_.shard(0).Pop(milliseconds(50)).has_value());

  // Memory comes back: the backlog reads the records back, filters them as
  // they were filtered when received (the future span stays out, and is not
  // counted again), and queues them in the order they came.
  budget_->Release(1 << 20);
  for (const auto& t : traces) {
    auto got = sharded_.shard(0).Pop(milliseconds(5000));
    ASSERT_TRUE(got.has_value()) << "spilled request not queued";
    ASSERT_EQ(got->batch->span_count(), 1u);
    EXPECT_EQ(TraceHexOf(*got->batch, 0), t);
    EXPECT_EQ(got->batch->spans.start_ns[0], now);
    EXPECT_TRUE(got->ref.valid());
    EXPECT_EQ(got->reservation.bytes(), got->batch->MemoryBytes());
    got->ref.Done();
  }
  EXPECT_EQ(filter_.stats().rejected[static_cast<size_t>(pipeline::RejectReason::kFutureStart)],
            3u);
  for (int i = 0; i < 100 && backlog_->waiting(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(backlog_->waiting());
  EXPECT_EQ(backlog_->stats().queued_spans, 3u);

  // Drained: a new request takes memory and goes straight to the queue.
  ASSERT_EQ(Do(Post(kProto, TimedProtoRequest(traces[0], {now}))).status, 200);
  EXPECT_EQ(backlog_->stats().spilled_requests, 3u);
  EXPECT_TRUE(sharded_.shard(0).Pop(milliseconds(1000)).has_value());
}

TEST_F(DurableReceiverTest, WhatStillWaitsAtStopIsLeftInTheLogForTheReplay) {
  Make(1 << 20);
  ASSERT_TRUE(budget_->TryReserve(1 << 20));
  backlog_->Start();
  const uint64_t now = NowNs();
  ASSERT_EQ(Do(Post(kProto, TimedProtoRequest(kTraceHex, {now, now + 1}))).status, 200);
  ASSERT_EQ(Do(Post(kJson, JsonRequest())).status, 200);  // start 0: filtered out, nothing logged
  backlog_->Stop();
  EXPECT_EQ(backlog_->stats().spilled_requests, 1u);
  receiver_.reset();
  backlog_.reset();
  log_.reset();

  pipeline::durable::LogOptions lo;
  lo.dir = dir_.string();
  ASSERT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log_).ok());
  int records = 0;
  log_->ReadReplay([&](const pipeline::durable::SegmentLog::Record& r, uint64_t) {
    ++records;
    EXPECT_EQ(r.kind, pipeline::durable::RecordKind::kEncodedRequest);
    SpanBatch batch;
    ASSERT_TRUE(DecodeLoggedRequest(r.kind, std::string(r.payload), &filter_, &batch).ok());
    EXPECT_EQ(batch.span_count(), 2u);
  });
  EXPECT_EQ(records, 1);
}

TEST(LoggedRequest, ARequestIsFilteredAgainstTheClockItWasReceivedAt) {
  pipeline::SpanFilter filter{pipeline::FilterLimits{}};
  const uint64_t received = NowNs() - 24 * kHourNs;  // replayed a day later
  const std::string body = TimedProtoRequest(kTraceHex, {received, received + 2 * kHourNs});
  using pipeline::durable::RecordKind;
  SpanBatch batch;
  ASSERT_TRUE(DecodeLoggedRequest(RecordKind::kRequest,
                                  pipeline::durable::RequestRecordHead(received) + body, &filter,
                                  &batch)
                  .ok());
  // Against the receive time the second span is 2 h in the future: dropped,
  // although by now it is in the past; the first is kept, although it is a
  // day old by now. Nothing is counted: the receiver counted it then.
  ASSERT_EQ(batch.span_count(), 1u);
  EXPECT_EQ(batch.spans.start_ns[0], received);
  EXPECT_EQ(filter.stats().rejected[static_cast<size_t>(pipeline::RejectReason::kFutureStart)], 0u);

  // Without a filter, or in the old record kind (no receive time), as sent.
  SpanBatch unfiltered;
  ASSERT_TRUE(DecodeLoggedRequest(RecordKind::kRequest,
                                  pipeline::durable::RequestRecordHead(received) + body, nullptr,
                                  &unfiltered)
                  .ok());
  EXPECT_EQ(unfiltered.span_count(), 2u);
  SpanBatch old;
  ASSERT_TRUE(DecodeLoggedRequest(RecordKind::kSpans, body, &filter, &old).ok());
  EXPECT_EQ(old.span_count(), 2u);
  // A truncated record or another kind is an error.
  SpanBatch bad;
  EXPECT_FALSE(DecodeLoggedRequest(RecordKind::kRequest, "1234", &filter, &bad).ok());
  EXPECT_FALSE(DecodeLoggedRequest(RecordKind::kBlock, body, &filter, &bad).ok());
}

// ---- the durable queue: the answer deferred until the fsync ----

// A receiver whose accepted requests go to a durable queue in a fresh
// directory, its fsyncs held back by a gate until the test opens it.
struct DurableFixture {
  explicit DurableFixture(bool fsync_always = true) {
    pipeline::durable::LogOptions lo;
    lo.dir = dir;
    lo.fsync_always = fsync_always;
    lo.test_before_sync = gate.Hook();
    std::filesystem::remove_all(dir);
    EXPECT_TRUE(pipeline::durable::SegmentLog::Open(lo, &log).ok());
    OtlpHttpOptions o = Fixture::Options(1 << 20);
    o.log = log.get();
    receiver = std::make_unique<OtlpHttpReceiver>(o, sharded, budget);
  }
  ~DurableFixture() {
    gate.Open();
    receiver.reset();
    log.reset();
    std::filesystem::remove_all(dir);
  }

  const std::string dir = ::testing::TempDir() + "receiver-durable-" + std::to_string(::getpid()) +
                          "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  pipeline::durable::SyncGate gate;
  TestDeferral later;  // outlives the log, which may still answer through it
  std::unique_ptr<pipeline::durable::SegmentLog> log;
  pipeline::MemoryBudget budget{1ull << 30};  // outlives the batches' reservations
  pipeline::ShardedQueue sharded{1, 64 << 20};
  std::unique_ptr<OtlpHttpReceiver> receiver;
};

TEST(OtlpHttpReceiver, FsyncAlwaysAnswersAfterTheSyncThatCoversTheRequest) {
  DurableFixture f;
  net::HttpRequest req = Post(kProto, ProtoRequest(kTraceHex, 2));
  net::HttpResponse resp;
  f.receiver->Handle(req, resp, f.later);
  ASSERT_TRUE(f.later.deferred());
  // Queued at once, so the writer works while the fsync runs.
  EXPECT_TRUE(f.sharded.shard(0).Pop(milliseconds(0)).has_value());
  ASSERT_TRUE(f.gate.WaitEntered());  // the fsync that covers it has begun
  EXPECT_FALSE(f.later.answered());
  EXPECT_EQ(f.receiver->stats().requests_accepted, 0u);
  f.gate.Open();
  const net::HttpResponse answer = f.later.Wait();
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.content_type, "application/x-protobuf");
  EXPECT_EQ(f.receiver->stats().requests_accepted, 1u);
  EXPECT_EQ(f.receiver->stats().spans_accepted, 2u);
  EXPECT_EQ(f.log->stats().fsyncs, 1u);
}

TEST(OtlpHttpReceiver, IntervalFsyncAnswersAtOnce) {
  DurableFixture f(/*fsync_always=*/false);
  net::HttpRequest req = Post(kJson, JsonRequest());
  net::HttpResponse resp;
  f.receiver->Handle(req, resp, f.later);
  EXPECT_FALSE(f.later.deferred());
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(f.log->stats().records_appended, 1u);
  EXPECT_EQ(f.receiver->stats().requests_accepted, 1u);
}

TEST(OtlpHttpReceiver, DurableQueueClosedBeforeTheSyncIs503) {
  DurableFixture f;
  f.log->Close();
  net::HttpRequest req = Post(kJson, JsonRequest());
  net::HttpResponse resp;
  f.receiver->Handle(req, resp, f.later);
  ASSERT_TRUE(f.later.deferred());
  const net::HttpResponse answer = f.later.Wait();
  ExpectJsonRpcError(answer, 503, 14);
  EXPECT_EQ(Header(answer, "Retry-After"), "5");
  EXPECT_EQ(f.receiver->stats().durable_errors, 1u);
  EXPECT_EQ(f.receiver->stats().requests_accepted, 0u);
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
