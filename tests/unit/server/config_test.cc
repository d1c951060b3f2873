// Tests for the serve configuration (server/config.h): defaults, every key
// settable with errors that name the offending dotted key, size parsing,
// cross-field validation and the environment-variable table. YAML in and
// out (ApplyYaml, ToYaml): config_yaml_test.cc.
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
#include "unit/server/config_test_util.h"

namespace spanhouse::server {
namespace {

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

TEST(Config, JobLeaseAndNodeId) {
  EXPECT_EQ(Config().clickhouse.job_lease_s, 15u);
  EXPECT_EQ(Config().node.id, "");
  for (const std::string v : {"0", "4", "301", "15s", ""}) {
    ExpectBadSetting("clickhouse.job_lease_s", v);
  }
  ExpectGoodSetting("clickhouse.job_lease_s", "5");
  ExpectGoodSetting("clickhouse.job_lease_s", "300");
  for (const std::string& v :
       std::vector<std::string>{"a b", "a'b", "\xc3\xbc", std::string(65, 'n'), "a/b"}) {
    ExpectBadSetting("node.id", v);
  }
  for (const std::string& v :
       std::vector<std::string>{"", "node-1", "eu_west.1", std::string(64, 'n')}) {
    ExpectGoodSetting("node.id", v);
  }
}

TEST(Config, PeersListTheNodesAndNameThisOne) {
  EXPECT_EQ(Config().peers.nodes, "");
  EXPECT_EQ(Config().peers.down_after_s, 30u);
  for (const std::string v : {"a=h:1", "a=h:0=http://x", "a=h:1=http://x;a=h:2=http://y"}) {
    ExpectBadSetting("peers.nodes", v);
  }
  ExpectBadSetting("peers.down_after_s", "0");
  ExpectBadSetting("peers.probe_ms", "99");
  ExpectBadSetting("peers.read_timeout_ms", "49");
  Config c;
  ASSERT_TRUE(ApplyYaml(R"(
node: {id: b}
peers:
  nodes:
    - {name: a, otlp: "10.0.0.1:4317", query: "http://10.0.0.1:16686"}
    - {name: b, otlp: "10.0.0.2:4317", query: "http://10.0.0.2:16686"}
)",
                        &c)
                  .ok());
  EXPECT_EQ(c.peers.nodes,
            "a=10.0.0.1:4317=http://10.0.0.1:16686;b=10.0.0.2:4317=http://10.0.0.2:16686");
  EXPECT_TRUE(Validate(c).ok());
  c.sampling.tail.policies = "error";  // each trace sampled on its owner
  EXPECT_TRUE(Validate(c).ok());
  c.sampling.tail.policies = "";
  c.durable.enabled = false;  // forwarding waits on disk for a node that is down
  Status st = Validate(c);
  EXPECT_NE(st.message().find("durable.enabled"), std::string::npos) << st.message();
  c.durable.enabled = true;
  c.node.id = "c";
  st = Validate(c);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node.id"), std::string::npos) << st.message();
  c.node.id = "";
  EXPECT_FALSE(Validate(c).ok());
  Config bad;
  st = ApplyYaml("peers:\n  nodes:\n    - {name: a, otlp: \"h:1\"}\n", &bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("peers.nodes"), std::string::npos) << st.message();
}

TEST(Config, TraceCopy) {
  EXPECT_EQ(Config().storage.trace_copy_s, 0u);  // off
  for (const std::string v : {"-1", "1d", "1.5", "", "315360001"}) {
    ExpectBadSetting("storage.trace_copy_s", v);
  }
  ExpectGoodSetting("storage.trace_copy_s", "0");
  ExpectGoodSetting("storage.trace_copy_s", "86400");
  Config c;
  c.storage.trace_copy_s = c.storage.retention_s;
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  c.storage.trace_copy_s = c.storage.retention_s + 1;  // a copy of what is gone
  Status st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'storage.trace_copy_s'"), std::string::npos) << st.message();
  c.storage.trace_copy_s = 3600;
  c.storage.engine = "clickhouse";  // the embedded engine's only
  c.clickhouse.shards = "http://127.0.0.1:8123";
  st = Validate(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("embedded engine only"), std::string::npos) << st.message();
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
  EXPECT_FALSE(ApplySetting("secondary.type", "solr", &c).ok());
}

TEST(Config, ElasticsearchIsTheSameSectionUnderItsOwnName) {
  Config c;
  ASSERT_TRUE(ApplyYaml("secondary:\n  type: elasticsearch\n"
                        "elasticsearch:\n  urls: http://es:9200\n  index_prefix: prod\n"
                        "  use_aliases: true\n  api_key: abc=\n"
                        "query:\n  read_from: elasticsearch\n",
                        &c)
                  .ok());
  EXPECT_EQ(c.opensearch.urls, "http://es:9200");
  EXPECT_EQ(c.opensearch.index_prefix, "prod");
  EXPECT_TRUE(c.opensearch.use_aliases);
  EXPECT_TRUE(SecondaryIsSearchStore(c));
  EXPECT_EQ(SearchStoreName(c), "elasticsearch");
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  ASSERT_TRUE(ApplySetting("elasticsearch.date_layout", "2006.01.02", &c).ok());
  EXPECT_EQ(IndexDateLayout(c), "2006.01.02");
  EXPECT_FALSE(ApplySetting("elasticsearch.nothing", "1", &c).ok());
  // Without the secondary, a read-only search store is named as read_from names it.
  c = Config();
  EXPECT_EQ(SearchStoreName(c), "opensearch");
}

TEST(Config, SearchStoreLayoutAndAuthAreChecked) {
  Config c;
  ASSERT_TRUE(ApplySetting("opensearch.urls", "https://es:9200", &c).ok());
  ASSERT_TRUE(ApplySetting("opensearch.index_date_separator", ".", &c).ok());
  EXPECT_EQ(IndexDateLayout(c), "2006.01.02");
  EXPECT_TRUE(Validate(c).ok());
  ASSERT_TRUE(ApplySetting("opensearch.date_layout", "2006-01-02-15", &c).ok());
  EXPECT_NE(Validate(c).message().find("index_date_separator"), std::string::npos);
  c.opensearch.index_date_separator = "-";
  EXPECT_EQ(IndexDateLayout(c), "2006-01-02-15");
  for (const char* bad : {"2006/01/02", "2006-01", "yyyy.MM.dd", ""}) {
    EXPECT_FALSE(ApplySetting("opensearch.date_layout", bad, &c).ok()) << bad;
  }
  ASSERT_TRUE(ApplySetting("opensearch.api_key", "k", &c).ok());
  ASSERT_TRUE(ApplySetting("opensearch.user", "u", &c).ok());
  EXPECT_NE(Validate(c).message().find("opensearch.api_key"), std::string::npos);
  c.opensearch.user.clear();
  ASSERT_TRUE(ApplySetting("opensearch.tls_cert", "/c.pem", &c).ok());
  EXPECT_NE(Validate(c).message().find("tls_key"), std::string::npos);
  ASSERT_TRUE(ApplySetting("opensearch.tls_key", "/c.key", &c).ok());
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
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
  EXPECT_FALSE(ApplySetting("query.read_from", "solr", &c).ok());
  EXPECT_EQ(OpenSearchUrls(" http://a:1 ,http://b:2,"),
            (std::vector<std::string>{"http://a:1", "http://b:2"}));
}

TEST(Config, FillGapsAutoIsOnWhileTheOtherStoreIsStillWritten) {
  Config c;
  EXPECT_EQ(c.query.fill_gaps, "auto");
  EXPECT_FALSE(FillGaps(c));  // no migration
  for (const char* type : {"opensearch", "elasticsearch"}) {
    ASSERT_TRUE(ApplySetting("secondary.type", type, &c).ok());
    EXPECT_TRUE(FillGaps(c)) << type;
  }
  ASSERT_TRUE(ApplySetting("secondary.type", "chdb", &c).ok());
  EXPECT_FALSE(FillGaps(c));
  ASSERT_TRUE(ApplySetting("secondary.type", "opensearch", &c).ok());
  ASSERT_TRUE(ApplySetting("query.fill_gaps", "off", &c).ok());
  EXPECT_FALSE(FillGaps(c));
  // The secondary dropped: reads may still go to the other store, nothing completes them.
  c = Config();
  ASSERT_TRUE(ApplySetting("query.read_from", "opensearch", &c).ok());
  EXPECT_FALSE(FillGaps(c));
  ASSERT_TRUE(ApplySetting("query.fill_gaps", "on", &c).ok());
  EXPECT_TRUE(FillGaps(c));
  Status st = ApplySetting("query.fill_gaps", "true", &c);
  EXPECT_NE(st.message().find("auto, on or off"), std::string::npos) << st.message();
}

TEST(Config, ValidateAfterYaml) {
  Config c;
  ASSERT_TRUE(Apply("otlp_http:\n  max_body_bytes: 1GiB\n", &c).ok());
  EXPECT_EQ(Validate(c).code(), StatusCode::kInvalidArgument);  // default queue < 1GiB
  ASSERT_TRUE(
      Apply("otlp_http:\n  listen: 127.0.0.1:9000\nquery:\n  listen: 127.0.0.1:9000\n", &c).ok());
  EXPECT_EQ(Validate(c).code(), StatusCode::kInvalidArgument);
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
