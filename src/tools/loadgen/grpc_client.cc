#include "tools/loadgen/grpc_client.h"

#include <utility>

namespace spanhouse::loadgen {

namespace {

peers::OtlpGrpcClientOptions ClientOptions(const std::string& target,
                                           std::chrono::milliseconds timeout, bool gzip,
                                           int channel_index) {
  peers::OtlpGrpcClientOptions o;
  o.target = target;
  o.timeout = timeout;
  o.gzip = gzip;
  o.channel_index = channel_index;
  return o;
}

}  // namespace

GrpcExportClient::GrpcExportClient(const std::string& target, std::chrono::milliseconds timeout,
                                   bool gzip, int channel_index)
    : client_(ClientOptions(target, timeout, gzip, channel_index)) {}

bool GrpcExportClient::Post(std::string* body, HttpResult* result) {
  return ToHttpResult(client_.Export(*body), result);
}

bool ToHttpResult(const peers::ExportResult& r, HttpResult* result) {
  *result = HttpResult{};
  switch (r.code) {
    case grpc::StatusCode::OK:
      result->status = 200;
      result->body = r.response;
      return true;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      if (r.retry_after_s >= 0) {
        result->status = r.code == grpc::StatusCode::UNAVAILABLE ? 503 : 429;
        result->retry_after_s = r.retry_after_s;
        result->body = r.message;
        return true;
      }
      if (r.code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        result->status = 413;  // not retryable: a message over the server's limit
        result->body = r.message;
        return true;
      }
      result->error = "gRPC UNAVAILABLE: " + r.message;
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
  result->body = "gRPC status " + std::to_string(static_cast<int>(r.code)) + ": " + r.message;
  return true;
}

}  // namespace spanhouse::loadgen
