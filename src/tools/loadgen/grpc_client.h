// A blocking OTLP/gRPC Export client for the load generator: one channel of
// its own (not shared with other clients), generic calls with the request's
// protobuf bytes as they are, answers mapped onto HttpResult so the sender
// treats both protocols alike: OK is 200 (the ExportTraceServiceResponse as
// the body), UNAVAILABLE or RESOURCE_EXHAUSTED with google.rpc.RetryInfo is
// 503 or 429 with the RetryInfo delay as Retry-After, other codes 4xx/5xx;
// UNAVAILABLE without RetryInfo (no connection) and DEADLINE_EXCEEDED are
// connection errors.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "net/http_client.h"

namespace spanhouse::loadgen {

using net::HttpResult;

class GrpcExportClient {
 public:
  // `target`: host:port. `gzip`: gRPC's own message compression.
  GrpcExportClient(const std::string& target, std::chrono::milliseconds timeout, bool gzip,
                   int channel_index);
  ~GrpcExportClient();
  GrpcExportClient(const GrpcExportClient&) = delete;
  GrpcExportClient& operator=(const GrpcExportClient&) = delete;

  // One Export call with `body` (lent, handed back unchanged); true when the
  // server answered (any status), false on a connection error or timeout.
  bool Post(std::string* body, HttpResult* result);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The retry delay in a grpc-status-details-bin (google.rpc.Status with a
// google.rpc.RetryInfo detail), in seconds; -1 when there is none.
double RetryInfoDelayS(std::string_view status_details);

}  // namespace spanhouse::loadgen
