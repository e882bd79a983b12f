#pragma once
// --slurm-drain-budget: how many nodes ncclsmoke may hold drained at once, across runs. A gate
// that drains on every failing run would, under a fault that is not any node's (a switch, a
// fabric manager, a bad rule), drain a little more of the cluster each run; the budget stops it
// there and a human decides (harness/actions/slurm_drain.h counts the drains with ncclsmoke's reason).
//
//   "N"   at most N nodes (0: never drain; suspects are still written to suspects.txt)
//   "P%"  at most P percent of the partition's nodes (the job's SLURM_JOB_PARTITION, else the
//         whole cluster), rounded down, and at least one node (0%: never drain)
// The default, 10%, lets a 2-node cluster drain its bad node and a 1,000-node cluster 100.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace ncclsmoke::harness {

struct DrainBudget {
  std::optional<int> nodes;  // a count; nullopt: `percent` of the partition
  double percent = 10;

  // The nodes ncclsmoke may hold drained among `scope_nodes`.
  int allowed(int scope_nodes) const {
    if (nodes) return *nodes;
    if (percent <= 0) return 0;
    return std::max(1, static_cast<int>(std::floor(percent * std::max(0, scope_nodes) / 100.0 + 1e-9)));
  }
  // The flag's spelling: "3", "10%", "2.5%".
  std::string text() const {
    return nodes ? std::to_string(*nodes) : fmt::format("{}%", percent);
  }
};

// nullopt with `why` for anything but a count 0-100000 or a percentage 0-100.
inline std::optional<DrainBudget> parse_drain_budget(const std::string& text, std::string* why) {
  auto bad = [&](const std::string& reason) -> std::optional<DrainBudget> {
    if (why) *why = fmt::format("'{}' is not a drain budget ({}): give a node count N (0-100000) or a "
                                "share of the partition P% (0-100)",
                                text, reason);
    return std::nullopt;
  };
  if (text.empty()) return bad("empty");
  const bool share = text.back() == '%';
  const std::string number = share ? text.substr(0, text.size() - 1) : text;
  if (number.empty() || number.find_first_not_of("0123456789.") != std::string::npos ||
      (!share && number.find('.') != std::string::npos))
    return bad(share ? "the percentage is not a number" : "not a whole number");
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(v)) return bad("not a number");
  DrainBudget b;
  if (share) {
    if (v > 100) return bad("over 100%");
    b.percent = v;
  } else {
    if (v > 100000) return bad("over 100000");
    b.nodes = static_cast<int>(v);
  }
  return b;
}

}  // namespace ncclsmoke::harness
