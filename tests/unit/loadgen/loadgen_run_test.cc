// `loadgen` end to end against an in-process OTLP/HTTP server (net/HttpServer)
// that decodes what it gets, can throttle or reject, and answers the span
// count --verify asks for.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "codec/compression.h"
#include "codec/otlp.h"
#include "model/span_batch.h"
#include "net/http_server.h"
#include "tools/loadgen/loadgen.h"

namespace spanhouse::loadgen {
namespace {

class FakeBackend {
 public:
  int throttle_first = 0;    // answer this many requests 429
  bool reject_all = false;   // answer every request 400
  int64_t count_offset = 0;  // added to the count --verify reads

  FakeBackend()
      : server_(
            net::HttpServerOptions{"fake", "127.0.0.1:0", 64u << 20, 2},
            [this](const net::HttpRequest& req, net::HttpResponse& resp) { Handle(req, resp); }) {}

  void Start() { ASSERT_TRUE(server_.Start().ok()); }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

  uint64_t spans() {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t n = 0;
    for (const auto& [id, c] : by_run_) n += c;
    return n;
  }
  int requests() const { return requests_.load(); }
  std::map<std::string, std::string> encodings() {
    std::lock_guard<std::mutex> lock(mu_);
    return encodings_;
  }
  // The distinct db.statement values received, and those of the first request.
  std::pair<size_t, size_t> statements() {
    std::lock_guard<std::mutex> lock(mu_);
    return {statements_.size(), first_statements_};
  }

 private:
  void Handle(const net::HttpRequest& req, net::HttpResponse& resp) {
    if (req.method == "GET" && req.path() == "/api/spans/count") {
      const std::string key = "value=";
      const std::string id = req.target.substr(req.target.find(key) + key.size());
      std::lock_guard<std::mutex> lock(mu_);
      resp.content_type = "application/json";
      resp.body =
          "{\"count\":" + std::to_string(static_cast<int64_t>(by_run_[id]) + count_offset) + "}";
      return;
    }
    if (req.path() != "/v1/traces") {
      resp.status = 404;
      return;
    }
    const int n = requests_.fetch_add(1);
    if (n < throttle_first) {
      resp.status = 429;
      resp.headers.emplace_back("Retry-After", "0");
      return;
    }
    if (reject_all) {
      resp.status = 400;
      resp.body = "bad request for the test";
      return;
    }
    std::string body;
    if (Status st = codec::Decompress(req.content_encoding, req.body, 256u << 20, &body);
        !st.ok()) {
      resp.status = 415;
      return;
    }
    SpanBatch b;
    if (Status st = codec::DecodeOtlpProto(body, b); !st.ok()) {
      resp.status = 400;
      resp.body = st.message();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    encodings_[req.content_encoding.empty() ? "none" : req.content_encoding] = req.content_type;
    for (size_t i = 0; i < b.span_count(); ++i) {
      const Range r = b.resources.attrs[b.spans.resource[i]];
      std::string run;
      for (uint32_t a = r.begin; a < r.end; ++a) {
        if (b.Str(b.resource_attrs.key[a]) == "loadgen.run_id") {
          run = std::string(b.Str(b.resource_attrs.value[a]));
        }
      }
      ++by_run_[run];
    }
    for (size_t a = 0; a < b.span_attrs.size(); ++a) {
      if (b.Str(b.span_attrs.key[a]) == "db.statement") {
        statements_.emplace(b.Str(b.span_attrs.value[a]));
      }
    }
    if (first_statements_ == 0) first_statements_ = statements_.size();
    resp.content_type = "application/x-protobuf";
  }

  net::HttpServer server_;
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::map<std::string, uint64_t> by_run_;
  std::map<std::string, std::string> encodings_;
  std::set<std::string> statements_;
  size_t first_statements_ = 0;
};

LoadgenOptions Options(const FakeBackend& fake) {
  LoadgenOptions o;
  o.endpoint = fake.base() + "/v1/traces";
  o.query_endpoint = fake.base();
  o.connections = 2;
  o.duration_s = 0;
  o.spans = 5000;
  o.spans_per_request = 200;
  o.payloads = 8;
  o.quiet = true;
  o.verify_timeout_s = 5;
  return o;
}

TEST(LoadgenRunTest, SendsAcceptsAndVerifies) {
  FakeBackend fake;
  fake.Start();
  LoadgenOptions o = Options(fake);
  o.verify = true;
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(o, &r), 0);
  EXPECT_GE(r.spans_sent, 5000u);
  EXPECT_LT(r.spans_sent, 5000u + 2 * 250);
  EXPECT_EQ(r.spans_accepted, r.spans_sent);
  EXPECT_EQ(r.spans_accepted, fake.spans());
  EXPECT_EQ(r.requests, r.requests_ok);
  EXPECT_EQ(r.rejected_requests, 0u);
  EXPECT_TRUE(r.verified);
  EXPECT_TRUE(r.verify_ok);
  EXPECT_EQ(r.stored, static_cast<int64_t>(r.spans_accepted));
  EXPECT_EQ(r.run_id.size(), 16u);
  EXPECT_GT(r.latency_p99_ms, 0);
  EXPECT_GE(r.latency_p99_ms, r.latency_p50_ms);
  EXPECT_EQ(fake.encodings()["none"], "application/x-protobuf");
}

TEST(LoadgenRunTest, RetriesThrottledRequests) {
  FakeBackend fake;
  fake.throttle_first = 3;
  fake.Start();
  LoadgenOptions o = Options(fake);
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(o, &r), 0);
  EXPECT_EQ(r.throttled, 3u);
  EXPECT_EQ(r.retried, 3u);
  EXPECT_EQ(r.rejected_requests, 0u);
  EXPECT_EQ(r.spans_accepted, r.spans_sent);
  EXPECT_EQ(r.spans_accepted, fake.spans());
}

TEST(LoadgenRunTest, GivesUpAfterMaxRetries) {
  FakeBackend fake;
  fake.throttle_first = 1000000;
  fake.Start();
  LoadgenOptions o = Options(fake);
  o.connections = 1;
  o.spans = 1;  // one request
  o.max_retries = 2;
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(o, &r), 1) << "nothing accepted";
  EXPECT_EQ(r.requests, 1u);
  EXPECT_EQ(r.throttled, 3u);
  EXPECT_EQ(r.retried, 2u);
  EXPECT_EQ(r.rejected_requests, 1u);
  EXPECT_EQ(r.spans_accepted, 0u);
}

TEST(LoadgenRunTest, CountsRejectedRequests) {
  FakeBackend fake;
  fake.reject_all = true;
  fake.Start();
  LoadgenOptions o = Options(fake);
  o.spans = 1000;
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(o, &r), 1);
  EXPECT_EQ(r.rejected_requests, r.requests);
  EXPECT_EQ(r.spans_accepted, 0u);
  EXPECT_EQ(r.retried, 0u);
}

TEST(LoadgenRunTest, VerifyMismatchExitsOne) {
  FakeBackend fake;
  fake.count_offset = -7;
  fake.Start();
  LoadgenOptions o = Options(fake);
  o.verify = true;
  o.verify_timeout_s = 1;
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(o, &r), 1);
  EXPECT_TRUE(r.verified);
  EXPECT_FALSE(r.verify_ok);
  EXPECT_EQ(r.stored, static_cast<int64_t>(r.spans_accepted) - 7);
}

TEST(LoadgenRunTest, CompressesAndGeneratesAfresh) {
  for (const char* enc : {"gzip", "zstd"}) {
    FakeBackend fake;
    fake.Start();
    LoadgenOptions o = Options(fake);
    o.compression = enc;
    o.payloads = 0;  // every request generated afresh
    o.spans = 1500;
    LoadgenReport r;
    EXPECT_EQ(RunLoadgen(o, &r), 0) << enc;
    EXPECT_EQ(r.spans_accepted, fake.spans()) << enc;
    EXPECT_EQ(fake.encodings().count(enc), 1u) << enc;
  }
}

// One payload sent over and over: the replay corpus sends the same
// statements each time; the fresh corpus turns fresh values on, so its
// literals change send after send.
TEST(LoadgenRunTest, FreshCorpusImpliesFreshValues) {
  for (const CorpusKind kind : {CorpusKind::kReplay, CorpusKind::kFresh}) {
    FakeBackend fake;
    fake.Start();
    LoadgenOptions o = Options(fake);
    o.connections = 1;
    o.payloads = 1;
    o.spans = 1000;
    o.corpus = kind;
    LoadgenReport r;
    EXPECT_EQ(RunLoadgen(o, &r), 0);
    EXPECT_GE(r.requests_ok, 4u);
    const auto [all, first] = fake.statements();
    ASSERT_GT(first, 10u);
    if (kind == CorpusKind::kReplay) {
      EXPECT_EQ(all, first) << "the same payload, the same statements";
    } else {
      EXPECT_GE(all, 3 * first) << "fresh literals every send";
    }
  }
}

TEST(LoadgenRunTest, BadFlagsExitTwo) {
  LoadgenOptions o;
  o.quiet = true;
  o.endpoint = "https://example.com/v1/traces";
  EXPECT_EQ(RunLoadgen(o), 2);
  o = LoadgenOptions{};
  o.quiet = true;
  o.compression = "brotli";
  EXPECT_EQ(RunLoadgen(o), 2);
  o = LoadgenOptions{};
  o.quiet = true;
  o.connections = 0;
  EXPECT_EQ(RunLoadgen(o), 2);
  o = LoadgenOptions{};
  o.quiet = true;
  o.duration_s = 0;
  o.spans = 0;
  EXPECT_EQ(RunLoadgen(o), 2);
}

TEST(LoadgenRunTest, UnreachableEndpointStopsAtTheDeadline) {
  LoadgenOptions o;
  o.quiet = true;
  o.endpoint = "http://127.0.0.1:1/v1/traces";  // nothing listens on port 1
  o.connections = 1;
  o.duration_s = 0.5;
  o.payloads = 1;
  o.spans_per_request = 50;
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(o, &r), 1);
  EXPECT_GT(r.connection_errors, 0u);
  EXPECT_EQ(r.spans_accepted, 0u);
}

}  // namespace
}  // namespace spanhouse::loadgen
