#pragma once
// The verdict rules: from findings and phase statuses to pass / degraded / fail / inconclusive,
// and from the verdict to the process exit code. Fail closed: anything unknown, skipped or missing
// that was required can never come out as "pass".
//
// Precedence: fail > inconclusive > degraded > pass. Inconclusive outranks degraded because
// "degraded" tells a gate the path works but is slow; when a required part was not checked we
// cannot claim even that.
#include <string>
#include <vector>

#include "results/verdict/ordering.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// What one finding does to the verdict: fail | inconclusive | degraded, or pass for "no effect".
//   severity error   -> fail
//   severity warning -> the code's table entry (finding_codes.h): degraded for
//                       BANDWIDTH_REGRESSION / STRAGGLER, inconclusive for BASELINE_MISSING /
//                       RESULTS_MISSING; degraded for codes not in the table
//   severity info    -> pass (no effect)
Outcome finding_effect(const Finding& f);

// What one phase does: fail -> fail; degraded -> degraded; inconclusive -> inconclusive;
// skipped / not_run -> inconclusive when required, else pass (no effect); pass -> pass.
Outcome phase_effect(const Phase& p);

// The overall verdict. `required_phases` names phases that must be present: one that is absent
// from `phases` makes the run inconclusive. No phases at all is inconclusive (nothing was checked).
Outcome overall_verdict(const std::vector<Finding>& findings, const std::vector<Phase>& phases,
                        const std::vector<std::string>& required_phases = {});

// overall_verdict() over a whole document, plus: a rank whose status is not "joined" and that no
// error/warning finding names makes the run at least inconclusive (a silent hole is never a pass).
Outcome verdict_for(const Verdict& v, const std::vector<std::string>& required_phases = {});

// Sets v.verdict and v.exit_code from verdict_for().
void apply_verdict(Verdict& v, const std::vector<std::string>& required_phases = {});


}  // namespace ncclsmoke::results
