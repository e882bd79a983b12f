#include "harness/world/hostlist.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace ncclsmoke::harness {
namespace {

using Hosts = std::vector<std::string>;

Hosts expand(const std::string& list) {
  std::string error;
  auto hosts = expand_hostlist(list, &error);
  EXPECT_TRUE(hosts.has_value()) << list << ": " << error;
  return hosts.value_or(Hosts{});
}

// Malformed lists fail both calls; too-large ones (malformed = false) only the expansion.
std::string rejected(const std::string& list, bool malformed = true) {
  std::string error;
  auto hosts = expand_hostlist(list, &error);
  EXPECT_FALSE(hosts.has_value()) << list;
  EXPECT_FALSE(error.empty()) << list;
  std::string first_error;
  EXPECT_EQ(first_host(list, &first_error).has_value(), !malformed) << list;
  if (malformed) {
    EXPECT_EQ(first_error, error) << list;
  }
  return error;
}

TEST(Hostlist, PlainNamesAndLists) {
  EXPECT_EQ(expand("login1"), (Hosts{"login1"}));
  EXPECT_EQ(expand("a,b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(expand("  gpu-01\n"), (Hosts{"gpu-01"}));
}

TEST(Hostlist, RangesAndSingleValues) {
  EXPECT_EQ(expand("gpu-[01-04,07]"),
            (Hosts{"gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-07"}));
  EXPECT_EQ(expand("n[5]"), (Hosts{"n5"}));
  EXPECT_EQ(expand("[5]"), (Hosts{"5"}));
  EXPECT_EQ(expand("n[1,3]x"), (Hosts{"n1x", "n3x"}));
}

TEST(Hostlist, ZeroPaddingIsKept) {
  EXPECT_EQ(expand("n[08-10]"), (Hosts{"n08", "n09", "n10"}));
  EXPECT_EQ(expand("n[8-10]"), (Hosts{"n8", "n9", "n10"}));
  EXPECT_EQ(expand("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand("n[001-3]"), (Hosts{"n001", "n002", "n003"}));
}

TEST(Hostlist, CommaListMixesRangesAndNames) {
  EXPECT_EQ(expand("gpu-[01-02],login1"), (Hosts{"gpu-01", "gpu-02", "login1"}));
  EXPECT_EQ(expand("a[1-2],b[3]"), (Hosts{"a1", "a2", "b3"}));
}

TEST(Hostlist, SeveralBracketGroupsAreACartesianProduct) {
  EXPECT_EQ(expand("rack[1-2]-node[01-02]"),
            (Hosts{"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"}));
  EXPECT_EQ(expand("r[1,3]n[1-2,5]"), (Hosts{"r1n1", "r1n2", "r1n5", "r3n1", "r3n2", "r3n5"}));
}

TEST(Hostlist, FirstHost) {
  EXPECT_EQ(first_host("gpu-[01-04,07],login1"), "gpu-01");
  EXPECT_EQ(first_host("login1,gpu-[01-04]"), "login1");
  EXPECT_EQ(first_host("rack[2-3]-node[07-09]"), "rack2-node07");
  EXPECT_EQ(first_host("n[08-10]"), "n08");
  // No expansion: a huge but well-formed list still has a first host.
  EXPECT_EQ(first_host("n[000000000-999999999]"), "n000000000");
}

TEST(Hostlist, MalformedIsRejectedWithAReason) {
  EXPECT_NE(rejected("gpu-[01-").find("never closed"), std::string::npos);
  EXPECT_NE(rejected("n[3-1]").find("backwards"), std::string::npos);
  EXPECT_NE(rejected("").find("empty"), std::string::npos);
  EXPECT_NE(rejected("   ").find("empty"), std::string::npos);
  EXPECT_NE(rejected("gpu-[]").find("empty"), std::string::npos);
  EXPECT_NE(rejected("a,,b").find("empty host name"), std::string::npos);
  EXPECT_NE(rejected("a,").find("empty host name"), std::string::npos);
  EXPECT_NE(rejected("n[1,]").find("empty item"), std::string::npos);
  EXPECT_NE(rejected("n[1-]").find("empty bound"), std::string::npos);
  EXPECT_NE(rejected("n[-3]").find("empty bound"), std::string::npos);
  EXPECT_NE(rejected("n[a-b]").find("decimal"), std::string::npos);
  EXPECT_NE(rejected("n[1-2-3]").find("decimal"), std::string::npos);
  EXPECT_NE(rejected("n]1[").find("no matching"), std::string::npos);
  EXPECT_NE(rejected("n[[1]]").find("nested"), std::string::npos);
  EXPECT_NE(rejected("a b").find("whitespace"), std::string::npos);
  EXPECT_NE(rejected("n[1234567890123456789]").find("18 digits"), std::string::npos);
}

TEST(Hostlist, ExpansionIsBounded) {
  EXPECT_NE(rejected("n[0-999999999]", false).find("more than"), std::string::npos);
  EXPECT_NE(rejected("a[0-1023]b[0-1024]", false).find("more than"), std::string::npos);
  // Many names, each small, still count towards the bound.
  EXPECT_NE(rejected("a[0-600000],b[0-600000]", false).find("more than"), std::string::npos);
  // Exactly at the bound is fine.
  auto hosts = expand_hostlist("n[1-1048576]");
  ASSERT_TRUE(hosts);
  EXPECT_EQ(hosts->size(), kMaxHostlistHosts);
  EXPECT_EQ(hosts->back(), "n1048576");
}

// The same lists through Slurm's own parser (`scontrol show hostnames`, which needs only a
// config file to exist, no running daemon). Skipped where Slurm is not installed.
TEST(Hostlist, AgreesWithScontrol) {
  if (access("/usr/bin/scontrol", X_OK) != 0) GTEST_SKIP() << "scontrol is not installed";
  char dir[] = "/tmp/hostlist_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string conf = std::string(dir) + "/slurm.conf";
  {
    std::ofstream f(conf);
    f << "ClusterName=t\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1 State=UNKNOWN\n"
         "PartitionName=p Nodes=localhost Default=YES\n";
  }
  for (const char* raw :
       {"gpu-[01-04,07],login1", "rack[1-2]-node[01-02]", "n[08-10]", "n[8-10]", "n[098-101]",
        "[5]", "r[1,3]n[1-2,5]", "n[001-3]", "a,b[1-3],c"}) {
    const std::string list = raw;
    const std::string cmd = "SLURM_CONF=" + conf + " timeout 20 /usr/bin/scontrol show hostnames '" +
                            list + "' 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    Hosts slurm;
    char line[512];
    while (fgets(line, sizeof line, p) != nullptr) {
      std::string h(line);
      while (!h.empty() && (h.back() == '\n' || h.back() == '\r')) h.pop_back();
      slurm.push_back(h);
    }
    int rc = pclose(p);
    ASSERT_EQ(rc, 0) << cmd;
    EXPECT_EQ(expand(list), slurm) << list;
    EXPECT_EQ(first_host(list), slurm.front()) << list;
  }
  unlink(conf.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace ncclsmoke::harness
