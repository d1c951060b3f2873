// `spanhouse bench formats`: the case study's insert-format table, redone on
// embedded ClickHouse. The same generated span rows go in as Values,
// TabSeparated, RowBinary and Native through the file() table function, and
// as Values inline in the query text (how the case study's 15 s figure was
// taken). Formats take turns batch by batch, so machine noise spreads evenly
// instead of favouring one; each goes into a table of its own with merges
// stopped, so no format pays for another's parts.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "model/span_batch.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/remote_connection.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/schema.h"
#include "tools/bench/bench.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::bench {
namespace {

using storage::RowFormat;

constexpr std::string_view kBenchDatabase = "spanhouse_bench";
constexpr RowFormat kFormats[] = {RowFormat::kValues, RowFormat::kTabSeparated,
                                  RowFormat::kRowBinary, RowFormat::kNative};

struct FormatsOptions {
  size_t rows = 250000;
  int batches = 3;
  uint64_t seed = 1;
  std::string data_dir;
  std::string clickhouse_url;  // set: a ClickHouse server's HTTP interface instead of chDB
};

// One way of inserting a batch.
struct Contender {
  RowFormat format = RowFormat::kValues;
  bool inline_values = false;  // INSERT ... VALUES <data in the query text>
  bool body = false;           // INSERT ... FORMAT F, the data as the request's body (a server)
  storage::FileStructure structure = storage::FileStructure::kWire;
  std::string label;
  std::string table;
  std::string sql;   // the INSERT (inline: with the data)
  std::string path;  // the file read by file(); empty when inline
  std::string data;  // the body (body contenders)
  size_t bytes = 0;
  double encode_s = 0;
  std::vector<double> insert_s;
  double cpu_s = 0;
};

// Whole traces from the load generator until `rows` spans; a trace every
// millisecond, so a batch stays inside one hour and one daily partition.
SpanBatch BuildCorpus(const FormatsOptions& o) {
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{o.seed});
  SpanBatch batch;
  uint64_t start_ns = 1700000000000000000ull;
  while (batch.span_count() < o.rows) {
    gen.AppendTrace(start_ns, &batch);
    start_ns += 1000000;
  }
  return batch;
}

// Values inline (the case study's way), then every format through file(),
// first with the encoder's types named, then with the table's; to a server,
// every format as the request's body instead.
std::vector<Contender> MakeContenders(bool remote) {
  using storage::FileStructure;
  std::vector<Contender> cs;
  auto add = [&](RowFormat f, bool inl, FileStructure s) {
    Contender c;
    c.format = f;
    c.inline_values = inl;
    c.structure = s;
    const char* how = inl ? "inline" : s == FileStructure::kWire ? "file() wire" : "file() table";
    c.label = fmt::format("{} {}", storage::FormatName(f), how);
    c.table = fmt::format("{}.t{}", kBenchDatabase, cs.size());
    cs.push_back(std::move(c));
  };
  add(RowFormat::kValues, true, FileStructure::kWire);
  if (remote) {
    for (RowFormat f : kFormats) {
      add(f, false, FileStructure::kWire);
      cs.back().body = true;
      cs.back().label = fmt::format("{} body", storage::FormatName(f));
    }
    return cs;
  }
  for (FileStructure s : {FileStructure::kWire, FileStructure::kTable}) {
    for (RowFormat f : kFormats) add(f, false, s);
  }
  return cs;
}

// Encodes the batch once per format and writes it to a file; the inline
// contender gets it as its query text.
Status Prepare(const SpanBatch& batch, const storage::Capabilities& caps, const std::string& dir,
               std::vector<Contender>* cs) {
  for (RowFormat f : kFormats) {
    std::string data;
    const auto t0 = Clock::now();
    storage::EncodeRows(batch, caps, f, &data);
    const double encode_s = Seconds(t0);
    const std::string path = fmt::format("{}/batch.{}", dir, storage::FormatName(f));
    if (Status st = WriteFile(path, data); !st.ok()) return st;
    for (auto& c : *cs) {
      if (c.format != f) continue;
      c.encode_s = encode_s;
      c.bytes = data.size();
      if (c.inline_values) {
        c.sql = fmt::format("INSERT INTO {} ({}) VALUES {}", c.table, storage::RowColumns(), data);
      } else if (c.body) {
        c.sql = fmt::format("INSERT INTO {} ({}) FORMAT {}", c.table, storage::RowColumns(),
                            storage::FormatName(f));
        c.data = data;
      } else {
        c.path = path;
        c.sql = storage::InsertFromFileSql(c.table, f, caps, c.structure, storage::RowColumns());
      }
    }
  }
  return Status::Ok();
}

Status Insert(storage::SqlConnection& conn, Contender& c) {
  std::string body = c.data;  // copied before the clock starts
  const double cpu0 = CpuSeconds();
  const auto t0 = Clock::now();
  Status st = c.body            ? conn.Insert(c.sql, std::move(body))
              : c.inline_values ? conn.Query(c.sql, "")
                                : conn.Query(c.sql, "", nullptr, {{"path", c.path}});
  c.insert_s.push_back(Seconds(t0));
  c.cpu_s += CpuSeconds() - cpu0;
  if (!st.ok()) return Status::Internal(c.label + ": " + st.message());
  return Status::Ok();
}

// Ratios are of medians: "x Values" against Values through file() with the
// wire structure, "x inline" against Values inline (the case study's way).
void PrintTable(const std::vector<Contender>& cs, size_t rows, int batches) {
  auto is = [&](RowFormat f, bool inl) {
    return *std::find_if(cs.begin(), cs.end(), [&](const Contender& c) {
      return c.format == f && c.inline_values == inl &&
             c.structure == storage::FileStructure::kWire;
    });
  };
  const double values_s = Median(is(RowFormat::kValues, false).insert_s);
  const double inline_s = Median(is(RowFormat::kValues, true).insert_s);
  fmt::print("\n{:<26} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>12}  {}\n", "format", "encode s",
             "bytes/row", "s/batch", "rows/s", "x Values", "x inline", "CPU-s/M rows",
             "s per batch");
  const Contender* best = &cs[0];
  for (const auto& c : cs) {
    const double s = Median(c.insert_s);
    std::string runs;
    for (double x : c.insert_s) runs += fmt::format("{}{:.3f}", runs.empty() ? "" : " ", x);
    fmt::print("{:<26} {:>8.3f} {:>9.0f} {:>8.3f} {:>8.0f} {:>8.2f} {:>8.2f} {:>12.2f}  {}\n",
               c.label, c.encode_s, static_cast<double>(c.bytes) / rows, s, rows / s, values_s / s,
               inline_s / s, c.cpu_s / (static_cast<double>(rows) * batches) * 1e6, runs);
    if (s < Median(best->insert_s)) best = &c;
  }
  const double best_s = Median(best->insert_s);
  fmt::print("\nfastest: {}, {:.3f} s per {}-row batch: {:.2f}x {}, {:.2f}x Values inline\n",
             best->label, best_s, rows, values_s / best_s, is(RowFormat::kValues, false).label,
             inline_s / best_s);
}

// The data directory, removed at the end when the bench made it.
class WorkDir {
 public:
  explicit WorkDir(const std::string& given) {
    owned_ = given.empty();
    path_ = owned_ ? (std::filesystem::temp_directory_path() /
                      fmt::format("spanhouse-bench-{}", ::getpid()))
                         .string()
                   : given;
    if (owned_) std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_ + "/bench-formats");
  }
  ~WorkDir() {
    std::error_code ec;
    std::filesystem::remove_all(owned_ ? path_ : path_ + "/bench-formats", ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  bool owned_ = false;
  std::string path_;
};

int Fail(const Status& st) {
  fmt::print(stderr, "bench formats: {}\n", st.message());
  return 1;
}

int Measure(storage::SqlConnection& conn, const FormatsOptions& o, const std::string& files) {
  const bool remote = !conn.local_files();
  storage::Capabilities caps;
  // The formats carry user_fields as the JSON type (row_formats.h).
  storage::SchemaOptions schema;
  schema.layout = storage::Schema12Layout();
  if (Status st = storage::EnsureSchema(conn, &caps, schema); !st.ok()) return Fail(st);
  storage::QueryResult version;
  if (Status st = conn.Query("SELECT version()", "TSV", &version); !st.ok()) return Fail(st);
  version.data.erase(version.data.find_last_not_of('\n') + 1);

  auto t0 = Clock::now();
  const SpanBatch batch = BuildCorpus(o);
  const size_t rows = batch.span_count();
  fmt::print(
      "spanhouse bench formats: {} rows x {} batches, seed {}, ClickHouse {} ({}), {} CPUs\n", rows,
      o.batches, o.seed, version.data,
      remote ? "server at " + o.clickhouse_url + "; CPU-s: this process only" : "chDB",
      std::thread::hardware_concurrency());
  fmt::print("corpus: {} spans generated in {:.2f} s\n", rows, Seconds(t0));

  std::vector<Contender> cs = MakeContenders(remote);
  // Tables as the spans table (same DDL, no materialized view), one per way
  // of inserting, in a database of their own. Merges stopped: every table
  // gets the same parts, so merging is not the format's cost, and a merge
  // running during another format's insert would be counted against it.
  std::vector<std::string> ddl = {fmt::format("DROP DATABASE IF EXISTS {}", kBenchDatabase),
                                  fmt::format("CREATE DATABASE {}", kBenchDatabase)};
  for (const auto& c : cs) {
    ddl.push_back(fmt::format("CREATE TABLE {} AS {}.spans", c.table, storage::kDatabase));
    ddl.push_back(fmt::format("SYSTEM STOP MERGES {}", c.table));
  }
  for (const auto& sql : ddl) {
    if (Status st = conn.Query(sql, ""); !st.ok()) return Fail(st);
  }
  if (Status st = Prepare(batch, caps, files, &cs); !st.ok()) return Fail(st);

  for (int b = 0; b < o.batches; ++b) {
    for (auto& c : cs) {
      if (Status st = Insert(conn, c); !st.ok()) return Fail(st);
    }
    fmt::print("batch {}:", b + 1);
    for (const auto& c : cs) fmt::print("  {} {:.3f} s", c.label, c.insert_s.back());
    fmt::print("\n");
  }
  for (const auto& c : cs) {
    storage::QueryResult r;
    if (Status st = conn.Query(fmt::format("SELECT count() FROM {}", c.table), "TSV", &r);
        !st.ok()) {
      return Fail(st);
    }
    const std::string want = fmt::format("{}\n", rows * o.batches);
    if (r.data != want) {
      return Fail(Status::Internal(fmt::format("{}: {} rows in the table, expected {}", c.label,
                                               r.data.substr(0, r.data.size() - 1), want)));
    }
  }
  PrintTable(cs, rows, o.batches);
  // Without SYNC: a synchronous drop after inserts hung in chDB 26.5.
  if (Status st = conn.Query(fmt::format("DROP DATABASE {}", kBenchDatabase), ""); !st.ok()) {
    return Fail(st);
  }
  return 0;
}

int RunFormats(const FormatsOptions& o) {
  if (o.rows == 0 || o.batches <= 0)
    return Fail(Status::Internal("--rows and --batches must be > 0"));
  WorkDir dir(o.data_dir);
  if (!o.clickhouse_url.empty()) {
    std::unique_ptr<storage::RemoteConnection> conn;
    storage::RemoteOptions ro;
    ro.url = o.clickhouse_url;
    ro.timeout = std::chrono::seconds(600);
    if (Status st = storage::RemoteConnection::Open(ro, &conn); !st.ok()) return Fail(st);
    return Measure(*conn, o, dir.path() + "/bench-formats");
  }
  std::shared_ptr<storage::ChdbLibrary> lib;
  if (Status st = storage::ChdbLibrary::Load(&lib); !st.ok()) return Fail(st);
  std::unique_ptr<storage::ChdbConnection> conn;
  if (Status st = storage::ChdbConnection::Open(lib, dir.path() + "/clickhouse", {}, &conn);
      !st.ok()) {
    return Fail(st);
  }
  const int rc = Measure(*conn, o, dir.path() + "/bench-formats");
  // Close before the directory goes: the last connection shuts the engine down.
  conn->Close();
  return rc;
}

}  // namespace

void AddFormatsCommand(CLI::App& bench, std::function<int()>* run) {
  auto opts = std::make_shared<FormatsOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "formats",
      "Insert the same span rows as Values, TabSeparated, RowBinary and Native; print seconds "
      "per batch, rows/s, the ratio to Values and CPU-seconds per million rows");
  cmd->add_option("--rows", opts->rows, "Rows per batch (whole traces: may end a little above)")
      ->default_val(opts->rows);
  cmd->add_option("--batches", opts->batches, "Batches inserted per format")
      ->default_val(opts->batches);
  cmd->add_option("--seed", opts->seed, "Corpus seed")->default_val(opts->seed);
  cmd->add_option("--data-dir", opts->data_dir,
                  "Engine directory (default: a fresh temporary one, removed after)");
  cmd->add_option("--clickhouse-url", opts->clickhouse_url,
                  "Measure on this ClickHouse server (http://host:8123) instead of chDB: every "
                  "format as an insert's body");
  cmd->callback([opts, run] { *run = [opts] { return RunFormats(*opts); }; });
}

}  // namespace spanhouse::bench
