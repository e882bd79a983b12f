#pragma once
// The hosts a verdict names, and which of them are suspects: the one list behind
// ncclsmoke_suspect_host (cronjob/metrics.h), the suspects file rank 0 writes beside verdict.json
// (--out-dir/suspects.txt), the Slurm drain (harness/actions/slurm_drain.h) and the format --exclude-file
// reads back (harness/run/set_aside.h). Read from the findings' data (code, ranks, hosts, subject,
// evidence), never from their message.
//
// A suspect is a host a host-blaming finding names as the one at fault:
//   SLOW_HOST, MTU_MISMATCH, DATA_CORRUPTION, STRAGGLER, PEER_LOST, PEER_STALLED, HOST_EXCLUDED
//   (still set aside), MESH_BLOCKED when it names a suspect rank (evidence.suspect_rank), and
//   GPU_XID when it is an error (an Xid that means the GPU needs a reset or replacing), GPU_HEALTH
//   when it is an error (a GPU lost, uncorrected ECC, a reset pending, a node short of GPUs), NIC_DOWN,
//   and NIC_ERRORS when it is an error (a link that went down or retrained during the run).
// Which of its hosts: the subject's peer when the finding has one (a lost, frozen or straggling
// rank is the subject's peer; PEER_LOST / PEER_STALLED with a subject but no peer name no one),
// MESH_BLOCKED's suspect rank's host, MTU_MISMATCH's host only when it names exactly one (between
// two hosts or on most paths it is a path's or the fabric's), else every host the finding lists.
// A PEER_STALLED heard only by witnesses whose own path is suspect (evidence
// "witnesses_suspect", results/judging/lossy_path_rule.h) names no one.
// SLOW_LINK names the two ends of one bad path: not a host fault, never a suspect. Every other
// code (config, rendezvous, transport timeouts, regressions) names hosts without blaming them.
//
// The suspects file: one line per suspect, the node's name first (the scheduler's name for it:
// RankInfo::node, i.e. SLURMD_NODENAME / NODE_NAME / --node-name, else the host), then a comment
// with the codes and the run id:
//     node-a # PEER_STALLED,STRAGGLER run 20240501T101500Z-3fa9c2d1
//     pod-3-node # SLOW_HOST run 20240501T101500Z-3fa9c2d1 host pod-3
// and nothing at all (an empty file) when no host is a suspect. So
//     cut -d' ' -f1 suspects.txt | paste -sd,          -> sbatch --exclude=...
// --exclude-file reads the same lines: a name, then an optional "# CODES run ID ..." comment;
// blank lines and lines that are only a comment are skipped.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// Whether `code` can name a host as the one at fault (the list above).
bool blames_host(const AnyCode& code);

// One (finding, host, node) a verdict names. `suspect`: the finding blames this host.
struct NamedHost {
  AnyCode code;
  Severity severity = Severity::error;
  std::string host;
  std::string node;  // the node of the finding's ranks on `host`, else of any rank on it, else host
  bool suspect = false;
};
// Every host every finding names (its `hosts`, plus the blamed peer's host), in finding order;
// the same (code, severity, host, node) may appear more than once (one per finding).
std::vector<NamedHost> hosts_named(const Verdict& v);

// A suspect node and the codes that blame it (sorted, unique).
struct SuspectHost {
  std::string node;  // the name the suspects file lists (and a scheduler knows)
  std::string host;  // the host name the ranks reported ("" when the same as node)
  std::vector<std::string> codes;
};
// hosts_named()'s suspects, one entry per node, sorted by node; at most kMaxSuspects.
inline constexpr std::size_t kMaxSuspects = 4096;
std::vector<SuspectHost> suspect_hosts(const Verdict& v);

// The suspects file's text (format above); "" when no host is a suspect.
std::string suspects_file_text(const Verdict& v);

// ---- reading it back: --exclude-hosts and --exclude-file ---------------------------------------

// The largest --exclude-file read, and the most names a set-aside list holds.
inline constexpr std::size_t kMaxExcludeFileBytes = 1024 * 1024;
inline constexpr std::size_t kMaxExcludedNames = 65536;

// "" when `name` can be a host or node name (1-253 of A-Z a-z 0-9 . _ -), else why not.
std::string check_host_name(std::string_view name);

// One name set aside and where it came from.
struct SetAsideEntry {
  std::string name;
  std::string source;  // "--exclude-hosts", or the file's path
  int line = 0;        // the file's line (0 for the flag)
  std::string codes;   // from the file's comment: "PEER_STALLED,STRAGGLER" ("" unknown)
  std::string run_id;  // from the file's comment ("" unknown)
};

struct SetAsideList {
  std::vector<SetAsideEntry> entries;  // first occurrence of each name wins
  bool empty() const { return entries.empty(); }
  // The entry for `name` (exact, case-insensitive: host names are), nullptr when not set aside.
  const SetAsideEntry* find(std::string_view name) const;
  // Adds `e` unless its name is already there. false when the list is full (kMaxExcludedNames).
  bool add(SetAsideEntry e);
};

// What is wrong with a set-aside input, and where.
struct SetAsideProblem {
  int line = 0;         // 1-based; 0: the whole input
  std::string message;  // names the line's text (escaped, shortened) and what is wrong
};

// --exclude-hosts "a,b,c" (spaces around names allowed, empty items skipped) into `into`.
std::optional<SetAsideProblem> parse_exclude_hosts(std::string_view text, SetAsideList& into);
// The text of a suspects file (format above) read from `source`, into `into`. Checks size
// (kMaxExcludeFileBytes), NUL bytes, each name, and at most one name per line.
std::optional<SetAsideProblem> parse_suspects_text(std::string_view text, const std::string& source,
                                                   SetAsideList& into);

// Where an entry came from, for a message: "--exclude-hosts", or
// "/out/suspects.txt line 2 (PEER_STALLED, run 2024...)".
std::string describe_origin(const SetAsideEntry& e);

}  // namespace ncclsmoke::results
