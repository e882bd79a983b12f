// `ncclsmoke report --history DB [--since 14d] [--profile P] [--cluster C] [--html FILE|-]
// [--markdown FILE|-] [--title T] [--verdict-url URL]`: the regression report over the run
// history, one section per cluster (or only cluster C; "default" is the runs stored without one)
// - one self-contained HTML page and/or a Markdown summary (printed to stdout when neither file is
// asked for; `-` names stdout, for one of the two). --verdict-url is a template for the run list's
// links ("{run_id}" replaced), else each imported run links to the file it was imported from.
// It only reads: the history must exist (it is opened without creating it). Exit 0 when written,
// also for an empty window ("no runs since ..."); 2 for a bad flag, a missing history file, or an
// output file that cannot be written; 7 (results::kExitHistoryUnusable) for a history that exists
// but cannot be read (corrupt, locked, I/O error ...), with the hint for that cause, as `history
// import`.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "harness/cli/commands.h"
#include "harness/common/log.h"
#include "results/history/history.h"
#include "results/report/html_report.h"
#include "results/report/markdown_report.h"
#include "results/report/model.h"
#include "results/report/scale.h"

namespace ncclsmoke::harness {
namespace {

struct ReportFlags {
  std::string history;
  std::string since = "14d";
  std::string profile;
  std::string cluster;
  std::string html;
  std::string markdown;
  std::string title = "ncclsmoke regression report";
  std::string verdict_url;
};

constexpr const char* kStdout = "-";

int usage_error(const std::string& what) {
  log_error("ncclsmoke: error: " + what);
  return kExitUsage;
}

// Writes the whole text to a temporary file next to `path` and renames it over `path`, so a
// reader never sees half a report. Returns an error message, "" on success.
std::string write_file(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return "cannot write " + path + ": " + std::strerror(errno);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      int err = errno;
      out.close();
      std::error_code ignored;
      fs::remove(tmp, ignored);
      return "cannot write " + tmp + ": " + std::strerror(err);
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "cannot rename " + tmp + " to " + path;
  }
  return "";
}

// Writes `text` to the file, or to stdout for "-". Returns an error message, "" on success.
std::string write_output(const std::string& path, const std::string& text) {
  if (path != kStdout) return write_file(path, text);
  std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::cout.flush();
  return std::cout ? "" : std::string("cannot write to stdout: ") + std::strerror(errno);
}

int run_report(const ReportFlags& f) {
  namespace fs = std::filesystem;
  using namespace ncclsmoke::report;
  std::error_code ec;
  if (f.html == kStdout && f.markdown == kStdout)
    return usage_error("--html - and --markdown - both name stdout: write one of them to a file");
  if (!f.verdict_url.empty() && f.verdict_url.find("{run_id}") == std::string::npos)
    return usage_error("--verdict-url: " + f.verdict_url +
                       " has no {run_id} (e.g. https://ci.example/ncclsmoke/{run_id}.json)");
  if (!results::is_history_url(f.history) && !fs::exists(f.history, ec))  // not a file: exit 7
    return usage_error("--history: " + f.history + ": no such history file");
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  double since = 0;
  try {
    since = results::parse_since(f.since, now);
  } catch (const std::exception& e) {
    return usage_error(std::string("--since: ") + e.what());
  }

  ReportInput input;
  try {
    results::History history(f.history, /*create=*/false);
    results::HistoryQuery q;
    q.since_unix = since;
    q.profile = f.profile;
    // "default" (runs stored without a cluster) is matched by the model, not the query.
    if (f.cluster != kDefaultCluster) q.cluster = f.cluster;
    input = load_report_input(history, q);
  } catch (const results::HistoryError& e) {
    // HistoryError names the file, SQLite's reason and the hint already.
    log_error(std::string("ncclsmoke: error: --history: ") + e.what());
    return results::kExitHistoryUnusable;
  } catch (const std::exception& e) {
    return usage_error(std::string("--history: ") + e.what());
  }

  ReportOptions opt;
  opt.title = f.title;
  opt.since_unix = since;
  opt.since_text = f.since;
  opt.now_unix = now;
  opt.profile = f.profile;
  opt.cluster = f.cluster;
  opt.history_path = results::redact_history_url(f.history);
  opt.verdict_url = f.verdict_url;
  ReportModel model = build_model(input, opt);

  if (f.html.empty() && f.markdown.empty()) {
    std::cout << render_markdown(model);
    return kExitPass;
  }
  if (!f.html.empty()) {
    if (auto err = write_output(f.html, render_html(model)); !err.empty())
      return usage_error("--html: " + err);
  }
  if (!f.markdown.empty()) {
    if (auto err = write_output(f.markdown, render_markdown(model)); !err.empty())
      return usage_error("--markdown: " + err);
  }
  std::size_t incidents = 0, ongoing = 0;
  std::size_t failing = 0;
  for (const auto& c : model.clusters) {
    incidents += c.incidents.size();
    ongoing += c.ongoing_incidents();
    failing += c.now_verdict() != results::Outcome::pass;
  }
  // The one summary line: on stderr when stdout carries the report itself.
  std::ostream& out = (f.html == kStdout || f.markdown == kStdout) ? std::cerr : std::cout;
  auto name = [](const std::string& p) { return p == kStdout ? std::string("stdout") : p; };
  out << "report: " << model.run_count << " runs in " << model.clusters.size()
      << (model.clusters.size() == 1 ? " cluster" : " clusters") << " since " << format_utc(since)
      << ", " << failing << " not ok now, " << incidents << " incident"
      << (incidents == 1 ? "" : "s") << " (" << ongoing << " ongoing)";
  if (!f.html.empty()) out << " -> " << name(f.html);
  if (!f.markdown.empty()) out << (f.html.empty() ? " -> " : ", ") << name(f.markdown);
  out << "\n";
  return kExitPass;
}

}  // namespace

void register_report_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<ReportFlags>();
  auto* cmd = app.add_subcommand(
      "report",
      "Regression report over the run history, one section per cluster: a self-contained HTML "
      "page (where each profile stands now, failure and bandwidth incidents, hosts in findings, "
      "busbw charts with the baseline band, busbw by message size, verdict timeline, findings "
      "with hints, the runs linked to their verdicts) and/or a Markdown summary");
  cmd->add_option("--history", flags->history, "History to read: an SQLite file (must exist) or a postgresql:// URL")
      ->required();
  cmd->add_option("--since", flags->since,
                  "Window start: 14d, 36h, 90m, 3600s, or an RFC 3339 time")
      ->capture_default_str();
  cmd->add_option("--profile", flags->profile,
                  "Only runs judged against this profile (default: all)");
  cmd->add_option("--cluster", flags->cluster,
                  "Only this cluster's runs (\"default\": runs stored without a cluster; "
                  "default: every cluster, one section each)");
  cmd->add_option("--html", flags->html, "Write the HTML page here (- for stdout)");
  cmd->add_option("--markdown", flags->markdown,
                  "Write the Markdown summary here (- for stdout; without --html/--markdown it "
                  "goes to stdout)");
  cmd->add_option("--verdict-url", flags->verdict_url,
                  "Link each run to its verdict at this URL, {run_id} replaced, e.g. "
                  "'https://ci.example/ncclsmoke/{run_id}.json' (default: the file an import "
                  "read it from)");
  cmd->add_option("--title", flags->title, "Title of the report")->capture_default_str();
  cmd->callback([flags, &action] { action = [flags] { return run_report(*flags); }; });
}

}  // namespace ncclsmoke::harness
