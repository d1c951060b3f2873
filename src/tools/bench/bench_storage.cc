// `spanhouse bench storage`: bytes per span on disk, by column and by
// table, for the project's schema and the layouts it was chosen against
// (storage_variants.h: codecs, LowCardinality, sort keys, granule size).
//
// The corpus is the load generator's (same seed, same spans): requests of
// ~500 spans, traces 100 us apart as loadgen sends them, every span fresh
// (ids and attribute values drawn anew, not cycled payloads). It goes in the
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
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
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
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"
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
  // The engine's part size from which CODEC(Default) columns are ZSTD:
  // serve's default (storage.zstd_min_part_bytes, 32 MiB), so the full
  // merge's part is ZSTD as serve's merged parts of such a day are, and the
  // inserts (~12 MB) stay LZ4 as serve's do.
  uint64_t zstd_min_part_mib = 32;
  std::vector<std::string> variants;
  std::string keep;
  bool list = false;
  int rounds = 1;
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
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{o.seed});
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
                    storage::UserFieldValues values, bool extras_column,
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
                            extras_column);
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
  if (chosen.empty()) {
    for (const auto& v : all) chosen.push_back(&v);
  }
  const bool keep = !o.keep.empty();
  const std::string dir = keep ? o.keep
                               : (std::filesystem::temp_directory_path() /
                                  fmt::format("spanhouse-bench-storage-{}", ::getpid()))
                                     .string();
  if (!keep) std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  auto t0 = Clock::now();
  fmt::print(stderr, "generating {} spans (seed {})...\n", o.spans, o.seed);
  const Corpus corpus = BuildCorpus(o);
  fmt::print(
      "spanhouse bench storage: {} spans in {} traces (seed {}, requests of ~{} spans, traces "
      "{} us apart, {:.1f} s of span time), inserted in blocks of ~{} spans, ZSTD from parts of {} "
      "MiB, {} CPUs\n",
      corpus.spans, corpus.traces, o.seed, o.request_spans, loadgen::kTraceSpacingNs / 1000,
      static_cast<double>(corpus.last_ns - corpus.first_ns) / 1e9, o.block_spans,
      o.zstd_min_part_mib, std::thread::hardware_concurrency());
  fmt::print(stderr, "corpus generated in {:.1f} s\n", Seconds(t0));

  // The blocks depend only on the sort order and the encoding: encoded once
  // per pair.
  const auto caps = storage::Capabilities::FromVersion("26.5");
  using Encoding = std::tuple<SpanOrder, storage::UserFieldValues, bool>;
  auto encoding_name = [](const Encoding& e) {
    return fmt::format("{}-{}-{}", static_cast<int>(std::get<0>(e)),
                       static_cast<int>(std::get<1>(e)), std::get<2>(e) ? "extras" : "rare");
  };
  std::map<Encoding, std::vector<BlockFiles>> blocks;
  // Rounds take every variant in turn, so machine noise spreads over all.
  std::vector<std::vector<VariantResult>> results(chosen.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < chosen.size(); ++i) {
      const StorageVariant& v = *chosen[i];
      const Encoding enc{v.order, v.values, v.layout.extras_column};
      auto& files = blocks[enc];
      if (files.empty()) {
        fmt::print(stderr, "encoding blocks in {}'s order and encoding...\n", v.name);
        if (Status st = EncodeBlocks(corpus, o, v.order, v.values, v.layout.extras_column, caps,
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
                  "temporary directory, removed)");
  cmd->callback([opts, run] { *run = [opts] { return RunStorage(*opts); }; });
}

}  // namespace spanhouse::bench
