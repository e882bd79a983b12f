// Run history on a PostgreSQL server (history.h, history_backend.h), through libpq's C API.
//
// Batches: an add_stream is one transaction (BEGIN ... COMMIT); its runs go in multi-row INSERTs
// of up to kRunsPerInsert runs (ON CONFLICT (run_id) DO NOTHING RETURNING run_id tells which are
// new), then the gates and findings of the new ones, each statement under PostgreSQL's 65,535
// parameter limit. If the process dies or the server goes away mid-batch, the server rolls the
// open transaction back: none of the batch is stored. Values travel as text parameters (never
// spliced into SQL); NaN is NULL.
//
// Connection defaults (the URL's own parameters win): connect_timeout = the History timeout,
// TCP keepalives (5 s idle, 2 s interval, 3 probes) so a server that vanished is noticed,
// application_name=ncclsmoke. Session: lock_timeout = the History timeout (a lock wait past it is
// HistoryProblem::locked), client_min_messages=warning (no NOTICE chatter on stderr).
#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <vector>

#include "results/history/history_backend.h"

namespace ncclsmoke::results::detail {
namespace {

using nlohmann::json;
constexpr size_t kRunsPerInsert = 500;
constexpr size_t kMaxParams = 60000;  // PostgreSQL's protocol allows 65,535 per statement
// Serialises schema creation between writers that meet on a fresh database.
constexpr long long kSchemaLockKey = 0x6e63636c736d6bLL;  // "ncclsmk"

const char* kPostgresCreateSql = R"sql(
CREATE TABLE IF NOT EXISTS ncclsmoke_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ncclsmoke_runs (
  run_id TEXT PRIMARY KEY,
  started_at TEXT NOT NULL,
  started_unix DOUBLE PRECISION NOT NULL,
  duration_s DOUBLE PRECISION,
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
CREATE INDEX IF NOT EXISTS ncclsmoke_runs_by_time ON ncclsmoke_runs(started_unix);
CREATE INDEX IF NOT EXISTS ncclsmoke_runs_by_profile ON ncclsmoke_runs(profile, started_unix);
CREATE INDEX IF NOT EXISTS ncclsmoke_runs_by_cluster ON ncclsmoke_runs(cluster, started_unix);
CREATE TABLE IF NOT EXISTS ncclsmoke_gates (
  id BIGSERIAL PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES ncclsmoke_runs(run_id) ON DELETE CASCADE,
  transport TEXT NOT NULL,
  gate_bytes BIGINT NOT NULL,
  busbw_gbps DOUBLE PRECISION,
  baseline_gbps DOUBLE PRECISION,
  degraded_ratio DOUBLE PRECISION,
  fail_ratio DOUBLE PRECISION,
  synthetic BOOLEAN NOT NULL,
  identity TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ncclsmoke_gates_by_run ON ncclsmoke_gates(run_id);
CREATE TABLE IF NOT EXISTS ncclsmoke_findings (
  id BIGSERIAL PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES ncclsmoke_runs(run_id) ON DELETE CASCADE,
  code TEXT NOT NULL,
  severity TEXT NOT NULL,
  layer TEXT NOT NULL,
  message TEXT NOT NULL,
  ranks TEXT NOT NULL,
  hosts TEXT NOT NULL,
  subject TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ncclsmoke_findings_by_run ON ncclsmoke_findings(run_id);
-- Version 2 -> 3 (the tables above already exist): findings.subject, "" for those stored before.
ALTER TABLE ncclsmoke_findings ADD COLUMN IF NOT EXISTS subject TEXT NOT NULL DEFAULT '';
)sql";

// One parameter as text; nullopt is SQL NULL.
using Param = std::optional<std::string>;

Param num(double v) {
  if (std::isnan(v)) return std::nullopt;
  if (std::isinf(v)) return std::string(v > 0 ? "Infinity" : "-Infinity");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return std::string(buf);
}
Param num(std::int64_t v) { return std::to_string(v); }
Param num(int v) { return std::to_string(v); }

// A PGresult, cleared on scope exit.
class Result {
 public:
  explicit Result(PGresult* r = nullptr) : r_(r) {}
  ~Result() { PQclear(r_); }
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result& operator=(Result&& o) noexcept {
    std::swap(r_, o.r_);
    return *this;
  }
  PGresult* get() const { return r_; }
  int rows() const { return PQntuples(r_); }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  std::string text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), static_cast<size_t>(PQgetlength(r_, row, col)));
  }
  double real(int row, int col) const {
    return null(row, col) ? kNaN : std::strtod(PQgetvalue(r_, row, col), nullptr);
  }
  std::int64_t integer(int row, int col) const {
    return null(row, col) ? 0 : std::strtoll(PQgetvalue(r_, row, col), nullptr, 10);
  }
  bool boolean(int row, int col) const {
    const char* v = PQgetvalue(r_, row, col);
    return v[0] == 't' || v[0] == '1';
  }

 private:
  PGresult* r_;
};

// One row of a Result, as run_from_row() & co. read it.
struct RowOf {
  const Result& r;
  int row;
  std::string text(int c) const { return r.text(row, c); }
  double real(int c) const { return r.real(row, c); }
  std::int64_t integer(int c) const { return r.integer(row, c); }
  bool flag(int c) const { return r.boolean(row, c); }
};

// libpq's multi-line messages ("FATAL: ...\nDETAIL: ...") as one line.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (size_t p; (p = s.find('\n')) != std::string::npos;) s.replace(p, 1, "; ");
  for (size_t p; (p = s.find("\t")) != std::string::npos;) s.replace(p, 1, " ");
  for (size_t p; (p = s.find("  ")) != std::string::npos;) s.erase(p, 1);
  return s;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

class PostgresHistory final : public HistoryBackend {
 public:
  PostgresHistory(const std::string& url, bool create, int timeout_ms)
      : url_(url), name_(redact_history_url(url)), timeout_ms_(timeout_ms) {
    secrets_ = secrets_of(url);
    connect();
    try {
      open_schema(create);
    } catch (...) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw;
    }
  }
  ~PostgresHistory() override {
    if (conn_) PQfinish(conn_);
  }

  AddResult add_stream(const History::NextSourcedVerdict& next, const std::string& source,
                       const std::string& cluster) override {
    ensure_connected();
    if (!has_subject_) {  // an older database opened read-only: migrate before the first write
      open_schema(true);
      has_subject_ = true;
    }
    AddResult total;
    exec("BEGIN");
    try {
      Batch batch;
      std::unordered_set<std::string> seen;  // run_ids of this batch: a repeat is a duplicate
      const Verdict* v = nullptr;
      const std::string* text = nullptr;
      const std::string* own_source = nullptr;
      while (next(v, text, own_source)) {
        if (v->run_id.empty())
          throw HistoryError("history " + name_ + ": verdict has no run_id", HistoryProblem::bad_verdict);
        if (!seen.insert(v->run_id).second) {
          ++total.duplicates;
          continue;
        }
        batch.add(*v, text, own_source ? *own_source : source, cluster, name_);
        if (batch.runs.size() >= kRunsPerInsert) flush(batch, total);
      }
      flush(batch, total);
      exec("COMMIT");
    } catch (...) {
      if (PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    }
    return total;
  }

  std::int64_t prune(double before_unix, bool vacuum) override {
    ensure_connected();
    // One statement: its own transaction; the cascade takes the gates and findings.
    Result r = exec_params("DELETE FROM ncclsmoke_runs WHERE started_unix < $1", {num(before_unix)});
    std::int64_t removed = std::strtoll(PQcmdTuples(r.get()), nullptr, 10);
    // PostgreSQL reuses the space after a plain VACUUM (it returns it to the OS only with
    // VACUUM FULL, which locks the tables: a DBA's call, not a CronJob's).
    if (vacuum && removed > 0) exec("VACUUM ncclsmoke_runs, ncclsmoke_gates, ncclsmoke_findings");
    return removed;
  }

  std::int64_t count_runs() override {
    ensure_connected();
    Result r = exec_params("SELECT count(*) FROM ncclsmoke_runs", {});
    return r.rows() ? r.integer(0, 0) : 0;
  }

  std::vector<HistoryRun> runs(const HistoryQuery& q) override {
    return select_rows<HistoryRun>(
        "SELECT r.run_id, r.started_at, r.started_unix, r.duration_s, r.verdict, r.exit_code, "
        "r.world_size, r.profile, r.tool_version, r.hosts, r.source, r.cluster "
        "FROM ncclsmoke_runs r",
        q, false, "", [](const Result& s, int i) { return run_from_row(RowOf{s, i}); });
  }

  std::vector<HistoryGate> gates(const HistoryQuery& q) override {
    return select_rows<HistoryGate>(
        "SELECT g.run_id, r.started_unix, r.verdict, r.profile, r.world_size, g.transport, "
        "g.gate_bytes, g.busbw_gbps, g.baseline_gbps, g.degraded_ratio, g.fail_ratio, "
        "g.synthetic, g.identity, r.cluster "
        "FROM ncclsmoke_gates g JOIN ncclsmoke_runs r ON r.run_id = g.run_id",
        q, true, "g.id", [](const Result& s, int i) { return gate_from_row(RowOf{s, i}); });
  }

  std::vector<HistoryFinding> findings(const HistoryQuery& q) override {
    return select_rows<HistoryFinding>(
        "SELECT f.run_id, r.started_unix, r.profile, f.code, f.severity, f.layer, f.message, "
        "f.ranks, f.hosts, r.cluster, " + std::string(has_subject_ ? "f.subject" : "''") +
        " FROM ncclsmoke_findings f JOIN ncclsmoke_runs r ON r.run_id = f.run_id",
        q, false, "f.id", [](const Result& s, int i) { return finding_from_row(RowOf{s, i}); });
  }

  std::optional<nlohmann::json> verdict_json(const std::string& run_id) override {
    ensure_connected();
    Result r = exec_params("SELECT verdict_json FROM ncclsmoke_runs WHERE run_id = $1", {run_id});
    if (r.rows() == 0) return std::nullopt;
    return rendezvous::parse_bounded_or_discarded(r.text(0, 0), rendezvous::kMaxVerdictJsonBytes);
  }

 private:
  // The rows of the runs not yet sent, each with its gates and findings.
  struct PendingRun {
    std::string run_id;
    std::vector<Param> run;                    // 13 columns
    std::vector<std::vector<Param>> gates;     // 9 columns each
    std::vector<std::vector<Param>> findings;  // 8 columns each
  };
  struct Batch {
    std::vector<PendingRun> runs;
    void add(const Verdict& v, const std::string* json_text, const std::string& source,
             const std::string& cluster, const std::string& name) {
      PendingRun p;
      p.run_id = v.run_id;
      const double started = started_unix_of(v, name);
      p.run = {v.run_id,        v.started_at,     num(started),
               num(v.duration_s), to_string(v.verdict),      num(v.exit_code),
               num(v.world.size), profile_of(v),  v.tool.version,
               json(hosts_of(v)).dump(), source,  json_text ? *json_text : to_json(v).dump(),
               cluster};
      for (const auto& g : gates_of(v))
        p.gates.push_back({v.run_id, g.transport, num(g.gate_bytes), num(g.busbw_gbps),
                           num(g.baseline_gbps), num(g.degraded_ratio), num(g.fail_ratio),
                           std::string(g.synthetic ? "true" : "false"), g.identity});
      for (const auto& f : v.findings)
        p.findings.push_back({v.run_id, to_string(f.code), to_string(f.severity),
                              to_string(f.layer), f.message, json(f.ranks).dump(), json(f.hosts).dump(),
                              f.subject.empty() ? std::string() : to_json(f.subject).dump()});
      runs.push_back(std::move(p));
    }
  };

  void flush(Batch& b, AddResult& total) {
    if (b.runs.empty()) return;
    std::vector<const std::vector<Param>*> rows;
    for (const auto& r : b.runs) rows.push_back(&r.run);
    std::unordered_set<std::string> added;
    insert_rows("INSERT INTO ncclsmoke_runs (run_id, started_at, started_unix, duration_s, verdict, "
                "exit_code, world_size, profile, tool_version, hosts, source, verdict_json, "
                "cluster) VALUES ",
                13, rows, " ON CONFLICT (run_id) DO NOTHING RETURNING run_id", &added);
    std::vector<const std::vector<Param>*> gates, findings;
    for (const auto& r : b.runs) {
      if (!added.count(r.run_id)) continue;
      for (const auto& g : r.gates) gates.push_back(&g);
      for (const auto& f : r.findings) findings.push_back(&f);
    }
    insert_rows("INSERT INTO ncclsmoke_gates (run_id, transport, gate_bytes, busbw_gbps, "
                "baseline_gbps, degraded_ratio, fail_ratio, synthetic, identity) VALUES ",
                9, gates, "", nullptr);
    insert_rows("INSERT INTO ncclsmoke_findings (run_id, code, severity, layer, message, ranks, "
                "hosts, subject) VALUES ",
                8, findings, "", nullptr);
    total.added += static_cast<int>(added.size());
    total.duplicates += static_cast<int>(b.runs.size() - added.size());
    b.runs.clear();
  }

  // Multi-row INSERTs of `rows` (each `ncols` values), split under the parameter limit; the
  // first column of each RETURNING row goes to `returned`.
  void insert_rows(const std::string& head, size_t ncols,
                   const std::vector<const std::vector<Param>*>& rows, const std::string& tail,
                   std::unordered_set<std::string>* returned) {
    const size_t per = std::max<size_t>(1, kMaxParams / ncols);
    for (size_t start = 0; start < rows.size(); start += per) {
      const size_t end = std::min(rows.size(), start + per);
      std::string sql = head;
      std::vector<Param> params;
      params.reserve((end - start) * ncols);
      for (size_t i = start; i < end; ++i) {
        sql += i == start ? "(" : ",(";
        for (size_t c = 0; c < ncols; ++c) {
          params.push_back((*rows[i])[c]);
          sql += (c ? ",$" : "$") + std::to_string(params.size());
        }
        sql += ")";
      }
      sql += tail;
      Result r = exec_params(sql, params);
      if (returned)
        for (int i = 0; i < r.rows(); ++i) returned->insert(r.text(i, 0));
    }
  }

  template <typename Row, typename Read>
  std::vector<Row> select_rows(const std::string& select_from, const HistoryQuery& q,
                               bool with_transport, const std::string& row_column, Read read) {
    ensure_connected();
    std::string sql = select_from + " WHERE TRUE";
    std::vector<Param> params;
    auto filter = [&](bool on, const char* clause, Param value) {
      if (!on) return;
      params.push_back(std::move(value));
      sql += std::string(clause) + std::to_string(params.size());
    };
    filter(q.since_unix > 0, " AND r.started_unix >= $", num(q.since_unix));
    filter(q.until_unix > 0, " AND r.started_unix < $", num(q.until_unix));
    filter(!q.profile.empty(), " AND r.profile = $", q.profile);
    filter(q.verdict.has_value(), " AND r.verdict = $",
           q.verdict ? to_string(*q.verdict) : std::string());
    filter(!q.cluster.empty(), " AND r.cluster = $", q.cluster);
    filter(with_transport && !q.transport.empty(), " AND g.transport = $", q.transport);
    // COLLATE "C": the same byte order as SQLite's, whatever the database's collation.
    const char* dir = q.limit > 0 ? " DESC" : " ASC";
    sql += std::string(" ORDER BY r.started_unix") + dir + ", r.run_id COLLATE \"C\"" + dir;
    if (!row_column.empty()) sql += ", " + row_column + dir;
    if (q.limit > 0) sql += " LIMIT " + std::to_string(q.limit);
    Result r = exec_params(sql, params);
    std::vector<Row> out;
    out.reserve(static_cast<size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) out.push_back(read(r, i));
    if (q.limit > 0) std::reverse(out.begin(), out.end());
    return out;
  }

  void connect() {
    const std::string secs = std::to_string(std::max(1, (timeout_ms_ + 999) / 1000));
    // The URL comes last: with expand_dbname its own parameters override these defaults.
    const char* keys[] = {"connect_timeout",  "application_name",    "keepalives",
                          "keepalives_idle",  "keepalives_interval", "keepalives_count",
                          "dbname",           nullptr};
    const char* vals[] = {secs.c_str(), "ncclsmoke", "1", "5", "2", "3", url_.c_str(), nullptr};
    conn_ = PQconnectdbParams(keys, vals, 1);
    if (!conn_) throw HistoryError("cannot open history " + name_ + ": out of memory", HistoryProblem::other);
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = scrub(one_line(PQerrorMessage(conn_)));
      HistoryProblem p = HistoryProblem::unreachable;
      if (contains(msg, "authentication failed") || contains(msg, "no password supplied") ||
          contains(msg, "password") || contains(msg, "pg_hba.conf") ||
          (contains(msg, "database \"") && contains(msg, "does not exist")) ||
          (contains(msg, "role \"") && contains(msg, "does not exist")))
        p = HistoryProblem::cannot_open;
      else if (contains(msg, "invalid") || contains(msg, "missing \"=\"") ||
               contains(msg, "unrecognized"))
        p = HistoryProblem::other;  // a malformed URL
      HistoryError e = error(p, "cannot open history " + name_ + ": " + msg, msg);
      PQfinish(conn_);
      conn_ = nullptr;
      throw e;
    }
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    exec("SET client_min_messages = warning");
    exec(("SET lock_timeout = " + std::to_string(std::max(1, timeout_ms_))).c_str());
  }

  // A long-lived History whose connection broke (server restart) reconnects once per call.
  void ensure_connected() {
    if (PQstatus(conn_) == CONNECTION_OK) return;
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = scrub(one_line(PQerrorMessage(conn_)));
      throw error(HistoryProblem::unreachable, "history " + name_ + ": " + msg, msg);
    }
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    exec("SET client_min_messages = warning");
    exec(("SET lock_timeout = " + std::to_string(std::max(1, timeout_ms_))).c_str());
  }

  void open_schema(bool create) {
    int version = schema_version();
    if (version > kHistorySchemaVersion)
      throw HistoryError("history " + name_ + " has schema version " + std::to_string(version) +
                         ", newer than this ncclsmoke's " + std::to_string(kHistorySchemaVersion) +
                         ": use a newer ncclsmoke, or another database",
                         HistoryProblem::not_history);
    if (version == kHistorySchemaVersion) return;
    if (!create && version > 0) {
      has_subject_ = false;  // an older database, read as it is: never written by a read-only open
      return;
    }
    if (!create)
      throw HistoryError("history " + name_ + ": this database holds no ncclsmoke history yet; "
                         "it is created by `ncclsmoke history import --history URL`, `publish "
                         "--history URL` or `run --history URL`",
                         HistoryProblem::cannot_open);
    exec("BEGIN");
    try {
      exec_params("SELECT pg_advisory_xact_lock($1)", {std::to_string(kSchemaLockKey)});
      if (schema_version() < kHistorySchemaVersion) {  // nobody did it while we waited
        exec(kPostgresCreateSql);
        exec_params("INSERT INTO ncclsmoke_meta (key, value) VALUES ('schema_version', $1) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    {std::to_string(kHistorySchemaVersion)});
      }
      exec("COMMIT");
    } catch (...) {
      if (PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    }
  }

  // 0: no ncclsmoke tables in this database (on the search_path).
  int schema_version() {
    Result t = exec_params("SELECT to_regclass('ncclsmoke_meta') IS NOT NULL", {});
    if (t.rows() == 0 || !t.boolean(0, 0)) return 0;
    Result r = exec_params("SELECT value FROM ncclsmoke_meta WHERE key = 'schema_version'", {});
    return r.rows() ? std::atoi(r.text(0, 0).c_str()) : 0;
  }

  void exec(const char* sql) { check(Result(PQexec(conn_, sql)), sql); }

  Result exec_params(const std::string& sql, const std::vector<Param>& params) {
    std::vector<const char*> values(params.size());
    std::vector<int> lengths(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      values[i] = params[i] ? params[i]->c_str() : nullptr;
      lengths[i] = params[i] ? static_cast<int>(params[i]->size()) : 0;
    }
    Result r(PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                          values.data(), lengths.data(), nullptr, 0));
    return check(std::move(r), sql.c_str());
  }

  Result check(Result r, const char* sql) {
    ExecStatusType st = r.get() ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
    const char* state = r.get() ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    std::string msg = scrub(one_line(r.get() && *PQresultErrorMessage(r.get())
                                         ? PQresultErrorMessage(r.get())
                                         : PQerrorMessage(conn_)));
    const bool bad = PQstatus(conn_) == CONNECTION_BAD;
    HistoryProblem p = classify_postgres_error(state ? state : "", bad);
    (void)sql;
    std::string what = "history " + name_ + ": " + msg;
    if (state && *state) what += " (SQLSTATE " + std::string(state) + ")";
    throw error(p, what, msg, bad);
  }

  std::string server() const {
    const char* h = conn_ ? PQhost(conn_) : nullptr;
    const char* p = conn_ ? PQport(conn_) : nullptr;
    return std::string(h && *h ? h : "localhost") + ":" + (p && *p ? p : "5432");
  }

  HistoryError error(HistoryProblem p, const std::string& what, const std::string& msg,
                     bool lost = false) const {
    std::string hint = postgres_hint(p, msg, lost);
    return HistoryError(what + (hint.empty() ? "" : "; " + hint), p);
  }

  std::string postgres_hint(HistoryProblem p, const std::string& msg, bool lost) const {
    const std::string at = server();
    const std::string host = at.substr(0, at.rfind(':')), port = at.substr(at.rfind(':') + 1);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3g", timeout_ms_ / 1000.0);
    switch (p) {
      case HistoryProblem::unreachable:
        return (lost ? "the PostgreSQL server at " + at +
                           " went away during the call (restarted, failed over, or the network "
                           "dropped): the open transaction was rolled back, nothing of it is "
                           "stored"
                     : "cannot reach the PostgreSQL server at " + at +
                           " (not running, restarting, wrong host or port, or a firewall)") +
               "; check it with `pg_isready -h " + host + " -p " + port + "` and run again";
      case HistoryProblem::cannot_open:
        if (contains(msg, "does not exist") && contains(msg, "database"))
          return "the database named in the URL does not exist on " + at +
                 ": create it (`createdb`) or fix the URL";
        if (contains(msg, "password") || contains(msg, "authentication") || contains(msg, "pg_hba"))
          return "authentication failed at " + at +
                 ": check the user and password in the URL (or PGPASSWORD / ~/.pgpass) and "
                 "the server's pg_hba.conf";
        return "";
      case HistoryProblem::locked:
        return "a lock wait went past the " + std::string(secs) +
               " s lock_timeout (another writer, or a VACUUM FULL / migration holds the "
               "ncclsmoke tables); run again when it is done";
      case HistoryProblem::full:
        return "the PostgreSQL server at " + at + " is out of disk space: free space there";
      case HistoryProblem::read_only:
        return "the server at " + at + " refuses the write: a hot standby / read-only "
               "transaction (point the URL at the primary) or the user lacks privileges on the "
               "ncclsmoke_* tables (GRANT them)";
      case HistoryProblem::corrupt:
        return "the server at " + at + " reports corrupted data: a matter for its DBA; the "
               "verdict files can be re-imported into another database with `ncclsmoke history "
               "import`";
      case HistoryProblem::io:
        return "the server at " + at + " reported an I/O error: check its disk and logs";
      case HistoryProblem::other:
        if (!conn_ || PQstatus(conn_) != CONNECTION_OK)
          return "the URL is not a valid libpq URL: postgresql://USER:PASSWORD@HOST:PORT/DB"
                 "[?param=value] (percent-encode '@', ':', '/', '%' in the password)";
        return "";
      default:
        return "";
    }
  }

  // The URL's password(s) as written: scrubbed from every libpq message, which may quote a bad
  // token of the URL back (e.g. an invalid percent-encoding inside the password).
  static std::vector<std::string> secrets_of(const std::string& url) {
    std::vector<std::string> out;
    const std::string red = redact_history_url(url);
    // Walk both strings: where the redacted one says "***", the original holds a secret.
    size_t i = 0, j = 0;
    while (i < url.size() && j < red.size()) {
      if (red.compare(j, 3, "***") == 0 && url.compare(i, 3, "***") != 0) {
        const char end = j + 3 < red.size() ? red[j + 3] : '\0';
        size_t k = end ? url.find(end, i) : url.size();
        if (k == std::string::npos) k = url.size();
        if (k > i) out.push_back(url.substr(i, k - i));
        i = k;
        j += 3;
        continue;
      }
      ++i;
      ++j;
    }
    return out;
  }
  std::string scrub(std::string msg) const {
    for (const auto& sec : secrets_)
      for (size_t p; !sec.empty() && (p = msg.find(sec)) != std::string::npos;) msg.replace(p, sec.size(), "***");
    return msg;
  }

  std::vector<std::string> secrets_;
  std::string url_;   // never printed
  std::string name_;  // the redacted URL: what messages say
  int timeout_ms_;
  PGconn* conn_ = nullptr;
  bool has_subject_ = true;  // false: a version-2 database opened read-only (no findings.subject)
};

}  // namespace

std::unique_ptr<HistoryBackend> open_postgres_history(const std::string& url, bool create,
                                                      int timeout_ms) {
  return std::make_unique<PostgresHistory>(url, create, timeout_ms);
}

}  // namespace ncclsmoke::results::detail
