#pragma once
// Small text helpers shared by the harness's parsers of the environment (world.cpp,
// job_identity.cpp, launch_plan.cpp): one definition each, so that every launcher variable is
// trimmed and checked the same way.
#include <string>
#include <string_view>

namespace ncclsmoke::harness {

// ASCII whitespace: space, \t, \n, \r, \v, \f (what a shell or a YAML value may leave around).
constexpr bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

inline std::string trim(std::string_view s) {
  while (!s.empty() && is_ascii_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ascii_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// Non-empty and only the decimal digits 0-9.
constexpr bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace ncclsmoke::harness
