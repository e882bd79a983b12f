// harness/actions/slurm_drain.h without a Slurm: reading `scontrol show node -o`, the drain reason, and
// the bounded spawn (argv, no shell; a deadline kills). The real scontrol: tests/launchers/
// slurm_drain_test.sh.
#include "harness/actions/slurm_drain.h"

#include <gtest/gtest.h>

namespace ncclsmoke::harness {
namespace {

TEST(SlurmDrain, ShowNodeStateAndReason) {
  auto s = parse_show_node(
      "NodeName=gpu-01 Arch=x86_64 CoresPerSocket=1 State=IDLE+DRAIN ThreadsPerCore=1 "
      "Partitions=test BootTime=None Reason=ncclsmoke PEER_STALLED run 20240501T1Z-ab [root@2024-05-01T10:15:00]\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, "IDLE+DRAIN");
  EXPECT_EQ(s->reason, "ncclsmoke PEER_STALLED run 20240501T1Z-ab");
  EXPECT_TRUE(s->drained_by_ncclsmoke());
  s = parse_show_node("NodeName=n State=MIXED+DRAIN Reason=ops: bad DIMM [admin@2024-05-01T10:15:00]");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->drained());
  EXPECT_FALSE(s->drained_by_ncclsmoke());
  EXPECT_EQ(s->reason, "ops: bad DIMM");
  s = parse_show_node("NodeName=n State=IDLE ThreadsPerCore=1");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->drained());
  EXPECT_EQ(s->reason, "");
  // "ncclsmoke" without the space is not ours; nor is a reason that only contains it.
  EXPECT_FALSE(parse_show_node("State=DRAIN Reason=ncclsmokeX")->drained_by_ncclsmoke());
  EXPECT_FALSE(parse_show_node("State=DRAIN Reason=ops ncclsmoke x")->drained_by_ncclsmoke());
  EXPECT_FALSE(parse_show_node("Node gpu-01 not found"));
}

TEST(SlurmDrain, ShowNodeNameAndPartitions) {
  auto s = parse_show_node("NodeName=gpu-01 Arch=x86_64 State=IDLE Partitions=gpu,debug BootTime=None");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "gpu-01");
  EXPECT_EQ(s->partitions, (std::vector<std::string>{"gpu", "debug"}));
  s = parse_show_node("NodeName=x State=DOWN+DRAIN Partitions=(null) Reason=Partitions=gpu");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->partitions.empty());
  EXPECT_EQ(s->reason, "Partitions=gpu");
}

// Every node's line, as `scontrol show node -o` prints them: the budget counts ncclsmoke's drains
// in the job's partition, else in the cluster.
TEST(SlurmDrain, HeldDrainsCountOnlyOursInTheScope) {
  const std::string all =
      "NodeName=a State=IDLE+DRAIN Partitions=gpu Reason=ncclsmoke SLOW_HOST run r1 [root@t]\n"
      "NodeName=b State=IDLE Partitions=gpu\n"
      "NodeName=c State=DOWN+DRAIN Partitions=gpu Reason=ops: bad DIMM [admin@t]\n"
      "NodeName=d State=MIXED+DRAIN Partitions=cpu Reason=ncclsmoke PEER_STALLED run r2 [root@t]\n"
      "NodeName=e State=IDLE Partitions=gpu,cpu\n"
      "\n";
  auto h = held_drains(all, "gpu");
  EXPECT_EQ(h.scope, "partition gpu");
  EXPECT_EQ(h.scope_nodes, 4);
  EXPECT_EQ(h.ours, (std::vector<std::string>{"a"}));
  h = held_drains(all, "");
  EXPECT_EQ(h.scope, "the cluster");
  EXPECT_EQ(h.scope_nodes, 5);
  EXPECT_EQ(h.ours, (std::vector<std::string>{"a", "d"}));
  // A partition no node lists (a typo, another cluster's): the whole cluster, never zero nodes.
  h = held_drains(all, "nope");
  EXPECT_EQ(h.scope_nodes, 5);
  EXPECT_EQ(held_drains("", "gpu").scope_nodes, 0);
}

TEST(SlurmDrain, BudgetReadsCountsAndShares) {
  std::string why;
  auto b = parse_drain_budget("3", &why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(b->allowed(1000), 3);
  EXPECT_EQ(b->text(), "3");
  b = parse_drain_budget("0", &why);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->allowed(10), 0);
  b = parse_drain_budget("25%", &why);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->allowed(8), 2);
  EXPECT_EQ(b->allowed(3), 1);  // at least one node
  EXPECT_EQ(b->text(), "25%");
  EXPECT_EQ(parse_drain_budget("0%", &why)->allowed(100), 0);
  EXPECT_EQ(parse_drain_budget("2.5%", &why)->allowed(1000), 25);
  // The default: 10%, at least one.
  EXPECT_EQ(DrainBudget{}.allowed(2), 1);
  EXPECT_EQ(DrainBudget{}.allowed(1000), 100);
  EXPECT_EQ(DrainBudget{}.text(), "10%");
  for (const char* bad : {"", "%", "-1", "1.5", "101%", "abc", "5 %", "1e3", "100001", "nan%"}) {
    why.clear();
    EXPECT_FALSE(parse_drain_budget(bad, &why)) << bad;
    EXPECT_NE(why.find("drain budget"), std::string::npos) << bad << ": " << why;
  }
}

TEST(SlurmDrain, Reason) {
  EXPECT_EQ(drain_reason({"PEER_STALLED", "STRAGGLER"}, "r1"), "ncclsmoke PEER_STALLED,STRAGGLER run r1");
}

TEST(SlurmDrain, CommandsAreBoundedAndNamed) {
  auto r = run_command({"/bin/sh", "-c", "echo out; echo oops >&2; exit 3"},
                       rendezvous::Clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.describe(), "exit 3: oops");
  auto t0 = rendezvous::Clock::now();
  r = run_command({"/bin/sleep", "30"}, t0 + std::chrono::milliseconds(300));
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(rendezvous::Clock::now() - t0, std::chrono::seconds(5));
  r = run_command({"/nonexistent/scontrol", "show"}, t0 + std::chrono::seconds(5));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.describe().find("/nonexistent/scontrol"), std::string::npos) << r.describe();
  // No shell: an argument with shell syntax is one argument.
  r = run_command({"/bin/echo", "a; rm -rf /tmp/x $(id)"}, rendezvous::Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(r.out, "a; rm -rf /tmp/x $(id)\n");
}

}  // namespace
}  // namespace ncclsmoke::harness
