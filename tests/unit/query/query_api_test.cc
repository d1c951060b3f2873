// Tests for the query API's handler (query/query_api.h), called directly
// with a fake SpanReader: trace id parsing, the Jaeger JSON answers and error
// envelopes, methods, and /healthz.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cctype>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../testdata/sample_batch.h"
#include "common/status.h"
#include "model/span_batch.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "query/query_api.h"
#include "query/span_reader.h"

namespace spanhouse::query {
namespace {

// Answers from prepared data (GetTrace and GetTraces: only the spans of the
// asked traces; kNotFound when GetTrace finds none), or a fixed error;
// remembers what was asked.
class FakeReader : public SpanReader {
 public:
  Status GetTrace(const TraceId& id, SpanBatch* out) override {
    asked.push_back(id);
    if (!error.ok()) return error;
    bool any = false;
    for (size_t i = 0; i < stored.span_count(); ++i) any |= stored.spans.trace_id[i] == id;
    if (!any) return {StatusCode::kNotFound, "no such trace"};
    out->Append(stored);
    return Status::Ok();
  }
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override {
    asked_many.push_back(ids);
    if (!error.ok()) return error;
    for (const TraceId& id : ids) {
      std::vector<uint32_t> rows;
      for (uint32_t i = 0; i < stored.span_count(); ++i) {
        if (stored.spans.trace_id[i] == id) rows.push_back(i);
      }
      out->AppendSpans(stored, rows.data(), rows.size());
    }
    return Status::Ok();
  }
  Status FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) override {
    searches.push_back(query);
    if (!error.ok()) return error;
    *out = found;
    return Status::Ok();
  }
  Status GetServices(std::vector<std::string>* out) override {
    if (!error.ok()) return error;
    *out = services;
    return Status::Ok();
  }
  Status GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                       std::vector<OperationInfo>* out) override {
    op_requests.push_back({service, any_kind, kind});
    if (!error.ok()) return error;
    *out = ops;
    return Status::Ok();
  }
  Status GetDependencies(uint64_t from_s, uint64_t to_s,
                         std::vector<DependencyLink>* out) override {
    dep_ranges.emplace_back(from_s, to_s);
    if (!error.ok()) return error;
    *out = links;
    return Status::Ok();
  }
  Status GetRedSeries(const RedQuery& query, std::vector<RedSeries>* out) override {
    red_queries.push_back(query);
    if (!error.ok()) return error;
    *out = series;
    return Status::Ok();
  }
  Status GetRedSummary(const RedSummaryQuery& query, std::vector<RedSummaryRow>* out) override {
    summary_queries.push_back(query);
    if (!error.ok()) return error;
    *out = summary;
    return Status::Ok();
  }
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override {
    counted.emplace_back(key, value);
    owners.push_back(owner);
    if (!error.ok()) return error;
    *count = 42;
    return Status::Ok();
  }

  struct OpRequest {
    std::string service;
    bool any_kind;
    uint8_t kind;
  };
  SpanBatch stored;
  Status error;
  std::vector<TraceId> found;
  std::vector<std::string> services;
  std::vector<OperationInfo> ops;
  std::vector<DependencyLink> links;
  std::vector<RedSeries> series;
  std::vector<RedSummaryRow> summary;
  std::vector<TraceId> asked;
  std::vector<std::vector<TraceId>> asked_many;
  std::vector<TraceQuery> searches;
  std::vector<OpRequest> op_requests;
  std::vector<std::pair<uint64_t, uint64_t>> dep_ranges;
  std::vector<RedQuery> red_queries;
  std::vector<RedSummaryQuery> summary_queries;
  std::vector<std::pair<std::string, std::string>> counted;
  std::vector<AttrOwner> owners;
};

std::string HexOf(const TraceId& id) {
  return ToHex(id);
}

net::HttpRequest Get(std::string target) {
  net::HttpRequest r;
  r.method = "GET";
  r.target = std::move(target);
  return r;
}

// 2023-11-14T22:13:20Z, the handler's clock.
constexpr uint64_t kNowNs = 1700000000ull * 1000000000ull;

struct Fixture {
  explicit Fixture(AdminHooks hooks = {}) : api(Options(), reader, std::move(hooks)) {
    reader.stored = testdata::SampleBatch(1);
  }
  static QueryApiOptions Options() {
    QueryApiOptions o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
    o.now_ns = [] { return kNowNs; };
    return o;
  }
  net::HttpResponse Do(const net::HttpRequest& req) {
    net::HttpResponse resp;
    api.Handle(req, resp);
    return resp;
  }
  FakeReader reader;
  QueryApi api;
};

struct Envelope {
  bool data_null = false;
  int64_t code = 0;
  std::string msg;
};

// {"data":null,...,"errors":[{"code":N,"msg":"..."}]}
std::optional<Envelope> ParseEnvelope(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body).get(root) != simdjson::SUCCESS) return std::nullopt;
  Envelope e;
  e.data_null = root["data"].is_null();
  simdjson::dom::array errors;
  if (root["errors"].get_array().get(errors) != simdjson::SUCCESS) return std::nullopt;
  if (errors.size() != 1) return std::nullopt;
  std::string_view msg;
  if (errors.at(0)["code"].get_int64().get(e.code) != simdjson::SUCCESS) return std::nullopt;
  if (errors.at(0)["msg"].get_string().get(msg) != simdjson::SUCCESS) return std::nullopt;
  e.msg = std::string(msg);
  return e;
}

void ExpectEnvelope(const net::HttpResponse& resp, int code, std::string_view msg_part) {
  EXPECT_EQ(resp.status, code) << resp.body;
  EXPECT_EQ(resp.content_type, "application/json");
  auto e = ParseEnvelope(resp.body);
  ASSERT_TRUE(e.has_value()) << "not a Jaeger error envelope: " << resp.body;
  EXPECT_TRUE(e->data_null) << resp.body;
  EXPECT_EQ(e->code, code) << resp.body;
  EXPECT_NE(e->msg.find(msg_part), std::string::npos) << resp.body;
}

// ---- ParseTraceIdHex ----

TEST(QueryApi, ParseTraceIdHexFull32Digits) {
  TraceId id{};
  ASSERT_TRUE(ParseTraceIdHex("0af7651916cd43dd8448eb211c80319c", &id));
  EXPECT_EQ(HexOf(id), "0af7651916cd43dd8448eb211c80319c");
  ASSERT_TRUE(ParseTraceIdHex("ffffffffffffffffffffffffffffffff", &id));
  EXPECT_EQ(HexOf(id), "ffffffffffffffffffffffffffffffff");
}

TEST(QueryApi, ParseTraceIdHexPadsShortIdsOnTheLeft) {
  TraceId id{};
  ASSERT_TRUE(ParseTraceIdHex("1", &id));
  EXPECT_EQ(HexOf(id), "00000000000000000000000000000001");
  ASSERT_TRUE(ParseTraceIdHex("abc", &id));  // odd length
  EXPECT_EQ(HexOf(id), "00000000000000000000000000000abc");
  ASSERT_TRUE(ParseTraceIdHex("af7651916cd43dd8448eb211c80319c", &id));  // 31: leading 0 left out
  EXPECT_EQ(HexOf(id), "0af7651916cd43dd8448eb211c80319c");
}

TEST(QueryApi, ParseTraceIdHex64BitIds) {
  TraceId id{};
  ASSERT_TRUE(ParseTraceIdHex("8448eb211c80319c", &id));
  EXPECT_EQ(HexOf(id), "00000000000000008448eb211c80319c");
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(id[i], 0) << i;
  EXPECT_EQ(id[8], 0x84);
  EXPECT_EQ(id[15], 0x9c);
}

TEST(QueryApi, ParseTraceIdHexUppercase) {
  TraceId id{};
  ASSERT_TRUE(ParseTraceIdHex("0AF7651916CD43DD8448EB211C80319C", &id));
  EXPECT_EQ(HexOf(id), "0af7651916cd43dd8448eb211c80319c");
  ASSERT_TRUE(ParseTraceIdHex("aBcDeF", &id));
  EXPECT_EQ(HexOf(id), "00000000000000000000000000abcdef");
}

TEST(QueryApi, ParseTraceIdHexRejects) {
  for (std::string_view bad :
       {std::string_view(""), std::string_view("0af7651916cd43dd8448eb211c80319c0"),  // 33
        std::string_view("00000000000000000000000000000000000000001"),                // 41
        std::string_view("xyz"), std::string_view("0x1f"), std::string_view("12 3"),
        std::string_view("-1"), std::string_view("+1"), std::string_view("g"),
        std::string_view("0af7651916cd43dd8448eb211c80319z"), std::string_view(" 1"),
        std::string_view("1\n"), std::string_view("\0", 1)}) {
    TraceId id{};
    EXPECT_FALSE(ParseTraceIdHex(bad, &id)) << "'" << bad << "'";
  }
}

// ---- Handle ----

TEST(QueryApi, TraceFoundIs200WithJaegerJson) {
  Fixture f;
  const std::string hex = HexOf(testdata::MakeTraceId(0));
  net::HttpResponse resp = f.Do(Get("/api/traces/" + hex));
  ASSERT_EQ(resp.status, 200) << resp.body;
  EXPECT_EQ(resp.content_type, "application/json");
  ASSERT_EQ(f.reader.asked.size(), 1u);
  EXPECT_EQ(f.reader.asked[0], testdata::MakeTraceId(0));

  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(resp.body).get(root), simdjson::SUCCESS) << resp.body;
  simdjson::dom::array data;
  ASSERT_EQ(root["data"].get_array().get(data), simdjson::SUCCESS) << resp.body;
  ASSERT_EQ(data.size(), 1u);
  std::string_view trace_id;
  ASSERT_EQ(data.at(0)["traceID"].get_string().get(trace_id), simdjson::SUCCESS);
  EXPECT_EQ(trace_id, hex);
  simdjson::dom::array spans;
  ASSERT_EQ(data.at(0)["spans"].get_array().get(spans), simdjson::SUCCESS);
  EXPECT_EQ(spans.size(), 3u);
  EXPECT_TRUE(root["errors"].is_null()) << resp.body;
}

TEST(QueryApi, UppercaseAndShortIdsReachTheReaderPadded) {
  Fixture f;
  // A trace whose id is only its low 64 bits, as a Jaeger client would send it.
  TraceId low{};
  for (size_t i = 8; i < 16; ++i) low[i] = static_cast<uint8_t>(0xa0 + i);
  f.reader.stored.spans.trace_id[0] = low;
  const std::string hex = HexOf(low);  // 16 leading zeros
  net::HttpResponse resp = f.Do(Get("/api/traces/" + hex.substr(16)));
  EXPECT_EQ(resp.status, 200) << resp.body;
  EXPECT_NE(resp.body.find("\"" + hex + "\""), std::string::npos) << resp.body;

  std::string upper = HexOf(testdata::MakeTraceId(0));
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  resp = f.Do(Get("/api/traces/" + upper));
  EXPECT_EQ(resp.status, 200) << resp.body;
  ASSERT_EQ(f.reader.asked.size(), 2u);
  EXPECT_EQ(f.reader.asked[0], low);
  EXPECT_EQ(f.reader.asked[1], testdata::MakeTraceId(0));
}

TEST(QueryApi, QueryStringIsIgnored) {
  Fixture f;
  const std::string hex = HexOf(testdata::MakeTraceId(0));
  net::HttpResponse resp = f.Do(Get("/api/traces/" + hex + "?start=0&end=1"));
  EXPECT_EQ(resp.status, 200) << resp.body;
  ASSERT_EQ(f.reader.asked.size(), 1u);
  EXPECT_EQ(f.reader.asked[0], testdata::MakeTraceId(0));
}

TEST(QueryApi, TraceNotFoundIs404Envelope) {
  Fixture f;
  net::HttpResponse resp = f.Do(Get("/api/traces/00000000000000000000000000000042"));
  ExpectEnvelope(resp, 404, "trace not found");
  EXPECT_EQ(f.reader.asked.size(), 1u);
}

TEST(QueryApi, BadTraceIdIs400AndDoesNotReachTheReader) {
  Fixture f;
  for (const char* id : {"xyz", "", "0af7651916cd43dd8448eb211c80319c0", "12%2034", "abc/def"}) {
    net::HttpResponse resp = f.Do(Get(std::string("/api/traces/") + id));
    ExpectEnvelope(resp, 400, "malformed trace id");
  }
  EXPECT_TRUE(f.reader.asked.empty());
}

TEST(QueryApi, BadTraceIdIsQuotedSafely) {
  Fixture f;
  net::HttpResponse resp = f.Do(Get("/api/traces/\"}\\x"));
  ExpectEnvelope(resp, 400, "\"}\\x");
}

TEST(QueryApi, NonGetOnTracesIs405WithAllow) {
  Fixture f;
  const std::string hex = HexOf(testdata::MakeTraceId(0));
  for (const char* method : {"POST", "PUT", "DELETE"}) {
    net::HttpRequest req = Get("/api/traces/" + hex);
    req.method = method;
    net::HttpResponse resp = f.Do(req);
    ExpectEnvelope(resp, 405, "GET");
    bool allow = false;
    for (const auto& [k, v] : resp.headers) allow |= k == "Allow" && v == "GET";
    EXPECT_TRUE(allow) << method;
  }
  EXPECT_TRUE(f.reader.asked.empty());
}

TEST(QueryApi, ReaderErrorIs500EnvelopeWithoutTheStoresText) {
  Fixture f;
  f.reader.error = Status::Internal("Code: 62. DB::Exception: Syntax error: SELECT \"disk\"");
  net::HttpResponse resp = f.Do(Get("/api/traces/" + HexOf(testdata::MakeTraceId(0))));
  ExpectEnvelope(resp, 500, "internal error");
  EXPECT_EQ(resp.body.find("SELECT"), std::string::npos) << resp.body;
  EXPECT_EQ(resp.body.find("DB::Exception"), std::string::npos) << resp.body;
  // The store's own limits: a message for the client (a request that asks
  // for more rows than the limit is a bad request).
  f.reader.error = Status::Invalid("bad");
  ExpectEnvelope(f.Do(Get("/api/traces/1")), 400, "bad");
  f.reader.error = Status::Invalid("the answer is over the limit of 10 rows");
  ExpectEnvelope(f.Do(Get("/api/services")), 400, "over the limit");
}

TEST(QueryApi, RetryableReaderErrorsAreTheSharedStatuses) {
  Fixture f;
  f.reader.error = Status::Unavailable("store starting");
  ExpectEnvelope(f.Do(Get("/api/traces/1")), 503, "store starting");
  // The one mapping every listener answers with (net/http_status.h).
  f.reader.error = {StatusCode::kResourceExhausted, "busy"};
  ExpectEnvelope(f.Do(Get("/api/traces/1")), 429, "busy");
}

TEST(QueryApi, Healthz) {
  Fixture f;
  for (const char* target : {"/healthz", "/healthz?verbose=1"}) {
    net::HttpResponse resp = f.Do(Get(target));
    EXPECT_EQ(resp.status, 200) << target;
    EXPECT_EQ(resp.content_type, "text/plain");
    EXPECT_EQ(resp.body, "ok\n");
  }
  EXPECT_TRUE(f.reader.asked.empty());
}

TEST(QueryApi, UnknownPathIs404Envelope) {
  Fixture f;
  for (const char* target : {"/", "/api/trace/1", "/healthz/", "/api/nope", "/api/metrics/nope",
                             "/api/services/a", "/api/services/a/operations/x",
                             "/api/spanhouse/services", "/api/spanhouse/services/a/summary"}) {
    net::HttpResponse resp = f.Do(Get(target));
    ExpectEnvelope(resp, 404, std::string("not found: ") + target);
  }
  EXPECT_TRUE(f.reader.asked.empty());
}

TEST(QueryApi, SpanCountDecodesItsParameters) {
  Fixture f;
  net::HttpResponse resp =
      f.Do(Get("/api/spans/count?value=a%20b%2Bc&resource_attr=service.name&x=1"));
  EXPECT_EQ(resp.status, 200) << resp.body;
  EXPECT_EQ(resp.body, "{\"count\":42}");
  ASSERT_EQ(f.reader.counted.size(), 1u);
  EXPECT_EQ(f.reader.counted[0].first, "service.name");
  EXPECT_EQ(f.reader.counted[0].second, "a b+c");
  resp = f.Do(Get("/api/spans/count?resource_attr=k&value="));  // empty value is a value
  EXPECT_EQ(resp.status, 200) << resp.body;
  resp = f.Do(Get("/api/spans/count?attr=http.route&value=%2Fcart"));  // a span attribute
  EXPECT_EQ(resp.status, 200) << resp.body;
  ASSERT_EQ(f.reader.counted.size(), 3u);
  EXPECT_EQ(f.reader.counted[2].first, "http.route");
  EXPECT_EQ(f.reader.counted[2].second, "/cart");
  // A user-field path, with a value or (presence) without one.
  resp = f.Do(Get("/api/spans/count?user_field=app.channel&value=android"));
  EXPECT_EQ(resp.status, 200) << resp.body;
  resp = f.Do(Get("/api/spans/count?user_field=app.order_id"));
  EXPECT_EQ(resp.status, 200) << resp.body;
  ASSERT_EQ(f.reader.counted.size(), 5u);
  EXPECT_EQ(f.reader.counted[3], (std::pair<std::string, std::string>{"app.channel", "android"}));
  EXPECT_EQ(f.reader.counted[4], (std::pair<std::string, std::string>{"app.order_id", ""}));
  EXPECT_EQ(f.reader.owners, (std::vector<SpanReader::AttrOwner>{
                                 SpanReader::AttrOwner::kResource, SpanReader::AttrOwner::kResource,
                                 SpanReader::AttrOwner::kSpan, SpanReader::AttrOwner::kUserField,
                                 SpanReader::AttrOwner::kUserField}));
}

TEST(QueryApi, SpanCountWithoutParametersIs400) {
  Fixture f;
  for (const char* target : {"/api/spans/count", "/api/spans/count?resource_attr=k",
                             "/api/spans/count?value=v", "/api/spans/count?resource_attr=&value=v",
                             "/api/spans/count?attr=&value=v", "/api/spans/count?attr=k"}) {
    ExpectEnvelope(f.Do(Get(target)), 400, "resource_attr");
  }
  ExpectEnvelope(f.Do(Get("/api/spans/count?resource_attr=k&value=%zz")), 400, "percent-encoding");
  EXPECT_TRUE(f.reader.counted.empty());
}

TEST(QueryApi, SpanCountReaderErrors) {
  Fixture f;
  f.reader.error = Status::Internal("boom");
  ExpectEnvelope(f.Do(Get("/api/spans/count?resource_attr=k&value=v")), 500, "internal error");
  f.reader.error = Status::Unavailable("later");
  ExpectEnvelope(f.Do(Get("/api/spans/count?resource_attr=k&value=v")), 503, "later");
}

TEST(QueryApi, AdminRoutesAre404WithoutHooks) {
  Fixture f;
  ExpectEnvelope(f.Do(Get("/metrics")), 404, "not found: /metrics");
  ExpectEnvelope(f.Do(Get("/debug/fail")), 404, "not found: /debug/fail");
}

TEST(QueryApi, AdminHooksServeMetricsAndDebug) {
  int metrics_calls = 0;
  std::vector<std::string> debug_targets;
  AdminHooks hooks;
  hooks.metrics = [&] {
    ++metrics_calls;
    return std::string("spanhouse_spans_total 7\n");
  };
  hooks.debug = [&](const net::HttpRequest& req, net::HttpResponse& resp) {
    debug_targets.push_back(req.target);
    resp.status = 202;
    resp.body = "armed";
  };
  Fixture f(std::move(hooks));
  net::HttpResponse resp = f.Do(Get("/metrics"));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, "spanhouse_spans_total 7\n");
  EXPECT_EQ(resp.content_type.rfind("text/plain", 0), 0u) << resp.content_type;
  EXPECT_EQ(metrics_calls, 1);

  resp = f.Do(Get("/debug/fail_inserts?n=3"));
  EXPECT_EQ(resp.status, 202);
  EXPECT_EQ(resp.body, "armed");
  ASSERT_EQ(debug_targets.size(), 1u);
  EXPECT_EQ(debug_targets[0], "/debug/fail_inserts?n=3");
  // "/debug" without the slash, and the query routes, are not the hook's.
  ExpectEnvelope(f.Do(Get("/debug")), 404, "not found");
  EXPECT_EQ(f.Do(Get("/healthz")).body, "ok\n");
  EXPECT_EQ(debug_targets.size(), 1u);
}

TEST(QueryApi, ReadyzFollowsTheHook) {
  std::string why = "starting";
  AdminHooks hooks;
  hooks.not_ready = [&] { return why; };
  Fixture f(std::move(hooks));
  net::HttpResponse resp = f.Do(Get("/readyz"));
  EXPECT_EQ(resp.status, 503);
  EXPECT_EQ(resp.body, "not ready: starting\n");
  EXPECT_EQ(f.Do(Get("/healthz")).status, 200);  // alive all the same
  why.clear();
  resp = f.Do(Get("/readyz"));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, "ready\n");
  EXPECT_EQ(resp.content_type, "text/plain");
  why = "shutting down";
  EXPECT_EQ(f.Do(Get("/readyz")).status, 503);
}

TEST(QueryApi, ReadyzAddsThePeersHealthWithoutChangingTheVerdict) {
  std::string why;
  AdminHooks hooks;
  hooks.not_ready = [&] { return why; };
  hooks.ready_detail = [] { return std::string("peers: b up, c down 12 s"); };
  Fixture f(std::move(hooks));
  net::HttpResponse resp = f.Do(Get("/readyz"));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, "ready\npeers: b up, c down 12 s\n");
  why = "starting";
  resp = f.Do(Get("/readyz"));
  EXPECT_EQ(resp.status, 503);
  EXPECT_EQ(resp.body, "not ready: starting\npeers: b up, c down 12 s\n");
}

// The UI hook sees what no route took, outside /api only; when it declines,
// the usual 404 envelope follows.
TEST(QueryApi, UiHookTakesUnroutedPathsOutsideApi) {
  std::vector<std::string> asked;
  AdminHooks hooks;
  hooks.ui = [&](const net::HttpRequest& req, net::HttpResponse& resp) {
    asked.emplace_back(req.path());
    if (req.path() != "/") return false;
    resp.content_type = "text/html";
    resp.body = "<!doctype html>";
    return true;
  };
  Fixture f(std::move(hooks));
  net::HttpResponse resp = f.Do(Get("/?x=1"));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, "<!doctype html>");
  EXPECT_EQ(resp.content_type, "text/html");
  ExpectEnvelope(f.Do(Get("/nowhere")), 404, "not found: /nowhere");
  ExpectEnvelope(f.Do(Get("/api/nowhere")), 404, "not found: /api/nowhere");
  EXPECT_EQ(f.Do(Get("/healthz")).body, "ok\n");
  EXPECT_EQ(f.Do(Get("/api/traces/zz")).status, 400);
  EXPECT_EQ(asked, (std::vector<std::string>{"/", "/nowhere"}));
}

TEST(QueryApi, ReadyzWithoutHookIsReady) {
  Fixture f;
  EXPECT_EQ(f.Do(Get("/readyz")).status, 200);
}

// ---- the Jaeger query API and the metrics API ----

simdjson::dom::element ParseOk(simdjson::dom::parser& parser, const net::HttpResponse& resp) {
  EXPECT_EQ(resp.status, 200) << resp.body;
  EXPECT_EQ(resp.content_type, "application/json");
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(resp.body).get(root), simdjson::SUCCESS) << resp.body;
  return root;
}

// The envelope's members other than data, as Jaeger writes them.
void ExpectEnvelopeTail(simdjson::dom::element root, int64_t total, const std::string& body) {
  int64_t v = -1;
  EXPECT_EQ(root["total"].get_int64().get(v), simdjson::SUCCESS) << body;
  EXPECT_EQ(v, total) << body;
  EXPECT_EQ(root["limit"].get_int64().get(v), simdjson::SUCCESS) << body;
  EXPECT_EQ(v, 0) << body;
  EXPECT_EQ(root["offset"].get_int64().get(v), simdjson::SUCCESS) << body;
  EXPECT_EQ(v, 0) << body;
  EXPECT_TRUE(root["errors"].is_null()) << body;
}

TEST(QueryApi, ServicesAndOperationNames) {
  Fixture f;
  f.reader.services = {"cart", "checkout \"eu\""};
  net::HttpResponse resp = f.Do(Get("/api/services"));
  EXPECT_EQ(resp.body,
            R"({"data":["cart","checkout \"eu\""],"total":2,"limit":0,"offset":0,"errors":null})");
  f.reader.ops = {{"GET /a", 2}, {"GET /a", 3}, {"SELECT", 3}};
  resp = f.Do(Get("/api/services/checkout%20eu/operations"));
  EXPECT_EQ(resp.body,
            R"({"data":["GET /a","SELECT"],"total":2,"limit":0,"offset":0,"errors":null})");
  ASSERT_EQ(f.reader.op_requests.size(), 1u);
  EXPECT_EQ(f.reader.op_requests[0].service, "checkout eu");
  EXPECT_TRUE(f.reader.op_requests[0].any_kind);
  ExpectEnvelope(f.Do(Get("/api/services/%zz/operations")), 400, "malformed path segment");
}

TEST(QueryApi, OperationsWithSpanKinds) {
  Fixture f;
  f.reader.ops = {{"GET /a", 2}, {"op", 0}, {"q", 5}};
  net::HttpResponse resp = f.Do(Get("/api/operations?service=cart&spanKind=server"));
  simdjson::dom::parser parser;
  simdjson::dom::element root = ParseOk(parser, resp);
  ExpectEnvelopeTail(root, 3, resp.body);
  EXPECT_EQ(resp.body.substr(0, resp.body.find(",\"total\"")),
            R"({"data":[{"name":"GET /a","spanKind":"server"},{"name":"op","spanKind":""},)"
            R"({"name":"q","spanKind":"consumer"}])");
  ASSERT_EQ(f.reader.op_requests.size(), 1u);
  EXPECT_FALSE(f.reader.op_requests[0].any_kind);
  EXPECT_EQ(f.reader.op_requests[0].kind, 2);
  EXPECT_EQ(f.Do(Get("/api/operations?service=cart")).status, 200);
  EXPECT_TRUE(f.reader.op_requests[1].any_kind);
  ExpectEnvelope(f.Do(Get("/api/operations")), 400, "parameter 'service' is required");
  ExpectEnvelope(f.Do(Get("/api/operations?service=a&spanKind=server'--")), 400,
                 "unsupported span kind");
  EXPECT_EQ(f.reader.op_requests.size(), 2u);
}

TEST(QueryApi, SearchPassesTheParsedQueryAndKeepsItsOrder) {
  Fixture f;
  f.reader.stored = testdata::SampleBatch(3);
  f.reader.found = {testdata::MakeTraceId(2), testdata::MakeTraceId(0)};
  net::HttpResponse resp =
      f.Do(Get("/api/traces?service=frontend&operation=op&tag=error:true&minDuration=1ms&limit=2"
               "&lookback=1h"));
  simdjson::dom::parser parser;
  simdjson::dom::element root = ParseOk(parser, resp);
  ASSERT_EQ(f.reader.searches.size(), 1u);
  const TraceQuery& q = f.reader.searches[0];
  EXPECT_EQ(q.service, "frontend");
  EXPECT_EQ(q.operation, "op");
  EXPECT_EQ(q.limit, 2u);
  EXPECT_EQ(q.min_duration_ns, 1000000u);
  EXPECT_EQ(q.end_ns, kNowNs);
  EXPECT_EQ(q.start_ns, kNowNs - 3600ull * 1000000000ull);
  ASSERT_EQ(q.tags.size(), 1u);
  EXPECT_EQ(q.tags[0].key, "error");
  // The traces come back in the reader's order (newest first), whole.
  simdjson::dom::array data;
  ASSERT_EQ(root["data"].get_array().get(data), simdjson::SUCCESS);
  ASSERT_EQ(data.size(), 2u);
  std::string_view id;
  ASSERT_EQ(data.at(0)["traceID"].get_string().get(id), simdjson::SUCCESS);
  EXPECT_EQ(id, HexOf(testdata::MakeTraceId(2)));
  ASSERT_EQ(data.at(1)["traceID"].get_string().get(id), simdjson::SUCCESS);
  EXPECT_EQ(id, HexOf(testdata::MakeTraceId(0)));
  ASSERT_EQ(f.reader.asked_many.size(), 1u);
  EXPECT_EQ(f.reader.asked_many[0], f.reader.found);
  // Nothing found: an empty list, not an error.
  f.reader.found.clear();
  resp = f.Do(Get("/api/traces?service=nobody"));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, R"({"data":[],"total":0,"limit":0,"offset":0,"errors":null})");
}

TEST(QueryApi, SeveralTraceIdsNameTheMissingOnesInErrors) {
  Fixture f;
  f.reader.stored = testdata::SampleBatch(2);
  const std::string a = HexOf(testdata::MakeTraceId(1));
  const std::string missing = "00000000000000000000000000000abc";
  net::HttpResponse resp = f.Do(Get("/api/traces?traceID=" + a + "&traceID=abc"));
  simdjson::dom::parser parser;
  simdjson::dom::element root = ParseOk(parser, resp);
  simdjson::dom::array data;
  ASSERT_EQ(root["data"].get_array().get(data), simdjson::SUCCESS);
  ASSERT_EQ(data.size(), 1u);
  simdjson::dom::array errors;
  ASSERT_EQ(root["errors"].get_array().get(errors), simdjson::SUCCESS) << resp.body;
  ASSERT_EQ(errors.size(), 1u);
  std::string_view v;
  ASSERT_EQ(errors.at(0)["traceID"].get_string().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, missing);
  ASSERT_EQ(errors.at(0)["msg"].get_string().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, "trace not found");
  EXPECT_TRUE(f.reader.searches.empty());  // ids, not a search
}

TEST(QueryApi, HostileSearchParametersAre400BeforeTheReader) {
  Fixture f;
  for (const char* target :
       {"/api/traces?service=a&limit=1000000", "/api/traces?service=a&limit=-1",
        "/api/traces?service=a&start=1%27%20OR%201%3D1", "/api/traces?service=a&end=--",
        "/api/traces?service=a&minDuration=-5ms", "/api/traces?service=a&maxDuration=1%2F*",
        "/api/traces?service=a&tags=%7B%22a%22%3A1%7D", "/api/traces?service=a&tag=nocolon",
        "/api/traces?traceID=%27%3B--", "/api/traces?service=a&start=%E2%91%A0", "/api/traces",
        "/api/dependencies?endTs=-1", "/api/dependencies?lookback=1d",
        "/api/metrics/latencies?service=a&quantile=0.9%27", "/api/metrics/calls",
        "/api/metrics/calls?service=a&step=1e3", "/api/metrics/errors?service=a&lookback=-1",
        "/api/spanhouse/services/summary?lookback=%27",
        "/api/spanhouse/services/a/operations/summary?spanKind=%2F*"}) {
    net::HttpResponse resp = f.Do(Get(target));
    ExpectEnvelope(resp, 400, "");
    EXPECT_EQ(resp.body.find("SELECT"), std::string::npos) << target;
  }
  EXPECT_TRUE(f.reader.searches.empty());
  EXPECT_TRUE(f.reader.asked_many.empty());
  EXPECT_TRUE(f.reader.dep_ranges.empty());
  EXPECT_TRUE(f.reader.red_queries.empty());
  EXPECT_TRUE(f.reader.summary_queries.empty());
}

TEST(QueryApi, DependenciesAsJaegerFilteredByService) {
  Fixture f;
  f.reader.links = {{"a", "b", 3}, {"b", "c", 1}, {"c", "d", 7}};
  net::HttpResponse resp = f.Do(Get("/api/dependencies?endTs=1700000000000&lookback=3600000"));
  EXPECT_EQ(resp.body,
            R"({"data":[{"parent":"a","child":"b","callCount":3},{"parent":"b","child":"c",)"
            R"("callCount":1},{"parent":"c","child":"d","callCount":7}],"total":0,"limit":0,)"
            R"("offset":0,"errors":null})");
  ASSERT_EQ(f.reader.dep_ranges.size(), 1u);
  EXPECT_EQ(f.reader.dep_ranges[0], (std::pair<uint64_t, uint64_t>{1699996400, 1700000000}));
  resp = f.Do(Get("/api/dependencies?service=b"));
  EXPECT_EQ(resp.body.find("\"d\""), std::string::npos) << resp.body;
  EXPECT_NE(resp.body.find("\"parent\":\"a\""), std::string::npos) << resp.body;
  // Jaeger's defaults: now and 24 h.
  EXPECT_EQ(f.reader.dep_ranges[1],
            (std::pair<uint64_t, uint64_t>{1700000000 - 86400, 1700000000}));
}

TEST(QueryApi, MetricsAsJaegerMetricFamilies) {
  Fixture f;
  // end 1700000000 rounds down to the minute 1699999980; 3 points a minute apart.
  RedSeries s{"cart", "", {{1699999920, 30, 3, 12.5}, {1699999980, 60, 0, 20}}};
  f.reader.series = {s};
  net::HttpResponse resp =
      f.Do(Get("/api/metrics/calls?service=cart&lookback=120000&step=60000&ratePer=60000"));
  EXPECT_EQ(resp.body,
            R"({"name":"service_call_rate","type":"GAUGE","help":"calls/sec, grouped by service",)"
            R"("metrics":[{"labels":[{"name":"service_name","value":"cart"}],"metricPoints":[)"
            R"({"gaugeValue":{"doubleValue":0},"timestamp":"2023-11-14T22:11:00Z"},)"
            R"({"gaugeValue":{"doubleValue":0.5},"timestamp":"2023-11-14T22:12:00Z"},)"
            R"({"gaugeValue":{"doubleValue":1},"timestamp":"2023-11-14T22:13:00Z"}]}]})");
  ASSERT_EQ(f.reader.red_queries.size(), 1u);
  EXPECT_EQ(f.reader.red_queries[0].end_s, 1699999980u);
  EXPECT_FALSE(f.reader.red_queries[0].want_quantile);

  resp = f.Do(Get("/api/metrics/errors?service=cart&lookback=120000&ratePer=60000"));
  EXPECT_NE(resp.body.find(R"("name":"service_error_rate")"), std::string::npos) << resp.body;
  EXPECT_NE(
      resp.body.find(R"({"gaugeValue":{"doubleValue":0.1},"timestamp":"2023-11-14T22:12:00Z"},)"
                     R"({"gaugeValue":{"doubleValue":0},"timestamp":"2023-11-14T22:13:00Z"})"),
      std::string::npos)
      << resp.body;

  f.reader.series[0].operation = "GET /cart";
  resp = f.Do(Get("/api/metrics/latencies?service=cart&quantile=0.95&groupByOperation=true"));
  EXPECT_NE(resp.body.find(R"("name":"service_operation_latencies")"), std::string::npos);
  EXPECT_NE(resp.body.find(R"("help":"0.95th quantile latency, grouped by service & operation")"),
            std::string::npos)
      << resp.body;
  EXPECT_NE(resp.body.find(R"([{"name":"service_name","value":"cart"},{"name":"operation",)"
                           R"("value":"GET /cart"}])"),
            std::string::npos)
      << resp.body;
  EXPECT_NE(resp.body.find(R"({"doubleValue":12.5})"), std::string::npos) << resp.body;
  EXPECT_TRUE(f.reader.red_queries.back().want_quantile);

  resp = f.Do(Get("/api/metrics/minstep"));
  EXPECT_EQ(resp.body, R"({"data":60000,"total":0,"limit":0,"offset":0,"errors":null})");
}

TEST(QueryApi, Summaries) {
  Fixture f;
  f.reader.summary = {{"cart", "", 0, 7200, 72, 1.5, 9.25, 30}};
  net::HttpResponse resp = f.Do(Get("/api/spanhouse/services/summary?lookback=3600000"));
  EXPECT_EQ(resp.body,
            R"({"data":[{"service":"cart","rate_per_s":2,"error_rate":0.01,"p50_ms":1.5,)"
            R"("p95_ms":9.25,"p99_ms":30,"calls":7200,"errors":72}],"total":1,"limit":0,)"
            R"("offset":0,"errors":null})");
  ASSERT_EQ(f.reader.summary_queries.size(), 1u);
  EXPECT_EQ(f.reader.summary_queries[0].service, "");
  EXPECT_EQ(f.reader.summary_queries[0].to_s, 1700000000u);
  EXPECT_EQ(f.reader.summary_queries[0].from_s, 1700000000u - 3600);

  f.reader.summary = {{"cart", "GET /a", 2, 3600, 0, 1, 2, 3}};
  resp = f.Do(Get("/api/spanhouse/services/cart%2Feu/operations/summary?lookback=3600000"));
  EXPECT_NE(resp.body.find(R"({"service":"cart","operation":"GET /a","span_kind":"server",)"
                           R"("rate_per_s":1,"error_rate":0,)"),
            std::string::npos)
      << resp.body;
  EXPECT_EQ(f.reader.summary_queries[1].service, "cart/eu");
}

}  // namespace
}  // namespace spanhouse::query

namespace spanhouse::query {
namespace {

// Imports run on workers of their own: several at once, while the
// listener's one thread goes on answering everything else; past what the
// workers and their queue hold, 503 + Retry-After.
TEST(QueryApi, ImportsRunOnWorkersSeveralAtOnceWithoutHoldingTheListener) {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  int most_inside = 0;
  bool release = false;
  AdminHooks hooks;
  hooks.admin = [&](const net::HttpRequest& req, net::HttpResponse& resp) {
    std::unique_lock lock(mu);
    if (req.path() != "/api/admin/import") {
      resp.body = "other";
      return;
    }
    most_inside = std::max(most_inside, ++inside);
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    --inside;
    resp.body = "imported";
  };
  FakeReader reader;
  QueryApiOptions o;
  o.address = "127.0.0.1:0";
  o.threads = 1;
  o.import_workers = 2;  // and 4 waiting
  QueryApi api(o, reader, std::move(hooks));
  ASSERT_TRUE(api.Start().ok());
  net::HttpUrl url;
  std::string why;
  ASSERT_TRUE(net::ParseHttpUrl("http://127.0.0.1:" + std::to_string(api.port()), &url, &why));
  // Imports sent one after another, each on a thread of its own.
  std::vector<std::future<net::HttpResult>> answers;
  auto send = [&] {
    answers.push_back(std::async(std::launch::async, [&url] {
      net::HttpClient c(url, net::HttpClientOptions{});
      std::string body = "{}\n";
      net::HttpResult r;
      c.PostTo("/api/admin/import", &body, {{"Content-Type", "application/x-ndjson"}}, &r);
      return r;
    }));
  };
  for (int i = 0; i < 2; ++i) send();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return inside == 2; }));
  }
  // The listener answers other requests meanwhile, admin ones included.
  net::HttpClient c(url, net::HttpClientOptions{});
  net::HttpResult r;
  ASSERT_TRUE(c.Get("/healthz", &r));
  EXPECT_EQ(r.status, 200);
  ASSERT_TRUE(c.Get("/api/admin/read-source", &r));
  EXPECT_EQ(r.body, "other");
  // Two run and four wait; the next ones are refused at once. (One not
  // answered within a second was queued: another is sent.)
  for (int i = 0; i < 4; ++i) send();
  std::vector<net::HttpResult> done;
  for (int tries = 0; tries < 20 && done.empty(); ++tries) {
    send();
    if (answers.back().wait_for(std::chrono::seconds(1)) == std::future_status::ready) {
      done.push_back(answers.back().get());
      answers.pop_back();
    }
  }
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& a : answers) done.push_back(a.get());
  int imported = 0;
  int refused = 0;
  for (const auto& res : done) {
    if (res.status == 200 && res.body == "imported") {
      ++imported;
    } else {
      ++refused;
      EXPECT_EQ(res.status, 503) << res.error;
      EXPECT_NE(res.body.find("too many imports waiting"), std::string::npos) << res.body;
      EXPECT_EQ(res.retry_after_s, 1);
    }
  }
  EXPECT_EQ(imported, 6);
  EXPECT_GE(refused, 1);
  EXPECT_EQ(most_inside, 2);
  api.Stop();
}

}  // namespace
}  // namespace spanhouse::query
