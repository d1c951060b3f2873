#include "query/query_api.h"

#include "net/http_status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "codec/json_writer.h"
#include "query/api_json.h"
#include "query/jaeger_json.h"

namespace spanhouse::query {

// A few threads and a bounded queue of deferred requests.
class QueryApi::Workers {
 public:
  Workers(int n, size_t max_queued) : max_queued_(max_queued) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~Workers() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // False when the queue is full.
  bool Post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      if (jobs_.size() >= max_queued_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

QueryApi::QueryApi(const QueryApiOptions& options, SpanReader& reader, AdminHooks hooks)
    : reader_(reader),
      hooks_(std::move(hooks)),
      limits_(options.limits),
      now_ns_(options.now_ns),
      workers_(options.trace_workers > 0 ? std::make_unique<Workers>(options.trace_workers, 256)
                                         : nullptr),
      import_workers_(
          options.import_workers > 0
              ? std::make_unique<Workers>(options.import_workers,
                                          2 * static_cast<size_t>(options.import_workers))
              : nullptr),
      server_({.name = "query",
               .address = options.address,
               .max_body_bytes = 32u << 20,  // POST /api/admin/import: pages of documents
               .threads = options.threads,
               .authorize = options.authorize,
               .tls = options.tls},
              [this](net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later) {
                Route(req, resp, later);
              }) {}

QueryApi::~QueryApi() {
  server_.Stop();  // answers in flight first, while the workers still run
}

void QueryApi::Route(net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later) {
  Workers* workers = nullptr;
  const char* busy_message = "";
  if (workers_ != nullptr && req.path().starts_with("/api/traces")) {
    workers = workers_.get();
    busy_message = "too many trace lookups waiting: try again";
  } else if (import_workers_ != nullptr && req.path() == "/api/admin/import" &&
             req.method == "POST") {
    workers = import_workers_.get();
    busy_message = "too many imports waiting: try again";
  }
  if (workers == nullptr) return Handle(req, resp);
  auto job = std::make_shared<std::pair<net::HttpRequest, net::HttpResponder>>(std::move(req),
                                                                               later.Defer());
  const bool queued = workers->Post([this, job] {
    net::HttpResponse answer;
    Handle(job->first, answer);
    job->second.Respond(std::move(answer));
  });
  if (!queued) {
    net::HttpResponse busy;
    busy.status = 503;
    busy.content_type = "application/json";
    busy.headers.emplace_back("Retry-After", "1");
    busy.body = RenderJaegerError(503, busy_message);
    job->second.Respond(std::move(busy));
  }
}

Status QueryApi::Start() {
  return server_.Start();
}
void QueryApi::Stop() {
  server_.Stop();
}

uint64_t QueryApi::Now() const {
  if (now_ns_) return now_ns_();
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

bool QueryParam(std::string_view target, std::string_view name, std::string* value) {
  QueryString q;
  if (!QueryString::Parse(target, &q).ok()) return false;
  const std::string* v = q.First(name);
  if (v == nullptr) return false;
  *value = *v;
  return true;
}

void QueryApi::Fail(const Status& st, std::string_view what, net::HttpResponse& resp) {
  resp.status = net::HttpStatusOf(st.code());
  if (st.code() == StatusCode::kInternal) {
    // The store's own failure: its text (SQL, engine internals) goes to
    // the log only.
    spdlog::error("query API: {}: {}", what, st.message());
    resp.body = RenderJaegerError(500,
                                  "internal error: the store could not answer (the "
                                  "reason is in spanhouse's log)");
    return;
  }
  resp.body = RenderJaegerError(resp.status, st.message());
}

void QueryApi::CountSpans(const QueryString& q, net::HttpResponse& resp) {
  SpanReader::AttrOwner owner = SpanReader::AttrOwner::kResource;
  const std::string* key = q.First("resource_attr");
  if (key == nullptr || key->empty()) {
    owner = SpanReader::AttrOwner::kSpan;
    key = q.First("attr");
  }
  if (key == nullptr || key->empty()) {
    owner = SpanReader::AttrOwner::kUserField;
    key = q.First("user_field");
  }
  const std::string* value = q.First("value");
  if (key == nullptr || key->empty() ||
      (value == nullptr && owner != SpanReader::AttrOwner::kUserField)) {
    return Fail(Status::Invalid("want ?resource_attr=KEY&value=VALUE, ?attr=KEY&value=VALUE or "
                                "?user_field=PATH[&value=VALUE]"),
                "", resp);
  }
  uint64_t n = 0;
  Status st = reader_.CountSpansWithAttr(owner, *key, value == nullptr ? "" : *value, &n);
  if (!st.ok()) return Fail(st, "count spans", resp);
  resp.body.clear();
  codec::JsonWriter(resp.body).BeginObject().Key("count").Uint(n).EndObject();
}

void QueryApi::GetTrace(std::string_view hex, net::HttpResponse& resp) {
  TraceId id{};
  if (!ParseTraceIdHex(hex, &id)) {
    return Fail(
        Status::Invalid("malformed trace id '" + std::string(hex) + "': want up to 32 hex digits"),
        "", resp);
  }
  SpanBatch batch;
  Status st = reader_.GetTrace(id, &batch);
  if (st.code() == StatusCode::kNotFound) st = {StatusCode::kNotFound, "trace not found"};
  if (!st.ok()) return Fail(st, "trace " + std::string(hex), resp);
  DropRepeatedSpans(&batch);  // a span a store holds twice is shown once
  resp.body = RenderJaegerTraces(batch);
}

void QueryApi::SearchTraces(const QueryString& q, net::HttpResponse& resp) {
  TraceSearchRequest req;
  if (Status st = ParseTraceSearch(q, Now(), limits_, &req); !st.ok()) return Fail(st, "", resp);
  std::vector<TraceId> ids = std::move(req.ids);
  const bool by_id = !ids.empty();
  if (!by_id) {
    if (Status st = reader_.FindTraceIds(req.query, &ids); !st.ok()) {
      return Fail(st, "trace search", resp);
    }
  }
  SpanBatch batch;
  if (Status st = reader_.GetTraces(ids, &batch); !st.ok()) return Fail(st, "traces", resp);
  DropRepeatedSpans(&batch);
  std::vector<TraceId> missing;
  if (by_id) {
    // Jaeger answers the ids it found and names the others in errors.
    std::vector<TraceId> found(batch.spans.trace_id.begin(), batch.spans.trace_id.end());
    std::sort(found.begin(), found.end());
    for (const TraceId& id : ids) {
      if (!std::binary_search(found.begin(), found.end(), id)) missing.push_back(id);
    }
  }
  resp.body = RenderJaegerTraces(batch, RenderMissingTraces(missing));
}

void QueryApi::Operations(const QueryString& q, net::HttpResponse& resp) {
  const std::string* service = q.First("service");
  if (service == nullptr || service->empty()) {
    return Fail(Status::Invalid("parameter 'service' is required"), "", resp);
  }
  const std::string* kind_text = q.First("spanKind");
  uint8_t kind = 0;
  const bool any_kind = kind_text == nullptr || kind_text->empty();
  if (!any_kind && !ParseSpanKind(*kind_text, &kind)) {
    return Fail(
        Status::Invalid("unable to parse param 'spanKind': unsupported span kind '" + *kind_text +
                        "': want server, client, producer, consumer or internal"),
        "", resp);
  }
  std::vector<OperationInfo> ops;
  if (Status st = reader_.GetOperations(*service, any_kind, kind, &ops); !st.ok()) {
    return Fail(st, "operations", resp);
  }
  resp.body = RenderOperations(ops);
}

void QueryApi::OperationNames(const std::string& service, net::HttpResponse& resp) {
  std::vector<OperationInfo> ops;
  if (Status st = reader_.GetOperations(service, true, 0, &ops); !st.ok()) {
    return Fail(st, "operations", resp);
  }
  std::vector<std::string> names;
  for (const OperationInfo& op : ops) {
    if (names.empty() || names.back() != op.name) names.push_back(op.name);  // sorted by name
  }
  resp.body = RenderStringList(names);
}

void QueryApi::Dependencies(const QueryString& q, net::HttpResponse& resp) {
  DependenciesRequest req;
  if (Status st = ParseDependencies(q, Now(), limits_, &req); !st.ok()) {
    return Fail(st, "", resp);
  }
  std::vector<DependencyLink> links;
  const uint64_t from = req.end_s > req.lookback_s ? req.end_s - req.lookback_s : 0;
  if (Status st = reader_.GetDependencies(from, req.end_s, &links); !st.ok()) {
    return Fail(st, "dependencies", resp);
  }
  if (!req.service.empty()) {
    std::erase_if(links, [&](const DependencyLink& l) {
      return l.parent != req.service && l.child != req.service;
    });
  }
  resp.body = RenderDependencies(links);
}

void QueryApi::Metrics(std::string_view which, const QueryString& q, net::HttpResponse& resp) {
  if (which == "minstep") {
    resp.body = RenderNumberData(kMinStepMs);
    return;
  }
  RedMetric metric = RedMetric::kCalls;
  if (which == "latencies") {
    metric = RedMetric::kLatencies;
  } else if (which == "errors") {
    metric = RedMetric::kErrors;
  } else if (which != "calls") {
    return Fail({StatusCode::kNotFound, "not found: /api/metrics/" + std::string(which)}, "", resp);
  }
  RedQuery query;
  if (Status st = ParseMetricsQuery(q, Now(), limits_, metric == RedMetric::kLatencies, &query);
      !st.ok()) {
    return Fail(st, "", resp);
  }
  std::vector<RedSeries> series;
  if (Status st = reader_.GetRedSeries(query, &series); !st.ok()) {
    return Fail(st, "metrics", resp);
  }
  resp.body = RenderMetricFamily(metric, query, series);
}

void QueryApi::Summary(const std::string& service, const QueryString& q, net::HttpResponse& resp) {
  RedSummaryQuery query;
  if (Status st = ParseSummary(q, Now(), limits_, &query); !st.ok()) return Fail(st, "", resp);
  query.service = service;
  std::vector<RedSummaryRow> rows;
  if (Status st = reader_.GetRedSummary(query, &rows); !st.ok()) {
    return Fail(st, "summary", resp);
  }
  resp.body = RenderSummary(query, rows);
}

void QueryApi::HandleApi(std::string_view path, const QueryString& q, net::HttpResponse& resp) {
  // Splits off the first segment of `rest`.
  auto next = [](std::string_view& rest) {
    const size_t slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    return seg;
  };
  auto decode = [&](std::string_view seg, std::string* out) {
    if (DecodePathSegment(seg, out) && !out->empty()) return true;
    Fail(Status::Invalid("malformed path segment '" + std::string(seg) + "'"), "", resp);
    return false;
  };
  std::string_view rest = path;
  const std::string_view first = next(rest);
  if (first == "spans" && rest == "count") return CountSpans(q, resp);
  if (first == "traces") {
    if (path == "traces") return SearchTraces(q, resp);
    return GetTrace(rest, resp);  // anything else after /api/traces/ is a (bad) id
  }
  if (first == "services") {
    if (path == "services") {
      std::vector<std::string> services;
      if (Status st = reader_.GetServices(&services); !st.ok()) {
        return Fail(st, "services", resp);
      }
      resp.body = RenderStringList(services);
      return;
    }
    const std::string_view seg = next(rest);
    std::string service;
    if (rest == "operations") {
      if (decode(seg, &service)) OperationNames(service, resp);
      return;
    }
  }
  if (path == "operations") return Operations(q, resp);
  if (path == "dependencies") return Dependencies(q, resp);
  if (first == "metrics" && !rest.empty() && rest.find('/') == std::string_view::npos) {
    return Metrics(rest, q, resp);
  }
  if (path == "spanhouse/sampling" && hooks_.sampling) {
    resp.body = hooks_.sampling();
    return;
  }
  if (first == "spanhouse" && rest.starts_with("peer/") && hooks_.peer) {
    return hooks_.peer(rest.substr(5), q, resp);
  }
  if (first == "spanhouse" && next(rest) == "services") {
    if (rest == "summary") return Summary("", q, resp);
    const std::string_view seg = next(rest);
    std::string service;
    if (rest == "operations/summary") {
      if (decode(seg, &service)) Summary(service, q, resp);
      return;
    }
  }
  Fail({StatusCode::kNotFound, "not found: /api/" + std::string(path)}, "", resp);
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
    if (hooks_.ready_detail) {
      const std::string more = hooks_.ready_detail();
      if (!more.empty()) resp.body += more + "\n";
    }
    return;
  }
  if (path == "/metrics" && hooks_.metrics) {
    resp.content_type = "text/plain; version=0.0.4";
    resp.body = hooks_.metrics();
    return;
  }
  if (path.substr(0, 7) == "/debug/" && hooks_.debug) return hooks_.debug(req, resp);
  constexpr std::string_view kApi = "/api/";
  if (path.substr(0, 11) == "/api/admin/" && hooks_.admin) return hooks_.admin(req, resp);
  if (path.substr(0, kApi.size()) == kApi) {
    if (req.method != "GET") {
      resp.status = 405;
      resp.headers.emplace_back("Allow", "GET");
      resp.body = RenderJaegerError(405, "method not allowed: use GET");
      return;
    }
    QueryString q;
    if (Status st = QueryString::Parse(req.target, &q); !st.ok()) return Fail(st, "", resp);
    HandleApi(path.substr(kApi.size()), q, resp);
    if (hooks_.annotate) hooks_.annotate(resp);
    return;
  }
  if (hooks_.ui && path.substr(0, 5) != "/api/" && hooks_.ui(req, resp)) return;
  resp.status = 404;
  resp.body = RenderJaegerError(404, "not found: " + std::string(path));
}

}  // namespace spanhouse::query
