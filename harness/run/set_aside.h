#pragma once
// Setting bad nodes aside: the --exclude-hosts / --exclude-file lists a run
// reads, the check of the roster against them after the join, and the suspects file rank 0
// writes beside verdict.json (the format: results/verdict/suspects.h).
//
//   - The world step reads both flags (load_set_aside): a bad --exclude-file (missing, unreadable,
//     not a regular file, over results::kMaxExcludeFileBytes, a bad line) is CONFIG_INVALID naming
//     the file and the line; the run stops before it touches the network.
//   - After the join every rank holds the roster (every rank's host and node): set_aside_step
//     records HOST_EXCLUDED (results/judging/set_aside_rules.h) when any rank's host or node is
//     on the list, and the run goes straight to its verdict: no mesh, no transport.
//   - Rank 0 writes OUT/suspects.txt (beside the global verdict) whenever it writes the global
//     verdict after a gather; an empty file when no host is a suspect. A stale one from an
//     earlier run in the same directory is removed when the world is known.
#include <optional>
#include <string>

#include "harness/run/run_context.h"
#include "rendezvous/join.h"
#include "results/judging/config_problem.h"
#include "results/verdict/suspects.h"

namespace ncclsmoke::harness {

// Reads the two flags into `into`; the problem (CONFIG_INVALID) when --exclude-file cannot be
// used. --exclude-hosts was checked at the door (check_exclude_hosts).
std::optional<results::ConfigProblem> load_set_aside(const std::string& exclude_hosts,
                                                     const std::string& exclude_file,
                                                     results::SetAsideList& into);

// "" when `text` is an accepted --exclude-hosts value (comma-separated host or node names).
std::string check_exclude_hosts(const std::string& text);

// After the join: HOST_EXCLUDED and the "set-aside" phase when a rank of the roster is set aside
// (judged from the step's record, results::next_step then ends the run); a passing
// "set-aside" phase when a list was given and no rank is on it; nothing without a list.
void set_aside_step(RunContext& ctx, const rendezvous::JoinResult& join);

// Where rank 0's suspects file goes: suspects.txt beside the global verdict.
std::string suspects_path(const RunContext& ctx);
// Rank 0: writes the suspects file of `global` (atomically); an error is logged, never fatal.
void write_suspects_file(const RunContext& ctx, const results::Verdict& global);
// Rank 0, once the world is known: removes an earlier run's suspects file, so a run that ends
// before its gather never leaves the last run's suspects behind as its own.
void remove_stale_suspects_file(const RunContext& ctx);

}  // namespace ncclsmoke::harness
