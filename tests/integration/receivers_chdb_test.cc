// The Zipkin receiver end to end on real chDB: Zipkin v2 JSON and proto3
// requests handled by the receiver, stored by the writer and read back by the
// span reader as the spans the decoders give; and a Zipkin request logged in
// the durable queue but never stored (a crash) replayed at the next start
// from its record (kEncodedRequest, Zipkin format) and stored.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "codec/zipkin.h"
#include "common/memory_budget.h"
#include "integration/engine.h"
#include "net/http_server.h"
#include "pipeline/durable/durable_queue.h"
#include "receivers/zipkin/zipkin_receiver.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/embedded_sink.h"
#include "testdata/test_sink.h"
#include "testdata/zipkin_spans.h"

namespace spanhouse::storage {
namespace {

using std::chrono::milliseconds;

class Immediate : public net::HttpDeferral {
 public:
  net::HttpResponder Defer() override {
    ADD_FAILURE() << "deferred (fsync always is not used here)";
    return {};
  }
};

std::vector<testdata::ZSpan> ZipkinTrace(const std::string& trace_id) {
  testdata::ZSpan server = testdata::ZipkinFullSpan();
  server.trace_id = trace_id;
  testdata::ZSpan client = server;
  client.id = "eee19b7ec3c1b175";
  client.parent_id = server.id;
  client.kind = "CLIENT";
  client.name = "select";
  client.local = testdata::ZEndpoint{"cart-db", "10.0.0.3", "", 9000};
  client.remote.reset();
  client.tags = {{"db.system", "clickhouse"}, {"error", "timeout"}};
  client.debug = client.shared = false;
  return {server, client};
}

int Post(receivers::ZipkinReceiver& receiver, const char* type, std::string body) {
  net::HttpRequest req;
  req.method = "POST";
  req.target = "/api/v2/spans";
  req.content_type = type;
  req.body = std::move(body);
  net::HttpResponse resp;
  Immediate later;
  receiver.Handle(req, resp, later);
  return resp.status;
}

// Stores every batch `sink` was handed.
void StoreQueued(testdata::TestSink& sink, const Capabilities& caps) {
  while (auto item = sink.Pop(milliseconds(0))) WriteAll(*item->batch, caps);
}

// A durable queue (`log_dir` empty: none) and a sink that keeps what it
// gets, for a receiver to hand requests to.
struct Pipeline {
  explicit Pipeline(const std::string& log_dir = "") {
    pipeline::durable::DurableOptions o;
    o.enabled = !log_dir.empty();
    o.log.dir = log_dir;
    o.log.fsync_always = false;
    EXPECT_TRUE(pipeline::durable::DurableQueue::Open(o, budget, nullptr, &queue).ok());
    queue->AddSink(sink);
    queue->Start();
  }
  ~Pipeline() { queue->StopBacklogs(); }
  MemoryBudget budget{1ull << 30};
  testdata::TestSink sink;
  std::unique_ptr<pipeline::durable::DurableQueue> queue;
};

receivers::HttpListenerOptions Loopback() {
  receivers::HttpListenerOptions o;
  o.address = "127.0.0.1:0";
  return o;
}

void ExpectStoredAs(const Capabilities& caps, const std::string& trace_hex, const SpanBatch& want) {
  ChdbSpanReader reader(*Engine::conn, caps);
  TraceId id{};
  ASSERT_TRUE(FromHex(trace_hex, id.data(), id.size()));
  SpanBatch got;
  Status st = reader.GetTrace(id, &got);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string why;
  EXPECT_TRUE(want.LogicallyEquals(got, &why)) << why;
}

TEST(ZipkinOnChdb, JsonAndProtoRequestsAreStoredAndReadBack) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  Pipeline p;  // no filter: the fixture's times are old
  receivers::ZipkinReceiver receiver(Loopback(), {}, *p.queue);

  const std::string json_trace = "5b8efff798038103d269b633813fc60c";
  const std::string proto_trace = "6b8efff798038103d269b633813fc60d";
  const std::string json = testdata::ZipkinJson(ZipkinTrace(json_trace));
  const std::string proto = testdata::ZipkinProto(ZipkinTrace(proto_trace));
  ASSERT_EQ(Post(receiver, "application/json", json), 202);
  ASSERT_EQ(Post(receiver, "application/x-protobuf", proto), 202);
  StoreQueued(p.sink, caps);

  SpanBatch want_json, want_proto;
  ASSERT_TRUE(codec::DecodeZipkinJson(json, want_json).ok());
  ASSERT_TRUE(codec::DecodeZipkinProto(proto, want_proto).ok());
  ASSERT_EQ(want_json.span_count(), 2u);
  ExpectStoredAs(caps, json_trace, want_json);
  ExpectStoredAs(caps, proto_trace, want_proto);
}

TEST(ZipkinOnChdb, ALoggedZipkinRequestIsReplayedAndStored) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  const std::string dir = Engine::dir + "/zipkin-queue-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string trace = "7b8efff798038103d269b633813fc60e";
  const std::string proto = testdata::ZipkinProto(ZipkinTrace(trace));
  {
    Pipeline p(dir);
    receivers::ZipkinReceiver receiver(Loopback(), {}, *p.queue);
    ASSERT_EQ(Post(receiver, "application/x-protobuf", proto), 202);
    // Accepted and logged, never stored: spanhouse stops here (the sink's
    // batch, with its ticket, is dropped unacknowledged).
    ASSERT_TRUE(p.sink.Pop(milliseconds(2000)).has_value());
  }
  // The next start: the embedded sink is replayed what it never stored.
  MemoryBudget budget(1ull << 30);
  std::unique_ptr<pipeline::durable::DurableQueue> queue;
  pipeline::durable::DurableOptions o;
  o.log.dir = dir;
  o.log.fsync_always = false;
  ASSERT_TRUE(pipeline::durable::DurableQueue::Open(o, budget, nullptr, &queue).ok());
  EmbeddedSinkOptions so;
  so.writer = TestWriter();
  const auto sink = MakeClickHouseSink(LentConnections(), caps, so);
  queue->AddSink(*sink);
  ASSERT_TRUE(sink->Start().ok());
  queue->Start();
  queue->StopBacklogs();
  sink->Drain();
  EXPECT_EQ(queue->replay_stats().records.load(), 1u);
  EXPECT_EQ(queue->replay_stats().bad_records.load(), 0u);
  EXPECT_EQ(queue->cursors()[0]->stats().replayed_spans.load(), 2u);
  EXPECT_EQ(sink->stats().rows_written.load(), 2u);
  SpanBatch want;
  ASSERT_TRUE(codec::DecodeZipkinProto(proto, want).ok());
  ExpectStoredAs(caps, trace, want);
  queue.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spanhouse::storage
