#include "query/read_switch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace spanhouse::query {
namespace {

// A store that answers its name as the one service, after `delay`, or fails.
class FakeReader final : public SpanReader {
 public:
  explicit FakeReader(std::string name) : name_(std::move(name)) {}
  std::atomic<int> delay_ms{0};
  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};

  Status GetServices(std::vector<std::string>* out) override {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    if (fail.load()) return Status::Unavailable(name_ + " is down");
    out->push_back(name_);
    return Status::Ok();
  }
  Status GetTrace(const TraceId&, SpanBatch*) override {
    ++calls;
    return {StatusCode::kNotFound, "no such trace"};
  }
  Status GetTraces(const std::vector<TraceId>&, SpanBatch*) override { return Status::Ok(); }
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

}  // namespace
}  // namespace spanhouse::query
