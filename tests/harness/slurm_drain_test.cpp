// harness/slurm_drain.h without a Slurm: reading `scontrol show node -o`, the drain reason, and
// the bounded spawn (argv, no shell; a deadline kills). The real scontrol: tests/launchers/
// slurm_drain_test.sh.
#include "harness/slurm_drain.h"

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
