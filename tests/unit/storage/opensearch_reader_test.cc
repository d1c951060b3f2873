// OpenSearchReader without a cluster: the requests it builds (valid JSON,
// user values escaped, the indices of a time range), and how it reads
// answers, against a canned HTTP server: errors and time limits, paging, the
// row limits. tests/integration/opensearch_reader_test.cc runs it against a
// real OpenSearch.
#include "storage/opensearch/opensearch_reader.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codec/value_text.h"
#include "storage/opensearch/jaeger_document.h"
#include "testdata/hostile_strings.h"
#include "testdata/sample_batch.h"
#include "unit/storage/canned_http_server.h"

namespace spanhouse::storage::opensearch {
namespace {

constexpr uint64_t kDay = 86400ull * 1000000000ull;
// 2023-11-14T22:13:20Z
constexpr uint64_t kT0 = 1700000000000000000ull;

simdjson::dom::element Parse(simdjson::dom::parser& p, const std::string& json) {
  simdjson::dom::element e;
  EXPECT_EQ(p.parse(json).get(e), simdjson::SUCCESS) << json;
  return e;
}

// Every string value anywhere in `e`.
void Strings(simdjson::dom::element e, std::vector<std::string>* out) {
  switch (e.type()) {
    case simdjson::dom::element_type::STRING:
      out->emplace_back(e.get_string().value_unsafe());
      break;
    case simdjson::dom::element_type::ARRAY: {
      const simdjson::dom::array a = e.get_array().value_unsafe();
      for (auto x : a) Strings(x, out);
      break;
    }
    case simdjson::dom::element_type::OBJECT: {
      const simdjson::dom::object o = e.get_object().value_unsafe();
      for (auto f : o) {
        out->emplace_back(f.key);
        Strings(f.value, out);
      }
      break;
    }
    default:
      break;
  }
}

std::vector<std::string> StringsOf(const std::string& json) {
  simdjson::dom::parser p;
  std::vector<std::string> out;
  Strings(Parse(p, json), &out);
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// What AppendJsonString makes of `s`: invalid UTF-8 becomes U+FFFD.
std::string AsJson(const std::string& s) {
  std::string quoted;
  codec::AppendJsonString(quoted, s);
  simdjson::dom::parser p;
  return std::string(Parse(p, quoted).get_string().value_unsafe());
}

IndexLayout Layout(std::string_view prefix = "", std::string layout = "2006-01-02",
                   bool aliases = false) {
  IndexLayoutOptions o;
  o.prefix = std::string(prefix);
  o.date_layout = std::move(layout);
  o.use_aliases = aliases;
  IndexLayout l;
  EXPECT_TRUE(IndexLayout::Create(o, &l).ok()) << o.date_layout;
  return l;
}

constexpr IndexKind kSpans = IndexKind::kSpan;

TEST(OpenSearchIndices, DailyIndicesOfARangeNewestFirst) {
  const IndexLayout l = Layout();
  EXPECT_EQ(l.ReadIndices(kSpans, kT0, kT0), "jaeger-span-2023-11-14");
  EXPECT_EQ(l.ReadIndices(kSpans, kT0, kT0 + 2 * kDay),
            "jaeger-span-2023-11-16,jaeger-span-2023-11-15,jaeger-span-2023-11-14");
  // The days of the range's ends, whatever their hour: 22:13 to 00:30 the next day.
  EXPECT_EQ(Layout("p").ReadIndices(kSpans, kT0, kT0 + 8000ull * 1000000000ull),
            "p-jaeger-span-2023-11-15,p-jaeger-span-2023-11-14");
  // Across a year's end; the epoch.
  const uint64_t new_year = 1704067200ull * 1000000000ull;  // 2024-01-01T00:00:00Z
  EXPECT_EQ(l.ReadIndices(IndexKind::kService, new_year - 1, new_year),
            "jaeger-service-2024-01-01,jaeger-service-2023-12-31");
  EXPECT_EQ(l.ReadIndices(kSpans, 0, 0), "jaeger-span-1970-01-01");
  EXPECT_EQ(l.WriteIndex(kSpans, kT0), "jaeger-span-2023-11-14");
}

TEST(OpenSearchIndices, LongOrReversedRangesUseTheWildcard) {
  const IndexLayout l = Layout();
  EXPECT_EQ(l.AllIndices(kSpans), "jaeger-span-*-*-*");
  EXPECT_EQ(l.ReadIndices(kSpans, kT0 + kDay, kT0), "jaeger-span-*-*-*");
  // A year of days is over 3000 characters.
  EXPECT_EQ(l.ReadIndices(kSpans, kT0 - 365 * kDay, kT0), "jaeger-span-*-*-*");
  const std::string month = l.ReadIndices(kSpans, kT0 - 30 * kDay, kT0);
  EXPECT_EQ(std::count(month.begin(), month.end(), ','), 30);
  EXPECT_LE(month.size(), 3000u);
  EXPECT_EQ(l.ReadIndices(kSpans, kT0, kT0 + kDay, 30), "jaeger-span-*-*-*");
}

TEST(OpenSearchIndices, PrefixBytesOutsideIndexNamesAreEncoded) {
  EXPECT_EQ(Layout().Base(IndexKind::kDependencies), "jaeger-dependencies-");
  EXPECT_EQ(Layout("prod").Base(IndexKind::kDependencies), "prod-jaeger-dependencies-");
  // A prefix given with its '-' (Jaeger takes both).
  EXPECT_EQ(Layout("prod-").Base(kSpans), "prod-jaeger-span-");
  EXPECT_EQ(Layout("a/b?c#d e,f").AllIndices(kSpans), "a%2Fb%3Fc%23d%20e%2Cf-jaeger-span-*-*-*");
  EXPECT_EQ(Layout("x&y").ReadIndices(kSpans, kT0, kT0), "x%26y-jaeger-span-2023-11-14");
}

TEST(OpenSearchIndices, DateLayoutsAsJaegerNamesThem) {
  // Another separator (Jaeger's index_date_separator).
  const IndexLayout dots = Layout("", "2006.01.02");
  EXPECT_EQ(dots.WriteIndex(kSpans, kT0), "jaeger-span-2023.11.14");
  EXPECT_EQ(dots.AllIndices(kSpans), "jaeger-span-*.*.*");
  EXPECT_EQ(dots.ReadIndices(kSpans, kT0, kT0 + kDay),
            "jaeger-span-2023.11.15,jaeger-span-2023.11.14");
  // Hourly span and service indices; the dependencies stay daily.
  const IndexLayout hourly = Layout("h", "2006-01-02-15");
  EXPECT_EQ(hourly.period_ns(), 3600ull * 1000000000ull);
  EXPECT_EQ(hourly.WriteIndex(kSpans, kT0), "h-jaeger-span-2023-11-14-22");
  EXPECT_EQ(hourly.ReadIndices(kSpans, kT0, kT0 + 3600ull * 1000000000ull),
            "h-jaeger-span-2023-11-14-23,h-jaeger-span-2023-11-14-22");
  EXPECT_EQ(hourly.AllIndices(kSpans), "h-jaeger-span-*-*-*-*");
  EXPECT_EQ(hourly.WriteIndex(IndexKind::kDependencies, kT0), "h-jaeger-dependencies-2023-11-14");
  EXPECT_EQ(Layout("", "2006_01_02").WriteIndex(kSpans, kT0), "jaeger-span-2023_11_14");
  // Not a layout of a date.
  for (const char* bad :
       {"", "2006-01", "2006/01/02", "YYYY-MM-DD", "2006-01-02-02", "2006 01 02"}) {
    IndexLayoutOptions o;
    o.date_layout = bad;
    IndexLayout l;
    const Status st = IndexLayout::Create(o, &l);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("2006-01-02"), std::string::npos) << st.message();
  }
}

TEST(OpenSearchEngine, SupportedVersionsAndAClearErrorOtherwise) {
  EngineInfo e;
  ASSERT_TRUE(CheckEngine("7.10.2", "default", &e).ok());
  EXPECT_EQ(e.engine, SearchEngine::kElasticsearch);
  EXPECT_EQ(e.major, 7);
  ASSERT_TRUE(CheckEngine("7.17.0", "", &e).ok());
  ASSERT_TRUE(CheckEngine("2.19.6", "opensearch", &e).ok());
  EXPECT_EQ(e.engine, SearchEngine::kOpenSearch);
  EXPECT_TRUE(CheckEngine("1.3.20", "opensearch", &e).ok());
  for (auto [version, distribution] :
       {std::pair{"8.15.0", ""}, {"6.8.23", "oss"}, {"3.1.0", "opensearch"}, {"x", ""}}) {
    const Status st = CheckEngine(version, distribution, &e);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << version;
    EXPECT_NE(st.message().find(version), std::string::npos) << st.message();
  }
  EXPECT_NE(CheckEngine("8.15.0", "", &e).message().find("Elasticsearch 7.x"), std::string::npos);
}

TEST(OpenSearchIndices, RolloverAliases) {
  const IndexLayout l = Layout("team", "2006-01-02", /*aliases=*/true);
  EXPECT_EQ(l.WriteIndex(kSpans, kT0), "team-jaeger-span-write");
  EXPECT_EQ(l.WriteIndex(IndexKind::kService, kT0), "team-jaeger-service-write");
  EXPECT_EQ(l.ReadIndices(kSpans, kT0, kT0 + kDay), "team-jaeger-span-read");
  EXPECT_EQ(l.AllIndices(IndexKind::kDependencies), "team-jaeger-dependencies-read");
}

TEST(OpenSearchQueries, TraceIdsWithTheirLegacyForm) {
  TraceId plain{};
  plain.fill(0xab);
  TraceId leading{};
  leading[15] = 0x2a;  // 000...02a
  TraceId zero{};
  const std::string q = TraceIdsQuery({plain, leading, zero});
  simdjson::dom::parser p;
  auto doc = Parse(p, q);
  simdjson::dom::array terms;
  ASSERT_EQ(doc["terms"]["traceID"].get_array().get(terms), simdjson::SUCCESS) << q;
  std::vector<std::string> values;
  for (auto t : terms) values.emplace_back(t.get_string().value_unsafe());
  EXPECT_EQ(values,
            (std::vector<std::string>{ToHex(plain), ToHex(leading), "2a", std::string(32, '0')}));
}

TEST(OpenSearchQueries, ParsesTraceIdsOfAnyLengthUpTo32Digits) {
  TraceId id{};
  ASSERT_TRUE(ParseTraceIdHex("2a", &id));
  TraceId want{};
  want[15] = 0x2a;
  EXPECT_EQ(id, want);
  ASSERT_TRUE(ParseTraceIdHex("abc", &id));
  want[14] = 0x0a;
  want[15] = 0xbc;
  EXPECT_EQ(id, want);
  ASSERT_TRUE(ParseTraceIdHex(std::string(32, 'f'), &id));
  EXPECT_EQ(id[0], 0xff);
  EXPECT_FALSE(ParseTraceIdHex("", &id));
  EXPECT_FALSE(ParseTraceIdHex(std::string(33, '1'), &id));
  EXPECT_FALSE(ParseTraceIdHex("xyz", &id));
}

TEST(OpenSearchQueries, TagFilterMatchesEveryPlaceATagLives) {
  const std::string q = TagFilterQuery({"http.method", "GET"});
  simdjson::dom::parser p;
  auto doc = Parse(p, q);
  simdjson::dom::array should;
  ASSERT_EQ(doc["bool"]["should"].get_array().get(should), simdjson::SUCCESS) << q;
  EXPECT_EQ(should.size(), 5u);
  std::vector<std::string> paths;
  for (auto c : should) {
    std::string_view path;
    if (c["nested"]["path"].get_string().get(path) == simdjson::SUCCESS) {
      paths.emplace_back(path);
      bool ignore = false;
      EXPECT_EQ(c["nested"]["ignore_unmapped"].get_bool().get(ignore), simdjson::SUCCESS);
      EXPECT_TRUE(ignore);
      std::string_view key, value;
      auto filter = c["nested"]["query"]["bool"]["filter"];
      ASSERT_EQ(filter.at(0)["term"][std::string(path) + ".key"].get_string().get(key),
                simdjson::SUCCESS);
      ASSERT_EQ(filter.at(1)["term"][std::string(path) + ".value"].get_string().get(value),
                simdjson::SUCCESS);
      EXPECT_EQ(key, "http.method");
      EXPECT_EQ(value, "GET");
    } else {
      simdjson::dom::object term;
      ASSERT_EQ(c["term"].get_object().get(term), simdjson::SUCCESS);
      for (auto f : term) {
        paths.emplace_back(f.key);
        EXPECT_EQ(f.value.get_string().value_unsafe(), "GET");
      }
    }
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"tags", "process.tags", "logs.fields",
                                             "tag.http@method", "process.tag.http@method"}));
  int64_t min_should = 0;
  EXPECT_EQ(doc["bool"]["minimum_should_match"].get_int64().get(min_should), simdjson::SUCCESS);
  EXPECT_EQ(min_should, 1);
}

TEST(OpenSearchQueries, HostileKeysAndValuesStayValues) {
  for (const std::string& s : testdata::HostileStrings()) {
    const std::string q = TagFilterQuery({s, s});
    const std::vector<std::string> strings = StringsOf(q);
    EXPECT_TRUE(Contains(strings, AsJson(s))) << q;
    query::TraceQuery tq;
    tq.service = s;
    tq.operation = s;
    tq.tags = {{s, "v"}, {"k", s}};
    tq.start_ns = kT0;
    tq.end_ns = kT0 + 1;
    const std::vector<std::string> body = StringsOf(FindTraceIdsBody(tq));
    EXPECT_TRUE(Contains(body, AsJson(s)));
  }
}

TEST(OpenSearchQueries, SpecialTagsAlsoMatchTheSpanFields) {
  auto has = [](const query::TagFilter& t, const std::string& needle) {
    return TagFilterQuery(t).find(needle) != std::string::npos;
  };
  const std::string error_true = R"({"term":{"tags.key":"error"}},{"term":{"tags.value":"true"}})";
  // error=true: the tag itself (the generic match); false: no error tag.
  EXPECT_TRUE(has({"error", "true"}, error_true));
  EXPECT_FALSE(has({"error", "true"}, "must_not"));
  EXPECT_TRUE(has({"error", "false"}, R"({"bool":{"must_not":[{"bool":{"should":[{"nested")"));
  // otel.status_code: ERROR is the error tag; UNSET neither tag.
  EXPECT_TRUE(has({"otel.status_code", "ERROR"}, error_true));
  // error and span.kind also as fields of `tag`, where Jaeger's v2 writer keeps them.
  EXPECT_TRUE(has({"otel.status_code", "ERROR"}, R"({"term":{"tag.error":"true"}})"));
  EXPECT_FALSE(has({"otel.status_code", "OK"}, error_true));
  const std::string unset = TagFilterQuery({"otel.status_code", "UNSET"});
  EXPECT_NE(unset.find("must_not"), std::string::npos);
  EXPECT_NE(unset.find(R"("query":{"term":{"tags.key":"otel.status_code"}})"), std::string::npos);
  // span.kind in OTLP's spelling is Jaeger's lowercase tag.
  EXPECT_TRUE(has({"span.kind", "SPAN_KIND_SERVER"},
                  R"({"term":{"tags.key":"span.kind"}},{"term":{"tags.value":"server"}})"));
  EXPECT_TRUE(has({"span.kind", "SPAN_KIND_SERVER"}, R"({"term":{"tag.span@kind":"server"}})"));
  EXPECT_TRUE(has({"span.kind", "unspecified"}, R"({"exists":{"field":"tag.span@kind"}})"));
  EXPECT_TRUE(has({"span.kind", "unspecified"}, "must_not"));
  EXPECT_FALSE(has({"span.kind", "sideways"}, "must_not"));
  // user_fields.<path> is the tag <path>.
  EXPECT_TRUE(has({"user_fields.app.channel", "web"}, R"({"term":{"tags.key":"app.channel"}})"));
  EXPECT_TRUE(has({"user_fields.app.channel", "web"}, R"("tag.app@channel":"web")"));
}

TEST(OpenSearchQueries, TraceSearchBody) {
  query::TraceQuery q;
  q.service = "frontend";
  q.operation = "GET /cart";
  q.start_ns = kT0 + 1234567;  // 1700000000001.234567 ms
  q.end_ns = kT0 + 3600ull * 1000000000ull;
  q.min_duration_ns = 1500000;
  q.max_duration_ns = 2000000999;
  q.limit = 20;
  q.tags = {{"http.status_code", "200"}};
  const std::string body = FindTraceIdsBody(q);
  simdjson::dom::parser p;
  auto doc = Parse(p, body);
  int64_t size = -1;
  ASSERT_EQ(doc["size"].get_int64().get(size), simdjson::SUCCESS);
  EXPECT_EQ(size, 0);
  simdjson::dom::array filter;
  ASSERT_EQ(doc["query"]["bool"]["filter"].get_array().get(filter), simdjson::SUCCESS);
  ASSERT_EQ(filter.size(), 6u);
  uint64_t v = 0;
  ASSERT_EQ(filter.at(0)["range"]["startTimeMillis"]["gte"].get_uint64().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 1700000000001u);
  ASSERT_EQ(filter.at(1)["range"]["startTime"]["gte"].get_uint64().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 1700000000001234u);
  ASSERT_EQ(filter.at(1)["range"]["startTime"]["lte"].get_uint64().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 1700003600000000u);
  std::string_view s;
  ASSERT_EQ(filter.at(2)["term"]["process.serviceName"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "frontend");
  ASSERT_EQ(filter.at(3)["term"]["operationName"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "GET /cart");
  ASSERT_EQ(filter.at(4)["range"]["duration"]["gte"].get_uint64().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 1500u);
  ASSERT_EQ(filter.at(4)["range"]["duration"]["lte"].get_uint64().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 2000000u);
  auto terms = doc["aggs"]["traces"]["terms"];
  ASSERT_EQ(terms["field"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "traceID");
  ASSERT_EQ(terms["size"].get_uint64().get(v), simdjson::SUCCESS);
  EXPECT_EQ(v, 20u);
  ASSERT_EQ(terms["order"].at(0)["last"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "desc");
  ASSERT_EQ(doc["aggs"]["traces"]["aggs"]["last"]["max"]["field"].get_string().get(s),
            simdjson::SUCCESS);
  EXPECT_EQ(s, "startTime");

  // Without an operation, durations or tags: the time range and service only.
  query::TraceQuery bare;
  bare.service = "db";
  bare.start_ns = kT0;
  bare.end_ns = kT0;
  auto d2 = Parse(p, FindTraceIdsBody(bare));
  ASSERT_EQ(d2["query"]["bool"]["filter"].get_array().get(filter), simdjson::SUCCESS);
  EXPECT_EQ(filter.size(), 3u);
  // Only a minimum: no upper bound.
  bare.min_duration_ns = 5000;
  const std::string min_only = FindTraceIdsBody(bare);
  EXPECT_NE(min_only.find(R"({"range":{"duration":{"gte":5}}})"), std::string::npos) << min_only;
}

// ---------------------------------------------------------------------------
// against canned answers

std::shared_ptr<OpenSearchClient> ClientFor(
    const std::string& url, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  OpenSearchOptions o;
  o.urls = {url};
  o.timeout = timeout;
  std::unique_ptr<OpenSearchClient> c;
  EXPECT_TRUE(OpenSearchClient::Create(o, &c).ok());
  return std::shared_ptr<OpenSearchClient>(std::move(c));
}

// A search answer with these hits' documents (sort values: start, trace, span).
std::string HitsAnswer(const SpanBatch& b, const std::vector<uint32_t>& spans, uint64_t total) {
  DocumentWriter w(b);
  std::string out = R"({"took":1,"timed_out":false,"_shards":{"total":1,"successful":1,)"
                    R"("skipped":0,"failed":0},"hits":{"total":{"value":)" +
                    std::to_string(total) + R"(,"relation":"eq"},"hits":[)";
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) out += ',';
    out += R"({"_index":"jaeger-span-2023-11-14","_id":")" + SpanDocumentId(b, spans[i]) +
           R"(","_source":)";
    w.AppendSpan(out, spans[i]);
    out += R"(,"sort":[)" + std::to_string(b.spans.start_ns[spans[i]] / 1000) + ",\"" +
           ToHex(b.spans.trace_id[spans[i]]) + "\",\"" + ToHex(b.spans.span_id[spans[i]]) + "\"]}";
  }
  out += "]}}";
  return out;
}

TEST(OpenSearchReaderCanned, PagesThroughTracesInTheOrderOfIds) {
  const SpanBatch b = testdata::SampleBatch(2);
  // Spans 0..5 by start time (trace 0's three, then trace 1's) in pages of
  // 4: the first after no search_after, the second after the fourth's sort
  // values.
  CannedServer server([&](const CannedServer::Request& r) -> CannedServer::Answer {
    if (r.body.find("\"search_after\":") == std::string::npos) {
      return {200, HitsAnswer(b, {0, 1, 2, 3}, 6)};
    }
    return {200, HitsAnswer(b, {4, 5}, 6)};
  });
  ReaderOptions o;
  o.page_size = 4;
  OpenSearchReader reader(ClientFor(server.url()), o);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTraces({testdata::MakeTraceId(1), testdata::MakeTraceId(0)}, &out).ok());
  ASSERT_EQ(out.span_count(), 6u);
  // Trace 1 first, then trace 0, each by start time; the spans as written.
  SpanBatch want;
  const uint32_t order[] = {3, 4, 5, 0, 1, 2};
  {
    SpanBatch docs;
    DocumentWriter w(b);
    for (uint32_t s = 0; s < 6; ++s) {
      std::string doc;
      w.AppendSpan(doc, s);
      ASSERT_TRUE(AppendSpanFromDocument(doc, &docs).ok());
    }
    want.AppendSpans(docs, order, 6);
  }
  std::string why;
  EXPECT_TRUE(out.LogicallyEquals(want, &why)) << why;
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  const std::string after = "\"search_after\":[" + std::to_string(b.spans.start_ns[3] / 1000) +
                            ",\"" + ToHex(b.spans.trace_id[3]) + "\",\"" +
                            ToHex(b.spans.span_id[3]) + "\"]";
  EXPECT_NE(reqs[1].body.find(after), std::string::npos) << reqs[1].body;
  EXPECT_NE(reqs[0].body.find(R"("size":4,"track_total_hits":1000001)"), std::string::npos)
      << reqs[0].body;
  for (const auto& r : reqs) {
    EXPECT_EQ(r.target.find("/jaeger-span-*-*-*/_search?"), 0u) << r.target;
    EXPECT_NE(r.target.find("ignore_unavailable=true&allow_no_indices=true&timeout=30000ms"),
              std::string::npos)
        << r.target;
  }
  // Only the ids asked for: GetTrace of trace 0 keeps its 3 spans.
  out = SpanBatch();
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(0), &out).ok());
  EXPECT_EQ(out.span_count(), 3u);
}

TEST(OpenSearchReaderCanned, OverMaxSpansIsRefused) {
  const SpanBatch b = testdata::SampleBatch(2);
  std::atomic<bool> report_total{true};
  CannedServer server([&](const CannedServer::Request&) -> CannedServer::Answer {
    std::string a = HitsAnswer(b, {0, 1, 2}, 6);
    if (!report_total) {
      a.replace(a.find(R"("total":{"value":6,"relation":"eq"},)"),
                std::string(R"("total":{"value":6,"relation":"eq"},)").size(), "");
    }
    return {200, a};
  });
  ReaderOptions o;
  o.max_spans = 2;
  OpenSearchReader reader(ClientFor(server.url()), o);
  SpanBatch out;
  // By the total the first page reports.
  Status st = reader.GetTraces({testdata::MakeTraceId(0)}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("limit of 2"), std::string::npos) << st.message();
  // By the spans read, when the total is not there.
  report_total = false;
  EXPECT_EQ(reader.GetTraces({testdata::MakeTraceId(0)}, &out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.empty());
}

TEST(OpenSearchReaderCanned, ADocumentThatIsNotASpanIsAStoreFailure) {
  CannedServer server([&](const CannedServer::Request&) -> CannedServer::Answer {
    return {200, R"({"timed_out":false,"_shards":{"failed":0},"hits":{"hits":[)"
                 R"({"_index":"jaeger-span-2023-11-14","_id":"x","_source":{"traceID":"zz"}}]}})"};
  });
  OpenSearchReader reader(ClientFor(server.url()), {});
  SpanBatch out;
  const Status st = reader.GetTrace(testdata::MakeTraceId(0), &out);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("traceID"), std::string::npos) << st.message();
}

TEST(OpenSearchReaderCanned, ErrorsOfTheCluster) {
  std::atomic<int> mode{0};
  CannedServer server([&](const CannedServer::Request&) -> CannedServer::Answer {
    switch (mode.load()) {
      case 0:
        return {200, R"({"timed_out":true,"_shards":{"failed":0},"hits":{"hits":[]}})"};
      case 1:
        return {200, R"({"timed_out":false,"_shards":{"total":2,"failed":1,"failures":[{"reason":)"
                     R"({"type":"query_shard_exception","reason":"bad"}}]},"hits":{"hits":[]}})"};
      case 2:
        return {429, R"({"error":{"type":"es_rejected_execution_exception","reason":"full"}})"};
      case 3:
        return {400, R"({"error":{"type":"parsing_exception","reason":"no"}})"};
      case 4:
        return {404, R"({"error":{"type":"index_not_found_exception","reason":"none"}})"};
      case 5:
        return {200, "not json"};
      default:
        return {200, "{}", std::chrono::milliseconds(1500)};
    }
  });
  OpenSearchReader reader(ClientFor(server.url()), {});
  std::vector<std::string> services;
  mode = 0;
  Status st = reader.GetServices(&services);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("time limit"), std::string::npos) << st.message();
  mode = 1;
  st = reader.GetServices(&services);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("query_shard_exception"), std::string::npos) << st.message();
  mode = 2;
  EXPECT_EQ(reader.GetServices(&services).code(), StatusCode::kUnavailable);
  mode = 3;
  st = reader.GetServices(&services);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("parsing_exception"), std::string::npos) << st.message();
  mode = 4;  // no such index: nothing stored
  EXPECT_TRUE(reader.GetServices(&services).ok());
  EXPECT_TRUE(services.empty());
  SpanBatch out;
  EXPECT_EQ(reader.GetTrace(testdata::MakeTraceId(0), &out).code(), StatusCode::kNotFound);
  mode = 5;
  EXPECT_EQ(reader.GetServices(&services).code(), StatusCode::kInternal);
  // A cluster slower than the client's own time limit.
  mode = 6;
  OpenSearchReader slow(ClientFor(server.url(), std::chrono::milliseconds(300)), {});
  st = slow.GetServices(&services);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("time limit"), std::string::npos) << st.message();
}

TEST(OpenSearchReaderCanned, RowLimitsOfAggregations) {
  std::atomic<int> mode{0};
  CannedServer server([&](const CannedServer::Request&) -> CannedServer::Answer {
    const std::string buckets =
        R"([{"key":"b","doc_count":1},{"key":"a","doc_count":2},{"key":"c","doc_count":1}])";
    const std::string other = mode == 0 ? "0" : "5";
    return {200, R"({"timed_out":false,"_shards":{"failed":0},"aggregations":{"services":)"
                 R"({"sum_other_doc_count":)" +
                     other + R"(,"buckets":)" + buckets + "}}}"};
  });
  ReaderOptions o;
  o.max_rows = 3;
  OpenSearchReader reader(ClientFor(server.url()), o);
  std::vector<std::string> services;
  ASSERT_TRUE(reader.GetServices(&services).ok());
  EXPECT_EQ(services, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_NE(server.requests().back().body.find(R"("size":3)"), std::string::npos);
  mode = 1;  // more services than the buckets asked for
  EXPECT_EQ(reader.GetServices(&services).code(), StatusCode::kInvalidArgument);
  o.max_rows = 2;
  mode = 0;
  OpenSearchReader tighter(ClientFor(server.url()), o);
  EXPECT_EQ(tighter.GetServices(&services).code(), StatusCode::kInvalidArgument);
}

TEST(OpenSearchReaderCanned, FindTraceIdsReadsTheBucketsInOrder) {
  CannedServer server([&](const CannedServer::Request&) -> CannedServer::Answer {
    return {200, R"({"timed_out":false,"_shards":{"failed":0},"aggregations":{"traces":{)"
                 R"("sum_other_doc_count":9,"buckets":[)"
                 R"({"key":"000000000000000000000000000000ff","doc_count":1},)"
                 R"({"key":"ff","doc_count":1},)"
                 R"({"key":"0102030405060708090a0b0c0d0e0f10","doc_count":3}]}}})"};
  });
  OpenSearchReader reader(ClientFor(server.url()), {});
  query::TraceQuery q;
  q.service = "frontend";
  q.start_ns = kT0;
  q.end_ns = kT0 + kDay;
  std::vector<TraceId> ids;
  ASSERT_TRUE(reader.FindTraceIds(q, &ids).ok());
  ASSERT_EQ(ids.size(), 2u);  // the legacy form of 0...ff is the same trace
  EXPECT_EQ(ToHex(ids[0]), "000000000000000000000000000000ff");
  EXPECT_EQ(ToHex(ids[1]), "0102030405060708090a0b0c0d0e0f10");
  EXPECT_NE(server.requests().back().target.find(
                "/jaeger-span-2023-11-15,jaeger-span-2023-11-14/_search?"),
            std::string::npos)
      << server.requests().back().target;
  // A limit of 0 asks nothing.
  const size_t before = server.requests().size();
  q.limit = 0;
  ASSERT_TRUE(reader.FindTraceIds(q, &ids).ok());
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(server.requests().size(), before);
}

TEST(OpenSearchReaderCanned, DependenciesSummedPerPair) {
  CannedServer server([&](const CannedServer::Request&) -> CannedServer::Answer {
    return {200, R"({"timed_out":false,"_shards":{"failed":0},"hits":{"total":{"value":2},)"
                 R"("hits":[{"_source":{"timestamp":"2023-11-14T00:00:00Z","dependencies":[)"
                 R"({"parent":"a","child":"b","callCount":3},{"parent":"b","child":"c",)"
                 R"("callCount":1}]}},{"_source":{"timestamp":"2023-11-14T01:00:00Z",)"
                 R"("dependencies":[{"parent":"a","child":"b","callCount":4}]}}]}})"};
  });
  ReaderOptions o;
  o.layout = IndexLayout::Prefixed("prod");
  OpenSearchReader reader(ClientFor(server.url()), o);
  std::vector<query::DependencyLink> links;
  ASSERT_TRUE(reader.GetDependencies(kT0 / 1000000000, kT0 / 1000000000 + 3600, &links).ok());
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0].parent, "a");
  EXPECT_EQ(links[0].child, "b");
  EXPECT_EQ(links[0].calls, 7u);
  EXPECT_EQ(links[1].parent, "b");
  EXPECT_EQ(links[1].calls, 1u);
  const auto reqs = server.requests();
  EXPECT_NE(reqs.back().target.find("/prod-jaeger-dependencies-2023-11-14/_search?"),
            std::string::npos)
      << reqs.back().target;
  EXPECT_NE(reqs.back().body.find(R"("gte":1700000000000,"lt":1700003600000)"), std::string::npos)
      << reqs.back().body;
  // An empty range asks nothing.
  ASSERT_TRUE(reader.GetDependencies(100, 100, &links).ok());
  EXPECT_TRUE(links.empty());
  EXPECT_EQ(server.requests().size(), reqs.size());
}

TEST(OpenSearchReaderCanned, WhatTheFormatCannotAnswer) {
  // Nothing listens there; these never ask.
  OpenSearchReader reader(ClientFor("http://127.0.0.1:1"), {});
  std::vector<query::RedSeries> series;
  Status st = reader.GetRedSeries({}, &series);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ClickHouse"), std::string::npos);
  std::vector<query::RedSummaryRow> rows;
  EXPECT_EQ(reader.GetRedSummary({}, &rows).code(), StatusCode::kInvalidArgument);
  uint64_t n = 0;
  EXPECT_EQ(
      reader.CountSpansWithAttr(query::SpanReader::AttrOwner::kUserField, "a", "b", &n).code(),
      StatusCode::kInvalidArgument);
  // And a cluster that is not there.
  std::vector<std::string> services;
  EXPECT_EQ(reader.GetServices(&services).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace spanhouse::storage::opensearch
