// server::ListenerSecurity: guards and TLS contexts from the configuration,
// start-up errors for unreadable certificates, and the warnings about
// listeners open beyond this machine.
#include "server/listener_security.h"

#include <gtest/gtest.h>

#include <string>

namespace spanhouse::server {
namespace {

TEST(ListenerSecurity, DefaultsAreOpenPlainAndQuiet) {
  Config c;
  ListenerSecurity s;
  Status st = ListenerSecurity::Load(c, &s);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(s.ingest->enabled());
  EXPECT_FALSE(s.query->enabled());
  EXPECT_EQ(s.ingest_tls, nullptr);
  EXPECT_EQ(s.query_tls, nullptr);
  EXPECT_TRUE(ListenerSecurity::Warnings(c).empty());
  std::string metrics;
  s.AppendMetrics(metrics);
  EXPECT_NE(metrics.find("spanhouse_auth_failures_total{listener=\"query\",reason=\"wrong\"} 0"),
            std::string::npos)
      << metrics;
}

TEST(ListenerSecurity, TokensMakeGuardsWithOpenProbes) {
  Config c;
  c.auth.ingest_tokens = "ingest-token-0001, ingest-token-0002";
  c.auth.query_tokens = "query-token-00001";
  ListenerSecurity s;
  ASSERT_TRUE(ListenerSecurity::Load(c, &s).ok());
  ASSERT_TRUE(s.ingest->enabled());
  ASSERT_TRUE(s.query->enabled());
  net::HttpRequest probe;
  probe.method = "GET";
  probe.target = "/healthz";
  net::HttpResponse resp;
  EXPECT_TRUE(s.query->Authorize(probe, {}, resp));
  probe.target = "/readyz";
  EXPECT_TRUE(s.query->Authorize(probe, {}, resp));
  probe.target = "/metrics";
  EXPECT_FALSE(s.query->Authorize(probe, {}, resp));
  EXPECT_TRUE(s.query->Authorize(probe, {"Bearer query-token-00001", 1}, resp));
  EXPECT_FALSE(s.query->Authorize(probe, {"Bearer ingest-token-0001", 1},
                                  resp));  // not the query listener's
  probe.target = "/healthz";               // the ingest listener has no open paths
  EXPECT_FALSE(s.ingest->Authorize(probe, {}, resp));
  EXPECT_TRUE(s.ingest->Authorize(probe, {"Bearer ingest-token-0002", 1}, resp));
}

TEST(ListenerSecurity, UnreadableCertificateFailsNamingListenerAndFile) {
  Config c;
  c.query.tls_cert = "/nonexistent/spanhouse-test/cert.pem";
  c.query.tls_key = "/nonexistent/spanhouse-test/key.pem";
  ListenerSecurity s;
  Status st = ListenerSecurity::Load(c, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("query"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("/nonexistent/spanhouse-test/cert.pem"), std::string::npos)
      << st.message();
}

TEST(ListenerSecurity, WarnsAboutListenersOpenBeyondLoopback) {
  Config c;
  c.otlp_http.listen = "0.0.0.0:4318";
  std::vector<std::string> w = ListenerSecurity::Warnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("otlp_http listens on 0.0.0.0:4318"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("auth.ingest_tokens is empty"), std::string::npos) << w[0];

  c.query.listen = "[::]:16686";
  c.auth.ingest_tokens = "ingest-token-0001";
  w = ListenerSecurity::Warnings(c);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("clear text"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("auth.query_tokens is empty"), std::string::npos) << w[1];

  c.auth.query_tokens = "query-token-00001";
  c.otlp_http.tls_cert = c.query.tls_cert = "cert.pem";
  c.otlp_http.tls_key = c.query.tls_key = "key.pem";
  EXPECT_TRUE(ListenerSecurity::Warnings(c).empty());

  Config local;
  local.otlp_http.listen = "localhost:4318";
  local.query.listen = "[::1]:16686";
  EXPECT_TRUE(ListenerSecurity::Warnings(local).empty());
  // The other receivers share the ingest tokens; one turned off warns of nothing.
  local.zipkin.listen = "0.0.0.0:9411";
  w = ListenerSecurity::Warnings(local);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("zipkin listens on 0.0.0.0:9411"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("auth.ingest_tokens is empty"), std::string::npos) << w[0];
  local.zipkin.listen = "";
  local.otlp_grpc.listen = "0.0.0.0:4317";
  w = ListenerSecurity::Warnings(local);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("otlp_grpc listens on 0.0.0.0:4317"), std::string::npos) << w[0];
}

}  // namespace
}  // namespace spanhouse::server
