#include "results/verdict/ordering.h"

namespace ncclsmoke::results {

int verdict_rank(Outcome verdict) {
  switch (verdict) {
    case Outcome::pass: return 0;
    case Outcome::degraded: return 1;
    case Outcome::inconclusive: return 2;
    case Outcome::fail: return 3;
  }
  return 3;
}

int phase_status_rank(PhaseStatus status) {
  switch (status) {
    case PhaseStatus::pass: return 0;
    case PhaseStatus::skipped: return 1;
    case PhaseStatus::not_run: return 2;
    case PhaseStatus::degraded: return 3;
    case PhaseStatus::inconclusive: return 4;
    case PhaseStatus::fail: return 5;
  }
  return 6;
}

int severity_rank(Severity severity) {
  switch (severity) {
    case Severity::info: return 0;
    case Severity::warning: return 1;
    case Severity::error: return 2;
  }
  return 3;
}

int rank_status_rank(RankStatus status) {
  switch (status) {
    case RankStatus::joined: return 0;
    case RankStatus::missing: return 1;
    case RankStatus::lost: return 2;
    case RankStatus::failed: return 3;
  }
  return 4;
}

int exit_code_for(Outcome verdict) {
  switch (verdict) {
    case Outcome::pass: return 0;
    case Outcome::degraded: return 3;
    case Outcome::inconclusive: return 4;
    case Outcome::fail: return 1;
  }
  return 1;
}

}  // namespace ncclsmoke::results
