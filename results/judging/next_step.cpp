#include "results/judging/next_step.h"

#include <fmt/format.h>

#include "results/judging/run_rules.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::results {

namespace {

bool has(const std::vector<Code>& codes, Code c) {
  return std::find(codes.begin(), codes.end(), c) != codes.end();
}

std::string ranks_word(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", rank_runs(ranks));
}

NextStep go(Step s) {
  NextStep n;
  n.step = s;
  return n;
}

NextStep finish(std::string why) {
  NextStep n;
  n.step = Step::finish;
  n.reason = std::move(why);
  return n;
}

// The pairwise step, or finish with its phases not run.
NextStep after_transports(const JudgedSoFar& judged, const RunMoment& now, NextStep n) {
  if (judged.pairwise_ask.mode == PairwiseRequest::never || judged.requested.empty()) {
    n.step = Step::finish;
    if (n.reason.empty())
      n.reason = judged.requested.empty() ? "no transport was asked for" : "--pairwise=never";
    return n;
  }
  std::string why;
  if (now.steps_left_s <= 0)
    why = "the run reached its --timeout before the pairwise rounds";
  else if (now.live.store_frozen || (judged.world.rank != 0 && now.live.rank0_stopped))
    why = "the store (rank 0) stopped answering";
  if (why.empty()) {
    n.step = Step::pairwise;
    return n;
  }
  n.passed_over.push_back(Step::pairwise);
  for (const auto& t : judged.requested) {
    Phase ph = not_run_phase(pairwise_phase_name(t), why);
    ph.required = false;
    n.not_run.push_back(std::move(ph));
  }
  n.step = Step::finish;
  n.reason = why;
  return n;
}

// What rank 0's summaries step gathered, as the pairwise decision reads it. A rank 0 whose
// transports did not run (listed not run) has only its own summary: no rounds.
PairwiseInputs pairwise_inputs(const JudgedSoFar& judged) {
  const auto& g = judged.pairwise_gathered;
  PairwiseInputs in;
  in.requested = judged.requested;
  in.world_size = judged.world.world_size;
  in.transports_ran = g.gathered && g.transports_ran;
  in.summaries = g.summaries;
  if (in.transports_ran) {
    in.rows = g.rows;
    in.profile = g.profile;
    in.stopped = g.stopped;
    in.cannot_pair = g.cannot_pair;
    in.ranks = judged.roster;
  }
  return in;
}

}  // namespace

std::string_view name(Step s) {
  switch (s) {
    case Step::world: return "world";
    case Step::rendezvous: return "rendezvous";
    case Step::mesh: return "mesh";
    case Step::transports: return "transports";
    case Step::pairwise: return "pairwise";
    case Step::pairwise_rounds: return "pairwise rounds";
    case Step::finish: return "finish";
  }
  return "finish";
}

std::string transports_blocked_reason(const JudgedSoFar& judged) {
  const auto& j = judged.join;
  const auto& m = judged.mesh;
  std::vector<std::string> causes;
  if (!j.missing.empty())
    causes.push_back(fmt::format("{} never joined", ranks_word(j.missing)));
  else if (!j.roster_received || j.world_size_conflict || j.rank_taken)
    causes.push_back("the join did not complete");
  else if (static_cast<int>(j.present.size()) != judged.world.world_size)
    causes.push_back(fmt::format("{} of {} ranks joined", j.present.size(), judged.world.world_size));
  if (!judged.excluded.empty())
    causes.push_back(fmt::format("{} on hosts set aside (HOST_EXCLUDED)", ranks_word(judged.excluded)));
  if (judged.mesh_status == PhaseStatus::fail) {
    std::vector<std::string> mesh;
    if (m.mtu_black_holes > 0 || has(judged.mesh_errors, Code::MTU_MISMATCH))
      mesh.push_back(fmt::format("{} path{} black-holed full-MTU packets (MTU_MISMATCH)",
                                 m.mtu_black_holes, m.mtu_black_holes == 1 ? "" : "s"));
    if (!m.blocked_pairs.empty() || has(judged.mesh_errors, Code::MESH_BLOCKED))
      mesh.push_back(fmt::format("{} pair{} blocked (MESH_BLOCKED)", m.blocked_pairs.size(),
                                 m.blocked_pairs.size() == 1 ? "" : "s"));
    if (!m.silent_ranks.empty())
      mesh.push_back(fmt::format("{} stopped answering", ranks_word(m.silent_ranks)));
    std::vector<std::string> others;
    for (Code c : judged.mesh_errors)
      if (c != Code::MTU_MISMATCH && c != Code::MESH_BLOCKED) {
        auto text = to_string(c);
        if (std::find(others.begin(), others.end(), text) == others.end())
          others.push_back(std::move(text));
      }
    if (!others.empty()) mesh.push_back(fmt::format("{}", fmt::join(others, ", ")));
    causes.push_back(mesh.empty() ? std::string("the mesh phase failed")
                                  : fmt::format("the mesh failed: {}", fmt::join(mesh, "; ")));
  }
  if (causes.empty()) return "";
  return fmt::format("{}", fmt::join(causes, "; "));
}

NextStep next_step(const JudgedSoFar& judged, const RunMoment& now) {
  if (!judged.has_passed(Step::world)) return go(Step::world);
  if (!judged.world.ok) return finish("the world could not be discovered or its configuration was refused");
  if (!judged.has_passed(Step::rendezvous)) return go(Step::rendezvous);
  const auto& j = judged.join;
  if (!j.joined) return finish("the rendezvous stopped before the join completed");
  if (!j.roster_received) return finish("rank 0 never published the roster");
  if (j.world_size_conflict) return finish("rank 0 announced another world size");
  if (j.rank_taken) return finish("another process holds this rank");
  if (!judged.excluded.empty())
    return finish(fmt::format("{} on hosts set aside (HOST_EXCLUDED): no mesh, no transport",
                              ranks_word(judged.excluded)));
  if (!judged.has_passed(Step::mesh)) return go(Step::mesh);
  if (!judged.has_passed(Step::transports) && !judged.requested.empty()) {
    std::string blocked = transports_blocked_reason(judged);
    if (blocked.empty()) return go(Step::transports);
    NextStep n;
    n.reason = blocked;
    n.passed_over.push_back(Step::transports);
    for (const auto& t : judged.requested) n.not_run.push_back(not_run_phase(transport_phase_name(t), blocked));
    return after_transports(judged, now, std::move(n));
  }
  if (!judged.has_passed(Step::pairwise)) return after_transports(judged, now, NextStep{});
  if (!judged.has_passed(Step::pairwise_rounds)) {
    NextStep n = go(Step::pairwise_rounds);
    if (judged.world.rank == 0) n.pairwise_plan = decide_pairwise(pairwise_inputs(judged), judged.pairwise_ask);
    return n;
  }
  return finish("");
}

StepTakenSeen taken(const NextStep& next) {
  return {next.step, next.passed_over, next.not_run};
}

}  // namespace ncclsmoke::results
