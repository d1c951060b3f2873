// Trace ownership over the peers list: every node computes the same owner,
// the share is even, and a node going down moves only its own traces.
#include "peers/ring.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <thread>
#include <vector>

#include "peers/health.h"

namespace spanhouse::peers {
namespace {

std::vector<PeerNode> Nodes(int n) {
  std::vector<PeerNode> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({"node-" + std::to_string(i), "127.0.0.1:" + std::to_string(4317 + i),
                   "http://127.0.0.1:" + std::to_string(16686 + i)});
  }
  return out;
}

std::vector<TraceId> Traces(size_t n, uint32_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::vector<TraceId> out(n);
  for (auto& t : out) {
    for (auto& b : t) b = static_cast<uint8_t>(rng());
  }
  return out;
}

TEST(PeerRing, EveryNodeNamesTheSameOwner) {
  std::vector<PeerRing> rings;
  for (size_t self = 0; self < 3; ++self) rings.emplace_back(Nodes(3), self);
  size_t owned_here = 0;
  for (const TraceId& t : Traces(3000)) {
    const size_t owner = rings[0].Owner(t);
    for (const PeerRing& r : rings) EXPECT_EQ(r.Owner(t), owner);
    for (size_t self = 0; self < 3; ++self) owned_here += rings[self].OwnedHere(t) ? 1 : 0;
  }
  EXPECT_EQ(owned_here, 3000u);  // each trace is owned by exactly one of them
}

TEST(PeerRing, SharesAreEven) {
  PeerRing ring(Nodes(3), 0);
  std::vector<size_t> count(3);
  for (const TraceId& t : Traces(30000)) ++count[ring.Owner(t)];
  for (size_t c : count) {
    EXPECT_GT(c, 9000u);  // 10000 each, within 10%
    EXPECT_LT(c, 11000u);
  }
}

TEST(PeerRing, ANodeDownMovesOnlyItsTracesAndGetsThemBack) {
  PeerRing ring(Nodes(4), 0);
  const auto traces = Traces(20000);
  std::vector<size_t> before;
  for (const TraceId& t : traces) before.push_back(ring.Owner(t));
  ring.SetUp(2, false);
  EXPECT_EQ(ring.UpCount(), 3u);
  size_t moved = 0;
  for (size_t k = 0; k < traces.size(); ++k) {
    const size_t now = ring.Owner(traces[k]);
    EXPECT_NE(now, 2u);
    if (before[k] != 2) {
      EXPECT_EQ(now, before[k]);  // nobody else's trace moves
    } else {
      ++moved;
    }
  }
  EXPECT_GT(moved, 4000u);  // its quarter
  ring.SetUp(2, true);
  for (size_t k = 0; k < traces.size(); ++k) EXPECT_EQ(ring.Owner(traces[k]), before[k]);
}

TEST(PeerRing, AStampedViewKeepsItsOwnersWhateverIsUpNow) {
  // A request is judged by the nodes up when it was accepted, so a record read back after
  // a node went down still hands that node's spans to its peer sink (which decides, after
  // peers.down_after_s, to take them back here), never to nobody.
  PeerRing ring(Nodes(3), 0);
  const auto traces = Traces(3000);
  const uint64_t all = ring.View();
  EXPECT_EQ(all, 0b111u);
  std::vector<size_t> before;
  for (const TraceId& t : traces) before.push_back(ring.Owner(t));
  ring.SetUp(1, false);
  EXPECT_EQ(ring.View(), 0b101u);
  size_t differ = 0;
  for (size_t k = 0; k < traces.size(); ++k) {
    EXPECT_EQ(ring.Owner(traces[k], all), before[k]);
    differ += ring.Owner(traces[k]) != before[k] ? 1 : 0;
  }
  EXPECT_GT(differ, 500u);  // node 1's third moved for new requests
  // A forwarded request: all of it here, whatever is up.
  for (const TraceId& t : traces) EXPECT_TRUE(ring.OwnedHere(t, SpanBatch::kViewHere));
  // Every node answers the same for the same view.
  PeerRing other(Nodes(3), 2);
  for (const TraceId& t : traces) EXPECT_EQ(other.Owner(t, 0b011), ring.Owner(t, 0b011));
}

TEST(PeerNodes, AtMost63Nodes) {
  std::string list;
  for (int i = 0; i < 64; ++i) {
    if (i > 0) list += ";";
    list += "n" + std::to_string(i) + "=h:4317=http://h";
  }
  std::vector<PeerNode> nodes;
  std::string why;
  EXPECT_FALSE(ParsePeerNodes(list, &nodes, &why));
  EXPECT_NE(why.find("63"), std::string::npos) << why;
}

TEST(PeerRing, ThisNodeCountsAsUpWhateverItIsTold) {
  PeerRing ring(Nodes(2), 1);
  ring.SetUp(1, false);
  ring.SetUp(0, false);
  for (const TraceId& t : Traces(100)) EXPECT_TRUE(ring.OwnedHere(t));
}

TEST(PeerNodes, ParsesTheListAndNamesWhatIsWrong) {
  std::vector<PeerNode> nodes;
  std::string why;
  ASSERT_TRUE(ParsePeerNodes(
      "a=10.0.0.1:4317=http://10.0.0.1:16686;b=h.example:4317=https://h.example", &nodes, &why))
      << why;
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].name, "b");
  EXPECT_EQ(nodes[1].otlp, "h.example:4317");
  EXPECT_EQ(nodes[1].query, "https://h.example");
  EXPECT_TRUE(ParsePeerNodes("", &nodes, &why));
  EXPECT_TRUE(nodes.empty());
  for (const char* bad : {"a=10.0.0.1:4317", "a=10.0.0.1=http://x", "a=10.0.0.1:0=http://x",
                          "a=10.0.0.1:99999=http://x", "a b=h:1=http://x", "a=h:1=ftp://x",
                          "a=h:1=http://x;a=h:2=http://y", "=h:1=http://x"}) {
    why.clear();
    EXPECT_FALSE(ParsePeerNodes(bad, &nodes, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(PeerHealth, APeerThatStopsAnsweringIsDownOnlyAfterDownAfter) {
  // A listening port that is then closed: connections succeed, then are refused.
  std::vector<PeerNode> nodes = Nodes(2);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  nodes[1].otlp = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  PeerRing ring(nodes, 0);
  HealthOptions o;
  o.down_after = std::chrono::milliseconds(200);
  PeerHealth health(ring, o);
  health.ProbeOnce();
  EXPECT_TRUE(ring.Up(1));
  ::close(fd);
  health.ProbeOnce();
  EXPECT_TRUE(ring.Up(1)) << "down at the first failed probe";
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  health.ProbeOnce();
  EXPECT_FALSE(ring.Up(1));
  PromText out;
  health.AppendMetrics(out);
  EXPECT_NE(out.Render().find("spanhouse_peer_in_ring{peer=\"node-1\"} 0"), std::string::npos)
      << out.Render();
  EXPECT_NE(health.Summary().find("node-1 down"), std::string::npos) << health.Summary();
}

}  // namespace
}  // namespace spanhouse::peers
