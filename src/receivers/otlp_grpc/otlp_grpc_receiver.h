// OTLP/gRPC trace receiver: opentelemetry.proto.collector.trace.v1.TraceService/Export
// on gRPC's callback API as a generic service, so the request's bytes go to
// spanhouse's own protobuf decoder (no generated message classes), through
// the shared intake (intake/intake.h): the same memory budget, limits,
// filter, durable queue and counters as OTLP/HTTP (receiver="otlp_grpc").
//
// Status codes per the OTLP specification:
//   OK                 ExportTraceServiceResponse; spans the filter dropped
//                      in partial_success (rejected_spans + error_message)
//   INVALID_ARGUMENT   undecodable data, or over max_spans_per_request spans
//                      (not retryable; gRPC itself answers RESOURCE_EXHAUSTED
//                      without RetryInfo, also not retryable, for a message
//                      over max_body_bytes, compressed or not)
//   UNAVAILABLE        with google.rpc.RetryInfo in grpc-status-details-bin:
//                      the memory budget, queue or durable queue is full,
//                      spanhouse is shutting down, or the log cannot be written
//   UNAUTHENTICATED    without a valid bearer token in `authorization`
//   UNIMPLEMENTED      any other method
// gzip (and deflate) requests are decompressed by gRPC.
//
// With the durable queue's "always" fsync the answer waits for the sync
// that covers the request, given from the log's sync thread: the call's
// reactor finishes then, no gRPC thread is held meanwhile. (A call does
// hold gRPC's callback thread while it waits for memory, up to
// memory_wait, as an HTTP I/O thread does.)
#pragma once

#include <memory>
#include <string>

#include "net/http_server.h"
#include "pipeline/durable/durable_queue.h"
#include "receivers/intake/intake.h"

namespace grpc {
class Server;
}

namespace spanhouse::receivers {

inline constexpr const char* kOtlpGrpcExportMethod =
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

struct OtlpGrpcOptions {
  std::string address = "127.0.0.1:4317";  // port 0 picks a free one
  // Limits, memory wait, durable queue and spill backlog. max_body_bytes
  // is also gRPC's largest message (after decompression).
  IntakeOptions intake{};
  // The OTLP/HTTP listener's token guard, asked with the call's
  // `authorization` metadata as if it were an HTTP request for the method's
  // path (empty: no token needed).
  net::HttpAuthorizer authorize{};
  // PEM certificate chain and key; both set: TLS only.
  std::string tls_cert_pem;
  std::string tls_key_pem;
};

class OtlpGrpcReceiver {
 public:
  // The queue must outlive the receiver.
  OtlpGrpcReceiver(OtlpGrpcOptions options, pipeline::durable::DurableQueue& queue);
  ~OtlpGrpcReceiver();
  OtlpGrpcReceiver(const OtlpGrpcReceiver&) = delete;
  OtlpGrpcReceiver& operator=(const OtlpGrpcReceiver&) = delete;

  // Binds and starts serving; a bind failure is returned.
  Status Start();
  // Stops accepting calls; lets calls in flight finish (deferred answers
  // included) for up to `grace`, then cancels the rest.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  uint16_t port() const { return port_; }
  const IntakeStats& stats() const { return *stats_; }

  struct Service;  // the generic service, in the .cc

 private:
  OtlpGrpcOptions opts_;
  std::shared_ptr<IntakeStats> stats_ = std::make_shared<IntakeStats>();
  Intake intake_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
};

// google.rpc.Status{code, message, details: [Any{RetryInfo{retry_delay}}]}
// in protobuf, the grpc-status-details-bin of an UNAVAILABLE (public for tests).
std::string RetryStatusDetails(int code, const std::string& message, int retry_after_s);

}  // namespace spanhouse::receivers
