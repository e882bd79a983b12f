// The SQLite run history: round trips, the gate numbers, atomic batches, crash safety (a writer
// killed mid-stream leaves only whole runs), concurrent writers, and bad files named.
#include "results/history/history.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/results/sample.h"
#include "tests/wait_until.h"

namespace ncclsmoke::results {
namespace {

namespace fs = std::filesystem;

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ncclsmoke-history-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "h.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A passing socket run at `minute` past 2026-11-30T00:00Z with gate busbw `bw`.
  static Verdict run_at(int minute, double bw, const std::string& verdict = "pass",
                        const std::string& profile = "ci-loopback") {
    Verdict v = testing::full_sample();
    char id[64], at[64];
    std::snprintf(id, sizeof id, "20261130T%02d%02d00Z-%08x", minute / 60, minute % 60, minute);
    std::snprintf(at, sizeof at, "2026-11-30T%02d:%02d:00.000Z", minute / 60, minute % 60);
    v.run_id = id;
    v.started_at = at;
    v.verdict = parse_outcome(verdict).value();
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
    per_rank.busbw_gbps = bw * 0.5;  // ignored: the world row wins
    v.transports = {world, in_place, per_rank};
    v.baseline = {{"profile", profile},
                  {"transports",
                   {{{"transport", "socket"},
                     {"band", {{"busbw_gbps", 2.0}, {"gate_bytes", 64 << 20},
                               {"degraded_ratio", 0.8}, {"fail_ratio", 0.4}}}}}}};
    return v;
  }

  fs::path dir_;
  std::string db_;
};

TEST_F(HistoryTest, RunRoundTripsAndDuplicatesAreCounted) {
  History h(db_);
  Verdict v = run_at(5, 1.5);
  auto r = h.add(v, "run");
  EXPECT_EQ(r.added, 1);
  EXPECT_EQ(h.add(v, "import").duplicates, 1);
  EXPECT_EQ(h.count_runs(), 1);
  auto runs = h.runs({});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, v.run_id);
  EXPECT_EQ(runs[0].verdict, Outcome::pass);
  EXPECT_EQ(runs[0].profile, "ci-loopback");
  EXPECT_EQ(runs[0].world_size, 4);
  EXPECT_EQ(runs[0].source, "run");  // the first add wins
  EXPECT_EQ(runs[0].hosts, (std::vector<std::string>{"host-a", "host-b", "host-c"}));
  EXPECT_DOUBLE_EQ(runs[0].started_unix, parse_rfc3339("2026-11-30T00:05:00Z"));
  auto stored = h.verdict_json(v.run_id);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(*stored, to_json(v));  // nothing the verdict said is lost
  EXPECT_FALSE(h.verdict_json("nope").has_value());
}

TEST_F(HistoryTest, GateIsTheWorldRowsLowestBusbwAtTheBandsSize) {
  auto gates = gates_of(run_at(1, 1.5));
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].transport, "socket");
  EXPECT_EQ(gates[0].gate_bytes, 64 << 20);
  EXPECT_DOUBLE_EQ(gates[0].busbw_gbps, 1.5);  // min of out-of-place 1.5 and in-place 1.65
  EXPECT_DOUBLE_EQ(gates[0].baseline_gbps, 2.0);
  EXPECT_DOUBLE_EQ(gates[0].degraded_ratio, 0.8);
  EXPECT_EQ(gates[0].profile, "ci-loopback");
}

TEST_F(HistoryTest, GateWithoutBandUsesFlaggedSizeAndKeepsNaN) {
  Verdict v = testing::full_sample();  // socket world row gated at 1 MiB; rank-2 row NaN, synthetic
  v.baseline = nullptr;
  auto gates = gates_of(v);
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].gate_bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(gates[0].busbw_gbps, 1.93);
  EXPECT_TRUE(std::isnan(gates[0].baseline_gbps));
  EXPECT_TRUE(gates[0].synthetic);
  EXPECT_EQ(gates[0].identity, "network=Socket interface=eth0");

  v.transports[0].busbw_gbps = std::nan("");  // nothing finite at the gate
  History h(db_);
  h.add(v, "run");
  auto stored = h.gates({});
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_TRUE(std::isnan(stored[0].busbw_gbps));  // NULL in the file, NaN again when read
  EXPECT_TRUE(std::isnan(stored[0].baseline_gbps));
  EXPECT_EQ(stored[0].verdict, Outcome::fail);
}

// A fleet's verdict with its ranks' rows and identities summarised (results/verdict/alike.h)
// and no world row: the gate is the slowest summarised rank's, its identity what they shared.
TEST_F(HistoryTest, GateOfAVerdictWhoseRanksAreSummarisedAsAlike) {
  Verdict v = testing::full_sample();
  v.baseline = nullptr;
  v.transports.clear();
  v.identities.clear();
  v.alike = nlohmann::json::parse(R"({
    "identities": [{"transport": "fabric", "ranks": [[1, 2047]], "rank_count": 2047,
                    "common": {"provider": "efa", "interface": "rdmap0s6"}}],
    "transports": [
      {"transport": "fabric", "bytes": 1024, "count": 256, "dtype": "float32", "in_place": false,
       "ranks": [[1, 2047]], "rank_count": 2047, "time_us": null, "algbw_gbps": null,
       "busbw_gbps": {"min": 9.0, "median": 10.0, "max": 11.0}, "wrong": 0},
      {"transport": "fabric", "bytes": 1048576, "count": 262144, "dtype": "float32",
       "in_place": false, "gate": true, "ranks": [[1, 2047]], "rank_count": 2047,
       "time_us": {"min": 1, "median": 2, "max": 3}, "algbw_gbps": null,
       "busbw_gbps": {"min": 41.5, "median": 44.0, "max": 45.0}, "wrong": 0}]})");
  TransportRow named;  // a rank a finding names keeps its row, here faster than the slowest
  named.transport = "fabric";
  named.rank = 77;
  named.bytes = 1048576;
  named.busbw_gbps = 43.0;
  v.transports.push_back(named);
  auto gates = gates_of(v);
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].transport, "fabric");
  EXPECT_EQ(gates[0].gate_bytes, 1048576);
  EXPECT_DOUBLE_EQ(gates[0].busbw_gbps, 41.5);
  EXPECT_EQ(gates[0].identity, "provider=efa interface=rdmap0s6");
}

TEST_F(HistoryTest, QueriesFilterAndLimitNewestButReturnOldestFirst) {
  History h(db_);
  std::vector<Verdict> vs;
  for (int m = 0; m < 10; ++m)
    vs.push_back(run_at(m, 1.0 + m, m % 3 == 0 ? "degraded" : "pass",
                        m < 5 ? "ci-loopback" : "g5-socket"));
  EXPECT_EQ(h.add_many(vs, "import").added, 10);
  EXPECT_EQ(h.runs({}).size(), 10u);
  HistoryQuery q;
  q.since_unix = parse_rfc3339("2026-11-30T00:04:00Z");
  EXPECT_EQ(h.runs(q).size(), 6u);
  q.profile = "g5-socket";
  EXPECT_EQ(h.runs(q).size(), 5u);
  q.verdict = Outcome::pass;
  auto passing = h.gates(q);
  ASSERT_EQ(passing.size(), 3u);  // minutes 5, 7, 8
  EXPECT_DOUBLE_EQ(passing[0].busbw_gbps, 6.0);
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
}

TEST_F(HistoryTest, PruneRemovesOldRunsWithTheirRows) {
  History h(db_);
  std::vector<Verdict> vs;
  for (int m = 0; m < 6; ++m) vs.push_back(run_at(m, 1.0));
  h.add_many(vs, "import");
  EXPECT_EQ(h.prune(parse_rfc3339("2026-11-30T00:02:00Z"), true), 2);  // minutes 0 and 1
  EXPECT_EQ(h.count_runs(), 4);
  EXPECT_EQ(h.gates({}).size(), 4u);      // the cascade took their gate rows
  EXPECT_EQ(h.findings({}).size(), 8u);   // and their findings
  EXPECT_EQ(h.runs({}).front().run_id, vs[2].run_id);
  EXPECT_EQ(h.prune(parse_rfc3339("2026-11-30T00:00:00Z"), false), 0);
}

TEST_F(HistoryTest, BatchIsAllOrNothing) {
  History h(db_);
  h.add(run_at(0, 1.0), "run");
  std::vector<Verdict> batch{run_at(1, 1.0), run_at(2, 1.0), run_at(3, 1.0)};
  batch[2].started_at = "yesterday";  // fails inside the transaction, after two inserts
  try {
    h.add_many(batch, "import");
    FAIL() << "a bad started_at must throw";
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find("started_at"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(db_), std::string::npos) << e.what();
  }
  EXPECT_EQ(h.count_runs(), 1);
  EXPECT_EQ(h.gates({}).size(), 1u);
  EXPECT_EQ(h.findings({}).size(), 2u);
}

// A writer SIGKILLed while adding leaves whole runs only: each stored run has its gate and both
// findings, and SQLite's integrity check passes.
TEST_F(HistoryTest, WriterKilledMidStreamLosesNothingStored) {
  { History h(db_); }
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    History h(db_);
    for (int m = 0; m < 100000; ++m) h.add(run_at(m % 1440, 1.0 + m % 7), "run"), (void)0;
    ::_exit(0);
  }
  // Kill once some runs are committed (bounded wait).
  std::int64_t seen = 0;
  ncclsmoke::testing::wait_until(
      [&] {
        try {
          History peek(db_, false);
          seen = peek.count_runs();
        } catch (const HistoryError&) {
        }
        return seen >= 20;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(50));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GE(seen, 20) << "the writer never committed 20 runs within 30 s";

  History h(db_, false);
  std::int64_t n = h.count_runs();
  EXPECT_GE(n, seen);
  EXPECT_EQ(static_cast<std::int64_t>(h.gates({}).size()), n);
  EXPECT_EQ(static_cast<std::int64_t>(h.findings({}).size()), 2 * n);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "ok");
  sqlite3_finalize(s);
  sqlite3_close(db);
}

TEST_F(HistoryTest, TwoWritersShareTheFile) {
  { History h(db_); }
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      History h(db_);
      for (int m = 0; m < 40; ++m) h.add(run_at(2 * m, 1.0), "run");
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  History h(db_);
  for (int m = 0; m < 40; ++m) h.add(run_at(2 * m + 1, 1.0), "run");
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(h.count_runs(), 80);
}

TEST_F(HistoryTest, BadFilesAreNamed) {
  std::string missing = (dir_ / "absent.db").string();
  try {
    History h(missing, false);
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(missing));  // create=false never creates

  std::string text = (dir_ / "notes.txt").string();
  std::ofstream(text) << "this is not a database, just some text that is long enough to matter\n"
                      << std::string(200, 'x');
  try {
    History h(text);
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }

  {  // a newer schema than this build knows
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  try {
    History h(db_);
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

// Each cause of an unusable history is classified and carries its own hint.
TEST_F(HistoryTest, GarbageFileIsCorruptWithTheMoveAsideHint) {
  std::ofstream(db_) << "this is not a database, just some text that is long enough to matter\n"
                     << std::string(200, 'x');
  try {
    History h(db_);
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.problem(), HistoryProblem::corrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find("mv " + db_ + " " + db_ + ".corrupt"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("ncclsmoke history import"), std::string::npos) << e.what();
  }
}

TEST_F(HistoryTest, DamagedPagesAreCorrupt) {
  {
    History h(db_);
    for (int m = 0; m < 50; ++m) h.add(run_at(m, 1.0), "run");
  }
  {  // overwrite everything after the header page with garbage
    std::fstream f(db_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    std::string junk(64 * 1024, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  try {
    History h(db_, false);
    h.runs({});
    h.count_runs();
    FAIL() << "a damaged file read without error";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.problem(), HistoryProblem::corrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find(".corrupt"), std::string::npos) << e.what();
  }
}

TEST_F(HistoryTest, LockedNamesTheProcessHoldingIt) {
  { History h(db_); }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the write lock for at most 20 s
    sqlite3* db = nullptr;
    if (sqlite3_open(db_.c_str(), &db) != SQLITE_OK) ::_exit(1);
    if (sqlite3_exec(db, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) != SQLITE_OK) ::_exit(2);
    char c = 'x';
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    ::sleep(20);
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child could not take the lock";
  ::close(ready[0]);
  std::string what;
  HistoryProblem problem = HistoryProblem::other;
  try {
    History h(db_, true, 300);
    h.add(run_at(1, 1.0), "run");
  } catch (const HistoryError& e) {
    what = e.what();
    problem = e.problem();
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(problem, HistoryProblem::locked) << what;
  EXPECT_NE(what.find("held by pid " + std::to_string(child)), std::string::npos) << what;
  EXPECT_NE(what.find("retried for 0.3 s"), std::string::npos) << what;
}

TEST_F(HistoryTest, ADirectoryAtThePathCannotBeOpened) {
  fs::create_directories(db_);
  try {
    History h(db_);
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.problem(), HistoryProblem::not_a_file) << e.what();
    EXPECT_NE(std::string(e.what()).find(db_ + " is a directory"), std::string::npos) << e.what();
  }
}

TEST(HistoryProblems, ClassifiesEachCause) {
  EXPECT_EQ(classify_history_error(SQLITE_CORRUPT, 0), HistoryProblem::corrupt);
  EXPECT_EQ(classify_history_error(SQLITE_NOTADB, 0), HistoryProblem::corrupt);
  EXPECT_EQ(classify_history_error(SQLITE_BUSY, 0), HistoryProblem::locked);
  EXPECT_EQ(classify_history_error(SQLITE_LOCKED, 0), HistoryProblem::locked);
  EXPECT_EQ(classify_history_error(SQLITE_FULL, 0), HistoryProblem::full);
  EXPECT_EQ(classify_history_error(SQLITE_IOERR_WRITE, ENOSPC), HistoryProblem::full);
  EXPECT_EQ(classify_history_error(SQLITE_IOERR_FSYNC, EDQUOT), HistoryProblem::full);
  EXPECT_EQ(classify_history_error(SQLITE_IOERR_READ, EIO), HistoryProblem::io);
  EXPECT_EQ(classify_history_error(SQLITE_READONLY, 0), HistoryProblem::read_only);
  EXPECT_EQ(classify_history_error(SQLITE_CANTOPEN, EROFS), HistoryProblem::read_only);
  EXPECT_EQ(classify_history_error(SQLITE_CANTOPEN, ENOENT), HistoryProblem::cannot_open);
  EXPECT_EQ(classify_history_error(SQLITE_MISUSE, 0), HistoryProblem::other);
  std::string full = history_hint(HistoryProblem::full, "/var/lib/ncclsmoke/history.db", ENOSPC, 0);
  EXPECT_NE(full.find("no space left on the history's filesystem (/var/lib/ncclsmoke)"),
            std::string::npos) << full;
  std::string ro = history_hint(HistoryProblem::read_only, "/h/history.db", EROFS, 0);
  EXPECT_NE(ro.find("read-only"), std::string::npos) << ro;
  EXPECT_EQ(kExitHistoryUnusable, 7);
}

TEST(HistoryTime, ParsesDurationsAndTimes) {
  double now = parse_rfc3339("2026-11-30T12:00:00Z");
  EXPECT_DOUBLE_EQ(parse_since("14d", now), now - 14 * 86400);
  EXPECT_DOUBLE_EQ(parse_since("36h", now), now - 36 * 3600);
  EXPECT_DOUBLE_EQ(parse_since("90m", now), now - 90 * 60);
  EXPECT_DOUBLE_EQ(parse_since("2w", now), now - 14 * 86400);
  EXPECT_DOUBLE_EQ(parse_since("2026-11-30T10:00:00Z", now), now - 7200);
  EXPECT_DOUBLE_EQ(parse_rfc3339("2026-11-30T14:00:00+02:00"), now);
  EXPECT_DOUBLE_EQ(parse_rfc3339("2026-11-30T12:00:00.250Z"), now + 0.25);
  for (const char* bad : {"", "14", "d", "-3d", "14x", "yesterday", "2026-13-01T00:00:00Z",
                          "2026-11-30T12:00:00+0x:00"})
    EXPECT_THROW(parse_since(bad, now), std::invalid_argument) << bad;
}

}  // namespace
}  // namespace ncclsmoke::results
