// loadgen --protocol grpc against a fake OTLP/gRPC server (a generic
// callback service): spans counted from the decoded requests, UNAVAILABLE
// with google.rpc.RetryInfo retried after its delay, other codes rejected.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "codec/otlp.h"
#include "model/span_batch.h"
#include "tools/loadgen/grpc_client.h"
#include "tools/loadgen/loadgen.h"

namespace spanhouse::loadgen {
namespace {

// google.rpc.Status{code 14, details [Any{RetryInfo{retry_delay{nanos 1e8}}}]}: 100 ms.
std::string RetryDetails() {
  const std::string duration = std::string("\x10\x80\xc2\xd7\x2f", 5);  // nanos = 100000000
  const std::string retry_info =
      "\x0a" + std::string(1, static_cast<char>(duration.size())) + duration;
  const std::string type = "type.googleapis.com/google.rpc.RetryInfo";
  std::string any = "\x0a" + std::string(1, static_cast<char>(type.size())) + type;
  any += "\x12" + std::string(1, static_cast<char>(retry_info.size())) + retry_info;
  return "\x08\x0e\x1a" + std::string(1, static_cast<char>(any.size())) + any;
}

class FakeGrpc final : public grpc::CallbackGenericService {
 public:
  std::atomic<int> unavailable_first{0};
  std::atomic<int> invalid_first{0};
  std::atomic<uint64_t> spans{0};
  std::atomic<uint64_t> calls{0};

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Call(this);
  }

 private:
  class Call final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Call(FakeGrpc* fake) : fake_(fake) { StartRead(&req_); }
    void OnReadDone(bool ok) override {
      fake_->calls++;
      if (!ok) return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no message"));
      if (fake_->unavailable_first.fetch_sub(1) > 0) {
        return Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "full", RetryDetails()));
      }
      if (fake_->invalid_first.fetch_sub(1) > 0) {
        return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad"));
      }
      std::vector<grpc::Slice> slices;
      std::string body;
      if (req_.Dump(&slices).ok()) {
        for (const auto& s : slices)
          body.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      SpanBatch b;
      if (!codec::DecodeOtlpProto(body, b).ok()) {
        return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "undecodable"));
      }
      fake_->spans += b.span_count();
      grpc::Slice empty("");  // ExportTraceServiceResponse{}
      resp_ = grpc::ByteBuffer(&empty, 1);
      StartWriteAndFinish(&resp_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    FakeGrpc* fake_;
    grpc::ByteBuffer req_;
    grpc::ByteBuffer resp_;
  };
};

struct Server {
  explicit Server(FakeGrpc& fake) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterCallbackGenericService(&fake);
    server = b.BuildAndStart();
  }
  ~Server() { server->Shutdown(); }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

LoadgenOptions GrpcOptions(int port) {
  LoadgenOptions o;
  o.protocol = "grpc";
  o.endpoint = "127.0.0.1:" + std::to_string(port);
  o.connections = 2;
  o.duration_s = 0;
  o.spans = 2000;
  o.spans_per_request = 200;
  o.payloads = 4;
  o.quiet = true;
  return o;
}

TEST(GrpcLoadgen, SendsOverGrpcAndRetriesUnavailableAfterItsRetryInfo) {
  FakeGrpc fake;
  fake.unavailable_first = 3;
  Server server(fake);
  ASSERT_GT(server.port, 0);
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(GrpcOptions(server.port), &r), 0);
  EXPECT_EQ(r.throttled, 3u);
  EXPECT_EQ(r.retried, 3u);
  EXPECT_EQ(r.rejected_requests, 0u);
  EXPECT_GE(r.spans_sent, 2000u);
  EXPECT_EQ(r.spans_accepted, r.spans_sent);
  EXPECT_EQ(r.spans_accepted, fake.spans.load());
}

TEST(GrpcLoadgen, OtherCodesAreRejected) {
  FakeGrpc fake;
  fake.invalid_first = 2;
  Server server(fake);
  LoadgenReport r;
  RunLoadgen(GrpcOptions(server.port), &r);
  EXPECT_EQ(r.rejected_requests, 2u);
  EXPECT_EQ(r.throttled, 0u);
  EXPECT_EQ(r.spans_accepted + r.rejected_spans, r.spans_sent);
}

TEST(GrpcLoadgen, RetryInfoDelayIsRead) {
  EXPECT_DOUBLE_EQ(RetryInfoDelayS(RetryDetails()), 0.1);
  EXPECT_EQ(RetryInfoDelayS(""), -1);
  EXPECT_EQ(RetryInfoDelayS("\x08\x0e"), -1);  // a status without details
}

TEST(GrpcLoadgen, BadProtocolOrCompressionIsAUsageError) {
  LoadgenOptions o = GrpcOptions(1);
  o.protocol = "quic";
  EXPECT_EQ(RunLoadgen(o), 2);
  o.protocol = "grpc";
  o.compression = "zstd";
  EXPECT_EQ(RunLoadgen(o), 2);
}

}  // namespace
}  // namespace spanhouse::loadgen
