#pragma once
// `ncclsmoke publish`: what the CronJob does with rank 0's verdict — append it to the run history,
// write the node-exporter textfile, push the metrics to a Pushgateway, and exit by policy.
//
// Order: history, then textfile, then push — so a Pushgateway that is down (or slow: every push
// attempt has a deadline) loses neither the run nor the textfile. Nothing here re-judges the run:
// the verdict's own `verdict` field decides.
//
// Exit codes (the process's; see exit_code()):
//   0  the verdict is not in --fail-on, and everything requested was delivered
//   1  fail, 3 degraded, 4 inconclusive — the verdict's code, when its verdict is in --fail-on
//      (default: fail,degraded,inconclusive). A non-zero verdict code wins over 5 and 6.
//   2  usage: bad flag, unreadable or invalid verdict file (the message names the file and the
//      JSON path of each problem)
//   5  metrics not delivered (push or textfile failed) — a warning; the history was written
//   6  the history could not be written (wins over 5); the run is spooled (below)
//   7  --history names a device, FIFO, socket or directory (results::check_history_path): found
//      before anything is written; nothing is spooled
//
// Spool: a run that could not be stored is not lost. When the history write fails, the verdict
// file's bytes are written atomically (temp file, fsync, rename) to spool_dir(history)/
// <run_id>.json: $NCCLSMOKE_SPOOL_DIR when set; else, for a file, next to the history
// (`history.db.spool/`, on the same volume); for a postgresql:// URL (the server is what failed)
// a local directory, ./ncclsmoke-history.spool relative to the working directory (in a pod,
// set NCCLSMOKE_SPOOL_DIR to a persistent volume, or spooled runs die with the pod). Only that
// one directory is created, never its missing parent. The history's password is never printed. Every publish whose history
// write succeeds then stores each spooled verdict (oldest name first, at most kMaxSpoolDrain per
// publish) and deletes its file; a spooled file that is not a valid verdict is renamed
// <name>.bad and named in a warning, never retried forever. Draining never changes the exit code
// of the run being published.
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::cronjob {

inline constexpr int kExitMetricsNotDelivered = 5;
inline constexpr int kExitHistoryFailed = 6;
inline constexpr int kMaxSpoolDrain = 10000;

// Where runs wait when `history_path` cannot be written: $NCCLSMOKE_SPOOL_DIR, else
// "<history_path>.spool" for a file and kDefaultUrlSpoolDir for a postgresql:// URL.
inline constexpr const char* kDefaultUrlSpoolDir = "ncclsmoke-history.spool";
std::string spool_dir(const std::string& history_path);

struct PublishOptions {
  std::string verdict_path;
  std::string pushgateway_url;   // "" no push
  std::string textfile_dir;      // "" no textfile
  std::string history_path;      // "" no history; an SQLite file or a postgresql:// URL
  std::string job = "ncclsmoke";
  std::string cluster = "default";  // metrics label, and recorded with the run in the history
  std::vector<std::string> fail_on = {"fail", "degraded", "inconclusive"};
  double timeout_s = 10;         // per push attempt
  int retries = 3;
  double backoff_base_s = 0.5;
  bool quiet = false;            // only warnings and errors
  // --suspects-dir: the run's suspect nodes (results/verdict/suspects.h, the format
  // `run --exclude-file` reads) go to DIR/suspects.txt (the latest run's, replaced atomically;
  // empty when none) and DIR/suspects-<run_id>.txt (kept: which nodes each run set aside), for a
  // person or a remediation controller. "" none. The suspects are said on the progress stream
  // either way ("suspects: node-a (PEER_STALLED)").
  std::string suspects_dir;
  // With no pushgateway and no textfile, the metrics are printed on stdout (for a look, or for
  // `promtool check metrics`).
};

// A usage problem (bad --fail-on, bad URL, unreadable/invalid verdict): exit 2, one line.
class PublishUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "fail,degraded" -> {"fail","degraded"}; "none" or "" -> {}. Throws PublishUsageError naming a
// value that is not fail|degraded|inconclusive|none.
std::vector<std::string> parse_fail_on(const std::string& text);

// Reads and validates a verdict file. Throws PublishUsageError with one line naming the file and
// the problem (missing, over kMaxVerdictJsonBytes, nested deeper than kMaxJsonDepth, not JSON
// with the byte offset, schema problems with their JSON paths): rendezvous/bounded_json.h.
results::Verdict load_verdict(const std::string& path);

// The verdict's own code (1/3/4) when its verdict is in `fail_on`, else 0.
int policy_exit_code(results::Outcome verdict, const std::vector<std::string>& fail_on);

// The process exit code from the policy code and what was delivered (see the table above).
int exit_code(int policy_code, bool metrics_delivered, bool history_written);

// Runs the whole publish; returns the exit code. Progress on `out` (unless quiet), warnings and
// errors on `err`. Throws PublishUsageError for usage problems (the caller prints it, exits 2).
int publish(const PublishOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ncclsmoke::cronjob
