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

facts::GpuFacts healthy_gpu(int i) {
  facts::GpuFacts g;
  g.index = i;
  g.uuid = "GPU-" + std::to_string(i);
  g.pci_bus_id = "00000000:18:00.0";
  g.ecc_uncorrected_volatile = 0;
  g.remap_pending = g.remap_failed = 0;
  g.pcie_width = g.pcie_width_max = 16;
  g.pcie_gen = 1;  // idle: trained down, not judged
  g.pcie_gen_max = 5;
  g.clock_event_reasons = 0x1;  // idle
  return g;
}

facts::GpuHealthFacts node_with(int n) {
  facts::GpuHealthFacts h;
  h.read = true;
  h.driver_version = "550.54.15";
  for (int i = 0; i < n; ++i) h.gpus.push_back(healthy_gpu(i));
  return h;
}

TEST(GpuHealth, OneFindingPerGpuWithAProblemErrorsForWhatNeedsAReset) {
  EXPECT_TRUE(gpu_health_findings(node_with(8), {0, "gpu-0"}).empty());
  auto h = node_with(8);
  h.gpus[3].ecc_uncorrected_volatile = 2;
  h.gpus[3].remap_pending = 1;
  h.gpus[5].pcie_width = 8;
  h.gpus[5].clock_event_reasons = 0x8 | 0x40;
  h.gpus[6].error = "GPU is lost";
  auto fs = gpu_health_findings(h, {8, "gpu-1"});
  ASSERT_EQ(fs.size(), 3u);
  EXPECT_EQ(fs[0].code, Code::GPU_HEALTH);
  EXPECT_EQ(fs[0].severity, Severity::error);
  EXPECT_EQ(fs[0].message,
            "GPU 3 (PCI:00000000:18:00.0) on rank 8 (host gpu-1): 2 uncorrected ECC errors since "
            "the driver loaded; a row remap waits for a GPU reset");
  EXPECT_EQ(fs[1].severity, Severity::warning);
  EXPECT_NE(fs[1].message.find("x8 of x16"), std::string::npos) << fs[1].message;
  EXPECT_NE(fs[1].message.find("a hardware slowdown"), std::string::npos) << fs[1].message;
  EXPECT_NE(fs[1].message.find("hardware thermal slowdown"), std::string::npos) << fs[1].message;
  EXPECT_EQ(fs[2].severity, Severity::error);
  EXPECT_NE(fs[2].message.find("NVML cannot open it: GPU is lost"), std::string::npos);
  // The host is a suspect for the errors only.
  Verdict v = new_verdict(0);
  v.ranks = {{8, RankStatus::joined, "gpu-1", "node-1", 1, "", "", ""}};
  v.findings = {fs[1]};
  EXPECT_TRUE(suspect_hosts(v).empty()) << suspects_file_text(v);
  v.findings = {fs[0]};
  EXPECT_EQ(suspect_hosts(v).size(), 1u);
}

TEST(GpuHealth, NvmlThatDoesNotStartIsAWarningOnlyBesideADriver) {
  facts::GpuHealthFacts h;
  h.init_error = 18;
  h.why_not = "nvmlInit: Driver/library version mismatch";
  auto fs = gpu_health_findings(h, {0, "gpu-0"});
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].severity, Severity::warning);
  EXPECT_NE(fs[0].message.find("Driver/library version mismatch"), std::string::npos);
  for (int code : {-1, facts::kNvmlDriverNotLoaded, facts::kNvmlLibraryNotFound,
                   facts::kNvmlNoPermission}) {
    h.init_error = code;
    EXPECT_TRUE(gpu_health_findings(h, {0, "gpu-0"}).empty()) << code;
  }
}

TEST(GpuHealth, ANodeShortOfGpusIsNamedOnEveryShape) {
  auto views_of = [](std::vector<int> counts) {
    std::vector<Verdict> views;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      Verdict v = new_verdict(static_cast<int>(i));
      v.reporting_rank = static_cast<int>(i) * 8;
      v.ranks = {{v.reporting_rank, RankStatus::joined, "gpu-" + std::to_string(i), "", 1, "",
                  "", ""}};
      v.gpus = node_with(counts[i]);
      views.push_back(v);
    }
    return views;
  };
  EXPECT_TRUE(judge_gpu_counts(views_of({8, 8, 8, 8})).empty());
  EXPECT_TRUE(judge_gpu_counts(views_of({8})).empty());
  auto fs = judge_gpu_counts(views_of({8, 8, 7, 8}));
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>{"gpu-2"});
  EXPECT_EQ(fs[0].severity, Severity::error);
  EXPECT_EQ(fs[0].message,
            "NVML on rank 16 (host gpu-2) lists 7 GPUs; 3 of the 4 nodes list 8: a GPU fell off "
            "the bus or was disabled");
  fs = judge_gpu_counts(views_of({8, 7}));  // two nodes: the one short of GPUs
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>{"gpu-1"});
  fs = judge_gpu_counts(views_of({8, 7, 8, 8, 8, 8, 6, 8}));
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>{"gpu-1"});
  EXPECT_EQ(fs[1].hosts, std::vector<std::string>{"gpu-6"});
}

}  // namespace
}  // namespace ncclsmoke::results
