// auth::TokenSet and auth::Guard: token lists, what counts as a bearer
// credential, the 401 answers and their counters, open paths, metrics.
#include "auth/bearer_auth.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spanhouse::auth {
namespace {

TokenSet Tokens(std::string_view list) {
  TokenSet t;
  Status st = TokenSet::Parse(list, &t);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

std::string Header(const net::HttpResponse& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<none>";
}

net::HttpRequest Request(const std::string& target) {
  net::HttpRequest r;
  r.method = "GET";
  r.target = target;
  return r;
}

TEST(TokenSet, ParsesCommaSeparatedLists) {
  EXPECT_TRUE(Tokens("").empty());
  EXPECT_TRUE(Tokens("  ").empty());
  EXPECT_EQ(Tokens("abc").size(), 1u);
  EXPECT_EQ(Tokens("abc, def ,ghi").size(), 3u);
  EXPECT_EQ(Tokens("a+b/c=d~e.f_g-h:!#").size(), 1u);
  EXPECT_EQ(Tokens(std::string(4096, 'x')).size(), 1u);
}

TEST(TokenSet, RejectsBadListsWithoutEchoingThem) {
  const std::vector<std::string> bad_lists = {"a,,b",      ",",           "a,",
                                              "has space", "tab\tin",     std::string("nul\0x", 5),
                                              "\x7f",      "caf\xc3\xa9", std::string(4097, 'x')};
  for (const std::string& bad : bad_lists) {
    TokenSet t;
    Status st = TokenSet::Parse(bad, &t);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << bad << "' accepted";
    EXPECT_FALSE(TokenSet::Check(bad).empty()) << bad;
    if (bad.size() > 2) {
      EXPECT_EQ(st.message().find(bad), std::string::npos) << st.message();
    }
  }
  EXPECT_TRUE(TokenSet::Check("a, b").empty());
  EXPECT_TRUE(TokenSet::Check("").empty());
}

TEST(TokenSet, VerifiesBearerCredentials) {
  const TokenSet t = Tokens("s3cret-ingest,second.token");
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest"), Verdict::kOk);
  EXPECT_EQ(t.Verify("Bearer second.token"), Verdict::kOk);
  EXPECT_EQ(t.Verify("bearer s3cret-ingest"), Verdict::kOk);  // the scheme is case-blind
  EXPECT_EQ(t.Verify("BEARER   s3cret-ingest  "), Verdict::kOk);

  EXPECT_EQ(t.Verify(""), Verdict::kMissing);
  EXPECT_EQ(t.Verify("Bearer s3cret-ingesT"), Verdict::kWrong);  // tokens are not
  EXPECT_EQ(t.Verify("Bearer s3cret-inges"), Verdict::kWrong);
  EXPECT_EQ(t.Verify("Bearer s3cret-ingestX"), Verdict::kWrong);
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest,second.token"), Verdict::kWrong);
  EXPECT_EQ(t.Verify("Bearer x"), Verdict::kWrong);

  EXPECT_EQ(t.Verify("Basic czNjcmV0LWluZ2VzdA=="), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("s3cret-ingest"), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("Bearer"), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("Bearer "), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("Bearers3cret-ingest"), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("Bearer " + std::string(5000, 'x')), Verdict::kMalformed);

  // No tokens: nothing is ever right.
  EXPECT_EQ(Tokens("").Verify("Bearer anything"), Verdict::kWrong);
}

// A digest function that works until told to fail, standing in for an
// OpenSSL provider that fails: a failed hash must never let a token in.
bool g_digest_fails = false;
bool FlakyDigest(std::string_view token, TokenSet::Digest* out) {
  out->fill(0);  // what a failed EVP_Digest leaves behind
  if (g_digest_fails) return false;
  for (size_t i = 0; i < token.size(); ++i) (*out)[i % out->size()] ^= token[i];
  return true;
}

TEST(TokenSet, DeniesWhenHashingFails) {
  g_digest_fails = true;
  TokenSet t;
  EXPECT_FALSE(TokenSet::Parse("s3cret-ingest-token", &t, &FlakyDigest).ok());

  g_digest_fails = false;
  ASSERT_TRUE(TokenSet::Parse("s3cret-ingest-token", &t, &FlakyDigest).ok());
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest-token"), Verdict::kOk);
  g_digest_fails = true;
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest-token"), Verdict::kWrong);
  EXPECT_EQ(t.Verify("Bearer another-guess-entirely"), Verdict::kWrong);
  g_digest_fails = false;
}

TEST(Guard, RefusesWith401AndCounts) {
  Guard g("query", Tokens("qt"), {"/healthz", "/readyz"});
  ASSERT_TRUE(g.enabled());
  ASSERT_TRUE(g.Authorizer());

  net::HttpResponse resp;
  EXPECT_FALSE(g.Authorize(Request("/api/traces/ab"), "", resp));
  EXPECT_EQ(resp.status, 401);
  EXPECT_EQ(Header(resp, "WWW-Authenticate"), "Bearer realm=\"spanhouse\"");
  EXPECT_NE(resp.body.find("missing bearer token"), std::string::npos) << resp.body;

  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/metrics"), "Bearer nope", resp));
  EXPECT_EQ(resp.status, 401);
  EXPECT_EQ(Header(resp, "WWW-Authenticate"),
            "Bearer realm=\"spanhouse\", error=\"invalid_token\"");
  EXPECT_NE(resp.body.find("wrong bearer token"), std::string::npos) << resp.body;
  EXPECT_EQ(resp.body.find("nope"), std::string::npos) << resp.body;

  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/metrics"), "Basic abc", resp));
  EXPECT_EQ(resp.status, 401);
  EXPECT_EQ(Header(resp, "WWW-Authenticate"),
            "Bearer realm=\"spanhouse\", error=\"invalid_request\"");

  resp = {};
  EXPECT_TRUE(g.Authorize(Request("/metrics"), "Bearer qt", resp));
  EXPECT_EQ(resp.status, 200);  // untouched
  EXPECT_TRUE(resp.headers.empty());

  // Probes stay open, with or without a token, right or wrong; only the
  // exact paths (a query string is not part of the path).
  EXPECT_TRUE(g.Authorize(Request("/healthz"), "", resp));
  EXPECT_TRUE(g.Authorize(Request("/readyz?verbose=1"), "Bearer wrong", resp));
  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/healthz/../metrics"), "", resp));
  EXPECT_FALSE(g.Authorize(Request("/healthzz"), "", resp));

  EXPECT_EQ(g.stats().missing.load(), 3u);
  EXPECT_EQ(g.stats().wrong.load(), 1u);
  EXPECT_EQ(g.stats().malformed.load(), 1u);
}

TEST(Guard, WithoutTokensIsOffAndFree) {
  Guard g("otlp_http", Tokens(""));
  EXPECT_FALSE(g.enabled());
  EXPECT_FALSE(g.Authorizer());  // no hook: the server checks nothing
  net::HttpResponse resp;
  EXPECT_TRUE(g.Authorize(Request("/v1/traces"), "", resp));
}

TEST(Guard, MetricsPerListenerAndReason) {
  Guard ingest("otlp_http", Tokens("it"));
  Guard query("query", Tokens(""));
  net::HttpResponse resp;
  ingest.Authorize(Request("/v1/traces"), "Bearer bad", resp);
  ingest.Authorize(Request("/v1/traces"), "Bearer bad", resp);
  std::string out;
  AppendMetrics(out, {&ingest, &query});
  EXPECT_EQ(out.find("# TYPE spanhouse_auth_failures_total counter\n"), 0u) << out;
  EXPECT_EQ(out.find("# TYPE", 1), std::string::npos) << out;  // one TYPE line
  EXPECT_NE(out.find("spanhouse_auth_failures_total{listener=\"otlp_http\",reason=\"wrong\"} 2\n"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find("spanhouse_auth_failures_total{listener=\"otlp_http\",reason=\"missing\"} 0\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("spanhouse_auth_failures_total{listener=\"query\",reason=\"malformed\"} 0\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace spanhouse::auth
