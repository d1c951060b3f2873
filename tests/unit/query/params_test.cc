// Tests for the query API's parameter parsing (query/params.h): Jaeger's
// duration strings, timestamps, limits, tag filters and the SPM parameters,
// with hostile values (quotes, comment markers, unicode, huge or negative
// numbers) refused with a message rather than passed on.
#include "query/params.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace spanhouse::query {
namespace {

constexpr uint64_t kNs = 1;
constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kS = 1000 * kMs;
// 2023-11-14T22:13:20Z
constexpr uint64_t kNow = 1700000000ull * kS;

QueryString Qs(const std::string& query) {
  QueryString q;
  Status st = QueryString::Parse("/x?" + query, &q);
  EXPECT_TRUE(st.ok()) << query << ": " << st.message();
  return q;
}

uint64_t Duration(std::string_view text, bool days = false) {
  uint64_t ns = 12345;
  Status st = ParseDuration(text, "minDuration", &ns, days);
  EXPECT_TRUE(st.ok()) << text << ": " << st.message();
  return ns;
}

void ExpectBadDuration(std::string_view text, std::string_view why, bool days = false) {
  uint64_t ns = 0;
  Status st = ParseDuration(text, "minDuration", &ns, days);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << text << "' was accepted as " << ns;
  EXPECT_NE(st.message().find("minDuration"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
}

// ---- durations ----

TEST(ParseDuration, GoUnitsAndFractions) {
  EXPECT_EQ(Duration("1.5ms"), 1500 * kUs);
  EXPECT_EQ(Duration("2s"), 2 * kS);
  EXPECT_EQ(Duration("100us"), 100 * kUs);
  EXPECT_EQ(Duration("100\xC2\xB5s"), 100 * kUs);  // µ (micro sign)
  EXPECT_EQ(Duration("100\xCE\xBCs"), 100 * kUs);  // μ (Greek mu)
  EXPECT_EQ(Duration("250ns"), 250 * kNs);
  EXPECT_EQ(Duration("1h30m"), 90 * 60 * kS);
  EXPECT_EQ(Duration("1m0.5s"), 60 * kS + 500 * kMs);
  EXPECT_EQ(Duration(".5s"), 500 * kMs);
  EXPECT_EQ(Duration("5.s"), 5 * kS);
  EXPECT_EQ(Duration("+3ms"), 3 * kMs);
  EXPECT_EQ(Duration("0"), 0u);
  EXPECT_EQ(Duration("0.000000001s"), 1u);
  EXPECT_EQ(Duration("2d", /*days=*/true), 2 * 86400 * kS);
}

TEST(ParseDuration, RefusesNegativeMalformedAndHostile) {
  ExpectBadDuration("-1ms", "negative");
  ExpectBadDuration("-0", "negative");
  ExpectBadDuration("", "empty");
  ExpectBadDuration("1", "missing unit");
  ExpectBadDuration("1.5", "missing unit");
  ExpectBadDuration("ms", "number");
  ExpectBadDuration(".s", "number");
  ExpectBadDuration("1sec", "unknown unit");
  ExpectBadDuration("2d", "unknown unit");  // days only for lookback
  ExpectBadDuration("1e3ms", "unknown unit");
  ExpectBadDuration(" 1s", "number");
  ExpectBadDuration("1s ", "unknown unit");
  ExpectBadDuration("1s'; DROP TABLE spanhouse.spans; --", "unknown unit");
  ExpectBadDuration("1ms/**/", "unknown unit");
  ExpectBadDuration("\xEF\xBC\x91s", "number");  // fullwidth digit one
  ExpectBadDuration("99999999999999999999h", "too large");
  ExpectBadDuration("3000000h", "too large");  // past int64 nanoseconds (~292 years)
  ExpectBadDuration("0x10ms", "unknown unit");
}

// ---- numbers ----

TEST(ParseUnsigned, DigitsOnlyWithinTheMaximum) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseUnsigned("0", "limit", 10, &v).ok());
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(ParseUnsigned("10", "limit", 10, &v).ok());
  EXPECT_EQ(v, 10u);
  for (std::string_view bad : {"11", "-1", "+1", "1.5", "", " 1", "1 ", "0x10", "1e3", "١",
                               "99999999999999999999999", "1;--", "'1'"}) {
    Status st = ParseUnsigned(bad, "limit", 10, &v);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(st.message().find("'limit'"), std::string::npos) << st.message();
  }
}

// ---- query strings and paths ----

TEST(QueryString, DecodesRepeatsAndRefusesBadEscapes) {
  QueryString q = Qs("tag=a%3Ab&tag=c:d+e&service=caf%C3%A9&empty=&flag");
  EXPECT_EQ(q.All("tag"), (std::vector<std::string>{"a:b", "c:d e"}));
  ASSERT_NE(q.First("service"), nullptr);
  EXPECT_EQ(*q.First("service"), "caf\xC3\xA9");
  ASSERT_NE(q.First("empty"), nullptr);
  EXPECT_EQ(*q.First("empty"), "");
  EXPECT_TRUE(q.Has("flag"));
  EXPECT_FALSE(q.Has("nope"));
  for (std::string_view bad : {"/x?a=%zz", "/x?a=%4", "/x?a=%", "/x?%g0=1"}) {
    QueryString out;
    EXPECT_EQ(QueryString::Parse(bad, &out).code(), StatusCode::kInvalidArgument) << bad;
  }
  std::string many = "/x?";
  for (size_t i = 0; i <= QueryString::kMaxPairs; ++i) many += "a=1&";
  QueryString out;
  EXPECT_EQ(QueryString::Parse(many, &out).code(), StatusCode::kInvalidArgument);
}

TEST(DecodePathSegment, PlusStaysPlus) {
  std::string s;
  EXPECT_TRUE(DecodePathSegment("a+b%20c%2Fd", &s));
  EXPECT_EQ(s, "a+b c/d");
  EXPECT_FALSE(DecodePathSegment("a%2", &s));
}

// ---- tags ----

std::vector<TagFilter> Tags(const std::vector<std::string>& tag,
                            const std::vector<std::string>& json) {
  std::vector<TagFilter> out;
  Status st = ParseTags(tag, json, QueryLimits{}, &out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

void ExpectBadTags(const std::vector<std::string>& tag, const std::vector<std::string>& json,
                   std::string_view why) {
  std::vector<TagFilter> out;
  Status st = ParseTags(tag, json, QueryLimits{}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument)
      << (tag.empty() ? "" : tag[0]) << (json.empty() ? "" : json[0]);
  EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
}

TEST(ParseTags, KeyValuePairsAndJsonMaps) {
  auto t = Tags({"http.status_code:500", "url:http://x:8080/a"},
                {R"({"error":"true","app.note":"caf\u00e9 '; --"})"});
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].key, "http.status_code");
  EXPECT_EQ(t[0].value, "500");
  EXPECT_EQ(t[1].key, "url");
  EXPECT_EQ(t[1].value, "http://x:8080/a");  // everything after the first ':'
  EXPECT_EQ(t[2].key, "error");
  EXPECT_EQ(t[2].value, "true");
  EXPECT_EQ(t[3].value, "caf\xC3\xA9 '; --");  // kept as data, bound later
  // A later key replaces an earlier one, as in Jaeger's map.
  t = Tags({"a:1", "a:2"}, {R"({"a":"3"})"});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].value, "3");
  EXPECT_TRUE(Tags({}, {"{}"}).empty());
  EXPECT_EQ(Tags({"k:"}, {})[0].value, "");
}

TEST(ParseTags, RefusesMalformedAndOversized) {
  ExpectBadTags({"no-colon"}, {}, "expecting key:value");
  ExpectBadTags({":value"}, {}, "key must not be empty");
  ExpectBadTags({}, {"not json"}, "malformed 'tags'");
  ExpectBadTags({}, {"[1,2]"}, "malformed 'tags'");
  ExpectBadTags({}, {R"({"a":1})"}, "not a string");
  ExpectBadTags({}, {R"({"a":{"b":"c"}})"}, "not a string");
  ExpectBadTags({}, {R"({"a":"b")"}, "malformed 'tags'");
  ExpectBadTags({}, {R"({"a":"b"} trailing)"}, "malformed 'tags'");
  ExpectBadTags({"k:" + std::string(2000, 'x')}, {}, "longer than");
  std::vector<std::string> many;
  for (int i = 0; i < 33; ++i) many.push_back("k" + std::to_string(i) + ":v");
  ExpectBadTags(many, {}, "more than 32 tag filters");
  ExpectBadTags({}, {"{\"a\":\"" + std::string(70000, 'x') + "\"}"}, "longer than");
}

// ---- /api/traces ----

TraceSearchRequest Search(const std::string& query) {
  TraceSearchRequest r;
  Status st = ParseTraceSearch(Qs(query), kNow, QueryLimits{}, &r);
  EXPECT_TRUE(st.ok()) << query << ": " << st.message();
  return r;
}

void ExpectBadSearch(const std::string& query, std::string_view why) {
  TraceSearchRequest r;
  Status st = ParseTraceSearch(Qs(query), kNow, QueryLimits{}, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << query;
  EXPECT_NE(st.message().find(why), std::string::npos) << query << ": " << st.message();
}

TEST(ParseTraceSearch, DefaultsAsJaeger) {
  const TraceSearchRequest r = Search("service=checkout");
  EXPECT_TRUE(r.ids.empty());
  EXPECT_EQ(r.query.service, "checkout");
  EXPECT_EQ(r.query.operation, "");
  EXPECT_EQ(r.query.end_ns, kNow);
  EXPECT_EQ(r.query.start_ns, kNow - 2 * 86400 * kS);  // Jaeger's 2-day look-back
  EXPECT_EQ(r.query.limit, 100u);
  EXPECT_EQ(r.query.min_duration_ns, 0u);
  EXPECT_EQ(r.query.max_duration_ns, 0u);
}

TEST(ParseTraceSearch, EveryParameter) {
  const TraceSearchRequest r = Search(
      "service=checkout&operation=GET+%2Fcart&start=1699990000000000&end=1699999000000000"
      "&limit=20&minDuration=1.5ms&maxDuration=2s&tag=error:true"
      "&tags=%7B%22http.status_code%22%3A%22500%22%7D");
  EXPECT_EQ(r.query.operation, "GET /cart");
  EXPECT_EQ(r.query.start_ns, 1699990000000000ull * kUs);
  EXPECT_EQ(r.query.end_ns, 1699999000000000ull * kUs);
  EXPECT_EQ(r.query.limit, 20u);
  EXPECT_EQ(r.query.min_duration_ns, 1500 * kUs);
  EXPECT_EQ(r.query.max_duration_ns, 2 * kS);
  ASSERT_EQ(r.query.tags.size(), 2u);
  EXPECT_EQ(r.query.tags[0].key, "error");
  EXPECT_EQ(r.query.tags[1].key, "http.status_code");
  // The look-back of Jaeger's UI when start is not given, "custom" ignored.
  EXPECT_EQ(Search("service=a&lookback=1h").query.start_ns, kNow - 3600 * kS);
  EXPECT_EQ(Search("service=a&lookback=7d").query.start_ns, kNow - 7 * 86400 * kS);
  EXPECT_EQ(Search("service=a&lookback=custom").query.start_ns, kNow - 2 * 86400 * kS);
  EXPECT_EQ(Search("service=a&limit=0").query.limit, 100u);
  EXPECT_EQ(Search("service=a&limit=1500").query.limit, 1500u);
}

TEST(ParseTraceSearch, HostileStringsAreDataNotErrors) {
  // Quotes, comment markers and unicode are values, bound as parameters by
  // the store: they are not refused, nor changed.
  const std::string hostile = "x' OR 1=1 -- /* \xF0\x9F\x94\xA5 \\";
  const TraceSearchRequest r =
      Search("service=x%27%20OR%201%3D1%20--%20%2F*%20%F0%9F%94%A5%20%5C&operation=%22%3B--");
  EXPECT_EQ(r.query.service, hostile);
  EXPECT_EQ(r.query.operation, "\";--");
}

TEST(ParseTraceSearch, RefusesBadValues) {
  ExpectBadSearch("", "parameter 'service' is required");
  ExpectBadSearch("service=", "parameter 'service' is required");
  ExpectBadSearch("service=a&limit=1501", "over the maximum of 1500");
  ExpectBadSearch("service=a&limit=99999999999999999999999999", "'limit'");
  ExpectBadSearch("service=a&limit=-1", "'limit'");
  ExpectBadSearch("service=a&limit=10;DROP", "'limit'");
  ExpectBadSearch("service=a&start=abc", "'start'");
  ExpectBadSearch("service=a&start=-5", "'start'");
  ExpectBadSearch("service=a&end=1.5", "'end'");
  ExpectBadSearch("service=a&end=99999999999999999999", "'end'");
  ExpectBadSearch("service=a&start=%EF%BC%91", "'start'");  // fullwidth digit
  ExpectBadSearch("service=a&start=1699999000000000&end=1699990000000000", "after 'end'");
  ExpectBadSearch("service=a&minDuration=-1ms", "negative");
  ExpectBadSearch("service=a&maxDuration=5", "missing unit");
  ExpectBadSearch("service=a&minDuration=2s&maxDuration=1s", "greater than 'minDuration'");
  ExpectBadSearch("service=a&lookback=1y", "unknown unit");
  ExpectBadSearch("service=a&tag=oops", "expecting key:value");
  ExpectBadSearch("service=a&tags=%7B", "malformed 'tags'");
  ExpectBadSearch("service=" + std::string(2000, 'a'), "longer than");
}

TEST(ParseTraceSearch, TraceIdsReplaceTheSearch) {
  const TraceSearchRequest r = Search(
      "traceID=0af7651916cd43dd8448eb211c80319c&traceID=1&traceID="
      "0af7651916cd43dd8448eb211c80319c");
  ASSERT_EQ(r.ids.size(), 2u);  // deduplicated, in order
  EXPECT_EQ(ToHex(r.ids[0]), "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(ToHex(r.ids[1]), "00000000000000000000000000000001");
  ExpectBadSearch("traceID=xyz", "cannot parse traceID");
  ExpectBadSearch("traceID=" + std::string(33, 'a'), "cannot parse traceID");
  ExpectBadSearch("traceID=1'--", "cannot parse traceID");
  std::string many;
  for (int i = 0; i < 1501; ++i) many += "traceID=" + std::to_string(i + 1) + "&";
  ExpectBadSearch(many, "more than 1500 traceID");
}

// ---- /api/dependencies ----

TEST(ParseDependencies, MillisecondsAndDefaults) {
  DependenciesRequest r;
  ASSERT_TRUE(ParseDependencies(Qs(""), kNow, QueryLimits{}, &r).ok());
  EXPECT_EQ(r.end_s, kNow / kS);
  EXPECT_EQ(r.lookback_s, 86400u);
  ASSERT_TRUE(
      ParseDependencies(Qs("endTs=1700000000123&lookback=1500&service=a"), kNow, {}, &r).ok());
  EXPECT_EQ(r.end_s, 1700000000u);
  EXPECT_EQ(r.lookback_s, 2u);
  EXPECT_EQ(r.service, "a");
  for (std::string q :
       {"endTs=-1", "endTs=abc", "lookback=1h", "lookback=99999999999999", "endTs=1e12"}) {
    EXPECT_EQ(ParseDependencies(Qs(q), kNow, {}, &r).code(), StatusCode::kInvalidArgument) << q;
  }
}

// ---- /api/metrics ----

RedQuery Metrics(const std::string& query, bool quantile = false) {
  RedQuery r;
  Status st = ParseMetricsQuery(Qs(query), kNow, QueryLimits{}, quantile, &r);
  EXPECT_TRUE(st.ok()) << query << ": " << st.message();
  return r;
}

void ExpectBadMetrics(const std::string& query, std::string_view why, bool quantile = false) {
  RedQuery r;
  Status st = ParseMetricsQuery(Qs(query), kNow, QueryLimits{}, quantile, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << query;
  EXPECT_NE(st.message().find(why), std::string::npos) << query << ": " << st.message();
}

TEST(ParseMetricsQuery, JaegerParametersRoundedToMinutes) {
  RedQuery r = Metrics("service=a&service=b");
  EXPECT_EQ(r.services, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.kinds, (std::vector<uint8_t>{static_cast<uint8_t>(SpanKind::kServer)}));
  EXPECT_FALSE(r.by_operation);
  EXPECT_EQ(r.end_s, kNow / kS / 60 * 60);
  EXPECT_EQ(r.lookback_s, 3600u);
  EXPECT_EQ(r.step_s, 60u);
  EXPECT_EQ(r.window_s, 600u);
  r = Metrics(
      "service=a&quantile=0.95&groupByOperation=true&endTs=1700000000000&lookback=604800000"
      "&step=5000&ratePer=90000&spanKind=SPAN_KIND_CLIENT&spanKind=consumer",
      true);
  EXPECT_DOUBLE_EQ(r.quantile, 0.95);
  EXPECT_TRUE(r.want_quantile);
  EXPECT_TRUE(r.by_operation);
  EXPECT_EQ(r.end_s, 1700000000u / 60 * 60);
  EXPECT_EQ(r.lookback_s, 604800u);
  EXPECT_EQ(r.step_s, 60u);     // 5 s rounds up to red_1m's minute
  EXPECT_EQ(r.window_s, 120u);  // 90 s too
  EXPECT_EQ(r.kinds, (std::vector<uint8_t>{3, 5}));
  EXPECT_TRUE(Metrics("service=a&spanKind=all").kinds.empty());
}

TEST(ParseMetricsQuery, RefusesBadValues) {
  ExpectBadMetrics("", "at least one service");
  ExpectBadMetrics("service=", "empty service");
  ExpectBadMetrics("service=a", "'quantile'", true);
  for (std::string q : {"0", "1.5", "-0.5", "nan", "inf", "abc", "0.95'"}) {
    ExpectBadMetrics("service=a&quantile=" + q, "'quantile'", true);
  }
  ExpectBadMetrics("service=a&groupByOperation=yes", "'groupByOperation'");
  ExpectBadMetrics("service=a&spanKind=SPAN_KIND_FOO", "unsupported span kind");
  ExpectBadMetrics("service=a&spanKind=", "unsupported span kind");
  ExpectBadMetrics("service=a&step=0", "'step'");
  ExpectBadMetrics("service=a&ratePer=0", "'ratePer'");
  ExpectBadMetrics("service=a&step=-60000", "'step'");
  ExpectBadMetrics("service=a&lookback=2678400001", "'lookback'");  // over 31 days
  ExpectBadMetrics("service=a&lookback=2678400000&step=60000", "points per series");
  ExpectBadMetrics("service=a&ratePer=86400000&step=60000", "ratePer / step");
  ExpectBadMetrics("service=a&endTs=99999999999999999999", "'endTs'");
}

// ---- /api/spanhouse/.../summary ----

TEST(ParseSummary, LookbackAndKinds) {
  RedSummaryQuery r;
  ASSERT_TRUE(ParseSummary(Qs(""), kNow, {}, &r).ok());
  EXPECT_EQ(r.to_s, kNow / kS);
  EXPECT_EQ(r.from_s, kNow / kS - 3600);
  EXPECT_EQ(r.kinds, (std::vector<uint8_t>{2, 5}));  // server and consumer
  ASSERT_TRUE(
      ParseSummary(Qs("lookback=60000&endTs=1700000060000&spanKind=all"), kNow, {}, &r).ok());
  EXPECT_EQ(r.from_s, 1700000000u);
  EXPECT_EQ(r.to_s, 1700000060u);
  EXPECT_TRUE(r.kinds.empty());
  for (std::string q : {"lookback=0", "lookback=-1", "lookback=1h", "lookback=999999999999",
                        "spanKind=bogus", "endTs=1&lookback=2"}) {
    EXPECT_EQ(ParseSummary(Qs(q), kNow, {}, &r).code(), StatusCode::kInvalidArgument) << q;
  }
}

}  // namespace
}  // namespace spanhouse::query
