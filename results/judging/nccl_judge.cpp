#include "results/judging/nccl_judge.h"

#include <cctype>
#include <vector>

#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::results {
namespace {

std::string str_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The rank the network report is from: its subject, "{reporter}" in the message.
Subject reporter(int rank, const std::string& host, std::string item) {
  return reported_by(rendezvous::RankRef{rank, host}, transport_phase_name("nccl"), std::move(item),
                     "nccl");
}

// Copies the evidence-worthy fields of `observed` (log lines, plugin lines, warnings...).
nlohmann::json evidence_of(const nlohmann::json& expected, const nlohmann::json& observed) {
  nlohmann::json e = {{"source", kNcclNetCheckSource},
                      {"expected", expected.is_null() ? nlohmann::json() : expected}};
  if (!observed.is_object()) {
    e["observed"] = nullptr;
    return e;
  }
  e["observed"] = observed.contains("network") ? observed["network"] : nlohmann::json();
  for (const char* k : {"networks", "gdr", "net_channels", "gdr_channels", "net_devices", "plugin",
                        "ofi_provider", "ofi_fabric", "nccl_version", "plugin_lines", "log_lines",
                        "warnings", "files", "missing_files"}) {
    if (observed.contains(k)) e[k] = observed[k];
  }
  return e;
}

}  // namespace

bool is_nccl_net_check(const Finding& f) { return f.origin == FindingOrigin::nccl_net_check; }

std::string canonical_nccl_network(std::string_view name) {
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front()))) name.remove_prefix(1);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.remove_suffix(1);
  std::string s(name);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "aws libfabric" || s == "ofi" || s == "aws-ofi-nccl") return "libfabric";
  return s;
}

bool same_nccl_network(std::string_view a, std::string_view b) {
  return canonical_nccl_network(a) == canonical_nccl_network(b);
}

std::optional<Finding> judge_nccl_network(const nlohmann::json& expected,
                                          const nlohmann::json& observed, int rank,
                                          const std::string& host) {
  std::vector<int> ranks;
  if (rank >= 0) ranks.push_back(rank);
  std::vector<std::string> hosts;
  if (!host.empty()) hosts.push_back(host);
  std::string want = str_field(expected, "network");
  std::string policy = str_field(expected, "policy");

  std::vector<std::string> seen;
  if (observed.is_object() && observed.contains("networks") && observed["networks"].is_array()) {
    for (const auto& n : observed["networks"])
      if (n.is_string() && !n.get<std::string>().empty()) seen.push_back(n.get<std::string>());
  }
  if (seen.empty()) {
    if (auto n = str_field(observed, "network"); !n.empty()) seen.push_back(n);
  }
  bool found = observed.is_object() && observed.value("found", false);

  if (seen.empty()) {
    std::string why = !observed.is_object() ? "no NCCL log was read"
                      : !found ? "NCCL's log is missing or holds no NCCL lines"
                               : "NCCL's log names no network (is NCCL_DEBUG_SUBSYS missing INIT,NET?)";
    std::string msg = "NCCL on {reporter}: " + why +
                      ", so what carried the bytes is unknown" +
                      (want.empty() ? std::string() : " (expected " + want + ")");
    auto f = make_finding_about(Code::RESULTS_MISSING, reporter(rank, host, "network"), msg, ranks,
                                hosts);
    f.evidence = evidence_of(expected, observed);
    f.origin = FindingOrigin::nccl_net_check;
    return f;
  }
  if (want.empty()) return std::nullopt;

  std::vector<std::string> wrong;
  for (const auto& n : seen)
    if (!same_nccl_network(n, want)) wrong.push_back(n);
  if (wrong.empty()) return std::nullopt;

  std::string observed_text;
  for (const auto& n : seen) observed_text += (observed_text.empty() ? "" : ", ") + n;
  std::string msg = "NCCL on {reporter} used " + observed_text + ", expected " + want;
  if (policy == "pin")
    msg += " although NCCL_NET pinned it (NCCL should have failed init instead)";
  else
    msg += " (policy observe: what training gets)";
  auto f = make_finding_about(Code::SILENT_FALLBACK, reporter(rank, host, "network"), msg, ranks,
                              hosts, {{"expected", want}, {"observed", observed_text}});
  f.evidence = evidence_of(expected, observed);
  f.origin = FindingOrigin::nccl_net_check;
  return f;
}

}  // namespace ncclsmoke::results
