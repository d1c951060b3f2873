// /api/admin/...: run-time controls of the query listener (guarded by
// auth.query_tokens like the rest of it), and what `spanhouse reconcile` and
// `spanhouse backfill` ask of the stores through a running server: the
// server holds the engine (the embedded one cannot be opened by a second
// process) and the connections to both stores.
//
//   GET|PUT /api/admin/read-source[?to=SOURCE][&fallback=true|false][&fill_gaps=true|false]
//   GET /api/admin/span-counts?source=S&start=US&end=US[&bucket_s=N]
//   GET /api/admin/span-ids?source=S&service=X[&kind=K]&start=US&end=US[&limit=N]
//   GET /api/admin/documents?source=S&trace=HEX   (the trace as Jaeger documents)
//   POST /api/admin/import   (NDJSON of Jaeger span documents -> ClickHouse)
// Times are unix microseconds, as in Jaeger's API.
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <future>
#include <optional>

#include "codec/json_writer.h"
#include "common/clock.h"
#include "net/http_status.h"
#include "query/jaeger_json.h"
#include "query/params.h"
#include "server/server.h"
#include "sink/ticket_latch.h"
#include "storage/opensearch/jaeger_document.h"

namespace spanhouse::server {

namespace {

void Fail(net::HttpResponse& resp, int status, const std::string& message) {
  resp.status = status;
  resp.body = query::RenderJaegerError(status, message);
}

bool ParseU64(const std::string* s, uint64_t* out) {
  if (s == nullptr || s->empty()) return false;
  auto res = std::from_chars(s->data(), s->data() + s->size(), *out);
  return res.ec == std::errc() && res.ptr == s->data() + s->size();
}

// The request's store (?source=, default: the one reads go to) and time range.
struct Common {
  query::QueryString q;
  query::SpanReader* reader = nullptr;
  std::string source;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

}  // namespace

std::string ReadSourceName(const query::ReadSwitch& sw, const std::string& name) {
  if (name != "opensearch" && name != "elasticsearch") return name;
  for (const std::string& s : sw.sources()) {
    if (s == "opensearch" || s == "elasticsearch") return s;
  }
  return name;
}

namespace {

bool ParseCommon(const net::HttpRequest& req, const query::ReadSwitch& sw, bool want_range,
                 net::HttpResponse& resp, Common* c) {
  if (Status st = query::QueryString::Parse(req.target, &c->q); !st.ok()) {
    Fail(resp, 400, st.message());
    return false;
  }
  const std::string* source = c->q.First("source");
  c->source = source != nullptr ? ReadSourceName(sw, *source) : sw.current();
  c->reader = sw.Source(c->source);
  if (c->reader == nullptr) {
    Fail(
        resp, 400, "source: no store named '" + c->source + "' (this server reads " + [&] {
          std::string names;
          for (const auto& n : sw.sources()) names += (names.empty() ? "" : ", ") + n;
          return names;
        }() + ")");
    return false;
  }
  if (!want_range) return true;
  uint64_t start_us = 0, end_us = 0;
  if (!ParseU64(c->q.First("start"), &start_us) || !ParseU64(c->q.First("end"), &end_us) ||
      end_us <= start_us || end_us > (UINT64_MAX / 1000)) {
    Fail(resp, 400, "start and end: unix microseconds, start < end");
    return false;
  }
  c->start_ns = start_us * 1000;
  c->end_ns = end_us * 1000;
  return true;
}

void FailStore(net::HttpResponse& resp, const Status& st, std::string_view what) {
  if (st.code() == StatusCode::kInternal) {
    spdlog::error("admin: {}: {}", what, st.message());
    Fail(resp, 500,
         "internal error: the store could not answer (the reason is in spanhouse's log)");
    return;
  }
  Fail(resp, net::HttpStatusOf(st.code()), st.message());
}

}  // namespace

void Server::HandleAdmin(const net::HttpRequest& req, net::HttpResponse& resp) {
  resp.content_type = "application/json";
  const std::string_view path = req.path();
  const bool get = req.method == "GET";
  if (path == "/api/admin/read-source") return ReadSourceEndpoint(req, resp);
  if (path == "/api/admin/span-counts" && get) return SpanCountsEndpoint(req, resp);
  if (path == "/api/admin/span-ids" && get) return SpanIdsEndpoint(req, resp);
  if (path == "/api/admin/documents" && get) return DocumentsEndpoint(req, resp);
  if (path == "/api/admin/import" && req.method == "POST") return ImportEndpoint(req, resp);
  for (std::string_view known : {"/api/admin/span-counts", "/api/admin/span-ids",
                                 "/api/admin/documents", "/api/admin/import"}) {
    if (path == known) {
      resp.headers.emplace_back("Allow", path == "/api/admin/import" ? "POST" : "GET");
      return Fail(resp, 405, "method not allowed");
    }
  }
  Fail(resp, 404, "not found: " + std::string(path));
}

void Server::ReadSourceEndpoint(const net::HttpRequest& req, net::HttpResponse& resp) {
  query::ReadSwitch& sw = *reading_.read_switch;
  if (req.method == "PUT" || req.method == "POST") {
    // Every parameter checked before any is applied: a 400 changes nothing.
    std::string to;
    const bool has_to = query::QueryParam(req.target, "to", &to);
    if (has_to) to = ReadSourceName(sw, to);
    // (SwitchTo to no such source changes nothing and names the sources.)
    if (has_to && sw.Source(to) == nullptr) return Fail(resp, 400, sw.SwitchTo(to).message());
    auto flag = [&](const char* name, std::optional<bool>* out) {
      std::string v;
      if (!query::QueryParam(req.target, name, &v)) return true;
      if (v != "true" && v != "false") {
        Fail(resp, 400, std::string(name) + ": want true or false");
        return false;
      }
      *out = v == "true";
      return true;
    };
    std::optional<bool> fallback, fill_gaps;
    if (!flag("fallback", &fallback) || !flag("fill_gaps", &fill_gaps)) return;
    if (fallback) sw.set_fallback(*fallback);
    if (fill_gaps) sw.set_fill_gaps(*fill_gaps);
    if (has_to) (void)sw.SwitchTo(to);
  } else if (req.method != "GET") {
    resp.headers.emplace_back("Allow", "GET, PUT");
    return Fail(resp, 405, "method not allowed: GET or PUT");
  }
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("read_from").String(sw.current());
  w.Key("fallback").Bool(sw.fallback());
  w.Key("fill_gaps").Bool(sw.fill_gaps());
  w.Key("sources").BeginArray();
  for (const auto& s : sw.sources()) w.String(s);
  w.EndArray().EndObject();
  resp.body = std::move(out);
}

void Server::SpanCountsEndpoint(const net::HttpRequest& req, net::HttpResponse& resp) {
  Common c;
  if (!ParseCommon(req, *reading_.read_switch, true, resp, &c)) return;
  query::SpanCountQuery q;
  q.start_ns = c.start_ns;
  q.end_ns = c.end_ns;
  if (const std::string* b = c.q.First("bucket_s"); b != nullptr) {
    if (!ParseU64(b, &q.bucket_s) || q.bucket_s < 60 || q.bucket_s > 366 * 86400) {
      return Fail(resp, 400, "bucket_s: seconds, 60 to 31622400");
    }
  }
  std::vector<query::SpanCountRow> rows;
  if (Status st = c.reader->CountSpans(q, &rows); !st.ok())
    return FailStore(resp, st, "span counts");
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("source").String(c.source).Key("bucket_s").Uint(q.bucket_s);
  w.Key("rows").BeginArray();
  for (const query::SpanCountRow& row : rows) {
    w.BeginObject().Key("bucket").Uint(row.bucket_s).Key("service").String(row.service);
    w.Key("kind").String(SpanKindName(row.kind)).Key("spans").Uint(row.spans).EndObject();
  }
  w.EndArray().EndObject();
  resp.body = std::move(out);
}

void Server::SpanIdsEndpoint(const net::HttpRequest& req, net::HttpResponse& resp) {
  Common c;
  if (!ParseCommon(req, *reading_.read_switch, true, resp, &c)) return;
  query::SpanIdQuery q;
  q.start_ns = c.start_ns;
  q.end_ns = c.end_ns;
  const std::string* service = c.q.First("service");
  if (service == nullptr) return Fail(resp, 400, "service: required");
  q.service = *service;
  if (const std::string* kind = c.q.First("kind"); kind != nullptr) {
    if (!ParseSpanKind(*kind, &q.kind)) return Fail(resp, 400, "kind: a span kind, e.g. server");
    q.any_kind = false;
  }
  if (const std::string* limit = c.q.First("limit"); limit != nullptr) {
    uint64_t n = 0;
    if (!ParseU64(limit, &n) || n == 0 || n > 1000000)
      return Fail(resp, 400, "limit: 1 to 1000000");
    q.limit = static_cast<uint32_t>(n);
  }
  std::vector<query::SpanKey> keys;
  if (Status st = c.reader->ListSpans(q, &keys); !st.ok()) return FailStore(resp, st, "span ids");
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("spans").BeginArray();
  for (const query::SpanKey& k : keys) {
    w.BeginArray().String(ToHex(k.trace_id)).String(ToHex(k.span_id)).EndArray();
  }
  w.EndArray().EndObject();
  resp.body = std::move(out);
}

void Server::DocumentsEndpoint(const net::HttpRequest& req, net::HttpResponse& resp) {
  Common c;
  if (!ParseCommon(req, *reading_.read_switch, false, resp, &c)) return;
  const std::string* hex = c.q.First("trace");
  TraceId id{};
  if (hex == nullptr || !query::ParseTraceIdHex(*hex, &id)) {
    return Fail(resp, 400, "trace: a trace id, up to 32 hex digits");
  }
  SpanBatch batch;
  Status st = c.reader->GetTrace(id, &batch);
  if (!st.ok() && st.code() != StatusCode::kNotFound) return FailStore(resp, st, "documents");
  DropRepeatedSpans(&batch);  // one document per span, as Jaeger's _id makes it
  storage::opensearch::DocumentWriter writer(batch);
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("source").String(c.source).Key("documents").BeginArray();
  std::string document;
  for (uint32_t s = 0; s < batch.span_count(); ++s) {
    document.clear();
    writer.AppendSpan(document, s);
    w.Raw(document);  // the document writer's JSON
  }
  w.EndArray().EndObject();
  resp.body = std::move(out);
}

// Spans imports answered (durable) hold claims until they are stored: this
// many mean the store is far behind (~100 MB of claims), and imports wait.
constexpr size_t kMaxClaimedSpans = 1000000;

void Server::ImportEndpoint(const net::HttpRequest& req, net::HttpResponse& resp) {
  if (stopping_.load()) {
    resp.headers.emplace_back("Retry-After", "1");
    return Fail(resp, 503, "import: spanhouse is shutting down");
  }
  if (const size_t claimed = reading_.import_claims.claimed(); claimed >= kMaxClaimedSpans) {
    resp.headers.emplace_back("Retry-After", "1");
    return Fail(resp, 503,
                "import: " + std::to_string(claimed) +
                    " imported spans are not stored yet (ClickHouse is behind): retry later");
  }
  std::string wait;
  if (query::QueryParam(req.target, "wait", &wait) && wait != "stored" && wait != "durable") {
    return Fail(resp, 400, "wait: durable (the default) or stored");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  // Decodes every document first: one that is not a span is reported, the
  // others are still imported.
  auto batch = std::make_unique<SpanBatch>();
  uint64_t received = 0;
  uint64_t invalid = 0;
  std::vector<std::string> errors;                            // the first few
  storage::opensearch::DocumentDecoder decoder(batch.get());  // a resource per process
  std::string_view body = req.body;
  // The body's string may be read to its capacity: documents parse in place.
  const char* const readable_end = req.body.data() + req.body.capacity();
  while (!body.empty()) {
    const size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) continue;
    ++received;
    const auto past_end = static_cast<size_t>(readable_end - (line.data() + line.size()));
    if (Status st = decoder.Append(line, past_end); !st.ok()) {
      if (++invalid <= 5) {
        errors.push_back("document " + std::to_string(received) + ": " + st.message());
      }
    }
  }
  // Spans already stored (dual-written, or imported before) are left out,
  // and so are those another import in flight is storing (import_claims.h):
  // an import is idempotent, also beside another one carrying the same spans.
  std::vector<TraceId> ids(batch->spans.trace_id.begin(), batch->spans.trace_id.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  ImportClaims::Read read = reading_.import_claims.BeginRead();
  std::vector<query::SpanKey> stored;
  for (size_t i = 0; i < ids.size(); i += 500) {
    std::vector<TraceId> chunk(
        ids.begin() + static_cast<std::ptrdiff_t>(i),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(i + 500, ids.size())));
    if (Status st = reading_.reader->SpanKeysOfTraces(chunk, &stored); !st.ok()) {
      return FailStore(resp, st, "import: reading what is stored");
    }
  }
  std::sort(stored.begin(), stored.end());
  std::vector<query::SpanKey> candidates;
  std::vector<uint32_t> candidate_spans;
  for (uint32_t s = 0; s < batch->span_count(); ++s) {
    query::SpanKey k{batch->spans.trace_id[s], batch->spans.span_id[s]};
    if (!std::binary_search(stored.begin(), stored.end(), k)) {
      candidates.push_back(k);
      candidate_spans.push_back(s);
    }
  }
  const ImportClaims::Claim claim = reading_.import_claims.Take(std::move(read), candidates);
  std::vector<uint32_t> mine;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (claim.mine[i]) mine.push_back(candidate_spans[i]);
  }
  if (!mine.empty()) {
    std::unique_ptr<SpanBatch> todo;
    if (mine.size() == batch->span_count()) {
      todo = std::move(batch);
    } else {
      todo = std::make_unique<SpanBatch>();
      todo->AppendSpans(*batch, mine.data(), mine.size());
    }
    if (Status st = Import(std::move(todo), claim.flight); !st.ok()) {
      resp.headers.emplace_back("Retry-After", "1");
      return Fail(resp, 503, "import: " + st.message());
    }
  }
  // Answered once every span of it is durable (stored, without a log), its
  // own and those other imports hold; wait=stored: once they and every
  // import before this one are stored (what a backfill asks at its end).
  const bool stored_wanted = wait == "stored" || !pipeline_.queue->durable();
  if (!reading_.import_claims.Wait(
          claim, stored_wanted ? ImportClaims::Stage::kStored : ImportClaims::Stage::kDurable,
          deadline) ||
      (wait == "stored" && !reading_.import_claims.WaitAllStored(deadline))) {
    resp.headers.emplace_back("Retry-After", "1");
    return Fail(resp, 503,
                "import: not done within 2 minutes, or another import of the same spans failed; "
                "send it again (nothing is stored twice)");
  }
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("received").Uint(received).Key("invalid").Uint(invalid);
  w.Key("already_stored").Uint(received - invalid - mine.size()).Key("imported").Uint(mine.size());
  w.Key("errors").BeginArray();
  for (const std::string& e : errors) w.String(e);
  w.EndArray().EndObject();
  resp.body = std::move(out);
}

Status Server::Import(std::unique_ptr<SpanBatch> batch, const ImportClaims::FlightPtr& flight) {
  // Through the durable queue like any request, for the ClickHouse store's
  // sinks only (the spans came from the other store): a killed import loses
  // nothing once durable (its record is replayed at the next start), and the
  // recent index sees the spans as it sees every request.
  ImportClaims& claims = reading_.import_claims;
  std::vector<std::string> targets;
  for (const SinkSpec& spec : ServeSinks(cfg_, remote() ? store_.shards.size() : 1)) {
    if (spec.kind != "opensearch" && spec.name != SecondarySinkName(cfg_)) {
      targets.push_back(spec.name);
    }
  }
  std::string record;
  batch->AppendColumnar(&record);
  sink::Ticket ticket;
  if (Status st = pipeline_.queue->Append(WallClockNs(), codec::BodyFormat::kColumnar, record,
                                          &ticket, targets);
      !st.ok()) {
    claims.Failed(flight);
    return st;
  }
  record = std::string();
  std::promise<bool> synced;
  pipeline_.queue->OnDurable(ticket.lsn(), [&synced](bool ok) { synced.set_value(ok); });
  if (!synced.get_future().get()) {
    claims.Failed(flight);
    return Status::Unavailable("the durable queue could not sync the import");
  }
  if (pipeline_.queue->durable()) claims.Durable(flight);
  NoteImported(*batch);  // stored from here on, by this run or the next start's replay
  const size_t spans = batch->span_count();
  const size_t bytes = batch->MemoryBytes();
  Reservation reservation;
  MemoryBudget& budget = pipeline_.queue->budget();
  if (budget.ReserveWithin(bytes, std::chrono::seconds(5))) {
    reservation = Reservation(&budget, bytes);
  } else if (pipeline_.queue->durable()) {
    batch.reset();  // each sink reads it back from the log as memory comes
  } else {
    claims.Failed(flight);
    return Status::Exhausted("spanhouse is at its memory limit, retry later");
  }
  const auto latch = sink::TicketLatch::Create(std::move(ticket));
  sink::Ticket claim = latch->Take();
  latch->OnDone([&claims, flight] { claims.Stored(flight); });
  Status st = pipeline_.queue->DeliverTo(targets, std::move(batch), std::move(reservation),
                                         std::move(claim), bytes, spans);
  // Refused (shutting down): a durable record is stored by the next start's
  // replay, and its spans stay claimed until then; without a log it is gone.
  if (!st.ok() && !pipeline_.queue->durable()) claims.Failed(flight);
  return st;
}

void Server::NoteImported(const SpanBatch& batch) {
  if (batch.span_count() == 0) return;
  const auto [lo, hi] =
      std::minmax_element(batch.spans.start_ns.begin(), batch.spans.start_ns.end());
  // History the dependency job may have passed: its edges are computed again.
  for (auto& job : writing_.dependency_jobs) job->Recompute(*lo, *hi);
}

}  // namespace spanhouse::server
