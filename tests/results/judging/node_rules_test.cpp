// GPU_XID (results/judging/node_rules.h): the kernel log's GPU faults as findings, the host a
// suspect only for the Xids that mean the GPU needs a reset or replacing, and the failures on
// that host its consequences.
#include "results/judging/node_rules.h"

#include <gtest/gtest.h>

#include "results/verdict/finding_codes.h"
#include "results/verdict/suspects.h"

namespace ncclsmoke::results {
namespace {

XidEvent xid(int n, const std::string& pci, double at) {
  XidEvent e;
  e.xid = n;
  e.pci = pci;
  e.at_s = at;
  e.text = "NVRM: Xid (PCI:" + pci + "): " + std::to_string(n) + ", pid=1";
  return e;
}

TEST(GpuXid, OneFindingPerXidAndGpuErrorsOnlyForTheReplacingOnes) {
  KernelLogFacts log;
  log.read = true;
  log.source = "/dev/kmsg";
  log.xids = {xid(79, "0000:3b:00", 100), xid(13, "0000:86:00", 120), xid(79, "0000:3b:00", 150)};
  auto fs = xid_findings(log, {2, "gpu-7"});
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].code, Code::GPU_XID);
  EXPECT_EQ(fs[0].message,
            "the kernel log of rank 2 (host gpu-7) has NVRM Xid 13 on the GPU at PCI:0000:86:00 (a "
            "graphics engine exception: usually the application's (an illegal memory access)), 1 "
            "time, last 120 s after boot: NVRM: Xid (PCI:0000:86:00): 13, pid=1");
  EXPECT_EQ(fs[0].severity, Severity::warning);
  EXPECT_EQ(fs[1].severity, Severity::error);
  EXPECT_EQ(fs[1].evidence["count"], 2);
  EXPECT_EQ(fs[1].evidence["last_at_s"], 150);
  EXPECT_NE(fs[1].message.find("fallen off the bus"), std::string::npos) << fs[1].message;
  EXPECT_EQ(fs[1].hosts, std::vector<std::string>{"gpu-7"});
  EXPECT_NE(fs[1].hint.find("PCI:0000:3b:00"), std::string::npos) << fs[1].hint;
  // A log that was not read says nothing; one with no Xid neither.
  KernelLogFacts unread;
  unread.xids = log.xids;
  EXPECT_TRUE(xid_findings(unread, {2, "gpu-7"}).empty());
  KernelLogFacts clean;
  clean.read = true;
  EXPECT_TRUE(xid_findings(clean, {2, "gpu-7"}).empty());
  EXPECT_TRUE(xid_replaces_gpu(48) && xid_replaces_gpu(74) && xid_replaces_gpu(79));
  EXPECT_FALSE(xid_replaces_gpu(13) || xid_replaces_gpu(31) || xid_replaces_gpu(12345));
  EXPECT_EQ(xid_meaning(12345), "");
}

TEST(GpuXid, TheHostIsASuspectForAnErrorAndItsFailuresAreConsequences) {
  KernelLogFacts log;
  log.read = true;
  log.xids = {xid(79, "0000:3b:00", 100)};
  Verdict v = new_verdict(0);
  v.ranks = {{0, RankStatus::joined, "gpu-1", "node-1", 1, "", "", ""},
             {2, RankStatus::joined, "gpu-7", "node-7", 3, "", "", ""}};
  v.findings = xid_findings(log, {2, "gpu-7"});
  Finding timeout = make_finding(Code::TRANSPORT_TIMEOUT, "nccl timed out on rank 2", {2}, {"gpu-7"});
  Finding elsewhere = make_finding(Code::TRANSPORT_TIMEOUT, "socket timed out on rank 0", {0}, {"gpu-1"});
  Finding stalled = make_finding(Code::PEER_STALLED, "rank 2 stopped answering", {2}, {"gpu-1"});
  stalled.subject.peer = 2;
  stalled.subject.peer_host = "gpu-7";
  v.findings.push_back(timeout);
  v.findings.push_back(elsewhere);
  v.findings.push_back(stalled);
  explain_by_node_faults(v.findings);
  EXPECT_EQ(v.findings[0].severity, Severity::error);
  EXPECT_EQ(v.findings[1].severity, Severity::info);
  EXPECT_EQ(v.findings[1].evidence["consequence_of_host"], "gpu-7");
  EXPECT_EQ(v.findings[1].message.rfind("a consequence of host gpu-7's GPU fault (GPU_XID): ", 0), 0u)
      << v.findings[1].message;
  EXPECT_EQ(v.findings[2].severity, Severity::error) << "another host's failure stays";
  EXPECT_EQ(v.findings[3].severity, Severity::info) << "the frozen rank on the faulty host";
  auto suspects = suspect_hosts(v);
  ASSERT_FALSE(suspects.empty());
  bool gpu7 = false;
  for (const auto& s : suspects)
    if (s.node == "node-7") gpu7 = std::find(s.codes.begin(), s.codes.end(), "GPU_XID") != s.codes.end();
  EXPECT_TRUE(gpu7) << suspects_file_text(v);
  // A warning Xid blames no one.
  Verdict w = new_verdict(0);
  w.ranks = v.ranks;
  KernelLogFacts app;
  app.read = true;
  app.xids = {xid(13, "0000:3b:00", 100)};
  w.findings = xid_findings(app, {2, "gpu-7"});
  EXPECT_TRUE(suspect_hosts(w).empty()) << suspects_file_text(w);
}

}  // namespace
}  // namespace ncclsmoke::results
