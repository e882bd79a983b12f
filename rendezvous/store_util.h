#pragma once
// Helpers shared by every Store implementation, so each applies the same rules.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::rendezvous {

// Parses a counter value the way torch's std::stoll does for ADD, but strictly: the whole value
// must be an optional sign and decimal digits. An empty value counts as 0 (a fresh key).
std::optional<int64_t> parse_counter(const std::string& value);

// "a, b, c" (each key quoted, at most `max_keys` listed, then "... (N more)").
std::string describe_keys(const std::vector<std::string>& keys, std::size_t max_keys = 8);

// Printable form of a possibly binary key: quoted, with non-printable bytes escaped as \xNN.
std::string printable(const std::string& bytes, std::size_t max_len = 64);

}  // namespace ncclsmoke::rendezvous
