// `spanhouse bench storage`: bytes per span on disk, by column and by
// table, for the project's schema and the layouts it was chosen against
// (storage_variants.h: codecs, LowCardinality, sort keys, granule size).
//
// The corpus is the load generator's (same seed, same spans): requests of
// ~500 spans, traces 100 us apart as loadgen sends them, every span fresh
// (ids and attribute values drawn anew, not cycled payloads), from the replay
// corpus or, with --corpus fresh, the fresh one (generator.h). It goes in the
// writer's way: requests gathered into writer-sized blocks, each block's new
// resources into `resources` first, its spans sorted by the table key and
// encoded as one Native block, INSERT ... SELECT * FROM file(..., 'Native').
// Then OPTIMIZE ... FINAL on every table (the CPU measured is that of the
// inserts, their views and merges, and this last merge), the dependency
// job's query over the whole range, and the sizes from system.columns and
// system.parts (bytes on disk: data, marks, indexes, statistics). Trace
// lookups by id show what a sort key costs the reader: the granules of the
// spans table the lookup's index analysis keeps.
//
// Each variant runs in a child process of its own with its own data
// directory (chDB runs one engine per process), so its CPU (getrusage: the
// engine's insert, view, merge threads) is its own. Variants run one after
// the other, in rounds (--rounds) so noise spreads over all; compare them
// within one run.
//
// --compare opensearch --opensearch-url URL: the same corpus (the same
// SpanBatches) also goes to that cluster as Jaeger writes it (jaeger_document.h:
// span documents created with _id = trace id + span id in the daily span
// indices, a service document per service and operation), under an index
// prefix of its own (bench-<pid>) whose templates (Jaeger's, 1 shard, 0
// replicas) are put first; _bulk pages of --opensearch-bulk-spans spans from
// --opensearch-workers connections (1 by default: the order of the documents
// in the segments changes their size). Then a refresh, a count (every span must
// be there), a force-merge to one segment per shard (waited for), and the
// primaries' store size (GET <prefix>-jaeger-*/_stats/store) over the spans,
// beside the ClickHouse total of every table of the project's schema
// ("chosen", the only variant measured unless --variant names others) after
// its OPTIMIZE FINAL. The bench's indices and templates are deleted at the
// end unless --keep.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "model/span_batch.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"
#include "storage/opensearch/opensearch_client.h"
#include "tools/bench/bench.h"
#include "tools/bench/bench_storage.h"
#include "tools/bench/storage_variants.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/payload.h"

namespace spanhouse::bench {
namespace storage_bench {
namespace {

bool IsRoot(const SpanBatch& b, uint32_t i) {
  for (uint8_t x : b.spans.parent_span_id[i])
    if (x != 0) return false;
  return true;
}

// Requests of whole traces as loadgen builds them, the next request's
// traces starting where this one's end, until `spans` spans.
Corpus BuildCorpus(const StorageOptions& o) {
  Corpus c;
  loadgen::CorpusOptions corpus{o.seed};
  loadgen::ParseCorpusKind(o.corpus, &corpus.kind);
  loadgen::TraceGenerator gen(corpus);
  // From the start of the current hour (UTC): recent enough for the
  // metrics tables' TTL, and the corpus rarely crosses an hour.
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  c.first_ns = static_cast<uint64_t>(now_s / 3600 * 3600) * 1000000000ull;
  uint64_t t = c.first_ns;
  std::unordered_map<std::string, SampleTrace> traces;
  std::vector<std::string> order;  // trace ids in order of appearance
  while (c.spans < o.spans) {
    auto b = std::make_unique<SpanBatch>();
    const size_t n = gen.AppendTraces(t, loadgen::kTraceSpacingNs, o.request_spans, b.get());
    size_t roots = 0;
    for (uint32_t i = 0; i < n; ++i) {
      roots += IsRoot(*b, i) ? 1 : 0;
      const TraceId& id = b->spans.trace_id[i];
      std::string key(reinterpret_cast<const char*>(id.data()), id.size());
      auto [it, fresh] = traces.try_emplace(key);
      if (fresh) {
        it->second.id = id;
        it->second.first_ns = b->spans.start_ns[i];
        order.push_back(key);
      }
      it->second.first_ns = std::min(it->second.first_ns, b->spans.start_ns[i]);
      it->second.last_ns = std::max(it->second.last_ns, b->spans.end_ns[i]);
      it->second.spans += 1;
      c.last_ns = std::max(c.last_ns, b->spans.end_ns[i]);
    }
    t += loadgen::kTraceSpacingNs * std::max<size_t>(roots, 1);
    c.spans += n;
    c.resource_ids.push_back(storage::ResourceIds(*b));
    c.requests.push_back(std::move(b));
  }
  c.traces = order.size();
  const size_t want = std::min(o.lookups, order.size());
  for (size_t k = 0; k < want; ++k) c.sample.push_back(traces[order[k * order.size() / want]]);
  return c;
}

// The corpus as the writer inserts it, blocks sorted in `order`.
Status EncodeBlocks(const Corpus& c, const StorageOptions& o, SpanOrder order,
                    storage::UserFieldValues values, const storage::StorageLayout& layout,
                    const storage::Capabilities& caps, const std::string& dir,
                    std::vector<BlockFiles>* out) {
  std::filesystem::create_directories(dir);
  std::set<uint64_t> stored;  // resources inserted by an earlier block
  std::vector<storage::SpanRow> rows;
  std::string resources;
  std::string spans;
  const auto last_seen = static_cast<uint32_t>(c.first_ns / 1000000000);
  for (size_t r = 0; r < c.requests.size();) {
    rows.clear();
    resources.clear();
    spans.clear();
    for (; r < c.requests.size() && rows.size() < o.block_spans; ++r) {
      const SpanBatch& b = *c.requests[r];
      const std::vector<uint64_t>& ids = c.resource_ids[r];
      std::vector<uint32_t> fresh;
      for (uint32_t k = 0; k < ids.size(); ++k) {
        if (stored.insert(ids[k]).second) fresh.push_back(k);
      }
      if (!fresh.empty()) {
        storage::EncodeResourceBlock(b, fresh, ids, last_seen, caps, &resources);
      }
      for (uint32_t i = 0; i < b.span_count(); ++i)
        rows.push_back({&b, i, ids[b.spans.resource[i]]});
    }
    SortRows(order, &rows);
    storage::EncodeSpanRows(rows, caps, &spans, storage::UserFields::Default(), values,
                            layout.extras_column, layout.span_ids_column, layout.attr_columns,
                            layout.user_fields_map);
    BlockFiles f;
    f.rows = rows.size();
    f.spans = fmt::format("{}/block-{}.spans.native", dir, out->size());
    if (Status st = WriteFile(f.spans, spans); !st.ok()) return st;
    if (!resources.empty()) {
      f.resources = fmt::format("{}/block-{}.resources.native", dir, out->size());
      if (Status st = WriteFile(f.resources, resources); !st.ok()) return st;
    }
    out->push_back(std::move(f));
  }
  return Status::Ok();
}

int Fail(const std::string& message) {
  fmt::print(stderr, "bench storage: {}\n", message);
  return 1;
}

int RunStorage(const StorageOptions& o) {
  const auto& all = StorageVariants();
  if (o.list) {
    for (const auto& v : all) fmt::print("{:<34} {}\n", v.name, v.description);
    return 0;
  }
  if (o.spans == 0 || o.block_spans == 0 || o.request_spans == 0 || o.rounds <= 0) {
    return Fail("--spans, --block-spans, --request-spans and --rounds must be > 0");
  }
  std::vector<const StorageVariant*> chosen;
  for (const auto& name : o.variants) {
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& v) { return v.name == name; });
    if (it == all.end()) return Fail(fmt::format("no variant '{}' (see --list)", name));
    chosen.push_back(&*it);
  }
  const bool compare = o.compare == "opensearch";
  if (!o.compare.empty() && !compare) return Fail("--compare: only opensearch");
  if (compare && o.opensearch_url.empty())
    return Fail("--compare opensearch needs --opensearch-url");
  if (compare && (o.opensearch_bulk_spans == 0 || o.opensearch_workers <= 0)) {
    return Fail("--opensearch-bulk-spans and --opensearch-workers must be > 0");
  }
  if (chosen.empty()) {
    // Against OpenSearch: the project's schema alone, unless --variant says otherwise.
    for (const auto& v : all)
      if (!compare || v.name == "chosen") chosen.push_back(&v);
  }
  if (compare) {
    // The cluster answers before the ClickHouse side's minutes are spent.
    storage::opensearch::OpenSearchOptions co;
    co.urls = {o.opensearch_url};
    std::unique_ptr<storage::opensearch::OpenSearchClient> client;
    std::string version, distribution;
    Status st = storage::opensearch::OpenSearchClient::Create(co, &client);
    if (st.ok()) st = client->Version(&version, &distribution);
    if (!st.ok()) return Fail(st.message());
  }
  const bool keep = !o.keep.empty();
  const std::string dir = keep ? o.keep
                               : (std::filesystem::temp_directory_path() /
                                  fmt::format("spanhouse-bench-storage-{}", ::getpid()))
                                     .string();
  if (!keep) std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  auto t0 = Clock::now();
  fmt::print(stderr, "generating {} spans (seed {}, {} corpus)...\n", o.spans, o.seed, o.corpus);
  const Corpus corpus = BuildCorpus(o);
  fmt::print(
      "spanhouse bench storage: {} spans in {} traces (seed {}, {} corpus, requests of ~{} spans, "
      "traces {} us apart, {:.1f} s of span time), inserted in blocks of ~{} spans, ZSTD from "
      "parts of {} MiB, {} CPUs\n",
      corpus.spans, corpus.traces, o.seed, o.corpus, o.request_spans,
      loadgen::kTraceSpacingNs / 1000, static_cast<double>(corpus.last_ns - corpus.first_ns) / 1e9,
      o.block_spans, o.zstd_min_part_mib, std::thread::hardware_concurrency());
  fmt::print(stderr, "corpus generated in {:.1f} s\n", Seconds(t0));

  // The blocks depend only on the sort order and the encoding: encoded once
  // per pair.
  const auto caps = storage::Capabilities::FromVersion("26.5");
  using Encoding = std::tuple<SpanOrder, storage::UserFieldValues, bool, bool, bool, bool>;
  auto encoding_name = [](const Encoding& e) {
    return fmt::format(
        "{}-{}-{}-{}-{}-{}", static_cast<int>(std::get<0>(e)), static_cast<int>(std::get<1>(e)),
        std::get<2>(e) ? "extras" : "rare", std::get<3>(e) ? "span-ids" : "two-ids",
        std::get<4>(e) ? "attr-columns" : "attr-values", std::get<5>(e) ? "uf-map" : "uf-json");
  };
  std::map<Encoding, std::vector<BlockFiles>> blocks;
  // Rounds take every variant in turn, so machine noise spreads over all.
  std::vector<std::vector<VariantResult>> results(chosen.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < chosen.size(); ++i) {
      const StorageVariant& v = *chosen[i];
      const Encoding enc{v.order,
                         v.values,
                         v.layout.extras_column,
                         v.layout.span_ids_column,
                         v.layout.attr_columns,
                         v.layout.user_fields_map};
      auto& files = blocks[enc];
      if (files.empty()) {
        fmt::print(stderr, "encoding blocks in {}'s order and encoding...\n", v.name);
        if (Status st = EncodeBlocks(corpus, o, v.order, v.values, v.layout, caps,
                                     fmt::format("{}/blocks-{}", dir, encoding_name(enc)), &files);
            !st.ok()) {
          return Fail(st.message());
        }
      }
      const std::string step =
          fmt::format("[round {}/{}, {}/{}] {}", round + 1, o.rounds, i + 1, chosen.size(), v.name);
      fmt::print(stderr, "{}\n", step);
      const std::string vdir = fmt::format("{}/{}", dir, v.name);
      std::filesystem::remove_all(vdir);
      const auto v0 = Clock::now();
      const VariantResult r = RunChild(corpus, files, v, o.zstd_min_part_mib << 20, vdir);
      results[i].push_back(r);
      fmt::print(
          stderr, "{}: {} in {:.1f} s\n", step,
          r.ok ? fmt::format("{:.2f} bytes/span, {:.2f} CPU-s/M spans", r.OnDisk() / corpus.spans,
                             (r.insert_cpu + r.optimize_cpu) / corpus.spans * 1e6)
               : "failed",
          Seconds(v0));
      if (round == 0) PrintVariant(v, r, corpus.spans, corpus.sample.size());
      if (!keep) std::filesystem::remove_all(vdir);
    }
  }
  for (const auto& [enc, files] : blocks) {
    std::error_code ec;
    std::filesystem::remove_all(fmt::format("{}/blocks-{}", dir, encoding_name(enc)), ec);
  }
  PrintSummary(chosen, results, corpus.spans);
  if (!keep) std::filesystem::remove_all(dir);
  if (compare) {
    // ClickHouse's figure: the project's schema when measured, else the first variant.
    size_t k = 0;
    for (size_t i = 0; i < chosen.size(); ++i) {
      if (chosen[i]->name == "chosen") k = i;
    }
    const auto ok = std::find_if(results[k].begin(), results[k].end(),
                                 [](const VariantResult& x) { return x.ok; });
    OpenSearchResult r;
    if (Status st = MeasureOpenSearch(corpus, o, keep, &r); !st.ok()) {
      if (!r.cleanup_note.empty()) fmt::print(stderr, "bench storage: {}\n", r.cleanup_note);
      return Fail("opensearch: " + st.message());
    }
    PrintOpenSearch(o, corpus, r, chosen[k], ok == results[k].end() ? nullptr : &*ok);
  }
  for (const auto& runs : results) {
    for (const auto& r : runs)
      if (!r.ok) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace storage_bench

void AddStorageCommand(CLI::App& bench, std::function<int()>* run) {
  auto opts = std::make_shared<storage_bench::StorageOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "storage",
      "Load N loadgen spans the writer's way into each storage layout (codecs, LowCardinality, "
      "sort keys), merge, and print compressed and uncompressed bytes per span by column and "
      "table, the total over every table, and the CPU of the inserts and merges");
  cmd->add_option("--spans", opts->spans, "Spans loaded into each variant (whole traces)")
      ->default_val(opts->spans);
  cmd->add_option("--seed", opts->seed, "Corpus seed")->default_val(opts->seed);
  cmd->add_option("--corpus", opts->corpus,
                  "Loadgen's corpus: replay (the one every figure so far used) or fresh "
                  "(concrete URLs, SQL literals, exception texts with ids, thousands of user "
                  "agents)")
      ->check(CLI::IsMember({"replay", "fresh"}))
      ->default_val(opts->corpus);
  cmd->add_option("--variant", opts->variants,
                  "Variants to measure, in this order (default: all; see --list)");
  cmd->add_flag("--list", opts->list, "List the variants and exit");
  cmd->add_option("--block-spans", opts->block_spans,
                  "Spans per insert (the writer's writer.max_rows)")
      ->default_val(opts->block_spans);
  cmd->add_option("--request-spans", opts->request_spans,
                  "Spans per generated request (loadgen's default)")
      ->default_val(opts->request_spans);
  cmd->add_option("--zstd-min-part-mib", opts->zstd_min_part_mib,
                  "Part size (MiB) from which CODEC(Default) columns are ZSTD (serve: "
                  "storage.zstd_min_part_bytes, 32 MiB); 0: every part")
      ->default_val(opts->zstd_min_part_mib);
  cmd->add_option("--lookups", opts->lookups, "Traces looked up by id in each variant")
      ->default_val(opts->lookups);
  cmd->add_option("--rounds", opts->rounds,
                  "Times every variant is measured, in turns (CPU: the median; sizes repeat)")
      ->default_val(opts->rounds);
  cmd->add_option("--keep", opts->keep,
                  "Work in DIR and keep each variant's data directory there (default: a "
                  "temporary directory, removed); with --compare opensearch, keep the bench's "
                  "indices and templates too");
  cmd->add_option("--compare", opts->compare,
                  "opensearch: also write the same spans to --opensearch-url as Jaeger "
                  "documents, force-merge, and print bytes per span in both and their ratio "
                  "(ClickHouse: the project's schema only, unless --variant)")
      ->check(CLI::IsMember({"opensearch"}));
  cmd->add_option("--opensearch-url", opts->opensearch_url,
                  "The OpenSearch (or Elasticsearch) node for --compare opensearch, "
                  "http://host:port");
  cmd->add_option("--opensearch-bulk-spans", opts->opensearch_bulk_spans,
                  "Spans per _bulk request (the sink's opensearch.bulk_spans)")
      ->default_val(opts->opensearch_bulk_spans);
  cmd->add_option("--opensearch-workers", opts->opensearch_workers,
                  "_bulk requests at once (1: the documents in the corpus's order, the "
                  "smallest and steadiest store; the sink's opensearch.workers is 2)")
      ->default_val(opts->opensearch_workers);
  cmd->callback([opts, run] { *run = [opts] { return storage_bench::RunStorage(*opts); }; });
}

}  // namespace spanhouse::bench
