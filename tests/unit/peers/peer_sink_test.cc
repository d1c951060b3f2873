// The peer sink against a fake peer (a generic gRPC callback service on a
// free port that decodes what it is sent and answers as the test says):
// every span once with this node's name, only the owned traces, retries
// while the peer is down, the handoff, dead letters, partial successes, and
// the drain leaving what was not sent in the durable queue.
#include "peers/peer_sink.h"

#include <unistd.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "codec/otlp.h"
#include "testdata/sample_batch.h"

namespace spanhouse::peers {
namespace {

using namespace std::chrono_literals;
using SpanKey = std::pair<TraceId, SpanId>;

// Issues tickets and counts how often each record was acknowledged: 1 once
// every claim on it (clones included) is given up.
class FakeIssuer final : public sink::TicketIssuer {
 public:
  sink::Ticket Issue(uint64_t lsn) { return Make(this, lsn, lsn, 0, false); }
  int acks(uint64_t lsn) {
    std::lock_guard<std::mutex> lock(mu_);
    return acks_[lsn];
  }
  ~FakeIssuer() = default;

 private:
  sink::Ticket Reclaim(uint64_t segment, uint64_t lsn, uint64_t offset, bool keep) override {
    std::lock_guard<std::mutex> lock(mu_);
    --acks_[lsn];
    return Make(this, segment, lsn, offset, keep);
  }
  void Release(uint64_t segment, bool /*keep*/) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++acks_[segment];
  }
  std::mutex mu_;
  std::map<uint64_t, int> acks_;
};

// google.rpc.Status{code 8, details [Any{RetryInfo{retry_delay{nanos 1e8}}}]}.
std::string RetryDetails() {
  const std::string duration = std::string("\x10\x80\xc2\xd7\x2f", 5);
  const std::string retry_info =
      "\x0a" + std::string(1, static_cast<char>(duration.size())) + duration;
  const std::string type = "type.googleapis.com/google.rpc.RetryInfo";
  std::string any = "\x0a" + std::string(1, static_cast<char>(type.size())) + type;
  any += "\x12" + std::string(1, static_cast<char>(retry_info.size())) + retry_info;
  return "\x08\x08\x1a" + std::string(1, static_cast<char>(any.size())) + any;
}

// The other node: keeps what each Export call carried.
class FakePeer final : public grpc::CallbackGenericService {
 public:
  struct Call {
    std::string forwarded_by;
    std::string authorization;
    std::vector<SpanKey> spans;
    size_t metrics_only = 0;  // spans the sender had sampled out
  };
  // The answer to call n (from 1): OK unless it says otherwise.
  std::function<grpc::Status(int n)> script = [](int) { return grpc::Status::OK; };
  std::atomic<int64_t> reject{0};  // spans refused in each OK answer's partial success

  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  int attempts() {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_;
  }
  std::multiset<SpanKey> received() {
    std::multiset<SpanKey> all;
    for (const Call& c : calls()) all.insert(c.spans.begin(), c.spans.end());
    return all;
  }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    Call call;
    const auto& md = ctx->client_metadata();
    if (auto it = md.find(kForwardedByMetadata); it != md.end()) {
      call.forwarded_by.assign(it->second.data(), it->second.size());
    }
    if (auto it = md.find("authorization"); it != md.end()) {
      call.authorization.assign(it->second.data(), it->second.size());
    }
    return new Reactor(this, std::move(call));
  }

 private:
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(FakePeer* peer, Call call) : peer_(peer), call_(std::move(call)) { StartRead(&req_); }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no message"));
      int n;
      {
        std::lock_guard<std::mutex> lock(peer_->mu_);
        n = ++peer_->attempts_;
      }
      const grpc::Status answer = peer_->script(n);
      if (!answer.ok()) return Finish(answer);
      std::vector<grpc::Slice> slices;
      std::string body;
      if (req_.Dump(&slices).ok()) {
        for (const auto& s : slices) {
          body.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
      }
      SpanBatch b;
      if (!codec::DecodeOtlpProto(body, b).ok()) {
        return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "undecodable"));
      }
      for (uint32_t i = 0; i < b.span_count(); ++i) {
        call_.spans.emplace_back(b.spans.trace_id[i], b.spans.span_id[i]);
      }
      {
        std::lock_guard<std::mutex> lock(peer_->mu_);
        peer_->calls_.push_back(call_);
      }
      const std::string encoded = codec::EncodeExportResponseProto(peer_->reject.load(), "too old");
      grpc::Slice slice(encoded);
      resp_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&resp_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    FakePeer* peer_;
    Call call_;
    grpc::ByteBuffer req_;
    grpc::ByteBuffer resp_;
  };

  std::mutex mu_;
  std::vector<Call> calls_;
  int attempts_ = 0;
};

struct PeerServer {
  // On `port` (0: a free one).
  PeerServer(FakePeer& fake, int want = 0) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(want), grpc::InsecureServerCredentials(),
                       &port);
    b.RegisterCallbackGenericService(&fake);
    server = b.BuildAndStart();
  }
  ~PeerServer() {
    if (server != nullptr) server->Shutdown(std::chrono::system_clock::now() + 1s);
  }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// A port nothing listens on now (a server took it and let it go).
int FreePort() {
  FakePeer unused;
  PeerServer s(unused);
  return s.port;
}

template <typename F>
bool WaitUntil(F&& pred) {
  for (int i = 0; i < 3000 && !pred(); ++i) std::this_thread::sleep_for(10ms);  // ~30 s at most
  return pred();
}

PeerSinkOptions Options(int port) {
  PeerSinkOptions o;
  o.name = "peer:node-b";
  o.self = "node-a";
  o.peer = "node-b";
  o.address = "127.0.0.1:" + std::to_string(port);
  o.timeout = 5000ms;
  o.max_reconnect_backoff = 100ms;
  o.retry.backoff_min = 5ms;
  o.retry.backoff_max = 50ms;
  o.retry.unknown_attempts = 3;
  o.retry.drain_timeout = 2000ms;
  return o;
}

// `traces` traces of 3 spans each, their ids made distinct by `seed`.
sink::QueuedBatch Request(FakeIssuer& issuer, uint64_t lsn, int traces, uint8_t seed) {
  sink::QueuedBatch q;
  q.batch = std::make_unique<SpanBatch>(testdata::SampleBatch(traces));
  for (auto& id : q.batch->spans.trace_id) id[0] = seed;
  for (auto& id : q.batch->spans.span_id) id[0] = seed;
  q.ticket = issuer.Issue(lsn);
  return q;
}

std::multiset<SpanKey> Keys(const SpanBatch& b) {
  std::multiset<SpanKey> out;
  for (uint32_t i = 0; i < b.span_count(); ++i)
    out.emplace(b.spans.trace_id[i], b.spans.span_id[i]);
  return out;
}

struct Sink {
  explicit Sink(PeerSinkOptions o) {
    EXPECT_TRUE(MakePeerSink(std::move(o), &sink).ok());
    plugin = static_cast<PeerPlugin*>(&sink->plugin());
    EXPECT_TRUE(sink->Start().ok());
  }
  ~Sink() { sink->Drain(); }
  std::unique_ptr<sink::RuntimeSink> sink;
  PeerPlugin* plugin = nullptr;
  std::string Metrics() const {
    PromText t;
    sink->AppendMetrics(t);
    return t.Render();
  }
};

TEST(PeerSink, ForwardsEverySpanOnceInExportsOfAtMostMaxSpansWithItsNameAndToken) {
  FakePeer fake;
  PeerServer server(fake);
  ASSERT_GT(server.port, 0);
  PeerSinkOptions o = Options(server.port);
  o.bearer_token = "secret";
  o.max_export_spans = 10;  // a request of 12 spans goes in two Exports
  Sink s(o);
  FakeIssuer issuer;
  std::multiset<SpanKey> sent;
  for (uint8_t r = 1; r <= 5; ++r) {
    sink::QueuedBatch q = Request(issuer, r, 4, r);
    if (r == 3) q.batch->spans.metrics_only[1] = 1;  // sampled out here: the owner decides
    const auto keys = Keys(*q.batch);
    sent.insert(keys.begin(), keys.end());
    ASSERT_TRUE(s.sink->Push(q).ok());
  }
  ASSERT_TRUE(WaitUntil([&] {
    for (uint64_t r = 1; r <= 5; ++r) {
      if (issuer.acks(r) != 1) return false;
    }
    return true;
  }));
  EXPECT_EQ(fake.received(), sent);
  for (const auto& c : fake.calls()) {
    EXPECT_LE(c.spans.size(), 10u);
    EXPECT_EQ(c.forwarded_by, "node-a");
    EXPECT_EQ(c.authorization, "Bearer secret");
  }
  const PeerStats& st = s.plugin->peer_stats();
  EXPECT_EQ(st.spans_forwarded.load(), 60u);
  EXPECT_EQ(st.exports.load(), fake.calls().size());
  EXPECT_EQ(s.sink->stats().pending_rows.load(), 0u);
  const std::string m = s.Metrics();
  EXPECT_NE(m.find("spanhouse_peer_up{peer=\"node-b\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("spanhouse_peer_spans_forwarded_total{peer=\"node-b\"} 60"), std::string::npos);
}

TEST(PeerSink, SelectsAndKeepsOnlyTheTracesThePeerOwns) {
  FakePeer fake;
  PeerServer server(fake);
  PeerSinkOptions o = Options(server.port);
  // SampleBatch's traces differ in their last byte: the peer owns the even ones.
  o.owns = [](const TraceId& t, uint64_t) { return t[15] % 2 == 0; };
  Sink s(o);
  FakeIssuer issuer;
  sink::QueuedBatch q = Request(issuer, 1, 4, 1);
  std::vector<uint32_t> idx;
  ASSERT_TRUE(s.sink->Select(*q.batch, &idx));
  std::multiset<SpanKey> owned;
  for (uint32_t i = 0; i < q.batch->span_count(); ++i) {
    const bool own = q.batch->spans.trace_id[i][15] % 2 == 0;
    if (own) owned.emplace(q.batch->spans.trace_id[i], q.batch->spans.span_id[i]);
    EXPECT_EQ(std::count(idx.begin(), idx.end(), i), own ? 1 : 0) << i;
  }
  ASSERT_FALSE(owned.empty());
  ASSERT_LT(owned.size(), q.batch->span_count());
  // A record read back from the backlog comes whole: Keep drops the rest.
  ASSERT_TRUE(s.sink->Push(q).ok());
  // A request with none of its traces: acknowledged without a call.
  sink::QueuedBatch none;
  SpanBatch all = testdata::SampleBatch(4);
  std::vector<uint32_t> odd;
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    if (all.spans.trace_id[i][15] % 2 != 0) odd.push_back(i);
  }
  none.batch = std::make_unique<SpanBatch>();
  none.batch->AppendSpans(all, odd.data(), odd.size());
  none.ticket = issuer.Issue(2);
  ASSERT_TRUE(s.sink->Push(none).ok());
  ASSERT_TRUE(WaitUntil([&] { return issuer.acks(1) == 1 && issuer.acks(2) == 1; }));
  EXPECT_EQ(fake.received(), owned);
}

TEST(PeerSink, APeerDownIsRetriedUntilItIsBackThenDelivered) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  PeerSinkOptions o = Options(port);
  std::atomic<int> decided{0};
  o.handoff_after = std::chrono::hours(1);  // never within the test
  o.decide_here = [&](std::unique_ptr<SpanBatch>) {
    ++decided;
    return Status::Ok();
  };
  Sink s(o);
  FakeIssuer issuer;
  sink::QueuedBatch q = Request(issuer, 1, 2, 7);
  const auto sent = Keys(*q.batch);
  ASSERT_TRUE(s.sink->Push(q).ok());
  const PeerStats& st = s.plugin->peer_stats();
  ASSERT_TRUE(WaitUntil([&] { return st.failures_retryable.load() >= 3; }));
  EXPECT_EQ(issuer.acks(1), 0);
  EXPECT_FALSE(s.plugin->up());
  EXPECT_NE(s.Metrics().find("spanhouse_peer_up{peer=\"node-b\"} 0"), std::string::npos);

  FakePeer fake;
  PeerServer server(fake, port);
  ASSERT_EQ(server.port, port);
  ASSERT_TRUE(WaitUntil([&] { return issuer.acks(1) == 1; }));
  EXPECT_EQ(fake.received(), sent);
  EXPECT_TRUE(s.plugin->up());
  EXPECT_EQ(decided.load(), 0);
  EXPECT_EQ(st.spans_decided_here.load(), 0u);
}

TEST(PeerSink, APeerDownPastTheHandoffTimeHasItsSpansDecidedHere) {
  PeerSinkOptions o = Options(FreePort());
  std::mutex mu;
  std::multiset<SpanKey> decided;
  o.handoff_after = 200ms;
  o.decide_here = [&](std::unique_ptr<SpanBatch> b) {
    std::lock_guard<std::mutex> lock(mu);
    const auto keys = Keys(*b);
    decided.insert(keys.begin(), keys.end());
    return Status::Ok();
  };
  Sink s(o);
  FakeIssuer issuer;
  std::multiset<SpanKey> sent;
  for (uint8_t r = 1; r <= 3; ++r) {
    sink::QueuedBatch q = Request(issuer, r, 2, r);
    const auto keys = Keys(*q.batch);
    sent.insert(keys.begin(), keys.end());
    ASSERT_TRUE(s.sink->Push(q).ok());
  }
  ASSERT_TRUE(
      WaitUntil([&] { return issuer.acks(1) == 1 && issuer.acks(2) == 1 && issuer.acks(3) == 1; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(decided, sent);
  }
  const PeerStats& st = s.plugin->peer_stats();
  EXPECT_EQ(st.spans_decided_here.load(), sent.size());
  EXPECT_GE(st.failures_retryable.load(), 1u);
  EXPECT_EQ(st.spans_forwarded.load(), 0u);
  EXPECT_NE(s.Metrics().find("spanhouse_peer_spans_decided_here_total{peer=\"node-b\"} 18"),
            std::string::npos);
}

TEST(PeerSink, AFailingDecisionHereIsRetriedNotAcked) {
  PeerSinkOptions o = Options(FreePort());
  std::atomic<int> tries{0};
  o.handoff_after = 1ms;
  o.decide_here = [&](std::unique_ptr<SpanBatch>) {
    return ++tries < 3 ? Status::Exhausted("local queue full") : Status::Ok();
  };
  Sink s(o);
  FakeIssuer issuer;
  sink::QueuedBatch q = Request(issuer, 1, 1, 1);
  ASSERT_TRUE(s.sink->Push(q).ok());
  ASSERT_TRUE(WaitUntil([&] { return issuer.acks(1) == 1; }));
  EXPECT_EQ(tries.load(), 3);
  EXPECT_EQ(s.plugin->peer_stats().spans_decided_here.load(), 3u);
}

TEST(PeerSink, EachGrpcCodeIsClassifiedAndARefusedRequestIsDeadLettered) {
  struct Case {
    grpc::StatusCode code;
    bool retry_info;
    sink::Failure expect;
  };
  const std::vector<Case> cases = {
      {grpc::StatusCode::UNAVAILABLE, false, sink::Failure::kRetryable},
      {grpc::StatusCode::DEADLINE_EXCEEDED, false, sink::Failure::kRetryable},
      {grpc::StatusCode::ABORTED, false, sink::Failure::kRetryable},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, true, sink::Failure::kRetryable},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, false, sink::Failure::kUnknown},
      {grpc::StatusCode::INTERNAL, false, sink::Failure::kUnknown},
      {grpc::StatusCode::INVALID_ARGUMENT, false, sink::Failure::kPermanent},
      {grpc::StatusCode::UNAUTHENTICATED, false, sink::Failure::kPermanent},
      {grpc::StatusCode::PERMISSION_DENIED, false, sink::Failure::kPermanent},
  };
  const std::string dir = (std::filesystem::path(::testing::TempDir()) /
                           ("peer-dead-letter-" + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  size_t files_expected = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.code));
    FakePeer fake;
    fake.script = [&](int n) {
      if (n > 1) return grpc::Status::OK;
      return grpc::Status(c.code, "scripted", c.retry_info ? RetryDetails() : "");
    };
    PeerServer server(fake);
    PeerSinkOptions o = Options(server.port);
    o.dead_letter_dir = dir;
    Sink s(o);
    FakeIssuer issuer;
    sink::QueuedBatch q = Request(issuer, 1, 1, 1);
    const auto sent = Keys(*q.batch);
    ASSERT_TRUE(s.sink->Push(q).ok());
    ASSERT_TRUE(WaitUntil([&] { return issuer.acks(1) == 1; }));
    const PeerStats& st = s.plugin->peer_stats();
    EXPECT_EQ(st.failures_retryable.load(), c.expect == sink::Failure::kRetryable ? 1u : 0u);
    EXPECT_EQ(st.failures_unknown.load(), c.expect == sink::Failure::kUnknown ? 1u : 0u);
    EXPECT_EQ(st.failures_permanent.load(), c.expect == sink::Failure::kPermanent ? 1u : 0u);
    if (c.expect == sink::Failure::kPermanent) {
      // Not sent again: kept in a file, acknowledged.
      EXPECT_EQ(fake.attempts(), 1);
      EXPECT_TRUE(fake.calls().empty());
      EXPECT_EQ(s.sink->stats().rows_dead_lettered.load(), sent.size());
      ++files_expected;
    } else {
      EXPECT_EQ(fake.received(), sent);
    }
  }
  // Each refused request's file holds the request as it was sent.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind("peer-node-b-", 0), 0u) << name;
    EXPECT_EQ(e.path().extension(), ".pb");
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream body;
    body << in.rdbuf();
    SpanBatch b;
    ASSERT_TRUE(codec::DecodeOtlpProto(body.str(), b).ok());
    EXPECT_EQ(b.span_count(), 3u);
    ++files;
  }
  EXPECT_EQ(files, files_expected);
  std::filesystem::remove_all(dir);
}

TEST(PeerSink, WithoutADeadLetterDirectoryARefusedRequestStaysQueued) {
  FakePeer fake;
  fake.script = [](int) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad"); };
  PeerServer server(fake);
  Sink s(Options(server.port));
  FakeIssuer issuer;
  sink::QueuedBatch q = Request(issuer, 1, 1, 1);
  ASSERT_TRUE(s.sink->Push(q).ok());
  ASSERT_TRUE(WaitUntil([&] { return s.sink->stats().pending_rows.load() == 0; }));
  EXPECT_EQ(issuer.acks(1), 0);
  EXPECT_EQ(s.plugin->peer_stats().failures_permanent.load(), 1u);
}

TEST(PeerSink, APartialSuccessIsCounted) {
  FakePeer fake;
  fake.reject = 2;
  PeerServer server(fake);
  Sink s(Options(server.port));
  FakeIssuer issuer;
  sink::QueuedBatch q = Request(issuer, 1, 2, 1);
  ASSERT_TRUE(s.sink->Push(q).ok());
  ASSERT_TRUE(WaitUntil([&] { return issuer.acks(1) == 1; }));
  const PeerStats& st = s.plugin->peer_stats();
  EXPECT_EQ(st.spans_rejected.load(), 2u);
  EXPECT_EQ(st.spans_forwarded.load(), 4u);
  EXPECT_NE(s.Metrics().find("spanhouse_peer_spans_rejected_total{peer=\"node-b\"} 2"),
            std::string::npos);
}

TEST(PeerSink, TheDrainLeavesWhatWasNotSentInTheDurableQueue) {
  PeerSinkOptions o = Options(FreePort());
  o.retry.drain_timeout = 300ms;
  FakeIssuer issuer;
  {
    Sink s(o);
    sink::QueuedBatch q = Request(issuer, 1, 2, 1);
    ASSERT_TRUE(s.sink->Push(q).ok());
    ASSERT_TRUE(WaitUntil([&] { return s.plugin->peer_stats().failures_retryable.load() >= 1; }));
    s.sink->Drain();
    EXPECT_EQ(s.sink->stats().rows_left_queued.load(), 6u);
    EXPECT_EQ(s.sink->stats().rows_written.load(), 0u);
  }
  EXPECT_EQ(issuer.acks(1), 0);  // un-acked: replayed at the next start
}

TEST(PeerSink, OptionsThatCannotWorkAreRefused) {
  std::unique_ptr<sink::RuntimeSink> out;
  PeerSinkOptions o = Options(1);
  o.self.clear();
  EXPECT_EQ(MakePeerSink(o, &out).code(), StatusCode::kInvalidArgument);
  o = Options(1);
  o.handoff_after = 1s;  // without decide_here
  EXPECT_EQ(MakePeerSink(o, &out).code(), StatusCode::kInvalidArgument);
  o = Options(1);
  o.tls = true;
  o.tls_ca_file = "no-such-dir/ca.pem";
  const Status st = MakePeerSink(o, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("no-such-dir/ca.pem"), std::string::npos) << st.message();
  EXPECT_TRUE(MakePeerSink(Options(1), &out).ok());
}

}  // namespace
}  // namespace spanhouse::peers
