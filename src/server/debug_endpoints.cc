#include "server/debug_endpoints.h"

#include <charconv>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "codec/json_writer.h"
#include "query/query_api.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::server {

namespace {

void Error(net::HttpResponse& resp, int status, const std::string& message) {
  resp.status = status;
  resp.body.clear();
  codec::JsonWriter(resp.body).BeginObject().Key("error").String(message).EndObject();
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return !std::isdigit(static_cast<unsigned char>(s[0]));
}

void HandleSink(const net::HttpRequest& req, net::HttpResponse& resp,
                const std::vector<DebugSink>& sinks) {
  std::string v;
  storage::SinkFaults* faults = sinks.empty() ? nullptr : sinks.front().faults;
  if (query::QueryParam(req.target, "sink", &v)) {
    faults = nullptr;
    for (const DebugSink& s : sinks) {
      if (s.name == v) faults = s.faults;
    }
  }
  if (faults == nullptr) return Error(resp, 404, "no embedded sink of that name");
  if (query::QueryParam(req.target, "insert_delay_ms", &v)) {
    uint64_t ms = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), ms);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size() || v.empty() || ms > 600000) {
      return Error(resp, 400, "insert_delay_ms: want 0 to 600000");
    }
    faults->insert_delay_ms = static_cast<uint32_t>(ms);
  }
  const std::pair<const char*, std::atomic<bool>*> switches[] = {
      {"fail_inserts", &faults->fail_inserts},
      {"fail_permanent", &faults->fail_permanent},
      {"kill_after_insert", &faults->kill_after_insert}};
  for (const auto& [name, flag] : switches) {
    if (!query::QueryParam(req.target, name, &v)) continue;
    if (v != "true" && v != "false")
      return Error(resp, 400, fmt::format("{}: want true or false", name));
    *flag = v == "true";
  }
  resp.body.clear();
  codec::JsonWriter w(resp.body);
  w.BeginObject().Key("insert_delay_ms").Uint(faults->insert_delay_ms.load());
  w.Key("fail_inserts").Bool(faults->fail_inserts.load());
  w.Key("fail_permanent").Bool(faults->fail_permanent.load()).EndObject();
}

void HandleSpans(const net::HttpRequest& req, net::HttpResponse& resp, const DebugStore& store) {
  std::string db = store.database;
  query::QueryParam(req.target, "database", &db);
  if (!IsIdentifier(db)) return Error(resp, 400, "database: want an identifier");
  storage::QueryResult r;
  const Status st = store.conn->Query(
      // Rows and distinct ids from one scan, so of the same parts (two
      // scalar subqueries could see an insert between them).
      fmt::format("SELECT count(), uniqExact(span_id), (SELECT {1}(calls) FROM {0}.red_1m) FROM "
                  "{0}.spans",
                  db, store.caps.simple_aggregate ? "sum" : "sumMerge"),
      "TSV", &r);
  if (!st.ok()) {
    spdlog::warn("/debug/spans: {}", st.message());
    return Error(resp, 503, "query failed");
  }
  const auto rows = storage::TsvRows(r.data);
  std::vector<std::string> f = rows.empty() ? std::vector<std::string>() : rows[0];
  if (f.size() != 3) f.resize(3, "0");
  resp.body.clear();
  codec::JsonWriter w(resp.body);
  // The engine's numbers as it wrote them (TSV).
  w.BeginObject().Key("rows").Raw(f[0]).Key("unique_span_ids").Raw(f[1]);
  w.Key("red_calls").Raw(f[2]).EndObject();
}

}  // namespace

void HandleDebug(const net::HttpRequest& req, net::HttpResponse& resp, const DebugStore& store,
                 const std::vector<DebugSink>& sinks) {
  resp.content_type = "application/json";
  if (req.path() == "/debug/spans") return HandleSpans(req, resp, store);
  if (req.path() != "/debug/sink" || req.method != "POST") {
    return Error(resp, req.path() == "/debug/sink" ? 405 : 404,
                 "use POST /debug/sink?insert_delay_ms=N&fail_inserts=true|false");
  }
  HandleSink(req, resp, sinks);
}

}  // namespace spanhouse::server
