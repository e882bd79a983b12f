// The judging rules, each both ways, fail-closed cases, several findings at once, synthetic rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "results/judging/classify.h"
#include "results/verdict/finding_codes.h"
#include "results/judging/judge.h"
#include "results/judging/nccl_judge.h"

using namespace ncclsmoke::results;
using nlohmann::json;

namespace {

constexpr std::int64_t kGate = 64LL << 20;

const char* kProfiles = R"(
profiles:
  - name: test-efa
    transports:
      - transport: nccl
        identity: {network: Libfabric, provider: efa, gdr: true}
        baselines:
          - {world_size: 2, busbw_gbps: 100, gate_bytes: 67108864, source: "test"}
      - transport: fabric
        identity: {provider: efa}
        baselines:
          - {busbw_gbps: 50, gate_bytes: 67108864, source: "test"}
  - name: test-socket
    transports:
      - transport: socket
        baselines:
          - {world_size: 2, busbw_gbps: 1.0, gate_bytes: 67108864, degraded_ratio: 0.8,
             fail_ratio: 0.4, source: "test"}
)";

const Profile& profile(const std::string& name) {
  static const std::vector<Profile> ps = load_profiles(kProfiles);
  const Profile* p = find_profile(ps, name);
  if (!p) throw std::runtime_error("no profile " + name);
  return *p;
}

RankInfo joined(int rank, const std::string& host) {
  RankInfo r;
  r.rank = rank;
  r.host = host;
  return r;
}

Verdict world(int n) {
  Verdict v;
  v.world.size = n;
  for (int r = 0; r < n; ++r) v.ranks.push_back(joined(r, "host-" + std::to_string(r)));
  return v;
}

TransportRow row(const std::string& t, int rank, double busbw, double time_us = 1000,
                 std::int64_t bytes = kGate) {
  TransportRow r;
  r.transport = t;
  r.rank = rank;
  r.bytes = bytes;
  r.busbw_gbps = busbw;
  r.algbw_gbps = busbw;
  r.time_us = time_us;
  r.gate = true;
  return r;
}

void add_phase(Verdict& v, const std::string& t, const std::string& status,
               const std::string& detail = "") {
  v.phases.push_back({"transport:" + t, parse_phase_status(status).value(), 1.0, true, detail});
}

std::vector<const Finding*> with_code(const std::vector<Finding>& fs, const std::string& code) {
  std::vector<const Finding*> out;
  for (const auto& f : fs)
    if (f.code.str() == code) out.push_back(&f);
  return out;
}

std::string codes(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += to_string(f.code) + "/" + to_string(f.severity) + ": " + f.message + "\n";
  return s;
}

// A healthy socket run on test-socket.
Verdict healthy_socket() {
  Verdict v = world(2);
  add_phase(v, "socket", "pass");
  v.transports.push_back(row("socket", -1, 1.1));
  v.transports.push_back(row("socket", 0, 1.1));
  v.transports.push_back(row("socket", 1, 1.1));
  return v;
}

// A healthy nccl run on test-efa (fabric not run: that alone is BASELINE_MISSING).
Verdict healthy_nccl() {
  Verdict v = world(2);
  add_phase(v, "nccl", "pass");
  v.transports.push_back(row("nccl", -1, 105));
  for (int r = 0; r < 2; ++r)
    v.identities.push_back({"nccl", r, json(),
                            {{"network", "AWS Libfabric"}, {"provider", "efa"}, {"gdr", true}}});
  return v;
}

}  // namespace

TEST(Judge, IdentityValueMatching) {
  EXPECT_TRUE(identity_value_matches("network", "Libfabric", "AWS Libfabric"));
  EXPECT_TRUE(identity_value_matches("network", "libfabric", "LIBFABRIC"));
  EXPECT_FALSE(identity_value_matches("network", "Libfabric", "Socket"));
  EXPECT_TRUE(identity_value_matches("provider", "efa", "efa;ofi_rxd"));
  EXPECT_FALSE(identity_value_matches("provider", "efa", "tcp;ofi_rxm"));
  EXPECT_TRUE(identity_value_matches("provider", "tcp", "TCP;ofi_rxm"));
  EXPECT_TRUE(identity_value_matches("gdr", true, true));
  EXPECT_TRUE(identity_value_matches("gdr", true, 1));
  EXPECT_TRUE(identity_value_matches("gdr", false, "false"));
  EXPECT_FALSE(identity_value_matches("gdr", true, false));
  EXPECT_FALSE(identity_value_matches("gdr", true, "maybe"));
}

TEST(Judge, HealthyRunsHaveNoFindings) {
  auto fs = judge(healthy_socket(), &profile("test-socket"));
  EXPECT_TRUE(fs.empty()) << codes(fs);
  Verdict v = healthy_socket();
  v.findings = fs;
  apply_verdict(v);
  EXPECT_EQ(v.verdict, Outcome::pass);
}

TEST(Judge, IdentityMismatchIsSilentFallback) {
  Verdict v = healthy_nccl();
  v.identities[1].observed = {{"network", "Socket"}, {"provider", "tcp;ofi_rxm"}, {"gdr", false}};
  v.transports[0].busbw_gbps = 2;
  auto fs = judge(v, &profile("test-efa"));
  auto sf = with_code(fs, "SILENT_FALLBACK");
  ASSERT_EQ(sf.size(), 1u) << codes(fs);
  EXPECT_EQ(sf[0]->severity, Severity::error);
  EXPECT_EQ(sf[0]->ranks, std::vector<int>{1});
  EXPECT_EQ(sf[0]->hosts, std::vector<std::string>{"host-1"});
  EXPECT_NE(sf[0]->message.find("expected gdr=true, network=Libfabric, provider=efa; observed "
                                 "gdr=false, network=Socket, provider=tcp;ofi_rxm on rank 1"),
            std::string::npos)
      << sf[0]->message;
  EXPECT_NE(sf[0]->hint.find("network=Libfabric"), std::string::npos) << sf[0]->hint;
  EXPECT_NE(sf[0]->hint.find("network=Socket"), std::string::npos) << sf[0]->hint;
  EXPECT_EQ(sf[0]->evidence["mismatches"].size(), 3u);  // network, provider, gdr on rank 1
  EXPECT_DOUBLE_EQ(sf[0]->evidence["bandwidth"]["busbw_gbps"].get<double>(), 2);
  // The cause is known: no separate regression or "suspected" finding for it.
  EXPECT_TRUE(with_code(fs, "BANDWIDTH_REGRESSION").empty()) << codes(fs);
}

TEST(Judge, MatchingIdentityIsNoFallback) {
  auto fs = judge(healthy_nccl(), &profile("test-efa"));
  EXPECT_TRUE(with_code(fs, "SILENT_FALLBACK").empty()) << codes(fs);
  EXPECT_TRUE(with_code(fs, "BANDWIDTH_REGRESSION").empty()) << codes(fs);
}

TEST(Judge, FabricProviderCoreIsCompared) {
  Verdict v = world(2);
  add_phase(v, "fabric", "pass");
  v.transports.push_back(row("fabric", -1, 55));
  v.identities.push_back({"fabric", 0, json(), {{"provider", "tcp;ofi_rxm"}}});
  auto fs = judge(v, &profile("test-efa"));
  auto sf = with_code(fs, "SILENT_FALLBACK");
  ASSERT_EQ(sf.size(), 1u) << codes(fs);
  EXPECT_NE(sf[0]->message.find("provider=efa"), std::string::npos);
  EXPECT_NE(sf[0]->message.find("tcp;ofi_rxm"), std::string::npos);
  v.identities[0].observed["provider"] = "efa;ofi_rxd";
  EXPECT_TRUE(with_code(judge(v, &profile("test-efa")), "SILENT_FALLBACK").empty());
}

TEST(Judge, SuspectedFallbackWhenIdentityUnreadAndBandwidthFarBelow) {
  Verdict v = healthy_nccl();
  v.identities.clear();  // identity not read
  v.transports[0].busbw_gbps = 3;  // 3% of 100
  auto fs = judge(v, &profile("test-efa"));
  auto sf = with_code(fs, "SILENT_FALLBACK");
  ASSERT_EQ(sf.size(), 1u) << codes(fs);
  EXPECT_EQ(sf[0]->severity, Severity::warning);
  EXPECT_NE(sf[0]->message.find("suspected"), std::string::npos);
  EXPECT_DOUBLE_EQ(sf[0]->evidence["busbw_gbps"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(sf[0]->evidence["baseline"]["busbw_gbps"].get<double>(), 100);
  auto br = with_code(fs, "BANDWIDTH_REGRESSION");
  ASSERT_EQ(br.size(), 1u);
  EXPECT_EQ(br[0]->severity, Severity::error);

  // Not suspected: 40% is a regression, not another transport class's band.
  v.transports[0].busbw_gbps = 40;
  fs = judge(v, &profile("test-efa"));
  EXPECT_TRUE(with_code(fs, "SILENT_FALLBACK").empty()) << codes(fs);
  // Not suspected: identity read and matching, even at 3% (plain regression).
  v = healthy_nccl();
  v.transports[0].busbw_gbps = 3;
  fs = judge(v, &profile("test-efa"));
  EXPECT_TRUE(with_code(fs, "SILENT_FALLBACK").empty()) << codes(fs);
  EXPECT_EQ(with_code(fs, "BANDWIDTH_REGRESSION").size(), 1u);
}

TEST(Judge, BandwidthRegressionThresholds) {
  auto judge_at = [](double busbw) {
    Verdict v = healthy_socket();
    for (auto& r : v.transports) r.busbw_gbps = busbw;
    return judge(v, &profile("test-socket"));
  };
  EXPECT_TRUE(judge_at(0.85).empty());  // above 0.8 x 1.0
  auto fs = judge_at(0.7);               // degraded band
  ASSERT_EQ(fs.size(), 1u) << codes(fs);
  EXPECT_EQ(fs[0].code, Code::BANDWIDTH_REGRESSION);
  EXPECT_EQ(fs[0].severity, Severity::warning);
  EXPECT_EQ(finding_effect(fs[0]), Outcome::degraded);
  EXPECT_NE(fs[0].message.find("0.7 GB/s"), std::string::npos) << fs[0].message;
  EXPECT_DOUBLE_EQ(fs[0].evidence["ratio"].get<double>(), 0.7);
  fs = judge_at(0.3);  // below fail_ratio 0.4
  ASSERT_EQ(fs.size(), 1u) << codes(fs);
  EXPECT_EQ(fs[0].severity, Severity::error);
  EXPECT_EQ(finding_effect(fs[0]), Outcome::fail);
}

TEST(Judge, WorstRankUsedWhenNoWorldRow) {
  Verdict v = healthy_socket();
  v.transports.erase(v.transports.begin());  // drop the world row
  v.transports[1].busbw_gbps = 0.5;
  auto fs = judge(v, &profile("test-socket"));
  auto br = with_code(fs, "BANDWIDTH_REGRESSION");
  ASSERT_EQ(br.size(), 1u) << codes(fs);
  EXPECT_EQ(br[0]->ranks, std::vector<int>{1});
  EXPECT_EQ(br[0]->hosts, std::vector<std::string>{"host-1"});
}

TEST(Judge, FailClosedNoProfile) {
  auto fs = judge(healthy_socket(), nullptr);
  ASSERT_EQ(with_code(fs, "BASELINE_MISSING").size(), 1u) << codes(fs);
  Verdict v = healthy_socket();
  v.findings = fs;
  apply_verdict(v);
  EXPECT_EQ(v.verdict, Outcome::inconclusive);
  // No rows at all and no profile: nothing to say here (the phases decide).
  EXPECT_TRUE(judge(world(2), nullptr).empty());
}

TEST(Judge, FailClosedNoBandForWorldSize) {
  Verdict v = healthy_socket();
  v.world.size = 4;
  v.ranks.push_back(joined(2, "host-2"));
  v.ranks.push_back(joined(3, "host-3"));
  auto fs = judge(v, &profile("test-socket"));
  auto bm = with_code(fs, "BASELINE_MISSING");
  ASSERT_EQ(bm.size(), 1u) << codes(fs);
  EXPECT_NE(bm[0]->message.find("world size 4"), std::string::npos);
  EXPECT_NE(bm[0]->hint.find("test-socket"), std::string::npos);
}

TEST(Judge, FailClosedSkippedTransport) {
  Verdict v = world(2);
  add_phase(v, "socket", "skipped", "not requested");
  auto fs = judge(v, &profile("test-socket"));
  auto bm = with_code(fs, "BASELINE_MISSING");
  ASSERT_EQ(bm.size(), 1u) << codes(fs);
  EXPECT_NE(bm[0]->message.find("skipped (not requested)"), std::string::npos) << bm[0]->message;
  EXPECT_EQ(finding_effect(*bm[0]), Outcome::inconclusive);
}

TEST(Judge, OptionalTransportMayBeAbsent) {
  std::vector<Profile> ps = load_profiles(R"(
profiles:
  - name: opt
    transports:
      - transport: socket
        baselines: [{busbw_gbps: 1, gate_bytes: 67108864, source: t}]
      - transport: fabric
        required: false
        identity: {provider: efa}
        baselines: [{busbw_gbps: 1, gate_bytes: 67108864, source: t}]
)");
  auto fs = judge(healthy_socket(), &ps[0]);
  EXPECT_TRUE(fs.empty()) << codes(fs);
  // When it did run it is judged like any other.
  Verdict v = healthy_socket();
  v.transports.push_back(row("fabric", -1, 0.1));
  fs = judge(v, &ps[0]);
  EXPECT_EQ(with_code(fs, "BANDWIDTH_REGRESSION").size(), 1u) << codes(fs);
  EXPECT_EQ(baseline_record(&ps[0], v)["transports"][1]["required"], false);
}

TEST(Judge, FailClosedMissingNumber) {
  Verdict v = healthy_socket();
  for (auto& r : v.transports) r.busbw_gbps = std::numeric_limits<double>::quiet_NaN();
  auto fs = judge(v, &profile("test-socket"));
  auto bm = with_code(fs, "BASELINE_MISSING");
  ASSERT_EQ(bm.size(), 1u) << codes(fs);
  EXPECT_NE(bm[0]->message.find("NaN"), std::string::npos);
  EXPECT_TRUE(with_code(fs, "BANDWIDTH_REGRESSION").empty());
}

TEST(Judge, FailClosedGateSizeDiffers) {
  Verdict v = healthy_socket();
  for (auto& r : v.transports) r.bytes = 1 << 20;
  auto fs = judge(v, &profile("test-socket"));
  auto bm = with_code(fs, "BASELINE_MISSING");
  ASSERT_EQ(bm.size(), 1u) << codes(fs);
  EXPECT_NE(bm[0]->message.find("run gated at 1048576"), std::string::npos) << bm[0]->message;
}

TEST(Judge, FailClosedTransportNotInProfile) {
  Verdict v = healthy_socket();
  add_phase(v, "mpi", "pass");
  v.transports.push_back(row("mpi", -1, 2));
  auto fs = judge(v, &profile("test-socket"));
  auto bm = with_code(fs, "BASELINE_MISSING");
  ASSERT_EQ(bm.size(), 1u) << codes(fs);
  EXPECT_NE(bm[0]->message.find("mpi: profile test-socket has no entry"), std::string::npos);
}

TEST(Judge, SyntheticRowsNeverComparedWithBaselines) {
  Verdict v = healthy_socket();
  for (auto& r : v.transports) {
    r.synthetic = true;
    r.busbw_gbps = 0.01;  // would be a hard regression if compared
  }
  v.transports[1].time_us = 100000;  // and a straggler if counted
  EXPECT_TRUE(judge(v, &profile("test-socket")).empty()) << codes(judge(v, &profile("test-socket")));
  EXPECT_TRUE(judge(v, nullptr).empty());
  // A real row next to synthetic ones is still judged.
  v.transports.push_back(row("socket", -1, 0.1));
  EXPECT_EQ(with_code(judge(v, &profile("test-socket")), "BANDWIDTH_REGRESSION").size(), 1u);
}

TEST(Judge, StragglerByTime) {
  Verdict v = world(4);
  for (int r = 0; r < 4; ++r) v.transports.push_back(row("socket", r, 1.0, 10000));
  EXPECT_TRUE(with_code(judge(v, nullptr), "STRAGGLER").empty());
  v.transports[2].time_us = 20000;  // 2x peers, 10 ms above
  auto fs = judge(v, nullptr);
  auto st = with_code(fs, "STRAGGLER");
  ASSERT_EQ(st.size(), 1u) << codes(fs);
  EXPECT_EQ(st[0]->ranks, std::vector<int>{2});
  EXPECT_EQ(st[0]->hosts, std::vector<std::string>{"host-2"});
  EXPECT_NE(st[0]->message.find("rank 2 (host host-2)"), std::string::npos);
  EXPECT_EQ(st[0]->severity, Severity::warning);
  // Below the ratio, or ratio met but under the 1 ms floor: no straggler.
  v.transports[2].time_us = 14000;
  EXPECT_TRUE(with_code(judge(v, nullptr), "STRAGGLER").empty());
  for (auto& r : v.transports) r.time_us = 100;
  v.transports[2].time_us = 900;  // 9x but only 0.8 ms above
  EXPECT_TRUE(with_code(judge(v, nullptr), "STRAGGLER").empty());
  // Non-gate rows are not used.
  for (auto& r : v.transports) r.gate = false;
  v.transports[2].time_us = 1e6;
  EXPECT_TRUE(with_code(judge(v, nullptr), "STRAGGLER").empty());
}

TEST(Judge, StragglerByBlockedSends) {
  Verdict v = world(3);
  auto stats = [](double s) { return json{{"link_stats", {{"to_next", {{"send_blocked_s", s}}}}}}; };
  v.identities.push_back({"socket", 0, json(), stats(0.1)});
  v.identities.push_back({"socket", 1, json(), stats(2.0)});
  v.identities.push_back({"socket", 2, json(), stats(0.3)});
  auto fs = judge(v, nullptr);
  auto st = with_code(fs, "STRAGGLER");
  ASSERT_EQ(st.size(), 1u) << codes(fs);
  EXPECT_EQ(st[0]->ranks, std::vector<int>{1});
  EXPECT_NE(st[0]->message.find("sending to rank 2 (host host-2)"), std::string::npos)
      << st[0]->message;
  EXPECT_EQ(st[0]->evidence["next_rank"], 2);
  // Not 3x every other, or under 0.5 s: nothing.
  v.identities[2].observed = stats(0.8);
  EXPECT_TRUE(with_code(judge(v, nullptr), "STRAGGLER").empty());
  v.identities[2].observed = stats(0.1);
  v.identities[1].observed = stats(0.45);
  EXPECT_TRUE(with_code(judge(v, nullptr), "STRAGGLER").empty());
}

TEST(Judge, SeveralFindingsAtOnce) {
  Verdict v = healthy_nccl();
  v.identities[0].observed["network"] = "Socket";  // SILENT_FALLBACK on nccl
  add_phase(v, "fabric", "skipped", "no efa provider");  // BASELINE_MISSING for fabric
  for (int r = 0; r < 3; ++r) v.transports.push_back(row("nccl", r, 100, r == 1 ? 50000 : 10000));
  v.ranks.push_back(joined(2, "host-2"));
  auto fs = judge(v, &profile("test-efa"));
  EXPECT_EQ(with_code(fs, "SILENT_FALLBACK").size(), 1u) << codes(fs);
  EXPECT_EQ(with_code(fs, "BASELINE_MISSING").size(), 1u) << codes(fs);
  ASSERT_EQ(with_code(fs, "STRAGGLER").size(), 1u) << codes(fs);
  EXPECT_EQ(with_code(fs, "STRAGGLER")[0]->ranks, std::vector<int>{1});
  v.findings = fs;
  apply_verdict(v);
  EXPECT_EQ(v.verdict, Outcome::fail);  // the error outranks inconclusive and degraded
}

// The run's own --nccl-net check and the profile's identity rule saw the same fallback: one
// finding, the profile's, with the per-rank log evidence folded in.
TEST(Judge, NcclNetCheckFoldsIntoTheProfilesFallback) {
  Verdict v = healthy_nccl();
  v.identities[1].observed["network"] = "Socket";
  // The run's own check as the rule makes it (nccl_judge.h): origin nccl_net_check.
  auto made = judge_nccl_network({{"network", "Libfabric"}, {"policy", "observe"}},
                                 {{"found", true}, {"network", "Socket"}, {"networks", {"Socket"}},
                                  {"log_lines", {"x"}}},
                                 1, "host-1");
  ASSERT_TRUE(made.has_value());
  Finding check = *made;
  ASSERT_TRUE(is_nccl_net_check(check));
  Finding other = make_finding(Code::STRAGGLER, "rank 0 slow", {0}, {"host-0"});
  std::vector<Finding> findings{check, other};
  add_judged_findings(findings, judge(v, &profile("test-efa")));
  auto sf = with_code(findings, "SILENT_FALLBACK");
  ASSERT_EQ(sf.size(), 1u) << codes(findings);
  EXPECT_EQ(sf[0]->evidence["transport"], "nccl");
  ASSERT_EQ(sf[0]->evidence["nccl_net_check"].size(), 1u);
  EXPECT_EQ(sf[0]->evidence["nccl_net_check"][0]["evidence"]["log_lines"][0], "x");
  EXPECT_EQ(sf[0]->ranks, std::vector<int>{1});
  EXPECT_EQ(with_code(findings, "STRAGGLER").size(), 1u);

  // Without a profile-side fallback, the run's own check stays as it was.
  std::vector<Finding> alone{check};
  add_judged_findings(alone, judge(healthy_nccl(), &profile("test-efa")));
  EXPECT_EQ(with_code(alone, "SILENT_FALLBACK").size(), 1u);
  EXPECT_TRUE(with_code(alone, "SILENT_FALLBACK")[0]->evidence.contains("log_lines"));

  // A finding that merely looks like the check (same evidence keys, no mark) is not folded.
  Finding lookalike = make_finding(Code::SILENT_FALLBACK, "someone else's fallback", {1}, {"host-1"},
                                   {{"expected", "a"}, {"observed", "b"}});
  lookalike.evidence = {{"expected", "Libfabric"}, {"observed", "Socket"}};
  std::vector<Finding> two{lookalike};
  add_judged_findings(two, judge(v, &profile("test-efa")));
  EXPECT_EQ(with_code(two, "SILENT_FALLBACK").size(), 2u) << codes(two);
}

// Link stats name the next rank themselves (to_next.rank): the slow link's receiver is that rank,
// not rank+1, whatever order a backend's ring takes.
TEST(Judge, StragglerLinkStatsUseTheNamedNextRank) {
  Verdict v = world(3);
  auto stats = [](double s, int next) {
    return json{{"link_stats", {{"to_next", {{"rank", next}, {"send_blocked_s", s}}}}}};
  };
  v.identities.push_back({"fabric", 0, json(), stats(0.1, 2)});
  v.identities.push_back({"fabric", 1, json(), stats(2.0, 0)});
  v.identities.push_back({"fabric", 2, json(), stats(0.3, 1)});
  auto fs = judge(v, nullptr);
  auto st = with_code(fs, "STRAGGLER");
  ASSERT_EQ(st.size(), 1u) << codes(fs);
  EXPECT_EQ(st[0]->evidence["next_rank"], 0);
  EXPECT_NE(st[0]->message.find("sending to rank 0"), std::string::npos) << st[0]->message;
}

TEST(Judge, BaselineRecord) {
  json none = baseline_record(nullptr, world(2));
  EXPECT_TRUE(none["profile"].is_null());
  json rec = baseline_record(&profile("test-efa"), world(2));
  EXPECT_EQ(rec["profile"], "test-efa");
  EXPECT_EQ(rec["world_size"], 2);
  ASSERT_EQ(rec["transports"].size(), 2u);
  EXPECT_EQ(rec["transports"][0]["transport"], "nccl");
  EXPECT_EQ(rec["transports"][0]["world_size_key"], 2);
  EXPECT_DOUBLE_EQ(rec["transports"][0]["band"]["busbw_gbps"].get<double>(), 100);
  EXPECT_EQ(rec["transports"][1]["world_size_key"], 0);  // fabric: "any" band
  json rec4 = baseline_record(&profile("test-efa"), world(4));
  EXPECT_TRUE(rec4["transports"][0]["band"].is_null());
  // It fits the verdict schema's "baseline" slot.
  Verdict v = healthy_socket();
  v.run_id = new_run_id();
  v.started_at = "2026-01-01T00:00:00Z";
  v.baseline = rec;
  apply_verdict(v);
  EXPECT_NO_THROW(verdict_from_json(to_json(v)));
}
