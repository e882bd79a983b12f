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

#include "transports/port_rate.h"

namespace ncclsmoke::transports {

// "<device>/<port>" -> counter name -> value.
using CounterSnapshot = std::map<std::string, std::map<std::string, uint64_t>>;

CounterSnapshot read_hw_counters(const std::string& root);

// {"<device>/<port>": {"<name>": after - before, ...}, ...} for counters present in both
// snapshots. A counter that went backwards (device reset) reports its value after the reset.
nlohmann::json counter_deltas(const CounterSnapshot& before, const CounterSnapshot& after);

// The rate this run's bytes had to live with (port_rate.h fastest_port): the ports that carried
// them are those whose tx_bytes or rx_bytes moved in `deltas` (counter_deltas' form).
std::optional<PortRate> run_port_rate(const std::map<std::string, double>& rates,
                                      const nlohmann::json& deltas);

// The device's own count of packets it sent again, for the link the rank's bytes left on: EFA's
// retrans_pkts over tx_pkts, summed over the ports whose tx_pkts moved (deltas in
// counter_deltas' form). The names are the EFA driver's (Linux drivers/infiniband/hw/efa,
// efa_com_cmd.h: efa_com_basic_stats and efa_com_network_stats); AWS documents the network
// counters (retrans_*, *_events) for Nitro v4 and later only, so nullopt when no port that sent
// packets counts retransmits (an older EFA, or a device that is not EFA).
struct DeviceRetransmits {
  std::int64_t retrans_pkts = 0;
  std::int64_t tx_pkts = 0;
};
std::optional<DeviceRetransmits> device_retransmits(const nlohmann::json& deltas);

}  // namespace ncclsmoke::transports
