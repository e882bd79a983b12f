// One contract for every history backend (results/history/history.h): the same tests run against an
// SQLite file and a real PostgreSQL server (scripts/postgres-local.sh, started by the ctest
// fixture `postgres`; its state file is NCCLSMOKE_PG_STATE, or set NCCLSMOKE_TEST_PG_URL).
// Each PostgreSQL test gets a schema of its own (search_path in the URL), dropped afterwards.
// Without a server the PostgreSQL cases are skipped (GTEST_SKIP: ctest shows them as skipped),
// unless NCCLSMOKE_REQUIRE_POSTGRES=1 (CI), where that is a failure.
//
// Beyond round trips, duplicates, batches, queries, prune and the cluster column: a writer
// SIGKILLed mid-batch leaves none of that batch (or all of it), and the history still opens; a
// server restarted mid-batch fails that batch whole (unreachable) and the next add succeeds; a
// `publish` while the server is down exits 6 and spools the run, and the next publish stores it.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "results/history/history.h"
#include "tests/results/sample.h"
#include "tests/wait_until.h"

namespace ncclsmoke::results {
namespace {

namespace fs = std::filesystem;

bool require_postgres() {
  const char* r = std::getenv("NCCLSMOKE_REQUIRE_POSTGRES");
  return r && std::string(r) == "1";
}

// "NCCLSMOKE_PG_URL='...'" lines of postgres-local.sh's output / state file.
std::string state_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  const std::string prefix = key + "='";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size() && line.back() == '\'')
      return line.substr(prefix.size(), line.size() - prefix.size() - 1);
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shared test server's URL, "" when there is none.
std::string shared_pg_url() {
  if (const char* u = std::getenv("NCCLSMOKE_TEST_PG_URL"); u && *u) return u;
#ifdef NCCLSMOKE_PG_STATE
  return state_value(read_file(NCCLSMOKE_PG_STATE), "NCCLSMOKE_PG_URL");
#else
  return "";
#endif
}

// Runs a shell command, returns its stdout and exit status (bounded by `timeout` in the command).
std::pair<std::string, int> sh(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {"", -1};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = ::pclose(p);
  return {out, WIFEXITED(st) ? WEXITSTATUS(st) : -1};
}

void admin(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);  // "drop cascades to ..."
  PGresult* r = PQexec(c, sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
}

// The URL with search_path pointing at `schema`.
std::string with_schema(const std::string& url, const std::string& schema) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
}

// A passing socket run at `minute` past 2026-11-30T00:00Z with gate busbw `bw`.
Verdict run_at(int minute, double bw, const std::string& verdict = "pass",
               const std::string& profile = "ci-loopback") {
  Verdict v = testing::full_sample();
  char id[64], at[64];
  std::snprintf(id, sizeof id, "20261130T%02d%02d00Z-%08x", (minute / 60) % 24, minute % 60, minute);
  std::snprintf(at, sizeof at, "2026-11-30T%02d:%02d:00.000Z", (minute / 60) % 24, minute % 60);
  v.run_id = id;
  v.started_at = at;
  v.verdict = parse_outcome(verdict).value();
  v.exit_code = verdict == "pass" ? 0 : 3;
  v.transports.clear();
  TransportRow world;
  world.transport = "socket";
  world.bytes = 64 << 20;
  world.busbw_gbps = bw;
  world.gate = true;
  TransportRow in_place = world;
  in_place.in_place = true;
  in_place.busbw_gbps = bw * 1.1;
  TransportRow per_rank = world;
  per_rank.rank = 1;
  per_rank.busbw_gbps = bw * 0.5;
  v.transports = {world, in_place, per_rank};
  v.baseline = {{"profile", profile},
                {"transports",
                 {{{"transport", "socket"},
                   {"band", {{"busbw_gbps", 2.0}, {"gate_bytes", 64 << 20},
                             {"degraded_ratio", 0.8}, {"fail_ratio", 0.4}}}}}}};
  return v;
}

class HistoryContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string tag = std::to_string(::getpid()) + "_" +
                      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
    if (GetParam() == "sqlite") {
      dir_ = fs::temp_directory_path() / ("ncclsmoke-contract-" + tag);
      fs::create_directories(dir_);
      target_ = (dir_ / "h.db").string();
      return;
    }
    base_url_ = shared_pg_url();
    if (base_url_.empty()) {
      if (require_postgres()) FAIL() << "NCCLSMOKE_REQUIRE_POSTGRES=1 but no test server (fixture postgres)";
      GTEST_SKIP() << "no PostgreSQL test server (scripts/postgres-local.sh found no binaries)";
    }
    schema_ = "contract_" + tag;
    admin(base_url_, "CREATE SCHEMA " + schema_);
    target_ = with_schema(base_url_, schema_);
    dir_ = fs::temp_directory_path() / ("ncclsmoke-contract-" + tag);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!schema_.empty()) admin(base_url_, "DROP SCHEMA " + schema_ + " CASCADE");
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  bool pg() const { return GetParam() == "postgres"; }

  fs::path dir_;
  std::string target_, base_url_, schema_;
};

TEST_P(HistoryContract, RunRoundTripsAndDuplicatesAreCounted) {
  History h(target_);
  EXPECT_EQ(h.is_postgres(), pg());
  Verdict v = run_at(5, 1.5);
  h.set_cluster("eu-west-a");
  EXPECT_EQ(h.add(v, "run").added, 1);
  EXPECT_EQ(h.add(v, "import").duplicates, 1);
  EXPECT_EQ(h.count_runs(), 1);
  auto runs = h.runs({});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, v.run_id);
  EXPECT_EQ(runs[0].verdict, Outcome::pass);
  EXPECT_EQ(runs[0].profile, "ci-loopback");
  EXPECT_EQ(runs[0].world_size, 4);
  EXPECT_EQ(runs[0].exit_code, v.exit_code);
  EXPECT_EQ(runs[0].tool_version, "0.1.0");
  EXPECT_EQ(runs[0].source, "run");  // the first add wins
  EXPECT_EQ(runs[0].cluster, "eu-west-a");
  EXPECT_EQ(runs[0].hosts, (std::vector<std::string>{"host-a", "host-b", "host-c"}));
  EXPECT_DOUBLE_EQ(runs[0].started_unix, parse_rfc3339("2026-11-30T00:05:00Z"));
  EXPECT_DOUBLE_EQ(runs[0].duration_s, 10.4);
  auto stored = h.verdict_json(v.run_id);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(*stored, to_json(v));  // nothing the verdict said is lost
  EXPECT_FALSE(h.verdict_json("nope").has_value());
  auto gates = h.gates({});
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].cluster, "eu-west-a");
  EXPECT_DOUBLE_EQ(gates[0].busbw_gbps, 1.5);
  EXPECT_DOUBLE_EQ(gates[0].baseline_gbps, 2.0);
  EXPECT_DOUBLE_EQ(gates[0].degraded_ratio, 0.8);
  EXPECT_DOUBLE_EQ(gates[0].fail_ratio, 0.4);
  EXPECT_EQ(gates[0].gate_bytes, 64 << 20);
  auto findings = h.findings({});
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].cluster, "eu-west-a");
  EXPECT_EQ(findings[0].code, Code::RANKS_MISSING);
  EXPECT_EQ(findings[1].severity, v.findings[1].severity);
  // The subject is stored as data (history version 3); a finding without one reads empty.
  EXPECT_TRUE(findings[0].subject.empty());
  EXPECT_FALSE(v.findings[1].subject.empty());
  EXPECT_EQ(findings[1].subject, v.findings[1].subject);
}

TEST_P(HistoryContract, ReopenedHistoryKeepsTheRuns) {
  { History h(target_); h.add(run_at(1, 1.0), "run"); }
  History again(target_, false);
  EXPECT_EQ(again.count_runs(), 1);
}

TEST_P(HistoryContract, NotMeasuredIsNaNAgain) {
  Verdict v = testing::full_sample();  // gated at 1 MiB, no band
  v.baseline = nullptr;
  v.transports[0].busbw_gbps = std::nan("");
  History h(target_);
  h.add(v, "run");
  auto stored = h.gates({});
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_TRUE(std::isnan(stored[0].busbw_gbps));
  EXPECT_TRUE(std::isnan(stored[0].baseline_gbps));
  EXPECT_TRUE(stored[0].synthetic);
  EXPECT_EQ(stored[0].identity, "network=Socket interface=eth0");
  EXPECT_EQ(stored[0].verdict, Outcome::fail);
  EXPECT_EQ(h.runs({})[0].profile, "");
}

TEST_P(HistoryContract, QueriesFilterAndLimitNewestButReturnOldestFirst) {
  History h(target_);
  std::vector<Verdict> vs;
  for (int m = 0; m < 10; ++m)
    vs.push_back(run_at(m, 1.0 + m, m % 3 == 0 ? "degraded" : "pass",
                        m < 5 ? "ci-loopback" : "g5-socket"));
  EXPECT_EQ(h.add_many(vs, "import").added, 10);
  EXPECT_EQ(h.runs({}).size(), 10u);
  HistoryQuery q;
  q.since_unix = parse_rfc3339("2026-11-30T00:04:00Z");
  EXPECT_EQ(h.runs(q).size(), 6u);
  HistoryQuery until;
  until.until_unix = parse_rfc3339("2026-11-30T00:04:00Z");
  EXPECT_EQ(h.runs(until).size(), 4u);
  q.profile = "g5-socket";
  EXPECT_EQ(h.runs(q).size(), 5u);
  q.verdict = Outcome::pass;
  auto passing = h.gates(q);
  ASSERT_EQ(passing.size(), 3u);  // minutes 5, 7, 8
  EXPECT_DOUBLE_EQ(passing[0].busbw_gbps, 6.0);
  q.transport = "nccl";
  EXPECT_EQ(h.gates(q).size(), 0u);
  q.transport = "socket";
  EXPECT_EQ(h.gates(q).size(), 3u);
  HistoryQuery last;
  last.limit = 3;
  auto newest = h.runs(last);
  ASSERT_EQ(newest.size(), 3u);
  EXPECT_EQ(newest[0].run_id, vs[7].run_id);
  EXPECT_EQ(newest[2].run_id, vs[9].run_id);
  HistoryQuery f;
  f.profile = "ci-loopback";
  auto findings = h.findings(f);
  ASSERT_EQ(findings.size(), 10u);  // 2 per run
  EXPECT_EQ(findings[0].code, Code::RANKS_MISSING);
  EXPECT_EQ(findings[0].ranks, std::vector<int>{3});
  EXPECT_EQ(findings[1].hosts, std::vector<std::string>{"host-b"});
  EXPECT_EQ(findings[1].run_id, vs[0].run_id);
  HistoryQuery lf;
  lf.limit = 1;
  auto newest_findings = h.findings(lf);
  ASSERT_EQ(newest_findings.size(), 1u);
  EXPECT_EQ(newest_findings[0].run_id, vs[9].run_id);
}

TEST_P(HistoryContract, ClusterIsStoredAndFiltered) {
  History h(target_);
  h.set_cluster("a");
  h.add_many({run_at(0, 1.0), run_at(1, 1.0)}, "import");
  h.set_cluster("b");
  h.add(run_at(2, 1.0), "publish");
  HistoryQuery q;
  q.cluster = "a";
  EXPECT_EQ(h.runs(q).size(), 2u);
  EXPECT_EQ(h.gates(q).size(), 2u);
  EXPECT_EQ(h.findings(q).size(), 4u);
  q.cluster = "b";
  auto b = h.runs(q);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].source, "publish");
  EXPECT_EQ(h.gates(q).at(0).cluster, "b");
  q.cluster = "nowhere";
  EXPECT_TRUE(h.runs(q).empty());
}

// An import gives each run the file it read it from ("import:<path>", the report's verdict
// link); a verdict without a source of its own gets the stream's.
TEST_P(HistoryContract, EachRunOfAStreamCanCarryItsOwnSource) {
  History h(target_);
  std::vector<Verdict> vs{run_at(0, 1.0), run_at(1, 1.0), run_at(2, 1.0)};
  const std::vector<std::string> sources{"import:/runs/launch-a/verdict.json", "",
                                         "import:/runs/launch-c/verdict.json"};
  size_t i = 0;
  auto r = h.add_stream(
      History::NextSourcedVerdict([&](const Verdict*& v, const std::string*& text,
                                      const std::string*& source) {
        if (i == vs.size()) return false;
        v = &vs[i];
        text = nullptr;
        source = sources[i].empty() ? nullptr : &sources[i];
        ++i;
        return true;
      }),
      "import");
  EXPECT_EQ(r.added, 3);
  auto runs = h.runs({});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].source, "import:/runs/launch-a/verdict.json");
  EXPECT_EQ(runs[1].source, "import");
  EXPECT_EQ(runs[2].source, "import:/runs/launch-c/verdict.json");
}

TEST_P(HistoryContract, PruneRemovesOldRunsWithTheirRows) {
  History h(target_);
  std::vector<Verdict> vs;
  for (int m = 0; m < 6; ++m) vs.push_back(run_at(m, 1.0));
  h.add_many(vs, "import");
  EXPECT_EQ(h.prune(parse_rfc3339("2026-11-30T00:02:00Z"), true), 2);  // minutes 0 and 1
  EXPECT_EQ(h.count_runs(), 4);
  EXPECT_EQ(h.gates({}).size(), 4u);     // the cascade took their gate rows
  EXPECT_EQ(h.findings({}).size(), 8u);  // and their findings
  EXPECT_EQ(h.runs({}).front().run_id, vs[2].run_id);
  EXPECT_EQ(h.prune(parse_rfc3339("2026-11-30T00:00:00Z"), false), 0);
}

TEST_P(HistoryContract, BatchIsAllOrNothing) {
  History h(target_);
  h.add(run_at(0, 1.0), "run");
  std::vector<Verdict> batch;
  for (int m = 1; m <= 700; ++m) batch.push_back(run_at(m, 1.0));  // more than one INSERT's worth
  batch.back().started_at = "yesterday";  // fails inside the transaction, after the inserts
  try {
    h.add_many(batch, "import");
    FAIL() << "a bad started_at must throw";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.problem(), HistoryProblem::bad_verdict);
    EXPECT_NE(std::string(e.what()).find("started_at"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(h.path()), std::string::npos) << e.what();
  }
  EXPECT_EQ(h.count_runs(), 1);
  EXPECT_EQ(h.gates({}).size(), 1u);
  EXPECT_EQ(h.findings({}).size(), 2u);
  batch.back().started_at = "2026-11-30T12:00:00Z";
  auto r = h.add_many(batch, "import");  // the history is still usable, the batch now whole
  EXPECT_EQ(r.added, 700);
  EXPECT_EQ(h.count_runs(), 701);
}

TEST_P(HistoryContract, DuplicatesInsideAndAcrossBatchesAreCounted) {
  History h(target_);
  h.add(run_at(3, 1.0), "run");
  std::vector<Verdict> batch{run_at(1, 1.0), run_at(2, 1.0), run_at(1, 1.0), run_at(3, 1.0)};
  std::vector<std::string> texts;
  for (const auto& v : batch) texts.push_back(to_json(v).dump(2));  // stored verbatim
  auto r = h.add_many(batch, "import", &texts);
  EXPECT_EQ(r.added, 2);
  EXPECT_EQ(r.duplicates, 2);
  EXPECT_EQ(h.count_runs(), 3);
  EXPECT_EQ(h.gates({}).size(), 3u);  // one per run, none for the duplicates
  EXPECT_EQ(h.findings({}).size(), 6u);
  EXPECT_EQ(*h.verdict_json(batch[0].run_id), to_json(batch[0]));
}

TEST_P(HistoryContract, AStreamThatThrowsStoresNothing) {
  History h(target_);
  int i = 0;
  std::vector<Verdict> vs;
  for (int m = 0; m < 30; ++m) vs.push_back(run_at(m, 1.0));
  EXPECT_THROW(h.add_stream(
                   [&](const Verdict*& v, const std::string*& t) {
                     if (i == 25) throw std::runtime_error("parser gave up");
                     v = &vs[i++];
                     t = nullptr;
                     return true;
                   },
                   "import"),
               std::runtime_error);
  EXPECT_EQ(h.count_runs(), 0);
  EXPECT_EQ(h.add(run_at(99, 1.0), "run").added, 1);
}

// A child add_stream()s 1000 runs; it signals once 600 are handed over and then pauses inside
// the batch; the parent SIGKILLs it there. None of the batch may be visible, and the history
// must open and take writes afterwards.
TEST_P(HistoryContract, WriterKilledMidBatchStoresNoneOfIt) {
  { History h(target_); h.add(run_at(2000, 1.0), "run"); }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      History h(target_);
      int i = 0;
      Verdict cur;
      h.add_stream(
          [&](const Verdict*& v, const std::string*& t) {
            if (i == 1000) return false;
            if (i == 600) {
              char c = 'x';
              if (::write(ready[1], &c, 1) != 1) ::_exit(3);
              ::sleep(30);  // killed here (bounded if nobody does)
            }
            cur = run_at(i++, 1.0);
            v = &cur;
            t = nullptr;
            return true;
          },
          "import");
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the writer died before 600 runs";
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  // PostgreSQL notices the closed socket and rolls back; a later open must not wait on its locks.
  History h(target_, true, 5000);
  EXPECT_EQ(h.count_runs(), 1);
  EXPECT_EQ(h.gates({}).size(), 1u);
  EXPECT_EQ(h.findings({}).size(), 2u);
  EXPECT_EQ(h.add(run_at(5, 1.0), "run").added, 1);  // run 5 was in the lost batch: not stored
  if (!pg()) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(target_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "ok");
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
}

// The same without the pause: killed at whatever point the batch (and its commit) has reached,
// the batch is there whole or not at all.
TEST_P(HistoryContract, WriterKilledAnywhereLeavesNoneOrAll) {
  { History h(target_); }
  for (int round = 0; round < 3; ++round) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(ready[0]);
      History h(target_);
      std::vector<Verdict> vs;
      for (int m = 0; m < 1000; ++m) vs.push_back(run_at(round * 1000 + m, 1.0));
      char c = 'x';
      if (::write(ready[1], &c, 1) != 1) ::_exit(3);
      h.add_many(vs, "import");
      ::_exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    // Kills the writer a different moment into each round's batch: the timing is the test.
    ncclsmoke::testing::pause_for(std::chrono::milliseconds(40 * round + 10));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
  History h(target_, true, 5000);
  std::int64_t n = h.count_runs();
  EXPECT_EQ(n % 1000, 0) << n << " runs: a batch was stored in part";
  EXPECT_EQ(static_cast<std::int64_t>(h.gates({}).size()), n);
  EXPECT_EQ(static_cast<std::int64_t>(h.findings({}).size()), 2 * n);
}

INSTANTIATE_TEST_SUITE_P(Backends, HistoryContract, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

// ---- PostgreSQL only: errors, redaction, a restarted server ------------------------------------

TEST(HistoryPostgres, UrlsAreRecognisedAndRedacted) {
  EXPECT_TRUE(is_history_url("postgresql://u:p@h/db"));
  EXPECT_TRUE(is_history_url("postgres://h/db"));
  EXPECT_FALSE(is_history_url("/var/lib/history.db"));
  EXPECT_FALSE(is_history_url("postgresql.db"));
  EXPECT_EQ(redact_history_url("postgresql://smoke:s3cr3t@db.example:5432/hist"),
            "postgresql://smoke:***@db.example:5432/hist");
  EXPECT_EQ(redact_history_url("postgres://smoke@db/hist"), "postgres://smoke@db/hist");
  EXPECT_EQ(redact_history_url("postgresql://u:p%40ss@h/db?sslmode=require&password=two"),
            "postgresql://u:***@h/db?sslmode=require&password=***");
  EXPECT_EQ(redact_history_url("postgresql:///db?host=/run/pg&password=x"),
            "postgresql:///db?host=/run/pg&password=***");
  EXPECT_EQ(redact_history_url("history.db"), "history.db");
}

TEST(HistoryPostgres, ClassifiesSqlstates) {
  EXPECT_EQ(classify_postgres_error("08006", true), HistoryProblem::unreachable);
  EXPECT_EQ(classify_postgres_error("57P01", true), HistoryProblem::unreachable);
  EXPECT_EQ(classify_postgres_error("", true), HistoryProblem::unreachable);
  EXPECT_EQ(classify_postgres_error("28P01", false), HistoryProblem::cannot_open);
  EXPECT_EQ(classify_postgres_error("3D000", false), HistoryProblem::cannot_open);
  EXPECT_EQ(classify_postgres_error("53100", false), HistoryProblem::full);
  EXPECT_EQ(classify_postgres_error("25006", false), HistoryProblem::read_only);
  EXPECT_EQ(classify_postgres_error("42501", false), HistoryProblem::read_only);
  EXPECT_EQ(classify_postgres_error("55P03", false), HistoryProblem::locked);
  EXPECT_EQ(classify_postgres_error("40P01", false), HistoryProblem::locked);
  EXPECT_EQ(classify_postgres_error("XX001", false), HistoryProblem::corrupt);
  EXPECT_EQ(classify_postgres_error("58030", false), HistoryProblem::io);
  EXPECT_EQ(classify_postgres_error("22P02", false), HistoryProblem::other);
  EXPECT_EQ(to_string(HistoryProblem::unreachable), "unreachable");
}

TEST(HistoryPostgres, RefusedConnectionIsUnreachableAndHidesThePassword) {
  // A port nothing listens on: bind one, close it.
  auto [port, rc] = sh("/usr/bin/python3 -c 'import socket; s=socket.socket(); "
                       "s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'");
  ASSERT_EQ(rc, 0);
  port.erase(port.find_last_not_of("\n") + 1);
  const std::string url = "postgresql://smoke:TopSecret99@127.0.0.1:" + port + "/hist";
  try {
    History h(url, true, 2000);
    FAIL() << "connected to a closed port";
  } catch (const HistoryError& e) {
    std::string what = e.what();
    EXPECT_EQ(e.problem(), HistoryProblem::unreachable) << what;
    EXPECT_EQ(what.find("TopSecret99"), std::string::npos) << what;
    EXPECT_NE(what.find("postgresql://smoke:***@127.0.0.1:" + port + "/hist"), std::string::npos) << what;
    EXPECT_NE(what.find("pg_isready -h 127.0.0.1 -p " + port), std::string::npos) << what;
  }
}

TEST(HistoryPostgres, AMalformedPasswordIsNeverQuotedBack) {
  // libpq quotes a bad percent-encoding back in its message: the password must not appear.
  const std::string url = "postgresql://smoke:Se%zzcret@127.0.0.1:1/hist";
  try {
    History h(url, true, 1000);
    FAIL() << "a malformed URL connected";
  } catch (const HistoryError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.find("zzcret"), std::string::npos) << what;
    EXPECT_NE(what.find("postgresql://smoke:***@127.0.0.1:1/hist"), std::string::npos) << what;
  }
}

TEST(HistoryPostgres, WrongPasswordIsAnAuthProblemAndHidden) {
  std::string url = shared_pg_url();
  if (url.empty()) {
    if (require_postgres()) FAIL() << "no test server";
    GTEST_SKIP() << "no PostgreSQL test server";
  }
  // postgresql://ncclsmoke:PASSWORD@... -> a wrong password
  const size_t colon = url.find(':', url.find("://") + 3), at = url.find('@');
  ASSERT_NE(at, std::string::npos);
  std::string wrong = url.substr(0, colon + 1) + "WrongPass77" + url.substr(at);
  try {
    History h(wrong, true, 3000);
    FAIL() << "a wrong password was accepted";
  } catch (const HistoryError& e) {
    std::string what = e.what();
    EXPECT_EQ(e.problem(), HistoryProblem::cannot_open) << what;
    EXPECT_EQ(what.find("WrongPass77"), std::string::npos) << what;
    EXPECT_NE(what.find("authentication failed"), std::string::npos) << what;
    EXPECT_NE(what.find("pg_hba.conf"), std::string::npos) << what;
  }
}

TEST(HistoryPostgres, AnEmptyDatabaseIsNoHistoryForReaders) {
  std::string url = shared_pg_url();
  if (url.empty()) {
    if (require_postgres()) FAIL() << "no test server";
    GTEST_SKIP() << "no PostgreSQL test server";
  }
  const std::string schema = "empty_" + std::to_string(::getpid());
  admin(url, "CREATE SCHEMA " + schema);
  try {
    History h(with_schema(url, schema), false);
    ADD_FAILURE() << "opened an empty database as a history";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.problem(), HistoryProblem::cannot_open) << e.what();
    EXPECT_NE(std::string(e.what()).find("history import"), std::string::npos) << e.what();
  }
  admin(url, "DROP SCHEMA " + schema + " CASCADE");
}

// A private server (it is restarted, so not the shared one): scripts/postgres-local.sh.
class PrivateServer {
 public:
  PrivateServer() {
    auto [out, rc] = sh("timeout 120 bash " NCCLSMOKE_SOURCE_DIR "/scripts/postgres-local.sh start");
    rc_ = rc;
    url_ = state_value(out, "NCCLSMOKE_PG_URL");
    dir_ = state_value(out, "NCCLSMOKE_PG_DIR");
  }
  ~PrivateServer() {
    if (!dir_.empty()) sh("timeout 60 bash " NCCLSMOKE_SOURCE_DIR "/scripts/postgres-local.sh stop " + dir_);
  }
  int rc() const { return rc_; }
  const std::string& url() const { return url_; }
  bool pause() { return sh("timeout 60 bash " NCCLSMOKE_SOURCE_DIR "/scripts/postgres-local.sh pause " + dir_).second == 0; }
  bool resume() { return sh("timeout 60 bash " NCCLSMOKE_SOURCE_DIR "/scripts/postgres-local.sh resume " + dir_).second == 0; }

 private:
  int rc_ = -1;
  std::string url_, dir_;
};

#define NEED_SERVER(s)                                                         \
  if ((s).rc() == 77 && !require_postgres()) GTEST_SKIP() << "no PostgreSQL binaries"; \
  ASSERT_EQ((s).rc(), 0) << "scripts/postgres-local.sh start failed";          \
  ASSERT_FALSE((s).url().empty())

// The server restarts while a batch is half sent: that batch fails whole (unreachable, with the
// "went away" hint), and the same History reconnects and stores the next one.
TEST(HistoryPostgres, ServerRestartMidBatchLosesThatBatchWhole) {
  PrivateServer server;
  NEED_SERVER(server);
  History h(server.url(), true, 5000);
  h.add(run_at(0, 1.0), "run");
  int i = 1;
  Verdict cur;
  bool restarted = false;
  try {
    h.add_stream(
        [&](const Verdict*& v, const std::string*& t) {
          if (i == 1000) return false;
          if (i == 700 && !restarted) {  // 500 runs already sent in the open transaction
            restarted = true;
            EXPECT_TRUE(server.pause());
            EXPECT_TRUE(server.resume());
          }
          cur = run_at(i++, 1.0);
          v = &cur;
          t = nullptr;
          return true;
        },
        "import");
    FAIL() << "a batch survived a server restart";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.problem(), HistoryProblem::unreachable) << e.what();
    EXPECT_EQ(std::string(e.what()).find(server.url()), std::string::npos) << "password printed";
  }
  ASSERT_TRUE(restarted);
  EXPECT_EQ(h.count_runs(), 1);  // reconnected; nothing of the batch
  EXPECT_EQ(h.gates({}).size(), 1u);
  std::vector<Verdict> again;
  for (int m = 1; m < 1000; ++m) again.push_back(run_at(m, 1.0));
  EXPECT_EQ(h.add_many(again, "import").added, 999);
  EXPECT_EQ(h.count_runs(), 1000);
}

// `ncclsmoke publish --history URL` while the server is down: exit 6, the run spooled in
// NCCLSMOKE_SPOOL_DIR; after the restart the next publish stores both; nothing half-stored.
TEST(HistoryPostgres, PublishWhileTheServerIsDownSpoolsAndTheNextPublishStores) {
  PrivateServer server;
  NEED_SERVER(server);
  fs::path dir = fs::temp_directory_path() / ("ncclsmoke-pgpublish-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string spool = (dir / "spool").string();
  Verdict first = run_at(10, 1.2), second = run_at(11, 1.3);
  std::ofstream(dir / "first.json") << to_json(first).dump(2);
  std::ofstream(dir / "second.json") << to_json(second).dump(2);
  auto publish = [&](const std::string& file) {
    return sh("cd " + dir.string() + " && NCCLSMOKE_SPOOL_DIR=" + spool +
              " NCCLSMOKE_CLUSTER=pg-ci timeout 120 " NCCLSMOKE_BIN " publish " + file +
              " --history '" + server.url() + "' --textfile " + dir.string() + " 2>&1");
  };
  {  // the schema exists first, as in a fleet whose server then restarts
    auto [out, rc] = publish("second.json");
    ASSERT_EQ(rc, 0) << out;
    History h(server.url());
    h.prune(1e12, false);  // start empty
  }
  ASSERT_TRUE(server.pause());
  auto [down, rc_down] = publish("first.json");
  EXPECT_EQ(rc_down, 6) << down;
  EXPECT_EQ(down.find(server.url()), std::string::npos) << "password printed: " << down;
  EXPECT_NE(down.find("cannot reach the PostgreSQL server"), std::string::npos) << down;
  EXPECT_TRUE(fs::exists(fs::path(spool) / (first.run_id + ".json"))) << down;
  ASSERT_TRUE(server.resume());
  auto [up, rc_up] = publish("second.json");
  EXPECT_EQ(rc_up, 0) << up;
  EXPECT_FALSE(fs::exists(fs::path(spool) / (first.run_id + ".json"))) << up;
  History h(server.url(), false);
  EXPECT_EQ(h.count_runs(), 2);
  EXPECT_EQ(h.gates({}).size(), 2u);
  EXPECT_EQ(h.findings({}).size(), 4u);
  for (const auto& r : h.runs({})) EXPECT_EQ(r.cluster, "pg-ci") << r.run_id;
  EXPECT_EQ(*h.verdict_json(first.run_id), to_json(first));
  fs::remove_all(dir);
}

// ---- SQLite only: the version-1 migration, the network-filesystem decision -------------------

// Version 1 (no runs.cluster) and 2 (no findings.subject) both step up to the current one.
TEST(HistorySqlite, MigratesAVersion1FileInPlace) {
  fs::path dir = fs::temp_directory_path() / ("ncclsmoke-v1-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "v1.db").string();
  {  // the version-1 schema, as ncclsmoke 0.1 created it, with one run
    sqlite3* s = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &s), SQLITE_OK);
    const char* v1 = R"sql(
      CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL,
        started_unix REAL NOT NULL, duration_s REAL, verdict TEXT NOT NULL,
        exit_code INTEGER NOT NULL, world_size INTEGER NOT NULL, profile TEXT NOT NULL,
        tool_version TEXT NOT NULL, hosts TEXT NOT NULL, source TEXT NOT NULL,
        verdict_json TEXT NOT NULL);
      CREATE INDEX runs_by_time ON runs(started_unix);
      CREATE INDEX runs_by_profile ON runs(profile, started_unix);
      CREATE TABLE gates (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        transport TEXT NOT NULL, gate_bytes INTEGER NOT NULL, busbw_gbps REAL,
        baseline_gbps REAL, degraded_ratio REAL, fail_ratio REAL, synthetic INTEGER NOT NULL,
        identity TEXT NOT NULL);
      CREATE INDEX gates_by_run ON gates(run_id);
      CREATE TABLE findings (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        code TEXT NOT NULL, severity TEXT NOT NULL, layer TEXT NOT NULL, message TEXT NOT NULL,
        ranks TEXT NOT NULL, hosts TEXT NOT NULL);
      CREATE INDEX findings_by_run ON findings(run_id);
      INSERT INTO runs VALUES ('old-run', '2026-11-01T00:00:00Z', 1793491200, 3, 'pass', 0, 2,
        'ci-loopback', '0.1.0', '["h1"]', 'run', '{}');
      INSERT INTO gates VALUES ('old-run', 'socket', 1048576, 1.5, NULL, NULL, NULL, 0, '');
      INSERT INTO findings VALUES ('old-run', 'PEER_LOST', 'error', 'run', 'rank 1 was lost',
        '[1]', '["h1"]');
      PRAGMA user_version = 1;
    )sql";
    ASSERT_EQ(sqlite3_exec(s, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(s);
    sqlite3_close(s);
  }
  {  // a reader leaves it as it is
    History h(db, false);
    auto runs = h.runs({});
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].cluster, "");
    HistoryQuery q;
    q.cluster = "x";
    EXPECT_TRUE(h.runs(q).empty());
    auto findings = h.findings({});  // no subject column yet: read as empty subjects
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_TRUE(findings[0].subject.empty());
  }
  auto version = [&] {
    sqlite3* s = nullptr;
    sqlite3_open(db.c_str(), &s);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(s, "PRAGMA user_version", -1, &st, nullptr);
    int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(s);
    return v;
  };
  EXPECT_EQ(version(), 1);
  {  // a writer migrates it
    History h(db, true);
    EXPECT_EQ(version(), kHistorySchemaVersion);
    h.set_cluster("new");
    h.add(run_at(1, 1.0), "run");
    auto runs = h.runs({});
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].run_id, "old-run");
    EXPECT_EQ(runs[0].cluster, "");
    EXPECT_EQ(runs[1].cluster, "new");
    HistoryQuery q;
    q.cluster = "new";
    EXPECT_EQ(h.gates(q).size(), 1u);
    EXPECT_EQ(h.gates({}).size(), 2u);
    auto findings = h.findings({});  // the old row without a subject, the new ones with theirs
    ASSERT_EQ(findings.size(), 3u);
    EXPECT_TRUE(findings[0].subject.empty());
    EXPECT_EQ(findings[0].message, "rank 1 was lost");
    EXPECT_FALSE(findings[2].subject.empty());
  }
  fs::remove_all(dir);
}

TEST(HistorySqlite, NetworkFilesystemsUseTheRollbackJournal) {
  EXPECT_EQ(sqlite_journal_mode_for(0xEF53), "WAL");       // ext4
  EXPECT_EQ(sqlite_journal_mode_for(0x58465342), "WAL");   // xfs
  EXPECT_EQ(sqlite_journal_mode_for(0x01021994), "WAL");   // tmpfs
  EXPECT_EQ(sqlite_journal_mode_for(0x794c7630), "WAL");   // overlayfs (containers)
  EXPECT_EQ(sqlite_journal_mode_for(0x6969), "DELETE");    // NFS (and EFS)
  EXPECT_EQ(network_filesystem_name(0x6969), "NFS");
  EXPECT_EQ(sqlite_journal_mode_for(static_cast<long>(0xFF534D42)), "DELETE");  // CIFS
  EXPECT_EQ(network_filesystem_name(static_cast<long>(0xFF534D42)), "CIFS/SMB");
  EXPECT_EQ(sqlite_journal_mode_for(static_cast<long>(0xFE534D42)), "DELETE");  // SMB2
  EXPECT_EQ(sqlite_journal_mode_for(0x65735546), "DELETE");  // FUSE (s3fs, gcsfuse)
  EXPECT_EQ(sqlite_journal_mode_for(0x0BD00BD0), "DELETE");  // Lustre
  EXPECT_EQ(network_filesystem_name(0xEF53), "");
  // statfs's f_type is signed on some ABIs: a sign-extended CIFS magic is still CIFS.
  EXPECT_EQ(network_filesystem_name(static_cast<long>(static_cast<int>(0xFF534D42))), "CIFS/SMB");
}

}  // namespace
}  // namespace ncclsmoke::results
