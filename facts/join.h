#pragma once
// The join barrier's outcome on one rank: produced by rendezvous/join.h (JoinResult adds the
// roster's identities), read by results/judging/probe_rules.h.
#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::facts {

struct JoinFacts {
  std::vector<int> missing;              // ranks that never arrived before the deadline
  // World size disagreement: the world size rank 0 announced, when it differs from ours.
  std::optional<int> master_world_size;
  struct Claimant {
    std::string host;
    int pid = 0;
  };
  std::optional<Claimant> rank_taken_by;  // another process already holds our rank
  double waited_s = 0;
  bool roster_received = false;  // false: rank 0 never published a roster (it died or hung)

  bool complete() const { return missing.empty() && !master_world_size && !rank_taken_by; }
};

}  // namespace ncclsmoke::facts
