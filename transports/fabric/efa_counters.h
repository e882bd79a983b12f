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
#include <optional>
#include <string>

namespace ncclsmoke::transports {

// "<device>/<port>" -> counter name -> value.
using CounterSnapshot = std::map<std::string, std::map<std::string, uint64_t>>;

CounterSnapshot read_hw_counters(const std::string& root);

// {"<device>/<port>": {"<name>": after - before, ...}, ...} for counters present in both
// snapshots. A counter that went backwards (device reset) reports its value after the reset.
nlohmann::json counter_deltas(const CounterSnapshot& before, const CounterSnapshot& after);

// What a port can carry, as the kernel's RDMA core prints it in <root>/<device>/ports/<port>/rate
// (drivers/infiniband/core/sysfs.c rate_show: "<N>[.5] Gb/sec (<W>X <speed>)", e.g.
// "100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)"): the Gb/s, nullopt for any other text.
std::optional<double> parse_port_rate(const std::string& text);
// "<device>/<port>" -> Gb/s for every port with a readable rate under `root`.
std::map<std::string, double> read_port_rates(const std::string& root);
// The rate this run's bytes had to live with: the fastest port whose counters moved (tx_bytes or
// rx_bytes in `deltas`, counter_deltas' form), else the fastest port present (`carried` false: no
// device carried the bytes, the fabric fell back to another path). nullopt: no port has a rate.
struct PortRate {
  double gbps = 0;
  std::string port;  // "<device>/<port>"
  bool carried = false;
};
std::optional<PortRate> run_port_rate(const std::map<std::string, double>& rates,
                                      const nlohmann::json& deltas);

}  // namespace ncclsmoke::transports
