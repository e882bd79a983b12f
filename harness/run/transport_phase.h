#pragma once
// The transports phase of a run, measurement only: for each requested backend (in the order
// given), open it under its deadline, run the shared sweep and ask it what carried the bytes
// (measure_transports: typed outcomes, no finding, no status). What happened is judged by
// results/judging/transport_rules.h (rows, identities, phases, findings); a backend that cannot
// run here becomes "skipped" with the reason (TRANSPORT_UNAVAILABLE) there, never "pass".
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rendezvous/peer_watch.h"
#include "rendezvous/store.h"
#include "results/verdict/verdict.h"
#include "transports/options.h"
#include "transports/sweep.h"

namespace ncclsmoke::harness {

struct TransportPhaseOptions {
  std::vector<std::string> transports;  // names, e.g. {"socket", "fabric"}
  transports::SweepOptions sweep;
  double timeout_s = 60;                // per transport: open + sweep
  // The run's own limit for its steps (RunContext::steps_deadline): each backend's deadline is
  // the earlier of this and its own timeout, so --timeout bounds the transports too.
  rendezvous::Deadline run_limit = rendezvous::Deadline::max();
  std::map<std::string, std::string> backend_options;  // "socket.ifname" -> ...
};

struct TransportPhaseInput {
  int rank = 0;
  int world_size = 1;
  std::string host;
  std::map<int, std::string> hosts;  // rank -> host
  std::string local_address;
  rendezvous::Store* store = nullptr;  // the run's store; each transport gets its own prefix
  // Optional "blame the root" hook: every wait a backend reports (TransportContext::
  // set_wait_state) as a WaitState with phase "transport:<name>" and what "<stage>: recv from"
  // (the run forwards it to the liveness watch, which tells the peers). A wait that ends in an
  // error stays set: it is where this rank stopped, so the others' chains run through it to the
  // root; a transport that completes clears it.
  std::function<void(const rendezvous::WaitState&)> set_wait_state;
  // Optional: non-empty (the reason) once the store is known frozen or dead (rank 0 hosts it and
  // the liveness watch judged rank 0 silent or lost). Every store operation of a transport then
  // fails at once with StoreError(stalled, reason) instead of waiting out its timeout, so a
  // transport's best-effort exchanges after an error ("abort/<rank>") cost nothing.
  std::function<std::string()> store_unusable;
};

// Measures only: per requested backend, one TransportOutcome (transports/sweep.h) in the order
// given: not_built, or the error it threw (TransportError or StoreError, with the stage, the
// time waited, the peer and evidence), or the sweep, identify()'s object and the backend's typed
// link stats and network report. The wait-state hook, the store guard and the test pause point
// behave as documented on TransportPhaseInput and test_pause_point.
std::vector<transports::TransportOutcome> measure_transports(const TransportPhaseInput& in,
                                                            const TransportPhaseOptions& o);

// Test-only hook (tests/harness/fault_matrix_test.py). With NCCLSMOKE_TEST_PAUSE_AT=<point> in
// its environment, a rank that reaches <point> writes "ncclsmoke: test hook: rank R stops itself
// at <point>" to stderr and stops itself with SIGSTOP (once per process), so a test can leave it
// frozen or SIGKILL it exactly there instead of guessing from timing. Points: "rendezvous" (store
// connected, before the join), "mesh" (mesh address published, before any dial), "sweep" (the
// first transport's sweep, 0.3 s into it, inside a collective), "gather" (rank 0, its own
// verdict written, before it reads anyone's). Unset or another point: nothing.
void test_pause_point(const std::string& point, int rank);

// "64M", "1G", "4096", "512K" -> bytes: the one size parser of every flag and option
// (transports/options.h: binary suffixes as nccl-tests reads them, "MB" refused).
using transports::parse_size;

}  // namespace ncclsmoke::harness
