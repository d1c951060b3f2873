// spanhouse serve configuration: defaults < YAML file < environment < flags.
// Validated once at start-up; a bad key or value stops start-up with a
// message that names it (OpenTelemetry Collector habit: fail fast, then
// never crash on configuration later).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace spanhouse::server {

struct Config {
  std::string data_dir = "./data";
  std::string log_level = "info";
  struct {
    std::string listen = "127.0.0.1:4318";
    uint64_t max_body_bytes = 20ull << 20;
    uint64_t max_spans_per_request = 100000;  // more: 413
    int threads = 2;
    // PEM certificate chain and key: both set, the listener speaks HTTPS only.
    std::string tls_cert;
    std::string tls_key;
  } otlp_http;
  // The other receivers share otlp_http's limits (max_body_bytes,
  // max_spans_per_request), token guard (auth.ingest_tokens) and TLS
  // certificate. An empty address turns that receiver off.
  struct {
    std::string listen = "127.0.0.1:4317";
  } otlp_grpc;
  struct {
    std::string listen = "127.0.0.1:9411";
  } zipkin;
  struct {
    std::string listen = "127.0.0.1:16686";
    std::string tls_cert;
    std::string tls_key;
    // Every query of the query API runs at most this long (a 503 after) and
    // answers at most this many rows (a 400 after); a trace lookup reads at
    // most max_trace_spans spans.
    uint64_t timeout_s = 30;
    uint64_t max_rows = 200000;
    uint64_t max_trace_spans = 1000000;
    // Where the query API and the UI read spans: "clickhouse" (the primary
    // store) or "opensearch" (the opensearch section's cluster, in Jaeger's
    // format). Switched at run time by PUT /api/admin/read-source or a
    // reload of the configuration file (SIGHUP).
    std::string read_from = "clickhouse";
    // When the store read from fails or takes longer than fallback_after_ms,
    // the other store answers (with opensearch configured); the answer's
    // X-Spanhouse-Read-Source header names the store that answered.
    bool fallback = true;
    uint64_t fallback_after_ms = 5000;
    // A trace lookup the store read lacks, whole or in part, is completed
    // from the other store (asked at once, waited for fallback_after_ms at
    // most), each span once; the answer says so in X-Spanhouse-Read-Completed.
    // "auto": on while a migration is under way (SecondaryIsSearchStore), so
    // reads from ClickHouse see the history the backfill has not copied yet;
    // "on", "off". Switched at run time like fallback.
    std::string fill_gaps = "auto";
    // The recent-traces index: the spans of the last recent_max_age_s, so a
    // trace is readable the moment it is accepted and read fast for minutes
    // after. The newest held in memory (at most recent_max_bytes, part of
    // queue.max_bytes; 0: the index is off); older ones, with the durable
    // queue, by their trace ids in memory and their requests in segments the
    // queue keeps after storing them (at most recent_disk_bytes; 0: none).
    uint64_t recent_max_bytes = 64ull << 20;
    uint64_t recent_disk_bytes = 2ull << 30;
    uint64_t recent_max_age_s = 900;
  } query;
  struct {
    // Comma-separated bearer tokens; a request needs one of its listener's
    // in `Authorization: Bearer <token>`. Empty: that listener is open.
    // The query listener's /healthz and /readyz stay open for probes.
    std::string ingest_tokens;  // OTLP/HTTP
    std::string query_tokens;   // query API, /metrics, /debug
  } auth;
  struct {
    // Memory for spans in flight: being decoded, queued, or waiting in a
    // writer for their insert. Full -> 429 + Retry-After. (The engine's own
    // memory for an insert, ~1.8 KB per row of writer.insert_rows, comes on
    // top: 256 MiB here kept serve under 2 GiB at full load.)
    uint64_t max_bytes = 256ull << 20;
    // How long a request waits for room in max_bytes before that 429.
    uint64_t wait_ms = 250;
  } queue;
  struct {
    uint64_t max_rows = 200000;
    uint64_t max_bytes = 128ull << 20;
    uint64_t insert_rows = 400000;  // rows per INSERT (one part): blocks spooled until then
    uint64_t max_age_ms = 3000;     // or until a span has waited this long
    int threads = 1;                // queue shards, one writer thread and chDB connection each
    // The primary sink: "chdb" stores spans in the embedded ClickHouse;
    // "null" takes them and stores nothing, to measure the pipeline without
    // a store (benchmarks only).
    std::string sink = "chdb";
  } writer;
  struct {
    // How long the per-minute RED series and dependency edges are kept.
    uint64_t retention_days = 7;
  } metrics;
  struct {
    // Hot/cold tiers: spans move from the hot volume (data_dir) to the cold
    // one move_after_s after their timestamp and are deleted retention_s
    // after it. The cold volume is a directory (cold_path, by default
    // <data_dir>/cold), or an S3-compatible bucket when s3_endpoint is set.
    std::string cold_path;  // empty: <data_dir>/cold
    uint64_t move_after_s = 8 * 3600;
    uint64_t retention_s = 7 * 24 * 3600;
    // Parts whose compressed size is below this are written with LZ4, larger
    // ones with ZSTD(1) (fresh inserts and their first merges are rewritten
    // within seconds at load; the parts that stay are compressed small).
    // 32 MiB: a day of ~600k loadgen spans or more ends ZSTD once merged;
    // at 64 MiB a day of 1M stayed LZ4 (BENCHMARKS.md).
    uint64_t zstd_min_part_bytes = 32ull << 20;
    // > 0: every span is also kept this long in the trace copy, a table
    // ordered by trace id that a lookup by id reads in one query
    // (storage/clickhouse/trace_copy.h); 0: none (the table is dropped).
    uint64_t trace_copy_s = 0;
    // "http(s)://host:port/bucket/prefix/"; empty: the cold volume is cold_path.
    std::string s3_endpoint;
    std::string s3_access_key_id;  // both or neither; neither: anonymous access
    std::string s3_secret_access_key;
    std::string s3_region;  // empty: the endpoint's default
    // "chdb": the embedded ClickHouse in data_dir (the default). "clickhouse":
    // a ClickHouse server or cluster (the clickhouse section); the tiers
    // above are then the server's own business.
    std::string engine = "chdb";
  } storage;
  struct {
    // The cluster's shards, each a list of its replicas' HTTP interfaces
    // (http://, or https:// for TLS):
    // "http://a1:8123,http://a2:8123;http://b1:8123,http://b2:8123" (shards
    // split by ';', replicas by ','), or a YAML list of lists. One URL: one
    // server. Spans go to the shard that owns their trace (sipHash64 of the
    // trace id), to its first replica that answers.
    std::string shards;
    std::string user = "default";
    std::string password;
    std::string database = "spanhouse";
    // The cluster's name in the servers' remote_servers: the Distributed
    // tables that reads go through are made over it. Needed with more than
    // one shard or replica.
    std::string cluster;
    uint64_t timeout_s = 60;  // per statement
    // https:// servers: the CA certificates (PEM) their certificates must
    // chain to; "": the system's. The URL's host name must match.
    std::string tls_ca_file;
    // Insert bodies: "none" or "gzip" (fewer bytes on the network for CPU:
    // BENCHMARKS.md has both).
    std::string compression = "none";
    // This spanhouse may create and upgrade the schema and run the
    // dependency job. Of the nodes with it true on one server or cluster,
    // exactly one runs them at a time, the holder of the job lease
    // (storage/clickhouse/job_lease.h); the others stand by and take over
    // within job_lease_s of its death. false: never; such a node waits at
    // start until the schema is current.
    bool run_jobs = true;
    // How long a job runner's heartbeat holds the lease (renewed every
    // third of it): a dead runner is replaced after about this long.
    uint64_t job_lease_s = 15;
  } clickhouse;
  struct {
    // This node's name among the nodes sharing a ClickHouse (the job
    // lease). "": one made up at the first start and kept in
    // <data_dir>/node_id. Each node needs its own.
    std::string id;
  } node;
  struct {
    // The nodes that act as one system, the same list on every node:
    // "name=host:port=http(s)://host:port;..." (name, OTLP/gRPC address,
    // query URL; YAML: a list of {name, otlp, query}). One of them is this
    // node (node.id). Empty: this node is alone.
    std::string nodes;
    // A peer that has not answered this long is down: its traces go to the
    // nodes next in line, and the spans waiting for it are decided here.
    uint64_t down_after_s = 30;
    uint64_t probe_ms = 1000;  // how often each peer is probed
    // How long a trace lookup or search waits for each peer's recent spans;
    // an answer without them names the peer in X-Spanhouse-Peers-Missing.
    uint64_t read_timeout_ms = 2000;
    // The CA certificates (PEM) the peers' certificates must chain to; "":
    // the system's. A node whose own OTLP listeners use TLS (otlp_http.tls_cert)
    // forwards to its peers over TLS; an https:// query URL is read over TLS.
    std::string tls_ca_file;
  } peers;
  struct {
    // Attribute keys outside the OpenTelemetry semantic-convention
    // namespaces (http, db, k8s, ...) are copied to the spans' user_fields
    // column (a Map; the JSON type in stores made before schema 13).
    // Comma-separated namespaces to treat as well-known too,
    // e.g. "shop,app.internal" (a key is in a namespace when it equals it
    // or starts with it and a dot).
    std::string also_well_known;
  } user_fields;
  struct {
    // The filter of unreasonable data (pipeline/filter). Spans starting
    // more than max_future_s ahead or longer ago than storage.retention_s,
    // ending before they start, lasting over max_duration_s, or with an
    // all-zero trace or span id are dropped (partial success).
    uint64_t max_future_s = 3600;
    uint64_t max_duration_s = 24 * 3600;
    // Over these, the extra attributes (per span, event, link), events and
    // links are dropped and keys and values cut; the span is kept.
    uint64_t max_attributes = 128;
    uint64_t max_events = 128;
    uint64_t max_links = 128;
    uint64_t max_value_bytes = 64ull << 10;
    uint64_t max_key_bytes = 256;
    // Names past this many distinct ones per service become "(other)"; 0: no cap.
    uint64_t max_span_names_per_service = 1000;
  } filter;
  struct {
    struct {
      // The share of traces kept (0..1), decided by trace id before the
      // durable queue (pipeline/sampling/head_sampler.h). Sampled-out spans
      // still count in RED, dependency edges and the catalog.
      double probability = 1.0;
      // Per-service probabilities: "checkout=0.5, frontend=1" (by the
      // resource's service.name).
      std::string services;
    } head;
    struct {
      // The policy list ("error; latency 500ms; rate 20/s; probability
      // 0.01", pipeline/sampling/tail_policy.h); "": no tail sampling.
      std::string policies;
      // How long a trace's spans wait for the decision after its first.
      uint64_t decision_wait_ms = 10000;
      // How long a decision is remembered for late spans.
      uint64_t keep_ms = 60000;
    } tail;
  } sampling;
  struct {
    uint64_t interval_s = 60;  // how often the dependency job runs
    uint64_t lag_s = 120;      // how long after a minute ends its edges are computed
  } dependencies;
  struct {
    // The durable queue (pipeline/durable): accepted spans are written to a
    // log of segment files before the 200 and replayed after a crash.
    bool enabled = true;
    std::string dir;  // empty: <data_dir>/queue
    // Full -> 429 + Retry-After. While it has room, a request the memory
    // budget (queue.max_bytes) cannot take waits here instead (spilled).
    uint64_t max_bytes = 1ull << 30;
    // "always": the 200 waits for the fsync that covers the request (group
    // commit: one fsync for every request written meanwhile), however long
    // that takes; the answer is deferred, so the I/O thread serves other
    // connections meanwhile; a failed sync answers 503. A number N: fsync
    // every N ms, the 200 once written (survives a crash of the process, not
    // of the machine).
    std::string fsync = "200";
  } durable;
  struct {
    // Spans an accepted request already had (an exporter's retry) are
    // dropped at intake, before the durable queue (pipeline/dedup): every
    // sink, view and sampler sees a span once. Their keys are held for
    // window_s, in a table of max_bytes (~4.7 bytes a key: 10 minutes at
    // 250k spans/s take 720MiB; a full table forgets its oldest keys first)
    // and in files under <data_dir>/dedup that refill it at start.
    bool enabled = true;
    uint64_t window_s = 600;
    uint64_t max_bytes = 128ull << 20;
  } dedup;
  struct {
    // A second sink beside the primary, with its own place in the durable
    // queue: every accepted span is stored in both, each at its own pace (a
    // slow or failing one holds back only itself until the durable queue is
    // full). "" (none) or "chdb": another database of the embedded engine,
    // with the same tables and views. Reads come from the primary, and the
    // dependency edges are computed there only.
    // "opensearch" or "elasticsearch": the opensearch section's cluster
    // (Elasticsearch 7.x, OpenSearch 1.x/2.x; the engine is checked at
    // start), in Jaeger's document format: the dual-write of a migration.
    std::string type;
    std::string database = "spanhouse_secondary";
  } secondary;
  struct {
    // An OpenSearch or Elasticsearch cluster holding Jaeger's indices: the
    // secondary sink writes there (secondary.type: opensearch), the query
    // API may read there (query.read_from), and reconcile and backfill read
    // there. Comma-separated node URLs, http(s)://host:port.
    std::string urls;
    // Jaeger's index prefix: indices are <prefix>-jaeger-span-YYYY-MM-DD.
    std::string index_prefix;
    // The date in index names, as Jaeger's options name it: a Go layout of
    // 2006, 01, 02 (and 15: hourly indices), or only the separator of the
    // default one ("." gives 2006.01.02). Dependency indices stay daily.
    std::string date_layout = "2006-01-02";
    std::string index_date_separator = "-";
    // Rollover indices behind <prefix>-jaeger-span-read / -write aliases
    // (Jaeger's use_aliases) instead of dated ones.
    bool use_aliases = false;
    std::string user;  // basic auth when set
    std::string password;
    std::string api_key;      // "Authorization: ApiKey <key>" (base64 of id:key); not with user
    std::string tls_ca_file;  // https: the CA certificates; "": the system's
    std::string tls_cert;     // https: a client certificate (PEM) and its key
    std::string tls_key;
    uint64_t timeout_s = 30;  // per request
    uint64_t bulk_spans = 5000;
    uint64_t workers = 2;
    uint64_t queue_bytes = 64ull << 20;
    // The index templates spanhouse puts (Jaeger's mappings).
    bool create_templates = true;
    uint64_t shards = 5;
    uint64_t replicas = 1;
  } opensearch;
  struct {
    // Enables POST /debug/sink on the query listener (slow or failing
    // inserts on demand). For tests; never in production.
    bool fault_injection = false;
  } debug;
};

// Environment variables read, and the keys they set.
const std::map<std::string, std::string>& ConfigEnvVars();

// Applies YAML text to `cfg`. Unknown keys and bad values are errors.
Status ApplyYaml(const std::string& yaml_text, Config* cfg);
// Applies one "dotted.key" = value (from an env var or a flag).
Status ApplySetting(const std::string& key, const std::string& value, Config* cfg);
// Checks cross-field rules (addresses parse, sizes sensible).
Status Validate(const Config& cfg);
// clickhouse.shards as shards of replica URLs (an empty shard where the
// list has one: Validate refuses it).
std::vector<std::vector<std::string>> ClickHouseShards(std::string_view list);
// sampling.head.services as (service, probability) pairs; false (and
// `problem` says why) when the text is not "name=p, name=p" with p in [0, 1].
bool ParseServiceProbabilities(std::string_view text,
                               std::vector<std::pair<std::string, double>>* out,
                               std::string* problem = nullptr);
// Whether the secondary sink writes the opensearch section's cluster (the
// dual-write of a migration): secondary.type opensearch or elasticsearch.
bool SecondaryIsSearchStore(const Config& cfg);
// query.fill_gaps, "auto" resolved: on while SecondaryIsSearchStore.
bool FillGaps(const Config& cfg);
// The name of the search store as a read source and in messages: the
// secondary's type when it is one, else "opensearch".
std::string SearchStoreName(const Config& cfg);
// opensearch.date_layout, or the default layout with index_date_separator.
std::string IndexDateLayout(const Config& cfg);
// opensearch.urls as a list.
std::vector<std::string> OpenSearchUrls(std::string_view list);
// The first token of a list ("tok1, tok2"): what this node shows its peers, which share the list.
std::string FirstToken(std::string_view tokens);
// The durable queue's directory: durable.dir, or <data_dir>/queue.
std::string DurableDir(const Config& cfg);
// The dedup index's key files: <data_dir>/dedup.
std::string DedupDir(const Config& cfg);
// The cold volume's directory: storage.cold_path, or <data_dir>/cold.
std::string ColdPath(const Config& cfg);
// What ToYaml does with secrets (bearer tokens, the S3 secret key).
enum class Secrets {
  kRedact,  // "<redacted, N tokens>", "<redacted>": for printing and logs
  kShow,    // in clear, so that the YAML reads back the same (tests)
};
// The effective configuration as YAML (for `spanhouse serve --print-config`,
// which redacts). An empty secret is printed empty either way.
std::string ToYaml(const Config& cfg, Secrets secrets = Secrets::kRedact);

// "20MiB", "512KiB", "1GiB", "1000" -> bytes.
bool ParseBytes(const std::string& s, uint64_t* out);

}  // namespace spanhouse::server
