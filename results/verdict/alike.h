#pragma once
// The world's verdict at fleet size: a document whose size follows what is wrong, not the world.
//
// Past kMaxExpandedRanks ranks, summarise_alike() keeps in full only what a reader of a finding
// needs: the world-wide entries (rank -1); the identities of the ranks a finding lists (its
// ranks, reporters, peer), of every rank of a host it names, and of each transport's lowest rank
// (the one history quotes); the rows of the ranks a finding lists. Every other rank's identities
// and rows become "alike" (schema minor 5):
//   alike.identities[]: per transport, the ranks summarised (as runs), the observed members they
//     all share ("common"), min/median/max of each number that varies ("spread", by dotted path),
//     the values of a string that varies among a few ("values": value -> ranks), and how many
//     distinct values one that varies among many took ("distinct");
//   alike.transports[]: per transport, size, dtype and placement, the ranks summarised and
//     min/median/max of time_us, algbw_gbps and busbw_gbps; "wrong": the sum (null: unchecked).
// The ranks' own verdict files keep every identity and row. At or under kMaxExpandedRanks ranks,
// and when nothing would be summarised, the verdict is returned unchanged (no "alike").
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// A string member that takes more distinct values than this is counted ("distinct"), not listed.
inline constexpr std::size_t kMaxAlikeValues = 8;

Verdict summarise_alike(Verdict v);

}  // namespace ncclsmoke::results
