#pragma once
// The node's network devices over the run (facts/node.h NicFacts), judged by
// results/judging/node_rules.h (NIC_DOWN, NIC_ERRORS):
//   <root>/class/net/<if>/{operstate,carrier,speed,mtu}, statistics/<counter>
//       (Linux Documentation/ABI/testing/sysfs-class-net, sysfs-class-net-statistics)
//   <root>/class/infiniband/<dev>/ports/<n>/{state,phys_state,link_layer,rate},
//       counters/<counter>, hw_counters/<counter>
//       (Linux Documentation/ABI/stable/sysfs-class-infiniband; EFA's hw_counters are the EFA
//       driver's, drivers/infiniband/hw/efa)
// A rank reads a snapshot at the start of the run and another at its end; the facts are the state
// at the end and the deltas of the error counters between them. Every read is bounded (at most
// kMaxInterfaces interfaces, kMaxRdmaPorts ports) and forgiving (node/sysfs.h).
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "facts/node.h"

namespace ncclsmoke::node {

inline constexpr std::size_t kMaxInterfaces = 512;
inline constexpr std::size_t kMaxRdmaPorts = 128;

// One reading of one device's counters and state.
struct DeviceSample {
  std::map<std::string, std::uint64_t> counters;
  std::map<std::string, std::string> text;  // operstate, carrier, speed, mtu / state, ...
};
struct NicSnapshot {
  bool read = false;  // the root's class/net or class/infiniband could be listed
  std::string root;
  std::chrono::steady_clock::time_point at{};
  std::map<std::string, DeviceSample> interfaces;  // by interface name
  std::map<std::string, DeviceSample> rdma_ports;  // by "<device>/<port>"
};

// The Ethernet counters that count a fault (statistics/): errors, drops, CRC, FIFO, missed.
bool interface_error_counter(const std::string& name);
// The RDMA counters that count a fault: the InfiniBand port counters for the physical link and
// the packets it refused (symbol_error, link_downed, link_error_recovery, port_rcv_errors, ...),
// mlx5's transport retries that ran out (rnr_nak_retry_err, local_ack_timeout_err, ...), and
// EFA's drops and unresponsive peers (rx_drops, unresponsive_remote_events, ...).
bool rdma_error_counter(const std::string& name);

// Reads the interfaces named in `only` (every interface when null) and every RDMA port under
// `root`.
NicSnapshot read_nic_snapshot(const std::string& root,
                              const std::vector<std::string>* only = nullptr);

// The state at `after` and the deltas since `before`, for `interfaces` (the one holding the
// rank's address: rendezvous/net.h interface_of) and every RDMA port in both snapshots. A counter
// that went backwards (a device reset) reports its value after the reset.
facts::NicFacts nic_facts(const NicSnapshot& before, const NicSnapshot& after,
                          const std::vector<std::string>& interfaces);

}  // namespace ncclsmoke::node
