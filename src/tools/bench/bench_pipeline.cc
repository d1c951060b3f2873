// `spanhouse bench pipeline`: the CPU the pipeline spends per span, stage by
// stage, in one process and without the network: the loadgen's OTLP
// payloads are decoded into SpanBatches, filtered (pipeline/filter, default
// limits), pushed through a sharded queue and
// popped, gathered like the writer's pending set and, a flush's worth at a
// time, encoded as one Native block (resource fingerprints included): the
// work between the socket and the insert. In arrival order, as the writer
// encodes a block at full load (an insert of several blocks, sorted by the
// engine); with --sorted, sorted by the table key first, as it does a block
// inserted alone. With --metrics-only P, P% of the traces are marked sampled
// out (as head sampling marks them, untimed): their spans become the
// sampled_spans block's narrow rows instead (the writer's GatherSpanRows).
// Two decoders take
// turns payload by payload (strings referenced in the kept body, and copied
// into the arena), so machine noise spreads over both.
#include <time.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "codec/otlp.h"
#include "common/memory_budget.h"
#include "model/span_batch.h"
#include "pipeline/filter/span_filter.h"
#include "sink/sharded_queue.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"
#include "tools/bench/bench.h"
#include "tools/loadgen/payload.h"

namespace spanhouse::bench {
namespace {

struct PipelineOptions {
  size_t spans_per_request = 500;
  size_t requests = 200;  // distinct payloads, cycled
  size_t total_spans = 2000000;
  size_t flush_rows = 100000;  // spans per writer flush (one block)
  bool sorted = false;         // by the table key before encoding
  size_t shards = 1;
  uint64_t seed = 1;
  uint32_t metrics_only_pct = 0;  // traces marked sampled out, in percent
};

// The corpus's first start time, and the clock the filter is run against.
constexpr uint64_t kCorpusStartNs = 1700000000000000000ull;

// CPU time of the calling thread: the stages run on it alone.
double ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// One way to decode, measured stage by stage. Like the writer, batches wait
// until a flush's worth, then all their spans are encoded as one block.
struct Variant {
  Variant(const char* n, bool o) : name(n), owned(o) {}
  const char* name;
  bool owned;  // strings referenced in the body the batch keeps, or copied to the arena
  double decode_s = 0, filter_s = 0, queue_s = 0, encode_s = 0;
  size_t spans = 0, native_bytes = 0;
  std::vector<sink::QueuedBatch> pending;
  size_t pending_rows = 0;
};

// What every variant shares: the filter, the queue, the encoder's block.
struct Stages {
  explicit Stages(const PipelineOptions& o)
      : opts(o),
        queue(o.shards, size_t{1} << 40),
        caps(storage::Capabilities::FromVersion("26.5")) {}
  const PipelineOptions& opts;
  MemoryBudget budget{size_t{1} << 40};
  sink::ShardedQueue queue;
  // Default limits, the clock at the corpus's start: the corpus must pass
  // untouched (checked below), so this measures the filter's cost alone.
  pipeline::SpanFilter filter{pipeline::FilterLimits{}};
  pipeline::FilterReport report;
  size_t touched = 0;
  std::string touched_example;
  storage::Capabilities caps;
  storage::EncodedBlock block;       // reused, as the writer does
  storage::SampledSpanRows sampled;  // likewise
};

// The pending batches of `v` as one Native block (and the spans sampled out
// as one block of sampled_spans rows), as the writer encodes them.
void Encode(Stages& st, Variant& v) {
  std::vector<storage::SpanRow> rows;
  rows.reserve(v.pending_rows);
  st.sampled.Clear();
  for (const auto& item : v.pending) {
    const SpanBatch& b = *item.batch;
    storage::GatherSpanRows(b, storage::ResourceIds(b), &rows, &st.sampled);
  }
  if (st.opts.sorted) storage::SortByTableKey(&rows);
  if (!rows.empty()) {
    storage::EncodeSpanRows(rows, st.caps, &st.block);
    v.native_bytes += st.block.size();
  }
  if (!st.sampled.empty()) {
    for (const std::string& piece : st.sampled.Block(st.caps)) v.native_bytes += piece.size();
  }
  v.pending.clear();  // batches freed, reservations released: part of this stage
  v.pending_rows = 0;
}

// One payload through every stage with `v`'s decoder; false on a failure.
bool RunOne(Stages& st, Variant& v, const loadgen::Payload& p) {
  std::string body = p.body;  // as the HTTP server hands it over (not timed)
  const double t0 = ThreadCpu();
  auto batch = std::make_unique<SpanBatch>();
  Status s = v.owned ? codec::DecodeOtlpProtoOwned(std::move(body), *batch)
                     : codec::DecodeOtlpProto(body, *batch);
  if (!s.ok()) {
    fmt::print(stderr, "bench pipeline: decode failed: {}\n", s.message());
    return false;
  }
  body = std::string();  // the copying decode frees the body here
  const double td = ThreadCpu();
  if (st.opts.metrics_only_pct > 0) {
    // Whole traces, by their id (random bytes), as a sampler decides.
    auto& spans = batch->spans;
    for (size_t i = 0; i < spans.metrics_only.size(); ++i) {
      spans.metrics_only[i] = spans.trace_id[i][15] % 100 < st.opts.metrics_only_pct ? 1 : 0;
    }
  }
  const double tf = ThreadCpu();  // the marking is no stage of the pipeline's: not counted
  st.filter.Apply(*batch, kCorpusStartNs, &st.report);
  if (!st.report.clean() && st.touched++ == 0) {
    st.touched_example = st.report.Message(st.filter.limits());
  }
  const double t1 = ThreadCpu();
  const size_t n = batch->span_count();
  if (!st.budget.TryReserve(batch->MemoryBytes())) return false;
  sink::QueuedBatch item;
  item.reservation = Reservation(&st.budget, batch->MemoryBytes());
  item.batch = std::move(batch);
  if (!st.queue.Push(item).ok()) {
    fmt::print(stderr, "bench pipeline: queue refused a batch\n");
    return false;
  }
  std::vector<sink::QueuedBatch> popped;
  for (size_t s = 0; s < st.queue.shards(); ++s) {
    while (auto got = st.queue.shard(s).Pop(std::chrono::milliseconds(0))) {
      popped.push_back(std::move(*got));
    }
  }
  const double t2 = ThreadCpu();
  for (auto& got : popped) {
    v.pending_rows += got.batch->span_count();
    v.pending.push_back(std::move(got));
  }
  if (v.pending_rows >= st.opts.flush_rows) Encode(st, v);
  const double t3 = ThreadCpu();
  v.decode_s += td - t0;
  v.filter_s += t1 - tf;
  v.queue_s += t2 - t1;
  v.encode_s += t3 - t2;
  v.spans += n;
  return true;
}

void PrintReport(const PipelineOptions& o, const Stages& st, const Variant (&variants)[2],
                 size_t body_bytes, size_t corpus_spans) {
  fmt::print(
      "{} spans per variant in requests of ~{} ({:.0f} bytes of OTLP per span), {} "
      "shard(s), Native {:.0f} bytes per span\n\n",
      variants[0].spans, o.spans_per_request,
      static_cast<double>(body_bytes) / static_cast<double>(corpus_spans), o.shards,
      static_cast<double>(variants[0].native_bytes) / variants[0].spans);
  fmt::print("CPU-seconds per million spans, one thread:\n");
  fmt::print("{:<32} {:>9} {:>9} {:>9} {:>13} {:>9}\n", "decode", "decode", "filter", "queue",
             o.sorted ? "sort+encode" : "encode", "total");
  const auto total = [](const Variant& v) {
    return v.decode_s + v.filter_s + v.queue_s + v.encode_s;
  };
  for (const Variant& v : variants) {
    const double m = static_cast<double>(v.spans) / 1e6;
    fmt::print("{:<32} {:>9.3f} {:>9.3f} {:>9.3f} {:>13.3f} {:>9.3f}\n", v.name, v.decode_s / m,
               v.filter_s / m, v.queue_s / m, v.encode_s / m, total(v) / m);
  }
  if (st.touched != 0) {
    fmt::print("\nthe filter dropped or trimmed spans of {} requests, e.g.: {}\n", st.touched,
               st.touched_example);
  }
  fmt::print("\nreferenced / copied, total CPU: {:.2f}\n", total(variants[0]) / total(variants[1]));
}

int RunPipeline(const PipelineOptions& o) {
  if (o.spans_per_request == 0 || o.requests == 0 || o.total_spans == 0 || o.shards == 0) {
    fmt::print(stderr, "bench pipeline: every count must be > 0\n");
    return 2;
  }
  fmt::print("building {} payloads of ~{} spans (seed {})...\n", o.requests, o.spans_per_request,
             o.seed);
  const std::vector<loadgen::Payload> payloads =
      loadgen::BuildPayloads(o.seed, "bench", o.requests, o.spans_per_request, kCorpusStartNs);
  size_t body_bytes = 0;
  size_t corpus_spans = 0;
  for (const auto& p : payloads) {
    body_bytes += p.body.size();
    corpus_spans += p.spans;
  }
  Stages st(o);
  // Two ways to decode, in turns: strings referenced in the request body the
  // batch keeps (the receiver's way), and strings copied into the arena.
  Variant variants[] = {{"body kept, strings referenced", true},
                        {"strings copied to the arena", false}};
  for (size_t i = 0; variants[0].spans < o.total_spans; ++i) {
    for (Variant& v : variants) {
      if (!RunOne(st, v, payloads[i % payloads.size()])) return 1;
    }
  }
  PrintReport(o, st, variants, body_bytes, corpus_spans);
  return 0;
}

}  // namespace

void AddPipelineCommand(CLI::App& bench, std::function<int()>* run) {
  auto opts = std::make_shared<PipelineOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "pipeline",
      "CPU-seconds per million spans of each pipeline stage (decode, filter, queue, Native "
      "encode) on loadgen payloads, in one thread, without the network or the store");
  cmd->add_option("--spans-per-request", opts->spans_per_request, "Spans per OTLP request")
      ->default_val(opts->spans_per_request);
  cmd->add_option("--requests", opts->requests, "Distinct payloads generated (then cycled)")
      ->default_val(opts->requests);
  cmd->add_option("--spans", opts->total_spans, "Spans to push through")
      ->default_val(opts->total_spans);
  cmd->add_option("--flush-rows", opts->flush_rows, "Spans per writer flush, encoded as one block")
      ->default_val(opts->flush_rows);
  cmd->add_flag("--sorted", opts->sorted,
                "Sort each flush by the table key first, as the writer does a block that is an "
                "insert alone (at full load an insert holds several blocks, which the engine "
                "sorts together)");
  cmd->add_option("--shards", opts->shards, "Queue shards (writer.threads)")
      ->default_val(opts->shards);
  cmd->add_option("--seed", opts->seed, "Corpus seed")->default_val(opts->seed);
  cmd->add_option("--metrics-only", opts->metrics_only_pct,
                  "Percent of the traces marked sampled out (metrics only): their spans are "
                  "encoded as sampled_spans rows, not spans")
      ->default_val(opts->metrics_only_pct)
      ->check(CLI::Range(0, 100));
  cmd->callback([opts, run] { *run = [opts] { return RunPipeline(*opts); }; });
}

}  // namespace spanhouse::bench
