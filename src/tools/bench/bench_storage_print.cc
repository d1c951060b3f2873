// `spanhouse bench storage`'s printing: each variant's tables and columns,
// the summary of every variant, and --compare opensearch's sizes beside
// ClickHouse's (bench_storage.cc describes the whole command).
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/bench/bench.h"
#include "tools/bench/bench_storage.h"
#include "tools/bench/storage_variants.h"

namespace spanhouse::bench::storage_bench {

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

}  // namespace spanhouse::bench::storage_bench
