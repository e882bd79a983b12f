#pragma once
// Deadlines are absolute points on the monotonic clock: every blocking call in the project takes
// one, so a caller composes phase and run budgets by taking the earlier of two deadlines.
#include <algorithm>
#include <chrono>
#include <climits>
#include <string>

#include "rendezvous/seconds_text.h"

namespace ncclsmoke::rendezvous {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
using Millis = std::chrono::milliseconds;

inline Deadline deadline_after(Millis budget) { return Clock::now() + budget; }

// Milliseconds left before the deadline, never negative.
inline Millis remaining(Deadline d) {
  auto left = std::chrono::duration_cast<Millis>(d - Clock::now());
  return std::max(left, Millis{0});
}

// A poll(2) timeout for the time left, rounded up so that a poll that returns "timed out" really
// reached the deadline (rounding down would wake early and spin on the last millisecond).
inline int poll_timeout_ms(Millis left) {
  return static_cast<int>(std::min<long long>(left.count() + 1, INT_MAX));
}
inline int poll_timeout_ms(Deadline d) { return poll_timeout_ms(remaining(d)); }

inline bool expired(Deadline d) { return Clock::now() >= d; }

inline Deadline earliest(Deadline a, Deadline b) { return std::min(a, b); }

// Seconds since `start`, for error messages ("after 2.0s").
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// seconds_text / seconds_text_fine (seconds_text.h), for a wait measured as Millis.
inline std::string seconds_text_fine(Millis m) {
  return seconds_text_fine(static_cast<double>(m.count()) / 1000.0);
}

}  // namespace ncclsmoke::rendezvous
