#include "results/judging/classify.h"

#include <algorithm>
#include <set>

#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {

namespace {

std::string worst_of(const std::string& a, const std::string& b) {
  return verdict_rank(a) >= verdict_rank(b) ? a : b;
}

std::string effect_to_verdict(const std::string& effect) {
  return effect == "none" ? "pass" : effect;
}

}  // namespace





std::string finding_effect(const Finding& f) {
  if (f.severity == "info") return "none";
  if (f.severity == "warning") {
    const FindingCode* c = find_code(f.code);
    return c ? std::string(c->warning_effect) : "degraded";
  }
  return "fail";  // error, and any unknown severity
}

std::string phase_effect(const Phase& p) {
  if (p.status == "pass") return "none";
  if (p.status == "degraded") return "degraded";
  if (p.status == "inconclusive") return "inconclusive";
  if (p.status == "skipped" || p.status == "not_run") return p.required ? "inconclusive" : "none";
  return "fail";  // fail, and any unknown status
}

std::string overall_verdict(const std::vector<Finding>& findings, const std::vector<Phase>& phases,
                            const std::vector<std::string>& required_phases) {
  std::string v = "pass";
  if (phases.empty()) v = "inconclusive";
  for (const auto& f : findings) v = worst_of(v, effect_to_verdict(finding_effect(f)));
  for (const auto& p : phases) v = worst_of(v, effect_to_verdict(phase_effect(p)));
  for (const auto& name : required_phases) {
    bool present = std::any_of(phases.begin(), phases.end(),
                               [&](const Phase& p) { return p.name == name; });
    if (!present) v = worst_of(v, "inconclusive");
  }
  return v;
}

std::string verdict_for(const Verdict& v, const std::vector<std::string>& required_phases) {
  std::string out = overall_verdict(v.findings, v.phases, required_phases);
  std::set<int> explained;
  for (const auto& f : v.findings) {
    if (severity_rank(f.severity) >= severity_rank("warning")) {
      explained.insert(f.ranks.begin(), f.ranks.end());
    }
  }
  for (const auto& r : v.ranks) {
    if (r.status != "joined" && !explained.count(r.rank)) out = worst_of(out, "inconclusive");
  }
  return out;
}

void apply_verdict(Verdict& v, const std::vector<std::string>& required_phases) {
  v.verdict = verdict_for(v, required_phases);
  v.exit_code = exit_code_for(v.verdict);
}


}  // namespace ncclsmoke::results
