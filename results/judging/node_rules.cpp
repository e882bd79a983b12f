#include "results/judging/node_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {

namespace {

using nlohmann::json;

struct XidInfo {
  int xid;
  const char* meaning;
  bool replace;
};
// NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors), the Xids a training cluster meets.
constexpr XidInfo kXids[] = {
    {13, "a graphics engine exception: usually the application's (an illegal memory access)", false},
    {31, "a GPU memory page fault: usually the application's", false},
    {43, "the GPU stopped processing: usually the application's", false},
    {45, "a preemptive cleanup after an earlier fault", false},
    {48, "a double-bit ECC error: the GPU needs a reset, and replacing when it recurs", true},
    {61, "an internal micro-controller breakpoint", false},
    {62, "an internal micro-controller halt", false},
    {63, "a memory row remapped (ECC): a reset applies it", false},
    {64, "a row remapping failure: the GPU needs replacing", true},
    {74, "an NVLink error: the GPU or its NVLink needs a reset or replacing", true},
    {79, "the GPU has fallen off the bus: it needs a reset or replacing", true},
    {92, "a high single-bit ECC error rate", false},
    {94, "a contained ECC error: the application was stopped, the GPU goes on", false},
    {95, "an uncontained ECC error: the GPU needs a reset", true},
};

const XidInfo* info_of(int xid) {
  for (const auto& x : kXids)
    if (x.xid == xid) return &x;
  return nullptr;
}

}  // namespace

std::string xid_meaning(int xid) {
  const auto* x = info_of(xid);
  return x ? x->meaning : "";
}

bool xid_replaces_gpu(int xid) {
  const auto* x = info_of(xid);
  return x && x->replace;
}

std::vector<Finding> xid_findings(const KernelLogFacts& log, const rendezvous::RankRef& self) {
  std::vector<Finding> out;
  if (!log.read) return out;
  // (xid, gpu) -> its lines, in the log's order.
  std::map<std::pair<int, std::string>, std::vector<const XidEvent*>> by;
  for (const auto& e : log.xids) by[{e.xid, e.pci}].push_back(&e);
  for (const auto& [key, events] : by) {
    const auto& [xid, pci] = key;
    const XidEvent& last = *events.back();
    const std::string meaning = xid_meaning(xid);
    const std::string when =
        last.at_s >= 0 ? fmt::format(", last {:.0f} s after boot", last.at_s) : std::string();
    Subject s = reported_by(self, "", fmt::format("xid {} PCI:{}", xid, pci));
    Finding f = make_finding_about(
        Code::GPU_XID, s,
        fmt::format("the kernel log of {{reporter}} has NVRM Xid {} on the GPU at PCI:{} ({}), "
                    "{} time{}{}: {}",
                    xid, pci, meaning.empty() ? std::string("see NVIDIA's Xid catalogue") : meaning,
                    events.size(), events.size() == 1 ? "" : "s", when, last.text),
        {self.rank}, {std::string(self.host)},
        {{"xid", std::to_string(xid)}, {"pci", pci}, {"host", std::string(self.host)}});
    if (!xid_replaces_gpu(xid)) f.severity = Severity::warning;
    json lines = json::array();
    for (const auto* e : events) lines.push_back(e->text);
    f.evidence = {{"xid", xid},
                  {"pci", pci},
                  {"meaning", meaning},
                  {"count", events.size()},
                  {"last_at_s", last.at_s},
                  {"lines", lines},
                  {"source", log.source},
                  {"replace_gpu", xid_replaces_gpu(xid)}};
    if (log.truncated) f.evidence["log_truncated"] = true;
    out.push_back(std::move(f));
  }
  return out;
}

namespace {

// NVML's clocks event reasons that mean the GPU is held down by something wrong now.
struct ClockReason {
  long long bit;
  const char* text;
};
constexpr ClockReason kClockReasons[] = {{0x8, "a hardware slowdown"},
                                         {0x20, "software thermal slowdown"},
                                         {0x40, "hardware thermal slowdown"},
                                         {0x80, "the hardware power brake"}};

}  // namespace

std::vector<Finding> gpu_health_findings(const facts::GpuHealthFacts& gpus,
                                         const rendezvous::RankRef& self) {
  std::vector<Finding> out;
  const std::string host(self.host);
  if (!gpus.read) {
    if (gpus.init_error > 0 && gpus.init_error != facts::kNvmlDriverNotLoaded &&
        gpus.init_error != facts::kNvmlLibraryNotFound &&
        gpus.init_error != facts::kNvmlNoPermission) {
      Finding f = make_finding_about(
          Code::GPU_HEALTH, reported_by(self, "", "nvml"),
          fmt::format("NVML could not start on {{reporter}} ({}): the GPUs' health is not known, "
                      "and CUDA on this node is likely broken too",
                      gpus.why_not),
          {self.rank}, {host}, {{"host", host}, {"gpu", "(all)"}});
      f.severity = Severity::warning;
      f.evidence = {{"init_error", gpus.init_error}, {"why", gpus.why_not}, {"library", gpus.library}};
      out.push_back(std::move(f));
    }
    return out;
  }
  for (const auto& g : gpus.gpus) {
    std::vector<std::string> errors, warnings;
    if (!g.error.empty()) errors.push_back("NVML cannot open it: " + g.error);
    if (g.ecc_uncorrected_volatile > 0)
      errors.push_back(fmt::format("{} uncorrected ECC error{} since the driver loaded",
                                   g.ecc_uncorrected_volatile,
                                   g.ecc_uncorrected_volatile == 1 ? "" : "s"));
    if (g.remap_failed == 1) errors.push_back("a row remapping failed: it needs replacing");
    if (g.remap_pending == 1) errors.push_back("a row remap waits for a GPU reset");
    if (g.retired_pages_pending == 1) errors.push_back("a page retirement waits for a GPU reset");
    if (g.pcie_width > 0 && g.pcie_width_max > 0 && g.pcie_width < g.pcie_width_max)
      warnings.push_back(fmt::format("its PCIe link runs at x{} of x{}", g.pcie_width,
                                     g.pcie_width_max));
    if (g.clock_event_reasons > 0)
      for (const auto& r : kClockReasons)
        if (g.clock_event_reasons & r.bit)
          warnings.push_back(fmt::format("its clocks are held down by {}", r.text));
    if (errors.empty() && warnings.empty()) continue;
    std::vector<std::string> all = errors;
    all.insert(all.end(), warnings.begin(), warnings.end());
    const std::string gpu = fmt::format("{}{}", g.index,
                                        g.pci_bus_id.empty() ? "" : " (PCI:" + g.pci_bus_id + ")");
    Finding f = make_finding_about(
        Code::GPU_HEALTH, reported_by(self, "", fmt::format("gpu {} {}", g.index, g.uuid)),
        fmt::format("GPU {} on {{reporter}}: {}", gpu, fmt::join(all, "; ")), {self.rank}, {host},
        {{"host", host}, {"gpu", gpu}});
    f.severity = errors.empty() ? Severity::warning : Severity::error;
    f.evidence = {{"gpu", g.index},
                  {"uuid", g.uuid},
                  {"name", g.name},
                  {"pci_bus_id", g.pci_bus_id},
                  {"problems", all},
                  {"ecc_uncorrected_volatile", g.ecc_uncorrected_volatile},
                  {"remap_pending", g.remap_pending},
                  {"remap_failed", g.remap_failed},
                  {"pcie_width", g.pcie_width},
                  {"pcie_width_max", g.pcie_width_max},
                  {"clock_event_reasons", g.clock_event_reasons},
                  {"driver_version", gpus.driver_version}};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> judge_gpu_counts(const std::vector<Verdict>& views) {
  std::vector<Finding> out;
  struct NodeGpus {
    std::string host, node;
    int rank;
    std::size_t count;
  };
  std::vector<NodeGpus> nodes;
  std::set<std::string> seen;
  for (const auto& v : views) {
    if (v.reporting_rank < 0 || !v.gpus.read) continue;
    for (const auto& r : v.ranks)
      if (r.rank == v.reporting_rank) {
        const std::string node = r.node.empty() ? r.host : r.node;
        if (!node.empty() && seen.insert(node).second)
          nodes.push_back({r.host, node, v.reporting_rank, v.gpus.gpus.size()});
        break;
      }
  }
  if (nodes.size() < 2) return out;
  std::map<std::size_t, std::size_t> nodes_with;  // GPU count -> nodes
  for (const auto& n : nodes) ++nodes_with[n.count];
  std::size_t usual = 0, most = 0;
  for (const auto& [count, n] : nodes_with)
    if (n >= most) {
      usual = count;
      most = n;
    }
  for (const auto& n : nodes) {
    if (n.count >= usual) continue;
    Finding f = make_finding_about(
        Code::GPU_HEALTH, reported_by({n.rank, n.host}, "", "gpu count"),
        fmt::format("NVML on {{reporter}} lists {} GPU{}; {} of the {} nodes list {}: a GPU "
                    "fell off the bus or was disabled",
                    n.count, n.count == 1 ? "" : "s", most, nodes.size(), usual),
        {n.rank}, {n.host}, {{"host", n.host}, {"gpu", "(missing)"}});
    f.evidence = {{"gpus", n.count}, {"usual", usual}, {"nodes_with_usual", most},
                  {"nodes", nodes.size()}};
    out.push_back(std::move(f));
  }
  return out;
}

void explain_by_node_faults(std::vector<Finding>& findings) {
  // host -> its first node fault that is an error: what it is, and its code.
  std::map<std::string, std::pair<std::string, std::string>> fault_of_host;
  for (const auto& f : findings) {
    if (f.severity != Severity::error || !f.code.known()) continue;
    const char* what = f.code == Code::GPU_XID || f.code == Code::GPU_HEALTH ? "GPU fault"
                       : f.code == Code::NIC_DOWN   ? "RDMA port down"
                       : f.code == Code::NIC_ERRORS ? "link going down"
                                                    : nullptr;
    if (!what) continue;
    for (const auto& h : f.hosts) fault_of_host.try_emplace(h, what, std::string(f.code.str()));
  }
  if (fault_of_host.empty()) return;
  const std::set<Code> consequences = {Code::TRANSPORT_TIMEOUT, Code::TRANSPORT_INIT_FAILED,
                                       Code::PEER_LOST, Code::PEER_STALLED, Code::STRAGGLER,
                                       Code::SLOW_HOST, Code::RESULTS_MISSING};
  for (auto& f : findings) {
    if (f.severity == Severity::info || !f.code.known() || !consequences.count(f.code.code()))
      continue;
    // The host the finding is about: its peer's where it names one, else its own hosts.
    std::vector<std::string> about;
    if (!f.subject.peer_host.empty()) about.push_back(f.subject.peer_host);
    else about = f.hosts;
    auto cause = fault_of_host.end();
    for (const auto& h : about)
      if (cause = fault_of_host.find(h); cause != fault_of_host.end()) break;
    if (cause == fault_of_host.end()) continue;
    const auto& [host, fault] = *cause;
    f.severity = Severity::info;
    wrap_message(f, fmt::format("a consequence of host {}'s {} ({}): ", host, fault.first,
                                fault.second), "");
    if (!f.evidence.is_object()) f.evidence = json::object();
    f.evidence["consequence_of_host"] = host;
  }
}

}  // namespace ncclsmoke::results
