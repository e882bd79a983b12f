#include "results/verdict/alike.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "results/verdict/finding_codes.h"
#include "results/verdict/schema.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

std::string host_of(int rank) { return "h" + std::to_string(rank / 8); }

// A world's verdict of `world` ranks, 8 a host: each rank has an identity per transport and a
// row per transport and size (busbw = its rank, so the spread is known); the world rows too.
Verdict fleet(int world, const std::vector<std::string>& transports, const std::vector<std::int64_t>& sizes) {
  Verdict v;
  v.run_id = "20261207T000000Z-00000001";
  v.started_at = "2026-12-07T00:00:00Z";
  v.scope = Scope::global;
  v.reporting_rank = 0;
  v.verdict = Outcome::pass;
  v.exit_code = 0;
  v.world.size = world;
  for (int r = 0; r < world; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.status = RankStatus::joined;
    ri.host = host_of(r);
    ri.pid = 1000 + r;
    v.ranks.push_back(ri);
  }
  for (const auto& t : transports) {
    for (auto bytes : sizes) {
      TransportRow world_row;
      world_row.transport = t;
      world_row.bytes = bytes;
      world_row.count = bytes / 4;
      world_row.time_us = 10;
      world_row.algbw_gbps = world_row.busbw_gbps = 1.5;
      world_row.wrong = 0;
      v.transports.push_back(world_row);
      for (int r = 0; r < world; ++r) {
        TransportRow row = world_row;
        row.rank = r;
        row.busbw_gbps = r;
        row.time_us = r % 2 ? std::nan("") : 5.0;  // half not measured: left out of the spread
        v.transports.push_back(row);
      }
    }
    for (int r = 0; r < world; ++r) {
      TransportIdentity id;
      id.transport = t;
      id.rank = r;
      id.expected = json{{"network", "Socket"}};
      id.observed = {{"interface", r % 100 == 5 ? "lo" : "eth0"},
                     {"listen", "10.0." + std::to_string(r / 250) + "." + std::to_string(r % 250) + ":4000"},
                     {"nconn", 1},
                     {"chunk_bytes", 1048576},
                     {"link_stats", {{"to_next", {{"rtt_us", r}, {"host", host_of(r + 1)}}}}}};
      if (r % 2) id.observed["link_stats"]["to_next"]["retrans"] = 3;
      v.identities.push_back(id);
    }
  }
  TransportIdentity world_id;
  world_id.transport = transports.front();
  world_id.observed = {{"interface", "eth0"}};
  v.identities.push_back(world_id);
  return v;
}

bool has_identity(const Verdict& v, const std::string& transport, int rank) {
  return std::any_of(v.identities.begin(), v.identities.end(), [&](const TransportIdentity& id) {
    return id.transport == transport && id.rank == rank;
  });
}

TEST(Alike, AWorldOfAtMost1024RanksIsWrittenInFull) {
  Verdict v = fleet(1024, {"socket"}, {1024});
  Verdict s = summarise_alike(v);
  EXPECT_TRUE(s.alike.is_null());
  EXPECT_EQ(to_json(s), to_json(v));
  EXPECT_FALSE(to_json(s).contains("alike"));
}

TEST(Alike, PastIt_TheRanksNoFindingNamesAreSummarisedAndTheNamedStayWhole) {
  Verdict v = fleet(2048, {"socket"}, {1024, 1 << 20});
  v.findings.push_back(make_finding(Code::SLOW_HOST, "rank 77 is slow", {77}, {host_of(77)}));
  v.findings.push_back(make_finding(Code::NIC_ERRORS, "host h100 counts NIC errors", {}, {"h100"}));
  v.verdict = Outcome::fail;
  v.exit_code = 1;
  Verdict s = summarise_alike(v);
  ASSERT_TRUE(s.alike.is_object());

  // In full: the world-wide identity, the lowest rank, the named rank and its host (72..79), and
  // every rank of the named host (800..807).
  std::set<int> whole;
  for (const auto& id : s.identities) whole.insert(id.rank);
  std::set<int> expected{-1, 0};
  for (int r = 72; r < 80; ++r) expected.insert(r);
  for (int r = 800; r < 808; ++r) expected.insert(r);
  EXPECT_EQ(whole, expected);
  for (int r : {77, 800, 807}) EXPECT_TRUE(has_identity(s, "socket", r)) << r;
  // Rows stay whole for the ranks a finding lists (77, its reporter ranks, a peer), not for the
  // rest of a named host, nor for a transport's lowest rank.
  std::set<int> row_ranks;
  for (const auto& r : s.transports) row_ranks.insert(r.rank);
  EXPECT_EQ(row_ranks, (std::set<int>{-1, 77}));

  const json& ids = s.alike.at("identities");
  ASSERT_EQ(ids.size(), 1u);
  const json& g = ids[0];
  EXPECT_EQ(g["transport"], "socket");
  EXPECT_EQ(g["rank_count"], 2048 - 17);
  EXPECT_EQ(g["ranks"], json::parse("[[1,71],[80,799],[808,2047]]"));
  EXPECT_EQ(g["expected"], json({{"network", "Socket"}}));
  EXPECT_EQ(g["common"]["nconn"], 1);
  EXPECT_EQ(g["common"]["chunk_bytes"], 1048576);
  EXPECT_FALSE(g["common"].contains("interface"));
  // The rtt spread: ranks 1..2047 without the 16 kept; the lower median of the summarised ones.
  std::vector<int> summarised;
  for (int r = 1; r < 2048; ++r)
    if (!expected.count(r)) summarised.push_back(r);
  const auto& rtt = g["spread"]["link_stats.to_next.rtt_us"];
  EXPECT_EQ(rtt["min"], 1);
  EXPECT_EQ(rtt["max"], 2047);
  EXPECT_EQ(rtt["median"], summarised[(summarised.size() - 1) / 2]);
  EXPECT_FALSE(rtt.contains("rank_count"));
  // Present on odd ranks only: the spread says how many had it.
  const auto& retrans = g["spread"]["link_stats.to_next.retrans"];
  EXPECT_EQ(retrans["min"], 3);
  EXPECT_EQ(retrans["rank_count"],
            std::count_if(summarised.begin(), summarised.end(), [](int r) { return r % 2; }));
  // A string with two values lists which ranks had each; one with a value a rank is counted.
  const auto& iface = g["values"]["interface"];
  EXPECT_EQ(iface.size(), 2u);
  EXPECT_EQ(iface["lo"][0], json::array({5, 5}));
  EXPECT_EQ(g["distinct"]["listen"], 2048 - 17);
  std::set<std::string> next_hosts;
  for (int r : summarised) next_hosts.insert(host_of(r + 1));
  EXPECT_EQ(g["distinct"]["link_stats.to_next.host"], next_hosts.size());

  const json& rows = s.alike.at("transports");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["bytes"], 1024);
  EXPECT_EQ(rows[1]["bytes"], 1 << 20);
  EXPECT_EQ(rows[0]["rank_count"], 2048 - 1);  // rank 0 too: only rank 77's rows stay
  EXPECT_EQ(rows[0]["busbw_gbps"]["min"], 0);
  EXPECT_EQ(rows[0]["busbw_gbps"]["max"], 2047);
  EXPECT_EQ(rows[0]["time_us"]["max"], 5.0);  // the unmeasured (NaN) halves are left out
  EXPECT_EQ(rows[0]["wrong"], 0);
  EXPECT_EQ(rows[0]["count"], 256);

  // It is a verdict: the schema takes it, both readers read it alike, and it reads back whole.
  const json doc = to_json(s);
  EXPECT_EQ(doc["schema_minor"], 5);
  EXPECT_TRUE(validate_verdict_json(doc).empty());
  auto fast = verdict_from_text_fast(doc.dump());
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(to_json(*fast), doc);
  EXPECT_EQ(to_json(verdict_from_json(doc)), doc);
}

TEST(Alike, NothingLeftToSummariseLeavesTheVerdictAsItWas) {
  // Identities and rows for ranks 0..9 only, each of them listed by a finding: nothing is
  // summarised, nothing is added.
  Verdict v = fleet(10, {"socket"}, {1024});
  for (int r = 10; r < 1100; ++r) {
    RankInfo ri = v.ranks.back();
    ri.rank = r;
    v.ranks.push_back(ri);
  }
  v.findings.push_back(make_finding(Code::NIC_ERRORS, "ranks 0-9 count NIC errors",
                                    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  Verdict s = summarise_alike(v);
  EXPECT_TRUE(s.alike.is_null());
  EXPECT_EQ(to_json(s), to_json(v));
}

TEST(Alike, SixteenThousandRanksWithOnePercentNamedStayUnder16MiB) {
  const int world = 16384;
  Verdict v = fleet(world, {"socket", "fabric", "nccl"},
                    {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24});
  std::vector<int> named;
  for (int r = 3; r < world; r += 100) {
    named.push_back(r);
    v.findings.push_back(make_finding(Code::GPU_XID, "xid on rank " + std::to_string(r), {r}, {host_of(r)}));
  }
  // In full: 393,240 rows and 49,153 identities, about 120 MB of JSON.
  ASSERT_EQ(v.transports.size(), 3u * 8 * (world + 1));
  Verdict s = summarise_alike(v);
  const std::size_t written = to_json(s).dump(2).size();
  std::printf("16,384 ranks x 3 transports x 8 sizes, 164 ranks named: %zu bytes written\n", written);
  EXPECT_LT(written, std::size_t{16} << 20);
  for (int r : named)
    for (const char* t : {"socket", "fabric", "nccl"}) EXPECT_TRUE(has_identity(s, t, r)) << t << " " << r;
  EXPECT_EQ(s.alike["identities"].size(), 3u);
  EXPECT_EQ(s.alike["transports"].size(), 24u);
}

}  // namespace
}  // namespace ncclsmoke::results
