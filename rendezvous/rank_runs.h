#pragma once
// Ascending, distinct ranks as [[first, last], ...], one pair a run of consecutive ranks: how the
// roster lists missing ranks and the verdict's "alike" groups list their ranks, so a list of a
// million ranks with few gaps is a few pairs.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <vector>

namespace ncclsmoke::rendezvous {

inline nlohmann::json rank_runs(const std::vector<int>& sorted) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    out.push_back(nlohmann::json::array({sorted[i], sorted[j]}));
    i = j + 1;
  }
  return out;
}

}  // namespace ncclsmoke::rendezvous
