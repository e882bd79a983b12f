#pragma once
// Slurm hostlist expressions (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST): "gpu-[01-04,07],login1",
// "rack[1-2]-node[01-02]". Expanded in code rather than with `scontrol show hostnames`, because a
// rank must learn its master without a Slurm client on the path (containers under srun often have
// none) and without a process spawn that could hang.
//
// Grammar: a comma-separated list (commas inside brackets belong to the range set) of names, each a
// run of literal text and bracket groups. A group is a comma-separated list of N or LO-HI (decimal,
// LO <= HI). Zero padding is kept: the width is LO's length, so [08-10] -> 08, 09, 10 and [8-10]
// -> 8, 9, 10. Several groups in one name expand as a cartesian product, the last group fastest.
// Malformed input ("gpu-[01-", "[3-1]", "[]", "a,,b", "") is an error, never a guess.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclsmoke::harness {

// Expansion stops with an error past this many hosts, so "n[0-999999999]" cannot eat memory.
inline constexpr std::size_t kMaxHostlistHosts = std::size_t{1} << 20;

// Every host, in order; nullopt (and *error, when given, says why) when the list is malformed or
// expands to more than kMaxHostlistHosts hosts.
std::optional<std::vector<std::string>> expand_hostlist(std::string_view list,
                                                        std::string* error = nullptr);

// The first host of a well-formed list, without expanding it (so no size bound applies); nullopt
// (and *error) when the list is malformed.
std::optional<std::string> first_host(std::string_view list, std::string* error = nullptr);

}  // namespace ncclsmoke::harness
