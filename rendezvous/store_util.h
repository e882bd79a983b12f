#pragma once
// Helpers shared by every Store implementation, so each applies the same rules.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/store.h"

namespace ncclsmoke::rendezvous {

// Parses a counter value the way torch's std::stoll does for ADD, but strictly: the whole value
// must be an optional sign and decimal digits. An empty value counts as 0 (a fresh key).
std::optional<int64_t> parse_counter(const std::string& value);

// "a, b, c" (each key quoted, at most `max_keys` listed, then "... (N more)").
std::string describe_keys(const std::vector<std::string>& keys, std::size_t max_keys = 8);

// Printable form of a possibly binary key: quoted, with non-printable bytes escaped as \xNN.
std::string printable(const std::string& bytes, std::size_t max_len = 64);

// Waits for `keys` until `deadline` and returns the values of those that exist (empty string
// and present[i] = false for the others). Two round trips when every key is there (a CHECK of
// them all, then their MULTI_GET); while some are missing it CHECKs again, the pause doubling
// from 2 ms to kGetPresentMaxPause, so the connection is never cut by a timed-out request; at
// the deadline (or past it: then it only looks), CHECKs of halves down to the missing keys and
// a MULTI_GET of those present. Round trips matter at scale: with thousands of ranks on a few
// cores, rank 0's store thread gets a small share of the CPU and every request waits for it.
inline constexpr Millis kGetPresentMaxPause{100};
std::vector<std::string> get_present(Store& store, const std::vector<std::string>& keys,
                                     Deadline deadline, std::vector<bool>& present);

}  // namespace ncclsmoke::rendezvous
