// baseline learn (results/judging/baseline_learn.h): which gates count, the median per key, the diff text
// and the merged profiles file that must load back identically.
#include "results/judging/baseline_learn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ncclsmoke::results {
namespace {

constexpr std::int64_t kMiB = 1 << 20;
constexpr double kDay = 86400;
constexpr double kT0 = 1'790'000'000;  // 2026-09-21

LearnGate gate(const std::string& run, double t, double busbw, int world = 4,
                 std::int64_t bytes = 16 * kMiB, const std::string& transport = "socket",
                 const std::string& verdict = "pass", const std::string& profile = "ci") {
  LearnGate g;
  g.run_id = run;
  g.started_unix = t;
  g.verdict = parse_outcome(verdict).value();
  g.profile = profile;
  g.world_size = world;
  g.transport = transport;
  g.gate_bytes = bytes;
  g.busbw_gbps = busbw;
  return g;
}

const char* kProfiles = R"(
profiles:
  - name: ci
    description: "CI: namespace hosts"
    transports:
      - transport: socket
        baselines:
          - {world_size: 4, busbw_gbps: 1.0, gate_bytes: 16777216, degraded_ratio: 0.5,
             fail_ratio: 0.2, source: "rough"}
          - {busbw_gbps: 0.5, gate_bytes: 16777216, source: "any world size"}
      - transport: fabric
        identity: {provider: tcp, gdr: false, version: "1.0"}
        required: false
        baselines:
          - {world_size: 2, busbw_gbps: 0.3, gate_bytes: 67108864, source: "rough fabric"}
  - name: other
    transports:
      - transport: nccl
        identity: {network: Libfabric, provider: efa, gdr: true}
)";

std::vector<Profile> profiles() { return load_profiles(kProfiles); }

LearnOptions opts(int last = 10, int min_runs = 3) {
  LearnOptions o;
  o.profile = "ci";
  o.last = last;
  o.min_runs = min_runs;
  return o;
}

const Proposal* find(const LearnResult& r, const std::string& t, int ws, std::int64_t bytes) {
  for (const auto& p : r.proposals)
    if (p.key.transport == t && p.key.world_size == ws && p.key.gate_bytes == bytes) return &p;
  return nullptr;
}

TEST(BaselineLearn, MedianOddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_THROW(median({}), LearnError);
}

TEST(BaselineLearn, ProposesMedianKeepsTolerancesAndNamesRuns) {
  std::vector<LearnGate> g{gate("a", kT0, 1.10), gate("b", kT0 + kDay, 1.30),
                             gate("c", kT0 + 2 * kDay, 0.90), gate("d", kT0 + 3 * kDay, 1.25)};
  auto r = learn_baselines(g, profiles(), opts());
  ASSERT_EQ(r.proposals.size(), 1u);
  const auto& p = r.proposals[0];
  EXPECT_EQ(p.status, Proposal::Status::kChanged);
  EXPECT_EQ(p.runs, 4);
  EXPECT_DOUBLE_EQ(p.proposed.busbw_gbps, 1.175);
  EXPECT_DOUBLE_EQ(p.proposed.degraded_ratio, 0.5);  // the file's tolerances, not the defaults
  EXPECT_DOUBLE_EQ(p.proposed.fail_ratio, 0.2);
  EXPECT_EQ(p.proposed.gate_bytes, 16 * kMiB);
  EXPECT_EQ(p.proposed.source,
            "learned: median of 4 passing runs " + utc_time(kT0) + ".." + utc_time(kT0 + 3 * kDay) +
                " (ncclsmoke baseline learn)");
  EXPECT_EQ(r.written(), 1);
  const auto* band = find_band(*find_transport(*find_profile(r.merged, "ci"), "socket"), 4);
  ASSERT_NE(band, nullptr);
  EXPECT_DOUBLE_EQ(band->busbw_gbps, 1.175);
}

TEST(BaselineLearn, UsesOnlyTheNewestLastRunsPerKey) {
  std::vector<LearnGate> g;
  // Old runs at 100 GB/s, then five at 1..5: --last 5 must see only the newest five.
  for (int i = 0; i < 6; ++i) g.push_back(gate("old" + std::to_string(i), kT0 + i, 100));
  for (int i = 0; i < 5; ++i) g.push_back(gate("new" + std::to_string(i), kT0 + 100 + i, 1 + i));
  auto r = learn_baselines(g, profiles(), opts(5, 3));
  ASSERT_EQ(r.proposals.size(), 1u);
  EXPECT_EQ(r.proposals[0].runs, 5);
  EXPECT_EQ(r.proposals[0].runs_available, 11);
  EXPECT_DOUBLE_EQ(r.proposals[0].median_gbps, 3);
  EXPECT_EQ(r.proposals[0].run_ids.front(), "new0");
}

TEST(BaselineLearn, MinRunsKeysAreReportedNotProposed) {
  std::vector<LearnGate> g{gate("a", kT0, 1.0), gate("b", kT0 + 1, 1.2)};
  auto r = learn_baselines(g, profiles(), opts(10, 3));
  ASSERT_EQ(r.proposals.size(), 1u);
  EXPECT_EQ(r.proposals[0].status, Proposal::Status::kNotEnough);
  EXPECT_EQ(r.written(), 0);
  EXPECT_TRUE(same_profiles(r.merged, profiles()));  // nothing changed
  EXPECT_NE(diff_text(r, "p.yaml").find("not enough runs (2 of 3)"), std::string::npos)
      << diff_text(r, "p.yaml");
}

TEST(BaselineLearn, GroupsByWorldSizeAndGateSize) {
  std::vector<LearnGate> g;
  for (int i = 0; i < 3; ++i) {
    g.push_back(gate("w4-" + std::to_string(i), kT0 + i, 2.0));               // world 4, 16 MiB
    g.push_back(gate("w2-" + std::to_string(i), kT0 + i, 4.0, 2));            // world 2, 16 MiB
    g.push_back(gate("w8-" + std::to_string(i), kT0 + i, 1.0, 4, 8 * kMiB));  // world 4, 8 MiB
  }
  auto r = learn_baselines(g, profiles(), opts());
  ASSERT_EQ(r.proposals.size(), 3u);
  const auto* w4 = find(r, "socket", 4, 16 * kMiB);
  const auto* w2 = find(r, "socket", 2, 16 * kMiB);
  const auto* w4small = find(r, "socket", 4, 8 * kMiB);
  ASSERT_TRUE(w4 && w2 && w4small);
  EXPECT_DOUBLE_EQ(w4->median_gbps, 2.0);
  EXPECT_DOUBLE_EQ(w2->median_gbps, 4.0);
  EXPECT_DOUBLE_EQ(w4small->median_gbps, 1.0);
  // World 4 has a band at 16 MiB: that gate size keeps the slot; the 8 MiB one is not written.
  EXPECT_EQ(w4->status, Proposal::Status::kChanged);
  EXPECT_EQ(w4small->status, Proposal::Status::kNotWritten);
  // World 2 had only the any-world-size band: a new exact band with that band's tolerances.
  EXPECT_EQ(w2->status, Proposal::Status::kNew);
  EXPECT_EQ(w2->current_world_size, 0);
  EXPECT_DOUBLE_EQ(w2->proposed.degraded_ratio, 0.85);
  const auto& socket = *find_transport(*find_profile(r.merged, "ci"), "socket");
  EXPECT_EQ(socket.by_world_size.size(), 3u);  // 0 (kept), 2 (new), 4 (changed)
  EXPECT_DOUBLE_EQ(socket.by_world_size.at(0).busbw_gbps, 0.5);
  EXPECT_DOUBLE_EQ(socket.by_world_size.at(2).busbw_gbps, 4.0);
  EXPECT_EQ(socket.by_world_size.at(4).gate_bytes, 16 * kMiB);
}

TEST(BaselineLearn, SyntheticNanOtherVerdictsAndProfilesAreExcluded) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<LearnGate> g{gate("a", kT0, 1.0), gate("b", kT0 + 1, 1.0), gate("c", kT0 + 2, 1.0)};
  auto syn = gate("s", kT0 + 3, 50.0);
  syn.synthetic = true;
  g.push_back(syn);
  g.push_back(gate("n", kT0 + 4, nan));
  g.push_back(gate("i", kT0 + 5, std::numeric_limits<double>::infinity()));
  g.push_back(gate("f", kT0 + 6, 0.01, 4, 16 * kMiB, "socket", "fail"));
  g.push_back(gate("d", kT0 + 7, 0.02, 4, 16 * kMiB, "socket", "degraded"));
  g.push_back(gate("o", kT0 + 8, 9.0, 4, 16 * kMiB, "socket", "pass", "other"));
  auto r = learn_baselines(g, profiles(), opts());
  ASSERT_EQ(r.proposals.size(), 1u);
  EXPECT_EQ(r.proposals[0].runs, 3);
  EXPECT_DOUBLE_EQ(r.proposals[0].median_gbps, 1.0);
  EXPECT_EQ(r.excluded_synthetic, 1);
  EXPECT_EQ(r.excluded_unmeasured, 2);
  EXPECT_EQ(r.excluded_verdict, 2);
  EXPECT_EQ(r.excluded_other_profile, 1);
  EXPECT_EQ(r.runs_accepted, 3);
}

TEST(BaselineLearn, IncludeDegradedAdmitsOnlyBandwidthOnlyDegradedRuns) {
  std::vector<LearnFinding> f;
  auto finding = [](const std::string& run, AnyCode code, Severity sev) {
    LearnFinding x;
    x.run_id = run;
    x.code = code;
    x.severity = sev;
    return x;
  };
  f.push_back(finding("d1", Code::BANDWIDTH_REGRESSION, Severity::warning));
  f.push_back(finding("d1", AnyCode::from_text("SOMETHING_INFO"), Severity::info));
  f.push_back(finding("d2", Code::BANDWIDTH_REGRESSION, Severity::warning));
  f.push_back(finding("d2", Code::STRAGGLER, Severity::warning));
  f.push_back(finding("d3", Code::BANDWIDTH_REGRESSION, Severity::error));
  auto allowed = degraded_only_by_bandwidth(f);
  EXPECT_EQ(allowed, (std::set<std::string>{"d1"}));

  std::vector<LearnGate> g{gate("p1", kT0, 1.0), gate("p2", kT0 + 1, 1.0),
                             gate("d1", kT0 + 2, 2.0, 4, 16 * kMiB, "socket", "degraded"),
                             gate("d2", kT0 + 3, 2.0, 4, 16 * kMiB, "socket", "degraded")};
  auto o = opts();
  EXPECT_EQ(learn_baselines(g, profiles(), o).proposals[0].status,
            Proposal::Status::kNotEnough);  // 2 passing runs only
  o.include_degraded = true;
  o.degraded_findings = f;
  auto r = learn_baselines(g, profiles(), o);
  EXPECT_EQ(r.proposals[0].runs, 3);  // p1, p2, d1 (d2 had a STRAGGLER)
  EXPECT_DOUBLE_EQ(r.proposals[0].median_gbps, 1.0);
}

TEST(BaselineLearn, UnknownProfileNamesItAndListsTheFile) {
  auto o = opts();
  o.profile = "p5-typo";
  try {
    learn_baselines({}, profiles(), o);
    FAIL() << "expected LearnError";
  } catch (const LearnError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'p5-typo'"), std::string::npos) << m;
    EXPECT_NE(m.find("ci, other"), std::string::npos) << m;
  }
  EXPECT_THROW(learn_baselines({}, profiles(), opts(2, 3)), LearnError);  // min-runs > last
  EXPECT_THROW(learn_baselines({}, profiles(), opts(0, 0)), LearnError);
}

TEST(BaselineLearn, DiffTextShowsChangeNewNotEnoughAndKept) {
  std::vector<LearnGate> g;
  for (int i = 0; i < 3; ++i) {
    g.push_back(gate("s" + std::to_string(i), kT0 + i, 1.5));                           // +50%
    g.push_back(gate("m" + std::to_string(i), kT0 + i, 0.25, 2, 4 * kMiB, "mpi"));      // new
  }
  g.push_back(gate("w8", kT0, 3.0, 8));  // 1 run at world 8
  auto r = learn_baselines(g, profiles(), opts());
  std::string d = diff_text(r, "profiles.yaml");
  EXPECT_NE(d.find("profile ci (profiles.yaml)"), std::string::npos) << d;
  EXPECT_NE(d.find("socket world_size 4 gate 16 MiB: 1 GB/s -> 1.5 GB/s (+50.0%)"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("mpi world_size 2 gate 4 MiB: new 0.25 GB/s (transport not in the profile: "
                   "added with required: false)"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("socket world_size 8 gate 16 MiB: not enough runs (1 of 3)"), std::string::npos)
      << d;
  // Bands the history has no runs for are listed as kept.
  EXPECT_NE(d.find("fabric world_size 2 gate 64 MiB: 0.3 GB/s kept"), std::string::npos) << d;
  EXPECT_NE(d.find("socket world_size any gate 16 MiB: 0.5 GB/s kept"), std::string::npos) << d;
  const auto* mpi = find_transport(*find_profile(r.merged, "ci"), "mpi");
  ASSERT_NE(mpi, nullptr);
  EXPECT_FALSE(mpi->required);
}

TEST(BaselineLearn, MergedYamlLoadsBackIdentically) {
  std::vector<LearnGate> g;
  for (int i = 0; i < 3; ++i) {
    g.push_back(gate("s" + std::to_string(i), kT0 + i, 1.23456789 + i * 0.001));
    g.push_back(gate("m" + std::to_string(i), kT0 + i, 0.000123456, 2, 4 * kMiB, "mpi"));
  }
  auto r = learn_baselines(g, profiles(), opts());
  ASSERT_EQ(r.written(), 2);
  std::string text = merged_yaml(r, "written by a test\nsecond line");
  EXPECT_EQ(text.rfind("# written by a test\n# second line\n", 0), 0u) << text;
  auto back = load_profiles(text);
  EXPECT_TRUE(same_profiles(back, r.merged)) << text;
  // Quoted strings stay strings ("1.0"), booleans and numbers keep their types.
  const auto& fabric = *find_transport(*find_profile(back, "ci"), "fabric");
  EXPECT_EQ(fabric.identity.at("version"), "1.0");
  EXPECT_EQ(fabric.identity.at("gdr"), false);
  EXPECT_FALSE(fabric.required);
  EXPECT_TRUE(find_transport(*find_profile(back, "other"), "nccl")->by_world_size.empty());
  const auto& socket = *find_transport(*find_profile(back, "ci"), "socket");
  EXPECT_DOUBLE_EQ(socket.by_world_size.at(4).busbw_gbps, 1.236);  // 4 significant digits
  EXPECT_DOUBLE_EQ(find_transport(*find_profile(back, "ci"), "mpi")->by_world_size.at(2).busbw_gbps,
                   0.0001235);
  // The unchanged input also round-trips on its own.
  EXPECT_TRUE(same_profiles(load_profiles(profiles_to_yaml(profiles(), "")), profiles()));
}

TEST(BaselineLearn, ExampleProfilesFileRoundTrips) {
  auto example = load_profiles_file(NCCLSMOKE_PROFILES_EXAMPLE);
  auto back = load_profiles(profiles_to_yaml(example, "round trip"));
  EXPECT_TRUE(same_profiles(back, example));
}

TEST(BaselineLearn, SameProfilesSeesDifferences) {
  auto a = profiles();
  auto b = profiles();
  EXPECT_TRUE(same_profiles(a, b));
  b[0].transports[0].by_world_size.at(4).fail_ratio = 0.21;
  EXPECT_FALSE(same_profiles(a, b));
  b = profiles();
  b[0].transports[1].identity["provider"] = "efa";
  EXPECT_FALSE(same_profiles(a, b));
}

}  // namespace
}  // namespace ncclsmoke::results
