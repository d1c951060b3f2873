// The reader's answer to the engine's errors: its time and row limits become
// messages a client can act on, never the engine's text.
#include "storage/clickhouse/chdb_span_reader.h"

#include "storage/clickhouse/schema.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace spanhouse::storage {
namespace {

TEST(ReaderError, LimitsBecomeClientMessages) {
  const ReaderLimits limits{.max_execution_s = 7, .max_spans = 10, .max_rows = 20};
  Status st = ReaderError(
      Status::Internal("Code: 159. DB::Exception: Timeout exceeded: elapsed 7.1 seconds, maximum: "
                       "7. (TIMEOUT_EXCEEDED) SELECT secret FROM spanhouse.spans"),
      limits, 20);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("time limit (7 s)"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("SELECT"), std::string::npos) << st.message();
  st = ReaderError(Status::Internal("Code: 396. DB::Exception: Limit for result exceeded, max "
                                    "rows: 20.00 (TOO_MANY_ROWS_OR_BYTES)"),
                   limits, 20);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);  // the request asked too much: 400
  EXPECT_NE(st.message().find("limit of 20 rows"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("DB::Exception"), std::string::npos) << st.message();
}

TEST(ReaderError, OtherErrorsKeepTheirTextForTheLog) {
  const ReaderLimits limits;
  Status st = ReaderError(Status::Internal("Code: 62. DB::Exception: Syntax error"), limits, 1);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.message(), "Code: 62. DB::Exception: Syntax error");
  st = ReaderError(Status::Unavailable("chdb connection is closed"), limits, 1);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
}

// A lookup's seconds: ranges in any order, overlapping or adjacent ones
// joined, a range cut to 48 hours.
// A column already stored in the type the reader reads is read without a
// CAST; one stored otherwise (or of unknown type) keeps it.
TEST(SpanReadQuery, CastsOnlyColumnsStoredInAnotherType) {
  const Capabilities caps = Capabilities::FromVersion("26.5.1.1");
  StorageLayout two_ids;
  two_ids.span_ids_column = false;
  const std::string all = SpanReadQuery(caps, two_ids, "1");
  EXPECT_NE(all.find("CAST(span_id AS FixedString(8)) AS span_id"), std::string::npos) << all;
  EXPECT_NE(all.find("CAST(kind AS UInt8) AS kind"), std::string::npos) << all;
  const std::string some = SpanReadQuery(caps, two_ids, "1", kDatabase,
                                         {{"span_id", "FixedString(8)"}, {"kind", "UInt16"}});
  EXPECT_EQ(some.find("CAST(span_id"), std::string::npos) << some;
  EXPECT_NE(some.find("SELECT CAST(timestamp AS DateTime) AS timestamp"), std::string::npos)
      << some;  // a type not given: CAST
  EXPECT_NE(some.find(", span_id, "), std::string::npos) << some;
  EXPECT_NE(some.find("CAST(kind AS UInt8) AS kind"), std::string::npos) << some;
}

// Where the table keeps both ids in span_ids, that column is read as
// stored, not its two aliases; and the engine is not asked to sort.
TEST(SpanReadQuery, ReadsSpanIdsAsStoredAndUnsorted) {
  const Capabilities caps = Capabilities::FromVersion("26.5.1.1");
  const std::string q = SpanReadQuery(caps, {}, "1");
  EXPECT_NE(q.find(", span_ids, "), std::string::npos) << q;
  EXPECT_EQ(q.find("span_id,"), std::string::npos) << q;
  EXPECT_EQ(q.find("parent_span_id"), std::string::npos) << q;
  EXPECT_EQ(q.find("ORDER BY"), std::string::npos) << q;
}

// A one-trace read gets the point-read settings where the engine has them;
// a read of several traces, and an older engine, do not.
TEST(SpanReadQuery, OneTraceReadOnOneThreadWhereTheEngineHasTheSettings) {
  const Capabilities now = Capabilities::FromVersion("26.5.1.1");
  const std::string one = SpanReadQuery(now, {}, "1", kDatabase, {}, true);
  EXPECT_NE(one.find(std::string(kOneTraceReadSettings)), std::string::npos) << one;
  EXPECT_NE(one.find(std::string(kFlattenedJsonSetting) + " = 1, max_threads = 1"),
            std::string::npos)
      << one;
  EXPECT_EQ(one.find(" SETTINGS "), one.rfind(" SETTINGS ")) << one;  // one clause
  const std::string many = SpanReadQuery(now, {}, "1", kDatabase, {}, false);
  EXPECT_EQ(many.find("max_threads"), std::string::npos) << many;
  const std::string old =
      SpanReadQuery(Capabilities::FromVersion("24.8.1.1"), {}, "1", kDatabase, {}, true);
  EXPECT_EQ(old.find("max_threads"), std::string::npos) << old;
  EXPECT_EQ(SpanReadQuery(Capabilities::FromVersion("18.16.1"), {}, "1", kDatabase, {}, true)
                .find(" SETTINGS "),
            std::string::npos);
}

// GetTraces' order: traces as the ids were asked, spans by start time then
// span id; a span of another trace is left out.
TEST(TraceOrder, TracesAsAskedSpansByStartThenId) {
  SpanBatch b;
  const uint32_t r = b.AddResource();
  const uint32_t sc = b.AddScope();
  auto add = [&](uint8_t trace, uint64_t start, uint8_t id) {
    const uint32_t i = b.AddSpan(r, sc);
    b.spans.trace_id[i] = TraceId{trace};
    b.spans.start_ns[i] = start;
    b.spans.span_id[i] = SpanId{id};
  };
  add(1, 30, 1);  // 0
  add(2, 10, 2);  // 1
  add(1, 10, 9);  // 2
  add(3, 5, 3);   // 3: not asked for
  add(1, 10, 4);  // 4
  add(2, 5, 5);   // 5
  EXPECT_EQ(TraceOrder(b, {TraceId{2}, TraceId{1}}), (std::vector<uint32_t>{5, 1, 4, 2, 0}));
  EXPECT_EQ(TraceOrder(b, {TraceId{1}}), (std::vector<uint32_t>{4, 2, 0}));
  EXPECT_TRUE(TraceOrder(b, {}).empty());
}

TEST(TraceRangeQuery, OneIdIsComparedWithoutASet) {
  const std::string one = TraceRangeQuery({}, kDatabase, true, /*one_id=*/true);
  EXPECT_NE(one.find("= toFixedString(substring(unhex({id:String}), 1, 8), 8)"), std::string::npos)
      << one;
  EXPECT_EQ(one.find("arrayJoin"), std::string::npos) << one;
  const std::string many = TraceRangeQuery({}, kDatabase, true);
  EXPECT_NE(many.find("IN (SELECT"), std::string::npos) << many;
}

TEST(TraceSecondsCondition, JoinsOverlappingAndAdjacentRanges) {
  EXPECT_EQ(TraceSecondsCondition({}), "0");
  EXPECT_EQ(TraceSecondsCondition({{100, 102}}), "(timestamp BETWEEN 100 AND 102)");
  EXPECT_EQ(TraceSecondsCondition({{200, 205}, {100, 102}, {103, 104}, {101, 101}, {204, 210}}),
            "(timestamp BETWEEN 100 AND 104 OR timestamp BETWEEN 200 AND 210)");
  // A last second before the first (a clock gone back) reads the first.
  EXPECT_EQ(TraceSecondsCondition({{300, 200}}), "(timestamp BETWEEN 300 AND 300)");
  EXPECT_EQ(TraceSecondsCondition({{1000, 1000 + 100 * 3600}}),
            fmt::format("(timestamp BETWEEN 1000 AND {})", 1000 + 48 * 3600));
}

// Past max_ranges the closest ranges are joined first, and no more than
// needed.
TEST(TraceSecondsCondition, JoinsTheClosestRangesPastTheLimit) {
  const std::vector<std::pair<uint64_t, uint64_t>> r = {{0, 0},     {10, 10},   {12, 12},
                                                        {100, 100}, {103, 103}, {1000, 1000}};
  EXPECT_EQ(TraceSecondsCondition(r, 4),
            "(timestamp BETWEEN 0 AND 0 OR timestamp BETWEEN 10 AND 12 OR timestamp BETWEEN 100 "
            "AND 103 OR timestamp BETWEEN 1000 AND 1000)");
  EXPECT_EQ(TraceSecondsCondition(r, 1), "(timestamp BETWEEN 0 AND 1000)");
  // Equal gaps: only as many joined as needed.
  EXPECT_EQ(TraceSecondsCondition({{0, 0}, {5, 5}, {10, 10}, {15, 15}}, 3),
            "(timestamp BETWEEN 0 AND 5 OR timestamp BETWEEN 10 AND 10 OR timestamp BETWEEN 15 "
            "AND 15)");
  // The smallest gap joined even after equal larger ones.
  EXPECT_EQ(TraceSecondsCondition({{0, 0}, {5, 5}, {10, 10}, {12, 12}}, 2),
            "(timestamp BETWEEN 0 AND 5 OR timestamp BETWEEN 10 AND 12)");
}

}  // namespace
}  // namespace spanhouse::storage
