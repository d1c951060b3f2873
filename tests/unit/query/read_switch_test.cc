#include "query/read_switch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "../../testdata/sample_batch.h"

namespace spanhouse::query {
namespace {

using testdata::MakeTraceId;

// A flag one thread sets and another waits for, at most `deadline`.
class Signal {
 public:
  void Set() {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool Wait(std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, deadline, [this] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

// A store that answers its name as the one service, and the spans of `held`
// by trace id, after `delay`, or fails.
class FakeReader final : public SpanReader {
 public:
  explicit FakeReader(std::string name) : name_(std::move(name)) {}
  std::atomic<int> delay_ms{0};
  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};
  std::atomic<int> answers{0};
  SpanBatch held;                 // set before the first call
  std::function<void()> on_call;  // run as each call begins (set before the first call)

  Status GetServices(std::vector<std::string>* out) override {
    SH_RETURN_IF_ERROR(Call());
    out->push_back(name_);
    return Status::Ok();
  }
  Status GetTrace(const TraceId& id, SpanBatch* out) override {
    const size_t before = out->span_count();
    SH_RETURN_IF_ERROR(GetTraces({id}, out));
    if (out->span_count() == before) return {StatusCode::kNotFound, "no such trace"};
    return Status::Ok();
  }
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override {
    SH_RETURN_IF_ERROR(Call());
    std::vector<uint32_t> which;
    for (const TraceId& id : ids) {
      for (uint32_t s = 0; s < held.span_count(); ++s) {
        if (held.spans.trace_id[s] == id) which.push_back(s);
      }
    }
    out->AppendSpans(held, which.data(), which.size());
    return Status::Ok();
  }
  Status FindTraceIds(const TraceQuery&, std::vector<TraceId>*) override { return Status::Ok(); }
  Status GetOperations(const std::string&, bool, uint8_t, std::vector<OperationInfo>*) override {
    return Status::Ok();
  }
  Status GetDependencies(uint64_t, uint64_t, std::vector<DependencyLink>*) override {
    return Status::Ok();
  }
  Status GetRedSeries(const RedQuery&, std::vector<RedSeries>* out) override {
    out->push_back({name_, "", {}});
    return Status::Ok();
  }
  Status GetRedSummary(const RedSummaryQuery&, std::vector<RedSummaryRow>*) override {
    return Status::Ok();
  }
  Status CountSpansWithAttr(AttrOwner, const std::string&, const std::string&,
                            uint64_t* count) override {
    *count = 7;
    return Status::Ok();
  }

 private:
  Status Call() {
    ++calls;
    if (on_call) on_call();
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    ++answers;
    if (fail.load()) return Status::Unavailable(name_ + " is down");
    return Status::Ok();
  }
  std::string name_;
};

std::vector<std::string> Services(ReadSwitch& sw, Status* st = nullptr) {
  std::vector<std::string> out;
  Status s = sw.GetServices(&out);
  if (st != nullptr) *st = s;
  return out;
}

TEST(ReadSwitch, ReadsTheCurrentSourceAndSwitches) {
  FakeReader ch("clickhouse"), os("opensearch");
  ReadSwitch sw({{"clickhouse", &ch}, {"opensearch", &os}}, 0, true,
                std::chrono::milliseconds(2000));
  EXPECT_EQ(Services(sw), std::vector<std::string>{"clickhouse"});
  EXPECT_EQ(ReadSwitch::TakeInfo().source, "clickhouse");
  ASSERT_TRUE(sw.SwitchTo("opensearch").ok());
  EXPECT_EQ(sw.current(), "opensearch");
  EXPECT_EQ(Services(sw), std::vector<std::string>{"opensearch"});
  ReadInfo info = ReadSwitch::TakeInfo();
  EXPECT_EQ(info.source, "opensearch");
  EXPECT_EQ(info.fallback, "");
  EXPECT_EQ(ReadSwitch::TakeInfo().source, "");  // taken
  Status st = sw.SwitchTo("elasticsearch");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("clickhouse, opensearch"), std::string::npos) << st.message();
  EXPECT_EQ(sw.current(), "opensearch");
  // Service metrics come from the first source whatever is read.
  std::vector<RedSeries> red;
  ASSERT_TRUE(sw.GetRedSeries(RedQuery{}, &red).ok());
  ASSERT_EQ(red.size(), 1u);
  EXPECT_EQ(red[0].service, "clickhouse");
}

TEST(ReadSwitch, FallsBackWhenTheSourceFails) {
  FakeReader ch("clickhouse"), os("opensearch");
  ReadSwitch sw({{"clickhouse", &ch}, {"opensearch", &os}}, 1, true,
                std::chrono::milliseconds(2000));
  os.fail = true;
  Status st;
  EXPECT_EQ(Services(sw, &st), std::vector<std::string>{"clickhouse"});
  EXPECT_TRUE(st.ok());
  ReadInfo info = ReadSwitch::TakeInfo();
  EXPECT_EQ(info.source, "clickhouse");
  EXPECT_NE(info.fallback.find("opensearch failed: opensearch is down"), std::string::npos)
      << info.fallback;
  PromText m;
  sw.AppendMetrics(m);
  EXPECT_NE(m.Render().find(
                "spanhouse_query_read_fallbacks_total{source=\"opensearch\",reason=\"failed\"} 1"),
            std::string::npos)
      << m.Render();
  // Off: the failure is the answer.
  sw.set_fallback(false);
  EXPECT_TRUE(Services(sw, &st).empty());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
}

TEST(ReadSwitch, FallsBackWhenTheSourceIsSlowAndWaitsForItAtTheEnd) {
  FakeReader ch("clickhouse"), os("opensearch");
  {
    ReadSwitch sw({{"clickhouse", &ch}, {"opensearch", &os}}, 0, true,
                  std::chrono::milliseconds(50));
    ch.delay_ms = 400;
    // The slow store's answer would be "clickhouse".
    EXPECT_EQ(Services(sw), std::vector<std::string>{"opensearch"});
    ReadInfo info = ReadSwitch::TakeInfo();
    EXPECT_EQ(info.source, "opensearch");
    EXPECT_NE(info.fallback.find("did not answer within 50 ms"), std::string::npos)
        << info.fallback;
    // Destroyed while the slow call still runs: it waits for it.
  }
  EXPECT_EQ(ch.calls.load(), 1);
}

TEST(ReadSwitch, AnAnswerOfTheStoreIsNotAFailure) {
  FakeReader ch("clickhouse"), os("opensearch");
  ReadSwitch sw({{"clickhouse", &ch}, {"opensearch", &os}}, 0, true,
                std::chrono::milliseconds(2000));
  SpanBatch b;
  EXPECT_EQ(sw.GetTrace(TraceId{}, &b).code(), StatusCode::kNotFound);
  EXPECT_EQ(os.calls.load(), 0);
  EXPECT_EQ(ReadSwitch::TakeInfo().fallback, "");
  uint64_t n = 0;
  ASSERT_TRUE(sw.CountSpansWithAttr(SpanReader::AttrOwner::kSpan, "k", "v", &n).ok());
  EXPECT_EQ(n, 7u);
}

TEST(ReadSwitch, OneSourceCallsInline) {
  FakeReader ch("clickhouse");
  ReadSwitch sw({{"clickhouse", &ch}}, 0, true, std::chrono::milliseconds(1));
  ch.delay_ms = 30;
  EXPECT_EQ(Services(sw), std::vector<std::string>{"clickhouse"});  // no one to fall back to
  EXPECT_EQ(sw.sources(), std::vector<std::string>{"clickhouse"});
  EXPECT_EQ(sw.Source("opensearch"), nullptr);
  EXPECT_EQ(sw.Source("clickhouse"), &ch);
}

// Three traces of 3 spans (span i of trace t has id 3t + i): `with` holds them
// all; `without` trace 0 whole, trace 1's first two spans, nothing of trace 2,
// as a store the backfill has not finished copying to.
void HoldHalfCopied(FakeReader& with, FakeReader& without) {
  with.held = testdata::SampleBatch(3);
  const uint32_t copied[] = {0, 1, 2, 3, 4};
  without.held.AppendSpans(with.held, copied, std::size(copied));
}

// The span ids of `b`, each as often as it is there.
std::multiset<SpanId> SpanIds(const SpanBatch& b) {
  return {b.spans.span_id.begin(), b.spans.span_id.end()};
}

std::multiset<SpanId> SpanIdsOf(std::initializer_list<uint8_t> seeds) {
  std::multiset<SpanId> out;
  for (uint8_t s : seeds) out.insert(testdata::MakeSpanId(s));
  return out;
}

std::string MetricsOf(const ReadSwitch& sw) {
  PromText m;
  sw.AppendMetrics(m);
  return m.Render();
}

bool HasMetric(const ReadSwitch& sw, const std::string& sample) {
  return MetricsOf(sw).find(sample) != std::string::npos;
}

// One request: a lookup of the traces `traces` (GetTrace for one, GetTraces
// for more), and what the switch tells of it.
struct Answer {
  Status st;
  std::multiset<SpanId> spans;
  ReadInfo info;
};

Answer LookUp(ReadSwitch& sw, const std::vector<uint8_t>& traces) {
  Answer a;
  SpanBatch b;
  if (traces.size() == 1) {
    a.st = sw.GetTrace(MakeTraceId(traces[0]), &b);
  } else {
    std::vector<TraceId> ids;
    for (uint8_t t : traces) ids.push_back(MakeTraceId(t));
    a.st = sw.GetTraces(ids, &b);
  }
  a.spans = SpanIds(b);
  a.info = ReadSwitch::TakeInfo();
  return a;
}

struct ReadSwitchFillingGaps : ::testing::Test {
  FakeReader ch{"clickhouse"}, os{"opensearch"};
  void SetUp() override {
    HoldHalfCopied(os, ch);
    ReadSwitch::TakeInfo();  // nothing left over from another test on this thread
  }
  ReadSwitch Switch(bool fill_gaps, int fallback_after_ms = 2000, size_t current = 0) {
    return {{{"clickhouse", &ch}, {"opensearch", &os}},
            current,
            true,
            std::chrono::milliseconds(fallback_after_ms),
            fill_gaps};
  }
};

TEST_F(ReadSwitchFillingGaps, ATraceMissingFromTheStoreReadIsReadWholeFromTheOther) {
  ReadSwitch sw = Switch(true);
  Answer a = LookUp(sw, {2});
  ASSERT_TRUE(a.st.ok()) << a.st.message();
  EXPECT_EQ(a.spans, SpanIdsOf({6, 7, 8}));
  EXPECT_EQ(a.info.source, "clickhouse");
  EXPECT_EQ(a.info.completed_from, "opensearch");
  EXPECT_EQ(a.info.completed_spans, 3u);
  EXPECT_EQ(a.info.not_completed, "");
  EXPECT_EQ(a.info.fallback, "");
  // Neither store has it: still not found.
  a = LookUp(sw, {9});
  EXPECT_EQ(a.st.code(), StatusCode::kNotFound);
  EXPECT_EQ(a.info.completed_from, "");
}

TEST_F(ReadSwitchFillingGaps, APartialTraceIsCompletedEachSpanOnce) {
  ReadSwitch sw = Switch(true);
  Answer a = LookUp(sw, {1});
  EXPECT_EQ(a.spans, SpanIdsOf({3, 4, 5}));
  EXPECT_EQ(a.info.completed_spans, 1u);
  // Whole in the store read: nothing added, nothing said.
  a = LookUp(sw, {0});
  EXPECT_EQ(a.spans, SpanIdsOf({0, 1, 2}));
  EXPECT_EQ(a.info.completed_from, "");
  // A search's traces: each whole, each span once.
  a = LookUp(sw, {0, 1, 2});
  ASSERT_TRUE(a.st.ok()) << a.st.message();
  EXPECT_EQ(a.spans, SpanIdsOf({0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(a.info.completed_from, "opensearch");
  EXPECT_EQ(a.info.completed_spans, 4u);
  EXPECT_TRUE(HasMetric(sw, "spanhouse_query_read_completed_total{source=\"opensearch\"} 2"))
      << MetricsOf(sw);
  EXPECT_TRUE(HasMetric(sw, "spanhouse_query_read_completed_spans_total{source=\"opensearch\"} 5"));
  EXPECT_TRUE(HasMetric(sw, "spanhouse_query_read_completed_total{source=\"clickhouse\"} 0"));
}

TEST_F(ReadSwitchFillingGaps, ReadingTheOtherStoreIsCompletedFromClickHouse) {
  ReadSwitch sw = Switch(true, 2000, 1);
  os.held = {};
  HoldHalfCopied(ch, os);
  Answer a = LookUp(sw, {1});
  EXPECT_EQ(a.spans, SpanIdsOf({3, 4, 5}));
  EXPECT_EQ(a.info.source, "opensearch");
  EXPECT_EQ(a.info.completed_from, "clickhouse");
}

TEST_F(ReadSwitchFillingGaps, TheOtherStoreFailingLeavesTheAnswerAsItIsAndSaysSo) {
  ReadSwitch sw = Switch(true);
  os.fail = true;
  Answer a = LookUp(sw, {1});
  ASSERT_TRUE(a.st.ok()) << a.st.message();
  EXPECT_EQ(a.spans, SpanIdsOf({3, 4}));
  EXPECT_EQ(a.info.source, "clickhouse");
  EXPECT_EQ(a.info.completed_from, "");
  EXPECT_EQ(a.info.not_completed, "opensearch failed: opensearch is down");
  a = LookUp(sw, {2});
  EXPECT_EQ(a.st.code(), StatusCode::kNotFound);
  EXPECT_NE(a.info.not_completed, "");
  EXPECT_TRUE(HasMetric(sw,
                        "spanhouse_query_read_not_completed_total{source=\"opensearch\","
                        "reason=\"failed\"} 2"))
      << MetricsOf(sw);
}

TEST_F(ReadSwitchFillingGaps, BothStoresAreAskedAtOnce) {
  // Each store answers only once the other has been asked: asked one after
  // the other, the first would wait out its signal's deadline in vain.
  for (bool fallback : {true, false}) {
    Signal ch_asked, os_asked;
    std::atomic<bool> ch_saw_os{false}, os_saw_ch{false};
    ch.on_call = [&] {
      ch_asked.Set();
      ch_saw_os = os_asked.Wait();
    };
    os.on_call = [&] {
      os_asked.Set();
      os_saw_ch = ch_asked.Wait();
    };
    ReadSwitch sw = Switch(true, 60000);
    sw.set_fallback(fallback);
    Answer a = LookUp(sw, {1});
    EXPECT_TRUE(ch_saw_os.load() && os_saw_ch.load()) << "fallback " << fallback;
    EXPECT_EQ(a.spans, SpanIdsOf({3, 4, 5}));
    EXPECT_EQ(a.info.completed_spans, 1u);
  }
}

TEST_F(ReadSwitchFillingGaps, ASlowOtherStoreIsWaitedForFallbackAfterAtMost) {
  Signal release;
  os.on_call = [&] { release.Wait(); };
  {
    ReadSwitch sw = Switch(true, 100);
    Answer a = LookUp(sw, {1});
    EXPECT_EQ(os.answers.load(), 0);  // answered without it
    EXPECT_EQ(a.spans, SpanIdsOf({3, 4}));
    EXPECT_EQ(a.info.not_completed, "opensearch did not answer within 100 ms");
    EXPECT_EQ(a.info.fallback, "");
    EXPECT_TRUE(HasMetric(sw,
                          "spanhouse_query_read_not_completed_total{source=\"opensearch\","
                          "reason=\"slow\"} 1"));
    release.Set();
    // Destroyed while the other's call may still run: it waits for it.
  }
  EXPECT_EQ(os.answers.load(), 1);
}

TEST_F(ReadSwitchFillingGaps, OffAnswersExactlyWhatTheStoreReadHolds) {
  ReadSwitch sw = Switch(false);
  EXPECT_EQ(LookUp(sw, {1}).spans, SpanIdsOf({3, 4}));
  EXPECT_EQ(LookUp(sw, {2}).st.code(), StatusCode::kNotFound);
  Answer a = LookUp(sw, {1, 2});
  EXPECT_EQ(a.spans, SpanIdsOf({3, 4}));
  EXPECT_EQ(a.info.completed_from, "");
  EXPECT_EQ(a.info.not_completed, "");
  EXPECT_EQ(os.calls.load(), 0);
  // Switched on at run time.
  sw.set_fill_gaps(true);
  EXPECT_TRUE(sw.fill_gaps());
  EXPECT_EQ(LookUp(sw, {2}).spans, SpanIdsOf({6, 7, 8}));
}

TEST_F(ReadSwitchFillingGaps, AFallbackTakesTheOtherStoresAnswerAskedAlready) {
  ReadSwitch sw = Switch(true);
  ch.fail = true;
  Answer a = LookUp(sw, {1});
  ASSERT_TRUE(a.st.ok()) << a.st.message();
  EXPECT_EQ(a.spans, SpanIdsOf({3, 4, 5}));
  EXPECT_EQ(os.calls.load(), 1);  // not asked a second time
  EXPECT_EQ(a.info.source, "opensearch");
  EXPECT_NE(a.info.fallback.find("clickhouse failed"), std::string::npos) << a.info.fallback;
  EXPECT_EQ(a.info.completed_from, "");
}

TEST_F(ReadSwitchFillingGaps, TheCallsOfOneRequestAreToldTogether) {
  ReadSwitch sw = Switch(true);
  ch.fail = true;
  Services(sw);  // answered by opensearch; then a lookup by clickhouse, completed
  ch.fail = false;
  Answer a = LookUp(sw, {1, 2});
  EXPECT_EQ(a.info.source, "opensearch, clickhouse");
  EXPECT_EQ(a.info.fallback, "clickhouse failed: clickhouse is down");
  EXPECT_EQ(a.info.completed_from, "opensearch");
  // Taken: the next request starts afresh.
  a = LookUp(sw, {0});
  EXPECT_EQ(a.info.source, "clickhouse");
  EXPECT_EQ(a.info.fallback, "");
  EXPECT_EQ(a.info.completed_from, "");
}

}  // namespace
}  // namespace spanhouse::query
