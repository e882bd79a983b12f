#pragma once
// The pairwise rounds' plan on the wire: what each rank posts after the
// transports step (results::RankSummary, this rank's from its record: summarize), the plan rank 0
// posts (PairwisePlan: results/judging/pairwise_rules.h's decision plus the schedule), and the
// flags that ask for the rounds. harness/run/pairwise_step.cpp moves these through the store and runs
// the rounds; transports/pair_schedule.h is the schedule itself. Whether the rounds run and the
// phase a rank records are decided in results/judging/pairwise_rules.h.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/run/run_options.h"
#include "results/judging/observations.h"
#include "results/judging/pairwise_rules.h"  // SecondPass
#include "results/verdict/verdict.h"
#include "transports/pair_schedule.h"

namespace ncclsmoke::harness {

using PairwiseMode = results::PairwiseRequest;
using results::RankSummary;
using results::TransportSummary;

struct PairwiseSettings : results::PairwiseAsk {
  transports::PairScheduleOptions schedule;  // rounds 0 = every pair
};

// The settings the flags ask for.
PairwiseSettings pairwise_settings(const RunOptions& o);
// "" when accepted, else the reason: --pairwise auto|always|never; --pairwise-rounds auto|all|N
// (N from 1 to 100000).
std::string check_pairwise_mode(const std::string& text);
std::string check_pairwise_rounds(const std::string& text);
// An accepted text as its value (anything else reads as auto): the mode; the rounds as
// RunOptions::pairwise_rounds keeps them (nullopt auto, 0 all, N).
PairwiseMode parse_pairwise_mode(const std::string& text);
std::optional<int> parse_pairwise_rounds(const std::string& text);
// The flags' spellings of those values: "auto", "always", "never"; "all" or N.
std::string pairwise_mode_text(PairwiseMode mode);
std::string pairwise_rounds_text(int rounds);

// The wire form of a rank's summary (results::summarize_transports makes it), posted through the
// store for rank 0's decision.
nlohmann::json to_json(const RankSummary& s);
// nullopt when the post is not a summary (a stranger's, a newer format).
std::optional<RankSummary> rank_summary_from_json(const nlohmann::json& j);

struct PairwisePlan : results::PairwiseDecision {
  transports::PairScheduleOptions schedule;
};
// Rank 0's decision (results::decide_pairwise) with the schedule the flags ask for.
PairwisePlan pairwise_plan(results::PairwiseDecision decision, const PairwiseSettings& s);
nlohmann::json to_json(const PairwisePlan& p);
std::optional<PairwisePlan> pairwise_plan_from_json(const nlohmann::json& j);

// The second pass rank 0 posts after the first rounds (results::plan_second_pass), one per
// transport of the plan: {"<transport>": {"suspects": [host...], "stand_ins": [[rank, host]...],
// "rounds": [[[a, b]...]...], "rechecks": [[a, b]...], "why_none": "..."}}. Read back only when
// every pair is two distinct participants, lower rank first, the pairs of a round disjoint, each
// pair one stand-in and a partner, or a recheck (two stand-ins) that some round measures.
using SecondPasses = std::map<std::string, results::SecondPass>;
nlohmann::json to_json(const SecondPasses& passes);
std::optional<SecondPasses> second_passes_from_json(const nlohmann::json& j,
                                                    const std::vector<int>& participants);

}  // namespace ncclsmoke::harness
