#include "results/judging/classify.h"

#include <algorithm>
#include <set>

#include "results/verdict/finding_codes.h"

namespace ncclsmoke::results {

namespace {

Outcome worst_of(Outcome a, Outcome b) { return verdict_rank(a) >= verdict_rank(b) ? a : b; }

}  // namespace

Outcome finding_effect(const Finding& f) {
  switch (f.severity) {
    case Severity::info: return Outcome::pass;
    case Severity::warning: {
      const FindingCode* c = find_code(f.code);
      return c ? c->warning_effect : Outcome::degraded;
    }
    case Severity::error: return Outcome::fail;
  }
  return Outcome::fail;
}

Outcome phase_effect(const Phase& p) {
  switch (p.status) {
    case PhaseStatus::pass: return Outcome::pass;
    case PhaseStatus::degraded: return Outcome::degraded;
    case PhaseStatus::inconclusive: return Outcome::inconclusive;
    case PhaseStatus::skipped:
    case PhaseStatus::not_run: return p.required ? Outcome::inconclusive : Outcome::pass;
    case PhaseStatus::fail: return Outcome::fail;
  }
  return Outcome::fail;
}

Outcome overall_verdict(const std::vector<Finding>& findings, const std::vector<Phase>& phases,
                        const std::vector<std::string>& required_phases) {
  Outcome v = Outcome::pass;
  if (phases.empty()) v = Outcome::inconclusive;
  for (const auto& f : findings) v = worst_of(v, finding_effect(f));
  for (const auto& p : phases) v = worst_of(v, phase_effect(p));
  for (const auto& name : required_phases) {
    bool present = std::any_of(phases.begin(), phases.end(),
                               [&](const Phase& p) { return p.name == name; });
    if (!present) v = worst_of(v, Outcome::inconclusive);
  }
  return v;
}

Outcome verdict_for(const Verdict& v, const std::vector<std::string>& required_phases) {
  Outcome out = overall_verdict(v.findings, v.phases, required_phases);
  std::set<int> explained;
  for (const auto& f : v.findings) {
    if (severity_rank(f.severity) >= severity_rank(Severity::warning)) {
      explained.insert(f.ranks.begin(), f.ranks.end());
    }
  }
  for (const auto& r : v.ranks) {
    if (r.status != RankStatus::joined && !explained.count(r.rank)) {
      out = worst_of(out, Outcome::inconclusive);
    }
  }
  return out;
}

void apply_verdict(Verdict& v, const std::vector<std::string>& required_phases) {
  v.verdict = verdict_for(v, required_phases);
  v.exit_code = exit_code_for(v.verdict);
}


}  // namespace ncclsmoke::results
