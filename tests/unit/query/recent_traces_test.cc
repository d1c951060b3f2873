#include "query/recent_traces.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "codec/otlp_encode.h"
#include "common/clock.h"
#include "pipeline/durable/records.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"
#include "query/peer_reader.h"
#include "query/query_api.h"
#include "query/recent_reader.h"

namespace spanhouse::query {
namespace {

constexpr uint64_t kS = 1'000'000'000ull;
constexpr uint64_t kT0 = 1'800'000'000ull * kS;  // receive times and span starts

TraceId Trace(uint8_t n) {
  TraceId id{};
  id[0] = 0xab;
  id[15] = n;
  return id;
}

SpanId Span(uint8_t trace, uint8_t n) {
  SpanId id{};
  id[0] = trace;
  id[7] = n;
  return id;
}

struct SpanSpec {
  uint8_t trace = 1;
  uint8_t span = 1;
  uint8_t parent = 0;  // 0: a root
  uint64_t start_ns = kT0;
  uint64_t duration_ns = 1000;
  std::string service = "cart";
  std::string name = "GET /cart";
  std::string attr_key = "http.route";
  std::string attr_value = "/cart";
  uint8_t status = 0;
  bool metrics_only = false;
};

std::unique_ptr<SpanBatch> Batch(const std::vector<SpanSpec>& specs) {
  auto b = std::make_unique<SpanBatch>();
  const uint32_t scope = b->AddScope();
  for (const SpanSpec& sp : specs) {
    const uint32_t r = b->AddResource();
    const auto rbegin = static_cast<uint32_t>(b->resource_attrs.size());
    SpanBatch::AddAttr(b->resource_attrs, b->AddString("service.name"), ValueType::kString,
                       b->AddString(sp.service));
    b->resources.attrs[r] = {rbegin, static_cast<uint32_t>(b->resource_attrs.size())};
    b->ResolveServiceName(r);
    const uint32_t s = b->AddSpan(r, scope);
    b->spans.trace_id[s] = Trace(sp.trace);
    b->spans.span_id[s] = Span(sp.trace, sp.span);
    if (sp.parent != 0) b->spans.parent_span_id[s] = Span(sp.trace, sp.parent);
    b->spans.name[s] = b->AddString(sp.name);
    b->spans.start_ns[s] = sp.start_ns;
    b->spans.end_ns[s] = sp.start_ns + sp.duration_ns;
    b->spans.status_code[s] = sp.status;
    b->spans.metrics_only[s] = sp.metrics_only ? 1 : 0;
    const auto abegin = static_cast<uint32_t>(b->span_attrs.size());
    SpanBatch::AddAttr(b->span_attrs, b->AddString(sp.attr_key), ValueType::kString,
                       b->AddString(sp.attr_value));
    b->spans.attrs[s] = {abegin, static_cast<uint32_t>(b->span_attrs.size())};
  }
  return b;
}

std::set<SpanId> SpanIds(const SpanBatch& b) {
  return {b.spans.span_id.begin(), b.spans.span_id.end()};
}

RecentTracesOptions Options(size_t max_bytes = 1 << 20) {
  return {.max_bytes = max_bytes, .max_age = std::chrono::seconds(60)};
}

TEST(RecentTraces, HoldsEachSpanOnceAndNotTheSampledOut) {
  RecentTraces recent(Options(), nullptr, kT0);
  recent.Add(Batch({{.span = 1},
                    {.span = 2, .parent = 1},
                    {.span = 3, .parent = 1, .metrics_only = true},
                    {.trace = 2, .span = 1}}),
             kT0 + kS);
  // The same span received again (a retried request): answered once.
  recent.Add(Batch({{.span = 2, .parent = 1}, {.span = 4, .parent = 2, .start_ns = kT0 + 5}}),
             kT0 + 2 * kS);
  SpanBatch out;
  const RecentHit hit = recent.Collect(Trace(1), &out);
  EXPECT_EQ(hit.spans, 3u);
  EXPECT_EQ(hit.root_start_ns, kT0);
  EXPECT_EQ(SpanIds(out), (std::set<SpanId>{Span(1, 1), Span(1, 2), Span(1, 4)}));
  EXPECT_EQ(out.Str(out.resources.service_name[out.spans.resource[0]]), "cart");

  SpanBatch none;
  EXPECT_EQ(recent.Collect(Trace(9), &none).spans, 0u);
  EXPECT_TRUE(none.empty());
  // A trace without its root: no root start, so never answered from memory alone.
  recent.Add(Batch({{.trace = 3, .span = 2, .parent = 1}}), kT0 + 3 * kS);
  EXPECT_EQ(recent.Collect(Trace(3), &none).root_start_ns, 0u);
}

TEST(RecentTraces, LetsTheOldestGoAndMovesTheHorizon) {
  const size_t one = Batch({{}})->MemoryBytes() + 64;
  RecentTraces recent(Options(3 * one), nullptr, kT0);
  EXPECT_EQ(recent.horizon_ns(), kT0);
  for (uint8_t t = 1; t <= 6; ++t) recent.Add(Batch({{.trace = t}}), kT0 + t * kS);
  SpanBatch out;
  EXPECT_EQ(recent.Collect(Trace(1), &out).spans, 0u);  // let go
  EXPECT_EQ(recent.Collect(Trace(6), &out).spans, 1u);
  // Everything received after the newest batch let go is held.
  const uint64_t horizon = recent.horizon_ns();
  EXPECT_GT(horizon, kT0 + kS);
  EXPECT_LT(horizon, kT0 + 6 * kS);
  for (uint8_t t = 1; t <= 6; ++t) {
    SpanBatch one_trace;
    const bool held = recent.Collect(Trace(t), &one_trace).spans == 1;
    EXPECT_EQ(held, kT0 + t * kS > horizon) << int(t);
  }
  // Past max_age everything goes, and the horizon follows.
  recent.Expire(kT0 + 120 * kS);
  EXPECT_EQ(recent.Collect(Trace(6), &out).spans, 0u);
  EXPECT_EQ(recent.horizon_ns(), kT0 + 6 * kS);
}

TEST(RecentTraces, ChargesTheMemoryBudgetAndGivesWayWhenItIsFull) {
  MemoryBudget budget(1 << 20);
  {
    RecentTraces recent(Options(), &budget, kT0);
    recent.Add(Batch({{.trace = 1}, {.trace = 2}}), kT0 + kS);
    const size_t held = budget.used();
    EXPECT_GT(held, 0u);
    // Requests in flight take the rest: the index lets its oldest go for the
    // new batch, and with nothing left to give, holds nothing more.
    budget.ForceReserve(budget.limit() - held);
    recent.Add(Batch({{.trace = 3}}), kT0 + 2 * kS);
    SpanBatch out;
    EXPECT_EQ(recent.Collect(Trace(1), &out).spans, 0u);
    EXPECT_EQ(recent.Collect(Trace(3), &out).spans, 1u);
    budget.ForceReserve(held);
    recent.Add(Batch({{.trace = 4}}), kT0 + 3 * kS);
    EXPECT_EQ(recent.Collect(Trace(4), &out).spans, 0u);
    EXPECT_EQ(recent.horizon_ns(), kT0 + 3 * kS);
    PromText m;
    recent.AppendMetrics(m);
    EXPECT_NE(m.Render().find("spanhouse_recent_refused_batches_total 1"), std::string::npos)
        << m.Render();
    budget.Release(budget.limit());
  }
  EXPECT_EQ(budget.used(), 0u);  // all given back
}

// The disk tier: a real durable queue log whose records the index reads back.
class RecentTracesOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("recent_traces_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    pipeline::durable::LogOptions o;
    o.dir = dir_.string();
    o.segment_bytes = 1 << 20;
    o.early_seal_age = std::chrono::milliseconds(0);  // sealed once its records are stored
    o.fsync_always = false;
    ASSERT_TRUE(pipeline::durable::SegmentLog::Open(o, &log_).ok());
  }
  void TearDown() override {
    log_.reset();
    std::filesystem::remove_all(dir_);
  }
  RecentTracesOptions DiskOptions(size_t memory_batches, uint64_t disk_max_bytes) {
    RecentTracesOptions o = Options(memory_batches * (One()->MemoryBytes() + 64));
    o.log = log_.get();
    o.filter = &filter_;
    o.disk_max_bytes = disk_max_bytes;
    return o;
  }
  static std::unique_ptr<SpanBatch> One(uint8_t trace = 1) {
    return Batch({{.trace = trace, .span = 1, .attr_value = "/cart/items"},
                  {.trace = trace, .span = 2, .parent = 1}});
  }
  // Accepts trace `t` as the intake and a sink do: filtered, appended to the
  // log, shown to the index with a keep, stored (acked).
  void Accept(RecentTraces& recent, uint8_t t) {
    auto b = One(t);
    const uint64_t received = kT0 + t * kS;
    pipeline::FilterReport report;
    filter_.Apply(*b, received, &report, /*count=*/false);
    sink::Ticket ticket;
    ASSERT_TRUE(
        log_->Append(pipeline::durable::RecordKind::kEncodedRequest,
                     pipeline::durable::EncodedRequestHead(received, codec::BodyFormat::kOtlpProto),
                     codec::EncodeOtlpProto(*b), &ticket)
            .ok());
    recent.Add(std::move(b), received, ticket.Keep());
    ticket.Ack();
  }
  static std::string Route(const SpanBatch& b, const SpanId& span) {
    for (uint32_t s = 0; s < b.span_count(); ++s) {
      if (b.spans.span_id[s] != span) continue;
      const Range r = b.spans.attrs[s];
      for (uint32_t a = r.begin; a < r.end; ++a) {
        if (b.Str(b.span_attrs.key[a]) == "http.route")
          return std::string(b.Str(b.span_attrs.value[a]));
      }
    }
    return "(none)";
  }

  std::filesystem::path dir_;
  std::unique_ptr<pipeline::durable::SegmentLog> log_;
  // Trims values to 4 bytes: a span read back from disk must be trimmed as
  // when it was accepted.
  pipeline::SpanFilter filter_{pipeline::FilterLimits{.max_value_bytes = 4}};
};

TEST_F(RecentTracesOnDisk, KeepsWhatMemoryLetsGoAndReadsItBackAsAccepted) {
  {
    RecentTraces recent(DiskOptions(2, 1ull << 30), nullptr, kT0);
    for (uint8_t t = 1; t <= 6; ++t) Accept(recent, t);
    // Two batches in memory, four on disk: nothing let go.
    EXPECT_EQ(recent.horizon_ns(), kT0);
    EXPECT_GT(log_->kept_bytes(), 0u);
    for (uint8_t t = 1; t <= 6; ++t) {
      SpanBatch out;
      const RecentHit hit = recent.Collect(Trace(t), &out);
      EXPECT_EQ(hit.spans, 2u) << int(t);
      EXPECT_EQ(hit.root_start_ns, kT0) << int(t);
      EXPECT_EQ(SpanIds(out), (std::set<SpanId>{Span(t, 1), Span(t, 2)})) << int(t);
      EXPECT_EQ(Route(out, Span(t, 1)), "/car") << int(t);
      EXPECT_EQ(out.Str(out.resources.service_name[out.spans.resource[0]]), "cart");
    }
    SpanBatch none;
    EXPECT_EQ(recent.Collect(Trace(9), &none).spans, 0u);
    PromText m;
    recent.AppendMetrics(m);
    const std::string text = m.Render();
    EXPECT_NE(text.find("spanhouse_recent_kept_batches_total 4"), std::string::npos) << text;
    EXPECT_NE(text.find("spanhouse_recent_disk_spans 8"), std::string::npos) << text;
    EXPECT_NE(text.find("spanhouse_recent_record_reads_total 4"), std::string::npos) << text;
    EXPECT_NE(text.find("spanhouse_recent_record_read_errors_total 0"), std::string::npos) << text;
  }
  // Gone with the index: every keep given up, every kept segment removed.
  EXPECT_EQ(log_->kept_bytes(), 0u);
}

TEST_F(RecentTracesOnDisk, IsBoundedOnDiskAndInAgeAndTheHorizonFollows) {
  // One byte of disk: a batch moved there goes at the next one taken.
  RecentTraces recent(DiskOptions(2, 1), nullptr, kT0);
  for (uint8_t t = 1; t <= 6; ++t) Accept(recent, t);
  SpanBatch out;
  EXPECT_EQ(recent.Collect(Trace(1), &out).spans, 0u);
  EXPECT_EQ(recent.Collect(Trace(6), &out).spans, 2u);
  EXPECT_GE(recent.horizon_ns(), kT0 + 3 * kS);
  // Without a keep (no durable queue), what memory lets go is gone.
  RecentTraces no_log(DiskOptions(2, 1ull << 30), nullptr, kT0);
  for (uint8_t t = 1; t <= 3; ++t) no_log.Add(One(t), kT0 + t * kS);
  EXPECT_EQ(no_log.Collect(Trace(1), &out).spans, 0u);
  EXPECT_EQ(no_log.horizon_ns(), kT0 + kS);
  // Past max_age the disk tier goes too.
  RecentTraces aged(DiskOptions(1, 1ull << 30), nullptr, kT0);
  for (uint8_t t = 1; t <= 3; ++t) Accept(aged, t);
  EXPECT_EQ(aged.Collect(Trace(1), &out).spans, 2u);
  aged.Expire(kT0 + 2 * kS + 61 * kS);
  EXPECT_EQ(aged.Collect(Trace(1), &out).spans, 0u);
  EXPECT_EQ(aged.Collect(Trace(2), &out).spans, 0u);
  EXPECT_EQ(aged.Collect(Trace(3), &out).spans, 2u);
  EXPECT_EQ(aged.horizon_ns(), kT0 + 2 * kS);
}

TEST(RecentTraces, FindsTracesAsTheStoresDo) {
  RecentTraces recent(Options(), nullptr, kT0);
  recent.Add(Batch({{.trace = 1, .start_ns = kT0 + 1, .name = "GET /cart"},
                    {.trace = 2, .start_ns = kT0 + 2, .duration_ns = 5000, .status = 2},
                    {.trace = 3, .start_ns = kT0 + 3, .service = "checkout"},
                    {.trace = 4, .start_ns = kT0 + 4, .attr_value = "/cart/{id}"},
                    {.trace = 5, .start_ns = kT0 + 5, .metrics_only = true}}),
             kT0 + kS);
  // A search of service `service` over the first second, changed by `with`.
  auto find = [&](std::string service, auto with) {
    TraceQuery q;
    q.service = std::move(service);
    q.start_ns = kT0;
    q.end_ns = kT0 + kS;
    with(q);
    std::vector<TraceId> ids;
    recent.Find(q, &ids);
    return ids;
  };
  auto as_is = [](TraceQuery&) {};
  using Ids = std::vector<TraceId>;
  // Newest first; the sampled-out span is not a trace to find.
  EXPECT_EQ(find("cart", as_is), (Ids{Trace(4), Trace(2), Trace(1)}));
  EXPECT_EQ(find("cart", [](TraceQuery& q) { q.limit = 1; }), (Ids{Trace(4)}));
  EXPECT_EQ(find("checkout", as_is), (Ids{Trace(3)}));
  EXPECT_EQ(find("cart", [](TraceQuery& q) { q.tags = {{"error", "true"}}; }), (Ids{Trace(2)}));
  EXPECT_EQ(find("cart",
                 [](TraceQuery& q) {
                   q.tags = {{"http.route", "/cart/{id}"}};
                 }),
            (Ids{Trace(4)}));
  EXPECT_EQ(find("cart", [](TraceQuery& q) { q.tags = {{"service.name", "cart"}}; }).size(), 3u);
  EXPECT_EQ(find("cart",
                 [](TraceQuery& q) {
                   q.tags = {{"service.name", "cart"}, {"span.kind", "server"}};
                 }),
            Ids{});
  EXPECT_EQ(find("cart", [](TraceQuery& q) { q.min_duration_ns = 2000; }), (Ids{Trace(2)}));
  EXPECT_EQ(find("cart",
                 [](TraceQuery& q) {
                   q.start_ns = kT0 + 2;
                   q.end_ns = kT0 + 3;
                 }),
            (Ids{Trace(2)}));
  EXPECT_EQ(find("cart", [](TraceQuery& q) { q.operation = "nope"; }), Ids{});

  // The catalog of what is held.
  std::vector<std::string> services{"search"};
  recent.Services(&services);
  std::sort(services.begin(), services.end());
  EXPECT_EQ(services, (std::vector<std::string>{"cart", "checkout", "search"}));
  recent.Add(Batch({{.trace = 6, .name = "POST /cart"}}), kT0 + 2 * kS);
  std::vector<OperationInfo> ops;
  recent.Operations("cart", true, 0, &ops);
  std::vector<std::string> names;
  for (const auto& op : ops) names.push_back(op.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"GET /cart", "POST /cart"}));
  ops.clear();
  recent.Operations("cart", false, 2, &ops);  // no server spans held
  EXPECT_TRUE(ops.empty());
}

// The store's side of a RecentReader: what it holds, and how often it was asked.
class Store final : public SpanReader {
 public:
  SpanBatch stored;
  std::vector<TraceId> found;
  int lookups = 0;

  Status GetTrace(const TraceId& id, SpanBatch* out) override {
    ++lookups;
    return GetTraces({id}, out).ok() && !out->empty() ? Status::Ok()
                                                      : Status{StatusCode::kNotFound, "none"};
  }
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override {
    std::vector<uint32_t> which;
    for (uint32_t s = 0; s < stored.span_count(); ++s) {
      if (std::find(ids.begin(), ids.end(), stored.spans.trace_id[s]) != ids.end()) {
        which.push_back(s);
      }
    }
    out->AppendSpans(stored, which.data(), which.size());
    return Status::Ok();
  }
  Status FindTraceIds(const TraceQuery&, std::vector<TraceId>* out) override {
    *out = found;
    return Status::Ok();
  }
  Status GetServices(std::vector<std::string>*) override { return Status::Ok(); }
  Status GetOperations(const std::string&, bool, uint8_t, std::vector<OperationInfo>*) override {
    return Status::Ok();
  }
  Status GetDependencies(uint64_t, uint64_t, std::vector<DependencyLink>*) override {
    return Status::Ok();
  }
  Status GetRedSeries(const RedQuery&, std::vector<RedSeries>*) override { return Status::Ok(); }
  Status GetRedSummary(const RedSummaryQuery&, std::vector<RedSummaryRow>*) override {
    return Status::Ok();
  }
  Status CountSpansWithAttr(AttrOwner, const std::string&, const std::string&, uint64_t*) override {
    return Status::Ok();
  }
};

TEST(RecentReader, MergesTheStoredAndTheHeldSpansOnce) {
  Store store;
  store.stored.Append(*Batch({{.span = 1}, {.span = 2, .parent = 1}}));
  // Started long ago: the trace's root is older than the horizon, so the
  // store is asked and its spans merged with the held ones.
  RecentTraces recent(Options(), nullptr, kT0 + 3600 * kS);
  RecentReader reader(store, recent, {.sole_writer = true});
  recent.Add(Batch({{.span = 2, .parent = 1}, {.span = 3, .parent = 2}}), kT0 + 3600 * kS);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(Trace(1), &out).ok());
  EXPECT_EQ(store.lookups, 1);
  EXPECT_EQ(out.span_count(), 3u);
  EXPECT_EQ(SpanIds(out), (std::set<SpanId>{Span(1, 1), Span(1, 2), Span(1, 3)}));

  // Held only (the store has not written it yet): found, not a 404.
  recent.Add(Batch({{.trace = 7, .start_ns = kT0 + 3601 * kS}}), kT0 + 3601 * kS);
  SpanBatch fresh;
  ASSERT_TRUE(reader.GetTrace(Trace(7), &fresh).ok());
  EXPECT_EQ(fresh.span_count(), 1u);
  // Neither: not found.
  SpanBatch none;
  EXPECT_EQ(reader.GetTrace(Trace(8), &none).code(), StatusCode::kNotFound);

  // Searches put the held traces first, then the stored ones, each once.
  store.found = {Trace(1), Trace(5)};
  std::vector<TraceId> ids;
  TraceQuery q;
  q.service = "cart";
  q.start_ns = kT0;
  q.end_ns = kT0 + 8000 * kS;
  q.limit = 3;
  ASSERT_TRUE(reader.FindTraceIds(q, &ids).ok());
  EXPECT_EQ(ids, (std::vector<TraceId>{Trace(7), Trace(1), Trace(5)}));
  SpanBatch many;
  ASSERT_TRUE(reader.GetTraces({Trace(1), Trace(7)}, &many).ok());
  EXPECT_EQ(many.span_count(), 4u);
}

TEST(RecentReader, AnswersFromMemoryOnlyWhenTheWholeTraceMustBeHeld) {
  Store store;
  RecentTraces recent(Options(), nullptr, kT0);
  RecentReader reader(store, recent, {.sole_writer = true, .clock_skew = std::chrono::seconds(60)});
  // Its root started two minutes after the process: every span of the trace
  // was received since, so the store is not asked.
  recent.Add(Batch({{.span = 1, .start_ns = kT0 + 120 * kS}}), kT0 + 121 * kS);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(Trace(1), &out).ok());
  EXPECT_EQ(store.lookups, 0);
  // Within the clock skew of the horizon: the store is asked.
  recent.Add(Batch({{.trace = 2, .start_ns = kT0 + 30 * kS}}), kT0 + 122 * kS);
  ASSERT_TRUE(reader.GetTrace(Trace(2), &out).ok());
  EXPECT_EQ(store.lookups, 1);
  // A store shared with other writers is always asked.
  RecentReader shared(store, recent, {.sole_writer = false});
  ASSERT_TRUE(shared.GetTrace(Trace(1), &out).ok());
  EXPECT_EQ(store.lookups, 2);
}

// Another node of a `peers` list: its store, its recent index and its query
// API answering /api/spanhouse/peer/ on a free port.
struct PeerNodeForTest {
  Store store;
  RecentTraces recent{Options(), nullptr, WallClockNs()};
  RecentReader reader{store, recent, {}};
  PeerEndpoint endpoint{reader, &recent};
  std::unique_ptr<QueryApi> api;

  PeerNodeForTest() {
    QueryApiOptions o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
    AdminHooks hooks;
    hooks.peer = [this](std::string_view what, const QueryString& q, net::HttpResponse& resp) {
      endpoint.Handle(what, q, resp);
    };
    api = std::make_unique<QueryApi>(o, reader, std::move(hooks));
    EXPECT_TRUE(api->Start().ok());
  }
  ~PeerNodeForTest() { api->Stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(api->port()); }
};

std::unique_ptr<PeerReader> ReaderOver(SpanReader& local, const std::string& peer_url,
                                       bool shared_store, std::function<bool(size_t)> up = {}) {
  PeerReaderOptions o;
  o.nodes = {{"node-a", "http://127.0.0.1:1"}, {"node-b", peer_url}};
  o.self = 0;
  o.shared_store = shared_store;
  o.up = std::move(up);
  o.timeout = std::chrono::milliseconds(2000);
  std::unique_ptr<PeerReader> r;
  EXPECT_TRUE(PeerReader::Make(local, std::move(o), &r).ok());
  return r;
}

TEST(PeerReader, MergesAPeersRecentSpansIntoTheLookupEachOnce) {
  PeerNodeForTest b;
  Store here;
  here.stored.Append(*Batch({{.span = 1}, {.span = 2, .parent = 1}}));
  // The owner holds spans 2 and 3 in memory; span 9 is in its store, which on a shared
  // store this node reads itself: the peer is asked for its recent spans only.
  b.recent.Add(Batch({{.span = 2, .parent = 1}, {.span = 3, .parent = 2}}), WallClockNs());
  b.store.stored.Append(*Batch({{.span = 9, .parent = 1}}));
  auto reader = ReaderOver(here, b.url(), /*shared_store=*/true);
  SpanBatch out;
  ASSERT_TRUE(reader->GetTrace(Trace(1), &out).ok());
  EXPECT_EQ(SpanIds(out), (std::set<SpanId>{Span(1, 1), Span(1, 2), Span(1, 3)}));
  EXPECT_EQ(out.span_count(), 3u);
  EXPECT_EQ(b.store.lookups, 0);
  EXPECT_EQ(PeerReader::TakeMissing(), "");
  // Each node its own store: the peer answers from its store too.
  auto own = ReaderOver(here, b.url(), /*shared_store=*/false);
  SpanBatch all;
  ASSERT_TRUE(own->GetTrace(Trace(1), &all).ok());
  EXPECT_EQ(SpanIds(all), (std::set<SpanId>{Span(1, 1), Span(1, 2), Span(1, 3), Span(1, 9)}));
  // Only the peer has it: found, not a 404; nobody has it: a 404.
  b.recent.Add(Batch({{.trace = 4, .span = 1}}), WallClockNs());
  SpanBatch only;
  ASSERT_TRUE(reader->GetTrace(Trace(4), &only).ok());
  EXPECT_EQ(only.span_count(), 1u);
  SpanBatch none;
  EXPECT_EQ(reader->GetTrace(Trace(5), &none).code(), StatusCode::kNotFound);
  // Several traces at once (a search's results).
  SpanBatch many;
  ASSERT_TRUE(reader->GetTraces({Trace(1), Trace(4)}, &many).ok());
  EXPECT_EQ(many.span_count(), 4u);
  PromText text;
  reader->AppendMetrics(text);
  EXPECT_NE(text.Render().find("spanhouse_peer_reads_total{peer=\"node-b\",result=\"ok\"} 4"),
            std::string::npos)
      << text.Render();
}

TEST(PeerReader, SearchesTakeEachNodesTracesInTurns) {
  PeerNodeForTest b;
  Store here;
  here.found = {Trace(1), Trace(2), Trace(3)};
  b.store.found = {Trace(2), Trace(7), Trace(8)};
  auto reader = ReaderOver(here, b.url(), /*shared_store=*/false);
  TraceQuery q;
  q.service = "cart & co";  // sent percent-encoded
  q.tags = {{"http.route", "/a=b&c"}};
  q.start_ns = 1;
  q.end_ns = 2;
  q.limit = 4;
  std::vector<TraceId> ids;
  ASSERT_TRUE(reader->FindTraceIds(q, &ids).ok());
  EXPECT_EQ(ids, (std::vector<TraceId>{Trace(1), Trace(2), Trace(7), Trace(3)}));
  // On a shared store the peer's recent index is searched, not its store.
  b.recent.Add(Batch({{.trace = 9, .start_ns = WallClockNs()}}), WallClockNs());
  auto shared = ReaderOver(here, b.url(), /*shared_store=*/true);
  TraceQuery fresh;
  fresh.service = "cart";
  fresh.start_ns = WallClockNs() - 60 * kS;
  fresh.end_ns = WallClockNs() + 60 * kS;
  fresh.limit = 10;
  ids.clear();
  ASSERT_TRUE(shared->FindTraceIds(fresh, &ids).ok());
  EXPECT_EQ(ids, (std::vector<TraceId>{Trace(1), Trace(9), Trace(2), Trace(3)}));
}

TEST(PeerReader, APeerDownOrSilentIsNamedAndTheRestAnswers) {
  Store here;
  here.stored.Append(*Batch({{.span = 1}}));
  auto down = ReaderOver(here, "http://127.0.0.1:1", true, [](size_t i) { return i != 1; });
  SpanBatch out;
  ASSERT_TRUE(down->GetTrace(Trace(1), &out).ok());
  EXPECT_EQ(out.span_count(), 1u);
  EXPECT_EQ(PeerReader::TakeMissing(), "node-b down");
  EXPECT_EQ(PeerReader::TakeMissing(), "");  // taken
  // Up by its health checks, but nothing listens there.
  auto silent = ReaderOver(here, "http://127.0.0.1:1", true);
  SpanBatch got;
  ASSERT_TRUE(silent->GetTrace(Trace(1), &got).ok());
  EXPECT_EQ(got.span_count(), 1u);
  EXPECT_EQ(PeerReader::TakeMissing().rfind("node-b: ", 0), 0u);
  PromText text;
  silent->AppendMetrics(text);
  EXPECT_NE(text.Render().find("spanhouse_peer_reads_total{peer=\"node-b\",result=\"failed\"} 1"),
            std::string::npos);
  std::unique_ptr<PeerReader> bad;
  PeerReaderOptions o;
  o.nodes = {{"node-a", "http://127.0.0.1:1"}, {"node-b", "ftp://x"}};
  EXPECT_EQ(PeerReader::Make(here, o, &bad).code(), StatusCode::kInvalidArgument);
}

TEST(PeerReader, TwoNodesLookingUpAtOnceDoNotWaitOnEachOther) {
  // Each node's lookups ask the other, whose listener has one thread: answered on
  // it, a lookup there would hold the thread the other's question needs.
  // The query API's reader, set once both ports are known.
  struct Late final : ReaderInFront {
    using ReaderInFront::ReaderInFront;
    SpanReader* to = nullptr;
    Status GetTrace(const TraceId& id, SpanBatch* out) override { return to->GetTrace(id, out); }
    Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override {
      return to->GetTraces(ids, out);
    }
    Status FindTraceIds(const TraceQuery& q, std::vector<TraceId>* out) override {
      return to->FindTraceIds(q, out);
    }
  };
  struct Node {
    Store store;
    Late late{store};
    RecentTraces recent{Options(), nullptr, WallClockNs()};
    RecentReader reader{store, recent, {}};
    PeerEndpoint endpoint{reader, &recent};
    std::unique_ptr<PeerReader> peers;
    std::unique_ptr<QueryApi> api;
  };
  Node nodes[2];
  for (Node& n : nodes) {
    QueryApiOptions o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
    o.trace_workers = 2;
    AdminHooks hooks;
    hooks.peer = [&n](std::string_view what, const QueryString& q, net::HttpResponse& resp) {
      n.endpoint.Handle(what, q, resp);
    };
    hooks.annotate = [](net::HttpResponse& resp) {
      if (std::string m = PeerReader::TakeMissing(); !m.empty()) {
        resp.headers.emplace_back("X-Spanhouse-Peers-Missing", m);
      }
    };
    n.api = std::make_unique<QueryApi>(o, n.late, std::move(hooks));
    ASSERT_TRUE(n.api->Start().ok());
  }
  for (int i = 0; i < 2; ++i) {
    PeerReaderOptions o;
    o.nodes = {{"a", "http://127.0.0.1:" + std::to_string(nodes[0].api->port())},
               {"b", "http://127.0.0.1:" + std::to_string(nodes[1].api->port())}};
    o.self = static_cast<size_t>(i);
    o.timeout = std::chrono::milliseconds(3000);
    ASSERT_TRUE(PeerReader::Make(nodes[i].reader, o, &nodes[i].peers).ok());
    nodes[i].late.to = nodes[i].peers.get();
  }
  nodes[0].recent.Add(Batch({{.span = 1}}), WallClockNs());
  nodes[1].recent.Add(Batch({{.span = 2, .parent = 1}}), WallClockNs());
  std::atomic<int> whole{0};
  std::vector<std::string> problems(2);
  std::vector<std::thread> askers;
  for (int i = 0; i < 2; ++i) {
    askers.emplace_back([&, i] {
      net::HttpUrl url;
      std::string why;
      ASSERT_TRUE(net::ParseHttpUrl("http://127.0.0.1:" + std::to_string(nodes[i].api->port()),
                                    &url, &why));
      net::HttpClientOptions co;
      co.keep_headers = true;
      net::HttpClient c(url, co);
      for (int k = 0; k < 20; ++k) {
        net::HttpResult r;
        if (!c.Get("/api/traces/" + ToHex(Trace(1)), &r) || r.status != 200 ||
            !r.Header("X-Spanhouse-Peers-Missing").empty()) {
          problems[i] =
              fmt::format("{} {} {}", r.status, r.error, r.Header("X-Spanhouse-Peers-Missing"));
          return;
        }
        if (r.body.find(ToHex(Span(1, 1))) != std::string::npos &&
            r.body.find(ToHex(Span(1, 2))) != std::string::npos) {
          whole.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : askers) t.join();
  EXPECT_EQ(problems, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(whole.load(), 40);
  for (Node& n : nodes) n.api->Stop();
}

TEST(PeerEndpoint, RefusesWhatIsNotAPeersRequest) {
  Store store;
  RecentTraces recent(Options(), nullptr, WallClockNs());
  PeerEndpoint endpoint(store, &recent);
  auto ask = [&](std::string_view what, std::string_view query) {
    QueryString q;
    EXPECT_TRUE(QueryString::Parse("/x?" + std::string(query), &q).ok());
    net::HttpResponse resp;
    endpoint.Handle(what, q, resp);
    return resp;
  };
  EXPECT_EQ(ask("traces", "id=ab").status, 400);  // no scope
  EXPECT_EQ(ask("traces", "scope=all&id=xyz").status, 400);
  EXPECT_EQ(ask("find", "scope=all").status, 400);  // no service
  EXPECT_EQ(ask("find", "scope=all&service=a&tk=x").status, 400);
  EXPECT_EQ(ask("find", "scope=all&service=a&limit=0").status, 400);
  EXPECT_EQ(ask("find", "scope=all&service=a&start=5&end=4").status, 400);
  EXPECT_EQ(ask("other", "scope=all").status, 404);
  net::HttpResponse ok = ask("traces", "scope=recent&id=ab");
  EXPECT_EQ(ok.status, 200);
  SpanBatch empty;
  EXPECT_TRUE(empty.ReadColumnar(ok.body));
  EXPECT_TRUE(empty.empty());
  // What a search sends reads back the same.
  TraceQuery q;
  q.service = "svc/ä";
  q.operation = "GET /a?b=c";
  q.tags = {{"k&1", "v=2"}, {"user_fields.x", ""}};
  q.start_ns = 10;
  q.end_ns = 20;
  q.min_duration_ns = 3;
  q.max_duration_ns = 4;
  q.limit = 7;
  QueryString qs;
  ASSERT_TRUE(QueryString::Parse("/x?" + EncodePeerFind(q), &qs).ok());
  TraceQuery back;
  ASSERT_TRUE(DecodePeerFind(qs, {}, &back).ok());
  EXPECT_EQ(back.service, q.service);
  EXPECT_EQ(back.operation, q.operation);
  ASSERT_EQ(back.tags.size(), 2u);
  EXPECT_EQ(back.tags[0].key, "k&1");
  EXPECT_EQ(back.tags[0].value, "v=2");
  EXPECT_EQ(back.tags[1].key, "user_fields.x");
  EXPECT_EQ(
      std::tie(back.start_ns, back.end_ns, back.min_duration_ns, back.max_duration_ns, back.limit),
      std::tie(q.start_ns, q.end_ns, q.min_duration_ns, q.max_duration_ns, q.limit));
}

}  // namespace
}  // namespace spanhouse::query
