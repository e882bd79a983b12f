#pragma once
// Waiting in a test: on a condition, never on a guessed time (tests/waiting.py is the same for the
// Python tests).
//
// wait_until: poll a condition until it holds or the timeout passes, instead of sleeping for a
// guessed time. A sleep guesses how long the other thread needs (too short: flaky under load;
// too long: slow); a bounded poll is as fast as the condition and fails only when the timeout,
// which is generous, really passed.
//
// pause_for: time passing on purpose, where it IS what the test is about: a peer that stays
// silent, a writer that comes late, a window in which nothing may happen. Never a wait for
// something to happen: that is wait_until's. The one place the tests sleep for a fixed time.
#include <dirent.h>
#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <string>
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

// Lets `d` pass: the fault or the window under test (say which at the call).
template <class Rep, class Period>
inline void pause_for(std::chrono::duration<Rep, Period> d) {
  std::this_thread::sleep_for(d);
}

// True once process `pid` has ended: gone, or every thread of it a zombie or dead. The last
// thread out closes its descriptors, so its peers see its connections end by then (a leader
// thread shows 'Z' while the others may still hold them). What a test polls before it relies
// on a death that is not its own child's (that one: waitid(..., WNOWAIT)).
inline bool process_ended(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (!d) return true;
  bool ended = true;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(task + "/" + e->d_name + "/stat");
    std::string stat;
    if (!std::getline(f, stat)) continue;  // that thread is gone
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    char state = stat[close + 2];
    if (state != 'Z' && state != 'X') ended = false;
  }
  ::closedir(d);
  return ended;
}

}  // namespace ncclsmoke::testing
