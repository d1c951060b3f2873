// The query API on :16686: Jaeger-compatible JSON so Grafana and the Jaeger
// UI can read spanhouse, plus /healthz (the process answers) and /readyz
// (it takes spans: 503 while starting or shutting down).
#pragma once

#include <functional>
#include <string>

#include "net/http_server.h"
#include "query/span_reader.h"

namespace spanhouse::query {

struct QueryApiOptions {
  std::string address = "127.0.0.1:16686";
  int threads = 2;
  net::HttpAuthorizer authorize{};               // empty: no token needed
  std::shared_ptr<const net::TlsContext> tls{};  // set: HTTPS only
};

// Endpoints the server wires in beside the query routes; each may be empty.
struct AdminHooks {
  std::function<std::string()> metrics;  // GET /metrics, Prometheus text
  // GET /readyz: "" when ready, else why not (answered 503). Unset: ready.
  std::function<std::string()> not_ready;
  // /debug/... (fault injection for tests); only set when enabled in config.
  std::function<void(const net::HttpRequest&, net::HttpResponse&)> debug;
  // Paths outside /api that no route above took (the web UI, ui/ui_server.h):
  // true when it answered.
  std::function<bool(const net::HttpRequest&, net::HttpResponse&)> ui;
};

class QueryApi {
 public:
  QueryApi(const QueryApiOptions& options, SpanReader& reader, AdminHooks hooks = {});
  Status Start();
  void Stop();
  uint16_t port() const { return server_.port(); }
  void Handle(const net::HttpRequest& req, net::HttpResponse& resp);

 private:
  void CountSpans(const net::HttpRequest& req, net::HttpResponse& resp);

  SpanReader& reader_;
  AdminHooks hooks_;
  net::HttpServer server_;
};

// Jaeger accepts ids with leading zeros left out and 64-bit ids: pad to 128 bits.
bool ParseTraceIdHex(std::string_view hex, TraceId* out);

// The percent-decoded value of query-string parameter `name` in `target`.
bool QueryParam(std::string_view target, std::string_view name, std::string* value);

}  // namespace spanhouse::query
