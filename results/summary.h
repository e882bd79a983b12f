#pragma once
// The human summary printed on stdout: what an on-call engineer reads first.
//
//   ncclsmoke fail (exit 1): run 20240501T101500Z-3fa9c2d1, global, 4 ranks, 2 findings, 10.4 s
//   host-a | OK
//   host-b | ERROR: rank 1 could not reach master:29500 within 10.0 s [RENDEZVOUS_TIMEOUT]
//   (run)  | WARNING: ... [BASELINE_MISSING]
//
//   phase       status  seconds
//   rendezvous  fail      10.02
//
//   hints:
//     RENDEZVOUS_TIMEOUT: Allow TCP master:29500 from every node ...
//
// Hosts come from ranks[] (rank order) and from the findings. A finding names a host directly or
// through its ranks; it gives one line per host it names, and "(run)" when it names none. A host
// with no error/warning finding reads OK. Plain ASCII, aligned columns.
#include <string>

#include "results/verdict.h"

namespace ncclsmoke::results {

std::string human_summary(const Verdict& v);

}  // namespace ncclsmoke::results
