#pragma once
// The transports phase of a run: for each requested backend (in the order given), open it under
// its deadline, run the shared sweep, ask it what carried the bytes, and turn what happened into
// verdict rows, identities, phases and findings. A backend that cannot run here is "skipped"
// with the reason (TRANSPORT_UNAVAILABLE) — never "pass".
#include <map>
#include <string>
#include <vector>

#include "rendezvous/store.h"
#include "results/verdict.h"
#include "transports/sweep.h"

namespace ncclsmoke::harness {

struct TransportPhaseOptions {
  std::vector<std::string> transports;  // names, e.g. {"socket", "fabric"}
  transports::SweepOptions sweep;
  double timeout_s = 60;                // per transport: open + sweep
  std::map<std::string, std::string> backend_options;  // "socket.ifname" -> ...
};

struct TransportPhaseInput {
  int rank = 0;
  int world_size = 1;
  std::string host;
  std::map<int, std::string> hosts;  // rank -> host
  std::string local_address;
  rendezvous::Store* store = nullptr;  // the run's store; each transport gets its own prefix
};

struct TransportPhaseOutput {
  std::vector<results::Phase> phases;
  std::vector<results::TransportRow> rows;
  std::vector<results::TransportIdentity> identities;
  std::vector<results::Finding> findings;
};

TransportPhaseOutput run_transports(const TransportPhaseInput& in, const TransportPhaseOptions& o);

// "64M", "1G", "4096", "512K" -> bytes (binary suffixes, as nccl-tests reads them).
bool parse_size(const std::string& text, std::size_t& bytes);

// nccl-tests-style table of the world rows of one verdict, one block per transport.
std::string transport_table(const results::Verdict& v);

}  // namespace ncclsmoke::harness
