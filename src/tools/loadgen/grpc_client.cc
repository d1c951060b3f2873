#include "tools/loadgen/grpc_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

namespace spanhouse::loadgen {

namespace {

constexpr const char* kExport = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
constexpr std::string_view kRetryInfoType = "type.googleapis.com/google.rpc.RetryInfo";

bool Varint(std::string_view& in, uint64_t* v) {
  *v = 0;
  for (int i = 0; i < 10 && !in.empty(); ++i) {
    const auto b = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Calls fn(field, varint value, bytes) for each varint or length-delimited
// field of a message; false when it does not parse.
template <class Fn>
bool EachField(std::string_view in, Fn fn) {
  while (!in.empty()) {
    uint64_t tag = 0;
    uint64_t v = 0;
    if (!Varint(in, &tag)) return false;
    if ((tag & 7) == 0) {
      if (!Varint(in, &v)) return false;
      fn(tag >> 3, v, std::string_view());
    } else if ((tag & 7) == 2) {
      if (!Varint(in, &v) || v > in.size()) return false;
      fn(tag >> 3, 0, in.substr(0, v));
      in.remove_prefix(v);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

double RetryInfoDelayS(std::string_view status_details) {
  double delay = -1;
  EachField(status_details, [&](uint64_t field, uint64_t, std::string_view any) {
    if (field != 3) return;  // google.rpc.Status.details
    std::string_view type, value;
    EachField(any, [&](uint64_t f, uint64_t, std::string_view b) {
      if (f == 1) type = b;
      if (f == 2) value = b;
    });
    if (type != kRetryInfoType) return;
    EachField(value, [&](uint64_t f, uint64_t, std::string_view duration) {
      if (f != 1) return;  // RetryInfo.retry_delay
      double s = 0;
      EachField(duration, [&](uint64_t df, uint64_t v, std::string_view) {
        if (df == 1) s += static_cast<double>(v);
        if (df == 2) s += static_cast<double>(v) / 1e9;
      });
      delay = s;
    });
  });
  return delay;
}

struct GrpcExportClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  std::chrono::milliseconds timeout;
  bool gzip = false;
};

GrpcExportClient::GrpcExportClient(const std::string& target, std::chrono::milliseconds timeout,
                                   bool gzip, int channel_index)
    : impl_(std::make_unique<Impl>()) {
  grpc::ChannelArguments args;
  // A connection per client: channels with equal arguments would share one.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("spanhouse.loadgen.channel", channel_index);
  args.SetMaxSendMessageSize(-1);
  impl_->channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  impl_->stub = std::make_unique<grpc::GenericStub>(impl_->channel);
  impl_->timeout = timeout;
  impl_->gzip = gzip;
}

GrpcExportClient::~GrpcExportClient() = default;

bool GrpcExportClient::Post(std::string* body, HttpResult* result) {
  *result = HttpResult{};
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + impl_->timeout);
  if (impl_->gzip) ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  grpc::Slice slice(*body);  // a copy: the body stays the caller's
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  impl_->stub->UnaryCall(&ctx, kExport, grpc::StubOptions(), &request, &response,
                         [&](grpc::Status s) {
                           std::lock_guard<std::mutex> lock(mu);
                           status = std::move(s);
                           done = true;
                           cv.notify_one();
                         });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  const double retry = RetryInfoDelayS(status.error_details());
  switch (status.error_code()) {
    case grpc::StatusCode::OK: {
      result->status = 200;
      std::vector<grpc::Slice> slices;
      if (response.Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices) {
          result->body.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
      }
      return true;
    }
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      if (retry >= 0) {
        result->status = status.error_code() == grpc::StatusCode::UNAVAILABLE ? 503 : 429;
        result->retry_after_s = retry;
        result->body = status.error_message();
        return true;
      }
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        result->status = 413;  // not retryable: a message over the server's limit
        result->body = status.error_message();
        return true;
      }
      result->error = "gRPC UNAVAILABLE: " + status.error_message();
      return false;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      result->error = "gRPC DEADLINE_EXCEEDED";
      return false;
    case grpc::StatusCode::INVALID_ARGUMENT:
      result->status = 400;
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      result->status = 401;
      break;
    case grpc::StatusCode::UNIMPLEMENTED:
      result->status = 404;
      break;
    default:
      result->status = 500;
      break;
  }
  result->body =
      "gRPC status " + std::to_string(status.error_code()) + ": " + status.error_message();
  return true;
}

}  // namespace spanhouse::loadgen
