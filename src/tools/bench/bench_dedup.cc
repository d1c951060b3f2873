// `spanhouse bench dedup`: the dedup index (pipeline/dedup) at a given rate
// and window, on a simulated clock: its memory, how full it gets, CPU per
// span with and without it, the false-positive rate measured on spans never
// sent, retries caught, and the restart's refill from the key files.
//
// Spans: the loadgen's fresh corpus decoded once, each request's trace and
// span ids then XORed with fresh random words per send, so every request is
// new (as live traffic is) while the content hashed is real.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "codec/otlp.h"
#include "model/span_batch.h"
#include "pipeline/dedup/dedup_index.h"
#include "tools/bench/bench.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/payload.h"

namespace spanhouse::bench {

namespace {

struct DedupBenchOptions {
  uint64_t rate = 250000;  // spans per simulated second
  uint32_t window_s = 600;
  std::string max_bytes = "720MiB";
  size_t spans_per_request = 200;
  size_t requests = 64;  // distinct payloads, each sent many times with fresh ids
  size_t retries = 200;  // old requests sent again at the end
  std::string dir;
  uint64_t seed = 1;
};

constexpr uint64_t kT0 = 1765000000ull * 1000000000ull;

bool ParseSize(const std::string& s, uint64_t* out) {
  size_t used = 0;
  const double v = std::stod(s, &used);
  const std::string unit = s.substr(used);
  const uint64_t mult = unit.empty() || unit == "B" ? 1
                        : unit == "KiB"             ? 1ull << 10
                        : unit == "MiB"             ? 1ull << 20
                        : unit == "GiB"             ? 1ull << 30
                                                    : 0;
  if (mult == 0 || v <= 0) return false;
  *out = static_cast<uint64_t>(v * static_cast<double>(mult));
  return true;
}

// `src` with fresh ids: each trace id and span id (and parent) XORed with
// `salt`'s words, the same for one request, so its traces stay whole.
void Refresh(const SpanBatch& src, uint64_t salt_a, uint64_t salt_b, SpanBatch* out) {
  *out = SpanBatch();
  out->Append(src);
  auto x = [](uint8_t* p, uint64_t s) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= s;
    std::memcpy(p, &w, 8);
  };
  for (size_t i = 0; i < out->span_count(); ++i) {
    x(out->spans.trace_id[i].data(), salt_a);
    x(out->spans.trace_id[i].data() + 8, salt_b);
    x(out->spans.span_id[i].data(), salt_b);
    if (!IsZero(out->spans.parent_span_id[i])) x(out->spans.parent_span_id[i].data(), salt_b);
  }
}

double RssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

int RunDedup(const DedupBenchOptions& o) {
  uint64_t max_bytes = 0;
  if (!ParseSize(o.max_bytes, &max_bytes) || o.rate == 0 || o.spans_per_request == 0) {
    fmt::print(stderr, "bench dedup: bad --max-bytes, --rate or --spans-per-request\n");
    return 2;
  }
  const std::string dir =
      o.dir.empty() ? fmt::format("/tmp/spanhouse-bench-dedup-{}", getpid()) : o.dir;
  std::filesystem::remove_all(dir);
  fmt::print("corpus: fresh, {} payloads of ~{} spans (seed {}), new ids per send\n", o.requests,
             o.spans_per_request, o.seed);
  const auto payloads = loadgen::BuildPayloads({o.seed, loadgen::CorpusKind::kFresh}, "bench",
                                               o.requests, o.spans_per_request, kT0);
  std::vector<SpanBatch> corpus(payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    if (!codec::DecodeOtlpProto(payloads[i].body, corpus[i]).ok()) {
      fmt::print(stderr, "bench dedup: a payload does not decode\n");
      return 1;
    }
  }
  pipeline::DedupOptions opts;
  opts.window_s = o.window_s;
  opts.max_bytes = max_bytes;
  opts.dir = dir;
  std::unique_ptr<pipeline::DedupIndex> idx;
  if (Status st = pipeline::DedupIndex::Open(opts, kT0, &idx); !st.ok()) {
    fmt::print(stderr, "bench dedup: {}\n", st.message());
    return 1;
  }
  std::mt19937_64 rng(o.seed);
  // The window and one generation more: the oldest keys leave as new come.
  const uint64_t gen_s = (o.window_s + 29) / 30;
  const uint64_t total_s = o.window_s + gen_s;
  fmt::print("simulating {} spans/s for {} s with a window of {} s, table {} MiB...\n", o.rate,
             total_s, o.window_s, max_bytes >> 20);
  struct Sent {
    size_t payload;
    uint64_t a, b;
  };
  std::vector<Sent> kept;  // a sample of sent requests, for the retries
  uint64_t spans = 0;
  double cpu_refresh = 0;
  double cpu_index = 0;
  double cpu_keys = 0;
  SpanBatch batch;
  std::vector<uint8_t> seen;
  std::vector<SpanContentKey> keys;
  size_t p = 0;
  for (uint64_t sec = 0; sec < total_s; ++sec) {
    const uint64_t now = kT0 + sec * 1000000000ull;
    uint64_t this_second = 0;
    while (this_second < o.rate) {
      const uint64_t a = rng();
      const uint64_t b = rng();
      const size_t which = p++ % corpus.size();
      double t0 = CpuSeconds();
      Refresh(corpus[which], a, b, &batch);
      double t1 = CpuSeconds();
      pipeline::DedupIndex::Admission adm;
      if (idx->Admit(batch, now, &seen, &adm) != 0) {
        fmt::print(stderr, "bench dedup: a fresh request had spans seen\n");
        return 1;
      }
      idx->Commit(adm);
      double t2 = CpuSeconds();
      cpu_refresh += t1 - t0;
      cpu_index += t2 - t1;
      this_second += batch.span_count();
      spans += batch.span_count();
      if (sec >= total_s - o.window_s / 2 && kept.size() < o.retries && rng() % 64 == 0) {
        kept.push_back({which, a, b});
      }
    }
    if (sec % 60 == 59) {
      fmt::print("  {:>5} s: {:.1f}M spans, {:.0f} ns a span in the index, max RSS {:.0f} MiB\n",
                 sec + 1, static_cast<double>(spans) / 1e6,
                 cpu_index * 1e9 / static_cast<double>(spans), RssMiB());
    }
  }
  // The key hashing alone, on the same batches (part of the index's cost).
  {
    const double t0 = CpuSeconds();
    for (size_t i = 0; i < corpus.size() * 20; ++i)
      SpanContentKeys(corpus[i % corpus.size()], &keys);
    size_t n = 0;
    for (size_t i = 0; i < corpus.size() * 20; ++i) n += corpus[i % corpus.size()].span_count();
    cpu_keys = (CpuSeconds() - t0) / static_cast<double>(n);
  }
  const uint64_t end = kT0 + total_s * 1000000000ull;
  const pipeline::DedupStats& st = idx->stats();
  const uint64_t slots = idx->table_bytes() / 4;
  // Retries: every span of every request sent again must be caught.
  uint64_t retried = 0;
  uint64_t caught = 0;
  for (const Sent& s : kept) {
    Refresh(corpus[s.payload], s.a, s.b, &batch);
    pipeline::DedupIndex::Admission adm;
    caught += idx->Admit(batch, end, &seen, &adm);
    retried += batch.span_count();
    idx->Forget(adm);
  }
  // False positives: spans never sent that cost a look in a key file.
  const uint64_t cand0 = st.candidates.load();
  uint64_t fresh = 0;
  uint64_t dropped = 0;
  while (fresh < 2000000) {
    Refresh(corpus[p++ % corpus.size()], rng(), rng(), &batch);
    pipeline::DedupIndex::Admission adm;
    dropped += idx->Admit(batch, end, &seen, &adm);
    idx->Forget(adm);
    fresh += batch.span_count();
  }
  const uint64_t fps = st.candidates.load() - cand0;
  uint64_t file_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) file_bytes += e.file_size();
  const double window_held = idx->window_held_s(end);
  const uint64_t evicted = st.evicted_generations.load();
  const uint64_t unindexed = st.unindexed.load();
  const uint64_t slots_used = st.slots_used.load();
  idx.reset();
  // A restart: the table refilled from the key files.
  const auto w0 = Clock::now();
  const double c0 = CpuSeconds();
  if (Status s = pipeline::DedupIndex::Open(opts, end, &idx); !s.ok()) {
    fmt::print(stderr, "bench dedup: reopen: {}\n", s.message());
    return 1;
  }
  const double reopen_wall = Seconds(w0);
  const double reopen_cpu = CpuSeconds() - c0;
  uint64_t caught_after = 0;
  for (const Sent& s : kept) {
    Refresh(corpus[s.payload], s.a, s.b, &batch);
    pipeline::DedupIndex::Admission adm;
    caught_after += idx->Admit(batch, end, &seen, &adm);
    idx->Forget(adm);
  }
  idx.reset();
  std::filesystem::remove_all(dir);

  fmt::print("\n| what | value |\n|---|---|\n");
  fmt::print("| spans sent (simulated {} s at {}/s) | {:.1f}M |\n", total_s, o.rate,
             static_cast<double>(spans) / 1e6);
  fmt::print("| table (dedup.max_bytes) | {} MiB, {:.1f}M slots |\n", max_bytes >> 20,
             static_cast<double>(slots) / 1e6);
  fmt::print("| keys held at the end / slots | {:.1f}% |\n",
             100.0 * static_cast<double>(slots_used) / static_cast<double>(slots));
  fmt::print("| window held at the end | {:.0f} s (dedup.window_s {}) |\n", window_held,
             o.window_s);
  fmt::print("| generations forgotten early / spans not noted | {} / {} |\n", evicted, unindexed);
  fmt::print("| index CPU a span (keys hashed, table, key file) | {:.0f} ns |\n",
             cpu_index * 1e9 / static_cast<double>(spans));
  fmt::print("| of which hashing the key | {:.0f} ns |\n", cpu_keys * 1e9);
  fmt::print("| copying a request with new ids (bench only) | {:.0f} ns a span |\n",
             cpu_refresh * 1e9 / static_cast<double>(spans));
  fmt::print("| retried spans caught | {} of {} |\n", caught, retried);
  fmt::print(
      "| false positives (looked up in a file) | {} of {} spans never sent ({:.1e}); "
      "dropped: {} |\n",
      fps, fresh, static_cast<double>(fps) / static_cast<double>(fresh), dropped);
  fmt::print("| key files | {:.0f} MiB ({:.1f} bytes a span) |\n",
             static_cast<double>(file_bytes) / (1 << 20),
             static_cast<double>(file_bytes) / static_cast<double>(spans));
  fmt::print(
      "| restart: table refilled from the files | {:.1f} s wall, {:.1f} s CPU; retries "
      "caught after: {} of {} |\n",
      reopen_wall, reopen_cpu, caught_after, retried);
  fmt::print("| peak RSS of this process | {:.0f} MiB |\n", RssMiB());
  return caught == retried && caught_after == retried && dropped == 0 ? 0 : 1;
}

}  // namespace

void AddDedupCommand(CLI::App& bench, std::function<int()>* run) {
  auto opts = std::make_shared<DedupBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "dedup",
      "The dedup index at a rate and window on a simulated clock: memory, fill, CPU per span, "
      "false positives, retries caught, refill at restart");
  cmd->add_option("--rate", opts->rate, "Spans per simulated second")->default_val(opts->rate);
  cmd->add_option("--window", opts->window_s, "dedup.window_s")->default_val(opts->window_s);
  cmd->add_option("--max-bytes", opts->max_bytes, "dedup.max_bytes (e.g. 720MiB)")
      ->default_val(opts->max_bytes);
  cmd->add_option("--spans-per-request", opts->spans_per_request, "Spans per request")
      ->default_val(opts->spans_per_request);
  cmd->add_option("--retries", opts->retries, "Requests sent again at the end")
      ->default_val(opts->retries);
  cmd->add_option("--dir", opts->dir, "Where the key files go (default: a new /tmp directory)");
  cmd->add_option("--seed", opts->seed, "Corpus seed")->default_val(opts->seed);
  cmd->callback([opts, run] { *run = [opts] { return RunDedup(*opts); }; });
}

}  // namespace spanhouse::bench
