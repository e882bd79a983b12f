#pragma once
// Rank 0's check of the local verdicts the other ranks posted to the store, before it merges
// them. The store is open to anyone who can reach MASTER_PORT (as torch's is); with a job token a
// stranger's post is refused outright (rendezvous/signed_store.h), and without one this check is
// what stands between a stranger and the global verdict. A posted view is the posting rank's own
// account only when nothing rank 0 itself observed disproves it:
//   - it was posted under rank N's key and says it is rank N's;
//   - every rank it describes sits on the host the join's roster has for it;
//   - every host a finding of it names is the job's: a roster host or address, a host rank 0's
//     own view names, or (for a store or config finding) the store address that rank dialled;
//   - a rank that joined with a world size other than rank 0's reports that WORLD_MISMATCH.
// A disproved view is set aside, named once (VERDICT_DISPROVED, with the reasons), and what rank 0
// observed stands in for it: a WORLD_MISMATCH it saw at the join cannot turn into a pass.
#include <string>
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// One rank as the join's roster has it (rank 0 read it from the rank's claim).
struct RosterRank {
  int rank = -1;
  std::string host;
  std::string address;  // its side of the store connection ("10.0.0.2" or "10.0.0.2:5123")
  int world_size = 0;   // the world size it joined with
};

// The reasons rank 0 has to disbelieve `posted` (read under rank `posted_as`'s key); empty when
// it holds. `mine` is rank 0's own view, `roster` every rank that joined.
std::vector<std::string> disproofs(const Verdict& posted, int posted_as, const Verdict& mine,
                                   const std::vector<RosterRank>& roster);

// Removes every view after views[0] (rank 0's own) that disproofs() rejects, naming each in
// views[0] (VERDICT_DISPROVED), and adds to views[0] the WORLD_MISMATCH rank 0 observed for
// every rank whose world size differs and whose own view (kept) does not say so. `posted_as[i]`
// is the rank whose key views[i + 1] was read from.
void set_aside_disproved_views(std::vector<Verdict>& views, const std::vector<int>& posted_as,
                               const std::vector<RosterRank>& roster);

}  // namespace ncclsmoke::results
