// The sink factory: which sinks `serve` makes from the configuration, and
// that a kind is made by its line (or refused with the kinds there are).
#include "server/sink_factory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  EXPECT_NE(st.message().find("chdb, clickhouse, null, opensearch"), std::string::npos)
      << st.message();
  // OpenSearch without a cluster: a clear error, not a crash.
  EXPECT_EQ(MakeSink(Spec("opensearch", "opensearch"), ctx, &made).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spanhouse::server
