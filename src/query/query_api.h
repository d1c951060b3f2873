// The query API on :16686: Jaeger's HTTP query API (the paths, parameters
// and JSON shapes the Jaeger UI and Grafana's Jaeger data source use), its
// service-metrics (SPM) API over the per-minute RED views, spanhouse's
// overview summaries, plus /healthz (the process answers) and /readyz (it
// takes spans: 503 while starting or shutting down).
//
// Request parameters are checked by query/params.h (a bad one is a 400 in
// Jaeger's error envelope, naming it); the SpanReader does the reading. An
// error of the store is logged and answered 500 without its text, so a
// client never sees SQL or engine messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/http_server.h"
#include "query/params.h"
#include "query/span_reader.h"

namespace spanhouse::query {

struct QueryApiOptions {
  std::string address = "127.0.0.1:16686";
  int threads = 2;
  net::HttpAuthorizer authorize{};               // empty: no token needed
  std::shared_ptr<const net::TlsContext> tls{};  // set: HTTPS only
  QueryLimits limits{};
  std::function<uint64_t()> now_ns{};  // the clock (tests); unset: the system clock
  // Threads that answer trace lookups and searches off the listener's own
  // threads (0: on them). Set where those ask other nodes (query/peer_reader.h):
  // a listener thread waiting on a peer could not answer that peer asking back.
  int trace_workers = 0;
  // Threads that answer POST /api/admin/import off the listener's threads (0:
  // on them): an import reads the store and waits for the durable queue's
  // sync, and a parallel backfill sends several at once, while the listener
  // goes on answering everything else. At most twice as many wait for one
  // (each holds its body); more are answered 503 + Retry-After.
  int import_workers = 0;
};

// Endpoints the server wires in beside the query routes; each may be empty.
struct AdminHooks {
  std::function<std::string()> metrics;  // GET /metrics, Prometheus text
  // GET /readyz: "" when ready, else why not (answered 503). Unset: ready.
  std::function<std::string()> not_ready;
  // More of the /readyz answer, ready or not (the peers' health: "peers: b up, c down 12 s");
  // unset or "": nothing.
  std::function<std::string()> ready_detail;
  // /debug/... (fault injection for tests); only set when enabled in config.
  std::function<void(const net::HttpRequest&, net::HttpResponse&)> debug;
  // /api/admin/... (any method): the server's run-time controls (the read
  // source). Unset: 404.
  std::function<void(const net::HttpRequest&, net::HttpResponse&)> admin;
  // GET /api/spanhouse/sampling: what share of traces is kept (JSON, the
  // server's sampling settings and counts). Unset: 404.
  std::function<std::string()> sampling;
  // GET /api/spanhouse/peer/<what>: what another node of the `peers` list asks
  // this one (query/peer_reader.h, PeerEndpoint). Unset: 404.
  std::function<void(std::string_view what, const QueryString&, net::HttpResponse&)> peer;
  // Called after every /api/ request with its answer (headers to add: the
  // store that answered).
  std::function<void(net::HttpResponse&)> annotate;
  // Paths outside /api that no route above took (the web UI, ui/ui_server.h):
  // true when it answered.
  std::function<bool(const net::HttpRequest&, net::HttpResponse&)> ui;
};

class QueryApi {
 public:
  QueryApi(const QueryApiOptions& options, SpanReader& reader, AdminHooks hooks = {});
  ~QueryApi();
  Status Start();
  void Stop();
  uint16_t port() const { return server_.port(); }
  void Handle(const net::HttpRequest& req, net::HttpResponse& resp);

  // red_1m's resolution: the smallest step of /api/metrics/* (minstep).
  static constexpr uint64_t kMinStepMs = 60000;

 private:
  // The /api/ routes; `path` starts after "/api/".
  void HandleApi(std::string_view path, const QueryString& q, net::HttpResponse& resp);
  void CountSpans(const QueryString& q, net::HttpResponse& resp);
  void SearchTraces(const QueryString& q, net::HttpResponse& resp);
  void GetTrace(std::string_view hex, net::HttpResponse& resp);
  void Operations(const QueryString& q, net::HttpResponse& resp);
  void OperationNames(const std::string& service, net::HttpResponse& resp);
  void Dependencies(const QueryString& q, net::HttpResponse& resp);
  void Metrics(std::string_view which, const QueryString& q, net::HttpResponse& resp);
  void Summary(const std::string& service, const QueryString& q, net::HttpResponse& resp);
  // Answers a failed Status: its message for the client's errors (400,
  // 404, 503), a generic one for the store's own failures (500, logged).
  void Fail(const Status& st, std::string_view what, net::HttpResponse& resp);
  uint64_t Now() const;

  class Workers;
  // Hands `req` to the trace workers when it is a lookup or search, to the
  // import workers when it is an import, when there are such workers.
  void Route(net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later);

  SpanReader& reader_;
  AdminHooks hooks_;
  QueryLimits limits_;
  std::function<uint64_t()> now_ns_;
  std::unique_ptr<Workers> workers_;         // null: none
  std::unique_ptr<Workers> import_workers_;  // null: none
  net::HttpServer server_;
};

// The percent-decoded value of query-string parameter `name` in `target`.
bool QueryParam(std::string_view target, std::string_view name, std::string* value);

}  // namespace spanhouse::query
