#include "harness/run/pairwise_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <cmath>

#include "harness/run/transport_phase.h"  // parse_size
#include "results/judging/transport_rules.h"  // the link stats' layout

namespace ncclsmoke::harness {

using nlohmann::json;

namespace {

constexpr int kMaxRounds = 100000;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string check_pairwise_mode(const std::string& text) {
  auto t = lower(text);
  if (t == "auto" || t == "always" || t == "never") return "";
  return fmt::format(
      "'{}' is not a pairwise mode (accepted: auto, always, never; --pairwise "
      "alone is always)",
      text);
}

std::string check_pairwise_rounds(const std::string& text) {
  auto t = lower(text);
  if (t == "auto" || t == "all") return "";
  try {
    size_t used = 0;
    long v = std::stol(t, &used);
    if (used == t.size() && v >= 1 && v <= kMaxRounds) return "";
  } catch (const std::exception&) {
  }
  return fmt::format("'{}' is not a number of rounds (accepted: auto, all, or 1-{})", text,
                     kMaxRounds);
}

PairwiseMode parse_pairwise_mode(const std::string& text) {
  const auto t = lower(text);
  return t == "always" ? PairwiseMode::always
         : t == "never" ? PairwiseMode::never
                        : PairwiseMode::automatic;
}

std::optional<int> parse_pairwise_rounds(const std::string& text) {
  const auto t = lower(text);
  if (t == "all") return 0;
  if (t == "auto" || !check_pairwise_rounds(t).empty()) return std::nullopt;
  return static_cast<int>(std::stol(t));
}

std::string pairwise_mode_text(PairwiseMode mode) {
  switch (mode) {
    case PairwiseMode::always: return "always";
    case PairwiseMode::never: return "never";
    case PairwiseMode::automatic: break;
  }
  return "auto";
}

std::string pairwise_rounds_text(int rounds) { return rounds == 0 ? "all" : std::to_string(rounds); }

PairwiseSettings pairwise_settings(const RunOptions& o) {
  PairwiseSettings s;
  static_cast<results::PairwiseAsk&>(s) = o.pairwise;
  s.iters = std::max(1, s.iters);
  if (o.pairwise_rounds) {
    s.schedule.rounds = *o.pairwise_rounds;
    // An explicit count applies at every size (a small world too), capped by the round robin.
    if (*o.pairwise_rounds > 0) s.schedule.all_pairs_up_to = 0;
  }
  return s;
}

json to_json(const RankSummary& s) {
  json ts = json::array();
  for (const auto& t : s.transports) {
    json j = {{"transport", t.transport},
              {"status", results::to_string(t.status)},
              {"timed_out", t.timed_out},
              {"peer_lost", t.peer_lost}};
    if (t.link_stats) {  // the verdict's layout (results::write_link_stats)
      json wrap;
      results::write_link_stats(wrap, *t.link_stats);
      j["link_stats"] = wrap[results::kLinkStatsKey];
    }
    if (!t.skipped_why.empty()) j["skipped_why"] = t.skipped_why;
    ts.push_back(std::move(j));
  }
  return {{"rank", s.rank}, {"host", s.host}, {"transports", std::move(ts)}};
}

std::optional<RankSummary> rank_summary_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto r = j.find("rank");
  auto ts = j.find("transports");
  if (r == j.end() || !r->is_number_integer() || ts == j.end() || !ts->is_array())
    return std::nullopt;
  RankSummary s;
  s.rank = r->get<int>();
  if (auto h = j.find("host"); h != j.end() && h->is_string()) s.host = h->get<std::string>();
  for (const auto& t : *ts) {
    if (!t.is_object()) return std::nullopt;
    auto name = t.find("transport");
    auto status = t.find("status");
    if (name == t.end() || !name->is_string() || status == t.end() || !status->is_string())
      return std::nullopt;
    TransportSummary x;
    x.transport = name->get<std::string>();
    auto parsed = results::parse_phase_status(status->get<std::string>());
    if (!parsed) return std::nullopt;
    x.status = *parsed;
    if (auto to = t.find("timed_out"); to != t.end() && to->is_boolean())
      x.timed_out = to->get<bool>();
    if (auto pl = t.find("peer_lost"); pl != t.end() && pl->is_boolean())
      x.peer_lost = pl->get<bool>();
    if (auto ls = t.find("link_stats"); ls != t.end()) x.link_stats = results::link_stats_from(*ls);
    if (auto w = t.find("skipped_why"); w != t.end() && w->is_string())
      x.skipped_why = w->get<std::string>();
    s.transports.push_back(std::move(x));
  }
  return s;
}

json to_json(const PairwisePlan& p) {
  json skipped = json::object();
  for (const auto& [t, why] : p.skipped) skipped[t] = why;
  return {{"run", p.run},
          {"reason", p.reason},
          {"participants", p.participants},
          {"transports", p.transports},
          {"skipped", std::move(skipped)},
          {"rounds", p.schedule.rounds},
          {"all_pairs_up_to", p.schedule.all_pairs_up_to},
          {"bytes", p.bytes},
          {"iters", p.iters},
          {"budget_s", p.budget_s}};
}

std::optional<PairwisePlan> pairwise_plan_from_json(const json& j) {
  try {
    if (!j.is_object()) return std::nullopt;
    PairwisePlan p;
    p.run = j.at("run").get<bool>();
    p.reason = j.at("reason").get<std::string>();
    p.participants = j.at("participants").get<std::vector<int>>();
    p.transports = j.at("transports").get<std::vector<std::string>>();
    for (const auto& [t, why] : j.at("skipped").items()) p.skipped[t] = why.get<std::string>();
    p.schedule.rounds = j.at("rounds").get<int>();
    p.schedule.all_pairs_up_to = j.at("all_pairs_up_to").get<int>();
    p.bytes = j.at("bytes").get<std::int64_t>();
    p.iters = j.at("iters").get<int>();
    p.budget_s = j.at("budget_s").get<double>();
    if (p.iters < 1 || p.bytes < 1 || !std::isfinite(p.budget_s) || p.budget_s < 0 ||
        p.schedule.rounds < 0 || p.schedule.rounds > kMaxRounds)
      return std::nullopt;
    std::sort(p.participants.begin(), p.participants.end());
    return p;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

json to_json(const SecondPasses& passes) {
  json out = json::object();
  for (const auto& [t, sp] : passes) {
    json stand_ins = json::array();
    for (const auto& [rank, host] : sp.suspect_of_rank) stand_ins.push_back({rank, host});
    out[t] = {{"suspects", sp.suspects},
              {"stand_ins", std::move(stand_ins)},
              {"rounds", sp.rounds},
              {"rechecks", sp.rechecks},
              {"why_none", sp.why_none},
              {"why_no_partners", sp.why_no_partners}};
  }
  return out;
}

std::optional<SecondPasses> second_passes_from_json(const json& j,
                                                    const std::vector<int>& participants) {
  auto taking_part = [&](int r) {
    return std::binary_search(participants.begin(), participants.end(), r);
  };
  try {
    if (!j.is_object()) return std::nullopt;
    SecondPasses out;
    for (const auto& [t, o] : j.items()) {
      results::SecondPass sp;
      sp.suspects = o.at("suspects").get<std::vector<std::string>>();
      for (const auto& si : o.at("stand_ins")) {
        const int rank = si.at(0).get<int>();
        if (!taking_part(rank)) return std::nullopt;
        sp.suspect_of_rank[rank] = si.at(1).get<std::string>();
      }
      sp.rounds = o.at("rounds").get<std::vector<std::vector<std::pair<int, int>>>>();
      sp.rechecks = o.at("rechecks").get<std::set<std::pair<int, int>>>();
      sp.why_none = o.at("why_none").get<std::string>();
      sp.why_no_partners = o.at("why_no_partners").get<std::string>();
      if (sp.rounds.size() > static_cast<std::size_t>(kMaxRounds)) return std::nullopt;
      for (const auto& [a, b] : sp.rechecks)
        if (!std::any_of(sp.rounds.begin(), sp.rounds.end(), [&, a = a, b = b](const auto& round) {
              return std::find(round.begin(), round.end(), std::pair{a, b}) != round.end();
            }))
          return std::nullopt;  // a recheck no round measures
      for (const auto& round : sp.rounds) {
        std::set<int> seen;
        for (const auto& [a, b] : round) {
          if (a >= b || !taking_part(a) || !taking_part(b) || !seen.insert(a).second ||
              !seen.insert(b).second)
            return std::nullopt;
          // A named link's two ends measured again, or a suspect with a partner.
          if (sp.rechecks.count({a, b})) continue;
          if (sp.suspect_of_rank.count(a) + sp.suspect_of_rank.count(b) != 1) return std::nullopt;
        }
      }
      out[t] = std::move(sp);
    }
    return out;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

PairwisePlan pairwise_plan(results::PairwiseDecision decision, const PairwiseSettings& s) {
  PairwisePlan p;
  static_cast<results::PairwiseDecision&>(p) = std::move(decision);
  p.schedule = s.schedule;
  return p;
}

}  // namespace ncclsmoke::harness
