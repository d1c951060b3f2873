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

QueryApi::QueryApi(const QueryApiOptions& options, SpanReader& reader, AdminHooks hooks)
    : reader_(reader),
      hooks_(std::move(hooks)),
      server_({.name = "query",
               .address = options.address,
               .max_body_bytes = 1u << 20,
               .threads = options.threads,
               .authorize = options.authorize,
               .tls = options.tls},
              [this](const net::HttpRequest& req, net::HttpResponse& resp) { Handle(req, resp); }) {
}

Status QueryApi::Start() {
  return server_.Start();
}
void QueryApi::Stop() {
  server_.Stop();
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of one query-string component ('+' is a space).
bool UrlDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out->push_back(' ');
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi << 4 | lo));
      i += 2;
    } else {
      out->push_back(in[i]);
    }
  }
  return true;
}

}  // namespace

bool QueryParam(std::string_view target, std::string_view name, std::string* value) {
  auto q = target.find('?');
  if (q == std::string_view::npos) return false;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    auto eq = pair.find('=');
    std::string key;
    if (!UrlDecode(pair.substr(0, eq), &key) || key != name) continue;
    return UrlDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
                     value);
  }
  return false;
}

void QueryApi::CountSpans(const net::HttpRequest& req, net::HttpResponse& resp) {
  std::string key;
  std::string value;
  SpanReader::AttrOwner owner = SpanReader::AttrOwner::kResource;
  bool have_key = QueryParam(req.target, "resource_attr", &key) && !key.empty();
  if (!have_key) {
    owner = SpanReader::AttrOwner::kSpan;
    have_key = QueryParam(req.target, "attr", &key) && !key.empty();
  }
  if (!have_key) {
    owner = SpanReader::AttrOwner::kUserField;
    have_key = QueryParam(req.target, "user_field", &key) && !key.empty();
  }
  const bool have_value = QueryParam(req.target, "value", &value);
  if (!have_key || (!have_value && owner != SpanReader::AttrOwner::kUserField)) {
    resp.status = 400;
    resp.body = RenderJaegerError(400,
                                  "want ?resource_attr=KEY&value=VALUE, ?attr=KEY&value=VALUE or "
                                  "?user_field=PATH[&value=VALUE]");
    return;
  }
  uint64_t n = 0;
  Status st = reader_.CountSpansWithAttr(owner, key, value, &n);
  if (!st.ok()) {
    resp.status = st.retryable() ? 503 : 500;
    resp.body = RenderJaegerError(resp.status, st.message());
    return;
  }
  resp.body = "{\"count\":" + std::to_string(n) + "}";
}

void QueryApi::Handle(const net::HttpRequest& req, net::HttpResponse& resp) {
  const std::string_view path = req.path();
  resp.content_type = "application/json";
  if (path == "/healthz") {
    resp.content_type = "text/plain";
    resp.body = "ok\n";
    return;
  }
  if (path == "/readyz") {
    resp.content_type = "text/plain";
    const std::string why = hooks_.not_ready ? hooks_.not_ready() : std::string();
    resp.status = why.empty() ? 200 : 503;
    resp.body = why.empty() ? "ready\n" : "not ready: " + why + "\n";
    return;
  }
  if (path == "/metrics" && hooks_.metrics) {
    resp.content_type = "text/plain; version=0.0.4";
    resp.body = hooks_.metrics();
    return;
  }
  if (path.substr(0, 7) == "/debug/" && hooks_.debug) return hooks_.debug(req, resp);
  if (path == "/api/spans/count") return CountSpans(req, resp);
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
  if (hooks_.ui && path.substr(0, 5) != "/api/" && hooks_.ui(req, resp)) return;
  resp.status = 404;
  resp.body = RenderJaegerError(404, "not found: " + std::string(path));
}

}  // namespace spanhouse::query
