#pragma once
// Orderings of the verdict model's enumerated values, and the exit code of a verdict. They belong
// to the model (the schema checks exit_code against verdict; merge and the report sort by them),
// not to the rules that decide a verdict (results/judging/classify.h).
#include <string>

namespace ncclsmoke::results {

// 0 pass, 1 fail, 3 degraded, 4 inconclusive. 2 is the CLI's usage error and is not produced
// here. An unknown verdict string maps to 1 (fail closed).
int exit_code_for(const std::string& verdict);

// Larger is worse.
int verdict_rank(const std::string& verdict);        // pass 0, degraded 1, inconclusive 2, fail 3
int phase_status_rank(const std::string& status);    // pass < skipped < not_run < degraded
                                                     //   < inconclusive < fail (unknown: worst)
int severity_rank(const std::string& severity);      // info < warning < error (unknown: worst)
int rank_status_rank(const std::string& status);     // joined < missing < lost < failed

}  // namespace ncclsmoke::results
