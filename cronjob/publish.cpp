#include "cronjob/publish.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cronjob/metrics.h"
#include "cronjob/pushgateway.h"
#include "cronjob/textfile.h"
#include "results/verdict/suspects.h"
#include "results/verdict/write.h"
#include "results/judging/classify.h"
#include "rendezvous/bounded_json.h"
#include "results/history/history.h"
#include "results/verdict/write.h"

namespace ncclsmoke::cronjob {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "none" : out;
}

// The newest passing run of `profile` in the history: its end time, or NaN.
double last_success_in(const results::History& h, const std::string& profile) {
  results::HistoryQuery q;
  q.verdict = results::Outcome::pass;
  q.profile = profile;  // "" matches any profile: filtered below
  double best = std::nan("");
  for (const auto& r : h.runs(q)) {
    if (r.profile != profile) continue;
    double end = r.started_unix + (std::isfinite(r.duration_s) ? r.duration_s : 0);
    if (std::isfinite(end) && !(end <= best)) best = end;
  }
  return best;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A run id as a file name: only [A-Za-z0-9._-], never "." or "..".
std::string spool_name(const std::string& run_id) {
  std::string n;
  for (char c : run_id)
    n += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (n.empty() || n == "." || n == "..") n = "run-" + n;
  return n + ".json";
}

// Keeps the verdict for the next publish; returns the spooled file's path (throws WriteError).
std::string spool_verdict(const std::string& history_path, const std::string& verdict_path,
                          const std::string& run_id) {
  namespace fs = std::filesystem;
  const std::string dir = spool_dir(history_path);
  std::error_code ec;
  fs::create_directory(dir, ec);  // not create_directories: the history's own directory must exist
  if (ec && !fs::is_directory(dir))
    throw results::WriteError("cannot create the spool directory " + dir + ": " + ec.message());
  std::string path = (fs::path(dir) / spool_name(run_id)).string();
  results::write_text_atomically(path, read_all(verdict_path));
  return path;
}

// Stores the spooled verdicts in `h` and removes their files; returns how many were stored.
int drain_spool(results::History& h, const std::string& history_path, std::ostream& progress,
                std::ostream& err, bool quiet) {
  namespace fs = std::filesystem;
  const std::string dir = spool_dir(history_path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json" && e.is_regular_file(ec)) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.size() > static_cast<size_t>(kMaxSpoolDrain)) files.resize(kMaxSpoolDrain);
  int stored = 0;
  for (const auto& f : files) {
    results::Verdict v;
    try {
      v = load_verdict(f);
    } catch (const PublishUsageError& e) {
      fs::rename(f, f + ".bad", ec);
      err << "ncclsmoke publish: warning: spooled file is not a verdict, renamed " << f
          << ".bad: " << e.what() << "\n";
      continue;
    }
    try {
      h.add(v, "publish:spool");
    } catch (const std::exception& e) {
      err << "ncclsmoke publish: warning: spooled runs left in " << dir << " (" << e.what()
          << "); the next publish retries them\n";
      break;
    }
    fs::remove(f, ec);
    if (ec)
      err << "ncclsmoke publish: warning: stored spooled run " << v.run_id << " but cannot remove "
          << f << ": " << ec.message() << " (storing it again is harmless)\n";
    ++stored;
  }
  if (stored && !quiet)
    progress << "history: stored " << stored << " spooled run" << (stored == 1 ? "" : "s")
             << " from " << dir << "\n";
  return stored;
}

}  // namespace

std::string spool_dir(const std::string& history_path) {
  const char* env = std::getenv("NCCLSMOKE_SPOOL_DIR");
  if (env && *env) return env;
  if (results::is_history_url(history_path)) return kDefaultUrlSpoolDir;
  return history_path + ".spool";
}

std::vector<std::string> parse_fail_on(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty() || item == "none") continue;
    if (item != "fail" && item != "degraded" && item != "inconclusive")
      throw PublishUsageError("'" + item +
                              "' is not one of fail, degraded, inconclusive, none");
    if (!contains(out, item)) out.push_back(item);
  }
  return out;
}

results::Verdict load_verdict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PublishUsageError(path + ": cannot read the verdict file (missing or unreadable)");
  // At most one byte over the limit is read: the bounded parse names the size, and a verdict file
  // that is really /dev/zero or a huge log costs no memory.
  const std::size_t limit = rendezvous::kMaxVerdictJsonBytes;
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= limit) {
    in.read(chunk, sizeof chunk);
    if (in.gcount() <= 0) break;
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  }
  if (text.size() > limit)
    throw PublishUsageError(path + ": more than the " + rendezvous::json_size_text(limit) +
                            " limit of a verdict file");
  // Bounded (rendezvous/bounded_json.h): nothing nested deeper than kMaxJsonDepth reaches the
  // validator or the history, which recurse once per level.
  auto parsed = rendezvous::parse_bounded_json(text, limit);
  if (!parsed.ok()) throw PublishUsageError(path + ": " + parsed.error);
  try {
    return results::verdict_from_json(parsed.value);
  } catch (const results::VerdictFormatError& e) {
    throw PublishUsageError(path + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw PublishUsageError(path + ": not a valid ncclsmoke verdict: " + e.what());
  }
}

int policy_exit_code(results::Outcome verdict, const std::vector<std::string>& fail_on) {
  if (verdict == results::Outcome::pass) return 0;
  if (!contains(fail_on, results::to_string(verdict))) return 0;
  return results::exit_code_for(verdict);
}

int exit_code(int policy_code, bool metrics_delivered, bool history_written) {
  if (policy_code != 0) return policy_code;
  if (!history_written) return kExitHistoryFailed;
  if (!metrics_delivered) return kExitMetricsNotDelivered;
  return 0;
}

int publish(const PublishOptions& o, std::ostream& out, std::ostream& err) {
  if (o.cluster.empty()) throw PublishUsageError("--cluster: the cluster name is empty");
  if (o.job.empty()) throw PublishUsageError("--job: the job name is empty");
  try {
    for (const auto& f : o.fail_on) parse_fail_on(f);  // validates each value
  } catch (const PublishUsageError& e) {
    throw PublishUsageError(std::string("--fail-on: ") + e.what());
  }
  PushOptions push;
  if (!o.pushgateway_url.empty()) {
    push.url = o.pushgateway_url;
    push.job = o.job;
    push.timeout_s = o.timeout_s;
    push.retries = o.retries;
    push.backoff_base_s = o.backoff_base_s;
    try {
      grouping_url(push);  // a bad URL is a usage error, found before anything is written
    } catch (const PushUrlError& e) {
      throw PublishUsageError(std::string("--pushgateway: ") + e.what());
    }
  }

  // A history path that holds a device, FIFO, socket or directory is a configuration problem the
  // next publish would hit too: exit 7 before anything is written, and no spool next to it.
  if (!o.history_path.empty()) {
    try {
      results::check_history_path(o.history_path);
    } catch (const results::HistoryError& e) {
      err << "ncclsmoke publish: error: --history: " << e.what() << "\n";
      return results::kExitHistoryUnusable;
    }
  }

  const results::Verdict v = load_verdict(o.verdict_path);
  const std::string profile = verdict_profile(v);
  const int policy = policy_exit_code(v.verdict, o.fail_on);
  // Said even with --quiet: what the ranks read from an unauthenticated store could have been
  // written by anyone who reaches it (README "Threat model").
  if (!v.world.store.authenticated)
    err << "ncclsmoke publish: warning: run " << v.run_id
        << " was not authenticated (world.store.authenticated: false): anyone who reaches the "
           "store could have written what its ranks read; set NCCLSMOKE_JOB_TOKEN (a Secret) on "
           "every rank\n";

  MetricsOptions mo;
  mo.cluster = o.cluster;
  // With no sink the metrics themselves go to stdout; progress then goes to `err`.
  const bool to_stdout = o.pushgateway_url.empty() && o.textfile_dir.empty();
  std::ostream& progress = to_stdout ? err : out;

  // 1. History first: the run is kept whatever happens to the metrics.
  bool history_ok = true;
  const std::string shown = results::redact_history_url(o.history_path);  // never the password
  if (!o.history_path.empty()) {
    try {
      results::History h(o.history_path);
      h.set_cluster(o.cluster);
      auto added = h.add(v, "publish");
      mo.last_success_unix = last_success_in(h, profile);
      drain_spool(h, o.history_path, progress, err, o.quiet);
      if (!o.quiet)
        progress << "history: " << (added.added ? "added" : "already had") << " run " << v.run_id
            << " in " << h.path() << " (" << h.count_runs() << " runs)\n";
    } catch (const std::exception& e) {
      history_ok = false;
      std::string why = e.what();  // HistoryError names the history; other errors may not
      if (why.find(shown) == std::string::npos) why = shown + ": " + why;
      err << "ncclsmoke publish: error: history not written: " << why << "\n";
      try {
        std::string spooled = spool_verdict(o.history_path, o.verdict_path, v.run_id);
        err << "ncclsmoke publish: run " << v.run_id << " spooled to " << spooled
            << "; the next publish with a usable history stores it\n";
      } catch (const std::exception& se) {
        err << "ncclsmoke publish: error: run " << v.run_id << " not spooled either: " << se.what()
            << "; the verdict stays in " << o.verdict_path
            << ": store it later with `ncclsmoke history import --history " << shown
            << " " << o.verdict_path << "`\n";
      }
    }
  }

  // The previous textfile remembers the last success when there is no history to ask.
  if (!o.textfile_dir.empty() && !std::isfinite(mo.last_success_unix))
    mo.last_success_unix = last_success_from_text(read_textfile(o.textfile_dir));

  const std::string text = render_metrics(v, mo);

  // The suspect nodes: said, and kept with --suspects-dir (same list as ncclsmoke_suspect_host's
  // suspects: results/verdict/suspects.h). Never changes the exit code: the metrics carry them too.
  {
    const auto suspects = results::suspect_hosts(v);
    if (!suspects.empty()) {
      std::string named;
      for (const auto& s : suspects) {
        named += (named.empty() ? "" : ", ") + s.node + " (";
        for (std::size_t i = 0; i < s.codes.size(); ++i) named += (i ? "," : "") + s.codes[i];
        named += ")";
      }
      progress << "suspects: " << named << "\n";
    }
    if (!o.suspects_dir.empty()) {
      const std::string body = results::suspects_file_text(v);
      // The run id names a file: only its safe characters.
      std::string id;
      for (char c : v.run_id) id += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
      try {
        std::filesystem::create_directories(o.suspects_dir);
        results::write_text_atomically(o.suspects_dir + "/suspects-" + (id.empty() ? "unknown" : id) + ".txt", body);
        results::write_text_atomically(o.suspects_dir + "/suspects.txt", body);
        if (!o.quiet) progress << "suspects: wrote " << o.suspects_dir << "/suspects.txt\n";
      } catch (const std::exception& e) {
        err << "ncclsmoke publish: warning: suspects not written to " << o.suspects_dir << ": "
            << e.what() << "\n";
      }
    }
  }

  // 2. Textfile, then 3. push.
  bool metrics_ok = true;
  if (!o.textfile_dir.empty()) {
    try {
      std::string path = write_textfile(o.textfile_dir, text);
      if (!o.quiet) progress << "textfile: wrote " << path << "\n";
    } catch (const std::exception& e) {
      metrics_ok = false;
      err << "ncclsmoke publish: warning: metrics not delivered: " << e.what() << "\n";
    }
  }
  if (!o.pushgateway_url.empty()) {
    push.grouping = {{"cluster", o.cluster}, {"profile", profile_label(profile)}};
    PushResult r = push_metrics(push, text);
    if (r.ok) {
      if (!o.quiet) progress << "pushgateway: " << r.describe() << "\n";
    } else {
      metrics_ok = false;
      err << "ncclsmoke publish: warning: metrics not delivered: " << r.describe() << "\n";
    }
  }
  if (to_stdout) out << text;

  const int code = exit_code(policy, metrics_ok, history_ok);
  if (!o.quiet || code != 0) {
    std::ostream& s = o.quiet ? err : progress;
    s << "publish: verdict " << v.verdict << " (run " << v.run_id << ", profile "
      << escape_label_value(profile_label(profile)) << ", fail-on " << join(o.fail_on) << ") -> exit " << code;
    if (code == kExitMetricsNotDelivered) s << " (metrics not delivered)";
    if (code == kExitHistoryFailed) s << " (history not written)";
    s << "\n";
  }
  return code;
}

}  // namespace ncclsmoke::cronjob
