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

void explain_by_node_faults(std::vector<Finding>& findings) {
  std::map<std::string, std::size_t> fault_of_host;  // host -> its first GPU fault (error)
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    if (f.code == Code::GPU_XID && f.severity == Severity::error)
      for (const auto& h : f.hosts) fault_of_host.try_emplace(h, i);
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
    const std::string* cause = nullptr;
    for (const auto& h : about)
      if (auto it = fault_of_host.find(h); it != fault_of_host.end()) {
        cause = &it->first;
        break;
      }
    if (!cause) continue;
    f.severity = Severity::info;
    wrap_message(f, fmt::format("a consequence of host {}'s GPU fault (GPU_XID): ", *cause), "");
    if (!f.evidence.is_object()) f.evidence = json::object();
    f.evidence["consequence_of_host"] = *cause;
  }
}

}  // namespace ncclsmoke::results
