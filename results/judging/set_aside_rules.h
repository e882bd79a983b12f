#pragma once
// The set-aside rule: a rank whose host or node is on the --exclude-hosts /
// --exclude-file list is HOST_EXCLUDED. Every rank sees the same roster after the join, so every
// rank makes the same finding (same subject: merge keeps one), and the run stops there: the mesh
// and the transports are not run on a node already known to be bad.
#include <string>
#include <vector>

#include "results/verdict/suspects.h"
#include "results/judging/facts_rendezvous.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// One rank of the roster that is set aside, and the entry that matched it.
struct ExcludedRank {
  int rank = -1;
  std::string host;
  std::string node;
  std::string matched;  // the name on the list (the host's or the node's)
  SetAsideEntry entry;
};

std::vector<ExcludedRank> excluded_ranks(const std::vector<RosterEntry>& roster,
                                         const SetAsideList& list);

// HOST_EXCLUDED naming the ranks, their hosts and where each exclusion came from (hint vars
// {hosts}, {source}); evidence.excluded lists (at most 64) {rank, host, node, matched, source,
// line, codes, run_id}. Subject: phase "set-aside", item the matched names, no reporter, so every
// rank's copy is the same finding. `excluded` must not be empty.
Finding host_excluded_finding(const std::vector<ExcludedRank>& excluded);

}  // namespace ncclsmoke::results
