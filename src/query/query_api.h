// The query API on :16686: Jaeger-compatible JSON so Grafana and the Jaeger
// UI can read spanhouse, plus /healthz.
#pragma once

#include <string>

#include "net/http_server.h"
#include "query/span_reader.h"

namespace spanhouse::query {

struct QueryApiOptions {
  std::string address = "127.0.0.1:16686";
  int threads = 2;
};

class QueryApi {
 public:
  QueryApi(const QueryApiOptions& options, SpanReader& reader);
  Status Start();
  void Stop();
  uint16_t port() const { return server_.port(); }
  void Handle(const net::HttpRequest& req, net::HttpResponse& resp);

 private:
  SpanReader& reader_;
  net::HttpServer server_;
};

// Jaeger accepts ids with leading zeros left out and 64-bit ids: pad to 128 bits.
bool ParseTraceIdHex(std::string_view hex, TraceId* out);

}  // namespace spanhouse::query
