// Tests for the serve configuration's YAML (server/config.h): ApplyYaml
// with every key, errors that name the offending dotted key, and the ToYaml
// -> ApplyYaml round trip (secrets redacted unless asked for).
#include <gtest/gtest.h>

#include <string>

#include "common/status.h"
#include "server/config.h"
#include "unit/server/config_test_util.h"

namespace spanhouse::server {
namespace {

TEST(Config, YamlSetsEveryKey) {
  const std::string yaml = R"(
data_dir: /var/lib/spanhouse
log_level: debug
otlp_http:
  listen: 0.0.0.0:14318
  max_body_bytes: 8MiB
  max_spans_per_request: 5000
  threads: 4
  tls_cert: /etc/spanhouse/otlp.crt
  tls_key: /etc/spanhouse/otlp.key
otlp_grpc:
  listen: 0.0.0.0:14317
zipkin:
  listen: ""
query:
  listen: "0.0.0.0:26686"
  tls_cert: /etc/spanhouse/query.crt
  tls_key: /etc/spanhouse/query.key
  timeout_s: 5
  max_rows: 5000
  max_trace_spans: 20000
auth:
  ingest_tokens: "ingest-token-0001,ingest+token+2/x="
  query_tokens: query-token-00001
queue:
  max_bytes: 768MiB
  wait_ms: 40
writer:
  max_rows: 5000
  max_bytes: 32MiB
  insert_rows: 15000
  max_age_ms: 250
  threads: 4
  sink: "null"
metrics:
  retention_days: 30
storage:
  cold_path: /mnt/slow/spanhouse
  move_after_s: 3600
  retention_s: 172800
  zstd_min_part_bytes: 16MiB
  trace_copy_s: 86400
  s3_endpoint: https://s3.example.test/spans/cold/
  s3_access_key_id: AKIAEXAMPLE
  s3_secret_access_key: s3cr3t/with+chars
  s3_region: eu-west-1
user_fields:
  also_well_known: shop,app.internal
filter:
  max_future_s: 60
  max_duration_s: 7200
  max_attributes: 32
  max_events: 0
  max_links: 8
  max_value_bytes: 4KiB
  max_key_bytes: 64
  max_span_names_per_service: 0
sampling:
  head:
    probability: 0.1
    services: checkout=0.5, frontend=1
  tail:
    policies: error; latency checkout 500ms; rate 20/s
    decision_wait_ms: 5000
    keep_ms: 120000
dependencies:
  interval_s: 15
  lag_s: 45
debug:
  fault_injection: true
durable:
  enabled: false
  dir: /var/spool/spanhouse
  max_bytes: 64MiB
  fsync: 50
dedup:
  enabled: false
  window_s: 900
  max_bytes: 720MiB
)";
  Config c;
  Status st = Apply(yaml, &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.data_dir, "/var/lib/spanhouse");
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.otlp_http.listen, "0.0.0.0:14318");
  EXPECT_EQ(c.otlp_http.max_body_bytes, 8ull << 20);
  EXPECT_EQ(c.otlp_http.threads, 4);
  EXPECT_EQ(c.query.listen, "0.0.0.0:26686");
  EXPECT_EQ(c.otlp_http.tls_cert, "/etc/spanhouse/otlp.crt");
  EXPECT_EQ(c.query.tls_key, "/etc/spanhouse/query.key");
  EXPECT_EQ(c.auth.ingest_tokens, "ingest-token-0001,ingest+token+2/x=");
  EXPECT_EQ(c.auth.query_tokens, "query-token-00001");
  EXPECT_EQ(c.queue.max_bytes, 768ull << 20);
  EXPECT_EQ(c.queue.wait_ms, 40u);
  EXPECT_EQ(c.writer.max_rows, 5000u);
  EXPECT_EQ(c.writer.max_bytes, 32ull << 20);
  EXPECT_EQ(c.writer.insert_rows, 15000u);
  EXPECT_EQ(c.writer.max_age_ms, 250u);
  EXPECT_EQ(c.writer.threads, 4);
  EXPECT_EQ(c.writer.sink, "null");
  EXPECT_EQ(c.metrics.retention_days, 30u);
  EXPECT_EQ(c.storage.cold_path, "/mnt/slow/spanhouse");
  EXPECT_EQ(c.storage.move_after_s, 3600u);
  EXPECT_EQ(c.storage.retention_s, 172800u);
  EXPECT_EQ(c.storage.zstd_min_part_bytes, 16ull << 20);
  EXPECT_EQ(c.storage.trace_copy_s, 86400u);
  EXPECT_EQ(c.storage.s3_endpoint, "https://s3.example.test/spans/cold/");
  EXPECT_EQ(c.storage.s3_access_key_id, "AKIAEXAMPLE");
  EXPECT_EQ(c.storage.s3_secret_access_key, "s3cr3t/with+chars");
  EXPECT_EQ(c.storage.s3_region, "eu-west-1");
  EXPECT_EQ(c.user_fields.also_well_known, "shop,app.internal");
  EXPECT_EQ(c.otlp_http.max_spans_per_request, 5000u);
  EXPECT_EQ(c.filter.max_future_s, 60u);
  EXPECT_EQ(c.filter.max_duration_s, 7200u);
  EXPECT_EQ(c.filter.max_attributes, 32u);
  EXPECT_EQ(c.filter.max_events, 0u);
  EXPECT_EQ(c.filter.max_links, 8u);
  EXPECT_EQ(c.filter.max_value_bytes, 4096u);
  EXPECT_EQ(c.filter.max_key_bytes, 64u);
  EXPECT_EQ(c.filter.max_span_names_per_service, 0u);
  EXPECT_EQ(c.dependencies.interval_s, 15u);
  EXPECT_EQ(c.dependencies.lag_s, 45u);
  EXPECT_DOUBLE_EQ(c.sampling.head.probability, 0.1);
  EXPECT_EQ(c.sampling.head.services, "checkout=0.5, frontend=1");
  EXPECT_EQ(c.sampling.tail.policies, "error; latency checkout 500ms; rate 20/s");
  EXPECT_EQ(c.sampling.tail.decision_wait_ms, 5000u);
  EXPECT_EQ(c.sampling.tail.keep_ms, 120000u);
  EXPECT_TRUE(c.debug.fault_injection);
  EXPECT_FALSE(Validate(c).ok()) << "tail sampling needs the durable queue this turns off";
  Config with_queue = c;
  with_queue.durable.enabled = true;
  EXPECT_TRUE(Validate(with_queue).ok()) << Validate(with_queue).message();

  // The same through ApplySetting, key by key.
  Config d;
  for (const auto& [k, v] : ValidValues()) ASSERT_TRUE(ApplySetting(k, v, &d).ok()) << k;
  ExpectSameConfig(d, c);
}

TEST(Config, YamlSetsOnlyWhatItNames) {
  Config c;
  ASSERT_TRUE(Apply("otlp_http:\n  threads: 8\n", &c).ok());
  Config expected;
  expected.otlp_http.threads = 8;
  ExpectSameConfig(c, expected);
}

TEST(Config, YamlFlowMappingsWork) {
  Config c;
  ASSERT_TRUE(Apply("writer: {max_rows: 10, max_age_ms: 20}\n", &c).ok());
  EXPECT_EQ(c.writer.max_rows, 10u);
  EXPECT_EQ(c.writer.max_age_ms, 20u);
}

TEST(Config, EmptyYamlKeepsDefaults) {
  for (const std::string yaml : {"", "\n\n", "# only a comment\n", "---\n", "~\n"}) {
    Config c;
    Status st = Apply(yaml, &c);
    EXPECT_TRUE(st.ok()) << "'" << yaml << "': " << st.message();
    ExpectSameConfig(c, Config());
  }
}

TEST(Config, InvalidYamlIsAnError) {
  for (const std::string yaml : {"otlp_http: [", "otlp_http:\n  listen: \"unterminated\n",
                                 "a: b: c\n", "{\n", "data_dir: x\n  bad_indent: y\n"}) {
    Config c;
    Status st = Apply(yaml, &c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << yaml << "' accepted";
    EXPECT_NE(st.message().find("config"), std::string::npos) << st.message();
  }
}

TEST(Config, TopLevelMustBeAMapping) {
  ExpectYamlError("- data_dir\n- x\n", "top level");
  ExpectYamlError("just a scalar\n", "top level");
}

TEST(Config, UnknownTopLevelKeyIsNamed) {
  ExpectYamlError("data_dri: /x\n", "'data_dri'");
  ExpectYamlError("exporters:\n  foo: 1\n", "'exporters'");
}

TEST(Config, UnknownNestedKeyIsNamedWithItsFullPath) {
  ExpectYamlError("otlp_http:\n  listn: 0.0.0.0:4318\n", "'otlp_http.listn'");
  ExpectYamlError("writer:\n  max_rows: 10\n  flush: 1s\n", "'writer.flush'");
  ExpectYamlError("queue:\n  extra:\n    deeper: 1\n", "'queue.extra'");
  // A key of one section under another.
  ExpectYamlError("query:\n  threads: 2\n", "'query.threads'");
}

TEST(Config, SectionGivenAsAScalarIsNamed) {
  ExpectYamlError("otlp_http: 5\n", "'otlp_http'");
  ExpectYamlError("writer: fast\n", "'writer'");
  ExpectYamlError("queue:\n", "'queue'");  // null
  ExpectYamlError("query: [1, 2]\n", "'query'");
}

TEST(Config, LeafGivenAMappingOrListIsNamed) {
  ExpectYamlError("log_level:\n  a: b\n", "'log_level'");
  ExpectYamlError("otlp_http:\n  listen: [a, b]\n", "'otlp_http.listen'");
  ExpectYamlError("data_dir: ~\n", "'data_dir'");
}

TEST(Config, BadValueInYamlNamesTheKey) {
  ExpectYamlError("log_level: loud\n", "'log_level'");
  ExpectYamlError("otlp_http:\n  listen: localhost\n", "'otlp_http.listen'");
  ExpectYamlError("otlp_http:\n  max_body_bytes: 20XB\n", "'otlp_http.max_body_bytes'");
  ExpectYamlError("queue:\n  max_bytes: -1\n", "'queue.max_bytes'");
  ExpectYamlError("writer:\n  max_age_ms: 0\n", "'writer.max_age_ms'");
  ExpectYamlError("query:\n  listen: 127.0.0.1:70000\n", "'query.listen'");
}

// --print-config shows that secrets are set, never what they are.
TEST(Config, ToYamlRedactsSecretsByDefault) {
  Config c;
  ASSERT_TRUE(ApplySetting("auth.ingest_tokens", "ingest-token-0001,ingest-token-0002", &c).ok());
  ASSERT_TRUE(ApplySetting("auth.query_tokens", "query-token-00001", &c).ok());
  ASSERT_TRUE(ApplySetting("storage.s3_access_key_id", "AKIDEXAMPLE", &c).ok());
  ASSERT_TRUE(ApplySetting("storage.s3_secret_access_key", "s3cr3t/with+chars", &c).ok());
  const std::string yaml = ToYaml(c);
  for (const std::string secret :
       {"ingest-token-0001", "ingest-token-0002", "query-token-00001", "s3cr3t/with+chars"}) {
    EXPECT_EQ(yaml.find(secret), std::string::npos) << secret << " printed:\n" << yaml;
  }
  EXPECT_NE(yaml.find("<redacted, 2 tokens>"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("<redacted, 1 token>"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("<redacted>"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("AKIDEXAMPLE"), std::string::npos) << yaml;  // an id, not a secret
  // Unset secrets stay empty, so "nothing configured" still shows.
  const std::string defaults = ToYaml(Config());
  EXPECT_EQ(defaults.find("redacted"), std::string::npos) << defaults;
  // In clear on request, for the round trip.
  EXPECT_NE(ToYaml(c, Secrets::kShow).find("query-token-00001"), std::string::npos);
}

TEST(Config, ToYamlOfDefaultsRoundTrips) {
  const std::string yaml = ToYaml(Config(), Secrets::kShow);
  Config back;
  Status st = Apply(yaml, &back);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << yaml;
  ExpectSameConfig(back, Config());
}

TEST(Config, ToYamlOfEveryKeyChangedRoundTrips) {
  Config c;
  for (const auto& [k, v] : ValidValues()) ASSERT_TRUE(ApplySetting(k, v, &c).ok()) << k;
  const std::string yaml = ToYaml(c, Secrets::kShow);
  // Every key appears in the output.
  for (const auto& [k, v] : ValidValues()) {
    const std::string leaf = k.substr(k.find('.') + 1);
    EXPECT_NE(yaml.find(leaf + ": "), std::string::npos) << k << "\n" << yaml;
  }
  // Start from a config that differs everywhere, so an unapplied key shows.
  Config back;
  Status st = ApplyYaml(yaml, &back);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << yaml;
  ExpectSameConfig(back, c);
  EXPECT_EQ(ToYaml(back, Secrets::kShow), yaml);
}

TEST(Config, ToYamlRoundTripsExtremeValues) {
  Config c;
  ASSERT_TRUE(ApplySetting("otlp_http.max_body_bytes", "1GiB", &c).ok());
  ASSERT_TRUE(ApplySetting("queue.max_bytes", "1024GiB", &c).ok());
  ASSERT_TRUE(ApplySetting("writer.max_bytes", "4GiB", &c).ok());
  ASSERT_TRUE(ApplySetting("writer.max_rows", "100000000", &c).ok());
  ASSERT_TRUE(ApplySetting("writer.max_age_ms", "3600000", &c).ok());
  ASSERT_TRUE(ApplySetting("otlp_http.threads", "64", &c).ok());
  ASSERT_TRUE(ApplySetting("writer.threads", "16", &c).ok());
  ASSERT_TRUE(ApplySetting("writer.sink", "null", &c).ok());  // a YAML null if unquoted
  ASSERT_TRUE(ApplySetting("data_dir", "/srv/span house/data dir", &c).ok());
  ASSERT_TRUE(ApplySetting("log_level", "off", &c).ok());
  const std::string yaml = ToYaml(c, Secrets::kShow);
  Config back;
  Status st = Apply(yaml, &back);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << yaml;
  ExpectSameConfig(back, c);
}

// IPv6 listen addresses are accepted (ApplySetting, net::SplitHostPort), so
// `spanhouse serve --print-config` must print them in a form ApplyYaml reads
// back. ToYaml writes values unquoted, and a plain scalar starting with '['
// is a YAML flow sequence.
TEST(Config, ToYamlRoundTripsIpv6ListenAddresses) {
  Config c;
  ASSERT_TRUE(ApplySetting("otlp_http.listen", "[::]:4318", &c).ok());
  ASSERT_TRUE(ApplySetting("query.listen", "[::1]:16686", &c).ok());
  const std::string yaml = ToYaml(c, Secrets::kShow);
  Config back;
  Status st = Apply(yaml, &back);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << yaml;
  ExpectSameConfig(back, c);
}

// data_dir accepts any non-empty text; ToYaml must quote what YAML would
// otherwise read differently (a " #" starts a comment, a leading quote or
// '&' / '*' / '!' / '{' changes the scalar's meaning).
TEST(Config, ToYamlRoundTripsDataDirsWithYamlSyntax) {
  std::string failures;
  for (const std::string dir : {"/srv/spans #2", "'quoted'", "\"dq\"", "&anchor", "*alias", "!tag",
                                "{x}", "a: b", "- item", "null", "~", "yes", "123", "C:\\data"}) {
    Config c;
    ASSERT_TRUE(ApplySetting("data_dir", dir, &c).ok()) << dir;
    const std::string yaml = ToYaml(c, Secrets::kShow);
    Config back;
    Status st = Apply(yaml, &back);
    if (!st.ok()) {
      failures += "  '" + dir + "' -> error: " + st.message() + "\n";
    } else if (back.data_dir != dir) {
      failures += "  '" + dir + "' -> read back as '" + back.data_dir + "'\n";
    }
  }
  EXPECT_TRUE(failures.empty()) << "data_dir values that do not survive ToYaml -> ApplyYaml:\n"
                                << failures;
}

// writer.sink takes "chdb" or "null"; in YAML a plain `null` is the null
// value, not the string, so `sink: null` as a user would write it must work.
TEST(Config, NullSinkCanBeWrittenPlainInYaml) {
  for (const std::string yaml : {"writer:\n  sink: null\n", "writer:\n  sink: \"null\"\n"}) {
    Config c;
    Status st = Apply(yaml, &c);
    EXPECT_TRUE(st.ok()) << yaml << st.message();
    EXPECT_EQ(c.writer.sink, "null") << yaml;
  }
}

}  // namespace
}  // namespace spanhouse::server
