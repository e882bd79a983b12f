#include "results/judging/pairwise_rules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "results/judging/transport_rules.h"  // judge_transports
#include "results/verdict/phase_id.h"

namespace ncclsmoke::results {

namespace {

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

// "1 MiB", "64 KiB", "1000 B".
std::string size_text(std::int64_t bytes) {
  if (bytes >= (1ll << 30) && bytes % (1ll << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ll << 20) && bytes % (1ll << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1ll << 10) && bytes % (1ll << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

PairwiseDecision decide_pairwise(const PairwiseInputs& in, const PairwiseAsk& s) {
  PairwiseDecision p;
  p.bytes = s.bytes;
  p.iters = s.iters;
  p.budget_s = s.budget_s;
  for (const auto& sum : in.summaries) p.participants.push_back(sum.rank);
  std::sort(p.participants.begin(), p.participants.end());
  p.participants.erase(std::unique(p.participants.begin(), p.participants.end()),
                       p.participants.end());
  if (!in.transports_ran) {
    p.reason = "the transports did not run";
    return p;
  }

  // Which transports can have rounds: ran on every participant, and can make a 2-rank world.
  std::vector<std::string> reasons;
  for (const auto& name : in.requested) {
    auto cannot = in.cannot_pair.find(name);
    std::string why = cannot == in.cannot_pair.end() ? std::string() : cannot->second;
    std::vector<int> timed_out;
    for (const auto& sum : in.summaries) {
      const TransportSummary* t = nullptr;
      for (const auto& x : sum.transports)
        if (x.transport == name) t = &x;
      if (!t) {
        if (why.empty())
          why = fmt::format("rank {} did not say how {} ended", sum.rank, transport_phase_name(name));
        continue;
      }
      if (t->timed_out || t->peer_lost) timed_out.push_back(sum.rank);
      if (why.empty() && (t->status == PhaseStatus::skipped || t->status == PhaseStatus::not_run))
        why = fmt::format("{} did not run on rank {}{}", transport_phase_name(name), sum.rank,
                          t->skipped_why.empty() ? "" : ": " + t->skipped_why);
    }
    if (!timed_out.empty())
      reasons.push_back(fmt::format("{} failed with a timeout or a lost peer on rank {}",
                                    transport_phase_name(name), rank_list(timed_out)));
    if (why.empty())
      p.transports.push_back(name);
    else
      p.skipped[name] = why;
  }

  // The ring's link evidence, judged as rank 0's judge_world will (without a baseline).
  std::map<int, std::string> host_of;
  for (const auto& sum : in.summaries) host_of[sum.rank] = sum.host;
  std::vector<LinkEvidence> links;
  for (const auto& sum : in.summaries)
    for (const auto& t : sum.transports) {
      if (!t.link_stats) continue;
      auto next = host_of.find(t.link_stats->next_rank);
      if (auto e = ring_link(t.transport, sum.rank, sum.host, *t.link_stats,
                             next == host_of.end() ? std::string() : next->second))
        links.push_back(std::move(*e));
    }
  for (const auto& f : judge_links(links))
    reasons.push_back(fmt::format("the ring's link stats show {}: {}", f.code, f.message));
  for (const auto& f : judge_line_rate(in.rows, in.ranks))
    reasons.push_back(fmt::format("{}: {}", f.code, f.message));

  // The profile's band: the world's gate busbw below its degraded ratio.
  if (in.profile) {
    for (const auto& name : in.requested) {
      const auto* te = find_transport(*in.profile, name);
      const auto* band = te ? find_band(*te, in.world_size) : nullptr;
      if (!band) continue;
      double worst = NAN;
      for (const auto& r : in.rows)
        if (r.transport == name && r.rank < 0 && !r.synthetic && r.bytes == band->gate_bytes &&
            std::isfinite(r.busbw_gbps) && !(r.busbw_gbps >= worst))
          worst = r.busbw_gbps;
      if (std::isfinite(worst) && worst < band->degraded_ratio * band->busbw_gbps)
        reasons.push_back(fmt::format(
            "{} gate busbw {:.3g} GB/s is below {:.0f}% of the profile's {:.3g} GB/s",
            transport_phase_name(name), worst, band->degraded_ratio * 100, band->busbw_gbps));
    }
  }

  const bool forced = s.mode == PairwiseRequest::always;
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

Phase pairwise_not_run_phase(const std::string& transport, const std::string& why,
                                      bool skipped) {
  Phase ph;
  ph.name = pairwise_phase_name(transport);
  ph.status = skipped ? PhaseStatus::skipped : PhaseStatus::not_run;
  ph.required = false;
  ph.detail = why;
  return ph;
}

SecondPass plan_second_pass(const std::vector<LinkEvidence>& links,
                            const std::map<int, std::string>& host_of, int partners) {
  SecondPass sp;
  std::set<std::string> named, candidate_ends;
  std::vector<HostPair> lossy, named_links;
  for (const auto& f : judge_links(links, &lossy)) {
    if (f.code == Code::SLOW_HOST || f.code == Code::SLOW_LINK)
      named.insert(f.hosts.begin(), f.hosts.end());
    if (f.code == Code::SLOW_LINK && f.hosts.size() == 2) named_links.emplace_back(f.hosts[0], f.hosts[1]);
  }
  for (const auto& [a, b] : lossy) {
    candidate_ends.insert({a, b});
    named_links.emplace_back(a, b);
  }
  // One rank for each host: its lowest participant (std::map: ranks in order).
  std::map<std::string, int> rank_of_host;
  for (const auto& [rank, host] : host_of)
    if (!host.empty()) rank_of_host.emplace(host, rank);
  // Partners are the hosts the first rounds named nothing about: first those not even an end of
  // a lossy candidate link, then (on a small world, where one noisy link would otherwise leave no
  // partner at all) the candidates' ends. A candidate end is slower with no one, and the rule
  // that decides a host asks for slowness with every partner, so it cannot accuse on its own.
  std::vector<std::string> healthy, candidates_unnamed;
  for (const auto& [host, rank] : rank_of_host) {
    if (named.count(host))
      sp.suspects.push_back(host);
    else if (!candidate_ends.count(host))
      healthy.push_back(host);
    else
      candidates_unnamed.push_back(host);
  }
  if (healthy.size() < std::max<std::size_t>(sp.suspects.size(), static_cast<std::size_t>(partners)))
    healthy.insert(healthy.end(), candidates_unnamed.begin(), candidates_unnamed.end());
  if (sp.suspects.empty() && named_links.empty()) {
    sp.why_none = "the first rounds named no host";
    return sp;
  }
  const int rounds = std::min<int>(partners, static_cast<int>(healthy.size()));
  if (sp.suspects.size() > healthy.size() || rounds < 1) {
    sp.why_no_partners = fmt::format(
        "{} suspect hosts and {} healthy: too few healthy partners to tell a host (a fault most "
        "hosts share is not a host's)",
        sp.suspects.size(), healthy.size());
    sp.suspects.clear();
  }
  // Round j meets suspect i with healthy host (i + j) mod H: at most H suspects, so the pairs of a
  // round are disjoint, and each suspect meets `rounds` different hosts.
  const std::size_t h = healthy.size();
  for (int j = 0; !sp.suspects.empty() && j < rounds; ++j) {
    std::vector<std::pair<int, int>> round;
    for (std::size_t i = 0; i < sp.suspects.size(); ++i) {
      const int a = rank_of_host[sp.suspects[i]];
      const int b = rank_of_host[healthy[(i + static_cast<std::size_t>(j)) % h]];
      round.emplace_back(std::min(a, b), std::max(a, b));
    }
    sp.rounds.push_back(std::move(round));
  }
  for (const auto& host : sp.suspects) sp.suspect_of_rank[rank_of_host[host]] = host;
  // The named and the lossy links again, in rounds of their own (they need no healthy partner):
  // each link goes to the first of them where neither end is busy yet; its ends' ranks stand in
  // (a recheck pair names its link; suspect_of_rank is for the hosts met with partners only).
  const std::size_t link_rounds_from = sp.rounds.size();
  for (const auto& [ha, hb] : named_links) {
    const int a = rank_of_host[ha], b = rank_of_host[hb];
    const std::pair<int, int> pair{std::min(a, b), std::max(a, b)};
    std::size_t k = link_rounds_from;
    for (;; ++k) {
      if (k == sp.rounds.size()) sp.rounds.emplace_back();
      const auto& round = sp.rounds[k];
      const bool busy = std::any_of(round.begin(), round.end(), [&](const auto& p) {
        return p.first == a || p.second == a || p.first == b || p.second == b;
      });
      if (!busy) break;
    }
    sp.rounds[k].push_back(pair);
    sp.rechecks.insert(pair);
  }
  return sp;
}

Phase pairwise_phase(const PairwiseDecision& plan, const PairwiseRun& run) {
  Phase ph;
  ph.name = pairwise_phase_name(run.transport);
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
  if (run.second_rounds > 0)
    ph.detail += fmt::format(
        "; second pass: {} round{}{}{}{} ({} pair{} here, in {}, planned in {})",
        run.second_rounds, run.second_rounds == 1 ? "" : "s",
        run.second_suspects.empty()
            ? std::string()
            : fmt::format(" meeting {} again with hosts the first rounds found healthy",
                          fmt::join(run.second_suspects, ", ")),
        run.second_suspects.empty() || !run.second_rechecks ? "" : ", and",
        run.second_rechecks ? fmt::format(" measuring {} link{} again", run.second_rechecks,
                                          run.second_rechecks == 1 ? "" : "s")
                            : std::string(),
        run.second_pairs_here, run.second_pairs_here == 1 ? "" : "s",
        seconds_short(run.second_duration_s), seconds_short(run.second_plan_s)) +
        (run.second_late ? fmt::format(", {} not started: the budget was spent", run.second_late)
                         : std::string());
  else if (!run.second_why_none.empty())
    ph.detail += "; no second pass: " + run.second_why_none;
  // A failed pair is evidence about a link (judge_links names it: SLOW_HOST / SLOW_LINK), not a
  // failed run: the main step already said whether the collectives work. A pair can also fail on
  // its share of the budget alone (5% loss: SYN retries cost seconds).
  ph.status = failed > 0 ? PhaseStatus::degraded : PhaseStatus::pass;
  if (run.samples.empty() && run.rounds_late > 0 &&
      run.rounds_late + run.sat_out >= run.rounds_total)
    ph.status = PhaseStatus::not_run;  // the budget was spent before the first round
  return ph;
}

TransportsEnded summarize_transports(const std::vector<StepRecord>& records, int rank,
                                     const std::string& host) {
  TransportsEnded out;
  out.summary.rank = rank;
  out.summary.host = host;
  for (const auto& r : records)
    if (const auto* asked = std::get_if<AskedSeen>(&r.facts))
      for (const auto& name : asked->requested) {
        TransportSummary t;
        t.transport = name;
        out.summary.transports.push_back(std::move(t));
      }
  auto of = [&](const std::string& transport) -> TransportSummary* {
    for (auto& t : out.summary.transports)
      if (t.transport == transport) return &t;
    return nullptr;
  };
  auto read = [&](const Phase& p) {
    const auto id = PhaseId::parse(p.name);
    if (id.kind != PhaseKind::transport) return;
    if (p.status != PhaseStatus::not_run) out.ran = true;
    if (auto* t = of(id.transport)) {
      t->status = p.status;
      if (p.status == PhaseStatus::skipped || p.status == PhaseStatus::not_run) t->skipped_why = p.detail;
    }
  };
  for (const auto& r : records)
    if (const auto* taken = std::get_if<StepTakenSeen>(&r.facts))
      for (const auto& p : taken->not_run) read(p);
  for (const auto& r : records) {
    const auto* step = std::get_if<TransportsSeen>(&r.facts);
    if (!step) continue;
    // The transports step's outcomes judged again (pure: the same rules judge_local applied).
    auto judged = judge_transports(step->outcomes, step->ctx);
    for (const auto& p : judged.phases) read(p);
    for (const auto& f : judged.findings) {
      const auto id = PhaseId::parse(f.subject.phase);
      auto* t = id.kind == PhaseKind::transport ? of(id.transport) : nullptr;
      if (!t) continue;
      if (f.code == Code::TRANSPORT_TIMEOUT) t->timed_out = true;
      if (f.code == Code::PEER_LOST) t->peer_lost = true;
    }
    for (const auto& o : step->outcomes)
      if (auto* t = of(o.name); t && o.links && !o.not_built && !o.not_started) t->link_stats = o.links;
    for (auto& row : judged.rows) out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace ncclsmoke::results
