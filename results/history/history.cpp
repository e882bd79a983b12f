// Run history (history.h): what both backends share - the gate numbers of a verdict, times,
// problem classification and hints, URL redaction, the filesystem check - and History itself,
// which forwards to the backend its target names (history_sqlite.cpp, history_postgres.cpp).
#include "results/history/history.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "results/history/history_backend.h"

namespace ncclsmoke::results {
namespace {

using detail::kNaN;
using nlohmann::json;

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

// A verdict's summarised rows and identities (results/verdict/alike.h): the groups of "alike"
// member `member` that are objects naming a transport.
std::vector<const json*> alike_groups(const Verdict& v, const char* member) {
  std::vector<const json*> out;
  if (!v.alike.is_object()) return out;
  auto it = v.alike.find(member);
  if (it == v.alike.end() || !it->is_array()) return out;
  for (const auto& g : *it)
    if (g.is_object() && g.contains("transport") && g["transport"].is_string()) out.push_back(&g);
  return out;
}

std::vector<HistoryGate> gates_of(const Verdict& v) {
  std::vector<HistoryGate> out;
  std::vector<std::string> names;
  const auto row_groups = alike_groups(v, "transports");
  const auto id_groups = alike_groups(v, "identities");
  auto add_name = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  for (const auto& r : v.transports) add_name(r.transport);
  for (const auto* g : row_groups) add_name((*g)["transport"].get<std::string>());
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
    g.profile = detail::profile_of(v);
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
      for (const auto* rg : row_groups)
        if ((*rg)["transport"] == name && rg->value("gate", false) && g.gate_bytes == 0)
          g.gate_bytes = rg->value("bytes", std::int64_t{0});
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
    // The ranks' rows summarised as alike: their slowest counts as a rank's.
    for (const auto* rg : row_groups) {
      if ((*rg)["transport"] != name || rg->value("bytes", std::int64_t{-1}) != g.gate_bytes)
        continue;
      if (rg->value("synthetic", false)) g.synthetic = true;
      auto bw = rg->find("busbw_gbps");
      if (bw == rg->end() || !bw->is_object() || !bw->contains("min") || !(*bw)["min"].is_number())
        continue;
      const double slowest = (*bw)["min"].get<double>();
      if (std::isfinite(slowest) && (std::isnan(worst_rank) || slowest < worst_rank))
        worst_rank = slowest;
    }
    g.busbw_gbps = std::isnan(world) ? worst_rank : world;
    const TransportIdentity* id = nullptr;
    for (const auto& i : v.identities)
      if (i.transport == name && (!id || (id->rank != -1 && (i.rank == -1 || i.rank < id->rank))))
        id = &i;
    if (id) {
      g.identity = identity_text(id->observed);
    } else {  // every identity summarised: what they all shared
      for (const auto* ig : id_groups)
        if ((*ig)["transport"] == name && ig->contains("common") && (*ig)["common"].is_object()) {
          g.identity = identity_text((*ig)["common"]);
          break;
        }
    }
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
    case HistoryProblem::not_a_file: return "not a file";
    case HistoryProblem::not_history: return "not an ncclsmoke history";
    case HistoryProblem::bad_verdict: return "bad verdict";
    case HistoryProblem::unreachable: return "unreachable";
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


bool is_history_url(const std::string& target) {
  return target.rfind("postgresql://", 0) == 0 || target.rfind("postgres://", 0) == 0;
}

std::string redact_history_url(const std::string& target) {
  if (!is_history_url(target)) return target;
  std::string out = target;
  // userinfo: scheme://user:PASSWORD@host... (the last '@' before the path ends it)
  const size_t start = out.find("://") + 3;
  size_t end = out.find_first_of("/?#", start);
  if (end == std::string::npos) end = out.size();
  const size_t at = out.rfind('@', end);
  if (at != std::string::npos && at >= start) {
    const size_t colon = out.find(':', start);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // query parameters password=... and sslpassword=...
  for (const char* key : {"password=", "sslpassword="}) {
    size_t q = out.find('?');
    while (q != std::string::npos) {
      size_t p = out.find(key, q);
      if (p == std::string::npos) break;
      if (out[p - 1] != '?' && out[p - 1] != '&') {
        q = p + 1;
        continue;
      }
      size_t v = p + std::strlen(key);
      size_t e = out.find_first_of("&#", v);
      out.replace(v, (e == std::string::npos ? out.size() : e) - v, "***");
      q = v;
    }
  }
  return out;
}

HistoryProblem classify_postgres_error(const std::string& sqlstate, bool connection_bad) {
  if (sqlstate.size() == 5) {
    const std::string cls = sqlstate.substr(0, 2);
    if (cls == "08") return HistoryProblem::unreachable;
    if (sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03")
      return HistoryProblem::unreachable;  // the server is shutting down / starting
    if (cls == "28" || sqlstate == "3D000") return HistoryProblem::cannot_open;
    if (sqlstate == "53100") return HistoryProblem::full;
    if (sqlstate == "25006" || sqlstate == "42501") return HistoryProblem::read_only;
    if (sqlstate == "55P03" || sqlstate == "40P01" || sqlstate == "40001" || sqlstate == "57014")
      return HistoryProblem::locked;
    if (sqlstate == "XX001" || sqlstate == "XX002") return HistoryProblem::corrupt;
    if (sqlstate == "58030") return HistoryProblem::io;
  }
  return connection_bad ? HistoryProblem::unreachable : HistoryProblem::other;
}

std::string network_filesystem_name(long f_type) {
  switch (static_cast<unsigned long>(f_type) & 0xffffffffUL) {
    case 0x6969UL: return "NFS";
    case 0xFF534D42UL: return "CIFS/SMB";
    case 0xFE534D42UL: return "SMB2";
    case 0x517BUL: return "SMB";
    case 0x65735546UL: return "FUSE";
    case 0x0BD00BD0UL: return "Lustre";
    case 0x47504653UL: return "GPFS";
    case 0x00C36400UL: return "CephFS";
    case 0x01021997UL: return "9p";
    case 0x5346414FUL: return "AFS";
    default: return "";
  }
}

std::string sqlite_journal_mode_for(long f_type) {
  return network_filesystem_name(f_type).empty() ? "WAL" : "DELETE";
}

std::string default_history_cluster() {
  const char* c = std::getenv("NCCLSMOKE_CLUSTER");
  return c && *c ? c : "default";
}

namespace detail {

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

double started_unix_of(const Verdict& v, const std::string& name) {
  try {
    return parse_rfc3339(v.started_at);
  } catch (const std::invalid_argument& e) {
    throw HistoryError("history " + name + ": run " + v.run_id + ": started_at: " + e.what(),
                       HistoryProblem::bad_verdict);
  }
}

std::vector<int> parse_int_array(const std::string& text) {
  std::vector<int> out;
  auto j = rendezvous::parse_bounded_or_discarded(text, rendezvous::kMaxSmallJsonBytes);
  if (j.is_array())
    for (const auto& e : j)
      if (e.is_number_integer()) out.push_back(e.get<int>());
  return out;
}

std::vector<std::string> parse_string_array(const std::string& text) {
  std::vector<std::string> out;
  auto j = rendezvous::parse_bounded_or_discarded(text, rendezvous::kMaxSmallJsonBytes);
  if (j.is_array())
    for (const auto& e : j)
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

}  // namespace detail

void check_history_path(const std::string& target) {
  if (is_history_url(target)) return;
  struct stat st{};
  if (::stat(target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;  // absent: the open says
  const char* type = S_ISCHR(st.st_mode)    ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                                            : "not a regular file";
  throw HistoryError("history " + target + " is " + type +
                         ", not a history file: --history takes an SQLite file path (created "
                         "when absent) or a postgresql:// URL; name a file there",
                     HistoryProblem::not_a_file);
}

History::History(const std::string& target, bool create, int busy_timeout_ms)
    : path_(redact_history_url(target)),
      postgres_(is_history_url(target)),
      cluster_(default_history_cluster()) {
  check_history_path(target);
  impl_ = postgres_ ? detail::open_postgres_history(target, create, busy_timeout_ms)
                    : detail::open_sqlite_history(target, create, busy_timeout_ms);
}

History::~History() = default;

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
  return impl_->add_stream(
      [&](const Verdict*& v, const std::string*& text, const std::string*& src) {
        src = nullptr;
        return next(v, text);
      },
      source, cluster_);
}

AddResult History::add_stream(const NextSourcedVerdict& next, const std::string& source) {
  return impl_->add_stream(next, source, cluster_);
}

std::int64_t History::prune(double before_unix, bool vacuum) {
  return impl_->prune(before_unix, vacuum);
}

std::int64_t History::count_runs() const { return impl_->count_runs(); }

std::vector<HistoryRun> History::runs(const HistoryQuery& q) const { return impl_->runs(q); }

std::vector<HistoryGate> History::gates(const HistoryQuery& q) const { return impl_->gates(q); }

std::vector<HistoryFinding> History::findings(const HistoryQuery& q) const {
  return impl_->findings(q);
}

std::optional<nlohmann::json> History::verdict_json(const std::string& run_id) const {
  return impl_->verdict_json(run_id);
}

}  // namespace ncclsmoke::results
