// The end of a run's screen (harness/common/summary_tables.h): the summary table has the live rows'
// shape (nccl-tests' columns, unprefixed), csv and json carry the same rows for scripts, the
// "carried by" lines name each transport's interface / provider / network and warn about a
// defaulted fabric provider and the variables that narrowed a choice; a pass with no baseline
// says how to learn one. And the run id launch hands its ranks (harness/world/job_identity.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "harness/common/progress.h"
#include "harness/common/summary_tables.h"
#include "harness/world/job_identity.h"
#include "results/verdict/finding_codes.h"

namespace ncclsmoke::harness {
namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> tokens(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

results::TransportRow row(const std::string& t, int rank, std::int64_t bytes, bool in_place,
                          double time_us, double busbw, std::int64_t wrong = 0) {
  results::TransportRow r;
  r.transport = t;
  r.rank = rank;
  r.bytes = bytes;
  r.count = bytes / 4;
  r.in_place = in_place;
  r.time_us = time_us;
  r.algbw_gbps = busbw;
  r.busbw_gbps = busbw;
  r.wrong = wrong;
  return r;
}

// Two ranks, socket at 1 and 2 MiB (both modes, the world's rows and rank 0's), gate 2 MiB.
results::Verdict sample() {
  results::Verdict v;
  v.run_id = "20261201T214708Z-55ed3275";
  v.verdict = results::Outcome::pass;
  v.world.size = 2;
  v.phases.push_back({"transport:socket", results::PhaseStatus::pass, 0.1, true, ""});
  for (int rank : {-1, 0})
    for (std::int64_t b : {1 << 20, 2 << 20})
      for (bool ip : {false, true}) {
        auto r = row("socket", rank, b, ip, b == (1 << 20) ? 458.1 : 12345.6,
                     ip ? 2.05 : (b == (2 << 20) ? 1.43 : 2.29));
        r.gate = b == (2 << 20);
        v.transports.push_back(r);
      }
  results::TransportIdentity id;
  id.transport = "socket";
  id.rank = 0;
  id.observed = {{"interface", "lo"}, {"address", "127.0.0.1"}, {"address_source", "store route"}};
  v.identities.push_back(id);
  id.rank = 1;
  v.identities.push_back(id);
  return v;
}

TEST(SummaryTable, TextHasTheLiveRowsShape) {
  const auto v = sample();
  const auto lines = lines_of(summary_table(v, TableFormat::text));
  // The same three header lines the live table prints (progress.h).
  const auto head = table_header_lines();
  auto at = std::find(lines.begin(), lines.end(), head[1]);
  ASSERT_NE(at, lines.end()) << summary_table(v, TableFormat::text);
  EXPECT_EQ(*(at - 1), head[0]);
  EXPECT_EQ(*(at + 1), head[2]);
  // nccl-tests' columns: size count type redop root, then time algbw busbw #wrong twice.
  EXPECT_EQ(tokens(head[1]),
            (std::vector<std::string>{"#", "size", "count", "type", "redop", "root", "time",
                                      "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                                      "#wrong"}));
  std::vector<std::string> rows;
  for (const auto& l : lines)
    if (!l.empty() && l[0] != '#') rows.push_back(l);
  ASSERT_EQ(rows.size(), 2u);  // one row per size: the world's, not rank 0's
  EXPECT_EQ(tokens(rows[0]),
            (std::vector<std::string>{"1048576", "262144", "float32", "sum", "-1", "458.1", "2.29",
                                      "2.29", "0", "458.1", "2.05", "2.05", "0"}));
  EXPECT_EQ(tokens(rows[1])[5], "12346");  // nccl-tests: no decimals from 10 ms on
  for (const auto& r : rows) {
    EXPECT_EQ(r.size(), head[1].size()) << r;  // aligned under the header
    EXPECT_EQ(r.rfind("socket", 0), std::string::npos);  // unprefixed
  }
  // The same row as the live table prints for the same figures.
  TableRow same;
  same.bytes = 1 << 20;
  same.count = (1 << 20) / 4;
  same.out_of_place = {true, 458.1, 2.29, 2.29, 0};
  same.in_place = {true, 458.1, 2.05, 2.05, 0};
  EXPECT_EQ(rows[0], table_row_line(same));
  const std::string text = summary_table(v, TableFormat::text);
  EXPECT_NE(text.find("# transport socket: all_reduce, 2 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("# gate: 2097152 B out-of-place"), std::string::npos) << text;
  EXPECT_NE(text.find("# Out of bounds values : 0 OK"), std::string::npos) << text;
  EXPECT_NE(text.find("# Avg bus bandwidth    : "), std::string::npos) << text;
}

TEST(SummaryTable, CsvParsesWithOneColumnPerHeader) {
  const auto lines = lines_of(summary_table(sample(), TableFormat::csv));
  ASSERT_EQ(lines.size(), 3u);
  const auto head = split(lines[0], ',');
  EXPECT_EQ(head.front(), "transport");
  EXPECT_EQ(head.back(), "gate");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    auto cells = split(lines[i], ',');
    ASSERT_EQ(cells.size(), head.size()) << lines[i];
    std::map<std::string, std::string> row;
    for (std::size_t c = 0; c < head.size(); ++c) row[head[c]] = cells[c];
    EXPECT_EQ(row["transport"], "socket");
    EXPECT_EQ(row["ranks"], "2");
    EXPECT_EQ(row["redop"], "sum");
    EXPECT_EQ(row["root"], "-1");
    EXPECT_EQ(row["oop_wrong"], "0");
    EXPECT_DOUBLE_EQ(std::stod(row["ip_busbw_gbps"]), 2.05);
    EXPECT_EQ(row["gate"], i == 2 ? "out-of-place" : "");
  }
  EXPECT_EQ(split(lines[1], ',')[2], "1048576");
}

TEST(SummaryTable, JsonParsesAsOneDocument) {
  const std::string text = summary_table(sample(), TableFormat::json);
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["run_id"], "20261201T214708Z-55ed3275");
  EXPECT_EQ(j["verdict"], "pass");
  ASSERT_EQ(j["rows"].size(), 2u);
  const auto& r = j["rows"][1];
  EXPECT_EQ(r["transport"], "socket");
  EXPECT_EQ(r["size"], 2 << 20);
  EXPECT_EQ(r["count"], (2 << 20) / 4);
  EXPECT_EQ(r["root"], -1);
  EXPECT_DOUBLE_EQ(r["out_of_place"]["busbw_gbps"].get<double>(), 1.43);
  EXPECT_EQ(r["in_place"]["wrong"], 0);
  EXPECT_EQ(r["gate"], "out-of-place");
  // Nothing measured: an empty document, still JSON.
  results::Verdict empty;
  EXPECT_EQ(nlohmann::json::parse(summary_table(empty, TableFormat::json))["rows"].size(), 0u);
  EXPECT_EQ(summary_table(empty, TableFormat::text), "");
}

TEST(SummaryTable, UncheckedAndUnmeasuredModes) {
  auto v = sample();
  v.transports.erase(std::remove_if(v.transports.begin(), v.transports.end(),
                                    [](const auto& r) { return r.in_place; }),
                     v.transports.end());
  for (auto& r : v.transports) r.wrong = -1;
  auto rows = lines_of(summary_table(v, TableFormat::text));
  std::vector<std::string> data;
  for (const auto& l : rows)
    if (!l.empty() && l[0] != '#') data.push_back(l);
  ASSERT_EQ(data.size(), 2u);
  auto t = tokens(data[0]);
  ASSERT_EQ(t.size(), 13u);
  EXPECT_EQ(t[8], "N/A");
  EXPECT_EQ(t[9], "-");
  EXPECT_NE(summary_table(v, TableFormat::text).find("Out of bounds values : N/A"),
            std::string::npos);
  auto cells = split(lines_of(summary_table(v, TableFormat::csv))[1], ',');
  EXPECT_EQ(cells[10], "");  // oop_wrong: not checked
  EXPECT_EQ(cells[11], "");  // ip_time_us: not measured
  auto j = nlohmann::json::parse(summary_table(v, TableFormat::json));
  EXPECT_TRUE(j["rows"][0]["in_place"].is_null());
  EXPECT_TRUE(j["rows"][0]["out_of_place"]["wrong"].is_null());
}

TEST(CarriedLines, NamesEachTransportsInterfaceProviderAndNetwork) {
  auto v = sample();
  v.phases.push_back({"transport:fabric", results::PhaseStatus::pass, 0.1, true, ""});
  v.phases.push_back({"transport:nccl", results::PhaseStatus::pass, 0.1, true, ""});
  results::TransportIdentity f;
  f.transport = "fabric";
  f.rank = 0;
  f.observed = {{"provider", "tcp;ofi_rxm"}, {"domain", "lo"}, {"libfabric_version", "1.17"},
                {"requested_provider", "tcp"}, {"requested_provider_from", "default"}};
  v.identities.push_back(f);
  results::TransportIdentity n;
  n.transport = "nccl";
  n.rank = 0;
  n.observed = {{"network", "IB"},
                {"gdr", true},
                {"nccl_log", {{"network", "IB"}, {"plugin", "aws-ofi-nccl 1.13.2"},
                              {"ofi_provider", "efa"}}}};
  v.identities.push_back(n);
  const std::string s = carried_lines(v);
  const auto lines = lines_of(s);
  EXPECT_NE(s.find("  socket  interface lo (chosen by the route to the store)\n"),
            std::string::npos) << s;  // two ranks alike: one line
  EXPECT_NE(s.find("  fabric  provider tcp;ofi_rxm, domain lo, libfabric 1.17\n"),
            std::string::npos) << s;
  EXPECT_NE(s.find("WARNING: tcp is the fabric transport's default: no --fabric-provider"),
            std::string::npos) << s;
  EXPECT_NE(s.find("  nccl    network IB, plugin aws-ofi-nccl 1.13.2, ofi provider efa, GDR"),
            std::string::npos) << s;
  // Asked for explicitly: no warning.
  v.identities[2].observed["requested_provider_from"] = "--fabric-provider";
  EXPECT_EQ(carried_lines(v).find("default"), std::string::npos) << carried_lines(v);
  // Different interfaces on different ranks: each with its ranks.
  v.identities[1].observed["interface"] = "eth0";
  EXPECT_NE(carried_lines(v).find("interface lo (chosen by the route to the store) (rank 0); "
                                  "interface eth0 (chosen by the route to the store) (rank 1)"),
            std::string::npos) << carried_lines(v);
}

TEST(CarriedLines, NamesTheVariablesThatNarrowedTheChoice) {
  results::Verdict v;
  v.phases.push_back({"transport:fabric", results::PhaseStatus::skipped, 0.1, true,
                      "open: libfabric has no provider 'tcp' for FI_EP_RDM; available: none"});
  v.phases.push_back({"transport:nccl", results::PhaseStatus::pass, 0.1, true, ""});
  v.env["FI_PROVIDER"] = "efa";
  v.env["NCCL_NET"] = "Socket";
  v.env["NCCL_DEBUG"] = "INFO";  // not a filter
  results::TransportIdentity n;
  n.transport = "nccl";
  n.observed = {{"nccl_log", nullptr}, {"net_requested", nullptr}};
  v.identities.push_back(n);
  const std::string s = carried_lines(v);
  EXPECT_NE(s.find("  fabric  skipped: open: libfabric has no provider 'tcp'"), std::string::npos)
      << s;
  EXPECT_NE(s.find("WARNING: FI_PROVIDER=efa in the environment limits the providers libfabric "
                   "offers"),
            std::string::npos) << s;
  EXPECT_NE(s.find("WARNING: NCCL_NET=Socket in the environment narrows what NCCL may choose"),
            std::string::npos) << s;
  EXPECT_EQ(s.find("NCCL_DEBUG"), std::string::npos) << s;
  EXPECT_NE(s.find("network not known (no NCCL log was read)"), std::string::npos) << s;
  // NCCL_SOCKET_IFNAME chose the socket transport's interface.
  results::Verdict w;
  w.phases.push_back({"transport:socket", results::PhaseStatus::pass, 0.1, true, ""});
  results::TransportIdentity id;
  id.transport = "socket";
  id.observed = {{"interface", "eth0"}, {"address_source", "NCCL_SOCKET_IFNAME"},
                 {"ifname_rule", "eth"}};
  w.identities.push_back(id);
  const std::string t = carried_lines(w);
  EXPECT_NE(t.find("interface eth0 (chosen by NCCL_SOCKET_IFNAME=eth)"), std::string::npos) << t;
  EXPECT_NE(t.find("WARNING: NCCL_SOCKET_IFNAME=eth in the environment chose the interface"),
            std::string::npos) << t;
  // No transport asked for: nothing.
  EXPECT_EQ(carried_lines(results::Verdict{}), "");
}

TEST(BaselineHint, ANoBaselinePassSaysHowToLearnOne) {
  auto v = sample();
  const std::string h = baseline_hint(v);
  EXPECT_NE(h.find("no baseline"), std::string::npos) << h;
  EXPECT_NE(h.find("ncclsmoke baseline learn --history DB --profiles FILE --profile P"),
            std::string::npos) << h;
  EXPECT_NE(h.find("--profiles FILE --profile P"), std::string::npos) << h;
  // A baseline was there: nothing to say.
  v.baseline = {{"transports",
                 {{{"transport", "socket"},
                   {"band", {{"gate_bytes", 2 << 20}, {"busbw_gbps", 1.0}}}}}}};
  EXPECT_EQ(baseline_hint(v), "");
  // BASELINE_MISSING already says it, with its own hint.
  auto w = sample();
  w.findings.push_back(results::make_finding(results::Code::BASELINE_MISSING, "no band"));
  EXPECT_EQ(baseline_hint(w), "");
  // Nothing measured: nothing to judge.
  EXPECT_EQ(baseline_hint(results::Verdict{}), "");
}

TEST(TableFormat, Parses) {
  EXPECT_EQ(parse_table_format("text"), TableFormat::text);
  EXPECT_EQ(parse_table_format("CSV"), TableFormat::csv);
  EXPECT_EQ(parse_table_format("json"), TableFormat::json);
  EXPECT_FALSE(parse_table_format("yaml"));
}

TEST(RunId, LaunchesIdIsAFolderNameEveryRankAccepts) {
  const std::regex shape(R"(\d{8}T\d{6}Z-[0-9a-f]{8})");
  EXPECT_TRUE(std::regex_match(make_run_id(""), shape)) << make_run_id("");
  const std::string with_job = make_run_id("nightly/42 x");
  EXPECT_EQ(with_job.rfind("nightly_42_x-", 0), 0u) << with_job;
  EXPECT_EQ(run_id_problem(with_job), "");
  EXPECT_LE(make_run_id(std::string(500, 'j')).size(), 128u);
  EXPECT_EQ(run_id_problem(make_run_id(std::string(500, 'j'))), "");
  EXPECT_NE(make_run_id(""), make_run_id(""));
  EXPECT_NE(run_id_problem(""), "");
  EXPECT_NE(run_id_problem("a/b"), "");
  EXPECT_NE(run_id_problem(".hidden"), "");
  EXPECT_NE(run_id_problem("-flag"), "");
  EXPECT_NE(run_id_problem(std::string(129, 'a')), "");
  EXPECT_NE(run_id_problem("a\nb"), "");
}

}  // namespace
}  // namespace ncclsmoke::harness
