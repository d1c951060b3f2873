#include "tools/migrate/backfill_plan.h"

#include <gtest/gtest.h>

namespace spanhouse::migrate {
namespace {

const std::string kPath = "bf.checkpoint";

BackfillCheckpoint Fresh() {
  BackfillCheckpoint c;
  c.index = "hist-jaeger-span-*-*-*";
  c.start_us = 1000;
  c.end_us = 2000;
  return c;
}

// The chunks cover [start, end) in order, without gaps or overlaps.
void ExpectCover(const std::vector<BackfillChunk>& chunks, uint64_t start, uint64_t end) {
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.front().start_us, start);
  EXPECT_EQ(chunks.back().end_us, end);
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_LT(chunks[i].start_us, chunks[i].end_us) << i;
    if (i > 0) {
      EXPECT_EQ(chunks[i].start_us, chunks[i - 1].end_us) << i;
    }
  }
}

TEST(BackfillPlan, ACheckpointReadsBackAsWritten) {
  BackfillCheckpoint c = Fresh();
  c.total = 30;
  c.pages = 4;
  c.read = 21;
  c.imported = 17;
  c.already_stored = 3;
  c.invalid = 1;
  c.chunks = {{1000, 1400, 10, 10, "[1390,\"ab\",\"cd\"]", true},
              {1400, 1500, 12, 11, "[1450,\"ef\",\"01\"]", false},
              {1500, 2000, 8, 0, "", false}};
  const std::string text = CheckpointJson(c);
  EXPECT_EQ(text.back(), '\n');
  BackfillCheckpoint back = Fresh();
  ASSERT_TRUE(ParseCheckpoint(text, kPath, &back).ok());
  EXPECT_EQ(back.total, 30u);
  EXPECT_EQ(back.pages, 4u);
  EXPECT_EQ(back.read, 21u);
  EXPECT_EQ(back.imported, 17u);
  EXPECT_EQ(back.already_stored, 3u);
  EXPECT_EQ(back.invalid, 1u);
  EXPECT_FALSE(back.done);
  EXPECT_TRUE(back.single_cursor_after.empty());
  ASSERT_EQ(back.chunks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.chunks[i].start_us, c.chunks[i].start_us);
    EXPECT_EQ(back.chunks[i].end_us, c.chunks[i].end_us);
    EXPECT_EQ(back.chunks[i].spans, c.chunks[i].spans);
    EXPECT_EQ(back.chunks[i].read, c.chunks[i].read);
    EXPECT_EQ(back.chunks[i].after, c.chunks[i].after);
    EXPECT_EQ(back.chunks[i].done, c.chunks[i].done);
  }
  c.done = true;
  ASSERT_TRUE(ParseCheckpoint(CheckpointJson(c), kPath, &back).ok());
  EXPECT_TRUE(back.done);
}

TEST(BackfillPlan, ACheckpointOfAnotherBackfillIsRefused) {
  BackfillCheckpoint c = Fresh();
  c.chunks = {{1000, 2000, 0, 0, "", false}};
  const std::string text = CheckpointJson(c);
  for (auto change : {+[](BackfillCheckpoint& o) { o.index = "other-jaeger-span-*-*-*"; },
                      +[](BackfillCheckpoint& o) { o.start_us = 999; },
                      +[](BackfillCheckpoint& o) { o.end_us = 3000; }}) {
    BackfillCheckpoint other = Fresh();
    change(other);
    Status st = ParseCheckpoint(text, kPath, &other);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("of another backfill"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(kPath), std::string::npos) << st.message();
  }
}

TEST(BackfillPlan, WhatIsNotACheckpointIsRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {"{not json", "is not JSON"},
      {"[1,2]", "not a backfill checkpoint"},
      {R"({"index":"hist-jaeger-span-*-*-*","start_us":1000})", "not a backfill checkpoint"},
  };
  for (const auto& [text, why] : cases) {
    BackfillCheckpoint c = Fresh();
    Status st = ParseCheckpoint(text, kPath, &c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(st.message().find(why), std::string::npos) << text << ": " << st.message();
  }
}

TEST(BackfillPlan, ChunksThatDoNotCoverTheRangeAreDamaged) {
  const std::string head =
      R"({"index":"hist-jaeger-span-*-*-*","start_us":1000,"end_us":2000,"chunks":)";
  const std::string chunks[] = {
      // a gap
      R"([{"start_us":1000,"end_us":1400,"after":null,"done":false},
          {"start_us":1500,"end_us":2000,"after":null,"done":false}])",
      // short of the end
      R"([{"start_us":1000,"end_us":1900,"after":null,"done":false}])",
      // empty
      R"([{"start_us":1000,"end_us":1000,"after":null,"done":false},
          {"start_us":1000,"end_us":2000,"after":null,"done":false}])",
      // a cursor outside its chunk
      R"([{"start_us":1000,"end_us":2000,"after":[2500,"a","b"],"done":false}])",
      // a cursor that is not one
      R"([{"start_us":1000,"end_us":2000,"after":{"at":1},"done":false}])",
      R"([{"start_us":1000,"end_us":2000,"after":["x"],"done":false}])",
      // no done
      R"([{"start_us":1000,"end_us":2000,"after":null}])",
      // none at all
      R"([])",
  };
  for (const std::string& c : chunks) {
    BackfillCheckpoint cp = Fresh();
    Status st = ParseCheckpoint(head + c + "}", kPath, &cp);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c;
    EXPECT_NE(st.message().find("damaged"), std::string::npos) << c << ": " << st.message();
  }
}

TEST(BackfillPlan, TheSingleCursorFormatResumesAfterItsPosition) {
  // What the backfill before chunks wrote.
  const std::string old =
      R"({"from":"opensearch","index":"hist-jaeger-span-*-*-*","start_us":1000,"end_us":2000,)"
      R"("after":[1450,"0af1","77"],"pages":3,"read":21,"imported":20,"already_stored":1,)"
      R"("invalid":0,"done":false})";
  BackfillCheckpoint c = Fresh();
  ASSERT_TRUE(ParseCheckpoint(old, kPath, &c).ok());
  EXPECT_TRUE(c.chunks.empty());
  EXPECT_EQ(c.single_cursor_after, R"([1450,"0af1","77"])");
  EXPECT_EQ(c.read, 21u);
  EXPECT_EQ(c.imported, 20u);
  std::vector<BackfillChunk> chunks =
      PlanChunks(1000, 2000, {{1000, 1300, 5}, {1300, 1600, 5}, {1600, 2000, 5}}, 3);
  ASSERT_EQ(chunks.size(), 3u);
  ASSERT_TRUE(ResumeSingleCursor(c.single_cursor_after, &chunks));
  EXPECT_TRUE(chunks[0].done);  // wholly before the position
  EXPECT_EQ(chunks[0].read, chunks[0].spans);
  EXPECT_FALSE(chunks[1].done);  // holds it: on from it
  EXPECT_EQ(chunks[1].after, c.single_cursor_after);
  EXPECT_FALSE(chunks[2].done);  // after it: from its start
  EXPECT_TRUE(chunks[2].after.empty());
  // At its very start, and a position outside the range.
  std::vector<BackfillChunk> again = PlanChunks(1000, 2000, {}, 1);
  ASSERT_TRUE(ResumeSingleCursor("[1000,\"a\",\"b\"]", &again));
  EXPECT_EQ(again[0].after, "[1000,\"a\",\"b\"]");
  EXPECT_FALSE(ResumeSingleCursor("[2000,\"a\",\"b\"]", &again));
  EXPECT_FALSE(ResumeSingleCursor("[\"a\"]", &again));
  // Done, or not begun: no chunks, no position.
  BackfillCheckpoint begun = Fresh();
  ASSERT_TRUE(ParseCheckpoint(
                  R"({"index":"hist-jaeger-span-*-*-*","start_us":1000,"end_us":2000,"after":null,)"
                  R"("done":true})",
                  kPath, &begun)
                  .ok());
  EXPECT_TRUE(begun.done);
  EXPECT_TRUE(begun.single_cursor_after.empty());
  BackfillCheckpoint bad = Fresh();
  Status st = ParseCheckpoint(
      R"({"index":"hist-jaeger-span-*-*-*","start_us":1000,"end_us":2000,"after":"x"})", kPath,
      &bad);
  EXPECT_NE(st.message().find("damaged"), std::string::npos) << st.message();
}

TEST(BackfillPlan, ChunksHoldAboutEqualSpans) {
  std::vector<SpanCount> buckets;
  for (uint64_t b = 0; b < 100; ++b) buckets.push_back({1000 + b * 10, 1010 + b * 10, 10});
  std::vector<BackfillChunk> chunks = PlanChunks(1000, 2000, buckets, 8);
  ExpectCover(chunks, 1000, 2000);
  ASSERT_EQ(chunks.size(), 8u);
  uint64_t sum = 0;
  for (const BackfillChunk& k : chunks) {
    EXPECT_GE(k.spans, 120u);
    EXPECT_LE(k.spans, 130u);
    EXPECT_TRUE(k.after.empty());
    EXPECT_FALSE(k.done);
    sum += k.spans;
  }
  EXPECT_EQ(sum, 1000u);
}

TEST(BackfillPlan, AnUnevenHistoryIsCutWhereItsSpansAre) {
  // A quiet range with one busy stretch: the chunks are short there.
  std::vector<SpanCount> buckets = {{1000, 1010, 1}};
  for (uint64_t b = 0; b < 10; ++b) buckets.push_back({1500 + b, 1501 + b, 100});
  buckets.push_back({1990, 2000, 1});
  std::vector<BackfillChunk> chunks = PlanChunks(1000, 2000, buckets, 5);
  ExpectCover(chunks, 1000, 2000);
  ASSERT_EQ(chunks.size(), 5u);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_GE(chunks[i].end_us, 1500u);
    EXPECT_LE(chunks[i].end_us, 1510u);
  }
  // A bucket is not split: one bucket of everything is one chunk, with the rest around it.
  chunks = PlanChunks(1000, 2000, {{1200, 1210, 5000}}, 8);
  ExpectCover(chunks, 1000, 2000);
  EXPECT_LE(chunks.size(), 2u);
}

TEST(BackfillPlan, NothingToReadIsOneChunk) {
  std::vector<BackfillChunk> chunks = PlanChunks(1000, 2000, {}, 32);
  ExpectCover(chunks, 1000, 2000);
  EXPECT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].spans, 0u);
  chunks = PlanChunks(1000, 2000, {{1000, 2000, 7}}, 0);
  ExpectCover(chunks, 1000, 2000);
  EXPECT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].spans, 7u);
}

TEST(BackfillPlan, BucketsOutsideTheRangeOrOutOfOrderAreLeftOut) {
  // Before the range, then one out of order; the last one past the end is cut short there.
  std::vector<BackfillChunk> chunks =
      PlanChunks(1000, 2000, {{500, 600, 9}, {1100, 1200, 4}, {1050, 1060, 4}, {1900, 2500, 4}}, 4);
  ExpectCover(chunks, 1000, 2000);
  uint64_t sum = 0;
  for (const BackfillChunk& k : chunks) sum += k.spans;
  EXPECT_EQ(sum, 8u);
}

TEST(BackfillPlan, ACursorsStartTimeIsItsFirstValue) {
  uint64_t at = 0;
  EXPECT_TRUE(CursorStartTime(R"([1733000000123456,"abc","def"])", &at));
  EXPECT_EQ(at, 1733000000123456u);
  EXPECT_FALSE(CursorStartTime("[]", &at));
  EXPECT_FALSE(CursorStartTime(R"(["1733","a"])", &at));
  EXPECT_FALSE(CursorStartTime("[-1]", &at));
  EXPECT_FALSE(CursorStartTime("{}", &at));
  EXPECT_FALSE(CursorStartTime("", &at));
}

}  // namespace
}  // namespace spanhouse::migrate
