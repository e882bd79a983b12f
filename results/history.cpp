// Run history in SQLite (history.h). Statements are prepared per call: the per-run cost is the
// JSON text and the inserts, not statement compilation, and batches share one transaction.
#include "results/history.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <set>
#include <variant>

namespace ncclsmoke::results {
namespace {

using nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* kCreateSql = R"sql(
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
  verdict_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_time ON runs(started_unix);
CREATE INDEX IF NOT EXISTS runs_by_profile ON runs(profile, started_unix);
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
  hosts TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS findings_by_run ON findings(run_id);
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

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw sqlite_error(db_, rc, path_, "history " + path_);
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  std::string path_;
};

std::string profile_of(const Verdict& v) {
  if (v.baseline.is_object() && v.baseline.contains("profile") && v.baseline["profile"].is_string())
    return v.baseline["profile"].get<std::string>();
  return "";
}

std::vector<std::string> hosts_of(const Verdict& v) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& r : v.ranks)
    if (!r.host.empty() && seen.insert(r.host).second) out.push_back(r.host);
  return out;
}

// "network=Socket gdr=false" from an identity's observed object (the keys an operator looks for).
std::string identity_text(const json& observed) {
  if (!observed.is_object()) return "";
  std::string out;
  for (const char* key : {"network", "provider", "gdr", "plugin", "interface"}) {
    auto it = observed.find(key);
    if (it == observed.end() || it->is_null() || it->is_object() || it->is_array()) continue;
    std::string val = it->is_string() ? it->get<std::string>() : it->dump();
    if (val.empty()) continue;
    out += (out.empty() ? "" : " ") + std::string(key) + "=" + val;
  }
  return out;
}

json string_array(const std::vector<std::string>& xs) { return json(xs); }

template <typename T>
std::vector<T> parse_array(const std::string& text) {
  std::vector<T> out;
  auto j = json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& e : j)
    if constexpr (std::is_same_v<T, int>) {
      if (e.is_number_integer()) out.push_back(e.get<int>());
    } else {
      if (e.is_string()) out.push_back(e.get<std::string>());
    }
  return out;
}

// A query over runs r (and gates g for the gates table): "SELECT <columns> FROM <from>" plus the
// filters, ordered by start time (newest first when limited, flipped back: callers always get
// oldest first), each row read by `read`.
template <typename Row, typename Read>
std::vector<Row> select_rows(sqlite3* db, const std::string& path, const std::string& select_from,
                             const HistoryQuery& q, bool with_transport,
                             const std::string& row_column, Read read) {
  std::string sql = select_from + " WHERE 1";
  std::vector<std::variant<double, std::string>> params;
  auto filter = [&](bool on, const char* clause, std::variant<double, std::string> value) {
    if (!on) return;
    sql += clause;
    params.push_back(std::move(value));
  };
  filter(q.since_unix > 0, " AND r.started_unix >= ?", q.since_unix);
  filter(q.until_unix > 0, " AND r.started_unix < ?", q.until_unix);
  filter(!q.profile.empty(), " AND r.profile = ?", q.profile);
  filter(!q.verdict.empty(), " AND r.verdict = ?", q.verdict);
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

}  // namespace

double parse_rfc3339(const std::string& text) {
  int Y, M, D, h, m;
  double s;
  char tail[32] = {0};
  // The seconds field may carry a fraction; what follows is Z or an offset.
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf%31s", &Y, &M, &D, &h, &m, &s, tail) < 6 ||
      M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || s < 0 || s >= 61)
    throw std::invalid_argument("not an RFC 3339 time: '" + text + "' (want e.g. 2026-11-30T01:02:03Z)");
  std::tm tm{};
  tm.tm_year = Y - 1900;
  tm.tm_mon = M - 1;
  tm.tm_mday = D;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = 0;
  double t = static_cast<double>(timegm(&tm)) + s;
  std::string z = tail;
  if (z.empty() || z == "Z" || z == "z") return t;
  int oh = 0, om = 0;
  char sign = z[0];
  if ((sign == '+' || sign == '-') && std::sscanf(z.c_str() + 1, "%2d:%2d", &oh, &om) == 2)
    return t - (sign == '+' ? 1 : -1) * (oh * 3600.0 + om * 60.0);
  throw std::invalid_argument("not an RFC 3339 time: '" + text + "' (bad zone '" + z + "')");
}

double parse_since(const std::string& text, double now_unix) {
  if (text.empty()) throw std::invalid_argument("empty time: want e.g. 14d, 36h, 90m or an RFC 3339 time");
  size_t used = 0;
  double n = 0;
  bool numeric = std::isdigit(static_cast<unsigned char>(text[0]));
  if (numeric) {
    try {
      n = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
  }
  if (numeric && used > 0 && used + 1 == text.size() && n >= 0) {
    switch (text.back()) {
      case 'w': return now_unix - n * 7 * 86400;
      case 'd': return now_unix - n * 86400;
      case 'h': return now_unix - n * 3600;
      case 'm': return now_unix - n * 60;
      case 's': return now_unix - n;
      default: break;
    }
  }
  try {
    return parse_rfc3339(text);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("bad time '" + text +
                                "': want a duration back from now (14d, 36h, 90m, 3600s, 2w) "
                                "or an RFC 3339 time (2026-11-30T00:00:00Z)");
  }
}

std::vector<HistoryGate> gates_of(const Verdict& v) {
  std::vector<HistoryGate> out;
  std::vector<std::string> names;
  for (const auto& r : v.transports)
    if (std::find(names.begin(), names.end(), r.transport) == names.end())
      names.push_back(r.transport);
  double started = 0;
  try {
    started = parse_rfc3339(v.started_at);
  } catch (const std::invalid_argument&) {
  }
  for (const auto& name : names) {
    HistoryGate g;
    g.run_id = v.run_id;
    g.started_unix = started;
    g.verdict = v.verdict;
    g.profile = profile_of(v);
    g.world_size = v.world.size;
    g.transport = name;
    g.busbw_gbps = g.baseline_gbps = g.degraded_ratio = g.fail_ratio = kNaN;
    // The band the judge used, if the verdict recorded one for this transport.
    if (v.baseline.is_object() && v.baseline.contains("transports") &&
        v.baseline["transports"].is_array()) {
      for (const auto& t : v.baseline["transports"]) {
        if (!t.is_object() || t.value("transport", "") != name) continue;
        const auto band = t.find("band");
        if (band == t.end() || !band->is_object()) continue;
        g.gate_bytes = band->value("gate_bytes", std::int64_t{0});
        g.baseline_gbps = band->value("busbw_gbps", kNaN);
        g.degraded_ratio = band->value("degraded_ratio", kNaN);
        g.fail_ratio = band->value("fail_ratio", kNaN);
      }
    }
    if (g.gate_bytes <= 0) {  // no band: the size the run flagged as its gate
      for (const auto& r : v.transports)
        if (r.transport == name && r.gate && (g.gate_bytes == 0 || r.rank < 0)) g.gate_bytes = r.bytes;
    }
    if (g.gate_bytes <= 0) continue;  // nothing comparable was measured
    double world = kNaN, worst_rank = kNaN;
    for (const auto& r : v.transports) {
      if (r.transport != name || r.bytes != g.gate_bytes) continue;
      if (r.synthetic) g.synthetic = true;
      if (!std::isfinite(r.busbw_gbps)) continue;
      double& slot = r.rank < 0 ? world : worst_rank;
      if (std::isnan(slot) || r.busbw_gbps < slot) slot = r.busbw_gbps;
    }
    g.busbw_gbps = std::isnan(world) ? worst_rank : world;
    const TransportIdentity* id = nullptr;
    for (const auto& i : v.identities)
      if (i.transport == name && (!id || (id->rank != -1 && (i.rank == -1 || i.rank < id->rank))))
        id = &i;
    if (id) g.identity = identity_text(id->observed);
    out.push_back(std::move(g));
  }
  return out;
}

std::string to_string(HistoryProblem p) {
  switch (p) {
    case HistoryProblem::corrupt: return "corrupt";
    case HistoryProblem::locked: return "locked";
    case HistoryProblem::full: return "full";
    case HistoryProblem::read_only: return "read-only";
    case HistoryProblem::io: return "I/O error";
    case HistoryProblem::cannot_open: return "cannot open";
    case HistoryProblem::not_history: return "not an ncclsmoke history";
    case HistoryProblem::bad_verdict: return "bad verdict";
    case HistoryProblem::other: break;
  }
  return "other";
}

HistoryProblem classify_history_error(int sqlite_rc, int sys_errno) {
  if (sys_errno == ENOSPC || sys_errno == EDQUOT) return HistoryProblem::full;
  switch (sqlite_rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return HistoryProblem::corrupt;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return HistoryProblem::locked;
    case SQLITE_FULL: return HistoryProblem::full;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return HistoryProblem::read_only;
    case SQLITE_IOERR: return sys_errno == EROFS ? HistoryProblem::read_only : HistoryProblem::io;
    case SQLITE_CANTOPEN:
      return sys_errno == EROFS || sys_errno == EACCES ? HistoryProblem::read_only
                                                       : HistoryProblem::cannot_open;
    default: return HistoryProblem::other;
  }
}

std::string history_lock_holders(const std::string& path) {
  // /proc/locks: "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; device as hex major:minor.
  std::set<std::string> files;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    struct stat st{};
    if (::stat((path + suffix).c_str(), &st) != 0) continue;
    char id[64];
    std::snprintf(id, sizeof id, "%02x:%02x:%llu", ::major(st.st_dev), ::minor(st.st_dev),
                  static_cast<unsigned long long>(st.st_ino));
    files.insert(id);
  }
  if (files.empty()) return "";
  std::ifstream locks("/proc/locks");
  std::set<long> pids;
  std::string line;
  for (int n = 0; n < 100000 && std::getline(locks, line); ++n) {
    std::istringstream ls(line);
    std::string num, type, mode, rw, file;
    long pid = 0;
    if (!(ls >> num >> type) || type == "->") continue;  // a blocked waiter, not a holder
    if (!(ls >> mode >> rw >> pid >> file)) continue;
    if (files.count(file) && pid > 0 && pid != ::getpid()) pids.insert(pid);
  }
  std::string out;
  for (long pid : pids) {
    std::ifstream cl("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(cl)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    if (cmd.size() > 100) cmd = cmd.substr(0, 97) + "...";
    out += (out.empty() ? "" : ", ") + ("pid " + std::to_string(pid)) +
           (cmd.empty() ? "" : " (" + cmd + ")");
    if (out.size() > 400) break;
  }
  return out;
}

std::string history_hint(HistoryProblem p, const std::string& path, int sys_errno,
                         int busy_timeout_ms) {
  namespace fs = std::filesystem;
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", busy_timeout_ms / 1000.0);
  switch (p) {
    case HistoryProblem::corrupt:
      return "the history file is corrupt: move it aside (mv " + path + " " + path +
             ".corrupt) and re-import the verdict files with `ncclsmoke history import --history " +
             path + " DIR...`";
    case HistoryProblem::locked: {
      std::string who = history_lock_holders(path);
      return "the history is locked: " +
             (who.empty() ? std::string("another ncclsmoke publish/report/import is writing it")
                          : "held by " + who) +
             "; retried for " + secs + " s; run again when it is done";
    }
    case HistoryProblem::full:
      return "no space left on the history's filesystem (" + dir +
             "): free space there or move the history (with its -wal file) to a larger volume";
    case HistoryProblem::read_only:
      return "the history or its directory " + dir +
             " is read-only here (permissions, or a read-only mount): SQLite must write the file "
             "and its -wal/-shm files next to it";
    case HistoryProblem::io:
      return std::string("the disk returned an I/O error") +
             (sys_errno ? " (" + std::string(std::strerror(sys_errno)) + ")" : "") +
             ": check the filesystem of " + dir + " (dmesg); if the file is damaged, move it "
             "aside (mv " + path + " " + path + ".corrupt) and re-import the verdict files";
    case HistoryProblem::cannot_open:
      return "check that " + dir + " exists and is a writable directory and that " + path +
             " is a file";
    default:
      return "";
  }
}

History::History(const std::string& path, bool create, int busy_timeout_ms)
    : path_(path), busy_timeout_ms_(busy_timeout_ms) {
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
    int version = 0;
    {
      Stmt s(db_, "PRAGMA user_version", path_);  // fails here on a file that is not SQLite
      if (s.step()) version = static_cast<int>(s.integer(0));
    }
    if (version > kHistorySchemaVersion)
      throw HistoryError("history " + path + " has schema version " + std::to_string(version) +
                         ", newer than this ncclsmoke's " + std::to_string(kHistorySchemaVersion) +
                         ": use a newer ncclsmoke, or another file",
                         HistoryProblem::not_history);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
    if (version == 0) {
      if (!create) {
        Stmt s(db_, "SELECT count(*) FROM sqlite_master", path_);
        if (s.step() && s.integer(0) > 0)
          throw HistoryError("history " + path + " is an SQLite file but not an ncclsmoke history",
                             HistoryProblem::not_history);
      }
      exec("BEGIN IMMEDIATE");
      try {
        exec(kCreateSql);
        exec(("PRAGMA user_version=" + std::to_string(kHistorySchemaVersion)).c_str());
        exec("COMMIT");
      } catch (...) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
    }
  } catch (const HistoryError& e) {
    {
      std::lock_guard lock(busy_mu);
      busy_ms_of.erase(db_);
    }
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

History::~History() {
  if (!db_) return;
  {
    std::lock_guard lock(busy_mu);
    busy_ms_of.erase(db_);
  }
  sqlite3_close(db_);
}

void History::exec(const char* sql) const {
  if (int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); rc != SQLITE_OK)
    throw sqlite_error(db_, sqlite3_extended_errcode(db_), path_, "history " + path_);
}

namespace {

// The statements one import uses, prepared once per transaction instead of once per run.
struct Inserts {
  Inserts(sqlite3* db, const std::string& path)
      : exists(db, "SELECT 1 FROM runs WHERE run_id = ?", path),
        run(db,
            "INSERT INTO runs (run_id, started_at, started_unix, duration_s, verdict, exit_code, "
            "world_size, profile, tool_version, hosts, source, verdict_json) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            path),
        gate(db,
             "INSERT INTO gates (run_id, transport, gate_bytes, busbw_gbps, baseline_gbps, "
             "degraded_ratio, fail_ratio, synthetic, identity) VALUES (?,?,?,?,?,?,?,?,?)",
             path),
        finding(db,
                "INSERT INTO findings (run_id, code, severity, layer, message, ranks, hosts) "
                "VALUES (?,?,?,?,?,?,?)",
                path) {}
  Stmt exists, run, gate, finding;
};

AddResult add_one(Inserts& ins, const std::string& path, const Verdict& v,
                  const std::string& source, const std::string* json_text) {
  AddResult r;
  if (v.run_id.empty()) throw HistoryError("history " + path + ": verdict has no run_id", HistoryProblem::bad_verdict);
  ins.exists.bind(1, v.run_id);
  bool stored = ins.exists.step();
  ins.exists.reset();
  if (stored) {
    r.duplicates = 1;
    return r;
  }
  double started;
  try {
    started = parse_rfc3339(v.started_at);
  } catch (const std::invalid_argument& e) {
    throw HistoryError("history " + path + ": run " + v.run_id + ": started_at: " + e.what(),
                       HistoryProblem::bad_verdict);
  }
  std::string text = json_text ? std::string() : to_json(v).dump();
  Stmt& s = ins.run;
  s.bind(1, v.run_id).bind(2, v.started_at).bind(3, started).bind(4, v.duration_s);
  s.bind(5, v.verdict).bind(6, v.exit_code).bind(7, v.world.size).bind(8, profile_of(v));
  s.bind(9, v.tool.version).bind(10, string_array(hosts_of(v)).dump()).bind(11, source);
  s.bind_static(12, json_text ? *json_text : text);
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
    fs.bind(1, v.run_id).bind(2, f.code).bind(3, f.severity).bind(4, f.layer);
    fs.bind(5, f.message).bind(6, json(f.ranks).dump()).bind(7, string_array(f.hosts).dump());
    fs.step();
    fs.reset();
  }
  r.added = 1;
  return r;
}

}  // namespace

AddResult History::add(const Verdict& v, const std::string& source) {
  bool given = false;
  return add_stream(
      [&](const Verdict*& out, const std::string*& text) {
        if (given) return false;
        out = &v;  // no copy of the verdict
        text = nullptr;
        return given = true;
      },
      source);
}

AddResult History::add_many(const std::vector<Verdict>& vs, const std::string& source,
                            const std::vector<std::string>* json_texts) {
  if (json_texts && json_texts->size() != vs.size())
    throw std::invalid_argument("History::add_many: json_texts and verdicts differ in length");
  size_t i = 0;
  return add_stream(
      [&](const Verdict*& v, const std::string*& text) {
        if (i == vs.size()) return false;
        v = &vs[i];
        text = json_texts ? &(*json_texts)[i] : nullptr;
        ++i;
        return true;
      },
      source);
}

AddResult History::add_stream(const NextVerdict& next, const std::string& source) {
  AddResult total;
  exec("BEGIN IMMEDIATE");
  try {
    Inserts ins(db_, path_);
    const Verdict* v = nullptr;
    const std::string* text = nullptr;
    while (next(v, text)) {
      AddResult r = add_one(ins, path_, *v, source, text);
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

std::int64_t History::prune(double before_unix, bool vacuum) {
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

std::int64_t History::count_runs() const {
  Stmt s(db_, "SELECT count(*) FROM runs", path_);
  return s.step() ? s.integer(0) : 0;
}

std::vector<HistoryRun> History::runs(const HistoryQuery& q) const {
  return select_rows<HistoryRun>(
      db_, path_,
      "SELECT r.run_id, r.started_at, r.started_unix, r.duration_s, r.verdict, r.exit_code, "
      "r.world_size, r.profile, r.tool_version, r.hosts, r.source FROM runs r",
      q, false, "", [](const Stmt& s) {
        HistoryRun r;
        r.run_id = s.text(0);
        r.started_at = s.text(1);
        r.started_unix = s.real(2);
        r.duration_s = s.real(3);
        r.verdict = s.text(4);
        r.exit_code = static_cast<int>(s.integer(5));
        r.world_size = static_cast<int>(s.integer(6));
        r.profile = s.text(7);
        r.tool_version = s.text(8);
        r.hosts = parse_array<std::string>(s.text(9));
        r.source = s.text(10);
        return r;
      });
}

std::vector<HistoryGate> History::gates(const HistoryQuery& q) const {
  return select_rows<HistoryGate>(
      db_, path_,
      "SELECT g.run_id, r.started_unix, r.verdict, r.profile, r.world_size, g.transport, "
      "g.gate_bytes, g.busbw_gbps, g.baseline_gbps, g.degraded_ratio, g.fail_ratio, "
      "g.synthetic, g.identity FROM gates g JOIN runs r ON r.run_id = g.run_id",
      q, true, "g.rowid", [](const Stmt& s) {
        HistoryGate g;
        g.run_id = s.text(0);
        g.started_unix = s.real(1);
        g.verdict = s.text(2);
        g.profile = s.text(3);
        g.world_size = static_cast<int>(s.integer(4));
        g.transport = s.text(5);
        g.gate_bytes = s.integer(6);
        g.busbw_gbps = s.real(7);
        g.baseline_gbps = s.real(8);
        g.degraded_ratio = s.real(9);
        g.fail_ratio = s.real(10);
        g.synthetic = s.integer(11) != 0;
        g.identity = s.text(12);
        return g;
      });
}

std::vector<HistoryFinding> History::findings(const HistoryQuery& q) const {
  return select_rows<HistoryFinding>(
      db_, path_,
      "SELECT f.run_id, r.started_unix, r.profile, f.code, f.severity, f.layer, f.message, "
      "f.ranks, f.hosts FROM findings f JOIN runs r ON r.run_id = f.run_id",
      q, false, "f.rowid", [](const Stmt& s) {
        HistoryFinding f;
        f.run_id = s.text(0);
        f.started_unix = s.real(1);
        f.profile = s.text(2);
        f.code = s.text(3);
        f.severity = s.text(4);
        f.layer = s.text(5);
        f.message = s.text(6);
        f.ranks = parse_array<int>(s.text(7));
        f.hosts = parse_array<std::string>(s.text(8));
        return f;
      });
}

std::optional<nlohmann::json> History::verdict_json(const std::string& run_id) const {
  Stmt s(db_, "SELECT verdict_json FROM runs WHERE run_id = ?", path_);
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  return json::parse(s.text(0), nullptr, false);
}

}  // namespace ncclsmoke::results
