#include "harness/world/world.h"
#include "harness/common/text.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/world/hostlist.h"
#include "harness/world/job_identity.h"
#include "harness/world/launchers.h"
#include "rendezvous/net.h"
#include "rendezvous/store_util.h"

namespace ncclsmoke::harness {
namespace {

using rendezvous::printable;

constexpr std::size_t kMaxShown = 96;

const std::string kSlurmPortText =
    "20000 + (SLURM_JOB_ID*4 + SLURM_STEP_ID%4) % 10000, below Linux's ephemeral range "
    "(32768..60999), so no client socket holds it";

// The launchers (harness/world/launchers.h): one table entry each.
using Launcher = LauncherSpec;

// "RANK, OMPI_COMM_WORLD_RANK, ..." / "WORLD_SIZE, OMPI_COMM_WORLD_SIZE, ...": every launcher's
// rank (or size) variable once, for the messages that say none was set.
std::string every_launcher_var(bool size) {
  std::vector<std::string> names;
  for (const auto& l : launchers()) {
    std::vector<const char*> vars = size ? l.size_vars : std::vector<const char*>{l.rank_var};
    if (!size && l.rank_rule == RankRule::jobset) vars = {"JOB_COMPLETION_INDEX"};
    for (const char* v : vars)
      if (std::find(names.begin(), names.end(), v) == names.end()) names.emplace_back(v);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

// "torchrun, Open MPI, ...": every launcher by its label, in the table's order.
std::string every_launcher_label() {
  std::vector<std::string> labels;
  for (const auto& l : launchers()) labels.emplace_back(l.label);
  return fmt::format("{}", fmt::join(labels, ", "));
}


// The value as stored in a finding: escaped like printable() but without the quotes.
std::string shown(const std::string& raw) {
  std::string p = printable(raw, kMaxShown);
  return p.size() >= 2 ? p.substr(1, p.size() - 2) : p;
}

// "<what>; expected <expected>": the tail of every CONFIG_INVALID message.
std::string expecting(std::string_view what, std::string_view expected) {
  return fmt::format("{}; expected {}", what, expected);
}


// A value and where it came from ("--rank" or "RANK").
struct Raw {
  std::string variable;
  std::string value;
  bool from_flag = false;
};

enum class IntStatus { kOk, kEmpty, kNotInteger, kOutOfRange };

struct ParsedInt {
  IntStatus status;
  int64_t value = 0;
};

// Strict: after trimming, the whole string must be an optional '-' and decimal digits.
ParsedInt parse_int(const std::string& raw) {
  std::string s = trim(raw);
  if (s.empty()) return {IntStatus::kEmpty};
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) return {IntStatus::kOutOfRange};
  if (ec != std::errc{} || ptr != s.data() + s.size()) return {IntStatus::kNotInteger};
  return {IntStatus::kOk, v};
}

bool valid_ipv6(const std::string& s) {
  std::string addr = s;
  auto pct = s.find('%');
  if (pct != std::string::npos) {
    std::string zone = s.substr(pct + 1);
    if (zone.empty()) return false;
    for (char c : zone)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
        return false;
    addr = s.substr(0, pct);
  }
  in6_addr out{};
  return inet_pton(AF_INET6, addr.c_str(), &out) == 1;
}

bool valid_host_name(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  if (s.front() == '-' || s.front() == '.') return false;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80) return false;
    if (!std::isalnum(u) && c != '-' && c != '.' && c != '_') return false;
  }
  return true;
}

class Discovery {
 public:
  Discovery(const WorldFlags& flags, const Environment& env, const std::string& hostname)
      : flags_(flags), env_(env), hostname_(hostname) {}

  WorldResult run();

 private:
  // The launcher variable `name` (harness/common/env.h: guarded, set-but-empty is "").
  std::optional<std::string> var(const char* name) const { return lookup(env_, name); }

  std::optional<Raw> from_flag(const std::optional<std::string>& v, const char* flag) const {
    if (!v) return std::nullopt;
    return Raw{flag, *v, true};
  }
  std::optional<Raw> from_env(const char* name) const {
    auto v = var(name);
    if (!v) return std::nullopt;
    return Raw{name, *v, false};
  }
  std::optional<Raw> from_env_any(const std::vector<const char*>& names) const {
    for (const char* n : names)
      if (auto r = from_env(n)) return r;
    return std::nullopt;
  }

  void add(ConfigProblem::Kind kind, const std::string& variable, const std::string& raw_value,
           std::string message, std::string hint) {
    ConfigProblem p;
    p.kind = kind;
    p.variable = variable;
    p.value = shown(raw_value);
    p.message = std::move(message);
    p.hint = std::move(hint);
    problems_.push_back(std::move(p));
  }
  void invalid(const Raw& r, const std::string& problem, std::string hint) {
    add(ConfigProblem::Kind::invalid, r.variable, r.value,
        fmt::format("{} is {}, {}", r.variable, printable(r.value, kMaxShown), problem),
        std::move(hint));
  }
  void missing(const std::string& variable, std::string message, std::string hint) {
    add(ConfigProblem::Kind::missing, variable, "", std::move(message), std::move(hint));
  }
  // Two launchers disagree about `r`; discovery goes on with the primary launcher's value.
  void conflict(const Raw& r, std::string message, std::string hint) {
    add(ConfigProblem::Kind::conflict, r.variable, r.value, std::move(message), std::move(hint));
  }

  // "set RANK to ... (or override it with --rank)" / "pass --rank ..."
  static std::string fix_hint(const Raw& r, const char* flag, const std::string& expected) {
    if (r.from_flag) return fmt::format("pass {} as {}", flag, expected);
    return fmt::format("set {} to {} in the launcher's environment, or override it with {}",
                       r.variable, expected, flag);
  }

  std::optional<int64_t> parse_ranged(const Raw& r, const char* flag, const std::string& expected,
                                      int64_t min, int64_t max, const std::string& below_min,
                                      const std::string& above_max) {
    ParsedInt p = parse_int(r.value);
    auto reject = [&](std::string_view what) {
      invalid(r, expecting(what, expected), fix_hint(r, flag, expected));
      return std::nullopt;
    };
    switch (p.status) {
      case IntStatus::kEmpty:
        return reject("empty");
      case IntStatus::kNotInteger:
        return reject("not an integer");
      case IntStatus::kOutOfRange:
        return reject("out of range");
      case IntStatus::kOk:
        break;
    }
    if (p.value < min) return reject(below_min);
    if (p.value > max) return reject(above_max);
    return p.value;
  }

  const Launcher* choose_launcher();
  void check_conflicts(const Launcher* primary);
  std::optional<uint16_t> parse_port(const Raw& r);
  std::optional<std::string> parse_addr(const Raw& r);
  std::string missing_master_hint(const Launcher* l) const;
  std::optional<std::pair<std::string, uint16_t>> parse_store(const Raw& r);
  std::optional<std::string> slurm_master(const Raw& nodelist);
  std::optional<uint16_t> slurm_port(const Raw& job_id);
  void check_pytorchjob(const Raw& rank_raw, const std::optional<Raw>& size_raw,
                        std::optional<int> world_size);
  std::optional<int> jobset_rank(const std::optional<int>& world_size, std::string& rank_source);
  std::optional<std::string> hostfile_master(const Raw& hostfile);
  void service_link_port(const Raw& r, const std::string& suggestion);
  std::optional<bool> parse_agent_store(const Raw& r);
  std::optional<JobIdentity> job_identity(const std::string& host);

  const WorldFlags& flags_;
  const Environment& env_;
  std::string hostname_;
  std::vector<ConfigProblem> problems_;
  bool env_launchers_ = true;  // false for --launcher flags
  // Set by check_pytorchjob: RANK is a pod index there, so a config error keeps no partial world.
  bool rank_is_pod_index_ = false;
  const Launcher* launcher_ = nullptr;  // choose_launcher()'s, for launcher-specific hints
  bool auto_mode_ = true;
};

const Launcher* Discovery::choose_launcher() {
  std::string hint = trim(flags_.launcher);
  for (char& c : hint) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (hint.empty() || hint == "auto") return detect_launcher(env_, hostname_);
  auto_mode_ = false;
  if (hint == "flags") {
    env_launchers_ = false;
    return nullptr;
  }
  if (const Launcher* l = launcher_named(hint)) return l;
  invalid(Raw{"--launcher", flags_.launcher, true}, "not a known launcher",
          fmt::format("pass --launcher as one of {}", launcher_choices()));
  auto_mode_ = true;  // fall back to detection so the other fields are still checked
  return detect_launcher(env_, hostname_);
}

// Two launchers' variables in one environment that describe different worlds. A smaller outer
// world that divides the inner one is a launcher nested per node (srun/mpirun starting torchrun),
// not a conflict. The indexed-job index names the pod, not the worker, so it is not compared.
void Discovery::check_conflicts(const Launcher* primary) {
  if (!auto_mode_ || !env_launchers_ || primary == nullptr || !primary->process_ranks) return;
  auto own_r = from_env(primary->rank_var);
  auto own_s = from_env_any(primary->size_vars);
  if (!own_r || !own_s) return;
  ParsedInt own_pr = parse_int(own_r->value), own_ps = parse_int(own_s->value);
  if (own_pr.status != IntStatus::kOk || own_ps.status != IntStatus::kOk) return;
  const int64_t rank = own_pr.value, size = own_ps.value;
  for (const Launcher& o : launchers()) {
    const Launcher* other = &o;
    if (other == primary || !other->process_ranks) continue;
    auto r = from_env(other->rank_var);
    auto s = from_env_any(other->size_vars);
    if (!r || !s) continue;
    ParsedInt pr = parse_int(r->value), ps = parse_int(s->value);
    if (pr.status != IntStatus::kOk || ps.status != IntStatus::kOk) continue;
    const std::string hint = fmt::format(
        "start ncclsmoke under one launcher, or pass --launcher to choose which variables to "
        "read; if {} runs inside {} on purpose, pass --launcher {}",
        primary->label, other->label, primary->name);
    if (ps.value == size && pr.value != rank) {
      conflict(*r,
               fmt::format("{} is {} ({}) but this process is rank {} by {}; launchers disagree, "
                           "using {}'s rank",
                           r->variable, printable(r->value, kMaxShown), other->label, rank,
                           primary->label, primary->label),
               hint);
    } else if (ps.value != size && !(ps.value > 0 && ps.value < size && size % ps.value == 0)) {
      conflict(*s,
               fmt::format("{} is {} ({}) but the world size is {} by {}; launchers disagree, "
                           "using {}'s",
                           s->variable, printable(s->value, kMaxShown), other->label, size,
                           primary->label, primary->label),
               hint);
    }
  }
}

std::optional<uint16_t> Discovery::parse_port(const Raw& r) {
  const std::string v = trim(r.value);
  const std::string expected = "a TCP port number in 1..65535 (default 29500)";
  auto scheme = v.find("://");
  if (scheme != std::string::npos) {
    std::string rest = v.substr(scheme + 3);
    std::string port_part;
    auto colon = rest.rfind(':');
    if (colon != std::string::npos) port_part = rest.substr(colon + 1);
    while (!port_part.empty() && port_part.back() == '/') port_part.pop_back();
    const std::string suggestion = fmt::format(" {}", all_digits(port_part) ? port_part : "<port>");
    if (!r.from_flag && r.variable == "MASTER_PORT") {
      service_link_port(r, suggestion);
    } else {
      invalid(r, expecting("a URL, not a port", expected),
              r.from_flag ? fmt::format("pass only the port number, e.g. --master-port{}",
                                        suggestion)
                          : fmt::format("set {} to the port number only, or pass --master-port{}",
                                        r.variable, suggestion));
    }
    return std::nullopt;
  }
  auto colon = v.rfind(':');
  if (colon != std::string::npos && all_digits(v.substr(colon + 1))) {
    std::string port_part = v.substr(colon + 1);
    invalid(r, expecting("a host:port pair, not a port", expected),
            fmt::format("put the host in {} and only the port ({}) in {}",
                        r.from_flag ? "--master-addr" : "MASTER_ADDR", port_part, r.variable));
    return std::nullopt;
  }
  auto p =
      parse_ranged(r, "--master-port", expected, 1, 65535, "not a usable port (ports run 1..65535)",
                   "above 65535, the largest TCP port");
  if (!p) return std::nullopt;
  return static_cast<uint16_t>(*p);
}

// MASTER_PORT=tcp://ip:port: the fix depends on where we run. In a pod (KUBERNETES_SERVICE_HOST
// is set in every one) it is the Service's injected link; outside Kubernetes (srun, mpirun) the
// value leaked in from the submitting shell, and the launcher's table entry says how to fix it.
void Discovery::service_link_port(const Raw& r, const std::string& suggestion) {
  const bool in_pod = var("KUBERNETES_SERVICE_HOST").has_value();
  const std::string digits = trim(suggestion);
  const std::string port = all_digits(digits) ? digits : "<port>";
  if (!in_pod && launcher_ && launcher_->service_link_fix) {
    std::string fix = launcher_->service_link_fix;
    for (auto at = fix.find("{port}"); at != std::string::npos; at = fix.find("{port}", at))
      fix.replace(at, 6, port);
    invalid(r,
            fmt::format("a URL of the tcp://ip:port form Kubernetes service links take, not a "
                        "port{}",
                        launcher_->port_from_slurm_job
                            ? fmt::format("; {} sets no MASTER_PORT, so this came from the "
                                          "submitting environment",
                                          launcher_->label)
                            : ""),
            fix);
    return;
  }
  invalid(r,
          "a Kubernetes service link, not a port: Kubernetes injects <SERVICE>_PORT=tcp://ip:port "
          "into every pod for each Service in the namespace, and a Service named 'master' "
          "overwrites MASTER_PORT",
          in_pod ? fmt::format("set enableServiceLinks: false in the pod spec (or rename the "
                               "Service), or pass --master-port{}",
                               suggestion)
                 : fmt::format("set enableServiceLinks: false in the pod spec (or rename the "
                               "Service) if this runs in a Kubernetes pod; elsewhere set "
                               "MASTER_PORT to the port number only (MASTER_PORT={}); or pass "
                               "--master-port{}",
                               port, suggestion));
}

std::optional<std::string> Discovery::parse_addr(const Raw& r) {
  const std::string v = trim(r.value);
  const char* port_name = r.from_flag ? "--master-port" : "MASTER_PORT";
  const std::string expected = "the host name or IP address of rank 0 (no scheme, no port)";
  if (v.empty()) {
    invalid(r, expecting("empty", expected), fix_hint(r, "--master-addr", expected));
    return std::nullopt;
  }
  auto split_hint = [&](const std::string& host, const std::string& port) {
    if (port.empty()) return fmt::format("set {} to the host only ({})", r.variable, host);
    return fmt::format("set {} to the host only ({}) and {} to the port ({})", r.variable, host,
                       port_name, port);
  };
  auto scheme = v.find("://");
  if (scheme != std::string::npos) {
    std::string rest = v.substr(scheme + 3);
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    std::string host = rest, port;
    if (!rest.empty() && rest.front() == '[') {
      auto close = rest.find(']');
      if (close != std::string::npos) {
        host = rest.substr(1, close - 1);
        if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
      }
    } else if (auto c = rest.rfind(':'); c != std::string::npos && rest.find(':') == c) {
      host = rest.substr(0, c);
      port = rest.substr(c + 1);
    }
    if (!all_digits(port)) port.clear();
    invalid(r, expecting("a URL, not a host", expected),
            split_hint(host.empty() ? "<host>" : host, port));
    return std::nullopt;
  }
  if (v.front() == '[') {
    auto close = v.find(']');
    if (close == std::string::npos) {
      invalid(r, expecting("an IPv6 literal without its closing ']'", expected),
              fix_hint(r, "--master-addr", expected));
      return std::nullopt;
    }
    std::string inner = v.substr(1, close - 1);
    std::string after = v.substr(close + 1);
    if (!valid_ipv6(inner)) {
      invalid(r, expecting("not a valid IPv6 address inside the brackets", expected),
              fix_hint(r, "--master-addr", expected));
      return std::nullopt;
    }
    if (after.empty()) return inner;
    if (after.front() == ':' && all_digits(after.substr(1))) {
      invalid(r, expecting("an address with a port", expected),
              split_hint(fmt::format("[{}]", inner), after.substr(1)));
    } else {
      invalid(r, expecting("has text after the IPv6 literal", expected),
              fix_hint(r, "--master-addr", expected));
    }
    return std::nullopt;
  }
  auto colons = std::count(v.begin(), v.end(), ':');
  if (colons >= 2) {
    if (valid_ipv6(v)) return v;
    invalid(r, expecting("neither an IPv6 address nor a host name", expected),
            fix_hint(r, "--master-addr", expected));
    return std::nullopt;
  }
  if (colons == 1) {
    auto c = v.find(':');
    std::string host = v.substr(0, c), port = v.substr(c + 1);
    if (all_digits(port) && valid_host_name(host)) {
      invalid(r, expecting("a host:port pair", expected), split_hint(host, port));
    } else {
      invalid(r, expecting("not a valid host name", expected),
              fix_hint(r, "--master-addr", expected));
    }
    return std::nullopt;
  }
  if (!valid_host_name(v)) {
    invalid(r,
            expecting("not a valid host name (only letters, digits, '-', '.', '_' and at most 253 "
                      "characters)",
                      expected),
            fix_hint(r, "--master-addr", expected));
    return std::nullopt;
  }
  return v;
}

std::string Discovery::missing_master_hint(const Launcher* l) const {
  if (!l) return "pass --master-addr <rank 0 host> (or set MASTER_ADDR)";
  if (l->port_from_slurm_job)
    return fmt::format("{}; without MASTER_PORT the port is derived from SLURM_JOB_ID: {}",
                       l->missing_master_hint, kSlurmPortText);
  return l->missing_master_hint;
}

std::optional<std::pair<std::string, uint16_t>> Discovery::parse_store(const Raw& r) {
  const std::string v = trim(r.value);
  const std::string expected =
      "HOST:PORT, the address of a store someone else hosts (IPv6 as [addr]:port)";
  const std::string example = "pass --store as HOST:PORT, e.g. --store 10.0.0.7:29500 or "
                              "--store [fd00::7]:29500, or omit it to let rank 0 host the store";
  if (v.empty()) {
    invalid(r, expecting("empty", expected), example);
    return std::nullopt;
  }
  if (auto scheme = v.find("://"); scheme != std::string::npos) {
    std::string rest = v.substr(scheme + 3);
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    invalid(r, expecting("a URL", expected),
            fmt::format("pass only the host and port, without the scheme: --store {}",
                        rest.empty() ? std::string("<host>:<port>") : rest));
    return std::nullopt;
  }
  std::string host, port;
  if (v.front() == '[') {
    auto close = v.find(']');
    if (close == std::string::npos) {
      invalid(r, expecting("an IPv6 literal without its closing ']'", expected), example);
      return std::nullopt;
    }
    host = v.substr(1, close - 1);
    std::string after = v.substr(close + 1);
    if (after.empty() || after.front() != ':') {
      invalid(r, after.empty() ? expecting("missing the port", expected)
                               : expecting("has text after the IPv6 literal", expected),
              example);
      return std::nullopt;
    }
    port = after.substr(1);
    if (!valid_ipv6(host)) {
      invalid(r, expecting("not a valid IPv6 address inside the brackets", expected), example);
      return std::nullopt;
    }
  } else {
    auto colons = std::count(v.begin(), v.end(), ':');
    if (colons == 0) {
      invalid(r, expecting("missing the port", expected),
              fmt::format("pass --store {}:<port> (torch's default store port is 29500)", v));
      return std::nullopt;
    }
    if (colons >= 2) {
      invalid(r, expecting("has several ':' (an IPv6 address goes in brackets)", expected),
              "write the address as [addr]:port, e.g. --store [fd00::7]:29500");
      return std::nullopt;
    }
    auto c = v.find(':');
    host = v.substr(0, c);
    port = v.substr(c + 1);
    // Same rules as --master-addr; its finding is replaced by one naming the whole value.
    const std::size_t before = problems_.size();
    auto ok = parse_addr(Raw{"--store", host, true});
    problems_.resize(before);
    if (!ok) {
      invalid(r,
              expecting(fmt::format("its host {} is not a host name or IP address",
                                    printable(host, kMaxShown)),
                        expected),
              example);
      return std::nullopt;
    }
  }
  ParsedInt p = parse_int(port);
  if (!all_digits(port) || p.status != IntStatus::kOk || p.value < 1 || p.value > 65535) {
    invalid(r,
            expecting(fmt::format("its port {} is not a TCP port in 1..65535",
                                  printable(port, kMaxShown)),
                      expected),
            example);
    return std::nullopt;
  }
  return std::make_pair(host, static_cast<uint16_t>(p.value));
}

// Rank 0's host from a Slurm node list: the first host, where srun places task 0.
std::optional<std::string> Discovery::slurm_master(const Raw& nodelist) {
  const std::string hint =
      "pass --master-addr <rank 0 host>, or export MASTER_ADDR=$(scontrol show hostnames "
      "$SLURM_JOB_NODELIST | head -1) in the batch script before srun";
  std::string error;
  auto host = first_host(trim(nodelist.value), &error);
  if (!host) {
    invalid(nodelist,
            fmt::format("not a Slurm host list ({}), so rank 0's host is unknown", error), hint);
    return std::nullopt;
  }
  if (!valid_host_name(*host)) {
    invalid(nodelist,
            fmt::format("and its first host {} is not a valid host name, so rank 0 cannot be "
                        "reached by it",
                        printable(*host, kMaxShown)),
            hint);
    return std::nullopt;
  }
  return host;
}

std::optional<uint16_t> Discovery::slurm_port(const Raw& job) {
  const std::string v = trim(job.value);
  if (!all_digits(v) || v.size() > 18) {
    invalid(job,
            fmt::format("not a Slurm job id (decimal digits), so no store port can be derived "
                        "from it ({})",
                        kSlurmPortText),
            "set MASTER_PORT in the batch script, or pass --master-port");
    return std::nullopt;
  }
  uint64_t id = std::strtoull(v.c_str(), nullptr, 10);
  std::optional<uint64_t> step;
  if (auto s = var("SLURM_STEP_ID")) {
    std::string t = trim(*s);
    if (all_digits(t) && t.size() <= 18) step = std::strtoull(t.c_str(), nullptr, 10);
  }
  return slurm_derived_port(id, step);
}

// A Kubeflow PyTorchJob pod started without torchrun (training-operator envvar.go, setPodEnv):
// RANK is the pod's index and WORLD_SIZE = replicas x nprocPerNode, where "auto" counts 1 per pod
// (getNprocPerNodeInt). With one process per pod (WORLD_SIZE = PET_NNODES, or nprocPerNode 1) the
// pod index is this process's rank and the world is right. With more, a process started once per
// pod would take a node rank for its own and wait for ranks that never come.
void Discovery::check_pytorchjob(const Raw& rank_raw, const std::optional<Raw>& size_raw,
                                 std::optional<int> world_size) {
  auto n = from_env("PET_NPROC_PER_NODE");
  std::string v = n ? trim(n->value) : "1";
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "1") return;
  if (auto nodes = from_env("PET_NNODES"); nodes && world_size) {
    ParsedInt p = parse_int(nodes->value);
    if (p.status == IntStatus::kOk && p.value == *world_size) return;  // one process per pod
  }
  if (!n) return;
  // From here on RANK counts pods, not processes: no partial world names a rank by it.
  rank_is_pod_index_ = true;
  const std::string fix =
      "in the pod command run `ncclsmoke launch` (it reads PET_NNODES, PET_NODE_RANK and "
      "PET_NPROC_PER_NODE and starts one rank per process) or `torchrun --no-python ncclsmoke "
      "run`; if mpirun or srun started this process inside the pod, pass --launcher mpi or "
      "--launcher slurm";
  std::string what;
  if (v == "auto" || v == "gpu" || v == "cpu") {
    what = fmt::format("torchrun's value for one process per {}", v == "cpu" ? "CPU" : "GPU");
  } else {
    ParsedInt p = parse_int(v);
    if (p.status != IntStatus::kOk || p.value < 1) {
      invalid(*n,
              "not a process count; expected a positive integer or auto, gpu, cpu (torchrun's "
              "--nproc-per-node, set from the PyTorchJob's nprocPerNode)",
              "set nprocPerNode in the PyTorchJob spec to the processes per pod, e.g. 1 or 8");
      return;
    }
    what = fmt::format("{} processes per pod", p.value);
  }
  invalid(*n,
          fmt::format("{}: this is a Kubeflow PyTorchJob pod, where RANK ({}) is the pod's "
                      "index, not a process rank{}; but ncclsmoke run was started directly (no "
                      "TORCHELASTIC_RUN_ID), once per pod",
                      what, printable(rank_raw.value, kMaxShown),
                      size_raw ? fmt::format(", and {} ({}) counts processes", size_raw->variable,
                                             printable(size_raw->value, kMaxShown))
                               : std::string()),
          fix);
}

// A JobSet pod's global rank: JOBSET_JOB_GLOBAL_INDEX x pods per child Job + JOB_COMPLETION_INDEX,
// where pods per child Job = world size / JOBSET_GLOBAL_REPLICAS (every child Job the same
// parallelism). JobSet sets none of these as variables: the pod template passes its labels and
// annotations through the downward API (README "Launching it"). `rank_source` names them.
std::optional<int> Discovery::jobset_rank(const std::optional<int>& world_size,
                                          std::string& rank_source) {
  constexpr const char* kDownward =
      "pass them through the downward API in the child Job's pod template: env JOBSET_NAME from "
      "fieldPath metadata.labels['jobset.sigs.k8s.io/jobset-name'], JOBSET_JOB_GLOBAL_INDEX from "
      "metadata.annotations['jobset.sigs.k8s.io/job-global-index'], JOBSET_GLOBAL_REPLICAS from "
      "metadata.annotations['jobset.sigs.k8s.io/global-replicas'] (as cronjob/k8s/examples/"
      "jobset does); or pass --rank";
  auto replicas_raw = from_env("JOBSET_GLOBAL_REPLICAS");
  auto index_raw = from_env("JOBSET_JOB_GLOBAL_INDEX");
  auto pod_raw = from_env("JOB_COMPLETION_INDEX");
  if (!replicas_raw || !index_raw) {
    std::string where;
    if (auto master = var("MASTER_ADDR"))
      if (auto h = jobset_host(hostname_, *master))
        where = fmt::format(" (host {}: JobSet {}, replicated job {}, child Job {}, pod {})",
                            printable(hostname_, kMaxShown), h->jobset, h->replicated_job,
                            h->job_index, h->pod_index);
    std::vector<std::string> absent;
    if (!replicas_raw) absent.emplace_back("JOBSET_GLOBAL_REPLICAS");
    if (!index_raw) absent.emplace_back("JOBSET_JOB_GLOBAL_INDEX");
    missing(absent.front(),
            fmt::format("no rank: this is a JobSet pod{} but {} {} not set; JOB_COMPLETION_INDEX "
                        "counts pods inside one child Job only, so every child Job would claim "
                        "ranks 0.. and the ranks would join separate worlds",
                        where, fmt::join(absent, " and "), absent.size() == 1 ? "is" : "are"),
            kDownward);
    return std::nullopt;
  }
  if (!pod_raw) {
    missing("JOB_COMPLETION_INDEX",
            "no rank: a JobSet pod without JOB_COMPLETION_INDEX; the child Jobs must use "
            "completionMode: Indexed",
            "set completionMode: Indexed in the replicated job's Job template, or pass --rank");
    return std::nullopt;
  }
  auto replicas = parse_ranged(*replicas_raw, "--rank",
                               "the JobSet's number of child Jobs, 1..", 1, kMaxWorldSize,
                               "less than 1", "larger than the largest world");
  auto index = parse_ranged(*index_raw, "--rank", "this child Job's index in the JobSet, 0..", 0,
                            kMaxWorldSize, "negative", "larger than the largest world");
  auto pod = parse_ranged(*pod_raw, "--rank", "this pod's index in its child Job, 0..", 0,
                          kMaxWorldSize, "negative", "larger than the largest world");
  if (!replicas || !index || !pod || !world_size) return std::nullopt;
  if (*world_size % *replicas != 0) {
    invalid(*replicas_raw,
            fmt::format("does not divide the world size {}: the JobSet's child Jobs must have "
                        "the same parallelism, world size = child Jobs x pods per Job",
                        *world_size),
            "set WORLD_SIZE to every pod of the JobSet (child Jobs x parallelism), or pass --rank");
    return std::nullopt;
  }
  const int64_t per_job = *world_size / *replicas;
  if (*index >= *replicas || *pod >= per_job) {
    invalid(*index >= *replicas ? *index_raw : *pod_raw,
            fmt::format("outside the JobSet's {} child Jobs x {} pods (world size {})", *replicas,
                        per_job, *world_size),
            "make WORLD_SIZE the JobSet's pods (child Jobs x parallelism), or pass --rank");
    return std::nullopt;
  }
  rank_source = "JOBSET_JOB_GLOBAL_INDEX, JOBSET_GLOBAL_REPLICAS, JOB_COMPLETION_INDEX";
  return static_cast<int>(*index * per_job + *pod);
}

// An MPIJob's launcher (kubeflow/mpi-operator v2, mpi_job_controller.go) sets
// OMPI_MCA_orte_default_hostfile and no MASTER_ADDR; mpirun forwards OMPI_* variables to the ranks
// and maps rank 0 onto the hostfile's first host. Read where the file is mounted (the launcher's
// pod, or any rank that sees it); elsewhere the hint says how to export MASTER_ADDR instead.
std::optional<std::string> Discovery::hostfile_master(const Raw& hostfile) {
  const std::string path = trim(hostfile.value);
  const std::string hint = missing_master_hint(launcher_);
  std::FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "r");
  if (!f) {
    invalid(hostfile,
            fmt::format("a hostfile this rank cannot read ({}), so rank 0's host is unknown "
                        "without MASTER_ADDR",
                        path.empty() ? "empty" : std::strerror(errno)),
            hint);
    return std::nullopt;
  }
  std::string first;
  char line[1024];
  // Bounded: the first host is on one of the first lines; comments and blank lines are skipped.
  for (int n = 0; n < 4096 && first.empty() && std::fgets(line, sizeof line, f); ++n) {
    std::string l = trim(line);
    if (l.empty() || l.front() == '#') continue;
    first = l.substr(0, l.find_first_of(" \t"));
  }
  std::fclose(f);
  if (first.empty() || !valid_host_name(first)) {
    invalid(hostfile,
            first.empty() ? std::string("a hostfile that names no host")
                          : fmt::format("a hostfile whose first host {} is not a valid host name",
                                        printable(first, kMaxShown)),
            hint);
    return std::nullopt;
  }
  return first;
}

// TORCHELASTIC_USE_AGENT_STORE: torch writes str(bool) ("True"/"False").
std::optional<bool> Discovery::parse_agent_store(const Raw& r) {
  std::string v = trim(r.value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  invalid(r,
          "neither True nor False; torchrun's agent sets it to say whether it hosts the store at "
          "MASTER_ADDR:MASTER_PORT itself",
          "leave TORCHELASTIC_USE_AGENT_STORE as torchrun sets it (True or False), or unset it; "
          "pass --store HOST:PORT to name an external store explicitly");
  return std::nullopt;
}

std::optional<JobIdentity> Discovery::job_identity(const std::string& host) {
  if (flags_.job_id) {
    std::string problem = job_id_problem(*flags_.job_id);
    if (!problem.empty())
      invalid(Raw{"--job-id", *flags_.job_id, true},
              expecting(problem, fmt::format("up to {} printable ASCII characters without '/'",
                                             kMaxJobIdLength)),
              "pass --job-id as e.g. the CI run id (letters, digits, '-', '.', '_'), or omit it to "
              "use the launcher's job id");
  }
  if (env_launchers_) return discover_job_identity(flags_.job_id, env_, host);
  // --launcher flags reads no launcher variables: only our own.
  Environment own = [this](const std::string& name) -> std::optional<std::string> {
    if (name != "NCCLSMOKE_JOB_ID") return std::nullopt;
    return var("NCCLSMOKE_JOB_ID");
  };
  return discover_job_identity(flags_.job_id, own, host);
}

WorldResult Discovery::run() {
  const Launcher* launcher = choose_launcher();
  launcher_ = env_launchers_ ? launcher : nullptr;
  std::map<std::string, std::string> sources;

  // World size.
  std::optional<Raw> size_raw = from_flag(flags_.world_size, "--world-size");
  if (!size_raw && env_launchers_) {
    if (launcher) {
      size_raw = from_env_any(launcher->size_vars);
    } else {
      size_raw = from_env("WORLD_SIZE");
    }
  }
  std::optional<int> world_size;
  if (size_raw) {
    auto v = parse_ranged(*size_raw, "--world-size",
                          fmt::format("the number of ranks, 1..{}", kMaxWorldSize), 1,
                          kMaxWorldSize, "less than 1 (a world needs at least one rank)",
                          fmt::format("larger than {} ranks, likely a typo", kMaxWorldSize));
    if (v) {
      world_size = static_cast<int>(*v);
      sources["world_size"] = size_raw->variable;
    }
  } else if (launcher) {
    const std::string vars = fmt::format("{}", fmt::join(launcher->size_vars, " or "));
    std::string hint = launcher->missing_size_hint
                           ? std::string(launcher->missing_size_hint)
                           : fmt::format("pass --world-size, or set {}", vars);
    missing(launcher->size_vars.front(),
            fmt::format("no world size: {} started this process (its {} is set) but {} is not, "
                        "and no --world-size was given",
                        launcher->label,
                        launcher->rank_rule == RankRule::jobset ? "JOB_COMPLETION_INDEX"
                                                                : launcher->rank_var,
                        vars),
            hint);
  } else if (!env_launchers_) {
    missing("--world-size",
            "no world size: --launcher flags reads no environment and no --world-size was given",
            "pass --world-size, or drop --launcher flags to read the launcher's environment");
  } else {
    missing("--world-size",
            fmt::format("no world size: no --world-size flag and no launcher variable ({}) is set",
                        every_launcher_var(true)),
            fmt::format("run under one of {}, or pass --rank and --world-size",
                        every_launcher_label()));
  }

  // Rank.
  std::optional<Raw> rank_raw = from_flag(flags_.rank, "--rank");
  std::optional<int> rank;
  results::WorldSource source = results::WorldSource::flags;
  // JobSet: the rank is computed from three variables, each checked there.
  const bool jobset_rank_rule = !rank_raw && launcher && launcher->rank_rule == RankRule::jobset;
  if (!rank_raw && launcher && !jobset_rank_rule) rank_raw = from_env(launcher->rank_var);
  if (jobset_rank_rule) {
    std::string from;
    rank = jobset_rank(world_size, from);
    if (rank) sources["rank"] = from;
    source = launcher->source;
  } else if (rank_raw) {
    std::string expected = world_size ? fmt::format("a rank in 0..{}", *world_size - 1)
                                      : std::string("a rank, 0..world size - 1");
    auto v = parse_ranged(*rank_raw, "--rank", expected, 0, INT_MAX, "negative", "out of range");
    if (v) {
      if (world_size && *v >= *world_size) {
        invalid(*rank_raw,
                fmt::format("not below the world size {} (from {}); ranks run 0..{}",
                            *world_size, sources["world_size"], *world_size - 1),
                fmt::format("make {} and {} describe the same world: every rank in 0..world "
                            "size - 1 exactly once",
                            rank_raw->variable, sources["world_size"]));
      } else {
        rank = static_cast<int>(*v);
        sources["rank"] = rank_raw->variable;
      }
    }
    if (!rank_raw->from_flag && launcher) source = launcher->source;
  } else if (world_size && *world_size == 1) {
    rank = 0;
    sources["rank"] = "default";
    if (launcher) source = launcher->source;
  } else if (launcher && launcher->rank_rule == RankRule::variable) {
    missing(launcher->rank_var,
            fmt::format("no rank: --launcher chose {} but {} is not set, and no --rank was given",
                        launcher->label, launcher->rank_var),
            fmt::format("pass --rank, or set {}, or pass --launcher auto", launcher->rank_var));
  } else if (!env_launchers_) {
    missing("--rank", "no rank: --launcher flags reads no environment and no --rank was given",
            "pass --rank, or drop --launcher flags to read the launcher's environment");
  } else {
    missing("--rank",
            fmt::format("no rank: no --rank flag and no launcher variable ({}) is set",
                        every_launcher_var(false)),
            fmt::format("run under one of {}, or pass --rank and --world-size",
                        every_launcher_label()));
  }

  if (!(rank_raw && rank_raw->from_flag && size_raw && size_raw->from_flag))
    check_conflicts(launcher);

  // A PyTorchJob pod's RANK counts pods; it is a process rank only with one process per pod.
  if (env_launchers_ && launcher && launcher->source == results::WorldSource::pytorchjob &&
      rank_raw && !rank_raw->from_flag)
    check_pytorchjob(*rank_raw, size_raw, world_size);

  // Local rank.
  std::optional<Raw> local_raw = from_flag(flags_.local_rank, "--local-rank");
  if (!local_raw && env_launchers_) {
    if (launcher && launcher->local_var) {
      local_raw = from_env(launcher->local_var);
    } else if (!launcher) {
      local_raw = from_env("LOCAL_RANK");
    }
  }
  int local_rank = 0;
  sources["local_rank"] = "default";
  if (local_raw) {
    int64_t max = world_size ? *world_size - 1 : INT_MAX;
    std::string expected = fmt::format("this process's index on its node, 0..{}", max);
    auto v = parse_ranged(*local_raw, "--local-rank", expected, 0, max, "negative",
                          world_size ? "not below the world size" : "out of range");
    if (v) {
      local_rank = static_cast<int>(*v);
      sources["local_rank"] = local_raw->variable;
    }
  }

  // --store: a store someone else hosts. It replaces MASTER_ADDR/MASTER_PORT, which are then
  // not read from the environment (the flags are still honoured, for the record).
  std::optional<std::pair<std::string, uint16_t>> store;
  const bool store_flag = flags_.store.has_value();
  if (store_flag) store = parse_store(Raw{"--store", *flags_.store, true});
  const MasterFallback fallback =
      launcher && env_launchers_ ? launcher->master_fallback : MasterFallback::none;
  const std::vector<const char*> addr_vars =
      launcher ? launcher->addr_vars : std::vector<const char*>{"MASTER_ADDR"};
  const std::vector<const char*> port_vars =
      launcher ? launcher->port_vars : std::vector<const char*>{"MASTER_PORT"};

  // Master address.
  std::optional<Raw> addr_raw = from_flag(flags_.master_addr, flags_.master_addr_name.c_str());
  if (!addr_raw && env_launchers_ && !store_flag) addr_raw = from_env_any(addr_vars);
  std::optional<Raw> nodelist_raw, hostfile_raw;
  const bool alone = world_size && *world_size == 1;
  if (!addr_raw && !store_flag && !alone && fallback == MasterFallback::slurm_nodelist)
    nodelist_raw = from_env_any({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
  if (!addr_raw && !store_flag && !alone && fallback == MasterFallback::mpi_hostfile)
    hostfile_raw = from_env("OMPI_MCA_orte_default_hostfile");
  std::string master_addr;
  if (addr_raw) {
    if (auto a = parse_addr(*addr_raw)) {
      master_addr = *a;
      sources["master_addr"] = addr_raw->variable;
    }
  } else if (store_flag) {
    if (store) {
      master_addr = store->first;
      sources["master_addr"] = "--store";
    }
  } else if (world_size && *world_size == 1) {
    master_addr = "127.0.0.1";
    sources["master_addr"] = "default";
  } else if (nodelist_raw) {
    if (auto a = slurm_master(*nodelist_raw)) {
      master_addr = *a;
      sources["master_addr"] = nodelist_raw->variable;
    }
  } else if (hostfile_raw) {
    if (auto a = hostfile_master(*hostfile_raw)) {
      master_addr = *a;
      sources["master_addr"] = hostfile_raw->variable;
    }
  } else if (world_size) {
    std::string also;
    if (fallback == MasterFallback::slurm_nodelist)
      also = " nor SLURM_STEP_NODELIST / SLURM_JOB_NODELIST";
    else if (fallback == MasterFallback::mpi_hostfile)
      also = " nor OMPI_MCA_orte_default_hostfile (an MPIJob's hostfile)";
    missing(addr_vars.front(),
            fmt::format("no master address: world size is {} but neither --master-addr nor {}{} "
                        "is set, so ranks cannot find rank 0",
                        *world_size, fmt::join(addr_vars, " nor "), also),
            missing_master_hint(launcher));
  }

  // Master port.
  std::optional<Raw> port_raw = from_flag(flags_.master_port, "--master-port");
  if (!port_raw && env_launchers_ && !store_flag) port_raw = from_env_any(port_vars);
  uint16_t master_port = kDefaultMasterPort;
  sources["master_port"] = "default";
  if (port_raw) {
    if (auto p = parse_port(*port_raw)) {
      master_port = *p;
      sources["master_port"] = port_raw->variable;
    }
  } else if (store_flag) {
    if (store) {
      master_port = store->second;
      sources["master_port"] = "--store";
    }
  } else if (launcher && env_launchers_ && launcher->port_from_slurm_job) {
    if (auto job = from_env("SLURM_JOB_ID")) {
      if (auto p = slurm_port(*job)) {
        master_port = *p;
        sources["master_port"] = "SLURM_JOB_ID";
      }
    }
  }

  // torchrun's agent: the restart attempt, and whether it hosts the store itself.
  int restart_count = 0;
  bool external_store = false;
  std::string store_source = "rank 0";
  if (launcher && launcher->torchelastic_agent && env_launchers_) {
    sources["restart_count"] = "default";
    if (auto rc = from_env("TORCHELASTIC_RESTART_COUNT")) {
      const std::string expected = "torchrun's restart attempt, 0, 1, ...";
      ParsedInt p = parse_int(rc->value);
      if (p.status != IntStatus::kOk || p.value < 0 || p.value > INT_MAX) {
        invalid(*rc, expecting("not a restart count", expected),
                "leave TORCHELASTIC_RESTART_COUNT as torchrun's agent sets it, or unset it");
      } else {
        restart_count = static_cast<int>(p.value);
        sources["restart_count"] = rc->variable;
      }
    }
    if (auto agent = from_env("TORCHELASTIC_USE_AGENT_STORE")) {
      if (auto use = parse_agent_store(*agent); use && *use) {
        external_store = true;
        store_source = "TORCHELASTIC_USE_AGENT_STORE";
      }
    }
  }
  std::string store_host = master_addr;
  uint16_t store_port = master_port;
  if (store_flag) {
    external_store = true;
    store_source = "--store";
    if (store) {
      store_host = store->first;
      store_port = store->second;
    }
  }
  sources["store"] = store_source;

  // Node name: informational, so an empty NODE_NAME falls back to the host name.
  std::string node_name;
  if (flags_.node_name) {
    node_name = trim(*flags_.node_name);
    if (node_name.empty()) {
      invalid(Raw{"--node-name", *flags_.node_name, true}, "empty",
              "pass --node-name as the Kubernetes node (or machine) name, or omit it");
    } else {
      sources["node_name"] = "--node-name";
    }
  }
  if (node_name.empty() && !flags_.node_name) {
    if (auto n = var("NODE_NAME"); n && !trim(*n).empty()) {
      node_name = trim(*n);
      sources["node_name"] = "NODE_NAME";
    }
  }
  std::string host = trim(hostname_);
  if (host.empty()) host = "unknown-host";
  if (node_name.empty() && !flags_.node_name) {
    node_name = host;
    sources["node_name"] = "hostname";
  }

  std::optional<JobIdentity> job = job_identity(host);
  // A rank `ncclsmoke launch` started: its world is in flags, but what launch read it from (a
  // PyTorchJob's or TrainJob's PET_*, or nothing) is the world's source, and the job id's origin
  // is launch's (our own NCCLSMOKE_LAUNCH_* knobs, set only by launch_command.cpp).
  if (!env_launchers_) {
    if (auto s = var("NCCLSMOKE_LAUNCH_SOURCE"))
      if (auto parsed = results::parse_world_source(trim(*s)); parsed && rank_raw &&
                                                                 rank_raw->from_flag)
        source = *parsed;
    if (auto s = var("NCCLSMOKE_LAUNCH_JOB_ID_SOURCE");
        s && job && (job->source == "--job-id" || job->source == "NCCLSMOKE_JOB_ID") &&
        !trim(*s).empty() && s->size() <= 64)
      job->source = fmt::format("launch: {}", shown(trim(*s)));
  }

  WorldResult result;
  bool has_error = false;
  for (const auto& p : problems_)
    if (p.blocking()) has_error = true;
  // Built whenever the rank was readable: the whole world when nothing blocks, else the partial
  // world a config error keeps (WorldResult::partial), so the verdict still says who failed.
  if (rank && !rank_is_pod_index_) {
    World w;
    w.rank = *rank;
    w.world_size = world_size.value_or(0);
    w.local_rank = local_rank;
    w.master_addr = master_addr;
    w.master_port = master_port;
    w.node_name = node_name;
    w.hostname = host;
    w.source = source;
    w.sources_by_field = std::move(sources);
    if (job) {
      w.job_id = job->id;
      w.job_id_source = job->source;
    }
    w.restart_count = restart_count;
    w.external_store = external_store;
    w.store_host = store_host;
    w.store_port = store_port;
    w.store_source = store_source;
    if (!has_error && world_size)
      result.world = std::move(w);
    else
      result.partial = std::move(w);
  }
  result.findings = std::move(problems_);
  return result;
}

}  // namespace

std::string local_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

WorldResult discover_world(const WorldFlags& flags, const Environment& env) {
  return discover_world(flags, env, local_hostname());
}

WorldResult discover_world(const WorldFlags& flags, const Environment& env,
                           const std::string& hostname) {
  try {
    return Discovery(flags, env, hostname).run();
  } catch (const std::exception& e) {
    // Only allocation failure can get here; still answer with a problem, not a crash.
    ConfigProblem p;
    p.kind = ConfigProblem::Kind::invalid;
    p.message = fmt::format("world discovery failed: {}", e.what());
    p.hint = "report this as a bug in ncclsmoke";
    WorldResult r;
    r.findings.push_back(std::move(p));
    return r;
  }
}

uint16_t slurm_derived_port(uint64_t job_id, std::optional<uint64_t> step_id) {
  // (job*4 + step%4) % 10000 without overflow: 4 * 2500 = 10000.
  const uint64_t offset = ((job_id % 2500) * 4 + step_id.value_or(0) % 4) % kSlurmPortSpan;
  return static_cast<uint16_t>(kSlurmPortBase + offset);
}

std::string describe(const World& w) {
  using rendezvous::join_host_port;
  std::string line = fmt::format("rank {}/{} (local {}) on {} (host {}), master {}, from {}",
                                 w.rank, w.world_size, w.local_rank, w.node_name, w.hostname,
                                 join_host_port(w.master_addr, w.master_port), w.source);
  if (w.external_store)
    line += fmt::format(", store {} (external, {})", join_host_port(w.store_host, w.store_port),
                        w.store_source);
  if (!w.job_id.empty()) line += fmt::format(", job {}", w.job_id);
  return line;
}

results::ProbeContext probe_context(const World& world) {
  return {.rank = world.rank,
          .world_size = world.world_size,
          .host = world.hostname,
          .master_addr = world.master_addr,
          .master_port = static_cast<std::uint16_t>(world.master_port),
          .external_store = world.external_store,
          .pid = ::getpid()};
}

}  // namespace ncclsmoke::harness
