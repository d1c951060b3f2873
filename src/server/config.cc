#include "server/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include "auth/bearer_auth.h"
#include "net/http_server.h"
#include "peers/ring.h"
#include "pipeline/sampling/tail_policy.h"
#include "storage/clickhouse/job_lease.h"
#include "storage/opensearch/index_layout.h"

namespace spanhouse::server {

namespace {

struct Key {
  const char* name;
  std::function<Status(const std::string&, Config*)> set;
  std::function<std::string(const Config&)> get;
};

Status BadValue(const std::string& key, const std::string& value, const std::string& want) {
  return Status::Invalid("config key '" + key + "': bad value '" + value + "' (" + want + ")");
}

bool ParseUint(const std::string& s, uint64_t* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

#define SH_STRING_KEY(NAME, FIELD, CHECK, WANT)         \
  Key {                                                 \
    NAME,                                               \
        [](const std::string& v, Config* c) -> Status { \
          if (!(CHECK)) return BadValue(NAME, v, WANT); \
          c->FIELD = v;                                 \
          return Status::Ok();                          \
        },                                              \
        [](const Config& c) { return c.FIELD; }         \
  }
// A function, not an inline comparison, so a minimum of 0 does not warn.
bool InRange(uint64_t n, uint64_t min, uint64_t max) {
  return n >= min && n <= max;
}

#define SH_UINT_KEY(NAME, FIELD, PARSE, MIN, MAX, WANT)                               \
  Key {                                                                               \
    NAME,                                                                             \
        [](const std::string& v, Config* c) -> Status {                               \
          uint64_t n = 0;                                                             \
          if (!PARSE(v, &n) || !InRange(n, MIN, MAX)) return BadValue(NAME, v, WANT); \
          c->FIELD = static_cast<decltype(c->FIELD)>(n);                              \
          return Status::Ok();                                                        \
        },                                                                            \
        [](const Config& c) { return std::to_string(c.FIELD); }                       \
  }

bool IsAddress(const std::string& v) {
  std::string h;
  uint16_t p;
  return net::SplitHostPort(v, &h, &p);
}
// "a,b.c" (spaces around names allowed), or empty; no empty names.
bool IsNamespaceList(const std::string& v) {
  if (v.empty()) return true;
  size_t start = 0;
  for (;;) {
    const size_t comma = v.find(',', start);
    const std::string name = v.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t b = name.find_first_not_of(' ');
    if (b == std::string::npos) return false;
    for (char c : name.substr(b, name.find_last_not_of(' ') + 1 - b)) {
      if (c == ' ' || c == '"' || static_cast<unsigned char>(c) < 0x20) return false;
    }
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}
// A number in [0, 1]: "0.1", "1", "1e-3".
bool ParseProbability(std::string_view v, double* out) {
  if (v.empty() || v.size() > 32) return false;
  const std::string text(v);
  char* end = nullptr;
  const double p = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(p >= 0.0 && p <= 1.0)) return false;
  *out = p;
  return true;
}

bool IsLevel(const std::string& v) {
  return v == "trace" || v == "debug" || v == "info" || v == "warn" || v == "error" || v == "off";
}

// An S3 endpoint names the bucket in its path (ClickHouse's S3 disk form):
// http(s)://host[:port]/bucket[/prefix]/. Empty means "no S3".
// "url,url;url" (ClickHouseShards): every URL http(s)://host[:port][/].
bool IsShardList(const std::string& v) {
  if (v.empty()) return true;
  for (const auto& shard : ClickHouseShards(v)) {
    if (shard.empty()) return false;
    for (const auto& url : shard) {
      const size_t scheme = url.rfind("http://", 0) == 0    ? 7
                            : url.rfind("https://", 0) == 0 ? 8
                                                            : 0;
      if (scheme == 0 || url.size() == scheme) return false;
      if (url.find_first_of(" \t\r\n?#") != std::string::npos) return false;
    }
  }
  return true;
}

// "url,url": every URL http(s)://host[:port][/].
bool IsUrlList(const std::string& v) {
  if (v.empty()) return true;
  const auto urls = OpenSearchUrls(v);
  if (urls.empty()) return false;
  return IsShardList(v.find(';') == std::string::npos ? v : std::string("x"));
}

// Jaeger's index prefix: what OpenSearch allows at the start of an index name.
bool IsPeerList(const std::string& v) {
  std::vector<peers::PeerNode> nodes;
  std::string why;
  return peers::ParsePeerNodes(v, &nodes, &why);
}

bool IsDateLayout(const std::string& v) {
  storage::opensearch::IndexLayoutOptions o;
  o.date_layout = v;
  storage::opensearch::IndexLayout layout;
  return storage::opensearch::IndexLayout::Create(o, &layout).ok();
}

bool IsIndexPrefix(const std::string& v) {
  if (v.empty()) return true;
  if (v.size() > 100 || v[0] == '-' || v[0] == '_') return false;
  for (char c : v) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

bool IsS3Endpoint(const std::string& v) {
  if (v.empty()) return true;
  size_t scheme = 0;
  if (v.rfind("http://", 0) == 0) {
    scheme = 7;
  } else if (v.rfind("https://", 0) == 0) {
    scheme = 8;
  } else {
    return false;
  }
  const size_t slash = v.find('/', scheme);
  if (slash == scheme || slash == std::string::npos) return false;  // no host, or no bucket
  if (v.find_first_of(" \t\r\n") != std::string::npos) return false;
  return slash + 1 < v.size() && v[slash + 1] != '/';  // a bucket name follows
}

// A token list. Unlike other keys, a bad value is not echoed back: it is a
// secret, and the message may end up in a log.
#define SH_TOKENS_KEY(NAME, FIELD)                                                           \
  Key {                                                                                      \
    NAME,                                                                                    \
        [](const std::string& v, Config* c) -> Status {                                      \
          if (std::string problem = auth::TokenSet::Check(v); !problem.empty()) {            \
            return Status::Invalid(std::string("config key '") + NAME + "': the list has " + \
                                   problem + " (tokens are comma-separated)");               \
          }                                                                                  \
          c->FIELD = v;                                                                      \
          return Status::Ok();                                                               \
        },                                                                                   \
        [](const Config& c) { return c.FIELD; }                                              \
  }
bool IsDatabaseName(const std::string& v) {
  if (v.empty() || v.size() > 64 || std::isdigit(static_cast<unsigned char>(v[0]))) return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsFsyncPolicy(const std::string& v) {
  uint64_t ms = 0;
  return v == "always" || (ParseUint(v, &ms) && ms >= 1 && ms <= 10000);
}

constexpr uint64_t kMaxSeconds = 10ull * 365 * 24 * 3600;

const std::vector<Key>& Keys() {
  static const std::vector<Key> keys = {
      SH_STRING_KEY("data_dir", data_dir, !v.empty(), "a directory path"),
      SH_STRING_KEY("log_level", log_level, IsLevel(v), "trace, debug, info, warn, error or off"),
      SH_STRING_KEY("otlp_http.listen", otlp_http.listen, IsAddress(v), "host:port"),
      SH_UINT_KEY("otlp_http.max_body_bytes", otlp_http.max_body_bytes, ParseBytes, 1024,
                  1ull << 30, "a size from 1KiB to 1GiB, e.g. 20MiB"),
      SH_UINT_KEY("otlp_http.max_spans_per_request", otlp_http.max_spans_per_request, ParseUint, 1,
                  10000000, "1 to 10000000"),
      SH_UINT_KEY("otlp_http.threads", otlp_http.threads, ParseUint, 1, 64, "1 to 64"),
      SH_STRING_KEY("otlp_http.tls_cert", otlp_http.tls_cert, true, "a PEM file path"),
      SH_STRING_KEY("otlp_http.tls_key", otlp_http.tls_key, true, "a PEM file path"),
      SH_STRING_KEY("otlp_grpc.listen", otlp_grpc.listen, v.empty() || IsAddress(v),
                    "host:port, or empty (off)"),
      SH_STRING_KEY("zipkin.listen", zipkin.listen, v.empty() || IsAddress(v),
                    "host:port, or empty (off)"),
      SH_STRING_KEY("query.listen", query.listen, IsAddress(v), "host:port"),
      SH_STRING_KEY("query.tls_cert", query.tls_cert, true, "a PEM file path"),
      SH_STRING_KEY("query.tls_key", query.tls_key, true, "a PEM file path"),
      SH_UINT_KEY("query.timeout_s", query.timeout_s, ParseUint, 1, 3600, "seconds, 1 to 3600"),
      SH_UINT_KEY("query.max_rows", query.max_rows, ParseUint, 100, 100000000, "100 to 100000000"),
      SH_UINT_KEY("query.max_trace_spans", query.max_trace_spans, ParseUint, 100, 100000000,
                  "100 to 100000000"),
      SH_STRING_KEY("query.read_from", query.read_from,
                    v == "clickhouse" || v == "opensearch" || v == "elasticsearch",
                    "clickhouse or opensearch"),
      Key{"query.fallback",
          [](const std::string& v, Config* c) -> Status {
            if (v != "true" && v != "false") return BadValue("query.fallback", v, "true or false");
            c->query.fallback = v == "true";
            return Status::Ok();
          },
          [](const Config& c) { return std::string(c.query.fallback ? "true" : "false"); }},
      SH_UINT_KEY("query.fallback_after_ms", query.fallback_after_ms, ParseUint, 1, 3600000,
                  "milliseconds, 1 to 3600000"),
      SH_STRING_KEY("query.fill_gaps", query.fill_gaps, v == "auto" || v == "on" || v == "off",
                    "auto, on or off"),
      SH_UINT_KEY("query.recent_max_bytes", query.recent_max_bytes, ParseBytes, 0, 1ull << 40,
                  "a size, e.g. 64MiB, or 0 (off)"),
      SH_UINT_KEY("query.recent_disk_bytes", query.recent_disk_bytes, ParseBytes, 0, 1ull << 44,
                  "a size, e.g. 2GiB, or 0 (memory only)"),
      SH_UINT_KEY("query.recent_max_age_s", query.recent_max_age_s, ParseUint, 1, 86400,
                  "seconds, 1 to 86400"),
      SH_TOKENS_KEY("auth.ingest_tokens", auth.ingest_tokens),
      SH_TOKENS_KEY("auth.query_tokens", auth.query_tokens),
      SH_UINT_KEY("queue.max_bytes", queue.max_bytes, ParseBytes, 1ull << 20, 1ull << 40,
                  "a size of at least 1MiB, e.g. 256MiB"),
      SH_UINT_KEY("queue.wait_ms", queue.wait_ms, ParseUint, 0, 10000, "milliseconds, 0 to 10000"),
      SH_UINT_KEY("writer.max_rows", writer.max_rows, ParseUint, 1, 100000000, "1 to 100000000"),
      SH_UINT_KEY("writer.max_bytes", writer.max_bytes, ParseBytes, 1024, 1ull << 32,
                  "a size from 1KiB to 4GiB"),
      SH_UINT_KEY("writer.insert_rows", writer.insert_rows, ParseUint, 1, 100000000,
                  "1 to 100000000"),
      SH_UINT_KEY("writer.max_age_ms", writer.max_age_ms, ParseUint, 1, 3600000,
                  "milliseconds, 1 to 3600000"),
      SH_UINT_KEY("writer.threads", writer.threads, ParseUint, 1, 16, "1 to 16"),
      SH_STRING_KEY("writer.sink", writer.sink, v == "chdb" || v == "null", "chdb or null"),
      SH_UINT_KEY("metrics.retention_days", metrics.retention_days, ParseUint, 1, 3650,
                  "days, 1 to 3650"),
      SH_STRING_KEY("storage.cold_path", storage.cold_path, true,
                    "a directory path; empty for <data_dir>/cold"),
      SH_UINT_KEY("storage.move_after_s", storage.move_after_s, ParseUint, 1, kMaxSeconds,
                  "seconds, 1 to 315360000 (10 years)"),
      SH_UINT_KEY("storage.retention_s", storage.retention_s, ParseUint, 1, kMaxSeconds,
                  "seconds, 1 to 315360000 (10 years)"),
      SH_UINT_KEY("storage.zstd_min_part_bytes", storage.zstd_min_part_bytes, ParseBytes, 0,
                  1ull << 40, "a size, 0 (ZSTD on every part) to 1TiB, e.g. 32MiB"),
      SH_UINT_KEY("storage.trace_copy_s", storage.trace_copy_s, ParseUint, 0, kMaxSeconds,
                  "seconds, 0 (no trace copy) to 315360000 (10 years)"),
      SH_STRING_KEY("storage.s3_endpoint", storage.s3_endpoint, IsS3Endpoint(v),
                    "empty, or http(s)://host[:port]/bucket[/prefix]/"),
      SH_STRING_KEY("storage.s3_access_key_id", storage.s3_access_key_id, true, "text"),
      SH_STRING_KEY("storage.s3_secret_access_key", storage.s3_secret_access_key, true, "text"),
      SH_STRING_KEY("storage.s3_region", storage.s3_region, true, "text"),
      SH_STRING_KEY("storage.engine", storage.engine, v == "chdb" || v == "clickhouse",
                    "chdb (embedded) or clickhouse (a server or cluster: the clickhouse section)"),
      SH_STRING_KEY("clickhouse.shards", clickhouse.shards, IsShardList(v),
                    "http(s)://host:port URLs, replicas split by ',' and shards by ';'"),
      SH_STRING_KEY("clickhouse.user", clickhouse.user, !v.empty(), "a user name"),
      SH_STRING_KEY("clickhouse.password", clickhouse.password, true, "text"),
      SH_STRING_KEY("clickhouse.database", clickhouse.database, IsDatabaseName(v),
                    "a database name: letters, digits and _, not starting with a digit"),
      SH_STRING_KEY("clickhouse.cluster", clickhouse.cluster, v.empty() || IsDatabaseName(v),
                    "a cluster name from the servers' remote_servers: letters, digits and _"),
      SH_UINT_KEY("clickhouse.timeout_s", clickhouse.timeout_s, ParseUint, 1, 3600,
                  "seconds, 1 to 3600"),
      SH_STRING_KEY("clickhouse.compression", clickhouse.compression, v == "none" || v == "gzip",
                    "none or gzip"),
      SH_STRING_KEY("clickhouse.tls_ca_file", clickhouse.tls_ca_file, true,
                    "a PEM file path; empty for the system's CA certificates"),
      Key{"clickhouse.run_jobs",
          [](const std::string& v, Config* c) -> Status {
            if (v != "true" && v != "false")
              return BadValue("clickhouse.run_jobs", v, "true or false");
            c->clickhouse.run_jobs = v == "true";
            return Status::Ok();
          },
          [](const Config& c) { return std::string(c.clickhouse.run_jobs ? "true" : "false"); }},
      SH_UINT_KEY("clickhouse.job_lease_s", clickhouse.job_lease_s, ParseUint, 5, 300,
                  "seconds, 5 to 300"),
      SH_STRING_KEY("node.id", node.id, v.empty() || storage::ValidNodeId(v),
                    "empty, or 1 to 64 letters, digits, '.', '_' or '-'"),
      SH_STRING_KEY("peers.nodes", peers.nodes, IsPeerList(v),
                    "name=host:port=http(s)://host:port entries split by ';'"),
      SH_UINT_KEY("peers.down_after_s", peers.down_after_s, ParseUint, 1, 86400,
                  "seconds, 1 to 86400"),
      SH_UINT_KEY("peers.probe_ms", peers.probe_ms, ParseUint, 100, 60000,
                  "milliseconds, 100 to 60000"),
      SH_UINT_KEY("peers.read_timeout_ms", peers.read_timeout_ms, ParseUint, 50, 60000,
                  "milliseconds, 50 to 60000"),
      SH_STRING_KEY("peers.tls_ca_file", peers.tls_ca_file, true, "a PEM file path"),
      SH_STRING_KEY("user_fields.also_well_known", user_fields.also_well_known, IsNamespaceList(v),
                    "comma-separated namespaces, e.g. shop,app.internal"),
      Key{"sampling.head.probability",
          [](const std::string& v, Config* c) -> Status {
            if (!ParseProbability(v, &c->sampling.head.probability)) {
              return BadValue("sampling.head.probability", v,
                              "a probability from 0 to 1, e.g. 0.1");
            }
            return Status::Ok();
          },
          [](const Config& c) { return fmt::format("{}", c.sampling.head.probability); }},
      Key{"sampling.head.services",
          [](const std::string& v, Config* c) -> Status {
            std::vector<std::pair<std::string, double>> parsed;
            std::string problem;
            if (!ParseServiceProbabilities(v, &parsed, &problem)) {
              return BadValue("sampling.head.services", v,
                              problem +
                                  "; want service=probability pairs split by ',', e.g. "
                                  "checkout=0.5, frontend=1");
            }
            c->sampling.head.services = v;
            return Status::Ok();
          },
          [](const Config& c) { return c.sampling.head.services; }},
      Key{"sampling.tail.policies",
          [](const std::string& v, Config* c) -> Status {
            if (!v.empty()) {
              std::unique_ptr<pipeline::TailPolicies> parsed;
              if (Status st = pipeline::TailPolicies::Parse(v, &parsed); !st.ok()) {
                return BadValue("sampling.tail.policies", v,
                                st.message() +
                                    "; want policies split by ';', e.g. error; latency 500ms; "
                                    "rate 20/s; probability 0.01");
              }
            }
            c->sampling.tail.policies = v;
            return Status::Ok();
          },
          [](const Config& c) { return c.sampling.tail.policies; }},
      SH_UINT_KEY("sampling.tail.decision_wait_ms", sampling.tail.decision_wait_ms, ParseUint, 10,
                  600000, "milliseconds, 10 to 600000"),
      SH_UINT_KEY("sampling.tail.keep_ms", sampling.tail.keep_ms, ParseUint, 1000, 3600000,
                  "milliseconds, 1000 to 3600000"),
      SH_UINT_KEY("filter.max_future_s", filter.max_future_s, ParseUint, 1, kMaxSeconds,
                  "seconds, 1 to 315360000 (10 years)"),
      SH_UINT_KEY("filter.max_duration_s", filter.max_duration_s, ParseUint, 1, kMaxSeconds,
                  "seconds, 1 to 315360000 (10 years)"),
      SH_UINT_KEY("filter.max_attributes", filter.max_attributes, ParseUint, 0, 1000000,
                  "0 to 1000000"),
      SH_UINT_KEY("filter.max_events", filter.max_events, ParseUint, 0, 1000000, "0 to 1000000"),
      SH_UINT_KEY("filter.max_links", filter.max_links, ParseUint, 0, 1000000, "0 to 1000000"),
      SH_UINT_KEY("filter.max_value_bytes", filter.max_value_bytes, ParseBytes, 1, 1ull << 30,
                  "a size from 1 byte to 1GiB, e.g. 64KiB"),
      SH_UINT_KEY("filter.max_key_bytes", filter.max_key_bytes, ParseBytes, 1, 1ull << 20,
                  "a size from 1 byte to 1MiB"),
      SH_UINT_KEY("filter.max_span_names_per_service", filter.max_span_names_per_service, ParseUint,
                  0, 1000000, "0 (no cap) to 1000000"),
      SH_UINT_KEY("dependencies.interval_s", dependencies.interval_s, ParseUint, 1, 3600,
                  "seconds, 1 to 3600"),
      SH_UINT_KEY("dependencies.lag_s", dependencies.lag_s, ParseUint, 0, 3600,
                  "seconds, 0 to 3600"),
      Key{"durable.enabled",
          [](const std::string& v, Config* c) -> Status {
            if (v != "true" && v != "false") return BadValue("durable.enabled", v, "true or false");
            c->durable.enabled = v == "true";
            return Status::Ok();
          },
          [](const Config& c) { return std::string(c.durable.enabled ? "true" : "false"); }},
      SH_STRING_KEY("durable.dir", durable.dir, true,
                    "a directory path; empty for <data_dir>/queue"),
      SH_UINT_KEY("durable.max_bytes", durable.max_bytes, ParseBytes, 64ull << 10, 1ull << 42,
                  "a size of at least 64KiB, e.g. 1GiB"),
      SH_STRING_KEY("durable.fsync", durable.fsync, IsFsyncPolicy(v),
                    "always, or an interval in milliseconds from 1 to 10000"),
      Key{"dedup.enabled",
          [](const std::string& v, Config* c) -> Status {
            if (v != "true" && v != "false") return BadValue("dedup.enabled", v, "true or false");
            c->dedup.enabled = v == "true";
            return Status::Ok();
          },
          [](const Config& c) { return std::string(c.dedup.enabled ? "true" : "false"); }},
      SH_UINT_KEY("dedup.window_s", dedup.window_s, ParseUint, 30, 86400, "seconds, 30 to 86400"),
      SH_UINT_KEY("dedup.max_bytes", dedup.max_bytes, ParseBytes, 64ull << 10, 1ull << 40,
                  "a size of at least 64KiB, e.g. 128MiB"),
      SH_STRING_KEY("secondary.type", secondary.type,
                    v.empty() || v == "chdb" || v == "opensearch" || v == "elasticsearch",
                    "empty (no second sink), chdb, opensearch or elasticsearch"),
      SH_STRING_KEY("secondary.database", secondary.database, IsDatabaseName(v),
                    "a database name: letters, digits and _, not starting with a digit"),
      SH_STRING_KEY("opensearch.urls", opensearch.urls, IsUrlList(v),
                    "comma-separated http(s)://host:port URLs"),
      SH_STRING_KEY("opensearch.index_prefix", opensearch.index_prefix, IsIndexPrefix(v),
                    "empty, or lowercase letters, digits, '_' and '-' (not first)"),
      SH_STRING_KEY("opensearch.date_layout", opensearch.date_layout, IsDateLayout(v),
                    "a Go date layout of 2006, 01, 02 (and 15) with '-', '.' or '_' between"),
      SH_STRING_KEY("opensearch.index_date_separator", opensearch.index_date_separator,
                    v == "-" || v == "." || v == "_" || v.empty(), "'-', '.', '_' or empty"),
      Key{"opensearch.use_aliases",
          [](const std::string& v, Config* c) -> Status {
            if (v != "true" && v != "false") {
              return BadValue("opensearch.use_aliases", v, "true or false");
            }
            c->opensearch.use_aliases = v == "true";
            return Status::Ok();
          },
          [](const Config& c) { return std::string(c.opensearch.use_aliases ? "true" : "false"); }},
      SH_STRING_KEY("opensearch.user", opensearch.user, true, "a user name"),
      SH_STRING_KEY("opensearch.password", opensearch.password, true, "text"),
      SH_STRING_KEY("opensearch.api_key", opensearch.api_key, true,
                    "the key as the cluster's API gives it (base64 of id:key)"),
      SH_STRING_KEY("opensearch.tls_ca_file", opensearch.tls_ca_file, true,
                    "a PEM file path; empty for the system's CA certificates"),
      SH_STRING_KEY("opensearch.tls_cert", opensearch.tls_cert, true,
                    "a PEM client certificate path, or empty"),
      SH_STRING_KEY("opensearch.tls_key", opensearch.tls_key, true,
                    "the PEM key of opensearch.tls_cert, or empty"),
      SH_UINT_KEY("opensearch.timeout_s", opensearch.timeout_s, ParseUint, 1, 3600,
                  "seconds, 1 to 3600"),
      SH_UINT_KEY("opensearch.bulk_spans", opensearch.bulk_spans, ParseUint, 1, 1000000,
                  "1 to 1000000"),
      SH_UINT_KEY("opensearch.workers", opensearch.workers, ParseUint, 1, 64, "1 to 64"),
      SH_UINT_KEY("opensearch.queue_bytes", opensearch.queue_bytes, ParseBytes, 1ull << 20,
                  1ull << 40, "a size of at least 1MiB, e.g. 64MiB"),
      Key{"opensearch.create_templates",
          [](const std::string& v, Config* c) -> Status {
            if (v != "true" && v != "false") {
              return BadValue("opensearch.create_templates", v, "true or false");
            }
            c->opensearch.create_templates = v == "true";
            return Status::Ok();
          },
          [](const Config& c) {
            return std::string(c.opensearch.create_templates ? "true" : "false");
          }},
      SH_UINT_KEY("opensearch.shards", opensearch.shards, ParseUint, 1, 1024, "1 to 1024"),
      SH_UINT_KEY("opensearch.replicas", opensearch.replicas, ParseUint, 0, 16, "0 to 16"),
      Key{"debug.fault_injection",
          [](const std::string& v, Config* c) -> Status {
            if (v != "true" && v != "false") {
              return BadValue("debug.fault_injection", v, "true or false");
            }
            c->debug.fault_injection = v == "true";
            return Status::Ok();
          },
          [](const Config& c) { return std::string(c.debug.fault_injection ? "true" : "false"); }},
  };
  return keys;
}

Status Walk(const YAML::Node& node, const std::string& prefix, Config* cfg) {
  if (!node.IsMap()) {
    return Status::Invalid("config: '" + (prefix.empty() ? std::string("top level") : prefix) +
                           "' must be a mapping");
  }
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    // The search store's section, named for the engine it is.
    if (prefix.empty() && key == "elasticsearch") key = "opensearch";
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (kv.second.IsMap()) {
      bool is_section = false;
      for (const auto& k : Keys()) {
        if (std::string(k.name).rfind(path + ".", 0) == 0) is_section = true;
      }
      if (!is_section) return Status::Invalid("config: unknown key '" + path + "'");
      if (Status st = Walk(kv.second, path, cfg); !st.ok()) return st;
      continue;
    }
    // A bare `null` is YAML's null, not a string. For writer.sink it is the
    // word the user meant (`sink: null`); anywhere else a value is missing.
    if (kv.second.IsNull()) {
      if (path != "writer.sink") return Status::Invalid("config key '" + path + "': no value");
      if (Status st = ApplySetting(path, "null", cfg); !st.ok()) return st;
      continue;
    }
    if (path == "clickhouse.shards" && kv.second.IsSequence()) {
      // A list of shards, each a list of replica URLs (or one URL).
      std::string list;
      for (const auto& shard : kv.second) {
        if (!list.empty()) list += ';';
        if (shard.IsScalar()) {
          list += shard.as<std::string>();
          continue;
        }
        if (!shard.IsSequence()) {
          return Status::Invalid("config key 'clickhouse.shards': each shard is a list of URLs");
        }
        std::string replicas;
        for (const auto& url : shard) {
          if (!url.IsScalar()) {
            return Status::Invalid("config key 'clickhouse.shards': a replica is one URL");
          }
          replicas += (replicas.empty() ? "" : ",") + url.as<std::string>();
        }
        list += replicas;
      }
      if (Status st = ApplySetting(path, list, cfg); !st.ok()) return st;
      continue;
    }
    if (path == "peers.nodes" && kv.second.IsSequence()) {
      // A list of {name, otlp, query}.
      std::string list;
      for (const auto& n : kv.second) {
        if (!n.IsMap() || !n["name"] || !n["otlp"] || !n["query"] || n.size() != 3) {
          return Status::Invalid(
              "config key 'peers.nodes': each node is {name: ..., otlp: host:port, query: URL}");
        }
        list += (list.empty() ? "" : ";") + n["name"].as<std::string>() + "=" +
                n["otlp"].as<std::string>() + "=" + n["query"].as<std::string>();
      }
      if (Status st = ApplySetting(path, list, cfg); !st.ok()) return st;
      continue;
    }
    if (!kv.second.IsScalar()) {
      return Status::Invalid("config key '" + path + "': expected a single value");
    }
    if (Status st = ApplySetting(path, kv.second.as<std::string>(), cfg); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace

bool ParseBytes(const std::string& s, uint64_t* out) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  uint64_t n;
  if (!ParseUint(s.substr(0, i), &n)) return false;
  std::string unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  uint64_t mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KiB" || unit == "K" || unit == "KB")
    mult = 1ull << 10;
  else if (unit == "MiB" || unit == "M" || unit == "MB")
    mult = 1ull << 20;
  else if (unit == "GiB" || unit == "G" || unit == "GB")
    mult = 1ull << 30;
  else
    return false;
  if (n > (~0ull) / mult) return false;
  *out = n * mult;
  return true;
}

bool ParseServiceProbabilities(std::string_view text,
                               std::vector<std::pair<std::string, double>>* out,
                               std::string* problem) {
  out->clear();
  auto fail = [&](std::string why) {
    if (problem != nullptr) *problem = std::move(why);
    return false;
  };
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  while (!trim(text).empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail("'" + std::string(item) + "' has no '='");
    const std::string name(trim(item.substr(0, eq)));
    double p = 0;
    if (name.empty()) return fail("'" + std::string(item) + "' names no service");
    if (!ParseProbability(trim(item.substr(eq + 1)), &p)) {
      return fail("'" + std::string(item) + "': the probability is not a number from 0 to 1");
    }
    for (const auto& [seen, unused] : *out) {
      if (seen == name) return fail("service '" + name + "' is given twice");
    }
    out->emplace_back(name, p);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return true;
}

const std::map<std::string, std::string>& ConfigEnvVars() {
  static const std::map<std::string, std::string> vars = {
      {"SPANHOUSE_DATA_DIR", "data_dir"},
      {"SPANHOUSE_LOG_LEVEL", "log_level"},
      {"SPANHOUSE_OTLP_HTTP_LISTEN", "otlp_http.listen"},
      {"SPANHOUSE_OTLP_GRPC_LISTEN", "otlp_grpc.listen"},
      {"SPANHOUSE_ZIPKIN_LISTEN", "zipkin.listen"},
      {"SPANHOUSE_QUERY_LISTEN", "query.listen"},
      // Tokens too; comma-separated like in the YAML.
      {"SPANHOUSE_AUTH_INGEST_TOKENS", "auth.ingest_tokens"},
      {"SPANHOUSE_AUTH_QUERY_TOKENS", "auth.query_tokens"},
      // Credentials are better kept out of a YAML file.
      {"SPANHOUSE_STORAGE_S3_ACCESS_KEY_ID", "storage.s3_access_key_id"},
      {"SPANHOUSE_STORAGE_S3_SECRET_ACCESS_KEY", "storage.s3_secret_access_key"},
      {"SPANHOUSE_CLICKHOUSE_PASSWORD", "clickhouse.password"},
      {"SPANHOUSE_CLICKHOUSE_USER", "clickhouse.user"},
      {"SPANHOUSE_CLICKHOUSE_DATABASE", "clickhouse.database"},
      // Each node's own, like its data directory.
      {"SPANHOUSE_NODE_ID", "node.id"},
      {"SPANHOUSE_OPENSEARCH_PASSWORD", "opensearch.password"},
  };
  return vars;
}

Status ApplySetting(const std::string& key, const std::string& value, Config* cfg) {
  for (const auto& k : Keys()) {
    if (key == k.name) return k.set(value, cfg);
  }
  // The search store's section, named for the engine it is.
  if (key.rfind("elasticsearch.", 0) == 0) {
    return ApplySetting("opensearch." + key.substr(14), value, cfg);
  }
  return Status::Invalid("config: unknown key '" + key + "'");
}

Status ApplyYaml(const std::string& yaml_text, Config* cfg) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::Invalid(std::string("config: invalid YAML: ") + e.what());
  }
  if (root.IsNull()) return Status::Ok();
  try {
    return Walk(root, "", cfg);
  } catch (const YAML::Exception& e) {
    return Status::Invalid(std::string("config: ") + e.what());
  }
}

Status Validate(const Config& cfg) {
  const std::pair<const char*, const std::string*> listeners[] = {
      {"otlp_http.listen", &cfg.otlp_http.listen},
      {"otlp_grpc.listen", &cfg.otlp_grpc.listen},
      {"zipkin.listen", &cfg.zipkin.listen},
      {"query.listen", &cfg.query.listen}};
  for (size_t i = 0; i < std::size(listeners); ++i) {
    for (size_t j = i + 1; j < std::size(listeners); ++j) {
      if (!listeners[i].second->empty() && *listeners[i].second == *listeners[j].second) {
        return Status::Invalid(std::string("config: ") + listeners[i].first + " and " +
                               listeners[j].first + " are the same address");
      }
    }
  }
  if (cfg.opensearch.urls.empty()) {
    if (SecondaryIsSearchStore(cfg)) {
      return Status::Invalid("config key 'opensearch.urls': secondary.type is " +
                             cfg.secondary.type +
                             ", but no node is given (e.g. opensearch.urls: "
                             "http://localhost:9200; the section may be named elasticsearch)");
    }
    if (cfg.query.read_from != "clickhouse") {
      return Status::Invalid("config key 'opensearch.urls': query.read_from is " +
                             cfg.query.read_from + ", but no node is given");
    }
  }
  if (!cfg.opensearch.api_key.empty() && !cfg.opensearch.user.empty()) {
    return Status::Invalid(
        "config keys 'opensearch.api_key' and 'opensearch.user': give one way to authenticate");
  }
  if (cfg.opensearch.tls_cert.empty() != cfg.opensearch.tls_key.empty()) {
    return Status::Invalid(
        "config keys 'opensearch.tls_cert' and 'opensearch.tls_key': a client certificate needs "
        "both");
  }
  if (cfg.opensearch.date_layout != "2006-01-02" && cfg.opensearch.index_date_separator != "-") {
    return Status::Invalid(
        "config keys 'opensearch.date_layout' and 'opensearch.index_date_separator': give one");
  }
  if (!cfg.peers.nodes.empty()) {
    std::vector<peers::PeerNode> nodes;
    std::string why;
    if (!peers::ParsePeerNodes(cfg.peers.nodes, &nodes, &why)) {
      return Status::Invalid("config key 'peers.nodes': " + why);
    }
    if (cfg.node.id.empty()) {
      return Status::Invalid(
          "config key 'node.id': with peers.nodes, each node names itself (one of the list's "
          "names)");
    }
    if (std::none_of(nodes.begin(), nodes.end(),
                     [&](const peers::PeerNode& n) { return n.name == cfg.node.id; })) {
      return Status::Invalid("config key 'node.id': '" + cfg.node.id +
                             "' is not a name of peers.nodes");
    }
    if (!cfg.durable.enabled) {
      return Status::Invalid(
          "config key 'peers.nodes': forwarding to the other nodes needs the durable queue "
          "(durable.enabled: true), where the spans for a node that is down wait");
    }
  }
  if (cfg.queue.max_bytes < cfg.otlp_http.max_body_bytes) {
    return Status::Invalid(
        "config key 'queue.max_bytes': must be at least otlp_http.max_body_bytes");
  }
  for (const auto& [name, cert, key] :
       {std::tuple{"otlp_http", &cfg.otlp_http.tls_cert, &cfg.otlp_http.tls_key},
        std::tuple{"query", &cfg.query.tls_cert, &cfg.query.tls_key}}) {
    if (cert->empty() != key->empty()) {
      return Status::Invalid(std::string("config keys '") + name + ".tls_cert' and '" + name +
                             ".tls_key': give both (HTTPS) or neither (plain HTTP)");
    }
  }
  if (cfg.storage.move_after_s >= cfg.storage.retention_s) {
    return Status::Invalid(
        "config key 'storage.move_after_s': must be less than storage.retention_s (spans move to "
        "the cold volume before they are deleted)");
  }
  if (cfg.storage.trace_copy_s > 0 && cfg.storage.engine != "chdb") {
    return Status::Invalid(
        "config key 'storage.trace_copy_s': the embedded engine only (storage.engine: chdb)");
  }
  if (cfg.storage.trace_copy_s > cfg.storage.retention_s) {
    return Status::Invalid(
        "config key 'storage.trace_copy_s': must be at most storage.retention_s (a copy of spans "
        "no longer stored)");
  }
  if (cfg.storage.s3_access_key_id.empty() != cfg.storage.s3_secret_access_key.empty()) {
    return Status::Invalid(
        "config keys 'storage.s3_access_key_id' and 'storage.s3_secret_access_key': give both "
        "or neither");
  }
  if (cfg.storage.s3_endpoint.empty() && !cfg.storage.s3_access_key_id.empty()) {
    return Status::Invalid(
        "config key 'storage.s3_access_key_id': set, but storage.s3_endpoint is empty");
  }
  if (cfg.storage.engine == "clickhouse") {
    if (cfg.clickhouse.shards.empty()) {
      return Status::Invalid(
          "config key 'clickhouse.shards': storage.engine is clickhouse, but no server is given "
          "(e.g. --clickhouse-url http://localhost:8123)");
    }
    const auto shards = ClickHouseShards(cfg.clickhouse.shards);
    if ((shards.size() > 1 || shards[0].size() > 1) && cfg.clickhouse.cluster.empty()) {
      return Status::Invalid(
          "config key 'clickhouse.cluster': several shards or replicas are given; name the "
          "cluster they form in the servers' remote_servers (reads go through Distributed "
          "tables over it)");
    }
    if (cfg.secondary.type == "chdb") {
      return Status::Invalid(
          "config key 'secondary.type': a second embedded sink goes with the embedded engine "
          "(storage.engine: chdb)");
    }
  }
  if (!cfg.secondary.type.empty()) {
    if (!cfg.durable.enabled) {
      return Status::Invalid(
          "config key 'secondary.type': a second sink needs the durable queue (durable.enabled: "
          "true), where each sink keeps its own place");
    }
    if (cfg.secondary.type == "chdb" && cfg.secondary.database == "spanhouse") {
      return Status::Invalid(
          "config key 'secondary.database': must differ from the primary's database, spanhouse");
    }
  }
  if (!cfg.sampling.tail.policies.empty() && !cfg.durable.enabled) {
    return Status::Invalid(
        "config key 'sampling.tail.policies': tail sampling needs the durable queue "
        "(durable.enabled: true), where the spans of traces that do not fit in memory wait and "
        "the decisions are kept");
  }
  return Status::Ok();
}

std::vector<std::string> OpenSearchUrls(std::string_view list) {
  std::vector<std::string> urls;
  for (size_t p = 0; p <= list.size();) {
    const size_t e = std::min(list.find(',', p), list.size());
    std::string_view u = list.substr(p, e - p);
    while (!u.empty() && (u.front() == ' ' || u.front() == '\t')) u.remove_prefix(1);
    while (!u.empty() && (u.back() == ' ' || u.back() == '\t')) u.remove_suffix(1);
    if (!u.empty()) urls.emplace_back(u);
    p = e + 1;
  }
  return urls;
}

std::vector<std::vector<std::string>> ClickHouseShards(std::string_view list) {
  std::vector<std::vector<std::string>> shards;
  if (list.empty()) return shards;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  for (size_t pos = 0; pos <= list.size();) {
    size_t end = std::min(list.find(';', pos), list.size());
    std::vector<std::string> replicas;
    const std::string_view shard = list.substr(pos, end - pos);
    for (size_t p = 0; p <= shard.size();) {
      const size_t e = std::min(shard.find(',', p), shard.size());
      if (auto url = trim(shard.substr(p, e - p)); !url.empty()) replicas.emplace_back(url);
      p = e + 1;
    }
    shards.push_back(std::move(replicas));
    pos = end + 1;
  }
  return shards;
}

std::string DedupDir(const Config& cfg) {
  return cfg.data_dir + "/dedup";
}

std::string FirstToken(std::string_view tokens) {
  std::string_view t = tokens.substr(0, tokens.find(','));
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  return std::string(t);
}

bool SecondaryIsSearchStore(const Config& cfg) {
  return cfg.secondary.type == "opensearch" || cfg.secondary.type == "elasticsearch";
}

bool FillGaps(const Config& cfg) {
  if (cfg.query.fill_gaps == "auto") return SecondaryIsSearchStore(cfg);
  return cfg.query.fill_gaps == "on";
}

std::string SearchStoreName(const Config& cfg) {
  if (SecondaryIsSearchStore(cfg)) return cfg.secondary.type;
  return cfg.query.read_from == "elasticsearch" ? "elasticsearch" : "opensearch";
}

std::string IndexDateLayout(const Config& cfg) {
  if (cfg.opensearch.date_layout != "2006-01-02") return cfg.opensearch.date_layout;
  const std::string& sep = cfg.opensearch.index_date_separator;
  return "2006" + sep + "01" + sep + "02";
}

std::string DurableDir(const Config& cfg) {
  return cfg.durable.dir.empty() ? cfg.data_dir + "/queue" : cfg.durable.dir;
}

std::string ColdPath(const Config& cfg) {
  return cfg.storage.cold_path.empty() ? cfg.data_dir + "/cold" : cfg.storage.cold_path;
}

namespace {

// What --print-config shows of a secret: that it is set, not what it is.
std::string Redacted(const std::string& key, const std::string& value) {
  if (value.find_first_not_of(" \t,") == std::string::npos) return value;  // nothing set
  if (key == "auth.ingest_tokens" || key == "auth.query_tokens") {
    const size_t n = std::count(value.begin(), value.end(), ',') + 1;
    return fmt::format("<redacted, {} token{}>", n, n == 1 ? "" : "s");
  }
  if (key == "storage.s3_secret_access_key" || key == "clickhouse.password" ||
      key == "opensearch.password" || key == "opensearch.api_key") {
    return "<redacted>";
  }
  return value;
}

}  // namespace

std::string ToYaml(const Config& cfg, Secrets secrets) {
  // Built as a node tree so values that need quoting in YAML (IPv6
  // addresses, paths with ': ' or '#') are emitted so they parse back.
  YAML::Node root;
  for (const auto& k : Keys()) {
    std::string name = k.name;
    const std::string value = secrets == Secrets::kShow ? k.get(cfg) : Redacted(k.name, k.get(cfg));
    auto dot = name.find('.');
    if (dot == std::string::npos) {
      root[name] = value;
    } else {
      root[name.substr(0, dot)][name.substr(dot + 1)] = value;
    }
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace spanhouse::server
