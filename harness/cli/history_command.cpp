// `ncclsmoke history import --history DB VERDICT.json|DIR...` stores global verdicts in the run
// history (results/history/history.h); `ncclsmoke history list --history DB` shows what is stored;
// `ncclsmoke history prune --history DB --older-than 90d` keeps it bounded (a CronJob every 30
// minutes adds about 17,500 runs a year per cluster).
//
// Import is all-or-nothing: every file is read and validated first; if any is unreadable or not a
// verdict, each bad file is named and nothing is stored (exit 2), so a retry after fixing the input
// cannot leave half an import behind. Runs already stored are counted as duplicates (re-importing
// is harmless). A directory is walked as a tree (every *.json below it, e.g. launch's own
// `ncclsmoke-runs/<run id>/verdict.json` and `verdict.rank<N>.json`): the global verdicts are
// stored, each with the file it came from (source "import:<absolute path>", the report's link);
// local verdicts (one rank's view) are counted in the one closing line, not named one by one: the
// history holds one record per run, the global verdict rank 0 writes. That line also counts the
// runs that have only local verdicts (rank 0 wrote no verdict.json).
//
// A history that cannot be used (corrupt, locked, full disk, read-only, I/O error, not an
// ncclsmoke history, a PostgreSQL server unreachable or refusing the login) exits
// results::kExitHistoryUnusable (7) for import, list and prune alike, with one line naming the
// history, the engine's reason and the hint for that cause (results/history/history.h).
//
// --history is a file path (SQLite) or a postgresql:// URL; messages print the URL with its
// password redacted. `import --cluster C` (default $NCCLSMOKE_CLUSTER, else "default") records
// the cluster with each run; `list --cluster C` shows only that cluster's runs.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <iostream>
#include <sstream>

#include "harness/cli/commands.h"
#include "rendezvous/bounded_json.h"
#include "results/history/history.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::harness {
namespace {

namespace fs = std::filesystem;
using results::History;
using results::HistoryError;

struct ImportFlags {
  std::string db;
  std::string cluster = results::default_history_cluster();
  std::vector<std::string> inputs;
  bool quiet = false;
};

struct PruneFlags {
  std::string db;
  std::string older_than;
  bool vacuum = false;
};

struct ListFlags {
  std::string db;
  std::string since;
  std::string profile;
  std::string verdict;
  std::string cluster;
  std::int64_t limit = 20;
  bool json = false;
};

// Files named directly, and the *.json files anywhere below named directories (each directory's
// sorted by path; directory symlinks are not followed, so a loop cannot trap the walk).
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs,
                                       std::vector<std::string>& problems) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> inside;
      std::size_t dirs = 1;
      fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec);
      for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code tec;
        if (it->is_directory(tec) && !it->is_symlink(tec)) ++dirs;
        if (it->path().extension() == ".json" && it->is_regular_file(tec))
          inside.push_back(it->path());
      }
      if (ec) problems.push_back(in + ": cannot list directory: " + ec.message());
      if (inside.empty() && !ec)
        problems.push_back(in + ": holds no *.json files (" + std::to_string(dirs) +
                           (dirs == 1 ? " directory" : " directories") + " searched)");
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.push_back(in);
    }
  }
  return files;
}

// "import:<absolute path>": where a run was read from (HistoryRun::source; the report links it).
std::string import_source(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  return "import:" + (ec ? path : abs.lexically_normal().string());
}

// One input file, read and checked by a worker thread; the main thread stores it.
struct Parsed {
  enum State { pending, ok, local, bad };
  State state = pending;
  results::Verdict verdict;
  std::string text;     // the file's bytes, stored verbatim
  std::string problem;  // for `bad`
};

// The whole file in one read (no stream buffering: 100,000 files of ~12 KB in a big import), at
// most kMaxVerdictJsonBytes: a bigger file (or one that grows past it) is refused unread.
bool read_whole(const std::string& path, std::string& text, std::string& problem) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    problem = path + ": cannot read (" + std::strerror(errno) + ")";
    return false;
  }
  struct stat st{};
  size_t got = 0;
  bool ok = ::fstat(fd, &st) == 0;
  const size_t limit = rendezvous::kMaxVerdictJsonBytes;
  if (ok && static_cast<size_t>(std::max<off_t>(st.st_size, 0)) > limit) {
    problem = path + ": not a verdict: " +
              rendezvous::json_size_text(static_cast<size_t>(st.st_size)) + ", more than the " +
              rendezvous::json_size_text(limit) + " limit";
    ::close(fd);
    return false;
  }
  if (ok) {
    text.resize(static_cast<size_t>(std::max<off_t>(st.st_size, 0)));
    for (;;) {
      if (got == text.size()) {
        if (text.size() > limit) break;  // grew past the limit since fstat: the parse names it
        text.resize(text.size() + 4096);  // grew since fstat
      }
      ssize_t k = ::read(fd, text.data() + got, text.size() - got);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) ok = false;
      if (k <= 0) break;
      got += static_cast<size_t>(k);
    }
  }
  if (!ok) problem = path + ": cannot read (" + std::strerror(errno) + ")";
  ::close(fd);
  text.resize(got);
  return ok;
}

void parse_file(const std::string& path, Parsed& out) {
  if (!read_whole(path, out.text, out.problem)) {
    out.state = Parsed::bad;
    return;
  }
  // Nearly every file takes the one-pass reader; anything it is unsure about (and every bad
  // file) goes through nlohmann + the schema validator, which decide and name the problem.
  if (auto fast = results::verdict_from_text_fast(out.text)) {
    out.verdict = std::move(*fast);
    out.state = out.verdict.scope == results::Scope::global ? Parsed::ok : Parsed::local;
    return;
  }
  // Bounded (rendezvous/bounded_json.h): a document too big or nested too deep is named, never
  // handed to the validator, which recurses once per level.
  auto parsed = rendezvous::parse_bounded_json(out.text, rendezvous::kMaxVerdictJsonBytes);
  if (!parsed.ok()) {
    // "not JSON at byte N" reads best as it is; a size or depth limit is why it is not a verdict.
    const bool not_json = parsed.error.rfind("not JSON", 0) == 0;
    out.problem = path + (not_json ? ": " : ": not a verdict: ") + parsed.error;
    out.state = Parsed::bad;
    return;
  }
  const nlohmann::json& doc = parsed.value;
  try {
    out.verdict = results::verdict_from_json(doc);
    out.state = out.verdict.scope == results::Scope::global ? Parsed::ok : Parsed::local;
  } catch (const results::VerdictFormatError& e) {
    std::string first = e.problems().empty() ? e.what() : e.problems().front();
    out.problem = path + ": not a verdict: " + first +
                  (e.problems().size() > 1
                       ? " (+" + std::to_string(e.problems().size() - 1) + " more)"
                       : "");
    out.state = Parsed::bad;
  }
}

struct ImportRejected {};

// Workers read and check the files (one read each; the one-pass reader of verdict.h, or nlohmann +
// the schema validator for anything it is unsure of) while this thread stores them in file order
// inside one transaction; any bad file rolls the whole import back.
int run_import(const ImportFlags& f) {
  std::vector<std::string> problems;
  std::vector<std::string> files = expand_inputs(f.inputs, problems);
  if (!problems.empty()) {
    for (const auto& p : problems) std::cerr << "ncclsmoke: error: history import: " << p << "\n";
    return kExitUsage;
  }
  const size_t n = files.size();
  std::vector<Parsed> parsed(n);
  std::mutex mu;
  std::condition_variable ready;
  std::atomic<size_t> next_file{0};
  std::atomic<bool> stop{false};
  // Workers stay at most kAhead files ahead of the storing thread, so memory stays bounded (the
  // parsing outruns the inserts) however many files there are.
  constexpr size_t kAhead = 512;
  std::condition_variable room;
  size_t stored_upto = 0;  // under mu: files before this one have been taken by the storer
  auto worker = [&] {
    for (size_t i; !stop && (i = next_file++) < n;) {
      {
        std::unique_lock lock(mu);
        room.wait(lock, [&] { return stop || i < stored_upto + kAhead; });
        if (stop) return;
      }
      // The storer is past this slot (it works on stored_upto - 1 at most): freed here, so the
      // storing thread, the critical path, never pays for tearing verdicts down. (Moved out and
      // destroyed: assigning an empty one would keep the text's buffer.)
      if (i > kAhead) {
        Parsed done = std::move(parsed[i - kAhead - 1]);
      }
      Parsed p;
      parse_file(files[i], p);
      {
        std::lock_guard lock(mu);
        parsed[i] = std::move(p);
      }
      ready.notify_one();  // only the storing thread waits
    }
  };
  unsigned threads = n < 32 ? 1 : std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  auto join_all = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    room.notify_all();
    for (auto& t : pool)
      if (t.joinable()) t.join();
  };

  std::error_code ec;
  const bool is_file = !results::is_history_url(f.db);
  const bool existed = !is_file || fs::exists(f.db, ec);
  int local_skipped = 0;
  std::set<std::string> global_runs;  // run ids of the global verdicts read
  std::map<std::string, std::string> local_runs;  // run id -> one of its local verdicts' path
  std::string source;
  size_t i = 0;
  // The storer reads each verdict in its slot (no copy, no move); a worker frees the slot later.
  auto next = [&](const results::Verdict*& v, const std::string*& text,
                  const std::string*& src) {
    while (i < n) {
      const Parsed* p = nullptr;
      {
        std::unique_lock lock(mu);
        ready.wait(lock, [&] { return parsed[i].state != Parsed::pending; });
        p = &parsed[i];
        stored_upto = i + 1;
      }
      room.notify_all();
      const std::string& path = files[i++];
      if (p->state == Parsed::bad) {
        problems.push_back(p->problem);
        continue;
      }
      if (p->state == Parsed::local) {  // counted in the closing line
        ++local_skipped;
        local_runs.try_emplace(p->verdict.run_id, path);
        continue;
      }
      global_runs.insert(p->verdict.run_id);
      if (!problems.empty()) continue;  // already rejected: keep reading only to name them all
      v = &p->verdict;
      text = &p->text;
      source = import_source(path);
      src = &source;
      return true;
    }
    if (!problems.empty()) throw ImportRejected{};
    return false;
  };

  int code = 0;
  try {
    History h(f.db, true);
    h.set_cluster(f.cluster);
    auto r = h.add_stream(results::History::NextSourcedVerdict(next), "import");
    if (!f.quiet) {
      std::size_t local_only = 0;
      std::string example;
      for (const auto& [id, path] : local_runs)
        if (!global_runs.count(id) && local_only++ == 0) example = path;
      std::cout << "history " << h.path() << ": " << r.added << " run" << (r.added == 1 ? "" : "s")
                << " added, " << r.duplicates << " already stored";
      if (local_skipped)
        std::cout << ", " << local_skipped << " local skipped (one rank's view each; the run's "
                  << "global verdict.json is what is stored)";
      if (local_only)
        std::cout << ", " << local_only << " run" << (local_only == 1 ? "" : "s")
                  << " with only local verdicts (rank 0 wrote no verdict.json, e.g. " << example
                  << ")";
      std::cout << "; " << h.count_runs() << " in total\n";
    }
  } catch (const ImportRejected&) {
    for (const auto& p : problems) std::cerr << "ncclsmoke: error: history import: " << p << "\n";
    std::cerr << "ncclsmoke: error: history import: nothing stored (" << problems.size()
              << " bad input" << (problems.size() == 1 ? "" : "s") << " of " << n
              << "); fix or leave them out and run again\n";
    code = kExitUsage;
  } catch (const HistoryError& e) {
    std::cerr << "ncclsmoke: error: history import: " << e.what() << "\n";
    code = e.problem() == results::HistoryProblem::bad_verdict ? kExitUsage
                                                               : results::kExitHistoryUnusable;
  }
  join_all();
  if (code != 0 && !existed) {  // a rejected first import leaves no empty database behind
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(f.db + suffix, ec);
  }
  return code;
}

std::string fmt_gbps(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

int run_list(const ListFlags& f) {
  results::HistoryQuery q;
  try {
    if (!f.since.empty()) q.since_unix = results::parse_since(f.since, unix_now());
  } catch (const std::invalid_argument& e) {
    std::cerr << "ncclsmoke: error: --since: " << e.what() << "\n";
    return kExitUsage;
  }
  q.profile = f.profile;
  if (!f.verdict.empty()) q.verdict = results::parse_outcome(f.verdict);  // CLI: IsMember-checked
  q.cluster = f.cluster;
  q.limit = f.limit;
  try {
    History h(f.db, false);
    auto runs = h.runs(q);
    results::HistoryQuery gq = q;
    gq.limit = 0;
    if (!runs.empty()) gq.since_unix = std::max(gq.since_unix, runs.front().started_unix);
    std::map<std::string, std::vector<results::HistoryGate>> gates;
    for (auto& g : h.gates(gq)) gates[g.run_id].push_back(std::move(g));
    std::map<std::string, std::vector<std::string>> codes;
    for (auto& fd : h.findings(gq)) codes[fd.run_id].push_back(results::to_string(fd.code));
    if (f.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : runs) {
        nlohmann::json gj = nlohmann::json::array();
        for (const auto& g : gates[r.run_id])
          gj.push_back({{"transport", g.transport},
                        {"gate_bytes", g.gate_bytes},
                        {"busbw_gbps", std::isnan(g.busbw_gbps) ? nlohmann::json() : nlohmann::json(g.busbw_gbps)},
                        {"baseline_gbps", std::isnan(g.baseline_gbps) ? nlohmann::json() : nlohmann::json(g.baseline_gbps)},
                        {"identity", g.identity}});
        out.push_back({{"run_id", r.run_id}, {"started_at", r.started_at},
                       {"verdict", results::to_string(r.verdict)}, {"exit_code", r.exit_code},
                       {"world_size", r.world_size}, {"profile", r.profile},
                       {"hosts", r.hosts}, {"source", r.source}, {"cluster", r.cluster},
                       {"gates", gj},
                       {"findings", codes[r.run_id]}});
      }
      std::cout << out.dump(1) << "\n";
      return 0;
    }
    std::cout << "history " << h.path() << ": " << h.count_runs() << " runs stored; showing "
              << runs.size() << "\n";
    if (!runs.empty())
      std::printf("%-24s %-27s %-12s %-12s %-5s %-16s %s\n", "started", "run", "verdict",
                  "cluster", "ranks", "profile", "gates, findings");
    for (const auto& r : runs) {
      std::string g_text;
      for (const auto& g : gates[r.run_id]) {
        g_text += (g_text.empty() ? "" : " ") + g.transport + "=" + fmt_gbps(g.busbw_gbps);
        if (!std::isnan(g.baseline_gbps)) g_text += "/" + fmt_gbps(g.baseline_gbps);
      }
      // Each code once, in the order first stored, with its count when repeated: a fleet's run
      // of 164 GPU_XID findings is one word, not a 2 KB line.
      std::vector<std::pair<std::string, int>> counted;
      for (const auto& c : codes[r.run_id]) {
        auto it = std::find_if(counted.begin(), counted.end(), [&](const auto& e) { return e.first == c; });
        if (it == counted.end())
          counted.emplace_back(c, 1);
        else
          ++it->second;
      }
      std::string c_text;
      for (const auto& [c, n] : counted)
        c_text += (c_text.empty() ? "" : ",") + c + (n > 1 ? " x" + std::to_string(n) : "");
      std::printf("%-24s %-27s %-12s %-12s n=%-3d %-16s %s%s%s\n", r.started_at.c_str(),
                  r.run_id.c_str(), results::to_string(r.verdict).c_str(),
                  r.cluster.empty() ? "-" : r.cluster.c_str(), r.world_size,
                  r.profile.empty() ? "-" : r.profile.c_str(),
                  g_text.empty() ? "" : ("busbw GB/s " + g_text).c_str(),
                  c_text.empty() ? "" : "  ", c_text.c_str());
    }
  } catch (const HistoryError& e) {
    std::cerr << "ncclsmoke: error: history list: " << e.what() << "\n";
    return results::kExitHistoryUnusable;
  }
  return 0;
}

int run_prune(const PruneFlags& f) {
  double before = 0;
  try {
    before = results::parse_since(f.older_than, unix_now());
  } catch (const std::invalid_argument& e) {
    std::cerr << "ncclsmoke: error: --older-than: " << e.what() << "\n";
    return kExitUsage;
  }
  try {
    History h(f.db, false);
    auto removed = h.prune(before, f.vacuum);
    std::cout << "history " << h.path() << ": " << removed << " run" << (removed == 1 ? "" : "s")
              << " older than " << f.older_than << " removed; " << h.count_runs() << " kept"
              << (f.vacuum && removed ? " (file compacted)" : "") << "\n";
  } catch (const HistoryError& e) {
    std::cerr << "ncclsmoke: error: history prune: " << e.what() << "\n";
    return results::kExitHistoryUnusable;
  }
  return 0;
}

// --history of a command that reads an existing history: a URL, or a file that exists. Something
// there that is not a file (a device, a FIFO, a directory) passes, for History to refuse with
// exit 7 naming its type (results::check_history_path); only a missing one is a usage error.
CLI::Validator existing_history() {
  return CLI::Validator(
      [](std::string& s) {
        if (results::is_history_url(s)) return std::string();
        std::error_code ec;
        if (fs::exists(s, ec)) return std::string();
        return "no such history file: " + s + " (or give a postgresql:// URL)";
      },
      "FILE|URL");
}

CLI::Validator non_empty(const std::string& flag) {
  return CLI::Validator(
      [flag](std::string& s) { return s.empty() ? flag + " is empty" : std::string(); }, "TEXT");
}

}  // namespace

void register_history_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "history", "Run history (an SQLite file or a postgresql:// URL): import verdicts, list and "
                 "prune runs");
  cmd->require_subcommand(1);

  auto imp = std::make_shared<ImportFlags>();
  auto* ic = cmd->add_subcommand(
      "import",
      "Store global verdicts in the history. All-or-nothing: any bad file stores nothing (exit 2); "
      "runs already stored are counted, not duplicated");
  ic->add_option("--history", imp->db,
                 "History: an SQLite file (created if absent) or a postgresql://user:pass@host/db "
                 "URL (tables created if absent)")
      ->required();
  ic->add_option("--cluster", imp->cluster,
                 "Cluster recorded with each run (default $NCCLSMOKE_CLUSTER, else \"default\")")
      ->check(non_empty("--cluster"));
  ic->add_option("inputs", imp->inputs,
                 "verdict.json files, or directories walked for them (e.g. launch's "
                 "ncclsmoke-runs/: the global verdicts are stored, local ones counted)")
      ->required()
      ->check(CLI::ExistingPath);
  ic->add_flag("--quiet", imp->quiet, "Print nothing on success");
  ic->callback([imp, &action] { action = [imp] { return run_import(*imp); }; });

  auto pr = std::make_shared<PruneFlags>();
  auto* pc = cmd->add_subcommand(
      "prune", "Remove runs older than a time (their gates and findings with them), in one "
               "transaction");
  pc->add_option("--history", pr->db, "History: an SQLite file or a postgresql:// URL")
      ->required()
      ->check(existing_history());
  pc->add_option("--older-than", pr->older_than,
                 "Remove runs that started before this: 90d, 12w, or an RFC 3339 time")
      ->required();
  pc->add_flag("--vacuum", pr->vacuum, "Compact the file afterwards (rewrites it: needs as much "
                                       "free disk again, briefly)");
  pc->callback([pr, &action] { action = [pr] { return run_prune(*pr); }; });

  auto ls = std::make_shared<ListFlags>();
  auto* lc = cmd->add_subcommand("list", "Show stored runs, newest last");
  lc->add_option("--history", ls->db, "History: an SQLite file or a postgresql:// URL")
      ->required()
      ->check(existing_history());
  lc->add_option("--cluster", ls->cluster, "Only runs of this cluster");
  lc->add_option("--since", ls->since, "Only runs since: 14d, 36h, 90m or an RFC 3339 time");
  lc->add_option("--profile", ls->profile, "Only runs judged against this profile");
  lc->add_option("--verdict", ls->verdict, "Only runs with this verdict")
      ->check(CLI::IsMember({"pass", "degraded", "fail", "inconclusive"}));
  lc->add_option("--limit", ls->limit, "At most this many (newest); 0: all")
      ->check(CLI::NonNegativeNumber);
  lc->add_flag("--json", ls->json, "JSON instead of a table");
  lc->callback([ls, &action] { action = [ls] { return run_list(*ls); }; });
}

}  // namespace ncclsmoke::harness
