#pragma once
// Run history: verdicts accumulated from `run --history`, `publish --history` and `ncclsmoke
// history import`, and the queries `baseline learn` and `report` read. Two backends behind one
// class (results/history/history_backend.h):
//   - a path: an embedded SQLite file (history_sqlite.cpp), the default;
//   - a `postgresql://` or `postgres://` URL: a shared PostgreSQL server through libpq
//     (history_postgres.cpp), so a fleet's clusters can write one history. Its tables are
//     ncclsmoke_runs / ncclsmoke_gates / ncclsmoke_findings / ncclsmoke_meta (the URL's
//     search_path, e.g. `?options=-csearch_path%3Dsmoke`, picks the schema).
// A URL's password is never printed: every message names redact_history_url(url).
//
// Safety contract (both backends): every add is one transaction (add_many / add_stream: one for
// the whole batch), so a crash mid-write - this process SIGKILLed, or the server restarted -
// leaves the history as it was before that add, never half a run or half a batch. Each run is
// stored whole (the verdict JSON, verbatim) next to the columns the queries use. Adding a run_id
// that is already stored is a no-op counted as a duplicate (imports can be repeated).
// SQLite runs in WAL mode with synchronous=FULL; several writers may share a file: busy_timeout
// waits up to `busy_timeout_ms` for the lock, then the add throws HistoryError with problem() ==
// locked and the lock holders. On a network filesystem (NFS, CIFS/SMB, FUSE, Lustre, ...: see
// network_filesystem_name) WAL is unsafe - its shared-memory index does not work across hosts -
// so the file uses journal_mode=DELETE (the rollback journal) instead, and says so once on stderr.
// PostgreSQL: `busy_timeout_ms` is the connect timeout and the lock_timeout; a server that is
// down or goes away mid-batch is HistoryProblem::unreachable (the transaction is rolled back).
//
// Tables (SQLite: PRAGMA user_version = kHistorySchemaVersion; PostgreSQL: ncclsmoke_meta):
//   runs(run_id PK, started_at, started_unix, duration_s, verdict, exit_code, world_size,
//        profile, tool_version, hosts, source, cluster, verdict_json)
//   gates(run_id, transport, gate_bytes, busbw_gbps, baseline_gbps, degraded_ratio, fail_ratio,
//         synthetic, identity)  -- one row per transport measured: the number the judge compares
//   findings(run_id, code, severity, layer, message, ranks, hosts, subject)
// Version 2 added runs.cluster, version 3 findings.subject (the finding's Subject as JSON, ""
// for one stored before). An older file or database is migrated in place (ALTER TABLE in one
// transaction) by the first open that may write it (create = true); an open with create = false
// (report, list, prune, baseline learn) reads it as it is: every cluster "", every subject empty.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

inline constexpr int kHistorySchemaVersion = 3;

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
  unreachable,   // PostgreSQL: the server refused / timed out / went away (mid-batch too)
  not_a_file,    // the path holds a device, FIFO, socket or directory (check_history_path)
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

// A history is a URL, or a path that is absent (created) or a regular file. Anything else that
// exists there (a character or block device, a FIFO, a socket, a directory) throws HistoryError
// (not_a_file, exit kExitHistoryUnusable) naming the path and its type, before SQLite opens it:
// a FIFO would block the open, and /dev/zero would read as a corrupt database whose hint says
// to move it aside. History's constructor checks it; publish checks it before anything is
// written, so no spool folder is made next to such a path.
void check_history_path(const std::string& target);

// true for "postgresql://..." and "postgres://..." (the PostgreSQL backend), else a file path.
bool is_history_url(const std::string& target);
// The URL with its password replaced by "***" (userinfo and a `password=` query parameter);
// anything else unchanged. What every message prints instead of the URL.
std::string redact_history_url(const std::string& target);
// PostgreSQL's SQLSTATE (5 characters, "" when there was no result) and whether the connection
// is gone (PQstatus == CONNECTION_BAD) -> cause. Connection failures: unreachable; class 28 /
// 3D000 (authentication, no such database): cannot_open; 53100: full; 25006 / 42501: read_only;
// 55P03 / 40P01 / 40001 / 57014: locked; XX001 / XX002: corrupt; 58030: io.
HistoryProblem classify_postgres_error(const std::string& sqlstate, bool connection_bad);

// statfs(2) f_type of a history file's directory -> the network filesystem it is ("NFS",
// "CIFS/SMB", "SMB2", "FUSE", "Lustre", "GPFS", "CephFS", "9p", "AFS"), or "" for a local one.
// EFS is NFS v4 (amazon-efs-utils mounts it as nfs4, through stunnel for TLS); s3fs, gcsfuse and
// other userspace mounts are FUSE.
std::string network_filesystem_name(long f_type);
// The SQLite journal mode for a file on that filesystem: "WAL" locally, "DELETE" (the rollback
// journal, which needs only POSIX locks) on a network filesystem.
std::string sqlite_journal_mode_for(long f_type);

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
  Outcome verdict = Outcome::inconclusive;
  int exit_code = 0;
  int world_size = 0;
  std::string profile;         // empty: no profile selected
  std::string tool_version;
  std::vector<std::string> hosts;  // joined ranks' hosts, first-appearance order
  std::string source;          // where the run came from: "run", "import:<file>", "publish"
  std::string cluster;         // the fleet's name for the cluster (publish --cluster,
                               // NCCLSMOKE_CLUSTER); "" for runs stored before it was recorded
};

// The number the judge compares with a baseline, per (run, transport). gate_bytes is the
// baseline band's gate size when the verdict recorded a band for this transport, else the size
// the run flagged `gate`. busbw is the world row's (the lowest if several, e.g. in/out of place),
// else the lowest per-rank row's; NaN when the run has no usable number at that size.
struct HistoryGate {
  std::string run_id;
  double started_unix = 0;
  Outcome verdict = Outcome::inconclusive;  // the run's verdict
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
  std::string cluster;         // the run's cluster (HistoryRun::cluster)
};

struct HistoryFinding {
  std::string run_id;
  double started_unix = 0;
  std::string profile;
  AnyCode code;                // an unknown code (a newer ncclsmoke's) keeps its text
  Severity severity = Severity::error;
  Layer layer = Layer::run;
  std::string message;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  std::string cluster;         // the run's cluster (HistoryRun::cluster)
  Subject subject;             // empty for a finding stored before history version 3
};

struct HistoryQuery {
  double since_unix = 0;       // runs started at or after this (0: all)
  double until_unix = 0;       // and before this (0: no upper bound)
  std::string profile;         // "" any
  std::string transport;       // gates only; "" any
  std::optional<Outcome> verdict;  // nullopt: any
  std::string cluster;         // "" any
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

namespace detail {
class HistoryBackend;
}

// NCCLSMOKE_CLUSTER, else "default" (what publish labels its metrics with).
std::string default_history_cluster();

class History {
 public:
  // Opens (creating when `create`) the history: a file path or a postgresql:// URL. Throws
  // HistoryError naming it (redacted) and the engine's message: unreadable, not a database,
  // unreachable, authentication failed, a newer schema version than this build's.
  explicit History(const std::string& target, bool create = true, int busy_timeout_ms = 10000);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // The history as messages name it: the path, or the URL with its password redacted.
  const std::string& path() const { return path_; }
  bool is_postgres() const { return postgres_; }

  // The cluster recorded with every run this History adds (HistoryRun::cluster); starts as
  // default_history_cluster(). publish sets --cluster; `history import --cluster` too.
  void set_cluster(std::string cluster) { cluster_ = std::move(cluster); }
  const std::string& cluster() const { return cluster_; }

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
  // The same, each verdict with its own source (null: `source`): an import records the file it
  // read each run from ("import:/abs/path/verdict.json"), which the report links to.
  using NextSourcedVerdict = std::function<bool(const Verdict*& v, const std::string*& json_text,
                                                const std::string*& source)>;
  AddResult add_stream(const NextSourcedVerdict& next, const std::string& source);

  // Removes the runs that started before `before_unix` (their gates and findings with them), in
  // one transaction; returns how many. The file shrinks only after a VACUUM (vacuum = true), which
  // rewrites it and briefly needs as much free disk again. PostgreSQL: a plain VACUUM of the
  // tables (the space becomes reusable; VACUUM FULL, which locks them, is left to a DBA).
  std::int64_t prune(double before_unix, bool vacuum);

  std::int64_t count_runs() const;
  std::vector<HistoryRun> runs(const HistoryQuery& q) const;     // oldest first
  std::vector<HistoryGate> gates(const HistoryQuery& q) const;   // oldest first
  std::vector<HistoryFinding> findings(const HistoryQuery& q) const;  // oldest first
  // The stored verdict JSON of one run; nullopt when not stored.
  std::optional<nlohmann::json> verdict_json(const std::string& run_id) const;

 private:
  std::string path_;
  bool postgres_ = false;
  std::string cluster_;
  std::unique_ptr<detail::HistoryBackend> impl_;
};

}  // namespace ncclsmoke::results
