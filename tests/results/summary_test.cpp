#include "results/summary.h"

#include <gtest/gtest.h>

#include <sstream>

#include "results/classify.h"
#include "results/finding_codes.h"
#include "tests/results/sample.h"

namespace ncclsmoke::results {
namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool has_line(const std::vector<std::string>& lines, const std::string& l) {
  return std::find(lines.begin(), lines.end(), l) != lines.end();
}

std::string dump(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(Summary, FirstLineCarriesVerdictAndExitCode) {
  auto lines = lines_of(human_summary(testing::full_sample()));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].rfind("ncclsmoke fail (exit 1): run 20240501T101500Z-3fa9c2d1, global", 0), 0u)
      << lines[0];
  EXPECT_NE(lines[0].find("4 ranks"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("2 findings"), std::string::npos) << lines[0];
}

TEST(Summary, OneLinePerHostAligned) {
  auto lines = lines_of(human_summary(testing::full_sample()));
  // host-a and host-c have nothing wrong; host-b has a straggler warning; rank 3 has no host.
  EXPECT_TRUE(has_line(lines, "host-a | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "host-c | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines,
                       "host-b | WARNING: rank 1 took 2.4x the median all-reduce time [STRAGGLER]"))
      << dump(lines);
  EXPECT_FALSE(has_line(lines, "host-b | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "(run)  | ERROR: rank 3 never joined within 10.0 s [RANKS_MISSING]"))
      << dump(lines);
}

TEST(Summary, HostAppearsOncePerFindingThatNamesIt) {
  Verdict v = testing::full_sample();
  v.findings = {make_finding("MESH_BLOCKED", "0->2 and 1->2 time out", {0, 1, 2}, {"host-c"}),
                make_finding("DATA_CORRUPTION", "12 wrong elements", {2})};
  apply_verdict(v);
  auto lines = lines_of(human_summary(v));
  int host_c = 0;
  for (const auto& l : lines) host_c += l.rfind("host-c | ", 0) == 0;
  EXPECT_EQ(host_c, 2) << dump(lines);
  EXPECT_TRUE(has_line(lines, "host-c | ERROR: 12 wrong elements [DATA_CORRUPTION]"))
      << dump(lines);
  // The mesh finding names ranks 0 and 1 too, so their hosts get the line as well.
  EXPECT_TRUE(has_line(lines, "host-a | ERROR: 0->2 and 1->2 time out [MESH_BLOCKED]"))
      << dump(lines);
  EXPECT_FALSE(has_line(lines, "host-a | OK")) << dump(lines);
}

TEST(Summary, PhaseTableAligned) {
  auto lines = lines_of(human_summary(testing::full_sample()));
  EXPECT_TRUE(has_line(lines, "phase           status   seconds")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "world           pass        0.01")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "rendezvous      fail       10.02  3 of 4 ranks joined"))
      << dump(lines);
  EXPECT_TRUE(has_line(lines, "transport:nccl  skipped     0.00  no CUDA device")) << dump(lines);
}

TEST(Summary, HintsListed) {
  std::string s = human_summary(testing::full_sample());
  EXPECT_NE(s.find("\nhints:\n  RANKS_MISSING: "), std::string::npos) << s;
  EXPECT_NE(s.find("master.smoke.svc:29500"), std::string::npos) << s;
}

TEST(Summary, HealthyRunAllOk) {
  Verdict v;
  v.run_id = "r";
  v.world.size = 2;
  v.ranks.resize(2);
  v.ranks[0].host = "alpha";
  v.ranks[1].rank = 1;
  v.ranks[1].host = "be";
  v.phases.resize(1);
  v.phases[0].name = "rendezvous";
  v.phases[0].status = "pass";
  v.phases[0].duration_s = 0.25;
  apply_verdict(v);
  auto lines = lines_of(human_summary(v));
  EXPECT_EQ(lines[0].rfind("ncclsmoke pass (exit 0): run r, local", 0), 0u) << lines[0];
  EXPECT_TRUE(has_line(lines, "alpha | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "be    | OK")) << dump(lines);
  EXPECT_EQ(human_summary(v).find("hints:"), std::string::npos);
}

}  // namespace
}  // namespace ncclsmoke::results
