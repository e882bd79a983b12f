#include "cronjob/publish.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cronjob/metrics.h"
#include "cronjob/pushgateway.h"
#include "cronjob/textfile.h"
#include "results/classify.h"
#include "results/history.h"
#include "results/write.h"

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
  q.verdict = "pass";
  q.profile = profile;  // "" matches any profile: filtered below
  double best = std::nan("");
  for (const auto& r : h.runs(q)) {
    if (r.profile != profile) continue;
    double end = r.started_unix + (std::isfinite(r.duration_s) ? r.duration_s : 0);
    if (std::isfinite(end) && !(end <= best)) best = end;
  }
  return best;
}

}  // namespace

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
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw PublishUsageError(path + ": not JSON at byte " + std::to_string(e.byte) + " (" +
                            std::string(e.what()).substr(0, 200) + ")");
  }
  try {
    return results::verdict_from_json(j);
  } catch (const results::VerdictFormatError& e) {
    throw PublishUsageError(path + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw PublishUsageError(path + ": not a valid ncclsmoke verdict: " + e.what());
  }
}

int policy_exit_code(const std::string& verdict, const std::vector<std::string>& fail_on) {
  if (verdict == "pass") return 0;
  if (!contains(fail_on, verdict)) return 0;
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

  const results::Verdict v = load_verdict(o.verdict_path);
  const std::string profile = verdict_profile(v);
  const int policy = policy_exit_code(v.verdict, o.fail_on);

  MetricsOptions mo;
  mo.cluster = o.cluster;
  // With no sink the metrics themselves go to stdout; progress then goes to `err`.
  const bool to_stdout = o.pushgateway_url.empty() && o.textfile_dir.empty();
  std::ostream& progress = to_stdout ? err : out;

  // 1. History first: the run is kept whatever happens to the metrics.
  bool history_ok = true;
  if (!o.history_path.empty()) {
    try {
      results::History h(o.history_path);
      auto added = h.add(v, "publish");
      mo.last_success_unix = last_success_in(h, profile);
      if (!o.quiet)
        progress << "history: " << (added.added ? "added" : "already had") << " run " << v.run_id
            << " in " << o.history_path << " (" << h.count_runs() << " runs)\n";
    } catch (const std::exception& e) {
      history_ok = false;
      std::string why = e.what();  // HistoryError names the file; other errors may not
      if (why.find(o.history_path) == std::string::npos) why = o.history_path + ": " + why;
      err << "ncclsmoke publish: error: history not written: " << why << "\n";
    }
  }

  // The previous textfile remembers the last success when there is no history to ask.
  if (!o.textfile_dir.empty() && !std::isfinite(mo.last_success_unix))
    mo.last_success_unix = last_success_from_text(read_textfile(o.textfile_dir));

  const std::string text = render_metrics(v, mo);

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
