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
#include <netdb.h>
#include <simdjson.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "codec/value_text.h"
#include "model/service_name.h"
#include "model/span_batch.h"
#include "net/http_client.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"
#include "storage/opensearch/index_templates.h"
#include "storage/opensearch/jaeger_document.h"
#include "storage/opensearch/opensearch_client.h"
#include "tools/bench/bench.h"
#include "tools/bench/storage_variants.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/payload.h"

namespace spanhouse::bench {
namespace {

struct StorageOptions {
  size_t spans = 1000000;
  size_t block_spans = 200000;  // the writer's writer.max_rows
  size_t request_spans = 500;   // loadgen's spans per request
  size_t lookups = 100;
  uint64_t seed = 1;
  std::string corpus = "replay";  // loadgen's --corpus
  // The engine's part size from which CODEC(Default) columns are ZSTD:
  // serve's default (storage.zstd_min_part_bytes, 32 MiB), so the full
  // merge's part is ZSTD as serve's merged parts of such a day are, and the
  // inserts (~12 MB) stay LZ4 as serve's do.
  uint64_t zstd_min_part_mib = 32;
  std::vector<std::string> variants;
  std::string keep;
  bool list = false;
  int rounds = 1;
  // --compare opensearch: the same corpus also into the cluster at opensearch_url.
  std::string compare;
  std::string opensearch_url;
  size_t opensearch_bulk_spans = 5000;
  // One connection by default: the documents then reach the segments in the
  // corpus's order, the order that takes the fewest bytes, run after run
  // (concurrent _bulk requests interleave them, and points and stored fields
  // then took 5-12% more, varying; Jaeger's own es.bulk.workers is 1 too).
  int opensearch_workers = 1;
};

// A trace of the corpus, to be looked up by id.
struct SampleTrace {
  TraceId id{};
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  uint32_t spans = 0;
};

struct Corpus {
  std::vector<std::unique_ptr<SpanBatch>> requests;
  std::vector<std::vector<uint64_t>> resource_ids;  // ResourceIds of each request
  size_t spans = 0;
  size_t traces = 0;
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  std::vector<SampleTrace> sample;
};

// One insert of the writer: the new resources (if any), then the spans.
struct BlockFiles {
  std::string resources;  // empty when the block brings no new resource
  std::string spans;
  size_t rows = 0;
};

// What a variant's child process measured.
struct ColumnSize {
  std::string table, column, type, codec;
  double compressed = 0, uncompressed = 0;
};
struct TableSize {
  std::string table, part_types;
  double parts = 0, rows = 0, on_disk = 0, compressed = 0, uncompressed = 0;
};
struct VariantResult {
  bool ok = false;
  std::string error;
  double insert_cpu = 0, optimize_cpu = 0, insert_wall = 0, optimize_wall = 0;
  double upgrade_cpu = 0, upgrade_wall = 0;  // the upgrade variant's copy
  // A lookup by trace id: spans granules it reads (of total_granules), wall
  // time of the reader's GetTrace, share of lookups that found every span.
  double lookup_granules = 0, total_granules = 0, lookup_ms = 0, lookup_spans_ok = 0;
  std::vector<TableSize> tables;
  std::vector<ColumnSize> columns;
  double OnDisk() const {
    double s = 0;
    for (const auto& t : tables) s += t.on_disk;
    return s;
  }
  const TableSize* Table(std::string_view name) const {
    for (const auto& t : tables)
      if (t.table == name) return &t;
    return nullptr;
  }
};

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

// ---------------------------------------------------------------------------
// In the variant's child process.

Status Insert(storage::ChdbConnection& conn, const storage::Capabilities& caps,
              std::string_view table, const std::string& path) {
  return conn.Query(
      storage::InsertFromFileSql(fmt::format("{}.{}", storage::kDatabase, table),
                                 storage::RowFormat::kNative, caps, storage::FileStructure::kTable),
      "", nullptr, {{"path", path}});
}

Status Rows(storage::ChdbConnection& conn, const std::string& sql, std::string* out) {
  storage::QueryResult r;
  if (Status st = conn.Query(sql, "TSVRaw", &r); !st.ok()) return st;
  *out = std::move(r.data);
  return Status::Ok();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t e = s.find(sep, pos);
    out.push_back(s.substr(pos, e == std::string::npos ? std::string::npos : e - pos));
    if (e == std::string::npos) return out;
    pos = e + 1;
  }
}

// Every MergeTree table of the schema, merged to one part per partition.
// OPTIMIZE may find a partition's parts busy in a background merge and do
// nothing, so it is repeated until the parts are counted down.
Status OptimizeAll(storage::ChdbConnection& conn, const std::string& only = "") {
  std::string tables;
  if (Status st = Rows(
          conn,
          fmt::format("SELECT name FROM system.tables WHERE database = '{}' AND engine "
                      "LIKE '%MergeTree' {} ORDER BY name",
                      storage::kDatabase, only.empty() ? "" : fmt::format("AND name = '{}'", only)),
          &tables);
      !st.ok()) {
    return st;
  }
  for (const std::string& t : Split(tables, '\n')) {
    if (t.empty()) continue;
    for (int attempt = 0;; ++attempt) {
      if (Status st =
              conn.Query(fmt::format("OPTIMIZE TABLE {}.{} FINAL", storage::kDatabase, t), "");
          !st.ok()) {
        return st;
      }
      std::string most;
      if (Status st = Rows(conn,
                           fmt::format("SELECT max(c) FROM (SELECT count() AS c FROM system.parts "
                                       "WHERE database = '{}' AND table = '{}' AND active GROUP "
                                       "BY partition)",
                                       storage::kDatabase, t),
                           &most);
          !st.ok()) {
        return st;
      }
      if (most == "0\n" || most == "1\n") break;
      if (attempt == 50) return Status::Internal(fmt::format("{}: parts left after OPTIMIZE", t));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  return Status::Ok();
}

// Loads, merges and measures one variant; writes what it found to
// `result_path` (lines of tab-separated fields, read by ReadResult).
Status MeasureVariant(const Corpus& c, const std::vector<BlockFiles>& blocks,
                      const StorageVariant& v, uint64_t zstd_min_part_bytes, const std::string& dir,
                      const std::string& result_path) {
  std::shared_ptr<storage::ChdbLibrary> lib;
  if (Status st = storage::ChdbLibrary::Load(&lib); !st.ok()) return st;
  // The engine as serve configures it: no cold volume here, the same
  // compression rule (CODEC(Default) columns: LZ4 on small parts, ZSTD on
  // large ones; the full merge below makes one large part).
  const std::string config = dir + "/clickhouse-config.xml";
  storage::CompressionOptions compression;
  compression.zstd_min_part_bytes = zstd_min_part_bytes;
  if (v.zstd_level != 0) compression.zstd_level = v.zstd_level;
  if (Status st = storage::WriteEngineConfig(config, {}, compression); !st.ok()) return st;
  std::unique_ptr<storage::ChdbConnection> conn;
  if (Status st = storage::ChdbConnection::Open(lib, dir + "/clickhouse",
                                                storage::EngineArgs(config), &conn);
      !st.ok()) {
    return st;
  }
  struct Closer {
    storage::ChdbConnection* c;
    ~Closer() { c->Close(); }
  } closer{conn.get()};
  storage::Capabilities caps;
  storage::SchemaOptions options;
  options.layout = v.layout;
  if (Status st = storage::EnsureSchema(*conn, &caps, options); !st.ok()) return st;

  std::string out;
  double cpu0 = CpuSeconds();
  auto t0 = Clock::now();
  for (size_t k = 0; k < blocks.size(); ++k) {
    fmt::print(stderr, "  {}: insert {}/{} ({} spans)\n", v.name, k + 1, blocks.size(),
               blocks[k].rows);
    if (!blocks[k].resources.empty()) {
      if (Status st = Insert(*conn, caps, "resources", blocks[k].resources); !st.ok()) return st;
    }
    if (Status st = Insert(*conn, caps, "spans", blocks[k].spans); !st.ok()) return st;
  }
  out += fmt::format("insert\t{}\t{}\n", CpuSeconds() - cpu0, Seconds(t0));
  fmt::print(stderr, "  {}: OPTIMIZE ... FINAL\n", v.name);
  cpu0 = CpuSeconds();
  t0 = Clock::now();
  if (Status st = OptimizeAll(*conn); !st.ok()) return st;
  out += fmt::format("optimize\t{}\t{}\n", CpuSeconds() - cpu0, Seconds(t0));
  storage::StorageLayout layout = v.layout;
  if (v.upgrade) {
    // What a start of the new spanhouse does to this data directory.
    fmt::print(stderr, "  {}: upgrade to the project's schema\n", v.name);
    cpu0 = CpuSeconds();
    t0 = Clock::now();
    if (Status st = storage::EnsureSchema(*conn, &caps, storage::SchemaOptions{}); !st.ok()) {
      return st;
    }
    out += fmt::format("upgrade\t{}\t{}\n", CpuSeconds() - cpu0, Seconds(t0));
    layout = storage::StorageLayout{};
  }

  // The dependency job's query over the whole corpus (not counted above).
  fmt::print(stderr, "  {}: dependencies, trace lookups\n", v.name);
  const auto from = static_cast<uint32_t>(c.first_ns / 1000000000 / 60 * 60);
  const auto to = static_cast<uint32_t>((c.last_ns / 1000000000 / 60 + 1) * 60);
  if (Status st = storage::ComputeDependencies(*conn, from, to); !st.ok()) return st;
  if (Status st = OptimizeAll(*conn, "dependencies_1m"); !st.ok()) return st;

  std::string count;
  if (Status st =
          Rows(*conn, fmt::format("SELECT count() FROM {}.spans", storage::kDatabase), &count);
      !st.ok()) {
    return st;
  }
  if (count != fmt::format("{}\n", c.spans)) {
    return Status::Internal(
        fmt::format("{} spans stored, {} inserted", count.substr(0, count.size() - 1), c.spans));
  }

  // Trace lookups: the reader's own path (trace_index, then the spans in
  // that range), and the rows the spans part of it reads.
  storage::ChdbSpanReader reader(*conn, caps, {}, layout);
  double granules = 0;
  double total_granules = 0;
  double lookup_s = 0;
  size_t spans_ok = 0;
  for (const SampleTrace& s : c.sample) {
    SpanBatch got;
    const auto l0 = Clock::now();
    if (Status st = reader.GetTrace(s.id, &got); !st.ok()) return st;
    lookup_s += Seconds(l0);
    spans_ok += got.span_count() == s.spans ? 1 : 0;
    std::string plan;
    if (Status st = Rows(*conn,
                         fmt::format("EXPLAIN indexes = 1 SELECT span_id FROM {}.spans WHERE "
                                     "timestamp >= toDateTime({}) AND timestamp <= toDateTime({}) "
                                     "AND trace_id = unhex('{}')",
                                     storage::kDatabase, s.first_ns / 1000000000,
                                     s.last_ns / 1000000000 + 1, ToHex(s.id)),
                         &plan);
        !st.ok()) {
      return st;
    }
    // The last index step's "Granules: selected/total".
    const size_t at = plan.rfind("Granules: ");
    if (at != std::string::npos) {
      granules += std::strtod(plan.c_str() + at + 10, nullptr);
      const size_t slash = plan.find('/', at);
      if (slash != std::string::npos)
        total_granules = std::strtod(plan.c_str() + slash + 1, nullptr);
    }
  }
  const double n = std::max<double>(1, c.sample.size());
  out += fmt::format("lookup\t{}\t{}\t{}\t{}\n", granules / n, total_granules, lookup_s * 1000 / n,
                     spans_ok / n);

  std::string parts;
  if (Status st = Rows(*conn,
                       fmt::format("SELECT table, count(), sum(rows), sum(bytes_on_disk), "
                                   "sum(data_compressed_bytes), sum(data_uncompressed_bytes), "
                                   "arrayStringConcat(groupUniqArray(part_type), '+') FROM "
                                   "system.parts WHERE database = '{}' AND active GROUP BY table "
                                   "ORDER BY table",
                                   storage::kDatabase),
                       &parts);
      !st.ok()) {
    return st;
  }
  for (const std::string& line : Split(parts, '\n')) {
    if (!line.empty()) out += "table\t" + line + "\n";
  }
  std::string cols;
  if (Status st = Rows(*conn,
                       fmt::format("SELECT table, name, type, compression_codec, "
                                   "data_compressed_bytes, data_uncompressed_bytes FROM "
                                   "system.columns WHERE database = '{}' AND table IN (SELECT "
                                   "name FROM system.tables WHERE database = '{}' AND engine LIKE "
                                   "'%MergeTree') ORDER BY table, position",
                                   storage::kDatabase, storage::kDatabase),
                       &cols);
      !st.ok()) {
    return st;
  }
  for (const std::string& line : Split(cols, '\n')) {
    if (!line.empty()) out += "column\t" + line + "\n";
  }
  return WriteFile(result_path, out);
}

VariantResult Failed(std::string why) {
  VariantResult r;
  r.error = std::move(why);
  return r;
}

VariantResult ReadResult(const std::string& path) {
  VariantResult r;
  std::ifstream in(path);
  std::string line;
  auto num = [](const std::string& s) { return std::strtod(s.c_str(), nullptr); };
  while (std::getline(in, line)) {
    const std::vector<std::string> f = Split(line, '\t');
    if (f[0] == "insert" && f.size() == 3) {
      r.insert_cpu = num(f[1]);
      r.insert_wall = num(f[2]);
    } else if (f[0] == "optimize" && f.size() == 3) {
      r.optimize_cpu = num(f[1]);
      r.optimize_wall = num(f[2]);
    } else if (f[0] == "upgrade" && f.size() == 3) {
      r.upgrade_cpu = num(f[1]);
      r.upgrade_wall = num(f[2]);
    } else if (f[0] == "lookup" && f.size() == 5) {
      r.lookup_granules = num(f[1]);
      r.total_granules = num(f[2]);
      r.lookup_ms = num(f[3]);
      r.lookup_spans_ok = num(f[4]);
    } else if (f[0] == "table" && f.size() == 8) {
      r.tables.push_back({f[1], f[7], num(f[2]), num(f[3]), num(f[4]), num(f[5]), num(f[6])});
    } else if (f[0] == "column" && f.size() == 7) {
      r.columns.push_back({f[1], f[2], f[3], f[4], num(f[5]), num(f[6])});
    }
  }
  r.ok = !r.tables.empty();
  if (!r.ok) r.error = "no result";
  return r;
}

// Runs MeasureVariant in a child process (one chDB engine per process).
VariantResult RunChild(const Corpus& c, const std::vector<BlockFiles>& blocks,
                       const StorageVariant& v, uint64_t zstd_min_part_bytes,
                       const std::string& dir) {
  const std::string result_path = dir + "/result.tsv";
  std::filesystem::create_directories(dir);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return Failed("fork failed");
  if (pid == 0) {
    Status st = MeasureVariant(c, blocks, v, zstd_min_part_bytes, dir, result_path);
    if (!st.ok()) fmt::print(stderr, "bench storage: {}: {}\n", v.name, st.message());
    std::fflush(stderr);
    // Without exit handlers: the parent's state is not this process's to tear down.
    _exit(st.ok() ? 0 : 1);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return Failed("waitpid failed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Failed(WIFSIGNALED(status) ? fmt::format("killed by signal {}", WTERMSIG(status))
                                      : "failed (see above)");
  }
  return ReadResult(result_path);
}

// ---------------------------------------------------------------------------
// Printing.

void PrintVariant(const StorageVariant& v, const VariantResult& r, size_t spans, size_t lookups) {
  const double n = static_cast<double>(spans);
  fmt::print("\n== {}: {}\n", v.name, v.description);
  if (!r.ok) {
    fmt::print("failed: {}\n", r.error);
    return;
  }
  fmt::print("{:<16} {:<34} {:>9} {:>9} {:>6}  {:<30} {}\n", "table", "column", "B/span",
             "raw B/sp", "ratio", "codec", "type");
  for (const TableSize& t : r.tables) {
    std::vector<const ColumnSize*> cols;
    double known = 0;
    for (const auto& c : r.columns) {
      if (c.table != t.table) continue;
      cols.push_back(&c);
      known += c.compressed;
    }
    std::sort(cols.begin(), cols.end(), [](const ColumnSize* a, const ColumnSize* b) {
      return a->compressed > b->compressed;
    });
    // Per-column sizes are known for wide parts only (a compact part keeps
    // every column in one file).
    if (known > 0) {
      size_t small = 0;
      double small_bytes = 0;
      for (const ColumnSize* c : cols) {
        if (c->compressed / n < 0.05) {
          small += 1;
          small_bytes += c->compressed;
          continue;
        }
        fmt::print("{:<16} {:<34} {:>9.2f} {:>9.2f} {:>6.1f}  {:<30} {}\n", t.table, c->column,
                   c->compressed / n, c->uncompressed / n,
                   c->compressed > 0 ? c->uncompressed / c->compressed : 0.0,
                   c->codec.empty() ? "(default)" : c->codec, c->type);
      }
      if (small > 0) {
        fmt::print("{:<16} {:<34} {:>9.2f}\n", t.table, fmt::format("({} columns < 0.05)", small),
                   small_bytes / n);
      }
    }
    fmt::print("{:<16} {:<34} {:>9.2f} {:>9.2f} {:>6.1f}  {} part(s) {}, {:.0f} rows\n", t.table,
               "= data (compressed)", t.compressed / n, t.uncompressed / n,
               t.compressed > 0 ? t.uncompressed / t.compressed : 0.0, t.parts, t.part_types,
               t.rows);
    fmt::print("{:<16} {:<34} {:>9.2f}\n", t.table, "= on disk (marks, index included)",
               t.on_disk / n);
  }
  fmt::print(
      "ALL TABLES on disk: {:.2f} bytes/span; CPU: insert {:.2f} s + OPTIMIZE {:.2f} s "
      "= {:.2f} CPU-s/M spans; wall insert {:.2f} s, OPTIMIZE {:.2f} s\n",
      r.OnDisk() / n, r.insert_cpu, r.optimize_cpu, (r.insert_cpu + r.optimize_cpu) / n * 1e6,
      r.insert_wall, r.optimize_wall);
  if (v.upgrade) {
    fmt::print(
        "UPGRADE (EnsureSchema's copy of {:.0f} spans): {:.2f} s wall, {:.2f} CPU-s = {:.2f} s "
        "and {:.2f} CPU-s per M spans\n",
        n, r.upgrade_wall, r.upgrade_cpu, r.upgrade_wall / n * 1e6, r.upgrade_cpu / n * 1e6);
  }
  fmt::print(
      "trace lookup by id (mean of {}): {:.1f} of {:.0f} spans granules read, {:.1f} ms, {:.0f}% "
      "complete\n",
      lookups, r.lookup_granules, r.total_granules, r.lookup_ms, r.lookup_spans_ok * 100);
}

// Sizes from each variant's first run; CPU the median over its runs (one
// per round), every run's total listed.
void PrintSummary(const std::vector<const StorageVariant*>& vs,
                  const std::vector<std::vector<VariantResult>>& runs, size_t spans) {
  const double n = static_cast<double>(spans);
  std::vector<VariantResult> rs;
  for (const auto& r : runs) {
    auto ok = std::find_if(r.begin(), r.end(), [](const VariantResult& x) { return x.ok; });
    rs.push_back(ok == r.end() ? r.front() : *ok);
  }
  const char* kTables[] = {"spans",  "resources",  "trace_index",
                           "red_1m", "operations", "dependencies_1m"};
  size_t width = 7;
  for (const auto* v : vs) width = std::max(width, v->name.size());
  fmt::print(
      "\n== summary: bytes per span on disk (every table of the variant), CPU of the "
      "inserts + OPTIMIZE\n");
  fmt::print(
      "{:<{}} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>10} {:>10} {:>9} {:>9}  {}\n",
      "variant", width, "TOTAL", "spans", "res", "trace", "red", "ops", "deps", "other",
      "insert CPU", "optim CPU", "CPU-s/M", "granules",
      runs.front().size() > 1 ? "CPU-s/M of each round" : "");
  for (size_t i = 0; i < vs.size(); ++i) {
    const VariantResult& r = rs[i];
    if (!r.ok) {
      fmt::print("{:<{}} failed: {}\n", vs[i]->name, width, r.error);
      continue;
    }
    std::string row;
    double named = 0;
    for (const char* t : kTables) {
      const TableSize* ts = r.Table(t);
      const double b = ts == nullptr ? 0 : ts->on_disk;
      named += b;
      row += fmt::format(" {:>6.2f}", b / n);
    }
    std::vector<double> insert, optimize, total;
    std::string each;
    for (const auto& x : runs[i]) {
      if (!x.ok) continue;
      insert.push_back(x.insert_cpu);
      optimize.push_back(x.optimize_cpu);
      total.push_back((x.insert_cpu + x.optimize_cpu) / n * 1e6);
      each += fmt::format(" {:.2f}", total.back());
    }
    fmt::print("{:<{}} {:>7.2f}{}{:>7.2f} {:>10.2f} {:>10.2f} {:>9.2f} {:>9.0f} {}\n", vs[i]->name,
               width, r.OnDisk() / n, row, (r.OnDisk() - named) / n, Median(insert),
               Median(optimize), Median(total), r.lookup_granules, runs[i].size() > 1 ? each : "");
  }
  // The heaviest spans columns of the first variant, across every variant.
  const VariantResult* first = nullptr;
  for (const auto& r : rs) {
    if (r.ok) {
      first = &r;
      break;
    }
  }
  if (first == nullptr) return;
  std::vector<const ColumnSize*> top;
  for (const auto& c : first->columns)
    if (c.table == "spans") top.push_back(&c);
  std::sort(top.begin(), top.end(),
            [](const ColumnSize* a, const ColumnSize* b) { return a->compressed > b->compressed; });
  if (top.size() > 12) top.resize(12);
  if (top.empty() || top[0]->compressed == 0) return;
  // A row per variant, a column per spans column (the first variant's
  // heaviest), so long variant names stay whole.
  fmt::print("\n== spans columns, compressed bytes per span (wide parts only)\n{:<{}}", "variant",
             width);
  for (const ColumnSize* c : top)
    fmt::print(" {:>{}}", c->column, std::max<size_t>(6, c->column.size()));
  fmt::print("\n");
  for (size_t i = 0; i < vs.size(); ++i) {
    fmt::print("{:<{}}", vs[i]->name, width);
    for (const ColumnSize* c : top) {
      double b = 0;
      for (const auto& x : rs[i].columns)
        if (x.table == "spans" && x.column == c->column) b = x.compressed;
      fmt::print(" {:>{}.2f}", b / n, std::max<size_t>(6, c->column.size()));
    }
    fmt::print("\n");
  }
}

// ---------------------------------------------------------------------------
// --compare opensearch: the same spans as Jaeger documents in OpenSearch.

namespace os = storage::opensearch;

struct OpenSearchResult {
  std::string version, distribution, prefix;
  size_t span_docs = 0, service_docs = 0, pages = 0, indices = 0;
  uint64_t body_bytes = 0;  // NDJSON sent, retries included
  int retried_pages = 0;
  double bulk_wall = 0, refresh_wall = 0, merge_wall = 0;
  double index_time_s = 0;  // the primaries' indexing time, as the cluster counts it
  double segments = 0;      // primaries' segments after the force-merge
  double store = 0, span_store = 0, service_store = 0;  // primaries' bytes
  // The primaries' segment files by Lucene extension ("fdt": stored fields,
  // the _source), bytes.
  std::vector<std::pair<std::string, double>> files;
  bool kept = false;
  std::string cleanup_note;
};

// DELETE over plain HTTP: OpenSearchClient only posts and gets, and a
// template is deleted by DELETE alone. Connection: close, one call.
Status HttpDelete(const std::string& url, const std::string& target, int* status) {
  net::HttpUrl u;
  std::string error;
  if (!net::ParseHttpUrl(url, &u, &error, /*allow_https=*/true)) return Status::Invalid(error);
  if (u.tls) return Status::Unsupported("DELETE over https is not done here");
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(u.host.c_str(), std::to_string(u.port).c_str(), &hints, &found);
      rc != 0) {
    return Status::Unavailable(fmt::format("{}: {}", u.host, ::gai_strerror(rc)));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return Status::Unavailable(fmt::format("{}: cannot connect", u.host_header));
  timeval tv{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const std::string request = fmt::format(
      "DELETE {} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", target,
      u.host_header);
  size_t off = 0;
  while (off < request.size()) {
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[4096];
  for (ssize_t n; off == request.size() && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  // "HTTP/1.1 200 OK"
  if (answer.size() < 12 || !answer.starts_with("HTTP/")) {
    return Status::Unavailable(fmt::format("{}: no answer to DELETE {}", u.host_header, target));
  }
  *status = std::atoi(answer.c_str() + answer.find(' ') + 1);
  return Status::Ok();
}

// The first failure of a _bulk answer that is not worth a retry ("" when
// every item was created, or exists: 409), and whether one asks for a retry.
std::string BulkFailure(const std::string& answer, bool* retry) {
  *retry = false;
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  bool errors = true;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS ||
      doc["errors"].get_bool().get(errors) != simdjson::SUCCESS) {
    return "unreadable _bulk answer: " + answer.substr(0, 300);
  }
  if (!errors) return "";
  simdjson::dom::array items;
  if (doc["items"].get_array().get(items) != simdjson::SUCCESS) return "_bulk answer without items";
  std::string failure;
  for (simdjson::dom::element item : items) {
    simdjson::dom::object o;
    if (item.get_object().get(o) != simdjson::SUCCESS || o.size() != 1) continue;
    const simdjson::dom::element inner = (*o.begin()).value;
    int64_t status = 0;
    if (inner["status"].get_int64().get(status) != simdjson::SUCCESS) continue;
    if ((status >= 200 && status < 300) || status == 409) continue;
    if (status == 429 || status >= 500) {
      *retry = true;
      continue;
    }
    if (failure.empty()) {
      simdjson::dom::element err;
      failure = fmt::format("item refused with HTTP {}", status);
      if (inner["error"].get(err) == simdjson::SUCCESS) {
        failure += ": " + os::ErrorReason(std::string("{\"error\":") + simdjson::minify(err) + "}");
      }
    }
  }
  return failure;
}

void AppendAction(std::string& out, std::string_view verb, std::string_view index,
                  std::string_view id) {
  out += "{\"";
  out += verb;
  out += "\":{\"_index\":";
  codec::AppendJsonString(out, index);
  out += ",\"_id\":";
  codec::AppendJsonString(out, id);
  out += "}}\n";
}

// Writes the corpus as the OpenSearch sink does: each span a `create` of its
// document in the daily span index of its start, each (day, service,
// operation) once an `index` of its service document.
Status BulkLoad(const Corpus& c, const StorageOptions& o, os::OpenSearchClient& client,
                OpenSearchResult* r) {
  // Pages: whole requests, at least bulk_spans spans each (the last fewer).
  std::vector<std::pair<size_t, size_t>> pages;
  for (size_t first = 0, spans = 0, k = 0; k < c.requests.size(); ++k) {
    spans += c.requests[k]->span_count();
    if (spans >= o.opensearch_bulk_spans || k + 1 == c.requests.size()) {
      pages.emplace_back(first, k + 1);
      first = k + 1;
      spans = 0;
    }
  }
  r->pages = pages.size();
  const std::string span_base = os::SpanIndexBase(r->prefix);
  const std::string service_base = os::ServiceIndexBase(r->prefix);
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<size_t> service_docs{0};
  std::atomic<int> retried{0};
  std::mutex mu;
  std::set<std::string> services;  // "<index>/<id>" written; guarded by mu
  Status failed;                   // the first failure; guarded by mu
  auto worker = [&] {
    std::string body;
    for (size_t p; (p = next.fetch_add(1)) < pages.size();) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.ok()) return;
      }
      body.clear();
      for (size_t k = pages[p].first; k < pages[p].second; ++k) {
        const SpanBatch& b = *c.requests[k];
        os::DocumentWriter writer(b);
        for (uint32_t s = 0; s < b.span_count(); ++s) {
          const uint64_t start = b.spans.start_ns[s];
          AppendAction(body, "create", os::DailyIndex(span_base, start), os::SpanDocumentId(b, s));
          writer.AppendSpan(body, s);
          body += '\n';
          const std::string_view service = JaegerServiceName(b, b.spans.resource[s]);
          const std::string_view op = b.Str(b.spans.name[s]);
          const std::string index = os::DailyIndex(service_base, start);
          const std::string id = os::ServiceDocumentId(service, op);
          {
            std::lock_guard<std::mutex> lock(mu);
            if (!services.insert(index + "/" + id).second) continue;
          }
          service_docs += 1;
          AppendAction(body, "index", index, id);
          os::DocumentWriter::AppendService(body, service, op);
          body += '\n';
        }
      }
      Status st;
      for (int attempt = 0;; ++attempt) {
        net::HttpResult res;
        bytes += body.size();
        st = client.Post("/_bulk?filter_path=errors,items.*.status,items.*.error", body, &res,
                         "application/x-ndjson");
        bool retry = !st.ok() || res.status == 429 || res.status >= 500;
        if (st.ok() && res.status >= 200 && res.status < 300) {
          if (const std::string why = BulkFailure(res.body, &retry); !why.empty()) {
            st = Status::Internal(why);
            retry = false;
          }
        } else if (st.ok()) {
          st = Status::Internal(
              fmt::format("_bulk: HTTP {}: {}", res.status, os::ErrorReason(res.body)));
        }
        if (!retry) break;
        if (attempt == 20) {
          if (st.ok()) st = Status::Unavailable("_bulk: items still refused after 20 retries");
          break;
        }
        retried += 1;
        std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 5)));
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = st;
        return;
      }
    }
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, o.opensearch_workers); ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  r->bulk_wall = Seconds(t0);
  r->body_bytes = bytes.load();
  r->service_docs = service_docs.load();
  r->retried_pages = retried.load();
  return failed;
}

Status GetJson(os::OpenSearchClient& client, const std::string& target, std::string* answer) {
  net::HttpResult res;
  if (Status st = client.Get(target, &res); !st.ok()) return st;
  if (res.status != 200) {
    return Status::Internal(
        fmt::format("GET {}: HTTP {}: {}", target, res.status, os::ErrorReason(res.body)));
  }
  *answer = std::move(res.body);
  return Status::Ok();
}

// The primaries' store, segments and indexing time of the bench's indices.
Status ReadStats(os::OpenSearchClient& client, const std::string& pattern, OpenSearchResult* r,
                 std::vector<std::string>* indices) {
  std::string answer;
  if (Status st =
          GetJson(client,
                  fmt::format("/{}/_stats/store,segments,indexing?include_segment_file_sizes=true",
                              pattern),
                  &answer);
      !st.ok()) {
    return st;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::element all;
  simdjson::dom::object by_index;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS ||
      doc["_all"]["primaries"].get(all) != simdjson::SUCCESS ||
      doc["indices"].get_object().get(by_index) != simdjson::SUCCESS) {
    return Status::Internal("_stats: unexpected answer: " + answer.substr(0, 300));
  }
  auto num = [](simdjson::dom::element e, const char* a, const char* b) {
    uint64_t v = 0;
    return e[a][b].get_uint64().get(v) == simdjson::SUCCESS ? static_cast<double>(v) : 0.0;
  };
  r->store = num(all, "store", "size_in_bytes");
  r->segments = num(all, "segments", "count");
  r->index_time_s = num(all, "indexing", "index_time_in_millis") / 1000;
  r->files.clear();
  simdjson::dom::object files;
  if (all["segments"]["file_sizes"].get_object().get(files) == simdjson::SUCCESS) {
    for (auto [ext, f] : files) {
      uint64_t b = 0;
      if (f["size_in_bytes"].get_uint64().get(b) == simdjson::SUCCESS)
        r->files.emplace_back(std::string(ext), static_cast<double>(b));
    }
    std::sort(r->files.begin(), r->files.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  r->span_store = r->service_store = 0;
  indices->clear();
  for (auto [name, stats] : by_index) {
    indices->emplace_back(name);
    const double b = num(stats["primaries"], "store", "size_in_bytes");
    (name.find("-jaeger-span-") != std::string_view::npos ? r->span_store : r->service_store) += b;
  }
  r->indices = indices->size();
  return Status::Ok();
}

// Loads the corpus, merges, measures; the indices and templates are removed
// at the end (also after a failure) unless `keep`.
Status MeasureOpenSearch(const Corpus& c, const StorageOptions& o, bool keep, OpenSearchResult* r) {
  os::OpenSearchOptions co;
  co.urls = {o.opensearch_url};
  co.timeout = std::chrono::milliseconds(3600 * 1000);  // a force-merge answers when done
  std::unique_ptr<os::OpenSearchClient> client;
  if (Status st = os::OpenSearchClient::Create(co, &client); !st.ok()) return st;
  if (Status st = client->Version(&r->version, &r->distribution); !st.ok()) return st;
  r->prefix = fmt::format("bench-{}", ::getpid());
  const std::string pattern = r->prefix + "-jaeger-*";
  os::TemplateOptions t;
  t.index_prefix = r->prefix;
  t.shards = 1;
  t.replicas = 0;

  std::vector<std::string> indices;
  auto cleanup = [&] {
    if (keep) {
      r->kept = true;
      return;
    }
    // Every index of the prefix: those the stats named, and any made before a failure.
    std::string cat;
    if (GetJson(*client, fmt::format("/_cat/indices/{}?h=index&expand_wildcards=all", pattern),
                &cat)
            .ok()) {
      indices = Split(cat, '\n');
    }
    std::string actions;
    for (const std::string& i : indices) {
      if (i.empty()) continue;
      if (!actions.empty()) actions += ',';
      codec::AppendJsonString(actions, i);
    }
    std::vector<std::string> left;
    // remove_index (the _aliases API): an index deleted by a POST.
    if (!actions.empty() &&
        !client
             ->PostJson("/_aliases",
                        fmt::format("{{\"actions\":[{{\"remove_index\":{{\"indices\":[{}]}}}}]}}",
                                    actions),
                        nullptr)
             .ok()) {
      left.push_back("indices " + pattern);
    }
    for (const std::string& name : {os::SpanTemplateName(t), os::ServiceTemplateName(t)}) {
      int status = 0;
      if (!HttpDelete(o.opensearch_url, "/_template/" + name, &status).ok() ||
          (status != 200 && status != 404)) {
        left.push_back("template " + name);
      }
    }
    if (!left.empty()) r->cleanup_note = "not deleted: " + fmt::format("{}", fmt::join(left, ", "));
  };
  Status st = [&]() -> Status {
    SH_RETURN_IF_ERROR(
        client->PostJson("/_template/" + os::SpanTemplateName(t), os::SpanTemplate(t), nullptr));
    SH_RETURN_IF_ERROR(client->PostJson("/_template/" + os::ServiceTemplateName(t),
                                        os::ServiceTemplate(t), nullptr));
    fmt::print(stderr, "opensearch: writing {} spans to {} ({})...\n", c.spans, pattern,
               o.opensearch_url);
    SH_RETURN_IF_ERROR(BulkLoad(c, o, *client, r));
    auto t0 = Clock::now();
    SH_RETURN_IF_ERROR(client->PostJson(fmt::format("/{}/_refresh", pattern), "", nullptr));
    r->refresh_wall = Seconds(t0);
    std::string answer;
    SH_RETURN_IF_ERROR(
        client->PostJson(fmt::format("/{}-jaeger-span-*/_count", r->prefix), "{}", &answer));
    simdjson::dom::parser parser;
    uint64_t count = 0;
    if (parser.parse(answer)["count"].get_uint64().get(count) != simdjson::SUCCESS) {
      return Status::Internal("_count: unexpected answer: " + answer.substr(0, 300));
    }
    r->span_docs = count;
    if (count != c.spans) {
      return Status::Internal(
          fmt::format("{} span documents found, {} spans written", count, c.spans));
    }
    // To one segment per shard: force-merge (it answers when done), refresh
    // (the merged segment replaces the old ones for readers, whose files
    // then go), until the stats count one segment per index.
    fmt::print(stderr, "opensearch: force-merging {} spans' indices...\n", c.spans);
    t0 = Clock::now();
    for (int attempt = 0;; ++attempt) {
      SH_RETURN_IF_ERROR(client->PostJson(
          fmt::format("/{}/_forcemerge?max_num_segments=1", pattern), "", nullptr));
      SH_RETURN_IF_ERROR(client->PostJson(fmt::format("/{}/_refresh", pattern), "", nullptr));
      SH_RETURN_IF_ERROR(ReadStats(*client, pattern, r, &indices));
      if (r->segments <= static_cast<double>(r->indices)) break;
      if (attempt == 10) {
        return Status::Internal(
            fmt::format("{} segments in {} indices after force-merge", r->segments, r->indices));
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    r->merge_wall = Seconds(t0);
    return Status::Ok();
  }();
  cleanup();
  return st;
}

void PrintOpenSearch(const StorageOptions& o, const Corpus& c, const OpenSearchResult& r,
                     const StorageVariant* ch_variant, const VariantResult* ch) {
  const double n = static_cast<double>(c.spans);
  fmt::print("\n== OpenSearch {} at {}: the same {} spans as Jaeger documents\n",
             r.version + (r.distribution.empty() ? " (Elasticsearch)" : ""), o.opensearch_url,
             c.spans);
  fmt::print(
      "indices {}-jaeger-* ({} of them, Jaeger's templates with 1 shard, 0 replicas): {} span "
      "documents (counted), {} service documents\n",
      r.prefix, r.indices, r.span_docs, r.service_docs);
  fmt::print(
      "bulk: {} pages of ~{} spans over {} connection(s): {:.2f} s wall, {:.0f} spans/s (rendering "
      "the documents included), {:.0f} bytes of NDJSON per span sent{}; the cluster's own "
      "indexing time {:.2f} s\n",
      r.pages, o.opensearch_bulk_spans, o.opensearch_workers, r.bulk_wall,
      r.bulk_wall > 0 ? n / r.bulk_wall : 0.0, static_cast<double>(r.body_bytes) / n,
      r.retried_pages > 0 ? fmt::format(" ({} pages sent again after 429/5xx)", r.retried_pages)
                          : "",
      r.index_time_s);
  fmt::print("refresh {:.2f} s; force-merge to one segment per shard {:.2f} s ({:.0f} segments)\n",
             r.refresh_wall, r.merge_wall, r.segments);
  fmt::print(
      "store (primaries, after force-merge): span indices {:.2f} + service indices {:.2f} = "
      "{:.2f} bytes/span\n",
      r.span_store / n, r.service_store / n, r.store / n);
  if (!r.files.empty()) {
    // What each is, as Lucene names its files.
    static const std::map<std::string, std::string, std::less<>> kWhat = {
        {"fdt", "stored fields: _source"},
        {"fdx", "stored fields index"},
        {"fdm", "stored fields meta"},
        {"dvd", "doc values"},
        {"dvm", "doc values meta"},
        {"doc", "postings: doc ids"},
        {"pos", "postings: positions"},
        {"pay", "postings: payloads"},
        {"tim", "term dictionary"},
        {"tip", "term index"},
        {"tmd", "term meta"},
        {"kdd", "points (numbers, dates)"},
        {"kdi", "points index"},
        {"kdm", "points meta"},
        {"nvd", "norms"},
        {"nvm", "norms meta"},
        {"si", "segment info"},
        {"fnm", "field infos"},
        {"liv", "live docs"},
        {"cfs", "compound file"}};
    std::string line;
    for (const auto& [ext, b] : r.files) {
      if (b / n < 0.5) continue;
      const auto what = kWhat.find(ext);
      line += fmt::format("{}{} ({}) {:.1f}", line.empty() ? "" : ", ", ext,
                          what == kWhat.end() ? "?" : what->second, b / n);
    }
    fmt::print("by segment file, bytes/span: {}\n", line);
  }
  fmt::print("\n== ClickHouse vs OpenSearch: {} spans, {} traces (loadgen {} corpus, seed {})\n",
             c.spans, c.traces, o.corpus, o.seed);
  if (ch == nullptr || !ch->ok) {
    fmt::print("ClickHouse: no result\n");
  } else {
    const double chb = ch->OnDisk() / n;
    fmt::print("ClickHouse  {:>9.2f} bytes/span  (variant {}: every table, after OPTIMIZE FINAL)\n",
               chb, ch_variant->name);
    fmt::print(
        "OpenSearch  {:>9.2f} bytes/span  (Jaeger's span + service indices, primaries, "
        "after force-merge)\n",
        r.store / n);
    fmt::print("ratio opensearch / clickhouse: {:.2f}\n", chb > 0 ? r.store / n / chb : 0.0);
  }
  fmt::print("OpenSearch bulk indexing: {:.0f} spans/s\n", r.bulk_wall > 0 ? n / r.bulk_wall : 0.0);
  if (r.kept) {
    fmt::print("kept: indices {}-jaeger-*, templates {}-jaeger-span and {}-jaeger-service\n",
               r.prefix, r.prefix, r.prefix);
  } else if (!r.cleanup_note.empty()) {
    fmt::print("{}\n", r.cleanup_note);
  }
}

// ---------------------------------------------------------------------------

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

void AddStorageCommand(CLI::App& bench, std::function<int()>* run) {
  auto opts = std::make_shared<StorageOptions>();
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
  cmd->callback([opts, run] { *run = [opts] { return RunStorage(*opts); }; });
}

}  // namespace spanhouse::bench
