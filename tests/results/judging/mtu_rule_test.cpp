// MTU_MISMATCH (results/judging/mtu_rule.h) over hand-made mesh facts (facts_rendezvous.h): the host every
// black-holed path shares is named alone with both MTUs, a single bad link names its two ends, a
// fabric-wide MTU names every host in one finding, and a black hole makes the mesh phase fail
// (so the transports do not run on it).
#include "results/judging/mtu_rule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "results/judging/probe_rules.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {
namespace {

using MeshResult = MeshFacts;
using MtuPath = MtuPathFact;

MtuPath hole(int from, int to, int probed = 1500, int path = 1280) {
  MtuPath p;
  p.from = from;
  p.to = to;
  p.to_address = "10.0.0." + std::to_string(to + 1);
  p.interface = "eth0";
  p.local_mtu = probed;
  p.peer_mtu = probed;
  p.probed_mtu = probed;
  p.path_mtu = path;
  return p;
}

std::map<int, std::string> hosts_of(int n) {
  std::map<int, std::string> h;
  for (int r = 0; r < n; ++r) h[r] = "host" + std::to_string(r);
  return h;
}

// Every path to and from `bad` among n ranks (one rank per host) is black-holed.
MeshResult host_black_hole(int n, int bad) {
  MeshResult m;
  m.pairs_tested = static_cast<std::size_t>(n * (n - 1));
  m.mtu_paths_checked = m.pairs_tested;
  m.mtu_values = {1500};
  for (int r = 0; r < n; ++r) {
    if (r == bad) continue;
    m.mtu_black_holes.push_back(hole(bad, r));
    m.mtu_black_holes.push_back(hole(r, bad));
  }
  m.mtu_black_holes_total = m.mtu_black_holes.size();
  return m;
}

TEST(MtuRule, NoBlackHoleNoFinding) {
  MeshResult m;
  m.mtu_paths_checked = 12;
  m.mtu_values = {1500};
  EXPECT_TRUE(mtu_findings(m, hosts_of(4)).empty());
  EXPECT_EQ(mtu_detail(m), "MTU 1500 on 12 paths");
  EXPECT_EQ(mtu_detail(MeshResult{}), "");  // nothing probed (one host): nothing said
}

TEST(MtuRule, OneHostsBridgePortNamesThatHostAloneWithBothMtus) {
  auto m = host_black_hole(8, 2);
  auto found = mtu_findings(m, hosts_of(8));
  ASSERT_EQ(found.size(), 1u);
  const Finding& f = found[0];
  EXPECT_EQ(f.code, Code::MTU_MISMATCH);
  const FindingCode* row = find_code(Code::MTU_MISMATCH);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.layer, row->layer);
  EXPECT_EQ(f.hosts, std::vector<std::string>{"host2"});
  EXPECT_EQ(f.ranks, std::vector<int>{2});
  EXPECT_NE(f.message.find("host2"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("1500"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("1280"), std::string::npos) << f.message;
  // The table's hint, its placeholders filled from data.
  EXPECT_NE(f.hint.find("says 1500"), std::string::npos) << f.hint;
  EXPECT_NE(f.hint.find("at most 1280"), std::string::npos) << f.hint;
  EXPECT_NE(f.hint.find("host2"), std::string::npos) << f.hint;
  EXPECT_EQ(f.hint.find('<'), std::string::npos) << f.hint;  // no placeholder left unfilled
  // The subject is data: the phase and the host, so ranks' copies merge without reading text.
  EXPECT_EQ(f.subject.phase, "mesh");
  EXPECT_EQ(f.subject.item, "mtu host2");
  EXPECT_EQ(f.evidence["local_mtu"], 1500);
  EXPECT_EQ(f.evidence["path_mtu"], 1280);
  EXPECT_EQ(f.evidence["suspect_host"], "host2");
  EXPECT_EQ(f.evidence["scope"], "host");
  EXPECT_EQ(f.evidence["paths_total"], 14);
  ASSERT_EQ(f.evidence["paths"].size(), 14u);
  for (const auto& p : f.evidence["paths"]) {
    EXPECT_TRUE(p["from_host"] == "host2" || p["to_host"] == "host2") << p;
    EXPECT_EQ(p["probed_mtu"], 1500);
    EXPECT_EQ(p["path_mtu"], 1280);
  }
  EXPECT_EQ(mtu_detail(m), "MTU 1500 on 56 paths, 14 black-holed (1280 crosses)");
}

TEST(MtuRule, OneDirectionOnlyStillNamesTheHost) {
  MeshResult m;
  m.mtu_paths_checked = 12;
  for (int r : {0, 1, 3}) m.mtu_black_holes.push_back(hole(r, 2));  // only into host2
  m.mtu_black_holes_total = 3;
  auto found = mtu_findings(m, hosts_of(4));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].hosts, std::vector<std::string>{"host2"});
}

TEST(MtuRule, ASingleLinkNamesBothEndsNotAHost) {
  MeshResult m;
  m.mtu_paths_checked = 56;
  m.mtu_black_holes = {hole(2, 5, 9001, 1500), hole(5, 2, 9001, 1500)};
  m.mtu_black_holes_total = 2;
  auto found = mtu_findings(m, hosts_of(8));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].hosts, (std::vector<std::string>{"host2", "host5"}));
  EXPECT_NE(found[0].message.find("between host2 and host5"), std::string::npos)
      << found[0].message;
  EXPECT_NE(found[0].message.find("9001"), std::string::npos) << found[0].message;
  EXPECT_FALSE(found[0].evidence.contains("suspect_host"));
  EXPECT_EQ(found[0].evidence["scope"], "link");
}

TEST(MtuRule, TwoBadHostsAreNamedEachInItsOwnFindingAndNoBystander) {
  MeshResult m;
  m.mtu_paths_checked = 56;
  for (int bad : {2, 5})
    for (int r = 0; r < 8; ++r) {
      if (r == bad) continue;
      if (bad == 5 && r == 2) continue;  // host2 <-> host5 already listed with host2
      m.mtu_black_holes.push_back(hole(bad, r));
      m.mtu_black_holes.push_back(hole(r, bad));
    }
  m.mtu_black_holes_total = m.mtu_black_holes.size();
  auto found = mtu_findings(m, hosts_of(8));
  ASSERT_EQ(found.size(), 2u);
  std::vector<std::string> named;
  for (const auto& f : found) {
    ASSERT_EQ(f.hosts.size(), 1u);
    named.push_back(f.hosts[0]);
  }
  std::sort(named.begin(), named.end());
  EXPECT_EQ(named, (std::vector<std::string>{"host2", "host5"}));
}

TEST(MtuRule, AFabricWideMtuIsOneFindingNamingEveryHost) {
  MeshResult m;
  m.mtu_paths_checked = 12;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (a != b) m.mtu_black_holes.push_back(hole(a, b, 9001, 1500));
  m.mtu_black_holes_total = m.mtu_black_holes.size();
  auto found = mtu_findings(m, hosts_of(4));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].hosts, (std::vector<std::string>{"host0", "host1", "host2", "host3"}));
  EXPECT_EQ(found[0].subject.item, "mtu fabric");
  EXPECT_EQ(found[0].evidence["scope"], "fabric");
}

TEST(MtuRule, RanksOnTheSameHostAreOneHost) {
  // 2 ranks per host (ranks 4 and 5 on hostB): every path to and from hostB.
  std::map<int, std::string> hosts{{0, "hostA"}, {1, "hostA"}, {2, "hostC"}, {3, "hostC"},
                                   {4, "hostB"}, {5, "hostB"}, {6, "hostD"}, {7, "hostD"}};
  MeshResult m;
  m.mtu_paths_checked = 48;
  for (int b : {4, 5})
    for (int r : {0, 1, 2, 3, 6, 7}) {
      m.mtu_black_holes.push_back(hole(b, r));
      m.mtu_black_holes.push_back(hole(r, b));
    }
  m.mtu_black_holes_total = m.mtu_black_holes.size();
  auto found = mtu_findings(m, hosts);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].hosts, std::vector<std::string>{"hostB"});
  EXPECT_EQ(found[0].ranks, (std::vector<int>{4, 5}));
}

TEST(MtuRule, ABlackHoleFailsTheMeshPhaseSoNoTransportRunsOnIt) {
  auto m = host_black_hole(4, 1);
  ProbeContext c;
  c.rank = 0;
  c.world_size = 4;
  c.host = "host0";
  auto j = judge_mesh(m, c, hosts_of(4));
  EXPECT_EQ(j.status, PhaseStatus::fail);
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_EQ(j.findings[0].code, Code::MTU_MISMATCH);
  EXPECT_NE(j.detail.find("6 black-holed (1280 crosses)"), std::string::npos) << j.detail;
  // Without the black holes the same probe passes, and its MTU is in the phase detail.
  m.mtu_black_holes.clear();
  m.mtu_black_holes_total = 0;
  j = judge_mesh(m, c, hosts_of(4));
  EXPECT_EQ(j.status, PhaseStatus::pass);
  EXPECT_NE(j.detail.find("MTU 1500 on 12 paths"), std::string::npos) << j.detail;
}

TEST(MtuRule, UncheckedPathsAreSaidNotJudged) {
  MeshResult m;
  m.mtu_paths_unchecked = 3;
  EXPECT_TRUE(mtu_findings(m, hosts_of(4)).empty());
  EXPECT_EQ(mtu_detail(m), "3 paths not MTU-checked (no UDP answer, or no time left)");
}

}  // namespace
}  // namespace ncclsmoke::results
