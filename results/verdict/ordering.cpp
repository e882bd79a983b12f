#include "results/verdict/ordering.h"

namespace ncclsmoke::results {

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

int exit_code_for(const std::string& verdict) {
  if (verdict == "pass") return 0;
  if (verdict == "degraded") return 3;
  if (verdict == "inconclusive") return 4;
  return 1;
}

}  // namespace ncclsmoke::results
