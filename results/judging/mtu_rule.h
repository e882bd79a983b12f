#pragma once
// MTU_MISMATCH: the mesh's path-MTU black holes (MeshFacts::mtu_black_holes, facts_rendezvous.h;
// measured by rendezvous/mtu_probe.h) named by host.
//
// A black hole is a directed path (from, to) on which small don't-fragment datagrams cross and
// those as large as both ends' interface MTU vanish, with no ICMP answer. One bad hop near a host
// (its switch port, its bridge port) black-holes every path to and from that host, so the rule
// names hosts, not pairs: repeatedly, the host with the most black-holed paths left is named when
// those paths go to at least two different hosts (one finding per named host, its paths as the
// evidence); a host whose paths all go to one other host is a link, and the finding names both
// ends. When more than half the run's hosts would be named (a fabric-wide MTU smaller than the
// hosts'), one finding names them all instead of calling each one the culprit.
//
// Each finding: severity error (the table's), layer mesh; the message names the host(s), the MTU
// the interfaces claim and the largest packet that crossed; the hint is the table's with
// {local_mtu}, {path_mtu}, {hosts}; the evidence lists the paths with both MTUs. An error makes
// the mesh phase fail (probe_rules.h judge_mesh), so the transports do not run on a path that
// would stall them: the black hole is named before any transport could time out on it.
#include <map>
#include <string>
#include <vector>

#include "results/judging/facts_rendezvous.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// `hosts` maps rank -> host (the join roster); a rank without one is named "rank N".
std::vector<Finding> mtu_findings(const MeshFacts& mesh,
                                  const std::map<int, std::string>& hosts);

// The mesh phase detail's MTU part: "MTU 1500 on 12 paths", "MTU 1500 on 12 paths, 6 black
// holes (1280 crosses)", ", 3 not checked (no UDP answer)"; "" when no path was probed.
std::string mtu_detail(const MeshFacts& mesh);

}  // namespace ncclsmoke::results
