#pragma once
// The node's network devices (facts/node.h NicFacts, read by node/nic_health.h): what they say
// about a host, beside what the transports measured between hosts.
//
// NIC_ERRORS (a rank's own view): one finding per device whose error counters moved during the
// run, with each counter's delta and the run's interval. An error when an InfiniBand link went
// down or retrained (link_downed, link_error_recovery: the link did not hold for seconds) and the
// host is a suspect; a warning for the other error counters (symbol and receive errors, retries
// that ran out, EFA's drops, an interface's errors); info when an Ethernet interface only dropped
// frames (rx_dropped counts frames the kernel had no use for, such as an unknown protocol, and
// moves on healthy hosts).
//
// NIC_DOWN (the world's views side by side): an RDMA port not ACTIVE on a host where the same port
// (device and number) is ACTIVE on another host of the job; one finding per host, an error, the
// host a suspect. A port down on every host is cabled nowhere, and names no one; with one host
// there is nothing to compare with.
//
// attach_nic_evidence: a counter that moved is evidence for the link and host findings about the
// same host (SLOW_LINK, SLOW_HOST, STRAGGLER, a transport timeout ...): their evidence gains "nic", the
// devices and deltas, so the reader of a slow link sees the symbol errors beside it.
#include <string>
#include <vector>

#include "facts/node.h"
#include "rendezvous/rank_ref.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

std::vector<Finding> nic_error_findings(const facts::NicFacts& nics,
                                        const rendezvous::RankRef& self);

// One node's RDMA ports, as the first rank of that node to post its own view read them. Nodes
// are told apart by the ranks' node name (the launcher's, or --node-name), else their host.
struct HostPorts {
  std::string host;
  std::string node;  // the node's name, else the host's
  int rank = -1;
  std::vector<facts::RdmaPortFacts> ports;
};
std::vector<HostPorts> host_ports(const std::vector<Verdict>& views);
std::vector<Finding> judge_nic_ports(const std::vector<HostPorts>& hosts);

void attach_nic_evidence(std::vector<Finding>& findings);

}  // namespace ncclsmoke::results
