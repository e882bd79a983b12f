#include "results/classify.h"

#include <algorithm>
#include <set>

#include "results/finding_codes.h"

namespace ncclsmoke::results {

namespace {

std::string worst_of(const std::string& a, const std::string& b) {
  return verdict_rank(a) >= verdict_rank(b) ? a : b;
}

std::string effect_to_verdict(const std::string& effect) {
  return effect == "none" ? "pass" : effect;
}

}  // namespace

int verdict_rank(const std::string& verdict) {
  if (verdict == "pass") return 0;
  if (verdict == "degraded") return 1;
  if (verdict == "inconclusive") return 2;
  return 3;  // fail, and anything unknown
}

int phase_status_rank(const std::string& status) {
  static const char* order[] = {"pass", "skipped", "not_run", "degraded", "inconclusive", "fail"};
  for (int i = 0; i < 6; ++i) {
    if (status == order[i]) return i;
  }
  return 6;
}

int severity_rank(const std::string& severity) {
  if (severity == "info") return 0;
  if (severity == "warning") return 1;
  if (severity == "error") return 2;
  return 3;
}

int rank_status_rank(const std::string& status) {
  if (status == "joined") return 0;
  if (status == "missing") return 1;
  if (status == "lost") return 2;
  if (status == "failed") return 3;
  return 4;
}

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

int exit_code_for(const std::string& verdict) {
  if (verdict == "pass") return 0;
  if (verdict == "degraded") return 3;
  if (verdict == "inconclusive") return 4;
  return 1;
}

}  // namespace ncclsmoke::results
