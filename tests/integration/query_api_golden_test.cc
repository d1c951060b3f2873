// Golden tests of the query API over real chDB: a store filled by the loadgen
// generator with a fixed seed (plus a trace whose names need escaping), then
// every endpoint answered by QueryApi over ChdbSpanReader, its JSON checked
// against values computed here from the generated spans themselves (not by
// the reader's SQL): services, operations, trace searches by service,
// operation, span and resource attributes, user fields, status, kind,
// duration and time, lookups by id, dependencies, Jaeger's SPM metrics and
// spanhouse's summaries. Hostile parameters reach the engine only as bound
// values, and the reader's row limits answer 400.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "engine.h"
#include "query/jaeger_json.h"
#include "query/query_api.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::storage {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;

constexpr uint64_t kNsPerS = 1000000000;
constexpr uint64_t kSeed = 20240601;
constexpr size_t kTraces = 2400;
constexpr uint64_t kSpacingNs = 500000000;  // 2 traces a second: 20 minutes
// A service and operation names that need escaping in SQL, TSV and JSON.
const std::string kWeirdService = "we'ird\t\"svc\" \\ \xC3\xBC";
const std::string kWeirdOperation = "op\nwith 'quotes' -- and /* comments */";

// Percent-encodes everything but letters and digits.
std::string Enc(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string Str(element e) {
  return std::string(std::string_view(e));
}

std::vector<std::string> Strings(element e) {
  std::vector<std::string> out;
  for (element v : e.get_array()) out.emplace_back(std::string_view(v));
  return out;
}

double Number(element e) {
  double d = 0;
  if (e.get_double().get(d) == simdjson::SUCCESS) return d;
  int64_t i = 0;
  EXPECT_EQ(e.get_int64().get(i), simdjson::SUCCESS) << simdjson::to_string(e);
  return static_cast<double>(i);
}

class QueryGolden : public ::testing::Test {
 protected:
  static inline Capabilities caps;
  static inline SpanBatch all;
  static inline uint64_t base_s = 0;  // the first root starts at this minute
  static inline uint64_t end_s = 0;   // a minute after the last span: the metrics' endTs
  static inline uint64_t now_ns = 0;  // the API's clock
  static inline std::unique_ptr<ChdbSpanReader> reader;
  static inline std::unique_ptr<query::QueryApi> api;

  static void SetUpTestSuite() {
    Reset();
    ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
    const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
    base_s = (now - 3600) / 60 * 60;
    loadgen::TraceGenerator gen(loadgen::CorpusOptions{kSeed});
    SpanBatch first;
    SpanBatch second;
    for (size_t t = 0; t < kTraces; ++t) {
      gen.AppendTrace(base_s * kNsPerS + t * kSpacingNs, t < kTraces / 2 ? &first : &second);
    }
    // A trace of hand-made spans under names that need escaping.
    SpanBatch weird = testdata::SampleBatch(1, (base_s + 60) * kNsPerS);
    weird.resource_attrs.value[0] = weird.AddString(kWeirdService);
    weird.ResolveServiceName(0);
    weird.spans.name[0] = weird.AddString(kWeirdOperation);
    // An id ending in zero bytes (a FixedString compared with a String
    // loses them).
    for (TraceId& id : weird.spans.trace_id) id[14] = id[15] = 0;
    for (const SpanBatch* b : {&first, &second, &weird}) {
      all.Append(*b);
      WriteAll(*b, caps);
    }
    end_s = base_s + 25 * 60;
    now_ns = end_s * kNsPerS;
    ASSERT_TRUE(ComputeDependencies(*Engine::conn, static_cast<uint32_t>(base_s - 60),
                                    static_cast<uint32_t>(end_s))
                    .ok());
    reader = std::make_unique<ChdbSpanReader>(*Engine::conn, caps);
    api = std::make_unique<query::QueryApi>(Options(), *reader);
  }
  static void TearDownTestSuite() {
    api.reset();
    reader.reset();
  }

  static query::QueryApiOptions Options() {
    query::QueryApiOptions o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
    o.now_ns = [] { return now_ns; };
    return o;
  }

  static net::HttpResponse Get(query::QueryApi& to, const std::string& target) {
    net::HttpRequest req;
    req.method = "GET";
    req.target = target;
    net::HttpResponse resp;
    to.Handle(req, resp);
    return resp;
  }
  // GET `target`, asserting a 200 with JSON; the parsed document.
  element Ok(const std::string& target) {
    last_ = Get(*api, target);
    EXPECT_EQ(last_.status, 200) << target << ": " << last_.body;
    EXPECT_EQ(last_.content_type, "application/json");
    element root;
    EXPECT_EQ(parser_.parse(last_.body).get(root), simdjson::SUCCESS) << target << last_.body;
    return root;
  }

  // ---- expectations from the generated spans ----
  static std::string WeirdTraceId() {
    TraceId id = testdata::MakeTraceId(0);
    id[14] = id[15] = 0;
    return ToHex(id);
  }
  static std::string Service(uint32_t i) {
    return std::string(all.Str(all.resources.service_name[all.spans.resource[i]]));
  }
  // The value of attribute `key` on span i, or on its resource.
  static std::optional<std::string> SpanAttr(uint32_t i, std::string_view key) {
    for (uint32_t a = all.spans.attrs[i].begin; a < all.spans.attrs[i].end; ++a) {
      if (all.Str(all.span_attrs.key[a]) == key)
        return std::string(all.Str(all.span_attrs.value[a]));
    }
    return std::nullopt;
  }
  static std::optional<std::string> ResourceAttr(uint32_t i, std::string_view key) {
    const Range r = all.resources.attrs[all.spans.resource[i]];
    for (uint32_t a = r.begin; a < r.end; ++a) {
      if (all.Str(all.resource_attrs.key[a]) == key) {
        return std::string(all.Str(all.resource_attrs.value[a]));
      }
    }
    return std::nullopt;
  }
  static bool HasAttr(uint32_t i, std::string_view key, std::string_view value) {
    return SpanAttr(i, key) == std::string(value) || ResourceAttr(i, key) == std::string(value);
  }
  static uint64_t Minute(uint32_t i) { return all.spans.start_ns[i] / kNsPerS / 60 * 60; }

  // The traces with a span of `service` starting in [start, end] for which
  // `match` holds, newest matching span first (then by id), at most `limit`.
  template <typename Pred>
  static std::vector<std::string> ExpectedSearch(const std::string& service, uint64_t start,
                                                 uint64_t end, size_t limit, Pred match) {
    std::map<std::string, uint64_t> newest;
    for (uint32_t i = 0; i < all.span_count(); ++i) {
      const uint64_t t = all.spans.start_ns[i];
      if (Service(i) != service || t < start || t > end || !match(i)) continue;
      uint64_t& n = newest[ToHex(all.spans.trace_id[i])];
      n = std::max(n, t);
    }
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& [id, t] : newest) order.emplace_back(t, id);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::vector<std::string> ids;
    for (size_t k = 0; k < order.size() && k < limit; ++k) ids.push_back(order[k].second);
    return ids;
  }

  // The Jaeger JSON of one generated trace, as the renderer writes it.
  static std::string ExpectedTraceJson(const std::string& hex) {
    std::vector<uint32_t> rows;
    for (uint32_t i = 0; i < all.span_count(); ++i) {
      if (ToHex(all.spans.trace_id[i]) == hex) rows.push_back(i);
    }
    SpanBatch one;
    one.AppendSpans(all, rows.data(), rows.size());
    simdjson::dom::parser p;
    element root;
    EXPECT_EQ(p.parse(query::RenderJaegerTraces(one)).get(root), simdjson::SUCCESS);
    return simdjson::to_string(root["data"].at(0));
  }

  // Checks a /api/traces answer: exactly `want` (in order), each trace whole
  // and equal to its generated spans, the envelope and shapes as Jaeger's.
  void ExpectTraces(const std::string& target, const std::vector<std::string>& want) {
    element root = Ok(target);
    array data;
    ASSERT_EQ(root["data"].get_array().get(data), simdjson::SUCCESS) << last_.body;
    std::vector<std::string> got;
    for (element t : data) got.emplace_back(std::string_view(t["traceID"]));
    EXPECT_EQ(got, want) << target;
    if (got != want) {
      for (size_t k = 0; k < std::max(got.size(), want.size()); ++k) {
        const std::string g = k < got.size() ? got[k] : "-";
        const std::string w = k < want.size() ? want[k] : "-";
        if (g != w)
          ADD_FAILURE() << "first difference at " << k << ": got " << g << " want " << w
                        << " (sizes " << got.size() << ", " << want.size() << ")";
        if (g != w) break;
      }
    }
    EXPECT_TRUE(root["errors"].is_null()) << target;
    for (element t : data) {
      const std::string id = Str(t["traceID"]);
      EXPECT_EQ(simdjson::to_string(t), ExpectedTraceJson(id)) << target << " trace " << id;
      ExpectTraceShape(t);
    }
  }

  // The members and types of a Jaeger trace, its spans and processes.
  static void ExpectTraceShape(element t) {
    EXPECT_TRUE(t["traceID"].is_string());
    EXPECT_TRUE(t["warnings"].is_null());
    array spans;
    ASSERT_EQ(t["spans"].get_array().get(spans), simdjson::SUCCESS);
    ASSERT_GT(spans.size(), 0u);
    simdjson::dom::object processes;
    ASSERT_EQ(t["processes"].get_object().get(processes), simdjson::SUCCESS);
    for (element s : spans) {
      std::string_view v;
      ASSERT_EQ(s["traceID"].get_string().get(v), simdjson::SUCCESS);
      EXPECT_EQ(v.size(), 32u);
      ASSERT_EQ(s["spanID"].get_string().get(v), simdjson::SUCCESS);
      EXPECT_EQ(v.size(), 16u);
      EXPECT_TRUE(s["flags"].is_uint64() || s["flags"].is_int64());
      EXPECT_TRUE(s["operationName"].is_string());
      EXPECT_TRUE(s["references"].is_array());
      EXPECT_TRUE(s["startTime"].is_uint64() || s["startTime"].is_int64());
      EXPECT_TRUE(s["duration"].is_uint64() || s["duration"].is_int64());
      EXPECT_TRUE(s["logs"].is_array());
      EXPECT_TRUE(s["warnings"].is_null());
      array tags;
      ASSERT_EQ(s["tags"].get_array().get(tags), simdjson::SUCCESS);
      for (element tag : tags) {
        EXPECT_TRUE(tag["key"].is_string());
        EXPECT_TRUE(tag["type"].is_string());
        EXPECT_FALSE(tag["value"].error());
      }
      ASSERT_EQ(s["processID"].get_string().get(v), simdjson::SUCCESS);
      simdjson::dom::object process;
      ASSERT_EQ(processes[v].get_object().get(process), simdjson::SUCCESS) << v;
      EXPECT_TRUE(process["serviceName"].is_string());
      EXPECT_TRUE(process["tags"].is_array());
    }
  }

  std::string Us(uint64_t ns) { return std::to_string(ns / 1000); }

  simdjson::dom::parser parser_;
  net::HttpResponse last_;
};

// A t-digest is approximate by design: its q-quantile must lie between the
// order statistics around rank q * n of the exact durations (for a handful
// of values it gives the lower one), widened by 5% or 1 ms, as the RED
// view's own test allows.
void ExpectNearQuantile(double got_ms, std::vector<uint64_t> durations, double q,
                        const std::string& what) {
  ASSERT_FALSE(durations.empty()) << what;
  std::sort(durations.begin(), durations.end());
  const double n = static_cast<double>(durations.size());
  const auto lo_rank = static_cast<size_t>(std::max(0.0, std::ceil(q * n) - 1));
  const auto hi_rank = std::min(durations.size() - 1, static_cast<size_t>(std::floor(q * n)));
  const double lo = static_cast<double>(durations[lo_rank]) / 1e6;
  const double hi = static_cast<double>(durations[hi_rank]) / 1e6;
  EXPECT_GE(got_ms, lo - std::max(0.05 * lo, 1.0)) << what << " q" << q << " n=" << n;
  EXPECT_LE(got_ms, hi + std::max(0.05 * hi, 1.0)) << what << " q" << q << " n=" << n;
}

TEST_F(QueryGolden, ServicesAndOperations) {
  std::set<std::string> services;
  for (uint32_t i = 0; i < all.span_count(); ++i) services.insert(Service(i));
  ASSERT_GT(services.size(), 10u);
  element root = Ok("/api/services");
  EXPECT_EQ(Strings(root["data"]), std::vector<std::string>(services.begin(), services.end()));
  EXPECT_EQ(int64_t(root["total"]), static_cast<int64_t>(services.size()));
  EXPECT_TRUE(root["errors"].is_null());

  for (const std::string& service : {std::string("checkout"), kWeirdService}) {
    std::set<std::string> names;
    std::set<std::pair<std::string, uint8_t>> clients;
    for (uint32_t i = 0; i < all.span_count(); ++i) {
      if (Service(i) != service) continue;
      names.emplace(all.Str(all.spans.name[i]));
      if (all.spans.kind[i] == static_cast<uint8_t>(SpanKind::kClient)) {
        clients.emplace(all.Str(all.spans.name[i]), all.spans.kind[i]);
      }
    }
    ASSERT_FALSE(names.empty()) << service;
    const std::string path = Enc(service);
    root = Ok("/api/services/" + path + "/operations");
    EXPECT_EQ(Strings(root["data"]), std::vector<std::string>(names.begin(), names.end()))
        << service;
    root = Ok("/api/operations?service=" + path + "&spanKind=client");
    std::vector<std::pair<std::string, uint8_t>> got;
    for (element op : root["data"].get_array()) {
      EXPECT_EQ(std::string_view(op["spanKind"]), "client");
      got.emplace_back(std::string_view(op["name"]), static_cast<uint8_t>(SpanKind::kClient));
    }
    EXPECT_EQ(got, (std::vector<std::pair<std::string, uint8_t>>(clients.begin(), clients.end())))
        << service;
  }
}

TEST_F(QueryGolden, SearchByServiceOperationAndTime) {
  const uint64_t from = base_s * kNsPerS;
  const uint64_t to = end_s * kNsPerS;
  auto any = [](uint32_t) { return true; };
  ExpectTraces("/api/traces?service=checkout&limit=20&start=" + Us(from) + "&end=" + Us(to),
               ExpectedSearch("checkout", from, to, 20, any));
  // The default look-back (2 days before the clock) finds the same.
  ExpectTraces("/api/traces?service=checkout&limit=20",
               ExpectedSearch("checkout", from, to, 20, any));
  // A window in the middle, microsecond bounds.
  const uint64_t a = from + 300 * kNsPerS + 123456000;
  const uint64_t b = from + 420 * kNsPerS + 789000;
  const auto mid = ExpectedSearch("frontend", a, b, 1500, any);
  ASSERT_GT(mid.size(), 100u);
  ExpectTraces("/api/traces?service=frontend&limit=1500&start=" + Us(a) + "&end=" + Us(b), mid);
  // An operation.
  std::string op;
  for (uint32_t i = 0; i < all.span_count() && op.empty(); ++i) {
    if (Service(i) == "cart" && all.spans.kind[i] == static_cast<uint8_t>(SpanKind::kServer)) {
      op = std::string(all.Str(all.spans.name[i]));
    }
  }
  ASSERT_FALSE(op.empty());
  ExpectTraces("/api/traces?service=cart&limit=50&operation=" + Enc(op),
               ExpectedSearch("cart", from, to, 50,
                              [&](uint32_t i) { return all.Str(all.spans.name[i]) == op; }));
  // The trace of the escaped names.
  ExpectTraces("/api/traces?service=" + Enc(kWeirdService), {WeirdTraceId()});
}

TEST_F(QueryGolden, SearchByAttributesStatusKindAndDuration) {
  const uint64_t from = base_s * kNsPerS;
  const uint64_t to = end_s * kNsPerS;
  // A span attribute: the HTTP method of the gateway's server spans.
  ExpectTraces("/api/traces?service=api-gateway&limit=40&tag=http.request.method:POST",
               ExpectedSearch("api-gateway", from, to, 40, [](uint32_t i) {
                 return HasAttr(i, "http.request.method", "POST");
               }));
  // A resource attribute (the pod) in Jaeger's JSON form, with an int attribute.
  std::string pod;
  for (uint32_t i = 0; i < all.span_count() && pod.empty(); ++i) {
    if (Service(i) == "payment") pod = ResourceAttr(i, "k8s.pod.name").value_or("");
  }
  ASSERT_FALSE(pod.empty());
  const auto by_pod = ExpectedSearch("payment", from, to, 1500,
                                     [&](uint32_t i) { return HasAttr(i, "k8s.pod.name", pod); });
  ASSERT_GT(by_pod.size(), 0u);
  ExpectTraces(
      "/api/traces?service=payment&limit=1500&tags=%7B%22k8s.pod.name%22%3A%22" + pod + "%22%7D",
      by_pod);
  // Status: error=true is the span's ERROR status, as Jaeger shows it.
  auto is_error = [](uint32_t i) { return all.spans.status_code[i] == 2; };
  const auto errors = ExpectedSearch("api-gateway", from, to, 1500, is_error);
  ASSERT_GT(errors.size(), 3u);
  ExpectTraces("/api/traces?service=api-gateway&limit=1500&tag=error:true", errors);
  ExpectTraces("/api/traces?service=api-gateway&limit=1500&tag=otel.status_code:ERROR", errors);
  // Span kind and a duration range (Jaeger's duration strings).
  const uint64_t lo = 20 * 1000000;
  const uint64_t hi = 80 * 1000000;
  ExpectTraces(
      "/api/traces?service=cart&limit=100&tag=span.kind:client&minDuration=20ms&maxDuration=0.08s",
      ExpectedSearch("cart", from, to, 100, [&](uint32_t i) {
        const uint64_t d = all.spans.end_ns[i] - all.spans.start_ns[i];
        return all.spans.kind[i] == static_cast<uint8_t>(SpanKind::kClient) && d >= lo && d <= hi;
      }));
  // A user field by its path in the user_fields JSON column.
  const auto android = ExpectedSearch("frontend", from, to, 1500, [](uint32_t i) {
    return (SpanAttr(i, "app.channel") ? SpanAttr(i, "app.channel")
                                       : ResourceAttr(i, "app.channel")) == "android";
  });
  ASSERT_GT(android.size(), 0u);
  ExpectTraces("/api/traces?service=frontend&limit=1500&tag=user_fields.app.channel:android",
               android);
  // The same key as a plain tag: the span's value lives in user_fields only
  // (the arrays keep its key, the type marked), the resource's in its arrays.
  ExpectTraces("/api/traces?service=frontend&limit=1500&tag=app.channel:android", android);
  // Two tags at once must hold on the same span.
  ExpectTraces(
      "/api/traces?service=api-gateway&limit=1500&tag=error:true"
      "&tag=http.request.method:POST",
      ExpectedSearch("api-gateway", from, to, 1500, [&](uint32_t i) {
        return is_error(i) && HasAttr(i, "http.request.method", "POST");
      }));
}

TEST_F(QueryGolden, LookupsById) {
  // The first and the last trace of the corpus, and one that is not there.
  const std::string a = ToHex(all.spans.trace_id[0]);
  const std::string b = ToHex(all.spans.trace_id[all.span_count() - 10]);
  element root = Ok("/api/traces/" + a);
  EXPECT_EQ(simdjson::to_string(root["data"].at(0)), ExpectedTraceJson(a));
  root = Ok("/api/traces?traceID=" + b + "&traceID=" + a + "&traceID=42");
  array data = root["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(simdjson::to_string(data.at(0)), ExpectedTraceJson(b));
  EXPECT_EQ(simdjson::to_string(data.at(1)), ExpectedTraceJson(a));
  array errors = root["errors"];
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(std::string_view(errors.at(0)["traceID"]), "00000000000000000000000000000042");
  const net::HttpResponse missing = Get(*api, "/api/traces/00000000000000000000000000000042");
  EXPECT_EQ(missing.status, 404) << missing.body;
}

TEST_F(QueryGolden, Dependencies) {
  // Edges of the generated traces: (parent service, child service) for
  // parent and child in different services, counted per child span.
  std::map<std::pair<TraceId, SpanId>, uint32_t> by_id;
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    by_id[{all.spans.trace_id[i], all.spans.span_id[i]}] = i;
  }
  const uint64_t from = base_s + 120;
  const uint64_t to = base_s + 900;
  std::map<std::pair<std::string, std::string>, uint64_t> want;
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    if (IsZero(all.spans.parent_span_id[i]) || Minute(i) < from || Minute(i) >= to) continue;
    const auto p = by_id.find({all.spans.trace_id[i], all.spans.parent_span_id[i]});
    ASSERT_NE(p, by_id.end());
    if (Service(p->second) != Service(i)) ++want[{Service(p->second), Service(i)}];
  }
  ASSERT_GT(want.size(), 10u);
  element root =
      Ok(fmt::format("/api/dependencies?endTs={}&lookback={}", to * 1000, (to - from) * 1000));
  std::map<std::pair<std::string, std::string>, uint64_t> got;
  for (element l : root["data"].get_array()) {
    got[{Str(l["parent"]), Str(l["child"])}] = uint64_t(l["callCount"]);
  }
  EXPECT_EQ(got, want);
  // Filtered to one service.
  root = Ok(fmt::format("/api/dependencies?endTs={}&lookback={}&service=cart", to * 1000,
                        (to - from) * 1000));
  size_t n = 0;
  for (element l : root["data"].get_array()) {
    ++n;
    EXPECT_TRUE(std::string_view(l["parent"]) == "cart" || std::string_view(l["child"]) == "cart");
  }
  EXPECT_EQ(n, static_cast<size_t>(std::count_if(want.begin(), want.end(), [](const auto& e) {
              return e.first.first == "cart" || e.first.second == "cart";
            })));
}

TEST_F(QueryGolden, SpmMetricsEqualTheGeneratedSpans) {
  // 26 points a minute apart ending at end_s, each over the 2 minutes
  // before it; the server spans of cart and payment.
  const uint64_t step = 60;
  const uint64_t window = 120;
  const uint64_t lookback = 25 * 60;
  const std::string params =
      fmt::format("service=cart&service=payment&endTs={}&lookback={}&step={}&ratePer={}",
                  end_s * 1000, lookback * 1000, step * 1000, window * 1000);
  struct Window {
    uint64_t calls = 0;
    uint64_t errors = 0;
    std::vector<uint64_t> durations;
  };
  // (service, operation or "") -> point time -> window
  auto expected = [&](bool by_op) {
    std::map<std::pair<std::string, std::string>, std::map<uint64_t, Window>> out;
    for (uint32_t i = 0; i < all.span_count(); ++i) {
      const std::string s = Service(i);
      if ((s != "cart" && s != "payment") ||
          all.spans.kind[i] != static_cast<uint8_t>(SpanKind::kServer)) {
        continue;
      }
      for (uint64_t t = end_s - lookback; t <= end_s; t += step) {
        if (Minute(i) < t - window || Minute(i) >= t) continue;
        Window& w = out[{s, by_op ? std::string(all.Str(all.spans.name[i])) : ""}][t];
        ++w.calls;
        w.errors += all.spans.status_code[i] == 2;
        w.durations.push_back(all.spans.end_ns[i] - all.spans.start_ns[i]);
      }
    }
    return out;
  };
  const auto want = expected(false);
  ASSERT_EQ(want.size(), 2u);

  auto series_of = [](element family) {
    std::map<std::pair<std::string, std::string>, std::map<uint64_t, double>> out;
    for (element m : family["metrics"].get_array()) {
      std::string service;
      std::string op;
      for (element l : m["labels"].get_array()) {
        (std::string_view(l["name"]) == "service_name" ? service : op) = Str(l["value"]);
      }
      for (element p : m["metricPoints"].get_array()) {
        const std::string ts = Str(p["timestamp"]);
        std::tm tm{};
        EXPECT_NE(strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm), nullptr) << ts;
        const auto t = static_cast<uint64_t>(timegm(&tm));
        out[{service, op}][t] = Number(p["gaugeValue"]["doubleValue"]);
      }
    }
    return out;
  };

  element calls = Ok("/api/metrics/calls?" + params);
  EXPECT_EQ(std::string_view(calls["name"]), "service_call_rate");
  EXPECT_EQ(std::string_view(calls["type"]), "GAUGE");
  EXPECT_EQ(std::string_view(calls["help"]), "calls/sec, grouped by service");
  const auto got_calls = series_of(calls);
  ASSERT_EQ(got_calls.size(), want.size());
  for (const auto& [key, points] : got_calls) {
    EXPECT_EQ(points.size(), lookback / step + 1) << key.first;  // zeros included
    for (const auto& [t, v] : points) {
      const auto w = want.at(key).find(t);
      const uint64_t n = w == want.at(key).end() ? 0 : w->second.calls;
      EXPECT_EQ(v, static_cast<double>(n) / static_cast<double>(window)) << key.first << " " << t;
    }
  }

  element errors = Ok("/api/metrics/errors?" + params);
  EXPECT_EQ(std::string_view(errors["name"]), "service_error_rate");
  bool some_errors = false;
  for (const auto& [key, points] : series_of(errors)) {
    EXPECT_EQ(points.size(), want.at(key).size()) << key.first;  // points with calls only
    for (const auto& [t, v] : points) {
      const Window& w = want.at(key).at(t);
      EXPECT_EQ(v, static_cast<double>(w.errors) / static_cast<double>(w.calls));
      some_errors |= w.errors > 0;
    }
  }
  EXPECT_TRUE(some_errors);

  element lat = Ok("/api/metrics/latencies?quantile=0.5&" + params);
  EXPECT_EQ(std::string_view(lat["help"]), "0.50th quantile latency, grouped by service");
  for (const auto& [key, points] : series_of(lat)) {
    EXPECT_EQ(points.size(), want.at(key).size());
    for (const auto& [t, v] : points) {
      ExpectNearQuantile(v, want.at(key).at(t).durations, 0.5, key.first + " " + std::to_string(t));
    }
  }

  // Per operation: the series are the (service, operation) pairs.
  const auto want_ops = expected(true);
  element by_op = Ok("/api/metrics/calls?groupByOperation=true&" + params);
  EXPECT_EQ(std::string_view(by_op["name"]), "service_operation_call_rate");
  const auto got_ops = series_of(by_op);
  ASSERT_EQ(got_ops.size(), want_ops.size());
  for (const auto& [key, points] : got_ops) {
    for (const auto& [t, v] : points) {
      const auto w = want_ops.at(key).find(t);
      EXPECT_EQ(v * static_cast<double>(window),
                static_cast<double>(w == want_ops.at(key).end() ? 0 : w->second.calls))
          << key.first << "/" << key.second << " " << t;
    }
  }
  EXPECT_EQ(int64_t(Ok("/api/metrics/minstep")["data"]), 60000);
}

TEST_F(QueryGolden, SummariesEqualTheGeneratedSpans) {
  const uint64_t lookback = 30 * 60;  // the whole corpus
  struct Totals {
    uint64_t calls = 0;
    uint64_t errors = 0;
    std::vector<uint64_t> durations;
  };
  auto in_range = [&](uint32_t i) { return Minute(i) >= end_s - lookback && Minute(i) < end_s; };
  std::map<std::string, Totals> per_service;                 // server and consumer spans
  std::map<std::pair<std::string, uint8_t>, Totals> per_op;  // checkout, every kind
  for (uint32_t i = 0; i < all.span_count(); ++i) {
    if (!in_range(i)) continue;
    const uint8_t k = all.spans.kind[i];
    const uint64_t d = all.spans.end_ns[i] - all.spans.start_ns[i];
    const bool err = all.spans.status_code[i] == 2;
    for (Totals* t :
         {k == 2 || k == 5 ? &per_service[Service(i)] : nullptr,
          Service(i) == "checkout" ? &per_op[{std::string(all.Str(all.spans.name[i])), k}]
                                   : nullptr}) {
      if (t == nullptr) continue;
      ++t->calls;
      t->errors += err;
      t->durations.push_back(d);
    }
  }
  element root = Ok(fmt::format("/api/spanhouse/services/summary?endTs={}&lookback={}",
                                end_s * 1000, lookback * 1000));
  array data = root["data"];
  ASSERT_EQ(data.size(), per_service.size());
  for (element row : data) {
    const std::string service = Str(row["service"]);
    const Totals& t = per_service.at(service);
    EXPECT_EQ(uint64_t(row["calls"]), t.calls) << service;
    EXPECT_EQ(uint64_t(row["errors"]), t.errors) << service;
    EXPECT_DOUBLE_EQ(Number(row["rate_per_s"]), static_cast<double>(t.calls) / lookback);
    EXPECT_DOUBLE_EQ(Number(row["error_rate"]),
                     static_cast<double>(t.errors) / static_cast<double>(t.calls));
    ExpectNearQuantile(Number(row["p50_ms"]), t.durations, 0.5, service);
    ExpectNearQuantile(Number(row["p95_ms"]), t.durations, 0.95, service);
    ExpectNearQuantile(Number(row["p99_ms"]), t.durations, 0.99, service);
  }
  root = Ok(fmt::format(
      "/api/spanhouse/services/checkout/operations/summary?endTs={}&lookback={}&spanKind=all",
      end_s * 1000, lookback * 1000));
  data = root["data"];
  ASSERT_EQ(data.size(), per_op.size());
  for (element row : data) {
    EXPECT_EQ(std::string_view(row["service"]), "checkout");
    uint8_t kind = 0;
    ASSERT_TRUE(ParseSpanKind(std::string_view(row["span_kind"]), &kind));
    const std::string op = Str(row["operation"]);
    const Totals& t = per_op.at({op, kind});
    EXPECT_EQ(uint64_t(row["calls"]), t.calls) << op;
    EXPECT_EQ(uint64_t(row["errors"]), t.errors) << op;
    ExpectNearQuantile(Number(row["p50_ms"]), t.durations, 0.5, op);
  }
}

TEST_F(QueryGolden, HostileValuesAreBoundNotExecuted) {
  // Quotes, comment markers, backslashes and unicode go to the engine as
  // bound values: no error, nothing found, nothing dropped.
  for (const std::string target :
       {"/api/traces?service=x%27%20OR%201%3D1%20--",
        "/api/traces?service=checkout&operation=%27%29%3B%20DROP%20TABLE%20spanhouse.spans%3B%20--",
        "/api/traces?service=checkout&tag=http.route%27%20OR%20%271%27%3D%271:%2F*x*%2F",
        "/api/traces?service=checkout&tag=user_fields.a%27%5D%20OR%201%3D1%20--:1",
        "/api/traces?service=checkout&tags=%7B%22%5C%5C%27%22%3A%22%E2%80%AE%5Ct%22%7D",
        "/api/services/%27%3B--/operations", "/api/operations?service=%5C%27",
        "/api/metrics/calls?service=%27)%20OR%201%3D1%20--",
        "/api/spanhouse/services/%27--/operations/summary"}) {
    Ok(target);
    EXPECT_EQ(last_.body.find("\"errors\":["), std::string::npos) << target << last_.body;
    EXPECT_TRUE(last_.body.find("\"data\":[]") != std::string::npos ||
                last_.body.find("\"metrics\":[]") != std::string::npos)
        << target << last_.body;
  }
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)),
            std::to_string(all.span_count()) + "\n");
}

TEST_F(QueryGolden, ReaderLimitsAnswer400) {
  ChdbSpanReader small(*Engine::conn, caps,
                       ReaderLimits{.max_execution_s = 30, .max_spans = 3, .max_rows = 2});
  query::QueryApi limited(Options(), small);
  net::HttpResponse resp = Get(limited, "/api/services");
  EXPECT_EQ(resp.status, 400) << resp.body;
  EXPECT_NE(resp.body.find("over the limit of 2 rows"), std::string::npos) << resp.body;
  resp = Get(limited, "/api/traces/" + ToHex(all.spans.trace_id[0]));
  EXPECT_EQ(resp.status, 400) << resp.body;
  EXPECT_NE(resp.body.find("over the limit of 3 rows"), std::string::npos) << resp.body;
  EXPECT_EQ(resp.body.find("SELECT"), std::string::npos) << resp.body;
}

}  // namespace
}  // namespace spanhouse::storage
