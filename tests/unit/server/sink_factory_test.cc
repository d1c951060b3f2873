// The sink factory: which sinks `serve` makes from the configuration, and
// that a kind is made by its line (or refused with the kinds there are).
#include "server/sink_factory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "testdata/sample_batch.h"

namespace spanhouse::server {
namespace {

std::vector<std::string> Names(const std::vector<SinkSpec>& specs) {
  std::vector<std::string> out;
  for (const auto& s : specs) out.push_back(s.kind + "/" + s.name);
  return out;
}

TEST(SinkFactory, ServeWritesToThePrimaryStoreThenTheSecondary) {
  Config cfg;
  EXPECT_EQ(Names(ServeSinks(cfg, 1)), (std::vector<std::string>{"chdb/chdb"}));
  cfg.secondary.type = "opensearch";
  EXPECT_EQ(Names(ServeSinks(cfg, 1)),
            (std::vector<std::string>{"chdb/chdb", "opensearch/opensearch"}));
  cfg.secondary.type = "chdb";
  cfg.secondary.database = "other";
  EXPECT_EQ(Names(ServeSinks(cfg, 1)), (std::vector<std::string>{"chdb/chdb", "chdb/chdb:other"}));
  cfg.secondary.type = "";
  cfg.writer.sink = "null";
  EXPECT_EQ(Names(ServeSinks(cfg, 1)), (std::vector<std::string>{"null/null"}));
}

TEST(SinkFactory, OneSinkPerClusterShard) {
  Config cfg;
  cfg.storage.engine = "clickhouse";
  cfg.clickhouse.database = "traces";
  const std::vector<SinkSpec> specs = ServeSinks(cfg, 3);
  EXPECT_EQ(Names(specs), (std::vector<std::string>{"clickhouse/clickhouse-shard1",
                                                    "clickhouse/clickhouse-shard2",
                                                    "clickhouse/clickhouse-shard3"}));
  for (uint32_t s = 0; s < 3; ++s) {
    EXPECT_EQ(specs[s].shard, s);
    EXPECT_EQ(specs[s].shards, 3u);
    EXPECT_EQ(specs[s].database, "traces");
  }
  EXPECT_EQ(Names(ServeSinks(cfg, 1)), (std::vector<std::string>{"clickhouse/clickhouse"}));
}

TEST(SinkFactory, AKindIsMadeByItsLineOrRefusedByName) {
  Config cfg;
  SinkContext ctx;
  ctx.cfg = &cfg;
  std::unique_ptr<sink::Sink> made;
  ASSERT_TRUE(MakeSink(Spec("null", "nothing"), ctx, &made).ok());
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(made->name(), "nothing");
  const Status st = MakeSink(Spec("kafka", "k"), ctx, &made);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unknown kind 'kafka'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("chdb, clickhouse, null, opensearch, peer"), std::string::npos)
      << st.message();
  // OpenSearch without a cluster: a clear error, not a crash.
  EXPECT_EQ(MakeSink(Spec("opensearch", "opensearch"), ctx, &made).code(),
            StatusCode::kInvalidArgument);
}

TEST(SinkFactory, EveryOtherPeerIsASinkOfItsOwnTraces) {
  Config cfg;
  cfg.node.id = "b";
  cfg.peers.nodes =
      "a=127.0.0.1:1=http://127.0.0.1:2;b=127.0.0.1:3=http://127.0.0.1:4;"
      "c=127.0.0.1:5=http://127.0.0.1:6";
  std::vector<std::string> names;
  for (const SinkSpec& s : ServeSinks(cfg, 1)) names.push_back(s.kind + "/" + s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"chdb/chdb", "peer/peer:a", "peer/peer:c"}));
  std::vector<peers::PeerNode> nodes;
  std::string why;
  ASSERT_TRUE(peers::ParsePeerNodes(cfg.peers.nodes, &nodes, &why)) << why;
  peers::PeerRing ring(nodes, 1);
  SinkContext ctx;
  ctx.cfg = &cfg;
  ctx.dir = ::testing::TempDir();
  std::unique_ptr<sink::Sink> made;
  SinkSpec spec = Spec("peer", "peer:c");
  // Without the ring, or naming this node or no node: a clear error.
  EXPECT_EQ(MakeSink(spec, ctx, &made).code(), StatusCode::kInvalidArgument);
  ctx.ring = &ring;
  spec.peer = "b";
  EXPECT_EQ(MakeSink(spec, ctx, &made).code(), StatusCode::kInvalidArgument);
  spec.peer = "c";
  ASSERT_TRUE(MakeSink(spec, ctx, &made).ok());
  // It takes the traces c owns, and only those.
  SpanBatch b = testdata::SampleBatch(30);
  std::vector<uint32_t> idx;
  ASSERT_TRUE(made->Select(b, &idx));
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    const bool picked = std::find(idx.begin(), idx.end(), i) != idx.end();
    EXPECT_EQ(picked, ring.Owner(b.spans.trace_id[i]) == 2) << i;
  }
  EXPECT_FALSE(idx.empty());
}

}  // namespace
}  // namespace spanhouse::server
