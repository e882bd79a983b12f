#pragma once
// The join barrier: every rank publishes its identity in the store; rank 0 waits (under the join
// deadline) for every rank, then publishes the roster — who arrived and who did not — so every
// rank's local verdict can name the missing ranks, not only rank 0's.
//
// Keys (under the caller's PrefixStore):
//   join/world_size        rank 0's world size; a rank whose own differs reports WORLD_MISMATCH
//   join/rank/<r>          identity JSON of rank r, claimed with compare_set so that two
//                          processes claiming one rank are caught
//   join/here/<r>          set by rank r right after its claim; rank 0 waits on these (torch
//                          <= 2.0 does not wake a WAIT on a compare-set key)
//   join/roster            JSON written by rank 0: {"missing_ranges":[[a,b]...],
//                          "present_runs":[[first,last,host,node,address]...], "hosts":[...],
//                          "nodes":[...], "addresses":[...]} (join.cpp present_runs)
//   join/arrived/<r>       set by rank r first thing, before its claim: rank 0 can tell a rank
//                          that never connected from one that connected but has not claimed
//   join/count             ADDed by each rank whose claim succeeded: how many joined, in one read
//   join/roster_copied/<h> set by a node's leader once its copy of the roster is written
//                          (RosterCopy: the node's other ranks read the copy, not the store)
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "facts/join.h"
#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

struct Identity {
  int rank = -1;
  int world_size = 0;
  std::string host;      // hostname
  std::string node;      // Kubernetes node (NODE_NAME) or hostname
  int pid = 0;
  std::string local_address;  // our side of the store connection
  std::string interface;      // interface owning local_address
  int link_speed_mbps = 0;    // that interface's speed (interface_speed_mbps), 0 unknown
  std::string token;          // random per process: tells two claimants of one rank apart

  std::string to_json() const;
  static std::optional<Identity> from_json(const std::string& text);
};

// What judging reads (facts::JoinFacts: the missing ranks, a world size or a rank in dispute,
// the wait, the roster), and the roster's identities.
struct JoinResult : facts::JoinFacts {
  std::vector<Identity> present;  // sorted by rank
};

// What rank 0's wait looks like, for a progress line while it waits ("2/3 joined, waiting for
// rank 2 (never connected)"). The join only reports; the caller decides what to print.
struct JoinProgress {
  int world_size = 0;
  int joined = 0;                      // ranks whose claim is in the store (join/count)
  int waiting_for = -1;                // the lowest rank not here yet
  bool waiting_for_connected = false;  // it set join/arrived/<r>: connected, rank not claimed yet
  int others_missing = 0;              // ranks other than waiting_for not here yet
  double waited_s = 0;                 // since join_world began
};
struct JoinWatch {
  std::function<void(const JoinProgress&)> on_progress;  // rank 0 only; none: no wake-ups
  // How often; shortened to half the time left at the start, so a short join deadline still gets
  // a line before it passes (never under 250 ms).
  Millis every{5000};
};

// The roster read once per node. Every rank reads the same roster, and at 16,384 ranks it is
// 91 KB: 1.5 GB out of rank 0's store when every rank reads it, 186 MB when one rank of each
// 8-GPU node does. That rank, the node's leader (local rank 0), marks itself in a file before it
// claims its rank, reads the roster, leaves a copy in a file beside the mark and says so in the
// store (join/roster_copied/<hash>, a few bytes). The node's other ranks wait on the roster's
// key, then on the leader's word, and read the copy. The copy is only ever a shortcut: a
// follower with no leader on its node (no mark once the roster is out), no word within
// `follower_wait`, or a copy it cannot trust (another owner, writable by others, not a plain
// file, too big) reads the store. The files live in the temporary directory (TMPDIR), one pair
// per run and host; the leader removes them when this object goes.
class RosterCopy {
 public:
  RosterCopy() = default;  // none: this rank reads the store
  // One run's roster on one host: the files are <dir>/ncclsmoke-roster-<hash>[.leader], the
  // hash of the three, so any job id or host name gives a safe file name. `dir`: the temporary
  // directory (TMPDIR, else /tmp) when empty.
  static RosterCopy for_host(std::string_view job_namespace, std::string_view run_id,
                             std::string_view host, bool leader, Millis follower_wait,
                             std::filesystem::path dir = {});
  RosterCopy(RosterCopy&& other) noexcept;
  RosterCopy& operator=(RosterCopy&& other) noexcept;
  RosterCopy(const RosterCopy&) = delete;
  RosterCopy& operator=(const RosterCopy&) = delete;
  ~RosterCopy();

  const std::filesystem::path& path() const { return path_; }
  // Leader: the mark that tells followers a copy is coming (before the claim).
  void announce();
  // Leader: the copy, written whole (a temporary file renamed into place, mode 0600), then the
  // word in the store.
  void leave(Store& store, std::string_view roster_text);
  // The roster's text for a rank other than rank 0: a leader (or a rank with no copy) GETs `key`
  // and leaves the copy; a follower reads the copy. Store errors propagate (timed_out when the
  // roster did not come by `deadline`).
  std::string read(Store& store, const std::string& key, Deadline deadline);
  // Whether read() took the node's copy rather than the store's.
  bool read_the_copy() const { return read_the_copy_; }

 private:
  std::filesystem::path mark_path() const;
  std::optional<std::string> read_copy() const;
  void remove_files() noexcept;

  std::filesystem::path path_;
  std::string copied_key_;  // join/roster_copied/<hash>
  bool leader_ = true;
  Millis follower_wait_{2000};
  bool left_ = false;  // a leader wrote the mark or the copy
  bool read_the_copy_ = false;
};

// Publishes `self` and waits for the roster. Rank 0 waits for every rank until `deadline`, then
// publishes the roster; other ranks wait for the roster until `deadline` + `roster_grace`.
// Store failures (connection lost) propagate as StoreError.
// With `watch.on_progress`, rank 0 wakes every `watch.every` while it waits and reports (one
// extra ADD per wake-up; a wait cut short is cancelled, or reconnected on torch <= 2.0).
// With `copy` (its path set), the roster is read once per node (RosterCopy).
JoinResult join_world(Store& store, const Identity& self, Deadline deadline,
                      Millis roster_grace = Millis{2000}, const JoinWatch& watch = {},
                      RosterCopy* copy = nullptr);

}  // namespace ncclsmoke::rendezvous
