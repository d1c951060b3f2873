#include "receivers/otlp_grpc/otlp_grpc_receiver.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <string_view>
#include <utility>
#include <vector>

#include "codec/otlp.h"
#include "common/forwarding.h"

namespace spanhouse::receivers {

namespace {

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutLen(std::string& out, uint32_t field, std::string_view payload) {
  PutVarint(out, field << 3 | 2);
  PutVarint(out, payload.size());
  out.append(payload);
}

// The message's bytes, in one string for the decoder.
std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::string out;
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return out;
  out.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// The one mapping of a StatusCode to gRPC, per the OTLP specification.
grpc::Status StatusOf(const IntakeResult& r) {
  switch (r.code) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      // Retryable: UNAVAILABLE, with RetryInfo saying when (OTLP/gRPC throttling).
      return {grpc::StatusCode::UNAVAILABLE, r.message,
              RetryStatusDetails(grpc::StatusCode::UNAVAILABLE, r.message, r.retry_after_s)};
    case StatusCode::kInternal:
      return {grpc::StatusCode::INTERNAL, r.message};
    case StatusCode::kNotFound:
    case StatusCode::kInvalidArgument:
    case StatusCode::kTooLarge:
    case StatusCode::kUnsupportedMedia:
      // Not retryable. The OTLP specification keeps RESOURCE_EXHAUSTED for
      // what may pass later (with RetryInfo); a request too large never will.
      return {grpc::StatusCode::INVALID_ARGUMENT, r.message};
  }
  return {grpc::StatusCode::INTERNAL, "unknown status"};
}

// A call answered with `status` at once, its request unread.
class Refusal final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// One Export call: reads the request, hands it to the intake, answers with
// what comes back (now, or from the log's sync thread).
class ExportCall final : public grpc::ServerGenericBidiReactor {
 public:
  ExportCall(Intake& intake, bool from_peer) : intake_(intake), from_peer_(from_peer) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed without a message, or the call was cancelled.
      return Finish({grpc::StatusCode::INVALID_ARGUMENT, "no request message"});
    }
    std::string body = Flatten(request_);
    request_.Clear();
    Intake::Submitted done = intake_.Submit(
        codec::BodyFormat::kOtlpProto, std::move(body), "",
        [this] { return [this](IntakeResult&& r) { Reply(r); }; }, from_peer_);
    if (!done.deferred) Reply(done.result);
  }

  void OnDone() override { delete this; }

 private:
  void Reply(const IntakeResult& r) {
    if (!r.ok()) return Finish(StatusOf(r));
    const std::string encoded = codec::EncodeExportResponseProto(r.rejected_spans, r.message);
    grpc::Slice slice(encoded);
    response_ = grpc::ByteBuffer(&slice, 1);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  Intake& intake_;
  const bool from_peer_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

}  // namespace

std::string RetryStatusDetails(int code, const std::string& message, int retry_after_s) {
  std::string duration;  // google.protobuf.Duration{int64 seconds = 1}
  if (retry_after_s > 0) {
    duration.push_back(0x08);
    PutVarint(duration, static_cast<uint64_t>(retry_after_s));
  }
  std::string retry_info;  // google.rpc.RetryInfo{Duration retry_delay = 1}
  PutLen(retry_info, 1, duration);
  std::string any;  // google.protobuf.Any{string type_url = 1; bytes value = 2}
  PutLen(any, 1, "type.googleapis.com/google.rpc.RetryInfo");
  PutLen(any, 2, retry_info);
  std::string
      status;  // google.rpc.Status{int32 code = 1; string message = 2; repeated Any details = 3}
  status.push_back(0x08);
  PutVarint(status, static_cast<uint64_t>(code));
  if (!message.empty()) PutLen(status, 2, message);
  PutLen(status, 3, any);
  return status;
}

struct OtlpGrpcReceiver::Service final : grpc::CallbackGenericService {
  Service(Intake& intake, IntakeStats& stats, net::HttpAuthorizer authorize)
      : intake(intake), stats(stats), authorize(std::move(authorize)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() != kOtlpGrpcExportMethod) {
      return new Refusal(
          {grpc::StatusCode::UNIMPLEMENTED,
           "unknown method " + ctx->method() + ": this endpoint serves " + kOtlpGrpcExportMethod});
    }
    if (authorize && !Authorized(*ctx)) {
      stats.requests++;
      stats.rejected_unauthenticated++;
      return new Refusal({grpc::StatusCode::UNAUTHENTICATED,
                          "a bearer token is required: authorization: Bearer <token>"});
    }
    // Another spanhouse node's forward (peers/peer_sink.h): its spans are this node's.
    const bool from_peer = ctx->client_metadata().count(kForwardedByMetadata) != 0;
    return new ExportCall(intake, from_peer);
  }

  // The HTTP listener's guard, asked with the call's metadata.
  bool Authorized(const grpc::GenericCallbackServerContext& ctx) {
    net::HttpRequest head;
    head.method = "POST";
    head.target = ctx.method();
    net::AuthorizationHeader auth;
    const auto& md = ctx.client_metadata();
    for (auto [it, end] = md.equal_range("authorization"); it != end; ++it) {
      if (auth.count++ == 0) auth.value = std::string_view(it->second.data(), it->second.size());
    }
    net::HttpResponse unused;
    return authorize(head, auth, unused);
  }

  Intake& intake;
  IntakeStats& stats;
  net::HttpAuthorizer authorize;
};

OtlpGrpcReceiver::OtlpGrpcReceiver(OtlpGrpcOptions options, pipeline::durable::DurableQueue& queue)
    : opts_(std::move(options)),
      intake_(opts_.intake, queue, stats_),
      service_(std::make_unique<Service>(intake_, *stats_, opts_.authorize)) {}

OtlpGrpcReceiver::~OtlpGrpcReceiver() {
  Stop();
}

Status OtlpGrpcReceiver::Start() {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (!opts_.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({opts_.tls_key_pem, opts_.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(opts_.address, creds, &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(opts_.intake.max_body_bytes));
  builder.RegisterCallbackGenericService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return Status::Unavailable("otlp-grpc: cannot listen on " + opts_.address);
  }
  port_ = static_cast<uint16_t>(port);
  return Status::Ok();
}

void OtlpGrpcReceiver::Stop(std::chrono::milliseconds grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

}  // namespace spanhouse::receivers
