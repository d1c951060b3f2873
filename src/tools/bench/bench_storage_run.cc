// `spanhouse bench storage`, in a variant's child process: the corpus's
// blocks inserted the writer's way, every table merged (OPTIMIZE ... FINAL),
// the dependency job's query, trace lookups by id, and the sizes from
// system.parts and system.columns, written to a file the parent reads
// (bench_storage.cc describes the whole command).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "model/span_batch.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/schema.h"
#include "tools/bench/bench.h"
#include "tools/bench/bench_storage.h"
#include "tools/bench/storage_variants.h"

namespace spanhouse::bench::storage_bench {

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

namespace {

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

}  // namespace

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

}  // namespace spanhouse::bench::storage_bench
