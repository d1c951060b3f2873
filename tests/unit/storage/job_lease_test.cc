// The job lease's rule (DecideLease) over rows as every node reads them, and
// the parsing of the lease query's answer.
#include "storage/clickhouse/job_lease.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace spanhouse::storage {
namespace {

constexpr uint32_t kNow = 1'700'000'000;

LeaseRow Row(std::string node, uint64_t incarnation, uint32_t registered, uint32_t renewed,
             uint32_t lease = 15, bool released = false) {
  return LeaseRow{std::move(node), incarnation, registered, renewed, lease, released};
}

LeaseSelf Self(std::string node, uint64_t incarnation, uint32_t registered) {
  return LeaseSelf{std::move(node), incarnation, registered, 3};
}

TEST(DecideLease, NoRowsNoRunner) {
  const LeaseDecision d = DecideLease({}, kNow, Self("a", 1, kNow - 10));
  EXPECT_EQ(d.runner, "");
  EXPECT_EQ(d.live_nodes, 0u);
  EXPECT_FALSE(d.self_runs);
  EXPECT_TRUE(d.self_settled);
}

TEST(DecideLease, TheEarliestRegisteredLiveNodeRuns) {
  const std::vector<LeaseRow> rows = {Row("c", 3, kNow - 300, kNow - 1),
                                      Row("a", 1, kNow - 100, kNow - 2),
                                      Row("b", 2, kNow - 200, kNow - 3)};
  for (const char* node : {"a", "b", "c"}) {
    const uint64_t inc = node[0] - 'a' + 1;
    const uint32_t reg = kNow - 100 * static_cast<uint32_t>(inc);
    const LeaseDecision d = DecideLease(rows, kNow, Self(node, inc, reg));
    EXPECT_EQ(d.runner, "c") << node;  // every node sees the same runner
    EXPECT_EQ(d.live_nodes, 3u);
    EXPECT_EQ(d.self_runs, std::string(node) == "c") << node;
  }
}

TEST(DecideLease, ATieInRegistrationGoesToTheLowestNodeId) {
  const std::vector<LeaseRow> rows = {Row("n2", 2, kNow - 60, kNow), Row("n1", 1, kNow - 60, kNow)};
  EXPECT_EQ(DecideLease(rows, kNow, Self("n2", 2, kNow - 60)).runner, "n1");
  EXPECT_TRUE(DecideLease(rows, kNow, Self("n1", 1, kNow - 60)).self_runs);
  EXPECT_FALSE(DecideLease(rows, kNow, Self("n2", 2, kNow - 60)).self_runs);
}

TEST(DecideLease, AnExpiredRunnerIsReplacedByTheNextEarliest) {
  // a's last heartbeat was 15 s ago with a 15 s lease: expired now, live a second before.
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 500, kNow - 15),
                                      Row("b", 2, kNow - 400, kNow - 1),
                                      Row("c", 3, kNow - 300, kNow - 2)};
  EXPECT_EQ(DecideLease(rows, kNow - 1, Self("b", 2, kNow - 400)).runner, "a");
  const LeaseDecision d = DecideLease(rows, kNow, Self("b", 2, kNow - 400));
  EXPECT_EQ(d.runner, "b");
  EXPECT_TRUE(d.self_runs);
  EXPECT_EQ(d.live_nodes, 2u);
}

TEST(DecideLease, EachRowHoldsForItsOwnLease) {
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 500, kNow - 20, 30),
                                      Row("b", 2, kNow - 400, kNow - 1, 15)};
  EXPECT_EQ(DecideLease(rows, kNow, Self("b", 2, kNow - 400)).runner, "a");
}

TEST(DecideLease, ARestartedNodeDoesNotTakeTheJobsBack) {
  // a ran the jobs, died, b took over; a comes back with a new registration.
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 500, kNow - 100),
                                      Row("b", 2, kNow - 400, kNow - 1),
                                      Row("a", 7, kNow - 10, kNow)};
  const LeaseDecision d = DecideLease(rows, kNow, Self("a", 7, kNow - 10));
  EXPECT_EQ(d.runner, "b");
  EXPECT_FALSE(d.self_runs);
  EXPECT_EQ(d.live_nodes, 2u);
}

TEST(DecideLease, ARestartBeforeTheLeaseExpiresSupersedesTheDeadProcess) {
  // a was killed and restarted at once: its old heartbeat is still within its lease, but
  // the later registration of node a is the one that counts, so b runs the jobs now.
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 500, kNow - 2),
                                      Row("b", 2, kNow - 400, kNow - 1),
                                      Row("a", 7, kNow - 1, kNow)};
  EXPECT_EQ(DecideLease(rows, kNow, Self("b", 2, kNow - 400)).runner, "b");
  EXPECT_TRUE(DecideLease(rows, kNow, Self("b", 2, kNow - 400)).self_runs);
}

TEST(DecideLease, ARegistrationTakenAgainSupersedesTheFirst) {
  // One process registered twice (its first registration was written too slowly).
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 50, kNow - 49),
                                      Row("a", 1, kNow - 40, kNow), Row("b", 2, kNow - 45, kNow)};
  EXPECT_EQ(DecideLease(rows, kNow, Self("a", 1, kNow - 40)).runner, "b");
  EXPECT_FALSE(DecideLease(rows, kNow, Self("a", 1, kNow - 40)).self_superseded);
}

TEST(DecideLease, AReleasedLeaseHandsOverAtOnce) {
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 500, kNow - 1),
                                      Row("a", 1, kNow - 500, kNow, 0, true),
                                      Row("b", 2, kNow - 400, kNow - 1)};
  const LeaseDecision d = DecideLease(rows, kNow, Self("b", 2, kNow - 400));
  EXPECT_EQ(d.runner, "b");
  EXPECT_TRUE(d.self_runs);
  EXPECT_EQ(d.live_nodes, 1u);
}

TEST(DecideLease, ARunnerActsOnlyOnceItsRegistrationHasSettled) {
  // Alone, but registered 2 s ago with a 3 s settle time: another node registering at the
  // same moment may not be visible yet.
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 2, kNow)};
  LeaseDecision d = DecideLease(rows, kNow, Self("a", 1, kNow - 2));
  EXPECT_EQ(d.runner, "a");
  EXPECT_FALSE(d.self_settled);
  EXPECT_FALSE(d.self_runs);
  d = DecideLease(rows, kNow + 1, Self("a", 1, kNow - 2));
  EXPECT_TRUE(d.self_settled);
  EXPECT_TRUE(d.self_runs);
}

TEST(DecideLease, NodesRegisteringTogetherAgreeOnceSettled) {
  // b registered a second before a but its row became visible later: a, alone at first,
  // has not settled, and once it has, it sees b.
  const std::vector<LeaseRow> early = {Row("a", 1, kNow, kNow)};
  EXPECT_FALSE(DecideLease(early, kNow + 1, Self("a", 1, kNow)).self_runs);
  const std::vector<LeaseRow> both = {Row("a", 1, kNow, kNow + 3), Row("b", 2, kNow - 1, kNow + 2)};
  EXPECT_FALSE(DecideLease(both, kNow + 3, Self("a", 1, kNow)).self_runs);
  EXPECT_TRUE(DecideLease(both, kNow + 3, Self("b", 2, kNow - 1)).self_runs);
}

TEST(DecideLease, TwoProcessesWithOneNodeIdLetOnlyTheLaterRun) {
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 100, kNow), Row("a", 2, kNow - 50, kNow)};
  const LeaseDecision first = DecideLease(rows, kNow, Self("a", 1, kNow - 100));
  EXPECT_TRUE(first.self_superseded);
  EXPECT_FALSE(first.self_runs);
  const LeaseDecision later = DecideLease(rows, kNow, Self("a", 2, kNow - 50));
  EXPECT_FALSE(later.self_superseded);
  EXPECT_TRUE(later.self_runs);
}

TEST(DecideLease, AnUnregisteredNodeRunsNothing) {
  const std::vector<LeaseRow> rows = {Row("a", 1, kNow - 100, kNow)};
  const LeaseDecision d = DecideLease(rows, kNow, Self("a", 1, 0));
  EXPECT_EQ(d.runner, "a");
  EXPECT_FALSE(d.self_settled);
  EXPECT_FALSE(d.self_runs);
}

TEST(ParseLeaseRows, ReadsTheLeaseQuerysColumns) {
  std::vector<LeaseRow> rows;
  uint32_t now = 0;
  ASSERT_TRUE(ParseLeaseRows("a\t18446744073709551615\t100\t110\t15\t0\t111\n"
                             "node-b.2\t7\t90\t111\t0\t1\t111\n",
                             &rows, &now)
                  .ok());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].node_id, "a");
  EXPECT_EQ(rows[0].incarnation, 18446744073709551615ull);
  EXPECT_EQ(rows[0].registered_at, 100u);
  EXPECT_EQ(rows[0].renewed_at, 110u);
  EXPECT_EQ(rows[0].lease_s, 15u);
  EXPECT_FALSE(rows[0].released);
  EXPECT_EQ(rows[1].node_id, "node-b.2");
  EXPECT_TRUE(rows[1].released);
  EXPECT_EQ(now, 111u);
  ASSERT_TRUE(ParseLeaseRows("", &rows, &now).ok());
  EXPECT_TRUE(rows.empty());
  EXPECT_EQ(now, 0u);
}

TEST(ParseLeaseRows, RefusesWhatItDoesNotKnow) {
  std::vector<LeaseRow> rows;
  uint32_t now = 0;
  EXPECT_FALSE(ParseLeaseRows("a\t1\t100\t110\t15\t0\n", &rows, &now).ok());
  EXPECT_FALSE(ParseLeaseRows("a\tx\t100\t110\t15\t0\t111\n", &rows, &now).ok());
}

TEST(ValidNodeId, LettersDigitsDotsUnderscoresDashes) {
  EXPECT_TRUE(ValidNodeId("node-0a1b2c3d4e5f6a7b"));
  EXPECT_TRUE(ValidNodeId("eu_west.1"));
  EXPECT_TRUE(ValidNodeId(std::string(64, 'x')));
  EXPECT_FALSE(ValidNodeId(""));
  EXPECT_FALSE(ValidNodeId(std::string(65, 'x')));
  EXPECT_FALSE(ValidNodeId("a b"));
  EXPECT_FALSE(ValidNodeId("a'b"));
  EXPECT_FALSE(ValidNodeId("a\tb"));
}

TEST(JobLeaseDdl, ReplicatedOnAShardWithReplicas) {
  EXPECT_NE(JobLeaseDdl("traces", false).find("ENGINE = MergeTree PARTITION BY toDate(renewed_at)"),
            std::string::npos);
  EXPECT_NE(JobLeaseDdl("traces", true)
                .find("ReplicatedMergeTree('/clickhouse/tables/{shard}/traces.job_lease', "
                      "'{replica}')"),
            std::string::npos);
}

}  // namespace
}  // namespace spanhouse::storage
