// The cluster's sharding function: SipHash-2-4 as ClickHouse's sipHash64
// computes it (values read from a real 18.16 server and the reference
// vectors of the SipHash paper's key-less use), and shards spread evenly.
#include "storage/clickhouse/cluster_shard.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spanhouse::storage {
namespace {

TEST(ClusterShard, SipHashIsClickHousesSipHash64) {
  // SELECT sipHash64(unhex('0102030405060708090a0b0c0d0e0f10')), and of ''
  // (ClickHouse 18.16).
  std::string id;
  for (int i = 1; i <= 16; ++i) id.push_back(static_cast<char>(i));
  EXPECT_EQ(SipHash64(id), 1919075382190022674ull);
  EXPECT_EQ(SipHash64(""), 2202906307356721367ull);
}

TEST(ClusterShard, ATraceHasOneShardAndShardsShareTheTraces) {
  EXPECT_EQ(ClusterShardOf(TraceId{}, 1), 0u);
  std::vector<int> count(3);
  TraceId id{};
  for (uint32_t i = 0; i < 30000; ++i) {
    id[3] = static_cast<uint8_t>(i);
    id[9] = static_cast<uint8_t>(i >> 8);
    id[15] = static_cast<uint8_t>(i >> 16);
    const uint32_t s = ClusterShardOf(id, 3);
    ASSERT_LT(s, 3u);
    ASSERT_EQ(ClusterShardOf(id, 3), s);
    ++count[s];
  }
  for (int c : count) EXPECT_NEAR(c, 10000, 500);
}

}  // namespace
}  // namespace spanhouse::storage
