#pragma once
// Run history: an embedded SQLite file that accumulates verdicts (global ones from `run
// --history`, `publish --history`, or `ncclsmoke history import`), and the queries that
// `baseline learn` and `report` read.
//
// Safety contract: the database runs in WAL mode with synchronous=FULL; every add is one
// transaction (add_many: one for the whole batch), so a crash mid-write leaves the history as it
// was before that add, never half a run. Each run is stored whole (the verdict JSON, verbatim) next
// to the columns the queries use, so nothing a verdict said is lost to the summary tables. Adding a
// run_id that is already stored is a no-op counted as a duplicate (imports can be repeated).
// Several writers may share a file: busy_timeout waits up to `busy_timeout_ms` for the lock, then
// the add throws HistoryError naming the file, with problem() == locked and the lock holders.
//
// Tables (PRAGMA user_version = kHistorySchemaVersion):
//   runs(run_id PK, started_at, started_unix, duration_s, verdict, exit_code, world_size,
//        profile, tool_version, hosts, source, verdict_json)
//   gates(run_id, transport, gate_bytes, busbw_gbps, baseline_gbps, degraded_ratio, fail_ratio,
//         synthetic, identity)  -- one row per transport measured: the number the judge compares
//   findings(run_id, code, severity, layer, message, ranks, hosts)
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/verdict.h"

struct sqlite3;

namespace ncclsmoke::results {

inline constexpr int kHistorySchemaVersion = 1;

// Why a history could not be used. Each cause carries its own hint (what() ends with it), and the
// commands that only read or maintain the history (history import/list/prune, report, baseline
// learn) exit kExitHistoryUnusable for all of them, so a script tells "the history is broken"
// from "the run failed" (1) and "bad flag" (2). `publish` keeps its documented 6 and spools.
enum class HistoryProblem {
  other,
  corrupt,       // SQLITE_CORRUPT / SQLITE_NOTADB: move it aside and re-import
  locked,        // SQLITE_BUSY / SQLITE_LOCKED past the busy timeout: who holds it
  full,          // SQLITE_FULL, or an I/O error with ENOSPC / EDQUOT: no space
  read_only,     // SQLITE_READONLY / SQLITE_PERM, or cannot open with EROFS / EACCES
  io,            // SQLITE_IOERR (other errno): the disk or filesystem
  cannot_open,   // SQLITE_CANTOPEN: directory missing, a directory at the path ...
  not_history,   // an SQLite file of something else, or a newer schema than this build's
  bad_verdict,   // the verdict given to add() cannot be stored (no run_id, bad started_at)
};
inline constexpr int kExitHistoryUnusable = 7;

std::string to_string(HistoryProblem p);
// SQLite's primary result code (rc & 0xff) and the errno it saw (sqlite3_system_errno) -> cause.
HistoryProblem classify_history_error(int sqlite_rc, int sys_errno);
// The processes other than this one holding a POSIX lock on `path` or its -wal/-shm, read from
// /proc/locks and /proc/PID/cmdline: "pid 123 (ncclsmoke publish v.json)", "" when none is found.
std::string history_lock_holders(const std::string& path);
// The one-line hint for a cause (path: the history file; busy_timeout_ms: how long we retried).
std::string history_hint(HistoryProblem p, const std::string& path, int sys_errno,
                         int busy_timeout_ms);

class HistoryError : public std::runtime_error {
 public:
  explicit HistoryError(const std::string& what, HistoryProblem problem = HistoryProblem::other)
      : std::runtime_error(what), problem_(problem) {}
  HistoryProblem problem() const { return problem_; }

 private:
  HistoryProblem problem_;
};

struct HistoryRun {
  std::string run_id;
  std::string started_at;      // RFC 3339 as in the verdict
  double started_unix = 0;     // seconds since the epoch (parsed from started_at)
  double duration_s = 0;
  std::string verdict;         // pass | degraded | fail | inconclusive
  int exit_code = 0;
  int world_size = 0;
  std::string profile;         // empty: no profile selected
  std::string tool_version;
  std::vector<std::string> hosts;  // joined ranks' hosts, first-appearance order
  std::string source;          // where the run came from: "run", "import:<file>", "publish"
};

// The number the judge compares with a baseline, per (run, transport). gate_bytes is the
// baseline band's gate size when the verdict recorded a band for this transport, else the size
// the run flagged `gate`. busbw is the world row's (the lowest if several, e.g. in/out of place),
// else the lowest per-rank row's; NaN when the run has no usable number at that size.
struct HistoryGate {
  std::string run_id;
  double started_unix = 0;
  std::string verdict;         // the run's verdict
  std::string profile;
  int world_size = 0;
  std::string transport;
  std::int64_t gate_bytes = 0;
  double busbw_gbps = 0;       // NaN: not measured
  double baseline_gbps = 0;    // NaN: no baseline band recorded for this transport
  double degraded_ratio = 0;   // NaN with baseline_gbps
  double fail_ratio = 0;       // NaN with baseline_gbps
  bool synthetic = false;
  std::string identity;        // observed identity summary, e.g. "network=Socket" ("" unknown)
};

struct HistoryFinding {
  std::string run_id;
  double started_unix = 0;
  std::string profile;
  std::string code;
  std::string severity;
  std::string layer;
  std::string message;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
};

struct HistoryQuery {
  double since_unix = 0;       // runs started at or after this (0: all)
  double until_unix = 0;       // and before this (0: no upper bound)
  std::string profile;         // "" any
  std::string transport;       // gates only; "" any
  std::string verdict;         // "" any, else e.g. "pass"
  std::int64_t limit = 0;      // 0: no limit; newest first when set
};

struct AddResult {
  int added = 0;
  int duplicates = 0;
};

// The gate numbers of one verdict (what add() stores in `gates`); exposed for tests and for
// `publish`, which reports the same numbers as metrics.
std::vector<HistoryGate> gates_of(const Verdict& v);

// "14d", "36h", "90m", "3600s", or an RFC 3339 time → seconds since the epoch (relative ones are
// counted back from `now_unix`). Throws std::invalid_argument naming the text.
double parse_since(const std::string& text, double now_unix);
// RFC 3339 ("2026-11-30T01:02:03.456Z", offsets accepted) → seconds since the epoch; throws
// std::invalid_argument.
double parse_rfc3339(const std::string& text);

class History {
 public:
  // Opens (creating when `create`) the file and its tables. Throws HistoryError naming the path
  // and SQLite's message: unreadable, not a database, a newer schema version than this build's.
  explicit History(const std::string& path, bool create = true, int busy_timeout_ms = 10000);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  const std::string& path() const { return path_; }

  // Stores a verdict (normally scope "global"). `source` as in HistoryRun::source.
  AddResult add(const Verdict& v, const std::string& source);
  // All in one transaction: all are stored, or (on error) none. `json_texts` (same length as vs,
  // or nullptr): each verdict's original JSON text, stored verbatim instead of re-serialised
  // (an import keeps the file's own bytes, and saves the serialisation).
  AddResult add_many(const std::vector<Verdict>& vs, const std::string& source,
                     const std::vector<std::string>* json_texts = nullptr);

  // Streaming add_many: calls `next` until it returns false, storing each verdict it yields
  // (json_text may be null), all in one transaction. If `next` or an insert throws, nothing is
  // stored and the exception propagates. Lets an import insert while other threads still parse.
  using NextVerdict = std::function<bool(const Verdict*& v, const std::string*& json_text)>;
  AddResult add_stream(const NextVerdict& next, const std::string& source);

  // Removes the runs that started before `before_unix` (their gates and findings with them), in
  // one transaction; returns how many. The file shrinks only after a VACUUM (vacuum = true), which
  // rewrites it and briefly needs as much free disk again.
  std::int64_t prune(double before_unix, bool vacuum);

  std::int64_t count_runs() const;
  std::vector<HistoryRun> runs(const HistoryQuery& q) const;     // oldest first
  std::vector<HistoryGate> gates(const HistoryQuery& q) const;   // oldest first
  std::vector<HistoryFinding> findings(const HistoryQuery& q) const;  // oldest first
  // The stored verdict JSON of one run; nullopt when not stored.
  std::optional<nlohmann::json> verdict_json(const std::string& run_id) const;

 private:
  void exec(const char* sql) const;
  std::string path_;
  int busy_timeout_ms_ = 0;
  sqlite3* db_ = nullptr;
};

}  // namespace ncclsmoke::results
