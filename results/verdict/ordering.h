#pragma once
// Orderings of the verdict model's enumerated values, and the exit code of a verdict. They belong
// to the model (the schema checks exit_code against verdict; merge and the report sort by them),
// not to the rules that decide a verdict (results/judging/classify.h).
#include "results/verdict/enums.h"

namespace ncclsmoke::results {

// 0 pass, 1 fail, 3 degraded, 4 inconclusive. 2 is the CLI's usage error and is not produced
// here. A verdict text that is not one of the four is 1 too (fail closed):
// exit_code_for(parse_outcome(text).value_or(Outcome::fail)).
int exit_code_for(Outcome verdict);

// Larger is worse.
int verdict_rank(Outcome verdict);            // pass 0, degraded 1, inconclusive 2, fail 3
int phase_status_rank(PhaseStatus status);    // pass < skipped < not_run < degraded
                                              //   < inconclusive < fail
int severity_rank(Severity severity);         // info < warning < error
int rank_status_rank(RankStatus status);      // joined < missing < lost < failed

}  // namespace ncclsmoke::results
