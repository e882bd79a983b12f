// The kernel log's GPU faults (node/kernel_log.h): both line forms, junk, bounds, and a log that
// cannot be read.
#include "node/kernel_log.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ncclsmoke::node {
namespace {

std::string fixture(const std::string& name) {
  return std::string(NCCLSMOKE_SOURCE_DIR) + "/tests/node/fixtures/" + name;
}

TEST(KernelLog, ReadsTheXidsOfAKmsgDump) {
  auto log = read_kernel_log(fixture("kmsg_xid79.txt"));
  ASSERT_TRUE(log.read) << log.why_not;
  EXPECT_FALSE(log.truncated);
  ASSERT_EQ(log.xids.size(), 2u);
  EXPECT_EQ(log.xids[0].xid, 79);
  EXPECT_EQ(log.xids[0].pci, "0000:3b:00");
  EXPECT_NEAR(log.xids[0].at_s, 183421.337001, 1e-6);
  EXPECT_EQ(log.xids[0].text.rfind("NVRM: Xid (PCI:0000:3b:00): 79, pid=", 0), 0u) << log.xids[0].text;
  EXPECT_EQ(log.xids[1].xid, 13);
  EXPECT_EQ(log.xids[1].pci, "0000:86:00");
}

TEST(KernelLog, DmesgLinesAndJunk) {
  facts::KernelLogFacts log;
  parse_kernel_log(
      "[ 1234.567890] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked\n"
      "NVRM: Xid (PCI:0000:10:1d): 48, no stamp at all\n"
      "[ 99.5] NVRM: Xid (PCI:0000:10:1c): x, not a number\n"
      "[ 99.5] NVRM: Xid (PCI:): 79, no bus id\n"
      "[ 99.5] NVRM: Xid (PCI:0000:10:1c 79 no close\n"
      "[ bad] NVRM: Xid (PCI:0000:10:1e): 74, a stamp that is not one\n"
      "3,1,notanumber,-;NVRM: Xid (PCI:0000:10:1f): 95, bad kmsg stamp",
      log);
  ASSERT_EQ(log.xids.size(), 4u);
  EXPECT_EQ(log.xids[0].xid, 63);
  EXPECT_NEAR(log.xids[0].at_s, 1234.56789, 1e-6);
  EXPECT_EQ(log.xids[1].xid, 48);
  EXPECT_EQ(log.xids[1].at_s, -1);
  EXPECT_EQ(log.xids[2].xid, 74);
  EXPECT_EQ(log.xids[2].at_s, -1);
  EXPECT_EQ(log.xids[3].xid, 95);
  EXPECT_EQ(log.xids[3].at_s, -1);
  // A very long line is kept bounded.
  facts::KernelLogFacts long_line;
  parse_kernel_log("NVRM: Xid (PCI:0000:10:1c): 79, " + std::string(5000, 'x'), long_line);
  ASSERT_EQ(long_line.xids.size(), 1u);
  EXPECT_EQ(long_line.xids[0].text.size(), kXidTextMax);
}

TEST(KernelLog, BoundsAndALogThatCannotBeRead) {
  auto missing = read_kernel_log("/nonexistent/kmsg");
  EXPECT_FALSE(missing.read);
  EXPECT_FALSE(missing.why_not.empty());
  EXPECT_TRUE(missing.xids.empty());
  // A directory is no log.
  auto dir = read_kernel_log("/");
  EXPECT_FALSE(dir.read);
  // Past the byte bound: truncated, what was read still parsed.
  auto path = std::filesystem::temp_directory_path() / ("kmsg_big_" + std::to_string(getpid()));
  {
    std::ofstream out(path);
    out << "3,1,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, first\n";
    for (int i = 0; i < 2000; ++i) out << "6,2,6000000,-;" << std::string(100, 'y') << "\n";
  }
  auto big = read_kernel_log(path.string(), 64 * 1024);
  std::filesystem::remove(path);
  EXPECT_TRUE(big.read);
  EXPECT_TRUE(big.truncated);
  ASSERT_EQ(big.xids.size(), 1u);
  EXPECT_EQ(big.xids[0].xid, 79);
}

}  // namespace
}  // namespace ncclsmoke::node
