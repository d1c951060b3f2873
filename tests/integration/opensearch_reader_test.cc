// OpenSearchReader against a real OpenSearch 2.19 node (opensearch_node.h:
// tests/opensearch's launcher, on free loopback ports in a directory of its
// own). Without Java or the launcher the tests are skipped, except under CI
// (CI set), where they fail.
//
// The spans are written as the OpenSearch sink writes them (index templates,
// DocumentWriter, _bulk into the daily indices), then read back through every
// method of the reader.
#include "storage/opensearch/opensearch_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "integration/engine.h"
#include "integration/opensearch_node.h"
#include "integration/span_counts_corpus.h"
#include "model/service_name.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/opensearch/index_templates.h"
#include "storage/opensearch/jaeger_document.h"
#include "storage/opensearch/opensearch_client.h"

namespace spanhouse::storage::opensearch {
namespace {

namespace fs = std::filesystem;
using AttrOwner = query::SpanReader::AttrOwner;

// ---------------------------------------------------------------------------
// the spans

// 2024-03-10T23:59:00Z: trace "late" starts the next day (its own index).
constexpr uint64_t kT0 = 1710115140ull * 1000000000ull;
constexpr uint64_t kMs = 1000000;
constexpr uint64_t kS = 1000000000;

TraceId Tid(uint8_t first, uint8_t last) {
  TraceId id{};
  id[0] = first;
  id[15] = last;
  for (size_t i = 1; i < 15; ++i) id[i] = static_cast<uint8_t>(i * 7 + last);
  return id;
}

// Trace ids. `legacy` begins with zeros: its documents carry the id without them.
const TraceId kCart = Tid(0x0a, 1);
const TraceId kUser = Tid(0xb0, 2);
const TraceId kPay = Tid(0xc0, 3);
const TraceId kHostile = Tid(0xd0, 4);
const TraceId kLegacy = [] {
  TraceId id{};
  id[13] = 0xab;
  id[14] = 0xcd;
  id[15] = 0xef;
  return id;
}();
const TraceId kMissing = Tid(0xee, 9);

const std::string kHostileService = "svc \"quoted\" \\ \xc3\xa9 {x}";
const std::string kHostileValue = "it's \"q\" \\n\t{\"a\":1} \xe6\x97\xa5";

class Builder {
 public:
  struct Attr {
    std::string key;
    ValueType type;
    std::string value;
  };

  uint32_t Resource(const std::vector<Attr>& attrs) {
    const uint32_t r = b.AddResource();
    const auto begin = static_cast<uint32_t>(b.resource_attrs.size());
    for (const Attr& a : attrs) Add(b.resource_attrs, a);
    b.resources.attrs[r] = {begin, static_cast<uint32_t>(b.resource_attrs.size())};
    b.ResolveServiceName(r);
    return r;
  }

  uint32_t Span(uint32_t resource, const TraceId& trace, uint8_t span, uint8_t parent,
                const std::string& name, SpanKind kind, uint64_t start_ns, uint64_t duration_ns,
                StatusCodeOtlp status = StatusCodeOtlp::kUnset,
                const std::vector<Attr>& attrs = {}) {
    if (scope_ == UINT32_MAX) {
      scope_ = b.AddScope();
      b.scopes.name[scope_] = b.AddString("it.scope");
      b.scopes.version[scope_] = b.AddString("0.1");
    }
    const uint32_t s = b.AddSpan(resource, scope_);
    b.spans.trace_id[s] = trace;
    b.spans.span_id[s] = SpanId{0, 0, 0, 0, trace[15], 0, 0, span};
    if (parent != 0) b.spans.parent_span_id[s] = SpanId{0, 0, 0, 0, trace[15], 0, 0, parent};
    b.spans.name[s] = b.AddString(name);
    b.spans.kind[s] = static_cast<uint8_t>(kind);
    b.spans.start_ns[s] = start_ns;
    b.spans.end_ns[s] = start_ns + duration_ns;
    b.spans.status_code[s] = static_cast<uint8_t>(status);
    const auto begin = static_cast<uint32_t>(b.span_attrs.size());
    for (const Attr& a : attrs) Add(b.span_attrs, a);
    b.spans.attrs[s] = {begin, static_cast<uint32_t>(b.span_attrs.size())};
    return s;
  }

  void Event(uint32_t s, uint64_t time_ns, const std::string& name,
             const std::vector<Attr>& attrs) {
    const uint32_t e = b.AddEvent();
    b.events.time_ns[e] = time_ns;
    b.events.name[e] = b.AddString(name);
    const auto begin = static_cast<uint32_t>(b.event_attrs.size());
    for (const Attr& a : attrs) Add(b.event_attrs, a);
    b.events.attrs[e] = {begin, static_cast<uint32_t>(b.event_attrs.size())};
    b.spans.events[s] = {e, e + 1};
  }

  SpanBatch b;

 private:
  void Add(AttrColumns& cols, const Attr& a) {
    SpanBatch::AddAttr(cols, b.AddString(a.key), a.type, b.AddString(a.value));
  }
  uint32_t scope_ = UINT32_MAX;
};

// Five traces over four services. Durations: cart 5 ms, user 50 ms, pay
// 200 ms; starts: pay at T0 - 60 s, cart at T0, user at T0 + 62 s (the next
// day), hostile at T0 - 30 s, legacy at T0 - 10 s.
SpanBatch Corpus() {
  using VT = ValueType;
  Builder x;
  const uint32_t web = x.Resource({{"service.name", VT::kString, "frontend"},
                                   {"host.name", VT::kString, "web-1"},
                                   {"host.cores", VT::kInt, "8"}});
  const uint32_t db =
      x.Resource({{"service.name", VT::kString, "db"}, {"cloud.region", VT::kString, "eu-west-1"}});
  const uint32_t odd = x.Resource({{"service.name", VT::kString, kHostileService}});
  const uint32_t old = x.Resource({{"service.name", VT::kString, "legacy"}});

  x.Span(web, kCart, 1, 0, "GET /cart", SpanKind::kServer, kT0, 5 * kMs, StatusCodeOtlp::kUnset,
         {{"http.method", VT::kString, "GET"},
          {"http.status_code", VT::kInt, "200"},
          {"cached", VT::kBool, "true"},
          {"ratio", VT::kDouble, "0.25"}});
  const uint32_t q = x.Span(db, kCart, 2, 1, "SELECT", SpanKind::kClient, kT0 + 1 * kMs, 2 * kMs,
                            StatusCodeOtlp::kError, {{"db.system", VT::kString, "postgres"}});
  x.Event(q, kT0 + 1500000, "retry", {{"attempt", VT::kInt, "2"}, {"why", VT::kString, "lock"}});

  x.Span(web, kUser, 1, 0, "GET /user", SpanKind::kServer, kT0 + 62 * kS, 50 * kMs,
         StatusCodeOtlp::kOk,
         {{"http.method", VT::kString, "GET"}, {"http.status_code", VT::kInt, "404"}});
  x.Span(db, kUser, 2, 1, "SELECT", SpanKind::kClient, kT0 + 62 * kS + 5 * kMs, 40 * kMs);

  x.Span(web, kPay, 1, 0, "POST /pay", SpanKind::kServer, kT0 - 60 * kS, 200 * kMs,
         StatusCodeOtlp::kUnset, {{"http.method", VT::kString, "POST"}});
  x.Span(web, kPay, 2, 1, "charge", SpanKind::kInternal, kT0 - 60 * kS + 10 * kMs, 150 * kMs);
  x.Span(db, kPay, 3, 2, "INSERT", SpanKind::kClient, kT0 - 60 * kS + 20 * kMs, 100 * kMs);

  x.Span(odd, kHostile, 1, 0, "op \"x\" \\", SpanKind::kProducer, kT0 - 30 * kS, 1 * kMs,
         StatusCodeOtlp::kUnset, {{"user.note", VT::kString, kHostileValue}});

  x.Span(old, kLegacy, 1, 0, "old", SpanKind::kUnspecified, kT0 - 10 * kS, 3 * kMs);
  return std::move(x.b);
}

// What reading the documents of `spans` of `b` back gives, in that order.
SpanBatch Projected(const SpanBatch& b, const std::vector<uint32_t>& spans) {
  SpanBatch out;
  DocumentWriter w(b);
  for (uint32_t s : spans) {
    std::string doc;
    w.AppendSpan(doc, s);
    EXPECT_TRUE(AppendSpanFromDocument(doc, &out).ok());
  }
  return out;
}

// The spans of trace `id` in `b`, by start time.
std::vector<uint32_t> SpansOf(const SpanBatch& b, const TraceId& id) {
  std::vector<uint32_t> out;
  for (uint32_t s = 0; s < b.span_count(); ++s) {
    if (b.spans.trace_id[s] == id) out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(), [&](uint32_t x, uint32_t y) {
    return b.spans.start_ns[x] < b.spans.start_ns[y];
  });
  return out;
}

void ExpectSame(const SpanBatch& got, const SpanBatch& want) {
  std::string why;
  EXPECT_TRUE(got.LogicallyEquals(want, &why)) << why;
}

std::string Hex(const TraceId& id) {
  return ToHex(id);
}

std::vector<std::string> Hexes(const std::vector<TraceId>& ids) {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const TraceId& id : ids) out.push_back(Hex(id));
  return out;
}

// ---------------------------------------------------------------------------
// the tests

class OpenSearchReaderIT : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::path launcher_dir;
    std::string java;
    why_not_ = OpenSearchNode::Missing(&launcher_dir, &java);
    if (!why_not_.empty()) return;
    dir_ = fs::temp_directory_path() / ("spanhouse-os-" + std::to_string(::getpid()));
    node_ = std::make_unique<OpenSearchNode>(launcher_dir, java, dir_);
    if (!node_->running()) {
      why_not_ = "OpenSearch did not start; its log:\n" + node_->log();
      start_failed_ = true;
      return;
    }
    OpenSearchOptions o;
    o.urls = {node_->url()};
    std::unique_ptr<OpenSearchClient> c;
    ASSERT_TRUE(OpenSearchClient::Create(o, &c).ok());
    client_ = std::move(c);
    corpus_ = Corpus();
    Write("", corpus_);
  }
  static void TearDownTestSuite() {
    client_.reset();
    node_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (why_not_.empty()) return;
    const char* ci = std::getenv("CI");
    if (start_failed_ || (ci != nullptr && *ci != '\0')) FAIL() << why_not_;
    GTEST_SKIP() << why_not_;
  }

  // Templates for `prefix`, then `b`'s spans and their service documents in
  // their daily indices, the legacy trace's documents with its id as Jaeger
  // wrote it before 1.16; then a refresh.
  static void Write(const std::string& prefix, const SpanBatch& b) {
    TemplateOptions t;
    t.index_prefix = prefix;
    t.shards = 2;
    t.replicas = 0;
    ASSERT_TRUE(
        client_->PostJson("/_template/" + SpanTemplateName(t), SpanTemplate(t), nullptr).ok());
    ASSERT_TRUE(
        client_->PostJson("/_template/" + ServiceTemplateName(t), ServiceTemplate(t), nullptr)
            .ok());
    DocumentWriter w(b);
    std::string bulk;
    for (uint32_t s = 0; s < b.span_count(); ++s) {
      std::string doc;
      w.AppendSpan(doc, s);
      if (b.spans.trace_id[s] == kLegacy) {
        const std::string full = "\"traceID\":\"" + Hex(kLegacy) + "\"";
        const size_t at = doc.find(full);
        ASSERT_NE(at, std::string::npos);
        doc.replace(at, full.size(), "\"traceID\":\"abcdef\"");
      }
      bulk += R"({"create":{"_index":")" + DailyIndex(SpanIndexBase(prefix), b.spans.start_ns[s]) +
              R"(","_id":")" + SpanDocumentId(b, s) + "\"}}\n" + doc + "\n";
      const std::string_view service = JaegerServiceName(b, b.spans.resource[s]);
      const std::string_view op = b.Str(b.spans.name[s]);
      bulk += R"({"index":{"_index":")" +
              DailyIndex(ServiceIndexBase(prefix), b.spans.start_ns[s]) + R"(","_id":")" +
              ServiceDocumentId(service, op) + "\"}}\n";
      DocumentWriter::AppendService(bulk, service, op);
      bulk += '\n';
    }
    Bulk(bulk);
  }

  static void Bulk(const std::string& ndjson) {
    net::HttpResult r;
    ASSERT_TRUE(client_->Post("/_bulk?refresh=true", ndjson, &r, "application/x-ndjson").ok());
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_NE(r.body.find("\"errors\":false"), std::string::npos) << r.body.substr(0, 2000);
  }

  static OpenSearchReader Reader(ReaderOptions o = {}) {
    return OpenSearchReader(client_, std::move(o));
  }

  static query::TraceQuery Query(const std::string& service) {
    query::TraceQuery q;
    q.service = service;
    q.start_ns = kT0 - 3600 * kS;
    q.end_ns = kT0 + 3600 * kS;
    return q;
  }

  static std::vector<std::string> Find(const query::TraceQuery& q) {
    std::vector<TraceId> ids;
    const Status st = Reader().FindTraceIds(q, &ids);
    EXPECT_TRUE(st.ok()) << st.message();
    return Hexes(ids);
  }

  // The checks; each TEST_F below runs a few of them on one node (a node
  // takes ~15 s to start, and ctest runs each TEST_F in a process of its own).
  static void GetTraceReadsWhatWasWritten();
  static void MissingTraceIsNotFound();
  static void GetTracesKeepsTheOrderOfIds();
  static void TracesPageWithSearchAfterAndStopAtMaxSpans();
  static void FindTraceIdsByServiceAndOperationNewestFirst();
  static void FindTraceIdsByTags();
  static void FindTraceIdsByDurationAndTime();
  static void ServicesAndOperations();
  static void CountSpansWithAttr();
  static void DependenciesSummedOverTheRange();
  static void AnEmptyStoreAnswersEmpty();
  static void MaxSpanAgeLooksAtRecentDaysOnly();
  static void CountsAndListsAsClickHouseDoes();
  static void CountsTheKindOfOlderWriters();

  static inline std::string why_not_;
  static inline bool start_failed_ = false;
  static inline fs::path dir_;
  static inline std::unique_ptr<OpenSearchNode> node_;
  static inline std::shared_ptr<OpenSearchClient> client_;
  static inline SpanBatch corpus_;
};

void OpenSearchReaderIT::GetTraceReadsWhatWasWritten() {
  OpenSearchReader reader = Reader();
  for (const TraceId& id : {kCart, kUser, kPay, kHostile, kLegacy}) {
    SpanBatch got;
    const Status st = reader.GetTrace(id, &got);
    ASSERT_TRUE(st.ok()) << Hex(id) << ": " << st.message();
    SCOPED_TRACE(Hex(id));
    ExpectSame(got, Projected(corpus_, SpansOf(corpus_, id)));
  }
  // The legacy documents' short id reads back as the full one.
  SpanBatch legacy;
  ASSERT_TRUE(reader.GetTrace(kLegacy, &legacy).ok());
  ASSERT_EQ(legacy.span_count(), 1u);
  EXPECT_EQ(legacy.spans.trace_id[0], kLegacy);
  // What the format keeps: the error status, the event and its fields, the kinds.
  SpanBatch cart;
  ASSERT_TRUE(reader.GetTrace(kCart, &cart).ok());
  ASSERT_EQ(cart.span_count(), 2u);
  EXPECT_EQ(cart.spans.status_code[1], static_cast<uint8_t>(StatusCodeOtlp::kError));
  EXPECT_EQ(cart.spans.kind[0], static_cast<uint8_t>(SpanKind::kServer));
  EXPECT_EQ(cart.spans.events[1].size(), 1u);
}

void OpenSearchReaderIT::MissingTraceIsNotFound() {
  SpanBatch got;
  EXPECT_EQ(Reader().GetTrace(kMissing, &got).code(), StatusCode::kNotFound);
  EXPECT_TRUE(got.empty());
}

void OpenSearchReaderIT::GetTracesKeepsTheOrderOfIds() {
  SpanBatch got;
  ASSERT_TRUE(Reader().GetTraces({kUser, kMissing, kLegacy, kCart, kUser}, &got).ok());
  std::vector<uint32_t> want = SpansOf(corpus_, kUser);
  for (const TraceId& id : {kLegacy, kCart}) {
    for (uint32_t s : SpansOf(corpus_, id)) want.push_back(s);
  }
  ExpectSame(got, Projected(corpus_, want));
  SpanBatch none;
  EXPECT_TRUE(Reader().GetTraces({}, &none).ok());
  EXPECT_TRUE(Reader().GetTraces({kMissing}, &none).ok());
  EXPECT_TRUE(none.empty());
}

void OpenSearchReaderIT::TracesPageWithSearchAfterAndStopAtMaxSpans() {
  ReaderOptions o;
  o.page_size = 1;  // every span a page of its own
  SpanBatch got;
  ASSERT_TRUE(Reader(o).GetTraces({kPay, kCart}, &got).ok());
  std::vector<uint32_t> want = SpansOf(corpus_, kPay);
  for (uint32_t s : SpansOf(corpus_, kCart)) want.push_back(s);
  ExpectSame(got, Projected(corpus_, want));

  o = {};
  o.max_spans = 2;  // pay has 3
  SpanBatch over;
  const Status st = Reader(o).GetTrace(kPay, &over);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_TRUE(over.empty());
  EXPECT_TRUE(Reader(o).GetTrace(kCart, &over).ok());
}

void OpenSearchReaderIT::FindTraceIdsByServiceAndOperationNewestFirst() {
  EXPECT_EQ(Find(Query("frontend")), Hexes({kUser, kCart, kPay}));
  EXPECT_EQ(Find(Query("db")), Hexes({kUser, kCart, kPay}));
  EXPECT_EQ(Find(Query(kHostileService)), Hexes({kHostile}));
  EXPECT_EQ(Find(Query("legacy")), Hexes({kLegacy}));
  EXPECT_TRUE(Find(Query("nobody")).empty());
  query::TraceQuery q = Query("frontend");
  q.operation = "GET /cart";
  EXPECT_EQ(Find(q), Hexes({kCart}));
  q.operation = "charge";
  EXPECT_EQ(Find(q), Hexes({kPay}));
  q = Query(kHostileService);
  q.operation = "op \"x\" \\";
  EXPECT_EQ(Find(q), Hexes({kHostile}));
  // The limit keeps the newest.
  q = Query("frontend");
  q.limit = 2;
  EXPECT_EQ(Find(q), Hexes({kUser, kCart}));
  q.limit = 1;
  EXPECT_EQ(Find(q), Hexes({kUser}));
}

void OpenSearchReaderIT::FindTraceIdsByTags() {
  auto tagged = [](const std::string& service, const std::string& key, const std::string& value) {
    query::TraceQuery q = Query(service);
    q.tags = {{key, value}};
    return Find(q);
  };
  // A string, an int (indexed as its text), a bool, a double.
  EXPECT_EQ(tagged("frontend", "http.method", "GET"), Hexes({kUser, kCart}));
  EXPECT_EQ(tagged("frontend", "http.status_code", "200"), Hexes({kCart}));
  EXPECT_EQ(tagged("frontend", "http.status_code", "404"), Hexes({kUser}));
  EXPECT_EQ(tagged("frontend", "cached", "true"), Hexes({kCart}));
  EXPECT_EQ(tagged("frontend", "ratio", "0.25"), Hexes({kCart}));
  EXPECT_TRUE(tagged("frontend", "http.method", "get").empty());  // exact, not a pattern
  EXPECT_TRUE(tagged("frontend", "http.method", "G.*").empty());
  // A resource attribute; an event's field.
  EXPECT_EQ(tagged("frontend", "host.name", "web-1"), Hexes({kUser, kCart, kPay}));
  EXPECT_EQ(tagged("db", "cloud.region", "eu-west-1"), Hexes({kUser, kCart, kPay}));
  EXPECT_EQ(tagged("db", "attempt", "2"), Hexes({kCart}));
  EXPECT_EQ(tagged("db", "why", "lock"), Hexes({kCart}));
  // A hostile value.
  EXPECT_EQ(tagged(kHostileService, "user.note", kHostileValue), Hexes({kHostile}));
  // Span fields shown as tags.
  EXPECT_EQ(tagged("db", "error", "true"), Hexes({kCart}));
  EXPECT_EQ(tagged("db", "error", "false"), Hexes({kUser, kPay}));
  EXPECT_EQ(tagged("db", "otel.status_code", "ERROR"), Hexes({kCart}));
  EXPECT_EQ(tagged("frontend", "otel.status_code", "OK"), Hexes({kUser}));
  EXPECT_EQ(tagged("frontend", "otel.status_code", "UNSET"), Hexes({kCart, kPay}));
  EXPECT_EQ(tagged("frontend", "span.kind", "server"), Hexes({kUser, kCart, kPay}));
  EXPECT_EQ(tagged("frontend", "span.kind", "SPAN_KIND_INTERNAL"), Hexes({kPay}));
  EXPECT_EQ(tagged("legacy", "span.kind", "unspecified"), Hexes({kLegacy}));
  EXPECT_TRUE(tagged("frontend", "span.kind", "unspecified").empty());
  EXPECT_EQ(tagged("frontend", "otel.scope.name", "it.scope"), Hexes({kUser, kCart, kPay}));
  // Two tags: both on one span.
  query::TraceQuery q = Query("frontend");
  q.tags = {{"http.method", "GET"}, {"http.status_code", "404"}};
  EXPECT_EQ(Find(q), Hexes({kUser}));
  q.tags = {{"http.method", "POST"}, {"http.status_code", "404"}};
  EXPECT_TRUE(Find(q).empty());
}

void OpenSearchReaderIT::FindTraceIdsByDurationAndTime() {
  query::TraceQuery q = Query("frontend");
  q.min_duration_ns = 30 * kMs;
  EXPECT_EQ(Find(q), Hexes({kUser, kPay}));
  q.min_duration_ns = 0;
  q.max_duration_ns = 10 * kMs;
  EXPECT_EQ(Find(q), Hexes({kCart}));
  q.min_duration_ns = 40 * kMs;
  q.max_duration_ns = 60 * kMs;
  EXPECT_EQ(Find(q), Hexes({kUser}));
  // pay's spans alone (T0 - 60 s); user's in the next day's index alone.
  q = Query("frontend");
  q.start_ns = kT0 - 120 * kS;
  q.end_ns = kT0 - 30 * kS;
  EXPECT_EQ(Find(q), Hexes({kPay}));
  q.start_ns = kT0 + 61 * kS;
  q.end_ns = kT0 + 63 * kS;
  EXPECT_EQ(Find(q), Hexes({kUser}));
  // The bounds are inclusive, to the microsecond.
  q.start_ns = kT0;
  q.end_ns = kT0;
  EXPECT_EQ(Find(q), Hexes({kCart}));
  q.start_ns = kT0 + 1000;
  q.end_ns = kT0 + 2 * kMs;
  EXPECT_TRUE(Find(q).empty());
  // Over a year: every index by the wildcard.
  q.start_ns = kT0 - 400 * 86400 * kS;
  q.end_ns = kT0 + 400 * 86400 * kS;
  EXPECT_EQ(Find(q), Hexes({kUser, kCart, kPay}));
}

void OpenSearchReaderIT::ServicesAndOperations() {
  std::vector<std::string> services;
  ASSERT_TRUE(Reader().GetServices(&services).ok());
  std::vector<std::string> want = {"db", "frontend", "legacy", kHostileService};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(services, want);

  auto ops = [](const std::string& service, bool any_kind, SpanKind kind) {
    std::vector<query::OperationInfo> out;
    const Status st = Reader().GetOperations(service, any_kind, static_cast<uint8_t>(kind), &out);
    EXPECT_TRUE(st.ok()) << st.message();
    std::vector<std::string> names;
    for (const auto& op : out) {
      names.push_back(op.name);
      EXPECT_EQ(op.kind, any_kind ? 0 : static_cast<uint8_t>(kind)) << op.name;
    }
    return names;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(ops("frontend", true, SpanKind::kUnspecified),
            (V{"GET /cart", "GET /user", "POST /pay", "charge"}));
  EXPECT_EQ(ops("db", true, SpanKind::kUnspecified), (V{"INSERT", "SELECT"}));
  EXPECT_EQ(ops(kHostileService, true, SpanKind::kUnspecified), (V{"op \"x\" \\"}));
  EXPECT_EQ(ops("frontend", false, SpanKind::kServer), (V{"GET /cart", "GET /user", "POST /pay"}));
  EXPECT_EQ(ops("frontend", false, SpanKind::kInternal), (V{"charge"}));
  EXPECT_TRUE(ops("frontend", false, SpanKind::kClient).empty());
  EXPECT_EQ(ops("db", false, SpanKind::kClient), (V{"INSERT", "SELECT"}));
  EXPECT_EQ(ops("legacy", false, SpanKind::kUnspecified), (V{"old"}));
  EXPECT_TRUE(ops("frontend", false, SpanKind::kUnspecified).empty());
  EXPECT_TRUE(ops("nobody", true, SpanKind::kUnspecified).empty());
}

void OpenSearchReaderIT::CountSpansWithAttr() {
  OpenSearchReader reader = Reader();
  auto count = [&](AttrOwner owner, const std::string& key, const std::string& value) {
    uint64_t n = 99;
    const Status st = reader.CountSpansWithAttr(owner, key, value, &n);
    EXPECT_TRUE(st.ok()) << st.message();
    return n;
  };
  EXPECT_EQ(count(AttrOwner::kSpan, "http.method", "GET"), 2u);
  EXPECT_EQ(count(AttrOwner::kSpan, "http.status_code", "200"), 1u);
  EXPECT_EQ(count(AttrOwner::kSpan, "user.note", kHostileValue), 1u);
  EXPECT_EQ(count(AttrOwner::kSpan, "http.method", "PUT"), 0u);
  EXPECT_EQ(count(AttrOwner::kResource, "host.name", "web-1"), 4u);
  EXPECT_EQ(count(AttrOwner::kResource, "host.cores", "8"), 4u);
  EXPECT_EQ(count(AttrOwner::kResource, "service.name", "db"), 3u);
  EXPECT_EQ(count(AttrOwner::kResource, "service.name", kHostileService), 1u);
  uint64_t n = 0;
  EXPECT_EQ(reader.CountSpansWithAttr(AttrOwner::kUserField, "app.channel", "", &n).code(),
            StatusCode::kInvalidArgument);
}

void OpenSearchReaderIT::DependenciesSummedOverTheRange() {
  const std::string prefix = "deps";
  // Two runs of Jaeger's dependency job on 2024-03-10, one the next day.
  const std::string day1 = IndexLayout::Prefixed(prefix).WriteIndex(IndexKind::kDependencies, kT0);
  const std::string day2 =
      IndexLayout::Prefixed(prefix).WriteIndex(IndexKind::kDependencies, kT0 + 86400 * kS);
  Bulk(R"({"index":{"_index":")" + day1 + "\"}}\n" +
       R"({"timestamp":"2024-03-10T06:00:00Z","dependencies":[{"parent":"frontend","child":"db",)"
       R"("callCount":3},{"parent":"frontend","child":"auth","callCount":1}]})"
       "\n"
       R"({"index":{"_index":")" +
       day1 + "\"}}\n" +
       R"({"timestamp":"2024-03-10T18:00:00Z","dependencies":[{"parent":"frontend","child":"db",)"
       R"("callCount":4}]})"
       "\n"
       R"({"index":{"_index":")" +
       day2 + "\"}}\n" +
       R"({"timestamp":"2024-03-11T06:00:00Z","dependencies":[{"parent":"auth","child":"db",)"
       R"("callCount":9}]})"
       "\n");
  ReaderOptions o;
  o.layout = IndexLayout::Prefixed(prefix);
  OpenSearchReader reader = Reader(o);
  std::vector<query::DependencyLink> links;
  const uint64_t day_start = 1710028800;  // 2024-03-10T00:00:00Z
  ASSERT_TRUE(reader.GetDependencies(day_start, day_start + 86400, &links).ok());
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0].parent, "frontend");
  EXPECT_EQ(links[0].child, "auth");
  EXPECT_EQ(links[0].calls, 1u);
  EXPECT_EQ(links[1].child, "db");
  EXPECT_EQ(links[1].calls, 7u);
  // Both days; the range's end is excluded.
  ASSERT_TRUE(reader.GetDependencies(day_start, day_start + 2 * 86400, &links).ok());
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0].parent, "auth");
  EXPECT_EQ(links[0].calls, 9u);
  ASSERT_TRUE(reader.GetDependencies(day_start, day_start + 18 * 3600, &links).ok());
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[1].calls, 3u);
  // No dependency indices at all.
  ASSERT_TRUE(Reader().GetDependencies(day_start, day_start + 86400, &links).ok());
  EXPECT_TRUE(links.empty());
}

void OpenSearchReaderIT::AnEmptyStoreAnswersEmpty() {
  ReaderOptions o;
  o.layout = IndexLayout::Prefixed("nothing");
  OpenSearchReader reader = Reader(o);
  SpanBatch got;
  EXPECT_EQ(reader.GetTrace(kCart, &got).code(), StatusCode::kNotFound);
  EXPECT_TRUE(reader.GetTraces({kCart, kUser}, &got).ok());
  EXPECT_TRUE(got.empty());
  std::vector<TraceId> ids;
  query::TraceQuery q = Query("frontend");
  q.tags = {{"http.method", "GET"}};
  EXPECT_TRUE(reader.FindTraceIds(q, &ids).ok());
  EXPECT_TRUE(ids.empty());
  std::vector<std::string> services;
  EXPECT_TRUE(reader.GetServices(&services).ok());
  EXPECT_TRUE(services.empty());
  std::vector<query::OperationInfo> ops;
  EXPECT_TRUE(reader.GetOperations("frontend", true, 0, &ops).ok());
  EXPECT_TRUE(reader.GetOperations("frontend", false, 2, &ops).ok());
  EXPECT_TRUE(ops.empty());
  uint64_t n = 9;
  EXPECT_TRUE(reader.CountSpansWithAttr(AttrOwner::kSpan, "http.method", "GET", &n).ok());
  EXPECT_EQ(n, 0u);

  // An index that exists but has no mapping for the fields asked about
  // (created without the templates) is empty too.
  net::HttpResult r;
  ASSERT_TRUE(
      client_->Post("/bare-jaeger-span-2024-03-10/_doc?refresh=true", R"({"other":1})", &r).ok());
  ASSERT_EQ(r.status / 100, 2) << r.body;
  o.layout = IndexLayout::Prefixed("bare");
  OpenSearchReader bare = Reader(o);
  EXPECT_EQ(bare.GetTrace(kCart, &got).code(), StatusCode::kNotFound);
  EXPECT_TRUE(bare.FindTraceIds(q, &ids).ok());
  EXPECT_TRUE(ids.empty());
  EXPECT_TRUE(bare.GetOperations("frontend", false, 2, &ops).ok());
  EXPECT_TRUE(bare.CountSpansWithAttr(AttrOwner::kResource, "host.name", "x", &n).ok());
}

void OpenSearchReaderIT::MaxSpanAgeLooksAtRecentDaysOnly() {
  // The corpus is from 2024: a window of the last two days has none of it.
  ReaderOptions o;
  o.max_span_age = std::chrono::hours(48);
  OpenSearchReader recent = Reader(o);
  std::vector<std::string> services;
  ASSERT_TRUE(recent.GetServices(&services).ok());
  EXPECT_TRUE(services.empty());
  SpanBatch got;
  EXPECT_EQ(recent.GetTrace(kCart, &got).code(), StatusCode::kNotFound);
}

// One batch written to OpenSearch (index prefix "counts") and to chDB: both
// readers' CountSpans and ListSpans answer the same, and what the batch
// says (span_counts_corpus.h); in pages of 3 cells and ids too.
void OpenSearchReaderIT::CountsAndListsAsClickHouseDoes() {
  const SpanBatch b = testdata::CountsCorpus();
  Write("counts", b);
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  WriteAll(b, caps);
  ChdbSpanReader ch(*Engine::conn, caps);
  ReaderOptions o;
  o.layout = IndexLayout::Prefixed("counts");
  OpenSearchReader os = Reader(o);
  o.page_size = 3;
  OpenSearchReader paged = Reader(o);
  for (const uint64_t bucket : {uint64_t{3600}, uint64_t{900}, uint64_t{86400}, uint64_t{7}}) {
    SCOPED_TRACE("bucket " + std::to_string(bucket));
    const query::SpanCountQuery q = testdata::CountsQuery(bucket);
    std::vector<query::SpanCountRow> from_ch, from_os, from_paged;
    Status st = ch.CountSpans(q, &from_ch);
    ASSERT_TRUE(st.ok()) << st.message();
    st = os.CountSpans(q, &from_os);
    ASSERT_TRUE(st.ok()) << st.message();
    st = paged.CountSpans(q, &from_paged);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(from_os, from_ch);
    EXPECT_EQ(from_paged, from_ch);
    EXPECT_EQ(from_os, testdata::ExpectedCounts(b, q));
  }
  for (const query::SpanIdQuery& q : testdata::ListQueries()) {
    SCOPED_TRACE(testdata::Describe(q));
    std::vector<query::SpanKey> from_ch, from_os, from_paged;
    Status st = ch.ListSpans(q, &from_ch);
    ASSERT_TRUE(st.ok()) << st.message();
    st = os.ListSpans(q, &from_os);
    ASSERT_TRUE(st.ok()) << st.message();
    st = paged.ListSpans(q, &from_paged);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(from_os, from_ch);
    EXPECT_EQ(from_paged, from_ch);
    EXPECT_EQ(from_os, testdata::ExpectedKeys(b, q));
  }
  // Over the limit: kInvalidArgument from both; at it, every span.
  query::SpanIdQuery q = testdata::ListQueries()[0];
  const size_t n = testdata::ExpectedKeys(b, q).size();
  ASSERT_GT(n, 3u);
  std::vector<query::SpanKey> keys;
  q.limit = static_cast<uint32_t>(n - 1);
  for (OpenSearchReader* r : {&os, &paged}) {
    const Status over = r->ListSpans(q, &keys);
    EXPECT_EQ(over.code(), StatusCode::kInvalidArgument) << over.message();
    EXPECT_NE(over.message().find("more than"), std::string::npos) << over.message();
  }
  EXPECT_EQ(ch.ListSpans(q, &keys).code(), StatusCode::kInvalidArgument);
  q.limit = static_cast<uint32_t>(n);
  ASSERT_TRUE(paged.ListSpans(q, &keys).ok());
  EXPECT_EQ(keys.size(), n);
  // No index for the range, a zero bucket.
  query::SpanCountQuery none = testdata::CountsQuery();
  none.start_ns -= 400ull * 86400 * kS;
  none.end_ns = none.start_ns + 3600 * kS;
  std::vector<query::SpanCountRow> rows;
  ASSERT_TRUE(os.CountSpans(none, &rows).ok());
  EXPECT_TRUE(rows.empty());
  EXPECT_EQ(os.CountSpans(testdata::CountsQuery(0), &rows).code(), StatusCode::kInvalidArgument);
}

// Documents of older writers keep span.kind as a nested tag, not the field
// tag.span@kind: counted and listed the same.
void OpenSearchReaderIT::CountsTheKindOfOlderWriters() {
  const SpanBatch b = testdata::CountsCorpus();
  TemplateOptions t;
  t.index_prefix = "countsold";
  t.shards = 2;
  t.replicas = 0;
  ASSERT_TRUE(
      client_->PostJson("/_template/" + SpanTemplateName(t), SpanTemplate(t), nullptr).ok());
  DocumentWriter w(b);
  std::string bulk;
  size_t moved = 0;
  for (uint32_t s = 0; s < b.span_count(); ++s) {
    std::string doc;
    w.AppendSpan(doc, s);
    const std::string_view kind = SpanKindName(b.spans.kind[s]);
    if (!kind.empty()) {
      const std::string field = R"(,"tag":{"span@kind":")" + std::string(kind) + "\"}";
      const size_t at = doc.find(field);
      ASSERT_NE(at, std::string::npos) << doc;
      doc.erase(at, field.size());
      const size_t tags = doc.find(R"("tags":[)");
      ASSERT_NE(tags, std::string::npos);
      doc.insert(tags + 8,
                 R"({"key":"span.kind","type":"string","value":")" + std::string(kind) + "\"},");
      ++moved;
    }
    bulk += R"({"create":{"_index":")" +
            DailyIndex(SpanIndexBase("countsold"), b.spans.start_ns[s]) + R"(","_id":")" +
            SpanDocumentId(b, s) + "\"}}\n" + doc + "\n";
  }
  ASSERT_GT(moved, 50u);
  Bulk(bulk);
  ReaderOptions o;
  o.layout = IndexLayout::Prefixed("countsold");
  OpenSearchReader os = Reader(o);
  for (const uint64_t bucket : {uint64_t{3600}, uint64_t{900}}) {
    const query::SpanCountQuery q = testdata::CountsQuery(bucket);
    std::vector<query::SpanCountRow> rows;
    const Status st = os.CountSpans(q, &rows);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(rows, testdata::ExpectedCounts(b, q));
  }
  for (const query::SpanIdQuery& q : testdata::ListQueries()) {
    SCOPED_TRACE(testdata::Describe(q));
    std::vector<query::SpanKey> keys;
    const Status st = os.ListSpans(q, &keys);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(keys, testdata::ExpectedKeys(b, q));
  }
}

TEST_F(OpenSearchReaderIT, CountsAndListsSpansAsClickHouseDoes) {
  {
    SCOPED_TRACE("CountsAndListsAsClickHouseDoes");
    CountsAndListsAsClickHouseDoes();
  }
  {
    SCOPED_TRACE("CountsTheKindOfOlderWriters");
    CountsTheKindOfOlderWriters();
  }
}

TEST_F(OpenSearchReaderIT, ReadsTracesById) {
  {
    SCOPED_TRACE("GetTraceReadsWhatWasWritten");
    GetTraceReadsWhatWasWritten();
  }
  {
    SCOPED_TRACE("MissingTraceIsNotFound");
    MissingTraceIsNotFound();
  }
  {
    SCOPED_TRACE("GetTracesKeepsTheOrderOfIds");
    GetTracesKeepsTheOrderOfIds();
  }
  {
    SCOPED_TRACE("TracesPageWithSearchAfterAndStopAtMaxSpans");
    TracesPageWithSearchAfterAndStopAtMaxSpans();
  }
}

TEST_F(OpenSearchReaderIT, FindsTraceIds) {
  {
    SCOPED_TRACE("FindTraceIdsByServiceAndOperationNewestFirst");
    FindTraceIdsByServiceAndOperationNewestFirst();
  }
  {
    SCOPED_TRACE("FindTraceIdsByTags");
    FindTraceIdsByTags();
  }
  {
    SCOPED_TRACE("FindTraceIdsByDurationAndTime");
    FindTraceIdsByDurationAndTime();
  }
}

TEST_F(OpenSearchReaderIT, ServicesOperationsAndCounts) {
  {
    SCOPED_TRACE("ServicesAndOperations");
    ServicesAndOperations();
  }
  {
    SCOPED_TRACE("CountSpansWithAttr");
    CountSpansWithAttr();
  }
}

TEST_F(OpenSearchReaderIT, DependenciesAndEmptyStores) {
  {
    SCOPED_TRACE("DependenciesSummedOverTheRange");
    DependenciesSummedOverTheRange();
  }
  {
    SCOPED_TRACE("AnEmptyStoreAnswersEmpty");
    AnEmptyStoreAnswersEmpty();
  }
  {
    SCOPED_TRACE("MaxSpanAgeLooksAtRecentDaysOnly");
    MaxSpanAgeLooksAtRecentDaysOnly();
  }
}

// No node needed: nothing listens on the port.
TEST(OpenSearchReaderDown, IsUnavailable) {
  OpenSearchOptions o;
  o.urls = {"http://127.0.0.1:" + std::to_string(FreePorts(1)[0])};
  std::unique_ptr<OpenSearchClient> c;
  ASSERT_TRUE(OpenSearchClient::Create(o, &c).ok());
  OpenSearchReader down(std::shared_ptr<OpenSearchClient>(std::move(c)), {});
  SpanBatch got;
  EXPECT_EQ(down.GetTrace(kCart, &got).code(), StatusCode::kUnavailable);
  std::vector<TraceId> ids;
  query::TraceQuery q;
  q.service = "frontend";
  q.start_ns = kT0;
  q.end_ns = kT0 + kS;
  EXPECT_EQ(down.FindTraceIds(q, &ids).code(), StatusCode::kUnavailable);
  std::vector<std::string> services;
  EXPECT_EQ(down.GetServices(&services).code(), StatusCode::kUnavailable);
  std::vector<query::OperationInfo> ops;
  EXPECT_EQ(down.GetOperations("frontend", true, 0, &ops).code(), StatusCode::kUnavailable);
  std::vector<query::DependencyLink> links;
  EXPECT_EQ(down.GetDependencies(0, 86400, &links).code(), StatusCode::kUnavailable);
  uint64_t n = 0;
  EXPECT_EQ(down.CountSpansWithAttr(AttrOwner::kSpan, "a", "b", &n).code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace spanhouse::storage::opensearch
