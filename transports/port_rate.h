#pragma once
// What an RDMA port can carry, as the kernel's RDMA core tells it in sysfs:
//   <root>/<device>/ports/<port>/rate   e.g. "100 Gb/sec (4X EDR)"   (root: /sys/class/infiniband)
// Backends that send over such a device (fabric on EFA or verbs, NCCL over IB or EFA) report the
// rate of the port their bytes had to live with, and judging compares the bus bandwidth with it
// (BELOW_LINE_RATE, results/judging/link_rules.h). Reading is forgiving, so tests can point it at
// a fake tree: a missing root gives nothing, unreadable or odd files are skipped, nothing throws.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "node/sysfs.h"

namespace ncclsmoke::transports {

using node::parse_port_rate;
using node::sorted_subdirs;
// "<device>/<port>" -> Gb/s for every port with a readable rate under `root`.
std::map<std::string, double> read_port_rates(const std::string& root);

// The rate this run's bytes had to live with: the fastest of the ports that carried them
// (`carried` true), else the fastest port present (`carried` false: no device carried the bytes,
// they fell back to another path). nullopt: no port has a rate.
struct PortRate {
  double gbps = 0;
  std::string port;  // "<device>/<port>"
  bool carried = false;
};
std::optional<PortRate> fastest_port(const std::map<std::string, double>& rates,
                                     const std::set<std::string>& carried_by);

}  // namespace ncclsmoke::transports
