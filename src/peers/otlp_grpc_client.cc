#include "peers/otlp_grpc_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

namespace spanhouse::peers {

namespace {

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

bool ReadPartialSuccess(std::string_view response, int64_t* rejected_spans, std::string* message) {
  *rejected_spans = 0;
  message->clear();
  // ExportTraceServiceResponse{ExportTracePartialSuccess partial_success = 1}
  return EachField(response, [&](uint64_t field, uint64_t, std::string_view partial) {
    if (field != 1) return;
    // {int64 rejected_spans = 1; string error_message = 2}
    EachField(partial, [&](uint64_t f, uint64_t v, std::string_view text) {
      if (f == 1) *rejected_spans = static_cast<int64_t>(v);
      if (f == 2) message->assign(text);
    });
  });
}

struct OtlpGrpcClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
};

OtlpGrpcClient::OtlpGrpcClient(OtlpGrpcClientOptions options)
    : opts_(std::move(options)), impl_(std::make_unique<Impl>()) {
  grpc::ChannelArguments args;
  // A connection per client: channels with equal arguments would share one.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("spanhouse.channel", opts_.channel_index);
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  if (opts_.max_reconnect_backoff.count() > 0) {
    const int ms = static_cast<int>(opts_.max_reconnect_backoff.count());
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, ms);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(ms, 1000));
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, std::min(ms, 1000));
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (opts_.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = opts_.tls_ca_pem;
    creds = grpc::SslCredentials(ssl);
    if (!opts_.tls_server_name.empty()) args.SetSslTargetNameOverride(opts_.tls_server_name);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  impl_->channel = grpc::CreateCustomChannel(opts_.target, creds, args);
  impl_->stub = std::make_unique<grpc::GenericStub>(impl_->channel);
}

OtlpGrpcClient::~OtlpGrpcClient() = default;

bool OtlpGrpcClient::Connected(bool try_to_connect) const {
  return impl_->channel->GetState(try_to_connect) == GRPC_CHANNEL_READY;
}

ExportResult OtlpGrpcClient::Export(std::string_view body) {
  ExportResult result;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + opts_.timeout);
  if (opts_.gzip) ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  for (const auto& [name, value] : opts_.metadata) ctx.AddMetadata(name, value);
  grpc::Slice slice(body.data(), body.size());  // a copy: the body stays the caller's
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  impl_->stub->UnaryCall(&ctx, kOtlpExportMethod, grpc::StubOptions(), &request, &response,
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
  result.code = status.error_code();
  if (!status.ok()) {
    result.message = status.error_message();
    result.retry_after_s = RetryInfoDelayS(status.error_details());
    return result;
  }
  std::vector<grpc::Slice> slices;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      result.response.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  ReadPartialSuccess(result.response, &result.rejected_spans, &result.partial_message);
  return result;
}

}  // namespace spanhouse::peers
