// The load generator's OTLP/gRPC sender: peers::OtlpGrpcClient (the one
// OTLP/gRPC client) with its answers mapped onto HttpResult, so the sender
// treats both protocols alike: OK is 200 (the ExportTraceServiceResponse as
// the body), UNAVAILABLE or RESOURCE_EXHAUSTED with google.rpc.RetryInfo is
// 503 or 429 with the RetryInfo delay as Retry-After, other codes 4xx/5xx;
// UNAVAILABLE without RetryInfo (no connection) and DEADLINE_EXCEEDED are
// connection errors.
#pragma once

#include <chrono>
#include <string>

#include "net/http_client.h"
#include "peers/otlp_grpc_client.h"

namespace spanhouse::loadgen {

using net::HttpResult;
using peers::RetryInfoDelayS;

class GrpcExportClient {
 public:
  // `target`: host:port. `gzip`: gRPC's own message compression.
  GrpcExportClient(const std::string& target, std::chrono::milliseconds timeout, bool gzip,
                   int channel_index);

  // One Export call with `body` (lent, handed back unchanged); true when the
  // server answered (any status), false on a connection error or timeout.
  bool Post(std::string* body, HttpResult* result);

 private:
  peers::OtlpGrpcClient client_;
};

// An Export's answer as the HTTP sender's: false for a connection error.
bool ToHttpResult(const peers::ExportResult& r, HttpResult* result);

}  // namespace spanhouse::loadgen
