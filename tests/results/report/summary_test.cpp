#include "results/report/summary.h"

#include <gtest/gtest.h>

#include <sstream>

#include "results/judging/classify.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"
#include "results/judging/judge.h"
#include "results/judging/profile.h"
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

std::size_t count_hint(const std::string& s, const std::string& code) {
  std::size_t n = 0;
  for (auto p = s.find("  " + code + ": "); p != std::string::npos; p = s.find("  " + code + ": ", p + 1)) ++n;
  return n;
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

// A world of thousands stays a screenful: healthy hosts beyond 32 are counted, a host's findings
// beyond 12 are counted, a long message is cut (verdict.json keeps it whole).
TEST(Summary, BoundedAtAnyWorldSize) {
  Verdict v = testing::full_sample();
  v.ranks.clear();
  v.findings.clear();
  for (int r = 0; r < 5000; ++r)
    v.ranks.push_back({r, RankStatus::joined, "h" + std::to_string(r), "", 0, "", "", ""});
  for (int i = 0; i < 40; ++i)
    v.findings.push_back(make_finding(Code::STRAGGLER, "slow " + std::to_string(i), {7}, {"h7"}));
  v.findings.push_back(make_finding(Code::DATA_CORRUPTION, std::string(100000, 'x'), {9}, {"h9"}));
  const std::string text = human_summary(v);
  EXPECT_LT(text.size(), 16u * 1024) << text.size();
  auto lines = lines_of(text);
  EXPECT_TRUE(has_line(lines, "(4966 more hosts OK)")) << dump(lines);
  EXPECT_NE(text.find(" | ... and 28 more findings (verdict.json)"), std::string::npos) << text;
  EXPECT_NE(text.find("... (cut; verdict.json has it) [DATA_CORRUPTION]"), std::string::npos);
}

// Every host with a finding (a fleet whose ranks all went quiet): 64 hosts by name, the rest
// counted by code, "(run)" still shown.
TEST(Summary, BoundedWhenThousandsOfHostsHaveFindings) {
  Verdict v = testing::full_sample();
  v.ranks.clear();
  v.findings.clear();
  for (int r = 0; r < 16384; ++r)
    v.ranks.push_back({r, RankStatus::lost, "h" + std::to_string(r / 8), "", 0, "", "", ""});
  for (int r = 1; r < 16384; ++r)
    v.findings.push_back(make_finding(Code::PEER_LOST, "rank " + std::to_string(r) + " lost", {r}));
  for (int h = 0; h < 2048; h += 2)
    v.findings.push_back(make_finding(Code::NIC_ERRORS, "errors", {}, {"h" + std::to_string(h)}));
  v.findings.push_back(make_finding(Code::RANKS_MISSING, "rank 3 never joined"));
  const std::string text = human_summary(v);
  EXPECT_LT(text.size(), 64u * 1024) << text.size();
  auto lines = lines_of(text);
  // 64 hosts (h0..h63) shown; 1,984 left: their 15,872 PEER_LOST and 992 NIC_ERRORS counted.
  EXPECT_TRUE(has_line(lines, "(1984 more hosts with findings: NIC_ERRORS 992, PEER_LOST 15872; "
                              "verdict.json and suspects.txt name them)"))
      << dump(lines);
  EXPECT_NE(text.find("h63   | ERROR: rank 504 lost [PEER_LOST]"), std::string::npos) << text.substr(0, 4000);
  EXPECT_EQ(text.find("h64 "), std::string::npos);
  EXPECT_NE(text.find("(run)"), std::string::npos);
}

TEST(Summary, OneLinePerHostAligned) {
  auto lines = lines_of(human_summary(testing::full_sample()));
  // host-a and host-c have nothing wrong; host-b has a straggler warning; rank 3 has no host.
  EXPECT_TRUE(has_line(lines, "host-a | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "host-c | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines,
                       "host-b | WARNING: rank 1 (host host-b) took 2.4x the median all-reduce "
                       "time, seen by ranks 0, 2 (host host-a) [STRAGGLER]"))
      << dump(lines);
  EXPECT_FALSE(has_line(lines, "host-b | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "(run)  | ERROR: rank 3 never joined within 10.0 s [RANKS_MISSING]"))
      << dump(lines);
}

TEST(Summary, HostAppearsOncePerFindingThatNamesIt) {
  Verdict v = testing::full_sample();
  v.findings = {make_finding(Code::MESH_BLOCKED, "0->2 and 1->2 time out", {0, 1, 2}, {"host-c"}),
                make_finding(Code::DATA_CORRUPTION, "12 wrong elements", {2})};
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
  v.phases[0].status = PhaseStatus::pass;
  v.phases[0].duration_s = 0.25;
  apply_verdict(v);
  auto lines = lines_of(human_summary(v));
  EXPECT_EQ(lines[0].rfind("ncclsmoke pass (exit 0): run r, local", 0), 0u) << lines[0];
  EXPECT_TRUE(has_line(lines, "alpha | OK")) << dump(lines);
  EXPECT_TRUE(has_line(lines, "be    | OK")) << dump(lines);
  EXPECT_EQ(human_summary(v).find("hints:"), std::string::npos);
}

// A local view or a verdict merged before dedupe: the same TRANSPORT_UNAVAILABLE once per rank of
// host-a, by subject. The summary prints it once, naming the ranks. Findings from before subjects
// print once only when their text is the same (nothing takes a message apart).
TEST(Summary, RepeatsPrintOnce) {
  Verdict v = testing::full_sample();
  v.findings.clear();
  for (int r : {0, 2})
    v.findings.push_back(make_finding_about(
        Code::TRANSPORT_UNAVAILABLE,
        reported_by({r, "host-a"}, "transport:fabric", "open/unavailable", "fabric"),
        "transport fabric skipped on {reporter}: no efa", {r}, {"host-a"}));
  for (int copy = 0; copy < 2; ++copy)
    v.findings.push_back(make_finding(Code::STRAGGLER, "an old text, twice", {1}, {"host-b"}));
  apply_verdict(v);
  std::string s = human_summary(v);
  auto lines = lines_of(s);
  int n = 0;
  for (const auto& l : lines) n += l.find("[TRANSPORT_UNAVAILABLE]") != std::string::npos;
  EXPECT_EQ(n, 2) << s;  // once on host-a, once on host-c (rank 2's host): not once per rank
  EXPECT_TRUE(has_line(lines,
                       "host-a | WARNING: transport fabric skipped on ranks 0, 2 (host host-a): "
                       "no efa [TRANSPORT_UNAVAILABLE]"))
      << s;
  EXPECT_NE(lines[0].find("2 findings,"), std::string::npos) << lines[0];
  EXPECT_EQ(count_hint(s, "TRANSPORT_UNAVAILABLE"), 1u) << s;
  EXPECT_EQ(s.find("an old text, twice"), s.rfind("an old text, twice")) << s;
}

// The headline gate number is gates_of's: the lower of out-of-place and in-place.
TEST(Summary, GateHeadlineIsTheLowerOfOutAndInPlace) {
  Verdict v = testing::full_sample();
  TransportRow out;
  out.transport = "socket";
  out.bytes = 64 << 20;
  out.busbw_gbps = 0.72;
  out.gate = true;
  TransportRow in = out;
  in.in_place = true;
  in.gate = false;
  in.busbw_gbps = 0.70;
  v.transports = {out, in};
  v.baseline = {{"profile", "p"},
                {"transports",
                 {{{"transport", "socket"},
                   {"band", {{"busbw_gbps", 0.74}, {"gate_bytes", 64 << 20},
                             {"degraded_ratio", 0.6}, {"fail_ratio", 0.25}}}}}}};
  auto heads = gate_headlines(v);
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_DOUBLE_EQ(heads[0].gate.busbw_gbps, 0.70);
  ASSERT_NE(heads[0].row, nullptr);
  EXPECT_TRUE(heads[0].row->in_place);
  EXPECT_DOUBLE_EQ(heads[0].gate.busbw_gbps, gates_of(v).at(0).busbw_gbps);
  auto lines = lines_of(human_summary(v));
  EXPECT_TRUE(has_line(lines, "  socket  0.700 GB/s at 64 MiB (in-place), baseline 0.740 GB/s (95%)"))
      << dump(lines);
}

// BASELINE_MISSING's hint, as the summary prints it, says what is really missing: the band
// (learn one) or the gate size in this run's sweep (widen it).
TEST(Summary, BaselineMissingHintSaysWhatIsMissing) {
  std::vector<Profile> ps = load_profiles(R"(
profiles:
  - name: p
    transports:
      - transport: socket
        baselines: [{busbw_gbps: 1, gate_bytes: 67108864, world_size: 2, source: t}]
)");
  auto base = [] {
    Verdict v = testing::full_sample();
    v.world.size = 2;
    v.findings.clear();
    TransportRow r;
    r.transport = "socket";
    r.bytes = 1 << 20;
    r.busbw_gbps = 0.9;
    r.gate = true;
    v.transports = {r};
    return v;
  };
  // The sweep stopped at 1 MiB; the band's gate is 64 MiB.
  Verdict v = base();
  add_judged_findings(v.findings, judge(v, &ps[0]));
  apply_verdict(v);
  std::string s = human_summary(v);
  EXPECT_NE(s.find("BASELINE_MISSING: The baseline exists; this run's sweep did not measure its "
                   "gate size 67108864 bytes: widen --min-bytes/--max-bytes to include it (e.g. "
                   "--max-bytes 64M)"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("baseline learn"), std::string::npos) << s;
  // Four ranks: no band for that world size.
  v = base();
  v.world.size = 4;
  add_judged_findings(v.findings, judge(v, &ps[0]));
  apply_verdict(v);
  s = human_summary(v);
  EXPECT_NE(s.find("No baseline for (socket, world size 4, profile p): record healthy runs"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("ncclsmoke baseline learn --history DB --profiles FILE --profile p"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("--min-bytes"), std::string::npos) << s;
}

}  // namespace
}  // namespace ncclsmoke::results
