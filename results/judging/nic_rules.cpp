#include "results/judging/nic_rules.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {

namespace {

using nlohmann::json;

// Hosts in a message: the first few, then how many more.
constexpr std::size_t kNicHostsShown = 4;

std::string counters_text(const std::map<std::string, std::uint64_t>& moved) {
  std::vector<std::string> parts;
  for (const auto& [name, d] : moved) parts.push_back(fmt::format("{} +{}", name, d));
  return fmt::format("{}", fmt::join(parts, ", "));
}

bool link_went_down(const std::map<std::string, std::uint64_t>& moved) {
  return moved.count("link_downed") > 0 || moved.count("link_error_recovery") > 0;
}

bool drops_only(const std::map<std::string, std::uint64_t>& moved) {
  for (const auto& [name, d] : moved)
    if (name != "rx_dropped" && name != "tx_dropped") return false;
  return true;
}

Finding device_finding(const rendezvous::RankRef& self, const std::string& what,
                       const std::string& device, const std::map<std::string, std::uint64_t>& moved,
                       double interval_s, Severity severity) {
  Finding f = make_finding_about(
      Code::NIC_ERRORS, reported_by(self, "", "nic " + device),
      fmt::format("{}'s error counters moved during the run's {:.1f} s on {{reporter}}: {}", what,
                  interval_s, counters_text(moved)),
      {self.rank}, {std::string(self.host)},
      {{"host", std::string(self.host)}, {"device", device}});
  f.severity = severity;
  f.evidence = {{"device", device}, {"moved", moved}, {"interval_s", interval_s}};
  return f;
}

bool is_nic_code(const AnyCode& c) { return c == Code::NIC_ERRORS || c == Code::NIC_DOWN; }

}  // namespace

std::vector<Finding> nic_error_findings(const facts::NicFacts& nics,
                                        const rendezvous::RankRef& self) {
  std::vector<Finding> out;
  if (!nics.read) return out;
  for (const auto& p : nics.rdma_ports) {
    if (p.moved.empty()) continue;
    out.push_back(device_finding(self, fmt::format("RDMA port {} port {}", p.device, p.port),
                                 p.key(), p.moved, nics.interval_s,
                                 link_went_down(p.moved) ? Severity::error : Severity::warning));
  }
  for (const auto& i : nics.interfaces) {
    if (i.moved.empty()) continue;
    out.push_back(device_finding(self, fmt::format("interface {}", i.name), i.name, i.moved,
                                 nics.interval_s,
                                 drops_only(i.moved) ? Severity::info : Severity::warning));
  }
  return out;
}

std::vector<HostPorts> host_ports(const std::vector<Verdict>& views) {
  std::vector<HostPorts> out;
  std::set<std::string> nodes;
  for (const auto& v : views) {
    if (v.reporting_rank < 0 || !v.nics.read || v.nics.rdma_ports.empty()) continue;
    std::string host, node;
    for (const auto& r : v.ranks)
      if (r.rank == v.reporting_rank) {
        host = r.host;
        node = r.node.empty() ? r.host : r.node;
        break;
      }
    if (node.empty() || !nodes.insert(node).second) continue;
    out.push_back({host, node, v.reporting_rank, v.nics.rdma_ports});
  }
  return out;
}

std::vector<Finding> judge_nic_ports(const std::vector<HostPorts>& hosts) {
  std::vector<Finding> out;
  if (hosts.size() < 2) return out;
  std::map<std::string, std::vector<std::string>> active_on;  // port -> hosts where ACTIVE
  for (const auto& h : hosts)
    for (const auto& p : h.ports)
      if (p.state == "ACTIVE") active_on[p.key()].push_back(h.node);
  for (const auto& h : hosts) {
    std::vector<const facts::RdmaPortFacts*> down;
    for (const auto& p : h.ports)
      if (p.state != "ACTIVE" && active_on.count(p.key())) down.push_back(&p);
    if (down.empty()) continue;
    std::vector<std::string> parts, keys;
    json ports = json::array();
    for (const auto* p : down) {
      const auto& on = active_on[p->key()];
      parts.push_back(fmt::format("{} is {}{} (ACTIVE on {})", p->key(),
                                  p->state.empty() ? "in no readable state" : p->state,
                                  p->phys_state.empty() ? "" : ", " + p->phys_state,
                                  host_names(on, kNicHostsShown)));
      keys.push_back(p->key());
      ports.push_back({{"port", p->key()},
                       {"state", p->state},
                       {"phys_state", p->phys_state},
                       {"active_on", on.size()}});
    }
    const rendezvous::RankRef self{h.rank, h.host};
    Finding f = make_finding_about(
        Code::NIC_DOWN, reported_by(self, "", "nic ports"),
        fmt::format("{{reporter}} has {} RDMA port{} down that other nodes have up: {}",
                    down.size(), down.size() == 1 ? "" : "s", fmt::join(parts, "; ")),
        {h.rank}, {h.host},
        {{"host", h.host},
         {"port", fmt::format("{}", fmt::join(keys, ", "))},
         {"device", down.front()->device}});
    f.evidence = {{"ports", ports}, {"hosts_compared", hosts.size()}};
    out.push_back(std::move(f));
  }
  return out;
}

void attach_nic_evidence(std::vector<Finding>& findings) {
  std::map<std::string, json> of_host;  // host -> what its devices said
  for (const auto& f : findings) {
    if (!is_nic_code(f.code) || f.severity == Severity::info || f.hosts.empty()) continue;
    json& e = of_host[f.hosts.front()];
    if (!e.is_array()) e = json::array();
    e.push_back({{"code", std::string(f.code.str())}, {"message", f.message}});
  }
  if (of_host.empty()) return;
  const std::set<Code> explained = {Code::SLOW_LINK, Code::SLOW_HOST, Code::STRAGGLER,
                                    Code::MTU_MISMATCH, Code::TRANSPORT_TIMEOUT,
                                    Code::PEER_STALLED, Code::BELOW_LINE_RATE};
  for (auto& f : findings) {
    if (!f.code.known() || !explained.count(f.code.code())) continue;
    std::set<std::string> about(f.hosts.begin(), f.hosts.end());
    if (!f.subject.peer_host.empty()) about.insert(f.subject.peer_host);
    json nic = json::array();
    for (const auto& h : about)
      if (auto it = of_host.find(h); it != of_host.end())
        for (const auto& e : it->second) nic.push_back({{"host", h}, {"code", e["code"]}, {"message", e["message"]}});
    if (nic.empty()) continue;
    if (!f.evidence.is_object()) f.evidence = json::object();
    f.evidence["nic"] = std::move(nic);
  }
}

}  // namespace ncclsmoke::results
