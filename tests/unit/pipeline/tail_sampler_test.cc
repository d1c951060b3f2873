#include "pipeline/sampling/tail_sampler.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace spanhouse::pipeline {
namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kWait = 10000 * kMs;
constexpr uint64_t kT0 = 1700000000000ull * kMs;

TraceId Id(uint32_t n) {
  TraceId id{};
  for (int i = 0; i < 4; ++i) id[12 + i] = static_cast<uint8_t>(n >> (8 * i));
  id[8] = 0x5a;  // not all zero
  return id;
}

// Adds one span of trace `n` to `b`.
void AddSpan(SpanBatch& b, uint32_t n, bool root, bool error = false, uint64_t dur = kMs,
             const std::string& service = "checkout") {
  const uint32_t r = b.AddResource();
  b.resources.service_name[r] = b.AddString(service);
  const uint32_t i = b.AddSpan(r, b.AddScope());
  b.spans.trace_id[i] = Id(n);
  b.spans.span_id[i] = SpanId{1, static_cast<uint8_t>(root ? 1 : 2 + i)};
  if (!root) b.spans.parent_span_id[i] = SpanId{1, 1};
  b.spans.name[i] = b.AddString(root ? "GET /" : "SELECT");
  b.spans.start_ns[i] = kT0;
  b.spans.end_ns[i] = kT0 + dur;
  if (error) b.spans.status_code[i] = static_cast<uint8_t>(StatusCodeOtlp::kError);
}

std::unique_ptr<TailSampler> Sampler(const std::string& policies, MemoryBudget* budget,
                                     uint64_t keep_ns = 60000 * kMs) {
  std::unique_ptr<TailPolicies> p;
  EXPECT_TRUE(TailPolicies::Parse(policies, &p).ok());
  TailSamplingOptions o;
  o.decision_wait_ns = kWait;
  o.keep_ns = keep_ns;
  return std::make_unique<TailSampler>(o, std::move(p), budget);
}

// The sampling.policy attribute of span `i`, "" when none.
std::string PolicyOf(const SpanBatch& b, uint32_t i) {
  for (uint32_t a = b.spans.attrs[i].begin; a < b.spans.attrs[i].end; ++a) {
    if (b.Str(b.span_attrs.key[a]) == TailSampler::kPolicyAttribute) {
      return std::string(b.Str(b.span_attrs.value[a]));
    }
  }
  return "";
}

// A log of decision records, as the durable queue keeps them.
struct Log {
  std::vector<std::pair<uint64_t, std::string>> records;
  uint64_t next = 100;
  TailSampler::Persist Persist() {
    return [this](std::string_view p) {
      records.emplace_back(next, std::string(p));
      return next++;
    };
  }
};

TEST(TailSampler, KeepsAnErrorTraceWholeAcrossRequestsAndNamesThePolicy) {
  MemoryBudget budget(64 << 20);
  auto t = Sampler("error; latency 1s", &budget);
  Log log;
  t->set_persist(log.Persist());
  SpanBatch first;  // the roots of traces 1 (error later) and 2 (slow) and 3 (plain)
  AddSpan(first, 1, true);
  AddSpan(first, 2, true, false, 2000 * kMs);
  AddSpan(first, 3, true);
  SpanBatch second;  // their children, one an error
  AddSpan(second, 1, false, true);
  AddSpan(second, 2, false);
  AddSpan(second, 3, false);
  bool decided = true;
  ASSERT_TRUE(t->Observe(first, kT0, &decided));
  EXPECT_FALSE(decided);
  ASSERT_TRUE(t->Observe(second, kT0 + 4000 * kMs, &decided));
  EXPECT_FALSE(decided) << "its traces are open";
  EXPECT_EQ(t->open_traces(), 3u);
  EXPECT_EQ(t->DecideDue(kT0 + kWait - 1), 0u);  // the windows are still open
  EXPECT_EQ(t->DecideDue(kT0 + kWait), 3u);
  ASSERT_EQ(log.records.size(), 1u);  // logged before any span is marked
  EXPECT_EQ(t->Apply(first, 1, kT0 + kWait, true), 1u);
  EXPECT_EQ(t->Apply(second, 2, kT0 + kWait, true), 1u);
  for (const SpanBatch* b : {&first, &second}) {
    EXPECT_EQ(b->spans.metrics_only[0], 0) << "the error trace is kept whole";
    EXPECT_EQ(b->spans.metrics_only[1], 0) << "the slow trace is kept whole";
    EXPECT_EQ(b->spans.metrics_only[2], 1) << "the plain trace is dropped whole";
  }
  EXPECT_EQ(PolicyOf(first, 0), "error");
  EXPECT_EQ(PolicyOf(first, 1), "latency 1s");
  EXPECT_EQ(PolicyOf(second, 0), "") << "only the root carries the policy";
  EXPECT_EQ(t->policies().kept(0), 1u);
  EXPECT_EQ(t->policies().kept(1), 1u);
  EXPECT_EQ(t->policies().dropped(), 1u);
  EXPECT_EQ(t->stats().kept_spans.load(), 4u);
  EXPECT_EQ(t->stats().dropped_spans.load(), 2u);
}

TEST(TailSampler, AnotherNodesTracesAreNeitherNotedNorMarked) {
  // Several nodes as one: this node owns the odd traces under the request's view; the even
  // ones are forwarded to their owner, which samples them.
  MemoryBudget budget(64 << 20);
  auto t = Sampler("error", &budget);
  std::vector<uint64_t> views;
  t->set_owns([&](const TraceId& id, uint64_t view) {
    views.push_back(view);
    return id[12] % 2 == 1;
  });
  SpanBatch b;
  AddSpan(b, 1, true);
  AddSpan(b, 2, true, /*error=*/true);
  AddSpan(b, 3, true);
  b.peer_view = 0b110;
  bool decided = true;
  ASSERT_TRUE(t->Observe(b, kT0, &decided));
  EXPECT_FALSE(decided);
  EXPECT_EQ(t->open_traces(), 2u);  // 1 and 3
  ASSERT_FALSE(views.empty());
  for (const uint64_t v : views) EXPECT_EQ(v, 0b110u);
  EXPECT_EQ(t->DecideDue(kT0 + kWait), 2u);
  EXPECT_EQ(t->Apply(b, 1, kT0 + kWait, true), 2u);
  EXPECT_EQ(b.spans.metrics_only[0], 1);
  EXPECT_EQ(b.spans.metrics_only[1], 0) << "another node's trace: left for its owner";
  EXPECT_EQ(PolicyOf(b, 1), "");
  EXPECT_EQ(b.spans.metrics_only[2], 1);
  EXPECT_EQ(t->stats().dropped_spans.load(), 2u);
  // A request of other nodes' spans only waits for nothing here.
  SpanBatch theirs;
  AddSpan(theirs, 4, true);
  AddSpan(theirs, 6, false);
  ASSERT_TRUE(t->Observe(theirs, kT0 + kWait, &decided));
  EXPECT_TRUE(decided);
  EXPECT_EQ(t->open_traces(), 0u);
  EXPECT_EQ(t->stats().late_requests.load(), 0u);
}

TEST(TailPolicies, ARateIsSharedByTheNodes) {
  // Three nodes up: each keeps a third of `rate 30/s` of the traces it owns.
  std::unique_ptr<TailPolicies> p;
  ASSERT_TRUE(TailPolicies::Parse("rate 30/s", &p).ok());
  p->set_rate_share([] { return 1.0 / 3; });
  TraceVerdictState st;
  st.service = "checkout";
  int kept = 0;
  for (int i = 0; i < 1000; ++i) {  // 10 s of decisions, 100 per second
    kept += p->Decide(st, kT0 + static_cast<uint64_t>(i) * 10 * kMs) >= 0 ? 1 : 0;
  }
  EXPECT_GE(kept, 100);  // 10/s for 10 s, plus a burst of 10
  EXPECT_LE(kept, 111);
}

TEST(TailSampler, ARecordReadBackAfterARestartIsMarkedTheSame) {
  MemoryBudget budget(64 << 20);
  Log log;
  SpanBatch live;
  for (uint32_t n = 0; n < 200; ++n) AddSpan(live, n, n % 2 == 0, n % 7 == 0);
  SpanBatch again = live;
  {
    auto t = Sampler("error; rate 10/s", &budget);
    t->set_persist(log.Persist());
    ASSERT_TRUE(t->Observe(live, kT0));
    t->DecideDue(kT0 + kWait);
    t->Apply(live, /*record_lsn=*/7, kT0 + kWait, true);
  }
  // A new process: the decisions come from the log, the record again.
  auto t = Sampler("error; rate 10/s", &budget);
  for (const auto& [lsn, payload] : log.records) t->Load(payload, lsn, kT0 + 2 * kWait);
  EXPECT_EQ(t->decided_traces(), 200u);
  t->Apply(again, 7, kT0 + 2 * kWait, false);
  std::string why;
  EXPECT_TRUE(again.LogicallyEquals(live, &why)) << why;
  EXPECT_EQ(t->stats().decided_at_once.load(), 0u);
  size_t kept = 0;
  for (uint32_t i = 0; i < live.span_count(); ++i) kept += live.spans.metrics_only[i] == 0;
  EXPECT_EQ(kept, 29u + 10u) << "every error trace (29) and 10 more by the rate";
}

TEST(TailSampler, LateSpansFollowTheDecisionAndItIsLoggedAgainAfterThem) {
  MemoryBudget budget(64 << 20);
  auto t = Sampler("error", &budget);
  Log log;
  t->set_persist(log.Persist());
  SpanBatch first;
  AddSpan(first, 1, true, true);
  AddSpan(first, 2, true);
  ASSERT_TRUE(t->Observe(first, kT0));
  t->DecideDue(kT0 + kWait);  // logged as 100
  t->Apply(first, 50, kT0 + kWait, true);
  ASSERT_EQ(log.records.size(), 1u);
  SpanBatch late;
  AddSpan(late, 1, false);
  AddSpan(late, 2, false, true);  // too late to save trace 2
  bool decided = false;
  ASSERT_TRUE(t->Observe(late, kT0 + kWait + kMs, &decided));
  EXPECT_TRUE(decided) << "late spans only: no need to wait";
  EXPECT_EQ(t->stats().late_spans.load(), 2u);
  EXPECT_EQ(t->stats().late_requests.load(), 1u);
  // The late record is 120 in the log, after the decisions (100): they are
  // logged again after it, or the log could drop them while holding it.
  log.next = 121;
  t->Apply(late, 120, kT0 + kWait + kMs, true);
  EXPECT_EQ(late.spans.metrics_only[0], 0);
  EXPECT_EQ(late.spans.metrics_only[1], 1);
  ASSERT_EQ(log.records.size(), 2u);
  EXPECT_EQ(log.records[1].second.size(), 4u + 2 * 18);
  // Read back once more, nothing needs logging.
  SpanBatch again;
  AddSpan(again, 1, false);
  t->Apply(again, 120, kT0 + kWait + 2 * kMs, false);
  EXPECT_EQ(log.records.size(), 2u);
}

TEST(TailSampler, ARecordReadBackWithoutADecisionIsDecidedAtOnce) {
  MemoryBudget budget(64 << 20);
  auto t = Sampler("error", &budget);
  Log log;
  t->set_persist(log.Persist());
  SpanBatch live;  // held in the window: trace 1's error
  AddSpan(live, 1, false, true);
  ASSERT_TRUE(t->Observe(live, kT0));
  SpanBatch spilled;  // spilled: trace 1's root, trace 2
  AddSpan(spilled, 1, true);
  AddSpan(spilled, 2, true);
  t->Apply(spilled, 10, kT0 + kMs, false);
  EXPECT_EQ(t->stats().decided_at_once.load(), 2u);
  EXPECT_EQ(spilled.spans.metrics_only[0], 0) << "the window's evidence counts";
  EXPECT_EQ(spilled.spans.metrics_only[1], 1);
  EXPECT_EQ(log.records.size(), 1u);
  EXPECT_EQ(t->open_traces(), 0u);
  EXPECT_EQ(t->DecideDue(kT0 + kWait), 0u) << "already decided";
  t->Apply(live, 5, kT0 + kWait, true);
  EXPECT_EQ(live.spans.metrics_only[0], 0);
}

TEST(TailSampler, ForgetsOldDecisionsAndGivesTheMemoryBack) {
  MemoryBudget budget(64 << 20);
  auto t = Sampler("error", &budget, /*keep_ns=*/5000 * kMs);
  SpanBatch b;
  for (uint32_t n = 0; n < 100; ++n) AddSpan(b, n, true);
  ASSERT_TRUE(t->Observe(b, kT0));
  EXPECT_EQ(budget.used(), 100 * TailSampler::kTraceBytes);
  t->DecideDue(kT0 + kWait);
  // A late span waits decision_wait in the window: the decision outlives
  // keep_ns by that much.
  t->Forget(kT0 + kWait + 5000 * kMs + kWait - 1);
  EXPECT_EQ(t->decided_traces(), 100u);
  t->Forget(kT0 + kWait + 5000 * kMs + kWait);
  EXPECT_EQ(t->decided_traces(), 0u);
  EXPECT_EQ(budget.used(), 0u);
}

// One million open traces: what the budget cannot take is refused (the
// request is spilled), the budget is never exceeded, and what a trace really
// costs the heap is within what it is counted as.
TEST(TailSampler, MemoryStaysUnderTheBudgetWithAMillionOpenTraces) {
  constexpr size_t kLimit = 64 << 20;
  constexpr uint32_t kTraces = 1000000;
  constexpr uint32_t kPerBatch = 1000;
  MemoryBudget budget(kLimit);
  auto t = Sampler("error; latency 1s; rate 100/s", &budget);
  const size_t heap_before = mallinfo2().uordblks;
  size_t held = 0;
  size_t refused = 0;
  size_t peak = 0;
  for (uint32_t first = 0; first < kTraces; first += kPerBatch) {
    SpanBatch b;
    for (uint32_t n = first; n < first + kPerBatch; ++n) AddSpan(b, n, true);
    if (t->Observe(b, kT0 + first)) {
      held += kPerBatch;
    } else {
      refused += kPerBatch;
    }
    peak = std::max(peak, budget.used());
  }
  const size_t heap = mallinfo2().uordblks - heap_before;
  EXPECT_EQ(held + refused, kTraces);
  EXPECT_GT(refused, 0u) << "a million traces do not fit in 64 MiB at this cost";
  EXPECT_LE(peak, kLimit);
  EXPECT_EQ(t->open_traces(), held);
  EXPECT_EQ(budget.used(), held * TailSampler::kTraceBytes);
  EXPECT_LE(heap, held * TailSampler::kTraceBytes)
      << "a trace costs the heap " << heap / held << " bytes, counted as "
      << TailSampler::kTraceBytes;
  EXPECT_EQ(t->stats().refused_batches.load(), refused / kPerBatch);
  std::cout << "tail window: " << heap * 1000 / held << " heap bytes per 1k open traces (" << held
            << " held)\n";
}

}  // namespace
}  // namespace spanhouse::pipeline
