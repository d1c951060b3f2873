#include "query/peer_reader.h"

#include <fmt/format.h>

#include <charconv>
#include <future>
#include <unordered_set>
#include <utility>

#include "common/clock.h"
#include "query/jaeger_json.h"
#include "query/recent_reader.h"

namespace spanhouse::query {

namespace {

constexpr std::string_view kPeerPath = "/api/spanhouse/peer/";
// Ids per lookup: a GET's head holds 64 KiB, an id takes 36 bytes.
constexpr size_t kIdsPerCall = 500;

thread_local std::string t_missing;

void NoteMissing(const std::string& what) {
  if (!t_missing.empty()) t_missing += ", ";
  t_missing += what;
}

bool ParseU64(const std::string* text, uint64_t* out) {
  if (text == nullptr) return true;  // absent: the default
  const char* end = text->data() + text->size();
  auto [p, ec] = std::from_chars(text->data(), end, *out);
  return ec == std::errc() && p == end;
}

}  // namespace

// The clients of one peer: one per call in flight, kept for the next (each
// holds a keep-alive connection; a client is not thread-safe).
struct PeerReader::Peer {
  std::string name;
  size_t index = 0;  // in PeerReaderOptions::nodes
  net::HttpUrl url;
  net::HttpClientOptions client;
  std::mutex mu;
  std::vector<std::unique_ptr<net::HttpClient>> idle;  // guarded by mu
  std::atomic<uint64_t> ok{0}, failed{0}, skipped{0};

  // GETs `target`; the body on a 200, else why not.
  bool Get(const std::string& target, std::string* body, std::string* why) {
    std::unique_ptr<net::HttpClient> c;
    {
      std::lock_guard lock(mu);
      if (!idle.empty()) {
        c = std::move(idle.back());
        idle.pop_back();
      }
    }
    if (c == nullptr) c = std::make_unique<net::HttpClient>(url, client);
    net::HttpResult r;
    const bool answered = c->Get(target, &r);
    if (answered) {
      std::lock_guard lock(mu);
      idle.push_back(std::move(c));
    }
    if (!answered) {
      *why = r.error.empty() ? "no answer" : r.error;
      return false;
    }
    if (r.status != 200) {
      *why = fmt::format("HTTP {}", r.status);
      return false;
    }
    *body = std::move(r.body);
    return true;
  }
};

Status PeerReader::Make(SpanReader& local, PeerReaderOptions options,
                        std::unique_ptr<PeerReader>* out) {
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < options.nodes.size(); ++i) {
    if (i == options.self) continue;
    auto p = std::make_unique<Peer>();
    p->name = options.nodes[i].name;
    p->index = i;
    std::string why;
    if (!net::ParseHttpUrl(options.nodes[i].url, &p->url, &why, /*allow_https=*/true)) {
      return Status::Invalid("peer '" + p->name + "': query URL: " + why);
    }
    p->client.timeout = options.timeout;
    p->client.tls_ca_file = options.tls_ca_file;
    p->client.max_body_bytes = 256u << 20;  // a trace's spans, as columnar bytes
    if (!options.bearer_token.empty()) {
      p->client.extra_headers.emplace_back("Authorization", "Bearer " + options.bearer_token);
    }
    peers.push_back(std::move(p));
  }
  out->reset(new PeerReader(local, std::move(options), std::move(peers)));
  return Status::Ok();
}

PeerReader::PeerReader(SpanReader& local, PeerReaderOptions options,
                       std::vector<std::unique_ptr<Peer>> peers)
    : ReaderInFront(local), opts_(std::move(options)), peers_(std::move(peers)) {}

PeerReader::~PeerReader() = default;

std::string PeerReader::TakeMissing() {
  return std::exchange(t_missing, std::string());
}

void PeerReader::AskPeers(const std::string& target,
                          const std::function<Status(size_t, std::string&)>& take) {
  struct Call {
    Peer* peer;
    std::future<bool> done;
    std::string body, why;
  };
  std::vector<Call> calls;
  calls.reserve(peers_.size());
  for (auto& p : peers_) {
    if (opts_.up && !opts_.up(p->index)) {
      p->skipped.fetch_add(1, std::memory_order_relaxed);
      NoteMissing(p->name + " down");
      continue;
    }
    calls.push_back({p.get(), {}, {}, {}});
  }
  // The first peer on this thread, the others beside it.
  for (size_t i = 1; i < calls.size(); ++i) {
    Call& c = calls[i];
    c.done = std::async(std::launch::async,
                        [&c, &target] { return c.peer->Get(target, &c.body, &c.why); });
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& c = calls[i];
    const bool got = i == 0 ? c.peer->Get(target, &c.body, &c.why) : c.done.get();
    Status st = got ? take(c.peer->index, c.body) : Status::Unavailable(c.why);
    if (st.ok()) {
      c.peer->ok.fetch_add(1, std::memory_order_relaxed);
    } else {
      c.peer->failed.fetch_add(1, std::memory_order_relaxed);
      NoteMissing(c.peer->name + ": " + st.message());
    }
  }
}

Status PeerReader::MergeSpans(std::string& columnar, SpanBatch* out) {
  SpanBatch theirs;
  std::string why;
  if (!theirs.ReadColumnar(columnar, &why)) return Status::Internal("bad answer: " + why);
  merged_spans_.fetch_add(AppendMissingSpans(theirs, out), std::memory_order_relaxed);
  return Status::Ok();
}

Status PeerReader::GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) {
  SH_RETURN_IF_ERROR(inner_.GetTraces(ids, out));
  const char* scope = opts_.shared_store ? "recent" : "all";
  for (size_t at = 0; at < ids.size(); at += kIdsPerCall) {
    std::string target = fmt::format("{}traces?scope={}", kPeerPath, scope);
    for (size_t i = at; i < ids.size() && i < at + kIdsPerCall; ++i) {
      target += "&id=" + ToHex(ids[i]);
    }
    AskPeers(target, [&](size_t, std::string& body) { return MergeSpans(body, out); });
  }
  return Status::Ok();
}

Status PeerReader::GetTrace(const TraceId& id, SpanBatch* out) {
  Status st = inner_.GetTrace(id, out);
  if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
  const size_t before = out->span_count();
  const std::string target = fmt::format("{}traces?scope={}&id={}", kPeerPath,
                                         opts_.shared_store ? "recent" : "all", ToHex(id));
  AskPeers(target, [&](size_t, std::string& body) { return MergeSpans(body, out); });
  if (st.code() == StatusCode::kNotFound && out->span_count() > before) return Status::Ok();
  return st;
}

Status PeerReader::FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) {
  std::vector<std::vector<TraceId>> found(1);
  SH_RETURN_IF_ERROR(inner_.FindTraceIds(query, &found[0]));
  const std::string target =
      fmt::format("{}find?scope={}&{}", kPeerPath, opts_.shared_store ? "recent" : "all",
                  EncodePeerFind(query));
  AskPeers(target, [&](size_t, std::string& body) {
    std::vector<TraceId> ids;
    std::string_view rest = body;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      const std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      TraceId id{};
      if (!ParseTraceIdHex(line, &id)) return Status::Internal("bad answer: not a trace id");
      ids.push_back(id);
    }
    found.push_back(std::move(ids));
    return Status::Ok();
  });
  // In turns, each node's newest first, so no node's fresh traces crowd out the others'.
  std::unordered_set<TraceId, TraceIdHash> have;
  for (size_t k = 0; out->size() < query.limit; ++k) {
    bool more = false;
    for (const auto& ids : found) {
      if (k >= ids.size()) continue;
      more = true;
      if (out->size() < query.limit && have.insert(ids[k]).second) out->push_back(ids[k]);
    }
    if (!more) break;
  }
  return Status::Ok();
}

void PeerReader::AppendMetrics(PromText& out) const {
  out.Family("spanhouse_peer_reads_total", "counter",
             "Lookups and searches asked of each peer, by result: ok, failed (an error or no "
             "answer in time: the answer lacks that node's recent spans), skipped (the peer was "
             "down).");
  for (const auto& p : peers_) {
    out.Sample("spanhouse_peer_reads_total", fmt::format("peer=\"{}\",result=\"ok\"", p->name),
               p->ok.load());
    out.Sample("spanhouse_peer_reads_total", fmt::format("peer=\"{}\",result=\"failed\"", p->name),
               p->failed.load());
    out.Sample("spanhouse_peer_reads_total", fmt::format("peer=\"{}\",result=\"skipped\"", p->name),
               p->skipped.load());
  }
  out.One("spanhouse_peer_read_spans_total", "counter",
          "Spans of a lookup or search that only another node had (its recent spans).", "",
          merged_spans_.load());
}

// ---- the peer side ----

std::string EncodePeerFind(const TraceQuery& q) {
  std::string s = "service=" + net::UrlEncode(q.service);
  if (!q.operation.empty()) s += "&operation=" + net::UrlEncode(q.operation);
  for (const TagFilter& t : q.tags) {
    s += "&tk=" + net::UrlEncode(t.key) + "&tv=" + net::UrlEncode(t.value);
  }
  s += fmt::format("&start={}&end={}&min={}&max={}&limit={}", q.start_ns, q.end_ns,
                   q.min_duration_ns, q.max_duration_ns, q.limit);
  return s;
}

Status DecodePeerFind(const QueryString& qs, const QueryLimits& limits, TraceQuery* out) {
  const std::string* service = qs.First("service");
  if (service == nullptr || service->empty()) return Status::Invalid("'service' is required");
  out->service = *service;
  if (const std::string* op = qs.First("operation")) out->operation = *op;
  const std::vector<std::string> keys = qs.All("tk");
  const std::vector<std::string> values = qs.All("tv");
  if (keys.size() != values.size()) return Status::Invalid("'tk' and 'tv' come in pairs");
  if (keys.size() > limits.max_tags) {
    return Status::Invalid(fmt::format("more than {} tags", limits.max_tags));
  }
  for (size_t i = 0; i < keys.size(); ++i) out->tags.push_back({keys[i], values[i]});
  uint64_t limit = out->limit;
  if (!ParseU64(qs.First("start"), &out->start_ns) || !ParseU64(qs.First("end"), &out->end_ns) ||
      !ParseU64(qs.First("min"), &out->min_duration_ns) ||
      !ParseU64(qs.First("max"), &out->max_duration_ns) || !ParseU64(qs.First("limit"), &limit)) {
    return Status::Invalid("start, end, min, max and limit are whole numbers");
  }
  if (limit == 0 || limit > limits.max_traces) {
    return Status::Invalid(fmt::format("limit is 1 to {}", limits.max_traces));
  }
  out->limit = static_cast<uint32_t>(limit);
  if (out->end_ns < out->start_ns) return Status::Invalid("end is before start");
  return Status::Ok();
}

void PeerEndpoint::Handle(std::string_view what, const QueryString& q, net::HttpResponse& resp) {
  auto fail = [&](int status, const std::string& why) {
    resp.status = status;
    resp.content_type = "text/plain";
    resp.body = why + "\n";
  };
  const std::string* scope = q.First("scope");
  if (scope == nullptr || (*scope != "recent" && *scope != "all")) {
    return fail(400, "want scope=recent or scope=all");
  }
  const bool recent_only = *scope == "recent";
  if (what == "traces") {
    std::vector<TraceId> ids;
    for (const std::string& hex : q.All("id")) {
      TraceId id{};
      if (!ParseTraceIdHex(hex, &id)) return fail(400, "malformed trace id '" + hex + "'");
      ids.push_back(id);
    }
    if (ids.size() > limits_.max_trace_ids) {
      return fail(400, fmt::format("more than {} ids", limits_.max_trace_ids));
    }
    SpanBatch batch;
    if (recent_only) {
      if (recent_ != nullptr) {
        recent_->Expire(WallClockNs());
        for (const TraceId& id : ids) recent_->Collect(id, &batch);
      }
    } else if (Status st = local_.GetTraces(ids, &batch); !st.ok()) {
      return fail(503, st.message());
    }
    if (const std::string* format = q.First("format"); format != nullptr && *format == "json") {
      // For people and tests: what this node holds of the traces, as Jaeger shows it.
      DropRepeatedSpans(&batch);
      resp.content_type = "application/json";
      resp.body = RenderJaegerTraces(batch);
      return;
    }
    resp.content_type = "application/octet-stream";
    resp.body.clear();
    batch.AppendColumnar(&resp.body);
    return;
  }
  if (what == "find") {
    TraceQuery query;
    if (Status st = DecodePeerFind(q, limits_, &query); !st.ok()) return fail(400, st.message());
    std::vector<TraceId> ids;
    if (recent_only) {
      if (recent_ != nullptr) recent_->Find(query, &ids);
    } else if (Status st = local_.FindTraceIds(query, &ids); !st.ok()) {
      return fail(503, st.message());
    }
    resp.content_type = "text/plain";
    resp.body.clear();
    for (const TraceId& id : ids) resp.body += ToHex(id) + "\n";
    return;
  }
  fail(404, "not found: " + std::string(kPeerPath) + std::string(what));
}

}  // namespace spanhouse::query
