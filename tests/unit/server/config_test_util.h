// Helpers of the serve configuration's tests (config_test.cc,
// config_yaml_test.cc): a valid value for every key, and checks that name
// the key or field that failed.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/config.h"

namespace spanhouse::server {

// Every field, one by one, so a failure names the field.
inline void ExpectSameConfig(const Config& a, const Config& b) {
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
  EXPECT_EQ(a.storage.trace_copy_s, b.storage.trace_copy_s);
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
inline const std::map<std::string, std::string>& ValidValues() {
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
      {"storage.trace_copy_s", "86400"},
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
      {"clickhouse.job_lease_s", "30"},
      {"node.id", "eu-west.1_a"},
      {"peers.nodes",
       "a=10.0.0.1:4317=http://10.0.0.1:16686;b=10.0.0.2:4317=http://10.0.0.2:16686"},
      {"peers.down_after_s", "60"},
      {"peers.probe_ms", "500"},
      {"peers.read_timeout_ms", "750"},
      {"peers.tls_ca_file", "/etc/spanhouse/peers-ca.pem"},
      {"query.read_from", "opensearch"},
      {"query.fallback", "false"},
      {"query.fallback_after_ms", "750"},
      {"query.fill_gaps", "off"},
      {"query.recent_max_bytes", "16MiB"},
      {"query.recent_disk_bytes", "512MiB"},
      {"query.recent_max_age_s", "90"},
      {"opensearch.urls", "http://os1:9200, https://os2:9200"},
      {"opensearch.index_prefix", "team-a"},
      {"opensearch.date_layout", "2006.01.02.15"},
      {"opensearch.index_date_separator", "."},
      {"opensearch.use_aliases", "true"},
      {"opensearch.api_key", "VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw=="},
      {"opensearch.tls_cert", "/etc/spanhouse/os-client.pem"},
      {"opensearch.tls_key", "/etc/spanhouse/os-client.key"},
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
inline Status Apply(const std::string& yaml, Config* cfg) {
  *cfg = Config();
  return ApplyYaml(yaml, cfg);
}

// The error for `yaml` must be kInvalidArgument and mention `needle`.
inline void ExpectYamlError(const std::string& yaml, const std::string& needle) {
  Config cfg;
  Status st = ApplyYaml(yaml, &cfg);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "yaml:\n" << yaml;
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << "message '" << st.message() << "' does not name '" << needle << "'; yaml:\n"
      << yaml;
}

inline void ExpectBadSetting(const std::string& key, const std::string& value) {
  Config cfg;
  const Config before = cfg;
  Status st = ApplySetting(key, value, &cfg);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << key << " = '" << value << "' accepted";
  EXPECT_NE(st.message().find("'" + key + "'"), std::string::npos)
      << key << " = '" << value << "': message '" << st.message() << "'";
  ExpectSameConfig(cfg, before);  // a rejected value changes nothing
}

inline void ExpectGoodSetting(const std::string& key, const std::string& value) {
  Config cfg;
  Status st = ApplySetting(key, value, &cfg);
  EXPECT_TRUE(st.ok()) << key << " = '" << value << "': " << st.message();
}

// The keys ToYaml prints, as dotted names.
inline std::vector<std::string> KeysOf(const std::string& yaml) {
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

}  // namespace spanhouse::server
