// A blocking OTLP/gRPC Export client: one channel of its own (not shared with
// other clients), generic calls with the request's protobuf bytes as they
// are (no generated classes), the same metadata on every call, and the
// answer as gRPC gave it (its status code, RetryInfo delay, partial success)
// so each caller decides what a code means: the load generator maps it to
// HTTP statuses, the peer sink to retry, dead letter or handoff.
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spanhouse::peers {

inline constexpr const char* kOtlpExportMethod =
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

struct OtlpGrpcClientOptions {
  std::string target;  // host:port
  std::chrono::milliseconds timeout{10000};
  bool gzip = false;  // gRPC's own message compression
  // Channels with equal arguments share one connection: distinct indexes
  // give distinct connections.
  int channel_index = 0;
  // Metadata sent on every call, names in lower case (gRPC's rule).
  std::vector<std::pair<std::string, std::string>> metadata;
  // TLS: the server's certificate checked against tls_ca_pem (PEM; empty:
  // the system's roots), for the name tls_server_name (empty: the target's host).
  bool tls = false;
  std::string tls_ca_pem;
  std::string tls_server_name;
  // The longest wait between reconnection attempts to a server that is down
  // (0: gRPC's default, two minutes).
  std::chrono::milliseconds max_reconnect_backoff{0};
};

// What one Export call came back with.
struct ExportResult {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;   // the status message (not OK)
  std::string response;  // OK: the ExportTraceServiceResponse bytes
  // google.rpc.RetryInfo's delay in the status details, in seconds; -1: none.
  double retry_after_s = -1;
  // OK: the response's partial_success (spans the server refused for good).
  int64_t rejected_spans = 0;
  std::string partial_message;
  bool ok() const { return code == grpc::StatusCode::OK; }
};

class OtlpGrpcClient {
 public:
  explicit OtlpGrpcClient(OtlpGrpcClientOptions options);
  ~OtlpGrpcClient();
  OtlpGrpcClient(const OtlpGrpcClient&) = delete;
  OtlpGrpcClient& operator=(const OtlpGrpcClient&) = delete;

  // One Export call with `body` (an ExportTraceServiceRequest; copied once
  // into gRPC's buffer). Waits at most the timeout. Safe from several threads.
  ExportResult Export(std::string_view body);

  // Whether the channel is connected now; `try_to_connect`: an idle channel
  // starts connecting (never waits).
  bool Connected(bool try_to_connect) const;

  const OtlpGrpcClientOptions& options() const { return opts_; }

 private:
  struct Impl;
  const OtlpGrpcClientOptions opts_;
  std::unique_ptr<Impl> impl_;
};

// The retry delay in a grpc-status-details-bin (google.rpc.Status with a
// google.rpc.RetryInfo detail), in seconds; -1 when there is none.
double RetryInfoDelayS(std::string_view status_details);

// An ExportTraceServiceResponse's partial_success: false when it does not parse.
bool ReadPartialSuccess(std::string_view response, int64_t* rejected_spans, std::string* message);

}  // namespace spanhouse::peers
