// `loadgen --error-traces / --slow-traces`: the per-send marks, checked on the
// requests as sent (payloads patched per send, decoded back) and end to end
// against an in-process OTLP/HTTP server that decodes what it gets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "codec/compression.h"
#include "codec/otlp.h"
#include "model/span_batch.h"
#include "net/http_server.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/loadgen.h"
#include "tools/loadgen/payload.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen {
namespace {

constexpr uint64_t kBase = 1'700'000'000'000'000'000ull;
constexpr uint64_t kMs = 1'000'000;
constexpr auto kError = static_cast<uint8_t>(StatusCodeOtlp::kError);

SpanBatch Decode(const std::string& body) {
  SpanBatch b;
  const Status st = codec::DecodeOtlpProto(body, b);
  EXPECT_TRUE(st.ok()) << st.message();
  return b;
}

// One trace of a decoded request.
struct TraceView {
  bool error = false;          // a span in status ERROR
  bool error_message = false;  // an ERROR span with a status message
  bool other_status = false;   // a span with a code or message that is not ERROR's
  int roots = 0;
  uint64_t root_start = 0;
  uint64_t root_end = 0;
  bool nested = true;  // children inside their parents (a kafka consumer after its producer)
  uint64_t root_ns() const { return root_end - root_start; }
};

std::map<TraceId, TraceView> Traces(const SpanBatch& b) {
  std::map<TraceId, TraceView> out;
  std::map<SpanId, uint32_t> by_id;
  for (uint32_t i = 0; i < b.span_count(); ++i) by_id[b.spans.span_id[i]] = i;
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    TraceView& t = out[b.spans.trace_id[i]];
    const bool has_message = !b.Str(b.spans.status_message[i]).empty();
    if (b.spans.status_code[i] == kError) {
      t.error = true;
      t.error_message = t.error_message || has_message;
    } else if (b.spans.status_code[i] != 0 || has_message) {
      t.other_status = true;
    }
    if (IsZero(b.spans.parent_span_id[i])) {
      ++t.roots;
      t.root_start = b.spans.start_ns[i];
      t.root_end = b.spans.end_ns[i];
      continue;
    }
    const auto p = by_id.find(b.spans.parent_span_id[i]);
    if (p == by_id.end()) {
      t.nested = false;
      continue;
    }
    const bool consumer = b.spans.kind[i] == static_cast<uint8_t>(SpanKind::kConsumer);
    if (b.spans.start_ns[i] < b.spans.start_ns[p->second] ||
        (!consumer && b.spans.end_ns[i] > b.spans.end_ns[p->second])) {
      t.nested = false;
    }
  }
  return out;
}

// Sends `sends` requests the way loadgen's default mode does (payloads
// replayed round-robin, fresh masks per send), decodes each and calls
// check(original, patched, counts) on it.
template <typename Check>
void Replay(const std::vector<Payload>& ps, int sends, const TraceMarks& marks, Check&& check) {
  Rng rng(77);
  std::string body;
  for (int s = 0; s < sends; ++s) {
    const Payload& p = ps[static_cast<size_t>(s) % ps.size()];
    const int64_t delta = 1'000'000'000 * static_cast<int64_t>(s + 1);
    const Patch patch = Patch::Random(rng, delta);
    TraceCounts counts;
    ApplyPatch(p, patch, marks, &body, &counts);
    ASSERT_EQ(body.size(), p.body.size());
    check(p, Decode(body), counts, delta);
  }
}

TEST(LoadgenTraceMarksTest, ErrorShareHoldsPerSendOverReplayedPayloads) {
  const std::vector<Payload> ps = BuildPayloads(3, "run", 64, 500, kBase, MarkShape{true, 0});
  for (const Payload& p : ps) {
    // Markable: every trace carries its failure path as built.
    EXPECT_EQ(p.traces.size(), Traces(Decode(p.body)).size());
    for (const TraceSite& t : p.traces) EXPECT_GT(t.status_end, t.status_begin);
  }
  const TraceMarks marks{0.1, -1, 2000 * kMs};
  uint64_t traces = 0, errors = 0, counted = 0, counted_traces = 0;
  std::map<size_t, std::set<std::vector<bool>>> patterns;  // per payload: which traces failed
  int send = 0;
  Replay(ps, 640, marks, [&](const Payload& p, const SpanBatch& b, const TraceCounts& c, int64_t) {
    const auto views = Traces(b);
    std::vector<bool> pattern;  // the payload's traces in order (a patch does not reorder them)
    std::set<TraceId> seen;
    for (uint32_t i = 0; i < b.span_count(); ++i) {
      if (seen.insert(b.spans.trace_id[i]).second)
        pattern.push_back(views.at(b.spans.trace_id[i]).error);
    }
    for (const auto& [id, t] : views) {
      ++traces;
      const bool chosen = TraceChosen(id, kErrorChoice, marks.error_share);
      EXPECT_EQ(t.error, chosen) << "the failure follows the fresh id's hash";
      if (t.error) {
        ++errors;
        EXPECT_TRUE(t.error_message) << "a failed trace has a span with a status message";
      }
      EXPECT_FALSE(t.other_status) << "no status but ERROR's; none at all when not chosen";
    }
    patterns[static_cast<size_t>(send++) % ps.size()].insert(pattern);
    counted += c.error_traces;
    counted_traces += c.traces;
    EXPECT_EQ(c.traces, p.traces.size());
  });
  ASSERT_GE(traces, 20000u);
  EXPECT_EQ(counted_traces, traces);
  EXPECT_EQ(counted, errors) << "the counts the report sums are the traces found";
  const double share = static_cast<double>(errors) / static_cast<double>(traces);
  // Binomial: sd = sqrt(0.1 * 0.9 / n) <= 0.0022 for n >= 20000; 0.01 is over 4.5 sd.
  EXPECT_NEAR(share, 0.1, 0.01);
  // The same payload fails different traces on different sends.
  size_t varied = 0;
  for (const auto& [i, set] : patterns) varied += set.size() > 1 ? 1 : 0;
  EXPECT_EQ(varied, ps.size());
}

TEST(LoadgenTraceMarksTest, ErrorShareZeroAndOne) {
  const std::vector<Payload> ps = BuildPayloads(5, "run", 4, 300, kBase, MarkShape{true, 0});
  for (const double share : {0.0, 1.0}) {
    uint64_t traces = 0, errors = 0;
    Replay(ps, 40, TraceMarks{share, -1, 2000 * kMs},
           [&](const Payload&, const SpanBatch& b, const TraceCounts& c, int64_t) {
             for (const auto& [id, t] : Traces(b)) {
               ++traces;
               errors += t.error ? 1 : 0;
               EXPECT_FALSE(t.other_status);
             }
             EXPECT_EQ(c.error_traces, share == 0 ? 0u : c.traces);
           });
    EXPECT_EQ(errors, share == 0 ? 0u : traces) << share;
  }
}

TEST(LoadgenTraceMarksTest, WithoutTheFlagBuiltInFailuresStayAndAreCounted) {
  const std::vector<Payload> ps = BuildPayloads(3, "run", 64, 500, kBase);
  uint64_t errors = 0, slow = 0, counted = 0, counted_slow = 0;
  const TraceMarks marks;
  Replay(ps, 256, marks, [&](const Payload&, const SpanBatch& b, const TraceCounts& c, int64_t) {
    for (const auto& [id, t] : Traces(b)) {
      errors += t.error ? 1 : 0;
      slow += t.root_ns() >= marks.slow_ns ? 1 : 0;
    }
    counted += c.error_traces;
    counted_slow += c.slow_traces;
  });
  EXPECT_GT(errors, 0u) << "the corpus's own ~1%";
  EXPECT_EQ(counted, errors);
  EXPECT_EQ(counted_slow, slow);
}

// Chosen roots start slow_ns earlier, every other time moves by the send's
// delta only; chosen roots last slow_ns or more, the others less.
void CheckSlow(uint64_t slow_ns, double share, uint64_t min_traces) {
  const std::vector<Payload> ps =
      BuildPayloads(8, "run", 64, 500, kBase, MarkShape{false, slow_ns});
  const TraceMarks marks{-1, share, slow_ns};
  uint64_t traces = 0, slow = 0, counted = 0;
  int sends = 0;
  while (traces < min_traces && !::testing::Test::HasFailure()) {
    Replay(ps, 64, marks,
           [&](const Payload& p, const SpanBatch& b, const TraceCounts& c, int64_t delta) {
             const SpanBatch orig = Decode(p.body);
             ASSERT_EQ(orig.span_count(), b.span_count());
             const auto views = Traces(b);
             for (uint32_t i = 0; i < b.span_count(); ++i) {
               const bool chosen = TraceChosen(b.spans.trace_id[i], kSlowChoice, share);
               const bool root = IsZero(b.spans.parent_span_id[i]);
               const uint64_t moved = chosen && root ? slow_ns : 0;
               ASSERT_EQ(b.spans.start_ns[i],
                         orig.spans.start_ns[i] + static_cast<uint64_t>(delta) - moved);
               ASSERT_EQ(b.spans.end_ns[i], orig.spans.end_ns[i] + static_cast<uint64_t>(delta));
             }
             for (const auto& [id, t] : views) {
               ++traces;
               ASSERT_EQ(t.roots, 1);
               EXPECT_TRUE(t.nested) << "children stay inside the stretched or squeezed root";
               const bool chosen = TraceChosen(id, kSlowChoice, share);
               if (chosen) {
                 ++slow;
                 EXPECT_GE(t.root_ns(), slow_ns);
               } else {
                 EXPECT_LT(t.root_ns(), slow_ns);
               }
             }
             counted += c.slow_traces;
           });
    sends += 64;
  }
  EXPECT_EQ(counted, slow);
  const double got = static_cast<double>(slow) / static_cast<double>(traces);
  EXPECT_NEAR(got, share, 5 * std::sqrt(share * (1 - share) / static_cast<double>(traces)) + 1e-9)
      << "after " << sends << " sends";
}

TEST(LoadgenTraceMarksTest, SlowShareStretchesChosenRootsOnly) {
  CheckSlow(2000 * kMs, 0.05, 20000);
}

TEST(LoadgenTraceMarksTest, SlowBelowNaturalDurationsSqueezesTheOthers) {
  // 20 ms is shorter than many generated roots: those are squeezed unless chosen.
  TraceGenerator plain(CorpusOptions{8});
  SpanBatch b;
  plain.AppendTraces(kBase, 100000, 20000, &b);
  size_t longer = 0;
  for (const auto& [id, t] : Traces(b)) longer += t.root_ns() >= 20 * kMs ? 1 : 0;
  ASSERT_GT(longer, 10u) << "the test needs roots the cap must squeeze";
  CheckSlow(20 * kMs, 0.3, 5000);
}

TEST(LoadgenTraceMarksTest, ErrorAndSlowAreChosenIndependently) {
  const std::vector<Payload> ps =
      BuildPayloads(4, "run", 64, 500, kBase, MarkShape{true, 2000 * kMs});
  const TraceMarks marks{0.5, 0.5, 2000 * kMs};
  uint64_t traces = 0, errors = 0, slow = 0, both = 0;
  TraceCounts sum;
  Replay(ps, 512, marks, [&](const Payload&, const SpanBatch& b, const TraceCounts& c, int64_t) {
    for (const auto& [id, t] : Traces(b)) {
      ++traces;
      const bool is_slow = t.root_ns() >= marks.slow_ns;
      errors += t.error ? 1 : 0;
      slow += is_slow ? 1 : 0;
      both += t.error && is_slow ? 1 : 0;
      EXPECT_EQ(t.error, TraceChosen(id, kErrorChoice, 0.5));
      EXPECT_EQ(is_slow, TraceChosen(id, kSlowChoice, 0.5));
    }
    sum.error_traces += c.error_traces;
    sum.slow_traces += c.slow_traces;
  });
  ASSERT_GE(traces, 20000u);
  EXPECT_EQ(sum.error_traces, errors);
  EXPECT_EQ(sum.slow_traces, slow);
  const double n = static_cast<double>(traces);
  // sd of each share <= 0.0036 at n >= 20000.
  EXPECT_NEAR(static_cast<double>(errors) / n, 0.5, 0.02);
  EXPECT_NEAR(static_cast<double>(slow) / n, 0.5, 0.02);
  EXPECT_NEAR(static_cast<double>(both) / n, 0.25, 0.02) << "independent choices";
}

TEST(LoadgenTraceMarksTest, ChoiceIsAHashOfTheId) {
  // Same id, same answer; shares 0 and 1 are none and all.
  Rng rng(5);
  int chosen = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t a = rng.Next(), b = rng.Next();
    const bool c = TraceChosen(a, b, kErrorChoice, 0.25);
    EXPECT_EQ(c, TraceChosen(a, b, kErrorChoice, 0.25));
    EXPECT_FALSE(TraceChosen(a, b, kErrorChoice, 0.0));
    EXPECT_TRUE(TraceChosen(a, b, kErrorChoice, 1.0));
    chosen += c ? 1 : 0;
  }
  EXPECT_NEAR(chosen / 100000.0, 0.25, 0.01);
}

// ---- end to end: RunLoadgen against a server that decodes every request ----

class CountingBackend {
 public:
  double error_share = -1;  // if >= 0, every trace is checked against the choice
  double slow_share = -1;
  uint64_t slow_ns = 2000 * kMs;

  CountingBackend()
      : server_(
            net::HttpServerOptions{"fake", "127.0.0.1:0", 64u << 20, 2},
            [this](const net::HttpRequest& req, net::HttpResponse& resp) { Handle(req, resp); }) {}

  void Start() { ASSERT_TRUE(server_.Start().ok()); }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + "/v1/traces";
  }

  struct Counts {
    uint64_t spans = 0, traces = 0, errors = 0, slow = 0;
    uint64_t error_without_message = 0, other_status = 0, not_as_chosen = 0, split = 0;
  };
  Counts counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return c_;
  }

 private:
  void Handle(const net::HttpRequest& req, net::HttpResponse& resp) {
    std::string body;
    SpanBatch b;
    if (!codec::Decompress(req.content_encoding, req.body, 256u << 20, &body).ok() ||
        !codec::DecodeOtlpProto(body, b).ok()) {
      resp.status = 400;
      return;
    }
    const auto traces = Traces(b);
    std::lock_guard<std::mutex> lock(mu_);
    c_.spans += b.span_count();
    for (const auto& [id, t] : traces) {
      ++c_.traces;
      const bool slow = t.roots == 1 && t.root_ns() >= slow_ns;
      c_.errors += t.error ? 1 : 0;
      c_.slow += slow ? 1 : 0;
      c_.error_without_message += t.error && !t.error_message ? 1 : 0;
      c_.other_status += t.other_status ? 1 : 0;
      c_.split += t.roots == 1 ? 0 : 1;
      if ((error_share >= 0 && t.error != TraceChosen(id, kErrorChoice, error_share)) ||
          (slow_share >= 0 && slow != TraceChosen(id, kSlowChoice, slow_share))) {
        ++c_.not_as_chosen;
      }
    }
    resp.content_type = "application/x-protobuf";
  }

  net::HttpServer server_;
  std::mutex mu_;
  Counts c_;
};

LoadgenReport RunAgainst(CountingBackend& fake, size_t payloads, uint64_t spans,
                         const char* compression = "none") {
  LoadgenOptions o;
  o.endpoint = fake.url();
  o.connections = 2;
  o.duration_s = 0;
  o.spans = spans;
  o.spans_per_request = 1000;
  o.payloads = payloads;
  o.compression = compression;
  o.quiet = true;
  o.error_traces = fake.error_share;
  o.slow_traces = fake.slow_share;
  o.slow_ms = fake.slow_ns / kMs;
  LoadgenReport r;
  EXPECT_EQ(RunLoadgen(o, &r), 0);
  return r;
}

void ExpectReportMatches(const LoadgenReport& r, const CountingBackend::Counts& c) {
  EXPECT_EQ(r.spans_accepted, c.spans);
  EXPECT_EQ(r.traces_sent, c.traces);
  EXPECT_EQ(r.traces_accepted, c.traces);
  EXPECT_EQ(r.error_traces, c.errors);
  EXPECT_EQ(r.error_traces_accepted, c.errors);
  EXPECT_EQ(r.slow_traces, c.slow);
  EXPECT_EQ(r.slow_traces_accepted, c.slow);
  EXPECT_EQ(c.split, 0u) << "whole traces per request";
}

TEST(LoadgenTraceMarksTest, RunMarksTheSharesAndReportsWhatItSent) {
  // The default mode (64 payloads replayed) and --payloads 0 (each generated afresh).
  for (const size_t payloads : {size_t{64}, size_t{0}}) {
    CountingBackend fake;
    fake.error_share = 0.1;
    fake.slow_share = 0.05;
    fake.Start();
    const LoadgenReport r = RunAgainst(fake, payloads, 330'000, payloads == 0 ? "gzip" : "none");
    const CountingBackend::Counts c = fake.counts();
    ExpectReportMatches(r, c);
    EXPECT_EQ(c.not_as_chosen, 0u) << payloads;
    EXPECT_EQ(c.error_without_message, 0u);
    EXPECT_EQ(c.other_status, 0u) << "traces not chosen carry no status at all";
    ASSERT_GE(c.traces, 20000u) << payloads;
    const double n = static_cast<double>(c.traces);
    EXPECT_NEAR(static_cast<double>(c.errors) / n, 0.1, 0.01) << payloads;
    EXPECT_NEAR(static_cast<double>(c.slow) / n, 0.05, 0.0075) << payloads;
  }
}

TEST(LoadgenTraceMarksTest, RunWithoutTheFlagsCountsTheCorpusAsItIs) {
  CountingBackend fake;
  fake.Start();
  const LoadgenReport r = RunAgainst(fake, 8, 50'000);
  const CountingBackend::Counts c = fake.counts();
  ExpectReportMatches(r, c);
  EXPECT_GT(c.errors, 0u) << "the corpus's own failures";
  EXPECT_LT(c.errors, c.traces / 20);
}

TEST(LoadgenTraceMarksTest, BadSharesExitTwo) {
  LoadgenOptions o;
  o.quiet = true;
  o.error_traces = 1.5;
  EXPECT_EQ(RunLoadgen(o), 2);
  o = LoadgenOptions{};
  o.quiet = true;
  o.slow_traces = NAN;
  EXPECT_EQ(RunLoadgen(o), 2);
  o = LoadgenOptions{};
  o.quiet = true;
  o.slow_ms = 0;
  EXPECT_EQ(RunLoadgen(o), 2);
}

}  // namespace
}  // namespace spanhouse::loadgen
