#include "results/judging/config_skew_rule.h"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

constexpr const char* kSkewPrefixes[] = {"NCCL_", "FI_", "OFI_", "OMPI_MCA_", "UCX_"};
// What mpirun itself puts in each rank's environment for its own bookkeeping: per rank
// (ess_base_vpid, orte_ess_node_rank) or per node's daemon (orte_local_daemon_uri, the session
// directories), as Open MPI 4.1's mpirun -np 3 shows here; never the user's choice.
constexpr const char* kLauncherOwned[] = {"OMPI_MCA_ess", "OMPI_MCA_orte_", "OMPI_MCA_pmix",
                                          "OMPI_MCA_initial_wdir", "OMPI_MCA_shmem_RUNTIME_QUERY_hint"};
// With no majority and more values than this, the item is one per rank by design (a log path
// with the rank in it): one info line, not a list of every rank.
constexpr std::size_t kMaxValuesListed = 8;
// What shapes no bytes: a difference is worth a line, not a degraded run.
const std::set<std::string> kInfoItems = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
                                          "kernel"};
constexpr const char* kUnset = "(unset)";
// A message lists at most this many hosts of one value; the evidence has them all.
constexpr std::size_t kHostsInMessage = 6;

// observed[key] as text when it is a non-empty string, else "".
std::string text_of(const json& observed, const char* key) {
  if (!observed.is_object()) return {};
  auto it = observed.find(key);
  return it != observed.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void put(std::map<std::string, std::string>& into, const char* label, std::string value) {
  if (!value.empty()) into[label] = std::move(value);
}

std::string hosts_text(const std::set<std::string>& hosts) {
  return host_names({hosts.begin(), hosts.end()}, kHostsInMessage);
}

// "host gpu-7 (rank 7)", "hosts a, b (ranks 3, 5)".
std::string where(const std::set<std::string>& hosts, const std::set<int>& ranks) {
  return fmt::format("{} {} ({} {})", hosts.size() == 1 ? "host" : "hosts", hosts_text(hosts),
                     ranks.size() == 1 ? "rank" : "ranks", results::rank_list(ranks));
}

// "does not set it" / "has \"x\"", or the plural for several ranks.
std::string value_text(const std::string& v, std::size_t ranks) {
  if (v == kUnset) return ranks == 1 ? "does not set it" : "do not set it";
  return fmt::format("{} \"{}\"", ranks == 1 ? "has" : "have", v);
}

struct Holders {
  std::set<int> ranks;
  std::set<std::string> hosts;
};

// One item over the ranks that report it: the finding, or nothing when all agree.
std::optional<Finding> judge_item(const std::string& item, bool variable,
                                  const std::map<std::string, Holders>& by_value,
                                  std::size_t compared) {
  if (by_value.size() < 2) return std::nullopt;
  const std::string* majority = nullptr;
  for (const auto& [value, h] : by_value)
    if (2 * h.ranks.size() > compared) majority = &value;
  json values = json::object();
  for (const auto& [value, h] : by_value) {
    if (values.size() == kMaxValuesListed) break;
    values[value] = {{"ranks", h.ranks}, {"hosts", h.hosts}};
  }
  if (!majority && by_value.size() > kMaxValuesListed) {
    Finding f = make_finding(
        Code::CONFIG_SKEW,
        fmt::format("{}: {} different values over {} ranks, none shared by most: a setting made "
                    "per rank (if that is not meant, the values are in the evidence)",
                    item, by_value.size(), compared),
        {}, {}, {{"item", item}});
    f.severity = Severity::info;
    f.subject.item = "config " + item;
    f.evidence = {{"item", item}, {"values_total", by_value.size()}, {"values", values},
                  {"ranks_compared", compared}, {"majority", nullptr}};
    return f;
  }
  std::vector<int> ranks;
  std::set<std::string> hosts;
  std::string message;
  if (majority) {
    const auto& most = by_value.at(*majority);
    std::vector<std::string> others;
    for (const auto& [value, h] : by_value) {
      if (&value == majority) continue;
      others.push_back(fmt::format("{} {}", where(h.hosts, h.ranks), value_text(value, h.ranks.size())));
      ranks.insert(ranks.end(), h.ranks.begin(), h.ranks.end());
      hosts.insert(h.hosts.begin(), h.hosts.end());
    }
    message = fmt::format(
        "{}: {}; the other {} rank{}, on {} host{}, {}", item, fmt::join(others, "; "),
        most.ranks.size(), most.ranks.size() == 1 ? "" : "s", most.hosts.size(),
        most.hosts.size() == 1 ? "" : "s",
        *majority == kUnset ? std::string("do not set it") : fmt::format("\"{}\"", *majority));
  } else {
    std::vector<std::string> split;
    for (const auto& [value, h] : by_value)
      split.push_back(fmt::format("{} {}", where(h.hosts, h.ranks), value_text(value, h.ranks.size())));
    message = fmt::format("{}: the ranks disagree with no majority ({}); no host is named, since "
                          "none is the odd one out",
                          item, fmt::join(split, "; "));
  }
  std::sort(ranks.begin(), ranks.end());
  Finding f = make_finding(Code::CONFIG_SKEW, message, ranks,
                           std::vector<std::string>(hosts.begin(), hosts.end()), {{"item", item}});
  if (kInfoItems.count(item)) f.severity = Severity::info;
  f.subject.item = "config " + item;
  f.evidence = {{"item", item},
                {"kind", variable ? "variable" : "version"},
                {"values", values},
                {"ranks_compared", compared},
                {"majority", majority ? json(*majority) : json(nullptr)},
                {"rule", "the value more than half of the ranks that report the item have is the "
                         "majority; every other value is named (a variable unset is a value)"}};
  return f;
}

}  // namespace

bool skew_variable(const std::string& name) {
  for (const char* p : kLauncherOwned)
    if (name.rfind(p, 0) == 0) return false;
  for (const char* p : kSkewPrefixes) {
    const std::string prefix(p);
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

std::vector<RankConfig> rank_configs(const std::vector<Verdict>& views) {
  std::vector<RankConfig> out;
  std::set<int> seen;
  for (const auto& v : views) {
    if (v.reporting_rank < 0 || !seen.insert(v.reporting_rank).second) continue;
    RankConfig c;
    c.rank = v.reporting_rank;
    c.host = reporting_host(v);
    for (const auto& [name, value] : v.env)
      if (skew_variable(name)) c.variables[name] = value;
    put(c.versions, "ncclsmoke version", v.tool.version);
    if (auto k = v.versions.find("kernel"); k != v.versions.end()) put(c.versions, "kernel", k->second);
    for (const auto& id : v.identities) {
      if (id.rank != v.reporting_rank) continue;
      const json& o = id.observed;
      if (id.transport == "nccl") {
        put(c.versions, "NCCL version", text_of(o, "nccl_version"));
        put(c.versions, "CUDA driver", text_of(o, "cuda_driver"));
        put(c.versions, "CUDA runtime", text_of(o, "cuda_runtime"));
        if (o.is_object() && o.contains("nccl_log")) put(c.versions, "NCCL net plugin", text_of(o["nccl_log"], "plugin"));
      } else if (id.transport == "fabric") {
        put(c.versions, "libfabric version", text_of(o, "libfabric_version"));
        const std::string provider = text_of(o, "provider"), pv = text_of(o, "provider_version");
        put(c.versions, "libfabric provider", pv.empty() ? provider : provider + " " + pv);
      } else if (id.transport == "mpi") {
        put(c.versions, "MPI library", text_of(o, "library"));
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Finding> judge_config_skew(const std::vector<RankConfig>& ranks) {
  std::vector<Finding> out;
  if (ranks.size() < 2) return out;
  std::set<std::string> variables, versions;
  for (const auto& r : ranks) {
    for (const auto& [name, value] : r.variables) variables.insert(name);
    for (const auto& [label, value] : r.versions) versions.insert(label);
  }
  for (const auto& name : variables) {
    std::map<std::string, Holders> by_value;
    for (const auto& r : ranks) {
      auto it = r.variables.find(name);
      auto& h = by_value[it == r.variables.end() ? std::string(kUnset) : it->second];
      h.ranks.insert(r.rank);
      h.hosts.insert(r.host);
    }
    if (auto f = judge_item(name, true, by_value, ranks.size())) out.push_back(std::move(*f));
  }
  for (const auto& label : versions) {
    std::map<std::string, Holders> by_value;
    std::size_t compared = 0;
    for (const auto& r : ranks) {
      auto it = r.versions.find(label);
      if (it == r.versions.end()) continue;
      ++compared;
      auto& h = by_value[it->second];
      h.ranks.insert(r.rank);
      h.hosts.insert(r.host);
    }
    if (compared < 2) continue;
    if (auto f = judge_item(label, false, by_value, compared)) out.push_back(std::move(*f));
  }
  return out;
}

std::vector<Finding> judge_env_policy(const std::vector<Verdict>& views, const Profile& profile) {
  std::vector<Finding> out;
  if (profile.environment.empty()) return out;
  // Each rank's own view once: its env and host.
  std::vector<const Verdict*> own;
  std::set<int> seen;
  for (const auto& v : views)
    if (v.reporting_rank >= 0 && seen.insert(v.reporting_rank).second) own.push_back(&v);
  for (const auto& [name, wanted] : profile.environment) {
    std::map<std::string, Holders> off;  // what the off ranks have -> who
    for (const Verdict* v : own) {
      auto it = v->env.find(name);
      const bool ok = it != v->env.end() && (!wanted || it->second == *wanted);
      if (ok) continue;
      auto& h = off[it == v->env.end() ? std::string(kUnset) : it->second];
      h.ranks.insert(v->reporting_rank);
      h.hosts.insert(reporting_host(*v));
    }
    if (off.empty()) continue;
    const std::string want_text =
        wanted ? fmt::format("\"{}\"", *wanted) : std::string("set, to any value");
    std::vector<std::string> parts;
    std::vector<int> ranks;
    std::set<std::string> hosts;
    json values = json::object();
    for (const auto& [value, h] : off) {
      parts.push_back(fmt::format("{} {}", where(h.hosts, h.ranks), value_text(value, h.ranks.size())));
      ranks.insert(ranks.end(), h.ranks.begin(), h.ranks.end());
      hosts.insert(h.hosts.begin(), h.hosts.end());
      values[value] = {{"ranks", h.ranks}, {"hosts", h.hosts}};
    }
    std::sort(ranks.begin(), ranks.end());
    Finding f = make_finding(
        Code::ENV_POLICY,
        fmt::format("{}: the profile {} wants it {}; {}", name, profile.name, want_text,
                    fmt::join(parts, "; ")),
        ranks, std::vector<std::string>(hosts.begin(), hosts.end()),
        {{"variable", name},
         {"wanted", wanted ? *wanted : std::string("set")},
         {"profile", profile.name}});
    f.subject.item = "policy " + name;
    f.evidence = {{"variable", name},
                  {"profile", profile.name},
                  {"wanted", wanted ? json(*wanted) : json(nullptr)},
                  {"off", values},
                  {"ranks_checked", own.size()}};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace ncclsmoke::results
