// The durable queue's record payloads (records.h): sealed blocks and
// acknowledgements round-trip with their sink's name, the older unnamed
// formats still read (as the embedded sink's), bad lengths are refused, and a
// request record reads back as the spans it was appended with.
#include <gtest/gtest.h>

#include <string>

#include "codec/otlp_encode.h"
#include "pipeline/durable/records.h"
#include "testdata/legacy_records.h"
#include "testdata/sample_batch.h"

namespace spanhouse::pipeline::durable {
namespace {

// The embedded sink's key for shard 2 of 3, day 20000 (as older logs held it).
std::string Key() {
  std::string k;
  for (uint32_t v : {2u, 3u, 20000u}) PutLe(&k, v, 4);
  return k;
}

BlockRecord Sample() {
  BlockRecord b;
  b.sink = "chdb:mirror";
  b.key = Key();
  b.lsns = {5, 7, 1ull << 40};
  return b;
}

TEST(BlockRecord, RoundTripsWithItsSinkAndKeyAndRejectsBadLengths) {
  BlockRecord b = Sample();
  BlockRecord d;
  ASSERT_TRUE(d.Decode(b.Encode(), RecordKind::kKeyedBlock));
  EXPECT_EQ(d.sink, "chdb:mirror");
  EXPECT_EQ(d.key, Key());
  EXPECT_EQ(d.lsns, b.lsns);
  EXPECT_EQ(d.chunks, 1u);
  std::string bad = b.Encode();
  bad.pop_back();
  EXPECT_FALSE(d.Decode(bad, RecordKind::kKeyedBlock));
  EXPECT_FALSE(d.Decode("short", RecordKind::kKeyedBlock));
  EXPECT_FALSE(d.Decode("", RecordKind::kKeyedBlock));
  // An insert of several spooled blocks says how many.
  b.chunks = 4;
  const std::string four = b.Encode();
  ASSERT_TRUE(d.Decode(four, RecordKind::kKeyedBlock));
  EXPECT_EQ(d.chunks, 4u);
  EXPECT_EQ(d.lsns, b.lsns);
  std::string zero = four;
  zero[zero.size() - 4] = 0;
  EXPECT_FALSE(d.Decode(zero, RecordKind::kKeyedBlock));
  // Any key of the sink's: opaque to the queue.
  b.key = "day:20000";
  ASSERT_TRUE(d.Decode(b.Encode(), RecordKind::kKeyedBlock));
  EXPECT_EQ(d.key, "day:20000");
  b.key.clear();
  ASSERT_TRUE(d.Decode(b.Encode(), RecordKind::kKeyedBlock));
  EXPECT_EQ(d.key, "");
}

TEST(BlockRecord, OlderBlocksCarryTheEmbeddedSinksKey) {
  BlockRecord b = Sample();
  b.chunks = 2;
  // kSinkBlock, as older builds wrote it: the name, then the 12-byte key.
  const std::string named = testdata::LegacyBlockPayload(b, true);
  BlockRecord d;
  ASSERT_TRUE(d.Decode(named, RecordKind::kSinkBlock));
  EXPECT_EQ(d.sink, "chdb:mirror");
  EXPECT_EQ(d.key, Key());
  EXPECT_EQ(d.lsns, b.lsns);
  EXPECT_EQ(d.chunks, 2u);
  std::string bad = named;
  bad.pop_back();
  EXPECT_FALSE(d.Decode(bad, RecordKind::kSinkBlock));
  // kBlock: the same fields without the name, of the embedded sink.
  const std::string legacy = testdata::LegacyBlockPayload(b, false);
  EXPECT_EQ(legacy.size(), 20u + 3 * 8);
  ASSERT_TRUE(d.Decode(legacy, RecordKind::kBlock));
  EXPECT_EQ(d.sink, kLegacySink);
  EXPECT_EQ(d.lsns, b.lsns);
  EXPECT_EQ(d.chunks, 2u);
  EXPECT_EQ(d.key, Key());
  b.chunks = 1;  // one: no chunks field
  ASSERT_TRUE(d.Decode(testdata::LegacyBlockPayload(b, false), RecordKind::kBlock));
  EXPECT_EQ(d.chunks, 1u);
}

TEST(AckRecord, RoundTripsAndReadsTheOlderFormat) {
  AckRecord a;
  a.sink = "null";
  a.block_lsns = {3, 9, 1ull << 41};
  AckRecord d;
  ASSERT_TRUE(d.Decode(a.Encode(), true));
  EXPECT_EQ(d.sink, "null");
  EXPECT_EQ(d.block_lsns, a.block_lsns);
  AckRecord empty;
  empty.sink = "x";
  ASSERT_TRUE(d.Decode(empty.Encode(), true));
  EXPECT_TRUE(d.block_lsns.empty());
  std::string bad = a.Encode();
  bad.pop_back();
  EXPECT_FALSE(d.Decode(bad, true));
  EXPECT_FALSE(d.Decode("abc", true));
  // kReplayed, as older builds wrote it (blocks stored before an upgrade).
  ASSERT_TRUE(d.Decode(a.Encode().substr(1 + a.sink.size()), /*named=*/false));
  EXPECT_EQ(d.sink, kLegacySink);
  EXPECT_EQ(d.block_lsns, a.block_lsns);
}

TEST(DedupToken, DiffersByEpochAndBlock) {
  EXPECT_NE(DedupToken(1, 5), DedupToken(2, 5));
  EXPECT_NE(DedupToken(1, 5), DedupToken(1, 6));
  EXPECT_EQ(DedupToken(1, 5), DedupToken(1, 5));
}

TEST(RequestRecord, ReadsBackTheSpansItWasAppendedWith) {
  const SpanBatch sent = testdata::SampleBatch();
  const std::string body = codec::EncodeOtlpProto(sent);
  const std::string head = EncodedRequestHead(0, codec::BodyFormat::kOtlpProto);
  SpanBatch back;
  ASSERT_TRUE(DecodeRequestRecord(RecordKind::kEncodedRequest, head + body, nullptr, &back).ok());
  std::string why;
  EXPECT_TRUE(back.LogicallyEquals(sent, &why)) << why;
  // kRequest (older): the receive time, then OTLP protobuf; kSpans: no time.
  SpanBatch old;
  ASSERT_TRUE(
      DecodeRequestRecord(RecordKind::kRequest, head.substr(0, 8) + body, nullptr, &old).ok());
  EXPECT_TRUE(old.LogicallyEquals(sent, &why)) << why;
  SpanBatch oldest;
  ASSERT_TRUE(DecodeRequestRecord(RecordKind::kSpans, body, nullptr, &oldest).ok());
  EXPECT_TRUE(oldest.LogicallyEquals(sent, &why)) << why;
  // A body format this build does not know, a record too short, not a request.
  std::string unknown = head + body;
  unknown[8] = 9;
  SpanBatch bad;
  EXPECT_FALSE(DecodeRequestRecord(RecordKind::kEncodedRequest, unknown, nullptr, &bad).ok());
  EXPECT_FALSE(DecodeRequestRecord(RecordKind::kRequest, "1234", nullptr, &bad).ok());
  EXPECT_FALSE(DecodeRequestRecord(RecordKind::kSinkBlock, body, nullptr, &bad).ok());
}

TEST(RequestRecord, AViewedRequestCarriesTheNodesUpWhenItCame) {
  const SpanBatch sent = testdata::SampleBatch();
  const std::string body = codec::EncodeOtlpProto(sent);
  std::string head = EncodedRequestHead(7, codec::BodyFormat::kOtlpProto);
  PutLe(&head, 0b1011, 8);
  ASSERT_EQ(head.size(), kViewedRequestHeadBytes);
  ASSERT_TRUE(IsRequestRecord(RecordKind::kViewedRequest));
  SpanBatch back;
  ASSERT_TRUE(DecodeRequestRecord(RecordKind::kViewedRequest, head + body, nullptr, &back).ok());
  std::string why;
  EXPECT_TRUE(back.LogicallyEquals(sent, &why)) << why;
  EXPECT_EQ(back.peer_view, 0b1011u);
  // Without a view (a single node) and as an import (every span stored where it was taken).
  SpanBatch plain;
  ASSERT_TRUE(DecodeRequestRecord(RecordKind::kEncodedRequest,
                                  EncodedRequestHead(7, codec::BodyFormat::kOtlpProto) + body,
                                  nullptr, &plain)
                  .ok());
  EXPECT_EQ(plain.peer_view, 0u);
  SpanBatch imported;
  ASSERT_TRUE(
      DecodeRequestRecord(RecordKind::kTargetedRequest,
                          TargetedRequestHead(7, codec::BodyFormat::kOtlpProto, {"chdb"}) + body,
                          nullptr, &imported)
          .ok());
  EXPECT_EQ(imported.peer_view, SpanBatch::kViewHere);
  // Cut inside the view.
  SpanBatch bad;
  EXPECT_FALSE(
      DecodeRequestRecord(RecordKind::kViewedRequest, head.substr(0, 12), nullptr, &bad).ok());
}

}  // namespace
}  // namespace spanhouse::pipeline::durable
