#include "harness/pairwise_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "harness/transport_phase.h"  // parse_size
#include "results/judging/transport_rules.h"

namespace ncclsmoke::harness {

using nlohmann::json;

namespace {

constexpr int kMaxRounds = 100000;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string seconds_short(double s) {
  return s < 10 ? fmt::format("{:.2f} s", s) : fmt::format("{:.0f} s", s);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) out += fmt::format(" and {} more", ranks.size() - 8);
  return out;
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

PairwiseSettings pairwise_settings(const RunOptions& o) {
  PairwiseSettings s;
  auto mode = lower(o.pairwise);
  s.mode = mode == "always"  ? PairwiseMode::always
           : mode == "never" ? PairwiseMode::never
                             : PairwiseMode::automatic;
  auto rounds = lower(o.pairwise_rounds);
  if (rounds == "all") {
    s.schedule.rounds = 0;
  } else if (rounds != "auto" && check_pairwise_rounds(rounds).empty()) {
    // An explicit count applies at every size (a small world too), capped by the round robin.
    s.schedule.rounds = static_cast<int>(std::stol(rounds));
    s.schedule.all_pairs_up_to = 0;
  }
  std::size_t bytes = 0;
  if (parse_size(o.pairwise_bytes, bytes) && bytes > 0) s.bytes = static_cast<std::int64_t>(bytes);
  s.iters = std::max(1, o.pairwise_iters);
  s.budget_s = o.pairwise_budget_s;
  return s;
}

RankSummary summarize(const results::Verdict& record, int rank, const std::string& host,
                      const std::vector<std::string>& requested) {
  RankSummary s;
  s.rank = rank;
  s.host = host;
  for (const auto& name : requested) {
    TransportSummary t;
    t.transport = name;
    const std::string phase = "transport:" + name;
    t.status = "not_run";
    for (const auto& p : record.phases)
      if (p.name == phase) {
        t.status = results::to_string(p.status);
        if (p.status == results::PhaseStatus::skipped || p.status == results::PhaseStatus::not_run)
          t.skipped_why = p.detail;
      }
    for (const auto& f : record.findings)
      if (f.subject.phase == phase &&
          (f.code == results::Code::TRANSPORT_TIMEOUT || f.code == results::Code::PEER_LOST))
        t.timed_out = true;
    for (const auto& id : record.identities)
      if (id.transport == name && (id.rank == rank || id.rank < 0) && id.observed.is_object()) {
        auto it = id.observed.find(results::kLinkStatsKey);
        if (it != id.observed.end() && it->is_object()) t.link_stats = *it;
      }
    s.transports.push_back(std::move(t));
  }
  return s;
}

json to_json(const RankSummary& s) {
  json ts = json::array();
  for (const auto& t : s.transports) {
    json j = {{"transport", t.transport}, {"status", t.status}, {"timed_out", t.timed_out}};
    if (!t.link_stats.is_null()) j["link_stats"] = t.link_stats;
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
    x.status = status->get<std::string>();
    if (auto to = t.find("timed_out"); to != t.end() && to->is_boolean())
      x.timed_out = to->get<bool>();
    if (auto ls = t.find("link_stats"); ls != t.end() && ls->is_object()) x.link_stats = *ls;
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

std::string no_pairs_reason(const std::string& transport) {
  // MPI's world is the one mpirun started (the backend checks MPI_COMM_WORLD's size against the
  // harness's): a 2-rank world of its own cannot be made inside the run.
  if (transport == "mpi")
    return "a 2-rank MPI world cannot be formed inside the run (MPI_COMM_WORLD is the one mpirun "
           "started)";
  return "";
}

PairwisePlan decide_pairwise(const PlanInputs& in, const PairwiseSettings& s) {
  PairwisePlan p;
  p.schedule = s.schedule;
  p.bytes = s.bytes;
  p.iters = s.iters;
  p.budget_s = s.budget_s;
  for (const auto& sum : in.summaries) p.participants.push_back(sum.rank);
  std::sort(p.participants.begin(), p.participants.end());
  p.participants.erase(std::unique(p.participants.begin(), p.participants.end()),
                       p.participants.end());

  // Which transports can have rounds: ran on every participant, and can make a 2-rank world.
  std::vector<std::string> reasons;
  for (const auto& name : in.requested) {
    std::string why = no_pairs_reason(name);
    std::vector<int> timed_out;
    for (const auto& sum : in.summaries) {
      const TransportSummary* t = nullptr;
      for (const auto& x : sum.transports)
        if (x.transport == name) t = &x;
      if (!t) {
        if (why.empty())
          why = fmt::format("rank {} did not say how transport:{} ended", sum.rank, name);
        continue;
      }
      if (t->timed_out) timed_out.push_back(sum.rank);
      if (why.empty() && (t->status == "skipped" || t->status == "not_run"))
        why = fmt::format("transport:{} did not run on rank {}{}", name, sum.rank,
                          t->skipped_why.empty() ? "" : ": " + t->skipped_why);
    }
    if (!timed_out.empty())
      reasons.push_back(fmt::format("transport:{} failed with a timeout or a lost peer on rank {}",
                                    name, rank_list(timed_out)));
    if (why.empty())
      p.transports.push_back(name);
    else
      p.skipped[name] = why;
  }

  // The ring's link evidence, judged as rank 0's judge_world will (without a baseline).
  results::Verdict v;
  for (const auto& sum : in.summaries) {
    results::RankInfo ri;
    ri.rank = sum.rank;
    ri.host = sum.host;
    v.ranks.push_back(ri);
    for (const auto& t : sum.transports) {
      if (t.link_stats.is_null()) continue;
      results::TransportIdentity id;
      id.transport = t.transport;
      id.rank = sum.rank;
      id.observed = json{{results::kLinkStatsKey, t.link_stats}};
      v.identities.push_back(std::move(id));
    }
  }
  for (const auto& f : results::judge_links(v))
    reasons.push_back(fmt::format("the ring's link stats show {}: {}", f.code, f.message));

  // The profile's band: the world's gate busbw below its degraded ratio.
  if (in.profile) {
    for (const auto& name : in.requested) {
      const auto* te = results::find_transport(*in.profile, name);
      const auto* band = te ? results::find_band(*te, in.world_size) : nullptr;
      if (!band) continue;
      double worst = NAN;
      for (const auto& r : in.rows)
        if (r.transport == name && r.rank < 0 && !r.synthetic && r.bytes == band->gate_bytes &&
            std::isfinite(r.busbw_gbps) && !(r.busbw_gbps >= worst))
          worst = r.busbw_gbps;
      if (std::isfinite(worst) && worst < band->degraded_ratio * band->busbw_gbps)
        reasons.push_back(fmt::format(
            "transport:{} gate busbw {:.3g} GB/s is below {:.0f}% of the profile's {:.3g} GB/s",
            name, worst, band->degraded_ratio * 100, band->busbw_gbps));
    }
  }

  const bool forced = s.mode == PairwiseMode::always;
  std::vector<int> stopped = in.stopped;
  std::sort(stopped.begin(), stopped.end());
  stopped.erase(std::unique(stopped.begin(), stopped.end()), stopped.end());
  p.participants.erase(
      std::remove_if(p.participants.begin(), p.participants.end(),
                     [&](int r) { return std::binary_search(stopped.begin(), stopped.end(), r); }),
      p.participants.end());
  std::string why_not;
  if (p.participants.size() < 2)
    why_not = fmt::format("{} rank{} took part (2 at least are needed)", p.participants.size(),
                          p.participants.size() == 1 ? "" : "s");
  else if (p.transports.empty())
    why_not = "no transport can run pairwise rounds";
  else if (!forced && !stopped.empty())
    // A dead or frozen peer explains the timeouts (the watch names it): no link to tell apart.
    why_not = fmt::format(
        "not needed: rank {} stopped answering (liveness watch), the "
        "transports' timeouts are its consequences",
        rank_list(stopped));
  if (forced) {
    p.reason = "requested (--pairwise)";
    if (!reasons.empty()) p.reason += "; also: " + reasons.front();
  } else if (!reasons.empty()) {
    p.reason = reasons.front();
    if (reasons.size() > 1) p.reason += fmt::format(" (and {} more)", reasons.size() - 1);
  } else {
    p.reason = std::string("not needed: no transport timed out, the ring's links look alike") +
               (in.profile ? ", and the gate busbw is within the profile" : "");
  }
  p.run = why_not.empty() && (forced || !reasons.empty());
  if (!why_not.empty()) p.reason = why_not + (reasons.empty() && !forced ? "" : "; " + p.reason);
  return p;
}

std::string size_text(std::int64_t bytes) {
  if (bytes >= (1ll << 30) && bytes % (1ll << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ll << 20) && bytes % (1ll << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1ll << 10) && bytes % (1ll << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

results::Phase pairwise_not_run_phase(const std::string& transport, const std::string& why,
                                      bool skipped) {
  results::Phase ph;
  ph.name = "pairwise:" + transport;
  ph.status = skipped ? results::PhaseStatus::skipped : results::PhaseStatus::not_run;
  ph.required = false;
  ph.detail = why;
  return ph;
}

results::Phase pairwise_phase(const PairwisePlan& plan, const PairwiseRun& run) {
  results::Phase ph;
  ph.name = "pairwise:" + run.transport;
  ph.required = false;
  ph.duration_s = run.duration_s;
  int failed = 0, measured = 0;
  std::string first_error;
  for (const auto& s : run.samples) {
    if (!s.error.empty()) {
      ++failed;
      if (first_error.empty())
        first_error = fmt::format("round {} with rank {}: {}", s.round, s.peer, s.error);
    } else {
      ++measured;
    }
  }
  std::string rounds =
      fmt::format("{} round{}", run.rounds_total, run.rounds_total == 1 ? "" : "s");
  if (run.rounds_late)
    rounds += fmt::format(" ({} not started: the budget was spent)", run.rounds_late);
  std::string skipped;
  if (run.sat_out) skipped += fmt::format(", sat out {}", run.sat_out);
  if (run.partner_stopped)
    skipped += fmt::format(", {} skipped (the partner had stopped)", run.partner_stopped);
  if (run.partner_late)
    skipped += fmt::format(", {} skipped (the partner had no time left)", run.partner_late);
  ph.detail = fmt::format(
      "{} of {} x {} in {}, budget {}; rank {}: {} pair{} measured, {} failed{}; reason: {}",
      rounds, size_text(plan.bytes), plan.iters, seconds_short(run.duration_s),
      seconds_short(plan.budget_s), run.rank, measured, measured == 1 ? "" : "s", failed, skipped,
      plan.reason);
  if (!first_error.empty()) ph.detail += "; first failure: " + first_error;
  // A failed pair is evidence about a link (judge_links names it: SLOW_HOST / SLOW_LINK), not a
  // failed run: the main step already said whether the collectives work. A pair can also fail on
  // its share of the budget alone (5% loss: SYN retries cost seconds).
  ph.status = failed > 0 ? results::PhaseStatus::degraded : results::PhaseStatus::pass;
  if (run.samples.empty() && run.rounds_late > 0 &&
      run.rounds_late + run.sat_out >= run.rounds_total)
    ph.status = results::PhaseStatus::not_run;  // the budget was spent before the first round
  return ph;
}

}  // namespace ncclsmoke::harness
