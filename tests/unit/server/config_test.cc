// Tests for the serve configuration (server/config.h): defaults, YAML with
// every key, errors that name the offending dotted key, size parsing,
// cross-field validation, the ToYaml -> ApplyYaml round trip and the
// environment-variable table.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "server/config.h"

namespace spanhouse::server {
namespace {

// Every field, one by one, so a failure names the field.
void ExpectSameConfig(const Config& a, const Config& b) {
  EXPECT_EQ(a.data_dir, b.data_dir);
  EXPECT_EQ(a.log_level, b.log_level);
  EXPECT_EQ(a.sampling.head.probability, b.sampling.head.probability);
  EXPECT_EQ(a.sampling.head.services, b.sampling.head.services);
  EXPECT_EQ(a.sampling.tail.policies, b.sampling.tail.policies);
  EXPECT_EQ(a.sampling.tail.decision_wait_ms, b.sampling.tail.decision_wait_ms);
  EXPECT_EQ(a.sampling.tail.keep_ms, b.sampling.tail.keep_ms);
  EXPECT_EQ(a.otlp_http.listen, b.otlp_http.listen);
  EXPECT_EQ(a.otlp_http.max_body_bytes, b.otlp_http.max_body_bytes);
  EXPECT_EQ(a.otlp_http.max_spans_per_request, b.otlp_http.max_spans_per_request);
  EXPECT_EQ(a.otlp_http.threads, b.otlp_http.threads);
  EXPECT_EQ(a.otlp_http.tls_cert, b.otlp_http.tls_cert);
  EXPECT_EQ(a.otlp_http.tls_key, b.otlp_http.tls_key);
  EXPECT_EQ(a.otlp_grpc.listen, b.otlp_grpc.listen);
  EXPECT_EQ(a.zipkin.listen, b.zipkin.listen);
  EXPECT_EQ(a.query.listen, b.query.listen);
  EXPECT_EQ(a.query.tls_cert, b.query.tls_cert);
  EXPECT_EQ(a.query.tls_key, b.query.tls_key);
  EXPECT_EQ(a.query.timeout_s, b.query.timeout_s);
  EXPECT_EQ(a.query.max_rows, b.query.max_rows);
  EXPECT_EQ(a.query.max_trace_spans, b.query.max_trace_spans);
  EXPECT_EQ(a.auth.ingest_tokens, b.auth.ingest_tokens);
  EXPECT_EQ(a.auth.query_tokens, b.auth.query_tokens);
  EXPECT_EQ(a.queue.max_bytes, b.queue.max_bytes);
  EXPECT_EQ(a.queue.wait_ms, b.queue.wait_ms);
  EXPECT_EQ(a.writer.max_rows, b.writer.max_rows);
  EXPECT_EQ(a.writer.max_bytes, b.writer.max_bytes);
  EXPECT_EQ(a.writer.insert_rows, b.writer.insert_rows);
  EXPECT_EQ(a.writer.max_age_ms, b.writer.max_age_ms);
  EXPECT_EQ(a.writer.threads, b.writer.threads);
  EXPECT_EQ(a.writer.sink, b.writer.sink);
  EXPECT_EQ(a.metrics.retention_days, b.metrics.retention_days);
  EXPECT_EQ(a.storage.cold_path, b.storage.cold_path);
  EXPECT_EQ(a.storage.move_after_s, b.storage.move_after_s);
  EXPECT_EQ(a.storage.retention_s, b.storage.retention_s);
  EXPECT_EQ(a.storage.zstd_min_part_bytes, b.storage.zstd_min_part_bytes);
  EXPECT_EQ(a.storage.s3_endpoint, b.storage.s3_endpoint);
  EXPECT_EQ(a.storage.s3_access_key_id, b.storage.s3_access_key_id);
  EXPECT_EQ(a.storage.s3_secret_access_key, b.storage.s3_secret_access_key);
  EXPECT_EQ(a.storage.s3_region, b.storage.s3_region);
  EXPECT_EQ(a.user_fields.also_well_known, b.user_fields.also_well_known);
  EXPECT_EQ(a.filter.max_future_s, b.filter.max_future_s);
  EXPECT_EQ(a.filter.max_duration_s, b.filter.max_duration_s);
  EXPECT_EQ(a.filter.max_attributes, b.filter.max_attributes);
  EXPECT_EQ(a.filter.max_events, b.filter.max_events);
  EXPECT_EQ(a.filter.max_links, b.filter.max_links);
  EXPECT_EQ(a.filter.max_value_bytes, b.filter.max_value_bytes);
  EXPECT_EQ(a.filter.max_key_bytes, b.filter.max_key_bytes);
  EXPECT_EQ(a.filter.max_span_names_per_service, b.filter.max_span_names_per_service);
  EXPECT_EQ(a.dependencies.interval_s, b.dependencies.interval_s);
  EXPECT_EQ(a.dependencies.lag_s, b.dependencies.lag_s);
  EXPECT_EQ(a.debug.fault_injection, b.debug.fault_injection);
  EXPECT_EQ(a.durable.enabled, b.durable.enabled);
  EXPECT_EQ(a.durable.dir, b.durable.dir);
  EXPECT_EQ(a.durable.max_bytes, b.durable.max_bytes);
  EXPECT_EQ(a.durable.fsync, b.durable.fsync);
  EXPECT_EQ(a.dedup.enabled, b.dedup.enabled);
  EXPECT_EQ(a.dedup.window_s, b.dedup.window_s);
  EXPECT_EQ(a.dedup.max_bytes, b.dedup.max_bytes);
}

// A valid value for every settable key, none of them the default.
const std::map<std::string, std::string>& ValidValues() {
  static const std::map<std::string, std::string> v = {
      {"data_dir", "/var/lib/spanhouse"},
      {"log_level", "debug"},
      {"otlp_http.listen", "0.0.0.0:14318"},
      {"otlp_http.max_body_bytes", "8MiB"},
      {"otlp_http.max_spans_per_request", "5000"},
      {"otlp_http.threads", "4"},
      {"otlp_http.tls_cert", "/etc/spanhouse/otlp.crt"},
      {"otlp_http.tls_key", "/etc/spanhouse/otlp.key"},
      {"otlp_grpc.listen", "0.0.0.0:14317"},
      {"zipkin.listen", ""},
      {"query.listen", "0.0.0.0:26686"},
      {"query.tls_cert", "/etc/spanhouse/query.crt"},
      {"query.tls_key", "/etc/spanhouse/query.key"},
      {"query.timeout_s", "5"},
      {"query.max_rows", "5000"},
      {"query.max_trace_spans", "20000"},
      {"auth.ingest_tokens", "ingest-token-0001,ingest+token+2/x="},
      {"auth.query_tokens", "query-token-00001"},
      {"queue.max_bytes", "768MiB"},
      {"queue.wait_ms", "40"},
      {"writer.max_rows", "5000"},
      {"writer.max_bytes", "32MiB"},
      {"writer.insert_rows", "15000"},
      {"writer.max_age_ms", "250"},
      {"writer.threads", "4"},
      {"writer.sink", "null"},
      {"metrics.retention_days", "30"},
      {"storage.cold_path", "/mnt/slow/spanhouse"},
      {"storage.move_after_s", "3600"},
      {"storage.retention_s", "172800"},
      {"storage.zstd_min_part_bytes", "16MiB"},
      {"storage.s3_endpoint", "https://s3.example.test/spans/cold/"},
      {"storage.s3_access_key_id", "AKIAEXAMPLE"},
      {"storage.s3_secret_access_key", "s3cr3t/with+chars"},
      {"storage.s3_region", "eu-west-1"},
      {"user_fields.also_well_known", "shop,app.internal"},
      {"filter.max_future_s", "60"},
      {"filter.max_duration_s", "7200"},
      {"filter.max_attributes", "32"},
      {"filter.max_events", "0"},
      {"filter.max_links", "8"},
      {"filter.max_value_bytes", "4KiB"},
      {"filter.max_key_bytes", "64"},
      {"filter.max_span_names_per_service", "0"},
      {"sampling.head.probability", "0.1"},
      {"sampling.head.services", "checkout=0.5, frontend=1"},
      {"sampling.tail.policies", "error; latency checkout 500ms; rate 20/s"},
      {"sampling.tail.decision_wait_ms", "5000"},
      {"sampling.tail.keep_ms", "120000"},
      {"dependencies.interval_s", "15"},
      {"dependencies.lag_s", "45"},
      {"debug.fault_injection", "true"},
      {"durable.enabled", "false"},
      {"durable.dir", "/var/spool/spanhouse"},
      {"durable.max_bytes", "64MiB"},
      {"durable.fsync", "50"},
      {"dedup.enabled", "false"},
      {"dedup.window_s", "900"},
      {"dedup.max_bytes", "720MiB"},
      {"secondary.type", "chdb"},
      {"secondary.database", "spans_copy_2"},
      {"storage.engine", "clickhouse"},
      {"clickhouse.shards", "http://ch1:8123,http://ch2:8123;https://ch3:8443"},
      {"clickhouse.tls_ca_file", "/etc/spanhouse/clickhouse-ca.pem"},
      {"clickhouse.compression", "gzip"},
      {"clickhouse.user", "spanhouse"},
      {"clickhouse.password", "s3cret"},
      {"clickhouse.database", "traces"},
      {"clickhouse.cluster", "spans_cluster"},
      {"clickhouse.timeout_s", "30"},
      {"clickhouse.run_jobs", "false"},
      {"query.read_from", "opensearch"},
      {"query.fallback", "false"},
      {"query.fallback_after_ms", "750"},
      {"query.recent_max_bytes", "16MiB"},
      {"query.recent_disk_bytes", "512MiB"},
      {"query.recent_max_age_s", "90"},
      {"opensearch.urls", "http://os1:9200, https://os2:9200"},
      {"opensearch.index_prefix", "team-a"},
      {"opensearch.user", "jaeger"},
      {"opensearch.password", "pw"},
      {"opensearch.tls_ca_file", "/etc/spanhouse/os-ca.pem"},
      {"opensearch.timeout_s", "10"},
      {"opensearch.bulk_spans", "1000"},
      {"opensearch.workers", "4"},
      {"opensearch.queue_bytes", "32MiB"},
      {"opensearch.create_templates", "false"},
      {"opensearch.shards", "3"},
      {"opensearch.replicas", "0"},
  };
  return v;
}

// Applies YAML to a default config; returns the status.
Status Apply(const std::string& yaml, Config* cfg) {
  *cfg = Config();
  return ApplyYaml(yaml, cfg);
}

// The error for `yaml` must be kInvalidArgument and mention `needle`.
void ExpectYamlError(const std::string& yaml, const std::string& needle) {
  Config cfg;
  Status st = ApplyYaml(yaml, &cfg);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "yaml:\n" << yaml;
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << "message '" << st.message() << "' does not name '" << needle << "'; yaml:\n"
      << yaml;
}

void ExpectBadSetting(const std::string& key, const std::string& value) {
  Config cfg;
  const Config before = cfg;
  Status st = ApplySetting(key, value, &cfg);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << key << " = '" << value << "' accepted";
  EXPECT_NE(st.message().find("'" + key + "'"), std::string::npos)
      << key << " = '" << value << "': message '" << st.message() << "'";
  ExpectSameConfig(cfg, before);  // a rejected value changes nothing
}

void ExpectGoodSetting(const std::string& key, const std::string& value) {
  Config cfg;
  Status st = ApplySetting(key, value, &cfg);
  EXPECT_TRUE(st.ok()) << key << " = '" << value << "': " << st.message();
}

// The keys ToYaml prints, as dotted names.
std::vector<std::string> KeysOf(const std::string& yaml) {
  std::vector<std::string> keys;
  std::string section;
  size_t pos = 0;
  while (pos < yaml.size()) {
    size_t end = yaml.find('\n', pos);
    if (end == std::string::npos) end = yaml.size();
    const std::string line = yaml.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (line.rfind("  ", 0) == 0) {
      keys.push_back(section + "." + line.substr(2, colon - 2));
    } else if (colon + 1 == line.size()) {
      section = line.substr(0, colon);
    } else {
      keys.push_back(line.substr(0, colon));
    }
  }
  return keys;
}

TEST(Config, EveryKeyIsSettableAndCoveredHere) {
  const std::vector<std::string> keys = KeysOf(ToYaml(Config()));
  ASSERT_GE(keys.size(), 10u);
  EXPECT_EQ(keys.size(), ValidValues().size());
  for (const std::string& key : keys) {
    auto it = ValidValues().find(key);
    ASSERT_NE(it, ValidValues().end()) << "key '" << key << "' has no test value";
    Config c;
    Status st = ApplySetting(key, it->second, &c);
    EXPECT_TRUE(st.ok()) << key << ": " << st.message();
    EXPECT_NE(ToYaml(c), ToYaml(Config())) << key << " = " << it->second << " is the default";
  }
}

TEST(Config, ClickHouseShardsParseAndValidate) {
  EXPECT_EQ(ClickHouseShards("http://a:1, http://b:2;http://c:3"),
            (std::vector<std::vector<std::string>>{{"http://a:1", "http://b:2"}, {"http://c:3"}}));
  EXPECT_TRUE(ClickHouseShards("").empty());
  Config c;
  for (const char* bad : {"ch1:8123", "http://a:1;;http://b:2", "ftp://a", "http://a:1,http://",
                          "https://", "http://a:1/?x=1", "http://a b"}) {
    EXPECT_FALSE(ApplySetting("clickhouse.shards", bad, &c).ok()) << bad;
  }
  // The engine without a server; several shards without the cluster's name;
  // a second embedded sink beside a server.
  c = Config();
  ASSERT_TRUE(ApplySetting("storage.engine", "clickhouse", &c).ok());
  Status st = Validate(c);
  EXPECT_NE(st.message().find("clickhouse.shards"), std::string::npos) << st.message();
  ASSERT_TRUE(ApplySetting("clickhouse.shards", "http://a:1;http://b:2", &c).ok());
  st = Validate(c);
  EXPECT_NE(st.message().find("clickhouse.cluster"), std::string::npos) << st.message();
  ASSERT_TRUE(ApplySetting("clickhouse.shards", "http://a:1", &c).ok());
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  ASSERT_TRUE(ApplySetting("secondary.type", "chdb", &c).ok());
  EXPECT_FALSE(Validate(c).ok());
  // YAML: a list of shards, each a list of replicas (or one URL).
  ASSERT_TRUE(Apply(R"(
storage:
  engine: clickhouse
clickhouse:
  cluster: spans
  password: pw
  shards:
    - [http://a1:8123, http://a2:8123]
    - http://b1:8123
)",
                    &c)
                  .ok());
  EXPECT_EQ(c.clickhouse.shards, "http://a1:8123,http://a2:8123;http://b1:8123");
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  EXPECT_EQ(ToYaml(c).find("pw"), std::string::npos);  // the password is redacted
  EXPECT_FALSE(Apply("clickhouse:\n  shards:\n    - {a: 1}\n", &c).ok());
}

TEST(Config, Defaults) {
  Config c;
  EXPECT_EQ(c.data_dir, "./data");
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.otlp_http.listen, "127.0.0.1:4318");
  EXPECT_EQ(c.otlp_http.max_body_bytes, 20ull << 20);
  EXPECT_EQ(c.otlp_http.threads, 2);
  EXPECT_EQ(c.otlp_http.max_spans_per_request, 100000u);
  EXPECT_EQ(c.otlp_grpc.listen, "127.0.0.1:4317");
  EXPECT_EQ(c.zipkin.listen, "127.0.0.1:9411");
  EXPECT_EQ(c.filter.max_future_s, 3600u);
  EXPECT_EQ(c.filter.max_duration_s, 86400u);
  EXPECT_EQ(c.filter.max_attributes, 128u);
  EXPECT_EQ(c.filter.max_value_bytes, 65536u);
  EXPECT_EQ(c.filter.max_span_names_per_service, 1000u);
  EXPECT_EQ(c.query.listen, "127.0.0.1:16686");
  EXPECT_EQ(c.queue.max_bytes, 256ull << 20);
  EXPECT_EQ(c.writer.max_rows, 200000u);
  EXPECT_EQ(c.writer.insert_rows, 400000u);
  EXPECT_EQ(c.writer.max_bytes, 128ull << 20);
  EXPECT_EQ(c.writer.max_age_ms, 3000u);
  EXPECT_EQ(c.writer.threads, 1);
  EXPECT_EQ(c.writer.sink, "chdb");
  EXPECT_FALSE(c.debug.fault_injection);
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
}

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

TEST(Config, BadAddresses) {
  for (const std::string key : {"otlp_http.listen", "query.listen"}) {
    for (const std::string v : {"localhost", "127.0.0.1", "localhost:", ":4318", "host:70000",
                                "host:65536", "host:-1", "host:abc", "host:43 18", ""}) {
      ExpectBadSetting(key, v);
    }
    for (const std::string v :
         {"localhost:4318", "0.0.0.0:0", "127.0.0.1:65535", "[::1]:4318", "[::]:16686"}) {
      ExpectGoodSetting(key, v);
    }
  }
}

// The other receivers' addresses may also be empty (that receiver off);
// no two listeners may share one.
TEST(Config, OptionalReceiverAddresses) {
  for (const std::string key : {"otlp_grpc.listen", "zipkin.listen"}) {
    for (const std::string v : {"localhost", "host:70000", ":9411"}) ExpectBadSetting(key, v);
    for (const std::string v : {"", "0.0.0.0:0", "[::1]:9411"}) ExpectGoodSetting(key, v);
  }
  Config c;
  c.zipkin.listen = c.otlp_http.listen;
  Status st = Validate(c);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("otlp_http.listen and zipkin.listen"), std::string::npos)
      << st.message();
  c.zipkin.listen = "";
  c.otlp_grpc.listen = "";
  EXPECT_TRUE(Validate(c).ok());
}

TEST(Config, SamplingProbabilities) {
  for (const std::string v : {"", "-0.1", "1.5", "ten", "0.1x", "nan", "inf"}) {
    ExpectBadSetting("sampling.head.probability", v);
  }
  for (const std::string v : {"0", "1", "0.001", "1e-3"}) {
    ExpectGoodSetting("sampling.head.probability", v);
  }
  for (const std::string v : {"checkout", "=0.5", "a=2", "a=0.1,a=0.2", "a=0.1;b=1", "a=x"}) {
    ExpectBadSetting("sampling.head.services", v);
  }
  std::vector<std::pair<std::string, double>> parsed;
  ASSERT_TRUE(ParseServiceProbabilities(" checkout = 0.5,frontend=1 , a.b-c=0 ", &parsed));
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0], (std::pair<std::string, double>{"checkout", 0.5}));
  EXPECT_EQ(parsed[2], (std::pair<std::string, double>{"a.b-c", 0.0}));
  ASSERT_TRUE(ParseServiceProbabilities("", &parsed));
  EXPECT_TRUE(parsed.empty());
  Config cfg;
  ASSERT_TRUE(
      ApplyYaml("sampling:\n  head:\n    probability: 0.25\n    services: a=1\n", &cfg).ok());
  EXPECT_DOUBLE_EQ(cfg.sampling.head.probability, 0.25);
  EXPECT_EQ(cfg.sampling.head.services, "a=1");
}

TEST(Config, TailSampling) {
  for (const std::string v : {"bogus", "latency", "rate 0/s", "error; probability 2", ";"}) {
    ExpectBadSetting("sampling.tail.policies", v);
  }
  ExpectGoodSetting("sampling.tail.policies", "");
  ExpectGoodSetting("sampling.tail.policies", "error; latency 2s; probability 0.01");
  for (const std::string v : {"0", "9", "600001", "1s"}) {
    ExpectBadSetting("sampling.tail.decision_wait_ms", v);
  }
  ExpectBadSetting("sampling.tail.keep_ms", "999");
  Config cfg;
  cfg.sampling.tail.policies = "error";
  cfg.durable.enabled = false;
  const Status st = Validate(cfg);
  EXPECT_NE(st.message().find("tail sampling needs the durable queue"), std::string::npos)
      << st.message();
  cfg.durable.enabled = true;
  EXPECT_TRUE(Validate(cfg).ok()) << Validate(cfg).message();
}

TEST(Config, BadLogLevelsAndDataDir) {
  for (const std::string v : {"loud", "INFO", "Info", "warning", "", " info"})
    ExpectBadSetting("log_level", v);
  for (const std::string v : {"trace", "debug", "info", "warn", "error", "off"})
    ExpectGoodSetting("log_level", v);
  ExpectBadSetting("data_dir", "");
}

TEST(Config, BadSizes) {
  // Below the minimum, above the maximum, negative, not a number, bad unit, overflow.
  const std::vector<std::string> always_bad = {"0",
                                               "-1",
                                               "-20MiB",
                                               "20XB",
                                               "20mib",
                                               "1.5MiB",
                                               "MiB",
                                               "",
                                               "0x100000",
                                               "1TiB",
                                               "99999999999999999999999",
                                               "18446744073709551616",
                                               "17179869184GiB"};
  for (const std::string key : {"otlp_http.max_body_bytes", "queue.max_bytes", "writer.max_bytes"})
    for (const auto& v : always_bad) ExpectBadSetting(key, v);

  ExpectBadSetting("otlp_http.max_body_bytes", "1023");
  ExpectGoodSetting("otlp_http.max_body_bytes", "1024");
  ExpectGoodSetting("otlp_http.max_body_bytes", "1KiB");
  ExpectGoodSetting("otlp_http.max_body_bytes", "1GiB");
  ExpectBadSetting("otlp_http.max_body_bytes", "1073741825");
  ExpectBadSetting("otlp_http.max_body_bytes", "2GiB");

  ExpectBadSetting("queue.max_bytes", "1048575");
  ExpectGoodSetting("queue.max_bytes", "1MiB");
  ExpectGoodSetting("queue.max_bytes", "1024GiB");
  ExpectBadSetting("queue.max_bytes", "1025GiB");

  ExpectBadSetting("writer.max_bytes", "1023");
  ExpectGoodSetting("writer.max_bytes", "1KiB");
  ExpectGoodSetting("writer.max_bytes", "4GiB");
  ExpectBadSetting("writer.max_bytes", "4097MiB");
}

TEST(Config, FilterLimits) {
  ExpectBadSetting("filter.max_future_s", "0");
  ExpectBadSetting("filter.max_duration_s", "1h");
  ExpectGoodSetting("filter.max_attributes", "0");
  ExpectBadSetting("filter.max_attributes", "1000001");
  ExpectBadSetting("filter.max_value_bytes", "0");
  ExpectGoodSetting("filter.max_value_bytes", "1GiB");
  ExpectBadSetting("filter.max_value_bytes", "2GiB");
  ExpectBadSetting("filter.max_key_bytes", "2MiB");
  ExpectGoodSetting("filter.max_span_names_per_service", "0");
  ExpectBadSetting("filter.max_span_names_per_service", "-1");
  ExpectBadSetting("otlp_http.max_spans_per_request", "0");
  ExpectGoodSetting("otlp_http.max_spans_per_request", "10000000");
  ExpectBadSetting("otlp_http.max_spans_per_request", "10000001");
}

TEST(Config, BadCounts) {
  for (const std::string v : {"0", "65", "-1", "two", "", "1.5", "4 ", "18446744073709551617"})
    ExpectBadSetting("otlp_http.threads", v);
  ExpectGoodSetting("otlp_http.threads", "1");
  ExpectGoodSetting("otlp_http.threads", "64");

  for (const std::string v : {"0", "100000001", "-5", "1e6", "10k"})
    ExpectBadSetting("writer.max_rows", v);
  ExpectGoodSetting("writer.max_rows", "1");
  ExpectGoodSetting("writer.max_rows", "100000000");

  for (const std::string v : {"0", "3600001", "1s", "-1"}) ExpectBadSetting("writer.max_age_ms", v);
  ExpectGoodSetting("writer.max_age_ms", "1");
  ExpectGoodSetting("writer.max_age_ms", "3600000");

  for (const std::string v : {"0", "17", "-1", "many"}) ExpectBadSetting("writer.threads", v);
  ExpectGoodSetting("writer.threads", "1");
  ExpectGoodSetting("writer.threads", "16");

  for (const std::string v : {"yes", "1", "TRUE", "True", "", "on"})
    ExpectBadSetting("debug.fault_injection", v);
  ExpectGoodSetting("debug.fault_injection", "true");
  ExpectGoodSetting("debug.fault_injection", "false");

  for (const std::string v : {"", "clickhouse", "CHDB", "none"}) ExpectBadSetting("writer.sink", v);
  ExpectGoodSetting("writer.sink", "chdb");
  ExpectGoodSetting("writer.sink", "null");
}

TEST(Config, StorageDefaults) {
  const Config c;
  EXPECT_EQ(c.storage.move_after_s, 8u * 3600);      // hot for 8 hours
  EXPECT_EQ(c.storage.retention_s, 7u * 24 * 3600);  // kept 7 days in all
  EXPECT_EQ(c.storage.s3_endpoint, "");              // the cold volume is a directory...
  EXPECT_EQ(ColdPath(c), "./data/cold");             // ...beside the data by default
  Config d;
  ASSERT_TRUE(ApplySetting("storage.cold_path", "/mnt/cold", &d).ok());
  EXPECT_EQ(ColdPath(d), "/mnt/cold");
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
}

TEST(Config, UserFieldNamespaces) {
  for (const std::string v : {",", "shop,", ",shop", "a,,b", " ", "a b", "a,\"b\""}) {
    ExpectBadSetting("user_fields.also_well_known", v);
  }
  for (const std::string v : {"", "shop", "shop,app.internal", " shop , app.internal "}) {
    ExpectGoodSetting("user_fields.also_well_known", v);
  }
}

TEST(Config, BadStorageValues) {
  for (const std::string key : {"storage.move_after_s", "storage.retention_s"}) {
    for (const std::string v : {"0", "-1", "8h", "1.5", "", "315360001"}) ExpectBadSetting(key, v);
    ExpectGoodSetting(key, "1");
    ExpectGoodSetting(key, "315360000");
  }
  for (const std::string v :
       {"s3.example.test/bucket/", "ftp://host/bucket/", "http://", "http:///bucket/",
        "http://host", "http://host/", "http://host//x", "https://host:9000", "http://host/b c/"}) {
    ExpectBadSetting("storage.s3_endpoint", v);
  }
  for (const std::string v : {"", "http://127.0.0.1:9000/spans/", "https://s3.example.test/b",
                              "http://[::1]:9000/spans/cold/"}) {
    ExpectGoodSetting("storage.s3_endpoint", v);
  }
}

TEST(Config, ValidateStorageRules) {
  Config c;
  c.storage.move_after_s = c.storage.retention_s;
  Status st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'storage.move_after_s'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("storage.retention_s"), std::string::npos) << st.message();
  c.storage.move_after_s = c.storage.retention_s - 1;
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();

  c.storage.s3_endpoint = "http://127.0.0.1:9000/spans/";
  c.storage.s3_access_key_id = "key";
  st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'storage.s3_access_key_id'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("storage.s3_secret_access_key"), std::string::npos) << st.message();
  c.storage.s3_secret_access_key = "secret";
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  c.storage.s3_endpoint.clear();  // credentials for no endpoint
  st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("storage.s3_endpoint"), std::string::npos) << st.message();
}

TEST(Config, AuthAndTlsDefaultsAreOpenPlainAndLoopback) {
  Config c;
  EXPECT_TRUE(c.auth.ingest_tokens.empty());
  EXPECT_TRUE(c.auth.query_tokens.empty());
  EXPECT_TRUE(c.otlp_http.tls_cert.empty() && c.otlp_http.tls_key.empty());
  EXPECT_TRUE(c.query.tls_cert.empty() && c.query.tls_key.empty());
  EXPECT_EQ(c.otlp_http.listen.rfind("127.0.0.1:", 0), 0u) << c.otlp_http.listen;
  EXPECT_EQ(c.query.listen.rfind("127.0.0.1:", 0), 0u) << c.query.listen;
}

TEST(Config, BadTokenListsAreNamedButNotEchoed) {
  for (const std::string key : {"auth.ingest_tokens", "auth.query_tokens"}) {
    for (const std::string v :
         {"aaaaaaaaaaaaaaaa,,bbbbbbbbbbbbbbbb", "two words-in-a-long-token", "trailing-long-token,",
          "caf\xc3\xa9-long-enough-token", "too-short-15chr"}) {
      ExpectBadSetting(key, v);
      Config c;
      EXPECT_EQ(ApplySetting(key, v, &c).message().find(v), std::string::npos) << key << v;
    }
    ExpectGoodSetting(key, "");
    ExpectGoodSetting(key, " one-long-token-01 , two-long-token-02 ");
  }
  ExpectYamlError("auth:\n  query_tokens: [a, b]\n", "auth.query_tokens");
  ExpectYamlError("auth:\n  tokens: a\n", "auth.tokens");
}

TEST(Config, ValidateTlsNeedsCertAndKeyTogether) {
  for (const std::string listener : {"otlp_http", "query"}) {
    Config c;
    ASSERT_TRUE(ApplySetting(listener + ".tls_cert", "/x/cert.pem", &c).ok());
    Status st = Validate(c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << listener;
    EXPECT_NE(st.message().find("'" + listener + ".tls_cert'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(listener + ".tls_key"), std::string::npos) << st.message();
    ASSERT_TRUE(ApplySetting(listener + ".tls_key", "/x/key.pem", &c).ok());
    EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
    c = Config();
    ASSERT_TRUE(ApplySetting(listener + ".tls_key", "/x/key.pem", &c).ok());
    EXPECT_FALSE(Validate(c).ok()) << listener;
  }
}

TEST(Config, SizesWithUnits) {
  Config c;
  ASSERT_TRUE(ApplySetting("otlp_http.max_body_bytes", "20MiB", &c).ok());
  EXPECT_EQ(c.otlp_http.max_body_bytes, 20ull << 20);
  ASSERT_TRUE(ApplySetting("otlp_http.max_body_bytes", "512KiB", &c).ok());
  EXPECT_EQ(c.otlp_http.max_body_bytes, 512ull << 10);
  ASSERT_TRUE(ApplySetting("otlp_http.max_body_bytes", "1GiB", &c).ok());
  EXPECT_EQ(c.otlp_http.max_body_bytes, 1ull << 30);
  ASSERT_TRUE(ApplySetting("otlp_http.max_body_bytes", "1000000", &c).ok());
  EXPECT_EQ(c.otlp_http.max_body_bytes, 1000000u);
  ASSERT_TRUE(Apply("queue:\n  max_bytes: 1048576\n", &c).ok());
  EXPECT_EQ(c.queue.max_bytes, 1ull << 20);
}

TEST(Config, ParseBytesUnits) {
  const std::vector<std::pair<std::string, uint64_t>> good = {
      {"0", 0},
      {"1", 1},
      {"1000", 1000},
      {"007", 7},
      {"5B", 5},
      {"1K", 1024},
      {"1KB", 1024},
      {"1KiB", 1024},
      {"512KiB", 512ull << 10},
      {"1M", 1ull << 20},
      {"1MB", 1ull << 20},
      {"20MiB", 20ull << 20},
      {"1G", 1ull << 30},
      {"1GB", 1ull << 30},
      {"1GiB", 1ull << 30},
      {"20 MiB", 20ull << 20},
      {"3  KiB", 3ull << 10},
      {"18446744073709551615", ~0ull},
      {"18446744073709551615B", ~0ull},
      {"17179869183GiB", 17179869183ull << 30},
      {"17592186044415MiB", 17592186044415ull << 20},
  };
  for (const auto& [s, want] : good) {
    uint64_t n = 12345;
    EXPECT_TRUE(ParseBytes(s, &n)) << "'" << s << "'";
    EXPECT_EQ(n, want) << "'" << s << "'";
  }
}

TEST(Config, ParseBytesRejects) {
  for (const std::string s : {"",
                              " ",
                              "B",
                              "MiB",
                              " 20MiB",
                              "20MiB ",
                              "20XB",
                              "20mib",
                              "20kib",
                              "20 M iB",
                              "20TiB",
                              "-1",
                              "+1",
                              "1.5",
                              "1.5GiB",
                              "1e6",
                              "0x10",
                              "20MiBB",
                              "MiB20",
                              "1,000",
                              "18446744073709551616",        // 2^64
                              "99999999999999999999999999",  // far over
                              "17179869184GiB",              // 2^34 GiB = 2^64
                              "17592186044416MiB",           // 2^44 MiB = 2^64
                              "18014398509481984KiB",        // 2^54 KiB = 2^64
                              "18446744073709551615KiB"}) {  // max * 1024
    uint64_t n = 12345;
    EXPECT_FALSE(ParseBytes(s, &n)) << "'" << s << "' parsed as " << n;
    EXPECT_EQ(n, 12345u) << "'" << s << "': output written on failure";
  }
}

TEST(Config, ValidateRejectsEqualListenAddresses) {
  Config c;
  c.query.listen = c.otlp_http.listen;
  Status st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("otlp_http.listen"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("query.listen"), std::string::npos) << st.message();
}

TEST(Config, ValidateRejectsQueueSmallerThanABody) {
  Config c;
  c.otlp_http.max_body_bytes = 64ull << 20;
  c.queue.max_bytes = (64ull << 20) - 1;
  Status st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'queue.max_bytes'"), std::string::npos) << st.message();
  c.queue.max_bytes = 64ull << 20;  // equal is enough
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
}

TEST(Config, ASecondSinkNeedsTheDurableQueueAndADatabaseOfItsOwn) {
  Config c;
  ASSERT_TRUE(Apply("secondary:\n  type: chdb\n", &c).ok());
  EXPECT_EQ(c.secondary.database, "spanhouse_secondary");
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  c.durable.enabled = false;
  Status st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("durable.enabled"), std::string::npos) << st.message();
  c.durable.enabled = true;
  c.secondary.database = "spanhouse";
  st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("secondary.database"), std::string::npos) << st.message();
  for (const char* bad : {"", "1spans", "spans-copy", "spans copy", "a.b", "x\"; DROP"}) {
    EXPECT_FALSE(ApplySetting("secondary.database", bad, &c).ok()) << bad;
  }
  EXPECT_FALSE(ApplySetting("secondary.type", "elasticsearch", &c).ok());
}

TEST(Config, OpenSearchNeedsItsNodes) {
  Config c;
  ASSERT_TRUE(ApplySetting("secondary.type", "opensearch", &c).ok());
  Status st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("opensearch.urls"), std::string::npos) << st.message();
  c = Config();
  ASSERT_TRUE(ApplySetting("query.read_from", "opensearch", &c).ok());
  EXPECT_EQ(Validate(c).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(ApplySetting("opensearch.urls", "http://127.0.0.1:9200", &c).ok());
  ASSERT_TRUE(ApplySetting("secondary.type", "opensearch", &c).ok());
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  // A cluster of ClickHouse servers dual-writes to OpenSearch too.
  ASSERT_TRUE(ApplySetting("storage.engine", "clickhouse", &c).ok());
  ASSERT_TRUE(ApplySetting("clickhouse.shards", "http://ch:8123", &c).ok());
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  for (const char* bad : {"9200", "ftp://x:1", "http://a:1;http://b:2", ","}) {
    EXPECT_FALSE(ApplySetting("opensearch.urls", bad, &c).ok()) << bad;
  }
  for (const char* bad : {"Team", "-a", "_a", "a b", "a*"}) {
    EXPECT_FALSE(ApplySetting("opensearch.index_prefix", bad, &c).ok()) << bad;
  }
  EXPECT_FALSE(ApplySetting("query.read_from", "elasticsearch", &c).ok());
  EXPECT_EQ(OpenSearchUrls(" http://a:1 ,http://b:2,"),
            (std::vector<std::string>{"http://a:1", "http://b:2"}));
}

TEST(Config, ValidateAfterYaml) {
  Config c;
  ASSERT_TRUE(Apply("otlp_http:\n  max_body_bytes: 1GiB\n", &c).ok());
  EXPECT_EQ(Validate(c).code(), StatusCode::kInvalidArgument);  // default queue < 1GiB
  ASSERT_TRUE(
      Apply("otlp_http:\n  listen: 127.0.0.1:9000\nquery:\n  listen: 127.0.0.1:9000\n", &c).ok());
  EXPECT_EQ(Validate(c).code(), StatusCode::kInvalidArgument);
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

TEST(Config, EnvVarsMapToRealKeys) {
  const auto& vars = ConfigEnvVars();
  ASSERT_FALSE(vars.empty());
  std::set<std::string> keys;
  for (const auto& [env, key] : vars) {
    EXPECT_EQ(env.rfind("SPANHOUSE_", 0), 0u) << env;
    // The variable is the key, upper-cased, dots as underscores, prefixed.
    std::string expect = "SPANHOUSE_";
    for (char ch : key) expect += ch == '.' ? '_' : static_cast<char>(std::toupper(ch));
    EXPECT_EQ(env, expect) << key;
    EXPECT_TRUE(keys.insert(key).second) << "two variables set " << key;
    auto it = ValidValues().find(key);
    ASSERT_NE(it, ValidValues().end()) << env << " -> unknown key '" << key << "'";
    Config c;
    Status st = ApplySetting(key, it->second, &c);
    EXPECT_TRUE(st.ok()) << env << " -> " << key << ": " << st.message();
    // A bad value is reported under the key, not as an unknown key.
    st = ApplySetting(key, "", &c);
    EXPECT_EQ(st.message().find("unknown key"), std::string::npos) << env << ": " << st.message();
  }
}

TEST(Config, ApplySettingRejectsUnknownKeys) {
  for (const std::string key : {"", "otlp_http", "otlp_http.", "otlp_http.listenx", "Data_dir",
                                "queue.max_rows", ".data_dir"}) {
    Config c;
    Status st = ApplySetting(key, "1", &c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << key << "'";
    EXPECT_NE(st.message().find("'" + key + "'"), std::string::npos) << st.message();
  }
}

TEST(Config, DurableQueueKeys) {
  Config c;
  EXPECT_TRUE(c.durable.enabled);
  EXPECT_EQ(c.durable.fsync, "200");
  EXPECT_EQ(DurableDir(c), "./data/queue");
  ExpectGoodSetting("durable.fsync", "always");
  ExpectGoodSetting("durable.fsync", "1");
  ExpectGoodSetting("durable.fsync", "10000");
  ExpectBadSetting("durable.fsync", "0");
  ExpectBadSetting("durable.fsync", "10001");
  ExpectBadSetting("durable.fsync", "sometimes");
  ExpectBadSetting("durable.max_bytes", "1KiB");
  ExpectBadSetting("durable.enabled", "yes please");
  ExpectBadSetting("dedup.enabled", "maybe");
  ExpectBadSetting("dedup.window_s", "10");
  ExpectBadSetting("dedup.window_s", "100000");
  ExpectBadSetting("dedup.max_bytes", "1KiB");
  ExpectGoodSetting("dedup.window_s", "30");
  ASSERT_TRUE(ApplySetting("durable.dir", "/q", &c).ok());
  EXPECT_EQ(DurableDir(c), "/q");
}

}  // namespace
}  // namespace spanhouse::server
