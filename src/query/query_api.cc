#include "query/query_api.h"

#include <spdlog/spdlog.h>

#include "query/jaeger_json.h"

namespace spanhouse::query {

bool ParseTraceIdHex(std::string_view hex, TraceId* out) {
  if (hex.empty() || hex.size() > 32) return false;
  std::string padded(32 - hex.size(), '0');
  padded.append(hex);
  return FromHex(padded, out->data(), out->size());
}

QueryApi::QueryApi(const QueryApiOptions& options, SpanReader& reader)
    : reader_(reader),
      server_({"query", options.address, 1u << 20, options.threads},
              [this](const net::HttpRequest& req, net::HttpResponse& resp) { Handle(req, resp); }) {
}

Status QueryApi::Start() {
  return server_.Start();
}
void QueryApi::Stop() {
  server_.Stop();
}

void QueryApi::Handle(const net::HttpRequest& req, net::HttpResponse& resp) {
  const std::string_view path = req.path();
  resp.content_type = "application/json";
  if (path == "/healthz") {
    resp.content_type = "text/plain";
    resp.body = "ok\n";
    return;
  }
  constexpr std::string_view kTraces = "/api/traces/";
  if (path.substr(0, kTraces.size()) == kTraces) {
    if (req.method != "GET") {
      resp.status = 405;
      resp.headers.emplace_back("Allow", "GET");
      resp.body = RenderJaegerError(405, "method not allowed: use GET");
      return;
    }
    std::string_view hex = path.substr(kTraces.size());
    TraceId id{};
    if (!ParseTraceIdHex(hex, &id)) {
      resp.status = 400;
      resp.body = RenderJaegerError(
          400, "malformed trace id '" + std::string(hex) + "': want up to 32 hex digits");
      return;
    }
    SpanBatch batch;
    Status st = reader_.GetTrace(id, &batch);
    if (st.code() == StatusCode::kNotFound) {
      resp.status = 404;
      resp.body = RenderJaegerError(404, "trace not found");
      return;
    }
    if (!st.ok()) {
      spdlog::error("trace {}: {}", hex, st.message());
      resp.status = st.retryable() ? 503 : 500;
      resp.body = RenderJaegerError(resp.status, st.message());
      return;
    }
    resp.body = RenderJaegerTraces(batch);
    return;
  }
  resp.status = 404;
  resp.body = RenderJaegerError(404, "not found: " + std::string(path));
}

}  // namespace spanhouse::query
