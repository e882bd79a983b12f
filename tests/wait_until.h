#pragma once
// Waiting for a condition in a test: poll it until it holds or the timeout passes, instead of
// sleeping for a guessed time. A sleep guesses how long the other thread needs (too short: flaky
// under load; too long: slow); a bounded poll is as fast as the condition and fails only when the
// timeout, which is generous, really passed.
#include <chrono>
#include <functional>
#include <thread>

namespace ncclsmoke::testing {

// True as soon as cond() returns true (checked first at once, then every `poll`); false when it
// still does not hold after `timeout` (cond() is checked once more at the end).
inline bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
                       std::chrono::microseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(poll);  // the poll interval, not a guess at the other side
  }
  return true;
}

}  // namespace ncclsmoke::testing
