// The mpi transport's parent <-> child channel (mpi_wire.h) and how the parent names the MPI
// child's death (classify_death), without mpirun. The real abort path is checked under mpirun by
// mpi_init_failure_test.sh.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "transports/mpi/mpi_wire.h"
#include "transports/transport.h"

using namespace ncclsmoke::transports;
using namespace ncclsmoke::transports::mpi_wire;
using nlohmann::json;

namespace {

const char* kUnreachable =
    "--------------------------------------------------------------------------\n"
    "At least one pair of MPI processes are unable to reach each other for\n"
    "MPI communications.  This means that no Open MPI device has indicated\n"
    "--------------------------------------------------------------------------\n";
const char* kFatal =
    "[vm:123] *** An error occurred in MPI_Init_thread\n"
    "[vm:123] *** reported by process [1,0]\n"
    "[vm:123] *** on a NULL communicator\n";

TEST(MpiWire, MessagesAndADescriptorCrossASeqpacketPair) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  int fd = memfd_create("mpi_proxy_test", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "hello", 5), 5);
  ASSERT_TRUE(send_msg(sv[0], {{"op", "map"}, {"bytes", 5}}, fd));
  ASSERT_TRUE(send_msg(sv[0], {{"op", "second"}}));
  json m;
  int got = -1;
  ASSERT_EQ(recv_msg(sv[1], m, Clock::now() + Millis(2000), &got), 1);
  EXPECT_EQ(m.value("op", ""), "map");
  ASSERT_GE(got, 0);
  char buf[6] = {};
  EXPECT_EQ(pread(got, buf, 5, 0), 5);
  EXPECT_STREQ(buf, "hello");
  ASSERT_EQ(recv_msg(sv[1], m, Clock::now() + Millis(2000)), 1);
  EXPECT_EQ(m.value("op", ""), "second");  // one message per packet
  close(got);
  close(fd);
  // Nothing sent: the deadline ends the wait (0); the peer closed: -1.
  EXPECT_EQ(recv_msg(sv[1], m, Clock::now() + Millis(50)), 0);
  close(sv[0]);
  EXPECT_EQ(recv_msg(sv[1], m, Clock::now() + Millis(2000)), -1);
  close(sv[1]);
}

TEST(MpiWire, HelpSummaryKeepsFirstSentencesAndTheFatalCall) {
  std::string s = help_summary({kUnreachable, kFatal});
  EXPECT_EQ(s,
            "At least one pair of MPI processes are unable to reach each other for MPI "
            "communications. | An error occurred in MPI_Init_thread");
  EXPECT_LE(help_summary({std::string(5000, 'x')}, 100).size(), 100u);
  EXPECT_EQ(help_summary({}), "");
}

TEST(MpiWire, AnAbortDuringInitIsInitFailedWithOpenMpisReason) {
  ChildDeath d;
  d.reported_abort = true;
  d.help = {kUnreachable, kFatal};
  d.reaped = d.exited = true;
  d.code = kExitAborted;
  d.during_init = true;
  auto v = classify_death(d, "MPI_Init_thread");
  EXPECT_EQ(v.kind, static_cast<int>(ErrorKind::init_failed));
  EXPECT_NE(v.reason.find("Open MPI aborted in MPI_Init_thread"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("unable to reach each other"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("exit status 70"), std::string::npos) << v.reason;
}

TEST(MpiWire, AnAbortMidCollectiveIsPeerLostOnlyWhenOpenMpiBlamesAConnection) {
  ChildDeath d;
  d.reported_abort = true;
  d.reaped = d.exited = true;
  d.code = kExitAborted;
  d.help = {"------\nA process or daemon was unable to complete a TCP connection to another "
            "process. This is usually caused by a firewall.\n------\n"};
  auto v = classify_death(d, "MPI_Allreduce of 4 bytes");
  EXPECT_EQ(v.kind, static_cast<int>(ErrorKind::peer_lost)) << v.reason;
  EXPECT_NE(v.reason.find("during MPI_Allreduce of 4 bytes"), std::string::npos) << v.reason;
  d.help = {"Something else went wrong. Details.\n"};
  EXPECT_EQ(classify_death(d, "MPI_Allreduce").kind, static_cast<int>(ErrorKind::other));
  d.help.clear();
  d.abort_message = "N/A";
  auto w = classify_death(d, "MPI_Allreduce");
  EXPECT_NE(w.reason.find("PMIx_Abort message \"N/A\""), std::string::npos) << w.reason;
}

TEST(MpiWire, ADeathWithoutAReportNamesTheSignalAndTheLastStderrLine) {
  ChildDeath d;
  d.reaped = true;
  d.exited = false;
  d.code = 9;
  d.during_init = true;
  d.stderr_tail = {"first", "segfault at 0"};
  auto v = classify_death(d, "MPI_Init_thread");
  EXPECT_EQ(v.kind, static_cast<int>(ErrorKind::init_failed));
  EXPECT_NE(v.reason.find("killed by signal 9"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("without an Open MPI abort report"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("segfault at 0"), std::string::npos) << v.reason;
  d.during_init = false;
  d.reaped = false;
  auto w = classify_death(d, "MPI_Allreduce");
  EXPECT_EQ(w.kind, static_cast<int>(ErrorKind::other));
  EXPECT_NE(w.reason.find("did not exit within the grace period"), std::string::npos) << w.reason;
}

}  // namespace
