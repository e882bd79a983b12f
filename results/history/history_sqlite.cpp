// Run history in an SQLite file (history.h, history_backend.h). Statements are prepared per call
// or once per transaction: the per-run cost is the JSON text and the inserts, not statement
// compilation, and batches share one transaction.
#include <sqlite3.h>
#include <sys/statfs.h>
#include <strings.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <variant>

#include "results/history/history_backend.h"

namespace ncclsmoke::results::detail {
namespace {

using nlohmann::json;

// Schema version 3 (kHistorySchemaVersion). runs.cluster and findings.subject come last so that
// an older file migrated by ALTER TABLE and a fresh file have the same columns in the same order.
const char* kSqliteCreateSql = R"sql(
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY,
  started_at TEXT NOT NULL,
  started_unix REAL NOT NULL,
  duration_s REAL,
  verdict TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  profile TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  hosts TEXT NOT NULL,
  source TEXT NOT NULL,
  verdict_json TEXT NOT NULL,
  cluster TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_by_time ON runs(started_unix);
CREATE INDEX IF NOT EXISTS runs_by_profile ON runs(profile, started_unix);
CREATE INDEX IF NOT EXISTS runs_by_cluster ON runs(cluster, started_unix);
CREATE TABLE IF NOT EXISTS gates (
  run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  transport TEXT NOT NULL,
  gate_bytes INTEGER NOT NULL,
  busbw_gbps REAL,
  baseline_gbps REAL,
  degraded_ratio REAL,
  fail_ratio REAL,
  synthetic INTEGER NOT NULL,
  identity TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS gates_by_run ON gates(run_id);
CREATE TABLE IF NOT EXISTS findings (
  run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  code TEXT NOT NULL,
  severity TEXT NOT NULL,
  layer TEXT NOT NULL,
  message TEXT NOT NULL,
  ranks TEXT NOT NULL,
  hosts TEXT NOT NULL,
  subject TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS findings_by_run ON findings(run_id);
)sql";

// Version 1 -> 2: the cluster column (runs stored before it get "").
const char* kMigrateV1Sql = R"sql(
ALTER TABLE runs ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS runs_by_cluster ON runs(cluster, started_unix);
)sql";

// Version 2 -> 3: findings.subject (findings stored before it get "": no subject).
const char* kMigrateV2Sql = R"sql(
ALTER TABLE findings ADD COLUMN subject TEXT NOT NULL DEFAULT '';
)sql";


// How long each open connection retries a lock, for the "locked" hint.
std::mutex busy_mu;
std::map<const sqlite3*, int> busy_ms_of;

int busy_ms(const sqlite3* db) {
  std::lock_guard lock(busy_mu);
  auto it = busy_ms_of.find(db);
  return it == busy_ms_of.end() ? 0 : it->second;
}

// The error for a failed SQLite call: `what` (names the file), SQLite's message, and the hint of
// its cause.
HistoryError sqlite_error(sqlite3* db, int rc, const std::string& path, const std::string& what) {
  int sys = db ? sqlite3_system_errno(db) : 0;
  HistoryProblem p = classify_history_error(rc, sys);
  std::string msg = what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  if (sys && p != HistoryProblem::locked) msg += std::string(" (") + std::strerror(sys) + ")";
  std::string hint = history_hint(p, path, sys, busy_ms(db));
  return HistoryError(msg + (hint.empty() ? "" : "; " + hint), p);
}

// One prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    if (int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr); rc != SQLITE_OK)
      throw sqlite_error(db, rc, path, "history " + path);
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  // The text must outlive step(): no copy (the verdict JSON is the largest value by far).
  Stmt& bind_static(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
    return *this;
  }
  Stmt& bind(int i, double v) {
    // NaN is stored as NULL ("not measured"), and read back as NaN.
    check(std::isnan(v) ? sqlite3_bind_null(s_, i) : sqlite3_bind_double(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }

  // true: a row is ready; false: done. Throws on errors (including SQLITE_BUSY past the timeout).
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw sqlite_error(db_, sqlite3_extended_errcode(db_), path_, "history " + path_);
  }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string text(int i) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, i))) : std::string();
  }
  double real(int i) const {
    return sqlite3_column_type(s_, i) == SQLITE_NULL ? kNaN : sqlite3_column_double(s_, i);
  }
  std::int64_t integer(int i) const { return sqlite3_column_int64(s_, i); }
  bool flag(int i) const { return integer(i) != 0; }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw sqlite_error(db_, rc, path_, "history " + path_);
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  std::string path_;
};

// A query over runs r (and gates g for the gates table): "SELECT <columns> FROM <from>" plus the
// filters, ordered by start time (newest first when limited, flipped back: callers always get
// oldest first), each row read by `read`. `cluster_col`: "r.cluster", or "''" on a version-1 file.
template <typename Row, typename Read>
std::vector<Row> select_rows(sqlite3* db, const std::string& path, const std::string& select_from,
                             const HistoryQuery& q, bool with_transport,
                             const std::string& row_column, const std::string& cluster_col,
                             Read read) {
  std::string sql = select_from + " WHERE 1";
  std::vector<std::variant<double, std::string>> params;
  auto filter = [&](bool on, const std::string& clause, std::variant<double, std::string> value) {
    if (!on) return;
    sql += clause;
    params.push_back(std::move(value));
  };
  filter(q.since_unix > 0, " AND r.started_unix >= ?", q.since_unix);
  filter(q.until_unix > 0, " AND r.started_unix < ?", q.until_unix);
  filter(!q.profile.empty(), " AND r.profile = ?", q.profile);
  filter(q.verdict.has_value(), " AND r.verdict = ?",
         q.verdict ? to_string(*q.verdict) : std::string());
  filter(!q.cluster.empty(), " AND " + cluster_col + " = ?", q.cluster);
  filter(with_transport && !q.transport.empty(), " AND g.transport = ?", q.transport);
  const char* dir = q.limit > 0 ? " DESC" : " ASC";
  sql += std::string(" ORDER BY r.started_unix") + dir + ", r.run_id" + dir;
  if (!row_column.empty()) sql += ", " + row_column + dir;
  if (q.limit > 0) sql += " LIMIT " + std::to_string(q.limit);

  Stmt s(db, sql, path);
  for (size_t i = 0; i < params.size(); ++i)
    std::visit([&](const auto& v) { s.bind(static_cast<int>(i + 1), v); }, params[i]);
  std::vector<Row> out;
  while (s.step()) out.push_back(read(s));
  if (q.limit > 0) std::reverse(out.begin(), out.end());
  return out;
}

// The statements one import uses, prepared once per transaction instead of once per run.
struct Inserts {
  Inserts(sqlite3* db, const std::string& path)
      : exists(db, "SELECT 1 FROM runs WHERE run_id = ?", path),
        run(db,
            "INSERT INTO runs (run_id, started_at, started_unix, duration_s, verdict, exit_code, "
            "world_size, profile, tool_version, hosts, source, verdict_json, cluster) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            path),
        gate(db,
             "INSERT INTO gates (run_id, transport, gate_bytes, busbw_gbps, baseline_gbps, "
             "degraded_ratio, fail_ratio, synthetic, identity) VALUES (?,?,?,?,?,?,?,?,?)",
             path),
        finding(db,
                "INSERT INTO findings (run_id, code, severity, layer, message, ranks, hosts, "
                "subject) VALUES (?,?,?,?,?,?,?,?)",
                path) {}
  Stmt exists, run, gate, finding;
};

AddResult add_one(Inserts& ins, const std::string& path, const Verdict& v,
                  const std::string& source, const std::string& cluster,
                  const std::string* json_text) {
  AddResult r;
  if (v.run_id.empty()) throw HistoryError("history " + path + ": verdict has no run_id", HistoryProblem::bad_verdict);
  ins.exists.bind(1, v.run_id);
  bool stored = ins.exists.step();
  ins.exists.reset();
  if (stored) {
    r.duplicates = 1;
    return r;
  }
  double started = started_unix_of(v, path);
  std::string text = json_text ? std::string() : to_json(v).dump();
  Stmt& s = ins.run;
  s.bind(1, v.run_id).bind(2, v.started_at).bind(3, started).bind(4, v.duration_s);
  s.bind(5, to_string(v.verdict)).bind(6, v.exit_code).bind(7, v.world.size).bind(8, profile_of(v));
  s.bind(9, v.tool.version).bind(10, json(hosts_of(v)).dump()).bind(11, source);
  s.bind_static(12, json_text ? *json_text : text).bind(13, cluster);
  s.step();
  s.reset();
  for (const auto& g : gates_of(v)) {
    Stmt& gs = ins.gate;
    gs.bind(1, v.run_id).bind(2, g.transport).bind(3, g.gate_bytes).bind(4, g.busbw_gbps);
    gs.bind(5, g.baseline_gbps).bind(6, g.degraded_ratio).bind(7, g.fail_ratio);
    gs.bind(8, g.synthetic ? 1 : 0).bind(9, g.identity);
    gs.step();
    gs.reset();
  }
  for (const auto& f : v.findings) {
    Stmt& fs = ins.finding;
    fs.bind(1, v.run_id).bind(2, to_string(f.code)).bind(3, to_string(f.severity));
    fs.bind(4, to_string(f.layer));
    fs.bind(5, f.message).bind(6, json(f.ranks).dump()).bind(7, json(f.hosts).dump());
    fs.bind(8, f.subject.empty() ? std::string() : to_json(f.subject).dump());
    fs.step();
    fs.reset();
  }
  r.added = 1;
  return r;
}

// The journal mode for `path`'s filesystem, with the note a network filesystem earns (once per
// process: a report or import opens one history, a long-lived caller may open it often).
std::string journal_mode_for_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  struct statfs sf{};
  if (::statfs(dir.c_str(), &sf) != 0) return "WAL";  // open() reports the real problem
  const long type = static_cast<long>(sf.f_type);
  std::string mode = sqlite_journal_mode_for(type);
  if (mode != "WAL") {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::cerr << "ncclsmoke: note: history " << path << " is on a network filesystem ("
                << network_filesystem_name(type)
                << "): using SQLite's rollback journal (journal_mode=DELETE) instead of WAL, "
                   "whose shared-memory index does not work across hosts; for a fleet, use a "
                   "postgresql:// history\n";
  }
  return mode;
}

class SqliteHistory final : public HistoryBackend {
 public:
  SqliteHistory(const std::string& path, bool create, int busy_timeout_ms) : path_(path) {
    struct stat before{};
    const bool absent = ::stat(path.c_str(), &before) != 0 || before.st_size == 0;
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_FULLMUTEX;
    if (int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr); rc != SQLITE_OK) {
      HistoryError e = sqlite_error(db_, rc, path, "cannot open history " + path);
      sqlite3_close(db_);
      db_ = nullptr;
      std::string what = e.what();
      if (!create) what += " (does the file exist? it is created by `ncclsmoke history import` or `run --history`)";
      throw HistoryError(what, e.problem());
    }
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    {
      std::lock_guard lock(busy_mu);
      busy_ms_of[db_] = busy_timeout_ms;
    }
    try {
      int version = user_version();  // fails here on a file that is not SQLite
      if (version > kHistorySchemaVersion)
        throw HistoryError("history " + path + " has schema version " + std::to_string(version) +
                           ", newer than this ncclsmoke's " + std::to_string(kHistorySchemaVersion) +
                           ": use a newer ncclsmoke, or another file",
                           HistoryProblem::not_history);
      const std::string mode = journal_mode_for_path(path);
      exec(("PRAGMA journal_mode=" + mode).c_str());
      first_fill_ = create && absent && version == 0 && mode == "WAL";
      exec("PRAGMA synchronous=FULL");
      exec("PRAGMA foreign_keys=ON");
      if (version == 0) {
        if (!create) {
          Stmt s(db_, "SELECT count(*) FROM sqlite_master", path_);
          if (s.step() && s.integer(0) > 0)
            throw HistoryError("history " + path + " is an SQLite file but not an ncclsmoke history",
                               HistoryProblem::not_history);
        }
        in_transaction([&](int v) { migrate(v); });
      } else if (version < kHistorySchemaVersion && create) {
        in_transaction([&](int v) { migrate(v); });
      } else if (version < kHistorySchemaVersion) {
        // Read as it is: never written by a read-only command.
        has_cluster_ = version >= 2;
        has_subject_ = false;
      }
    } catch (const HistoryError&) {
      close();
      throw;
    }
  }
  ~SqliteHistory() override { close(); }

  AddResult add_stream(const History::NextSourcedVerdict& next, const std::string& source,
                       const std::string& cluster) override {
    if (!has_subject_) {  // an older file opened read-only: migrate before the first write
      in_transaction([&](int v) { migrate(v); });
      has_cluster_ = has_subject_ = true;
    }
    AddResult total;
    // The first import into a file this process created (a bulk load: a year of verdicts, ~1.2 GB
    // of JSON for 100,000 runs) uses the rollback journal for that one transaction: a page added
    // past the file's original end needs no journal entry, so the data is written once, where WAL
    // writes it to the log and again at the checkpoint. Still one transaction, fsynced at COMMIT
    // (synchronous=FULL); a crash leaves a hot journal that rolls it back. The file is in WAL
    // mode again before this returns. If another connection has the file open already, the
    // switch is refused and the import simply stays in WAL.
    const bool bulk = first_fill_ && set_journal_mode("DELETE");
    first_fill_ = false;
    struct BackToWal {
      SqliteHistory* self;
      bool on;
      ~BackToWal() {
        if (on) self->set_journal_mode("WAL");
      }
    } back_to_wal{this, bulk};
    exec("BEGIN IMMEDIATE");
    try {
      Inserts ins(db_, path_);
      const Verdict* v = nullptr;
      const std::string* text = nullptr;
      const std::string* own_source = nullptr;
      while (next(v, text, own_source)) {
        AddResult r = add_one(ins, path_, *v, own_source ? *own_source : source, cluster, text);
        total.added += r.added;
        total.duplicates += r.duplicates;
      }
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return total;
  }

  std::int64_t prune(double before_unix, bool vacuum) override {
    std::int64_t removed = 0;
    exec("BEGIN IMMEDIATE");
    try {
      Stmt s(db_, "DELETE FROM runs WHERE started_unix < ?", path_);  // cascades to gates/findings
      s.bind(1, before_unix);
      s.step();
      removed = sqlite3_changes64(db_);
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    if (vacuum && removed > 0) exec("VACUUM");
    return removed;
  }

  std::int64_t count_runs() override {
    Stmt s(db_, "SELECT count(*) FROM runs", path_);
    return s.step() ? s.integer(0) : 0;
  }

  std::vector<HistoryRun> runs(const HistoryQuery& q) override {
    return select_rows<HistoryRun>(
        db_, path_,
        "SELECT r.run_id, r.started_at, r.started_unix, r.duration_s, r.verdict, r.exit_code, "
        "r.world_size, r.profile, r.tool_version, r.hosts, r.source, " + cluster_col() +
        " FROM runs r",
        q, false, "", cluster_col(), [](const Stmt& s) { return run_from_row(s); });
  }

  std::vector<HistoryGate> gates(const HistoryQuery& q) override {
    return select_rows<HistoryGate>(
        db_, path_,
        "SELECT g.run_id, r.started_unix, r.verdict, r.profile, r.world_size, g.transport, "
        "g.gate_bytes, g.busbw_gbps, g.baseline_gbps, g.degraded_ratio, g.fail_ratio, "
        "g.synthetic, g.identity, " + cluster_col() +
        " FROM gates g JOIN runs r ON r.run_id = g.run_id",
        q, true, "g.rowid", cluster_col(), [](const Stmt& s) { return gate_from_row(s); });
  }

  std::vector<HistoryFinding> findings(const HistoryQuery& q) override {
    return select_rows<HistoryFinding>(
        db_, path_,
        "SELECT f.run_id, r.started_unix, r.profile, f.code, f.severity, f.layer, f.message, "
        "f.ranks, f.hosts, " + cluster_col() + ", " + (has_subject_ ? "f.subject" : "''") +
        " FROM findings f JOIN runs r ON r.run_id = f.run_id",
        q, false, "f.rowid", cluster_col(), [](const Stmt& s) { return finding_from_row(s); });
  }

  std::optional<nlohmann::json> verdict_json(const std::string& run_id) override {
    Stmt s(db_, "SELECT verdict_json FROM runs WHERE run_id = ?", path_);
    s.bind(1, run_id);
    if (!s.step()) return std::nullopt;
    return rendezvous::parse_bounded_or_discarded(s.text(0), rendezvous::kMaxVerdictJsonBytes);
  }

 private:
  std::string cluster_col() const { return has_cluster_ ? "r.cluster" : "''"; }

  // One step of the schema from `version` (0: none) to kHistorySchemaVersion.
  void migrate(int version) {
    if (version == 0) return exec(kSqliteCreateSql);
    if (version == 1) exec(kMigrateV1Sql);
    if (version <= 2) exec(kMigrateV2Sql);
  }

  // PRAGMA journal_mode=<mode>; true when the file is now in that mode.
  bool set_journal_mode(const char* mode) {
    std::string now;
    sqlite3_stmt* st = nullptr;
    const std::string sql = std::string("PRAGMA journal_mode=") + mode;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      auto p = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      now = p ? p : "";
    }
    sqlite3_finalize(st);
    return strcasecmp(now.c_str(), mode) == 0;
  }

  int user_version() {
    Stmt s(db_, "PRAGMA user_version", path_);
    return s.step() ? static_cast<int>(s.integer(0)) : 0;
  }

  // Creates or migrates the schema in one write transaction; `step(version)` sees the version
  // read under the lock (another process may have done it meanwhile), and the new version is
  // written with it.
  template <typename Step>
  void in_transaction(Step step) {
    exec("BEGIN IMMEDIATE");
    try {
      int v = user_version();
      if (v < kHistorySchemaVersion) {
        step(v);
        exec(("PRAGMA user_version=" + std::to_string(kHistorySchemaVersion)).c_str());
      }
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  void exec(const char* sql) {
    if (int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); rc != SQLITE_OK)
      throw sqlite_error(db_, sqlite3_extended_errcode(db_), path_, "history " + path_);
  }

  void close() {
    if (!db_) return;
    {
      std::lock_guard lock(busy_mu);
      busy_ms_of.erase(db_);
    }
    sqlite3_close(db_);
    db_ = nullptr;
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  bool has_cluster_ = true;
  bool has_subject_ = true;
  bool first_fill_ = false;  // created by this open, still empty: add_stream may bulk-load it
};

}  // namespace

std::unique_ptr<HistoryBackend> open_sqlite_history(const std::string& path, bool create,
                                                    int busy_timeout_ms) {
  return std::make_unique<SqliteHistory>(path, create, busy_timeout_ms);
}

}  // namespace ncclsmoke::results::detail
