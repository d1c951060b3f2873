// ChdbSpanReader's CountSpans and ListSpans (what `spanhouse reconcile`
// compares with OpenSearch) on chDB and on Debian's clickhouse-server 18.16
// (UInt64 nanosecond starts, no query parameters): the answers computed
// from the batch, the services as Jaeger's documents name them.
// opensearch_reader_test.cc checks the OpenSearch reader against the same.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "integration/clickhouse_server.h"
#include "integration/engine.h"
#include "integration/span_counts_corpus.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {
namespace {

using testdata::CountsCorpus;
using testdata::CountsQuery;
using testdata::ExpectedCounts;
using testdata::ExpectedKeys;

// Every check on one reader of CountsCorpus().
void CheckReader(query::SpanReader& reader, const SpanBatch& b) {
  for (const uint64_t bucket : {uint64_t{3600}, uint64_t{900}, uint64_t{86400}, uint64_t{7}}) {
    SCOPED_TRACE("bucket " + std::to_string(bucket));
    std::vector<query::SpanCountRow> got;
    const Status st = reader.CountSpans(CountsQuery(bucket), &got);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(got, ExpectedCounts(b, CountsQuery(bucket)));
  }
  // Each of Jaeger's names for a missing service is there.
  std::vector<query::SpanCountRow> rows;
  ASSERT_TRUE(reader.CountSpans(CountsQuery(), &rows).ok());
  uint64_t total = 0;
  std::set<std::string> services;
  for (const auto& r : rows) {
    total += r.spans;
    services.insert(r.service);
  }
  // 70 of the 84 every 5 minutes (from 10 min to 5 h 55 min), 8 on the edges.
  EXPECT_EQ(total, 78u);
  EXPECT_EQ(services,
            (std::set<std::string>{"frontend", "db", "missing-service-name", "empty-service-name",
                                   "service-name-wrong-type", testdata::CountsHostileService()}));

  for (const query::SpanIdQuery& q : testdata::ListQueries()) {
    SCOPED_TRACE(testdata::Describe(q));
    std::vector<query::SpanKey> keys;
    const Status st = reader.ListSpans(q, &keys);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(keys, ExpectedKeys(b, q));
  }
  // Over the limit: kInvalidArgument; at it, every span.
  query::SpanIdQuery q = testdata::ListQueries()[0];
  const size_t n = ExpectedKeys(b, q).size();
  ASSERT_GT(n, 3u);
  q.limit = static_cast<uint32_t>(n - 1);
  std::vector<query::SpanKey> keys;
  const Status over = reader.ListSpans(q, &keys);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("more than"), std::string::npos) << over.message();
  EXPECT_TRUE(keys.empty());
  q.limit = static_cast<uint32_t>(n);
  ASSERT_TRUE(reader.ListSpans(q, &keys).ok());
  EXPECT_EQ(keys.size(), n);

  // An empty range, a zero bucket, an empty service.
  query::SpanCountQuery none = CountsQuery();
  none.end_ns = none.start_ns;
  ASSERT_TRUE(reader.CountSpans(none, &rows).ok());
  EXPECT_TRUE(rows.empty());
  none = CountsQuery(0);
  EXPECT_EQ(reader.CountSpans(none, &rows).code(), StatusCode::kInvalidArgument);
  q.service = "";
  ASSERT_TRUE(reader.ListSpans(q, &keys).ok());
  EXPECT_TRUE(keys.empty());
}

TEST(SpanCounts, ChdbCountsAndListsSpansAsJaegersDocumentsNameThem) {
  Reset();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  const SpanBatch b = CountsCorpus();
  WriteAll(b, caps);
  ChdbSpanReader reader(*Engine::conn, caps);
  CheckReader(reader, b);
  // The row limit of the reader holds for the counts too.
  ReaderLimits limits;
  limits.max_rows = 3;
  ChdbSpanReader small(*Engine::conn, caps, limits);
  std::vector<query::SpanCountRow> rows;
  EXPECT_EQ(small.CountSpans(CountsQuery(), &rows).code(), StatusCode::kInvalidArgument);
}

// The same on 18.16: start_time a UInt64 of nanoseconds, every value
// inlined, the resources in their own table as the remote writer puts them.
TEST(SpanCounts, ClickHouse18CountsAndListsTheSame) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("spanhouse-ch-counts-" + std::to_string(::getpid())))
                              .string();
  {
    ClickHouseServer server(dir);
    ASSERT_TRUE(server.running());
    auto c = server.Connect();
    ASSERT_NE(c, nullptr);
    SchemaOptions opts;
    opts.database = "rc_counts";
    Capabilities caps;
    Status st = EnsureSchema(*c, &caps, opts);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_FALSE(caps.datetime64) << c->version();
    const SpanBatch b = CountsCorpus();
    const std::vector<uint64_t> ids = ResourceIds(b);
    std::vector<SpanRow> rows;
    for (uint32_t i = 0; i < b.span_count(); ++i) rows.push_back({&b, i, ids[b.spans.resource[i]]});
    SortByTableKey(&rows);
    EncodedBlock block;
    EncodeSpanRows(rows, caps, &block, UserFields::Default(),
                   caps.json_type ? UserFieldValues::kMarked : UserFieldValues::kInArrays);
    std::string data;
    block.AppendTo(&data);
    st = c->Insert("INSERT INTO rc_counts.spans FORMAT Native", std::move(data));
    ASSERT_TRUE(st.ok()) << st.message();
    std::string resources;
    std::vector<uint32_t> all;
    for (uint32_t r = 0; r < b.resources.attrs.size(); ++r) all.push_back(r);
    EncodeResourceBlock(b, all, ids, 1700000000, caps, &resources);
    st = c->Insert("INSERT INTO rc_counts.resources FORMAT Native", std::move(resources));
    ASSERT_TRUE(st.ok()) << st.message();
    ChdbSpanReader reader(*c, caps, {}, {}, "rc_counts");
    CheckReader(reader, b);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spanhouse::storage
