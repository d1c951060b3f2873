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

// A head with one Authorization header, and one without.
net::AuthorizationHeader One(std::string_view value) {
  return {value, 1};
}
const net::AuthorizationHeader kNoHeader{};

net::HttpRequest Request(const std::string& target) {
  net::HttpRequest r;
  r.method = "GET";
  r.target = target;
  return r;
}

TEST(TokenSet, ParsesCommaSeparatedLists) {
  EXPECT_TRUE(Tokens("").empty());
  EXPECT_TRUE(Tokens("  ").empty());
  EXPECT_EQ(Tokens("abcdefghijklmnop").size(), 1u);  // 16: the shortest allowed
  EXPECT_EQ(Tokens("abcdefghijklmnop, defghijklmnopqrs ,ghijklmnopqrstuv").size(), 3u);
  EXPECT_EQ(Tokens("a+b/c=d~e.f_g-h:!#").size(), 1u);
  EXPECT_EQ(Tokens(std::string(4096, 'x')).size(), 1u);
}

TEST(TokenSet, RejectsBadListsWithoutEchoingThem) {
  const std::string ok = "0123456789abcdef";  // 16 characters
  const std::vector<std::string> bad_lists = {ok + ",," + ok,
                                              ",",
                                              ok + ",",
                                              "has space" + ok,
                                              "tab\tin" + ok,
                                              std::string("nul\0x", 5) + ok,
                                              "\x7f" + ok,
                                              "caf\xc3\xa9" + ok,
                                              std::string(4097, 'x'),
                                              "tiny-token",
                                              ok + ",0123456789abcde"};
  for (const std::string& bad : bad_lists) {
    TokenSet t;
    Status st = TokenSet::Parse(bad, &t);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << bad << "' accepted";
    EXPECT_FALSE(TokenSet::Check(bad).empty()) << bad;
    if (bad.size() > 2) {
      EXPECT_EQ(st.message().find(bad), std::string::npos) << st.message();
    }
  }
  EXPECT_TRUE(TokenSet::Check(ok + ", " + ok).empty());
  EXPECT_NE(TokenSet::Check("0123456789abcde").find("shorter than 16"), std::string::npos);
  EXPECT_TRUE(TokenSet::Check("").empty());
}

TEST(TokenSet, VerifiesBearerCredentials) {
  const TokenSet t = Tokens("s3cret-ingest-token,second.token.abcdef");
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest-token"), Verdict::kOk);
  EXPECT_EQ(t.Verify("Bearer second.token.abcdef"), Verdict::kOk);
  EXPECT_EQ(t.Verify("bearer s3cret-ingest-token"), Verdict::kOk);  // the scheme is case-blind
  EXPECT_EQ(t.Verify("BEARER   s3cret-ingest-token  "), Verdict::kOk);

  EXPECT_EQ(t.Verify(""), Verdict::kMalformed);  // an empty header; none at all is Guard's
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest-tokeN"), Verdict::kWrong);  // tokens are not
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest-toke"), Verdict::kWrong);
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest-tokenX"), Verdict::kWrong);
  EXPECT_EQ(t.Verify("Bearer s3cret-ingest-token,second.token.abcdef"), Verdict::kWrong);
  EXPECT_EQ(t.Verify("Bearer x"), Verdict::kWrong);

  EXPECT_EQ(t.Verify("Basic czNjcmV0LWluZ2VzdA=="), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("s3cret-ingest-token"), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("Bearer"), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("Bearer "), Verdict::kMalformed);
  EXPECT_EQ(t.Verify("Bearers3cret-ingest-token"), Verdict::kMalformed);
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
  Guard g("query", Tokens("query-token-0123456"), {"/healthz", "/readyz"});
  ASSERT_TRUE(g.enabled());
  ASSERT_TRUE(g.Authorizer());

  net::HttpResponse resp;
  EXPECT_FALSE(g.Authorize(Request("/api/traces/ab"), kNoHeader, resp));
  EXPECT_EQ(resp.status, 401);
  EXPECT_EQ(Header(resp, "WWW-Authenticate"), "Bearer realm=\"spanhouse\"");
  EXPECT_NE(resp.body.find("missing bearer token"), std::string::npos) << resp.body;

  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/metrics"), One("Bearer nope"), resp));
  EXPECT_EQ(resp.status, 401);
  EXPECT_EQ(Header(resp, "WWW-Authenticate"),
            "Bearer realm=\"spanhouse\", error=\"invalid_token\"");
  EXPECT_NE(resp.body.find("wrong bearer token"), std::string::npos) << resp.body;
  EXPECT_EQ(resp.body.find("nope"), std::string::npos) << resp.body;

  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/metrics"), One("Basic abc"), resp));
  EXPECT_EQ(resp.status, 401);
  EXPECT_EQ(Header(resp, "WWW-Authenticate"),
            "Bearer realm=\"spanhouse\", error=\"invalid_request\"");

  resp = {};
  EXPECT_TRUE(g.Authorize(Request("/metrics"), One("Bearer query-token-0123456"), resp));
  EXPECT_EQ(resp.status, 200);  // untouched
  EXPECT_TRUE(resp.headers.empty());

  // Probes stay open, with or without a token, right or wrong; only the
  // exact paths (a query string is not part of the path).
  EXPECT_TRUE(g.Authorize(Request("/healthz"), kNoHeader, resp));
  EXPECT_TRUE(g.Authorize(Request("/readyz?verbose=1"), One("Bearer wrong"), resp));
  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/healthz/../metrics"), kNoHeader, resp));
  EXPECT_FALSE(g.Authorize(Request("/healthzz"), kNoHeader, resp));

  EXPECT_EQ(g.stats().missing.load(), 3u);
  EXPECT_EQ(g.stats().wrong.load(), 1u);
  EXPECT_EQ(g.stats().malformed.load(), 1u);

  // An empty header is there, just not a credential; two headers are
  // ambiguous, whatever they say.
  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/metrics"), One(""), resp));
  EXPECT_EQ(Header(resp, "WWW-Authenticate"),
            "Bearer realm=\"spanhouse\", error=\"invalid_request\"");
  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/metrics"), {"Bearer query-token-0123456", 2}, resp));
  EXPECT_EQ(Header(resp, "WWW-Authenticate"),
            "Bearer realm=\"spanhouse\", error=\"invalid_request\"");
  EXPECT_EQ(g.stats().missing.load(), 3u);
  EXPECT_EQ(g.stats().malformed.load(), 3u);
}

// A predicate opens more paths (serve: the web UI's files and pages); what it
// does not take stays guarded, and nothing it opens is counted as refused.
bool IsUiLike(std::string_view path) {
  return path == "/" || path.substr(0, 4) == "/ui/";
}

TEST(Guard, PredicateOpensItsPathsOnly) {
  Guard g("query", Tokens("query-token-0123456"), {"/healthz"}, IsUiLike);
  net::HttpResponse resp;
  EXPECT_TRUE(g.Authorize(Request("/"), kNoHeader, resp));
  EXPECT_TRUE(g.Authorize(Request("/ui/app.js"), One("Bearer wrong"), resp));
  EXPECT_TRUE(g.Authorize(Request("/healthz"), kNoHeader, resp));
  EXPECT_EQ(resp.status, 200);
  EXPECT_FALSE(g.Authorize(Request("/api/services"), kNoHeader, resp));
  EXPECT_EQ(resp.status, 401);
  resp = {};
  EXPECT_FALSE(g.Authorize(Request("/uix"), kNoHeader, resp));
  EXPECT_TRUE(g.Authorize(Request("/api/services"), One("Bearer query-token-0123456"), resp));
  EXPECT_EQ(g.stats().missing.load(), 2u);
  EXPECT_EQ(g.stats().wrong.load(), 0u);
}

TEST(Guard, WithoutTokensIsOffAndFree) {
  Guard g("otlp_http", Tokens(""));
  EXPECT_FALSE(g.enabled());
  EXPECT_FALSE(g.Authorizer());  // no hook: the server checks nothing
  net::HttpResponse resp;
  EXPECT_TRUE(g.Authorize(Request("/v1/traces"), kNoHeader, resp));
}

TEST(Guard, MetricsPerListenerAndReason) {
  Guard ingest("otlp_http", Tokens("ingest-token-0123456"));
  Guard query("query", Tokens(""));
  net::HttpResponse resp;
  ingest.Authorize(Request("/v1/traces"), One("Bearer bad"), resp);
  ingest.Authorize(Request("/v1/traces"), One("Bearer bad"), resp);
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
