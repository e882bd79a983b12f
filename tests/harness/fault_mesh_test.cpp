// Blame the root in the mesh (rendezvous/mesh.h, set_aside_stopped_ranks): pairs that failed
// because one end was frozen or dead leave MESH_BLOCKED for pairs_lost, and the stopped rank
// leaves silent_ranks (the liveness watch's PEER_STALLED / PEER_LOST names it); a real block
// between two healthy ranks stays.
#include <gtest/gtest.h>

#include "rendezvous/mesh.h"

namespace ncclsmoke::rendezvous {
namespace {

PairFailure pair(int from, int to, ErrorClass cls) {
  PairFailure f;
  f.from = from;
  f.to = to;
  f.error_class = cls;
  return f;
}

TEST(FaultMesh, PairsWithAFrozenRankAreItsConsequenceNotABlockedNetwork) {
  MeshResult m;
  m.failures = {pair(0, 2, ErrorClass::stalled), pair(1, 2, ErrorClass::stalled),
                pair(3, 2, ErrorClass::stalled), pair(1, 3, ErrorClass::timed_out)};
  m.silent_ranks = {2};
  m.pairs_tested = 12;
  auto involved = set_aside_stopped_ranks(m, {2});
  EXPECT_EQ(involved, std::vector<int>{2});
  ASSERT_EQ(m.failures.size(), 1u);  // 1 -> 3 timed out between two healthy ranks: still blocked
  EXPECT_EQ(m.failures[0].from, 1);
  EXPECT_EQ(m.failures[0].to, 3);
  EXPECT_TRUE(m.silent_ranks.empty());
  EXPECT_EQ(m.pairs_tested, 9u);
  EXPECT_EQ(m.pairs_lost, 3u);
}

TEST(FaultMesh, NothingStoppedChangesNothing) {
  MeshResult m;
  m.failures = {pair(0, 1, ErrorClass::refused)};
  m.unfinished_ranks = {3};
  m.pairs_tested = 6;
  EXPECT_TRUE(set_aside_stopped_ranks(m, {}).empty());
  EXPECT_EQ(m.failures.size(), 1u);
  EXPECT_EQ(m.unfinished_ranks, std::vector<int>{3});
  EXPECT_EQ(m.pairs_tested, 6u);
  // A stopped rank the mesh never saw fail is not "involved".
  EXPECT_TRUE(set_aside_stopped_ranks(m, {2}).empty());
  EXPECT_EQ(m.failures.size(), 1u);
}

TEST(FaultMesh, AStoppedRankStillProbingLeavesTheUnfinishedList) {
  MeshResult m;
  m.unfinished_ranks = {0, 3};
  EXPECT_EQ(set_aside_stopped_ranks(m, {0}), std::vector<int>{0});
  EXPECT_EQ(m.unfinished_ranks, std::vector<int>{3});
}

}  // namespace
}  // namespace ncclsmoke::rendezvous
