#include "server/sink_factory.h"

#include <algorithm>
#include <map>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "peers/peer_sink.h"
#include "sink/null_sink.h"
#include "storage/clickhouse/embedded_sink.h"
#include "storage/opensearch/opensearch_sink.h"

namespace spanhouse::server {

namespace {

// The semantic-convention namespaces and user_fields.also_well_known's.
std::vector<std::string> WellKnownNamespaces(const Config& cfg) {
  std::vector<std::string> names = storage::UserFields::DefaultWellKnown();
  const std::string& extra = cfg.user_fields.also_well_known;
  for (size_t start = 0; start <= extra.size();) {
    size_t comma = extra.find(',', start);
    if (comma == std::string::npos) comma = extra.size();
    std::string name = extra.substr(start, comma - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) names.push_back(name);
    start = comma + 1;
  }
  return names;
}

// A ClickHouse sink over `conns` (the embedded engine's, or a shard's).
std::unique_ptr<sink::Sink> ClickHouseSink(
    const SinkSpec& spec, const SinkContext& ctx,
    std::vector<std::unique_ptr<storage::SqlConnection>> conns, storage::LegacyLayout layout) {
  const Config& cfg = *ctx.cfg;
  storage::EmbeddedSinkOptions o;
  o.name = spec.name;
  // Its bound is twice the whole budget: the budget (and with several
  // sinks, the sink's share of it) is what refuses. (A batch's reservation
  // is corrected to its decoded size after the budget admitted it, so the
  // budget can run over by a little.)
  o.queue_bytes = spec.queue_bytes != 0 ? spec.queue_bytes : 2 * cfg.queue.max_bytes;
  o.writer = WriterOptionsOf(cfg, ctx.dir);
  o.writer.database = spec.database;
  if (!spec.spool_dir.empty()) o.writer.spool_dir = spec.spool_dir;
  o.cluster_shard = spec.shard;
  o.cluster_shards = spec.shards;
  return storage::MakeClickHouseSink(std::move(conns), ctx.caps, o, spec.faults, layout);
}

size_t Writers(const SinkSpec& spec, const Config& cfg) {
  return spec.writers != 0 ? spec.writers : static_cast<size_t>(cfg.writer.threads);
}

Status MakeChdb(const SinkSpec& spec, const SinkContext& ctx, std::unique_ptr<sink::Sink>* out) {
  std::vector<std::unique_ptr<storage::SqlConnection>> conns;
  SH_RETURN_IF_ERROR(ctx.connect(Writers(spec, *ctx.cfg), 0, &conns));
  *out = ClickHouseSink(spec, ctx, std::move(conns), {});
  return Status::Ok();
}

Status MakeClickHouseShard(const SinkSpec& spec, const SinkContext& ctx,
                           std::unique_ptr<sink::Sink>* out) {
  std::vector<std::unique_ptr<storage::SqlConnection>> conns;
  SH_RETURN_IF_ERROR(ctx.connect(Writers(spec, *ctx.cfg), spec.shard, &conns));
  // The shard's span ids as its spans table stores them (a cluster's store
  // made before schema 11 keeps two columns).
  storage::LegacyLayout layout;
  SH_RETURN_IF_ERROR(
      storage::SpansHaveSpanIds(*conns.front(), spec.database, &layout.span_ids_column));
  if (!layout.span_ids_column) {
    spdlog::info(
        "ClickHouse shard {}: spans stores span_id and parent_span_id in columns of their own "
        "(made before schema 11)",
        spec.shard + 1);
  }
  *out = ClickHouseSink(spec, ctx, std::move(conns), layout);
  return Status::Ok();
}

Status MakeOpenSearch(const SinkSpec& spec, const SinkContext& ctx,
                      std::unique_ptr<sink::Sink>* out) {
  if (ctx.opensearch == nullptr) {
    return Status::Invalid("sink " + spec.name + ": no OpenSearch cluster (opensearch.urls)");
  }
  const Config& cfg = *ctx.cfg;
  storage::opensearch::OpenSearchSinkOptions o;
  o.name = spec.name;
  o.layout = SearchStoreLayout(cfg);
  o.create_templates = cfg.opensearch.create_templates;
  o.templates.shards = static_cast<uint32_t>(cfg.opensearch.shards);
  o.templates.replicas = static_cast<uint32_t>(cfg.opensearch.replicas);
  o.queue_bytes = spec.queue_bytes != 0 ? spec.queue_bytes : cfg.opensearch.queue_bytes;
  o.bulk_spans = cfg.opensearch.bulk_spans;
  o.workers = static_cast<int>(cfg.opensearch.workers);
  o.dead_letter_dir = ctx.dir + "/dead-letter";
  *out = storage::opensearch::MakeOpenSearchSink(ctx.opensearch, o);
  return Status::Ok();
}

Status MakePeer(const SinkSpec& spec, const SinkContext& ctx, std::unique_ptr<sink::Sink>* out) {
  const peers::PeerRing* ring = ctx.ring;
  size_t index = ring == nullptr ? 0 : ring->size();
  for (size_t i = 0; ring != nullptr && i < ring->size(); ++i) {
    if (ring->node(i).name == spec.peer && i != ring->self()) index = i;
  }
  if (ring == nullptr || index == ring->size()) {
    return Status::Invalid("sink " + spec.name + ": '" + spec.peer +
                           "' is not another node of peers.nodes");
  }
  const Config& cfg = *ctx.cfg;
  peers::PeerSinkOptions o;
  o.name = spec.name;
  o.self = cfg.node.id;
  o.peer = spec.peer;
  o.address = ring->node(index).otlp;
  // The nodes share their listeners' set-up: TLS here means TLS there.
  o.tls = !cfg.otlp_http.tls_cert.empty();
  o.tls_ca_file = cfg.peers.tls_ca_file;
  o.owns = [ring, index](const TraceId& t, uint64_t view) { return ring->Owner(t, view) == index; };
  if (ctx.decide_here) {  // else its spans wait for it, however long it is down
    o.handoff_after = std::chrono::seconds(cfg.peers.down_after_s);
    o.decide_here = [here = ctx.decide_here, index](std::unique_ptr<SpanBatch> b) {
      return here(std::move(b), index);
    };
  }
  o.dead_letter_dir = ctx.dir + "/dead-letter";
  if (spec.queue_bytes != 0) o.queue_bytes = spec.queue_bytes;
  // The peers share the ingest tokens ("tok1,tok2"): the first one opens theirs.
  o.bearer_token = FirstToken(cfg.auth.ingest_tokens);
  std::unique_ptr<sink::RuntimeSink> made;
  SH_RETURN_IF_ERROR(peers::MakePeerSink(std::move(o), &made));
  *out = std::move(made);
  return Status::Ok();
}

using Maker = Status (*)(const SinkSpec&, const SinkContext&, std::unique_ptr<sink::Sink>*);

// Every kind of sink: one line each.
const std::map<std::string_view, Maker>& Kinds() {
  static const std::map<std::string_view, Maker> kinds = {
      {"chdb", MakeChdb},
      {"clickhouse", MakeClickHouseShard},
      {"opensearch", MakeOpenSearch},
      {"peer", MakePeer},
      {"null",
       [](const SinkSpec& spec, const SinkContext&, std::unique_ptr<sink::Sink>* out) {
         *out = sink::MakeNullSink(spec.name);
         return Status::Ok();
       }},
  };
  return kinds;
}

}  // namespace

storage::WriterOptions WriterOptionsOf(const Config& cfg, const std::string& dir) {
  storage::WriterOptions w;
  w.max_rows = cfg.writer.max_rows;
  // Batches waiting to be encoded hold receivers' memory: at most a
  // quarter of it, so a full budget always has blocks on their way out.
  w.max_bytes = std::min<uint64_t>(cfg.writer.max_bytes, cfg.queue.max_bytes / 4);
  w.insert_rows = cfg.writer.insert_rows;
  w.max_age = std::chrono::milliseconds(cfg.writer.max_age_ms);
  w.spool_dir = dir + "/spool";
  w.well_known = WellKnownNamespaces(cfg);
  w.dead_letter_dir = dir + "/dead-letter";
  return w;
}

Status MakeSink(const SinkSpec& spec, const SinkContext& ctx, std::unique_ptr<sink::Sink>* out) {
  const auto& kinds = Kinds();
  const auto it = kinds.find(spec.kind);
  if (it == kinds.end()) {
    std::vector<std::string_view> known;
    known.reserve(kinds.size());
    for (const auto& [kind, make] : kinds) known.push_back(kind);
    return Status::Invalid(fmt::format("sink {}: unknown kind '{}' (known: {})", spec.name,
                                       spec.kind, fmt::join(known, ", ")));
  }
  return it->second(spec, ctx, out);
}

storage::opensearch::IndexLayout SearchStoreLayout(const Config& cfg) {
  storage::opensearch::IndexLayoutOptions o;
  o.prefix = cfg.opensearch.index_prefix;
  o.date_layout = IndexDateLayout(cfg);
  o.use_aliases = cfg.opensearch.use_aliases;
  storage::opensearch::IndexLayout layout;
  if (Status st = storage::opensearch::IndexLayout::Create(o, &layout); !st.ok()) {
    spdlog::error("opensearch: {}; the default layout is used", st.message());
  }
  return layout;
}

std::string SecondarySinkName(const Config& cfg) {
  return "chdb:" + cfg.secondary.database;
}

SinkSpec Spec(std::string kind, std::string name, std::string database) {
  SinkSpec s;
  s.kind = std::move(kind);
  s.name = std::move(name);
  s.database = std::move(database);
  return s;
}

std::vector<SinkSpec> ServeSinks(const Config& cfg, size_t cluster_shards) {
  std::vector<SinkSpec> specs;
  if (cfg.writer.sink == "null") {
    specs.push_back(Spec("null", "null"));
  } else if (cfg.storage.engine == "clickhouse") {
    // One sink per shard, each with the shard's replicas; one shard: all of it.
    for (size_t s = 0; s < cluster_shards; ++s) {
      SinkSpec spec =
          Spec("clickhouse",
               cluster_shards == 1 ? "clickhouse" : fmt::format("clickhouse-shard{}", s + 1),
               cfg.clickhouse.database);
      spec.shard = static_cast<uint32_t>(s);
      spec.shards = static_cast<uint32_t>(cluster_shards);
      specs.push_back(std::move(spec));
    }
  } else {
    specs.push_back(Spec("chdb", "chdb", std::string(storage::kDatabase)));
  }
  if (cfg.secondary.type == "chdb") {
    specs.push_back(Spec("chdb", SecondarySinkName(cfg), cfg.secondary.database));
  }
  if (SecondaryIsSearchStore(cfg)) specs.push_back(Spec("opensearch", "opensearch"));
  // Every other node of peers.nodes: the spans of the traces it owns.
  std::vector<peers::PeerNode> nodes;
  std::string why;
  if (peers::ParsePeerNodes(cfg.peers.nodes, &nodes, &why)) {
    for (const peers::PeerNode& n : nodes) {
      if (n.name == cfg.node.id) continue;
      SinkSpec spec = Spec("peer", "peer:" + n.name);
      spec.peer = n.name;
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

}  // namespace spanhouse::server
