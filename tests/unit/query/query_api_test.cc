// Tests for the query API's handler (query/query_api.h), called directly
// with a fake SpanReader: trace id parsing, the Jaeger JSON answers and error
// envelopes, methods, and /healthz.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../testdata/sample_batch.h"
#include "common/status.h"
#include "model/span_batch.h"
#include "net/http_server.h"
#include "query/query_api.h"
#include "query/span_reader.h"

namespace spanhouse::query {
namespace {

// Answers GetTrace from a prepared batch (only the spans of the asked trace),
// kNotFound when it has none, or a fixed error; remembers what was asked.
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
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override {
    counted.emplace_back(key, value);
    owners.push_back(owner);
    if (!error.ok()) return error;
    *count = 42;
    return Status::Ok();
  }

  SpanBatch stored;
  Status error;
  std::vector<TraceId> asked;
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

struct Fixture {
  explicit Fixture(AdminHooks hooks = {}) : api(Options(), reader, std::move(hooks)) {
    reader.stored = testdata::SampleBatch(1);
  }
  static QueryApiOptions Options() {
    QueryApiOptions o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
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

TEST(QueryApi, ReaderErrorIs500Envelope) {
  Fixture f;
  f.reader.error = Status::Internal("chdb: \"disk\" on fire");
  net::HttpResponse resp = f.Do(Get("/api/traces/" + HexOf(testdata::MakeTraceId(0))));
  ExpectEnvelope(resp, 500, "chdb: \"disk\" on fire");
  f.reader.error = Status::Invalid("bad");
  EXPECT_EQ(f.Do(Get("/api/traces/1")).status, 500);
}

TEST(QueryApi, RetryableReaderErrorIs503Envelope) {
  Fixture f;
  f.reader.error = Status::Unavailable("store starting");
  ExpectEnvelope(f.Do(Get("/api/traces/1")), 503, "store starting");
  f.reader.error = {StatusCode::kResourceExhausted, "busy"};
  ExpectEnvelope(f.Do(Get("/api/traces/1")), 503, "busy");
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
  for (const char* target : {"/", "/api/traces", "/api/trace/1", "/healthz/", "/api/services"}) {
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
  for (const char* target :
       {"/api/spans/count", "/api/spans/count?resource_attr=k", "/api/spans/count?value=v",
        "/api/spans/count?resource_attr=&value=v", "/api/spans/count?resource_attr=k&value=%zz",
        "/api/spans/count?attr=&value=v", "/api/spans/count?attr=k"}) {
    ExpectEnvelope(f.Do(Get(target)), 400, "resource_attr");
  }
  EXPECT_TRUE(f.reader.counted.empty());
}

TEST(QueryApi, SpanCountReaderErrors) {
  Fixture f;
  f.reader.error = Status::Internal("boom");
  ExpectEnvelope(f.Do(Get("/api/spans/count?resource_attr=k&value=v")), 500, "boom");
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

}  // namespace
}  // namespace spanhouse::query
