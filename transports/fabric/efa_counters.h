#pragma once
// Hardware-counter snapshots of RDMA devices (EFA, InfiniBand), read from sysfs:
//   <root>/<device>/ports/<port>/hw_counters/<name>   one decimal number per file
// The fabric transport snapshots them at open() and at identify(); the delta is the evidence that
// the device, not a fallback path, carried the bytes (fabtests prove it the same way). Reading is
// pure and forgiving so tests can point it at a fake tree: a missing root gives an empty snapshot,
// unreadable or non-numeric files are skipped, nothing throws.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace ncclsmoke::transports {

// "<device>/<port>" -> counter name -> value.
using CounterSnapshot = std::map<std::string, std::map<std::string, uint64_t>>;

CounterSnapshot read_hw_counters(const std::string& root);

// {"<device>/<port>": {"<name>": after - before, ...}, ...} for counters present in both
// snapshots. A counter that went backwards (device reset) reports its value after the reset.
nlohmann::json counter_deltas(const CounterSnapshot& before, const CounterSnapshot& after);

}  // namespace ncclsmoke::transports
