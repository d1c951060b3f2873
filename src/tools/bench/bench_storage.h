// `spanhouse bench storage`'s shared parts: the options, the corpus and
// what a variant's child process measured, and the functions each file of
// the command gives the others. The command itself and what it measures are
// described in bench_storage.cc; the child process in bench_storage_run.cc,
// the printing in bench_storage_print.cc, --compare opensearch in
// bench_storage_opensearch.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/span_batch.h"
#include "tools/bench/storage_variants.h"

namespace spanhouse::bench::storage_bench {

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

// --compare opensearch: what the cluster took and holds.
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

// The fields of `s` between `sep`s (an empty last one when `s` ends with
// `sep`).
std::vector<std::string> Split(const std::string& s, char sep);

// Runs one variant in a child process of its own (one chDB engine per
// process): loads `blocks`, merges, measures (bench_storage_run.cc).
VariantResult RunChild(const Corpus& c, const std::vector<BlockFiles>& blocks,
                       const StorageVariant& v, uint64_t zstd_min_part_bytes,
                       const std::string& dir);

// Printing (bench_storage_print.cc).
void PrintVariant(const StorageVariant& v, const VariantResult& r, size_t spans, size_t lookups);
void PrintSummary(const std::vector<const StorageVariant*>& vs,
                  const std::vector<std::vector<VariantResult>>& runs, size_t spans);
void PrintOpenSearch(const StorageOptions& o, const Corpus& c, const OpenSearchResult& r,
                     const StorageVariant* ch_variant, const VariantResult* ch);

// --compare opensearch: loads the corpus as Jaeger documents, merges,
// measures; the indices and templates are removed at the end (also after a
// failure) unless `keep` (bench_storage_opensearch.cc).
Status MeasureOpenSearch(const Corpus& c, const StorageOptions& o, bool keep, OpenSearchResult* r);

}  // namespace spanhouse::bench::storage_bench
