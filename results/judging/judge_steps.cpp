// judge_local over a step's records (judge_run.h, step_records.h): each kind of record goes to
// its one rule; the phase a record ends gets the rule's status.
#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "results/judging/judge_run.h"
#include "results/judging/link_rules.h"
#include "results/judging/next_step.h"
#include "results/judging/nic_rules.h"
#include "results/judging/node_rules.h"
#include "results/judging/pairwise_rules.h"
#include "results/judging/probe_rules.h"
#include "results/judging/run_rules.h"
#include "results/judging/set_aside_rules.h"
#include "results/judging/transport_rules.h"

namespace ncclsmoke::results {

namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// What one record means: its findings, and for a record that ends a phase, the status (and a
// detail the rule words, where the step left it to the rule).
struct Judged {
  std::vector<Finding> findings;
  std::optional<PhaseStatus> status;
  std::string detail;
  std::vector<Phase> phases;  // phases a record ends besides its own (the transports')
  bool stopped = false;       // the step stopped on findings[0], its cause
};

Judged stopped_on(Finding cause) {
  Judged j;
  j.status = stopped_phase_status(cause);
  j.stopped = true;
  j.findings.push_back(std::move(cause));
  return j;
}

bool has_phase(const Verdict& v, const std::string& name) {
  return std::any_of(v.phases.begin(), v.phases.end(),
                     [&](const Phase& p) { return p.name == name; });
}

TransportIdentity& identity_of(Verdict& v, const std::string& transport, int rank) {
  auto& ids = v.identities;
  auto it = std::find_if(ids.begin(), ids.end(), [&](const TransportIdentity& id) {
    return id.transport == transport && id.rank == rank;
  });
  if (it != ids.end()) return *it;
  TransportIdentity id;
  id.transport = transport;
  id.rank = rank;
  ids.push_back(std::move(id));
  return ids.back();
}

Judged judge_record(Verdict& v, const StepRecord& r) {
  return std::visit(
      Overloaded{
          [](const ConfigSeen& c) {
            Judged j;
            for (const auto& p : c.problems) {
              auto f = config_finding(p);
              if (c.rank >= 0) f.ranks.push_back(c.rank);
              f.hosts.push_back(c.host);
              j.findings.push_back(std::move(f));
            }
            return j;
          },
          [](const ProfileProblemSeen& p) {
            Judged j;
            j.findings.push_back(
                !p.error.empty()
                    ? profiles_unreadable_finding(p.self, p.profiles_file, p.error)
                    : profile_unknown_finding(p.self, p.profile, p.profiles_file, p.names));
            return j;
          },
          [](const WorldEndSeen& w) {
            Judged j;
            j.status = world_phase_status(w.problems, w.world_built, w.accepted);
            return j;
          },
          // What the run asked for and what rank 0 gathered are next_step's inputs; they say
          // nothing of their own in the verdict.
          [](const AskedSeen&) { return Judged{}; },
          [](const PairwiseGatheredSeen&) { return Judged{}; },
          // The phases of the steps passed over join the verdict not run.
          [](const StepTakenSeen& s) {
            Judged j;
            j.phases = s.not_run;
            return j;
          },
          [](const StorePortSeen& s) {
            return stopped_on(store_port_finding(s.rank0, s.job_id, s.port, s.error, s.holder));
          },
          [](const StoreConnectSeen& s) {
            return stopped_on(connect_finding(s.failure, s.ctx, s.waited_s));
          },
          [](const StoreLostSeen& s) { return stopped_on(lost_finding(s.failure, s.ctx, s.during)); },
          [](const ForeignStore& s) { return stopped_on(store_foreign_job_finding(s)); },
          [](const StoreFull& s) {
            Judged j;
            j.findings.push_back(store_full_finding(s));
            return j;
          },
          [](const JoinSeen& s) {
            Judged j;
            j.findings = join_findings(s.join, s.ctx, s.join_timeout_s);
            j.status = rendezvous_phase_status(s.join);
            return j;
          },
          [](const SetAsideSeen& s) {
            auto excluded = excluded_ranks(s.roster, s.list);
            if (excluded.empty()) {
              Judged j;
              j.status = PhaseStatus::pass;
              j.detail = fmt::format("no rank's host or node is among the {} set aside",
                                     s.list.entries.size());
              return j;
            }
            Judged j = stopped_on(host_excluded_finding(excluded));
            j.detail = fmt::format("{} of {} ranks on hosts set aside", excluded.size(),
                                   s.roster.size());
            return j;
          },
          [](const MeshNotRunSeen& s) { return stopped_on(mesh_not_run_finding(s.self, s.error)); },
          [&v](const MeshSeen& s) {
            MeshJudgement judged = judge_mesh(s.mesh, s.ctx, s.hosts);
            for (int rank : s.mesh.silent_ranks)
              mark_rank(v, rank, RankStatus::lost, "stopped answering after joining");
            auto outcome = mesh_outcome_with_stopped({judged.status, judged.detail}, s.stopped,
                                                     s.set_aside_stopped);
            Judged j;
            j.findings = std::move(judged.findings);
            j.status = outcome.status;
            j.detail = outcome.detail;
            return j;
          },
          [&v](const TransportsSeen& s) {
            auto out = judge_transports(s.outcomes, s.ctx);
            if (s.wait_chain) attach_wait_chain(out.findings, *s.wait_chain);
            for (auto& row : out.rows) v.transports.push_back(std::move(row));
            for (auto& id : out.identities) v.identities.push_back(std::move(id));
            Judged j;
            j.findings = std::move(out.findings);
            j.phases = std::move(out.phases);
            return j;
          },
          [&v](const PairwiseRunSeen& s) {
            write_pair_samples(identity_of(v, s.run.transport, s.run.rank).observed,
                               s.run.samples);
            Judged j;
            j.phases.push_back(pairwise_phase(s.plan, s.run));
            return j;
          },
          [](const PairwiseNotRunSeen& s) {
            Judged j;
            j.phases.push_back(pairwise_not_run_phase(s.transport, s.why, s.skipped));
            return j;
          },
          [&v](const PeerLostSeen& s) {
            note_peer_lost(v, s.lost, s.seen_by);
            return Judged{};
          },
          [&v](const PeerSilentSeen& s) {
            note_peer_silent(v, s.silent, s.this_rank);
            return Judged{};
          },
          [&v](const PeerResumedSeen& s) {
            note_peer_resumed(v, s.silent);
            return Judged{};
          },
          [](const KernelLogSeen& s) {
            Judged j;
            j.findings = xid_findings(s.log, s.self);
            return j;
          },
          [&v](const GpuHealthSeen& s) {
            v.gpus = s.gpus;
            Judged j;
            j.findings = gpu_health_findings(s.gpus, s.self);
            return j;
          },
          [&v](const NicsSeen& s) {
            v.nics = s.nics;
            Judged j;
            j.findings = nic_error_findings(s.nics, s.self);
            return j;
          },
          [&v](const RunTimeoutSeen& s) {
            Judged j;
            j.findings.push_back(run_timeout_finding(
                s.self, s.timeout_s, v.phases.empty() ? "none" : v.phases.back().name));
            return j;
          },
          [&v](const WorldSeen& s) {
            v.reporting_rank = s.rank;
            StoreInfo store = std::move(v.world.store);
            v.world = s.world;
            v.world.store = std::move(store);
            return Judged{};
          },
          [&v](const StoreInfoSeen& s) {
            v.world.store = s.store;
            return Judged{};
          },
          [&v](const RunIdSeen& s) {
            v.run_id = s.run_id;
            return Judged{};
          },
          [&v](const RosterSeen& s) {
            auto& ranks = v.ranks;
            ranks = s.present;
            RankInfo missing;
            missing.status = RankStatus::missing;
            missing.detail = "never joined";
            add_rank_ranges(ranks, s.missing, missing);  // a range per run: size ~ joined ranks
            std::sort(ranks.begin(), ranks.end(),
                      [](const auto& a, const auto& b) { return a.rank < b.rank; });
            return Judged{};
          },
          [&v](const RunTerminatedSeen& s) {
            Judged j;
            j.findings.push_back(run_terminated_finding(
                s.self, s.signal_name, s.after_s,
                v.phases.empty() ? "none" : v.phases.back().name, s.cause));
            return j;
          },
      },
      r.facts);
}

}  // namespace

std::vector<Phase> judge_local(Verdict& v, const std::vector<StepRecord>& records) {
  std::vector<Phase> added;
  auto add_phase = [&](Phase p) {
    if (has_phase(v, p.name)) return;
    v.phases.push_back(p);
    added.push_back(std::move(p));
  };
  for (const auto& r : records) {
    Judged j = judge_record(v, r);
    for (auto& f : j.findings) v.findings.push_back(std::move(f));
    if (!r.phase.empty() && j.status) {
      Phase p;
      p.name = r.phase;
      p.status = *j.status;
      p.duration_s = r.duration_s;
      p.detail = !r.detail.empty() ? r.detail : j.detail;
      add_phase(std::move(p));
    }
    for (auto& p : j.phases) add_phase(std::move(p));
  }
  return added;
}

JudgedSoFar judged_so_far(const std::vector<StepRecord>& records) {
  JudgedSoFar out;
  Verdict scratch;  // the rules' side effects on a verdict (ranks marked lost) stay here
  for (const auto& r : records) {
    if (const auto* s = std::get_if<WorldSeen>(&r.facts)) {
      out.world.rank = s->rank;
      out.world.world_size = s->world.size;
    }
    if (const auto* s = std::get_if<WorldEndSeen>(&r.facts))
      out.world.ok = s->world_built && s->accepted;
    if (const auto* s = std::get_if<AskedSeen>(&r.facts)) {
      out.requested = s->requested;
      out.pairwise_ask = s->pairwise;
    }
    if (const auto* s = std::get_if<StepTakenSeen>(&r.facts)) {
      for (Step p : s->passed_over) out.passed.push_back(p);
      for (const auto& p : s->not_run) out.passed_over.push_back(p);
      if (s->step != Step::finish) out.passed.push_back(s->step);
    }
    if (const auto* s = std::get_if<PairwiseGatheredSeen>(&r.facts)) out.pairwise_gathered = s->gathered;
    if (const auto* s = std::get_if<SetAsideSeen>(&r.facts))
      for (const auto& e : excluded_ranks(s->roster, s->list)) out.excluded.push_back(e.rank);
    if (const auto* s = std::get_if<JoinSeen>(&r.facts)) {
      out.join.joined = true;
      out.join.roster_received = s->join.roster_received;
      out.join.world_size_conflict = s->join.master_world_size.has_value();
      out.join.rank_taken = s->join.rank_taken_by.has_value();
      out.join.missing = s->join.missing;
    }
    if (const auto* s = std::get_if<RosterSeen>(&r.facts)) {
      out.roster = s->present;
      out.join.present.clear();
      for (const auto& e : s->present)
        for (int k = e.rank; k <= std::max(e.rank, e.through); ++k) out.join.present.push_back(k);
      std::sort(out.join.present.begin(), out.join.present.end());
    }
    if (const auto* s = std::get_if<MeshSeen>(&r.facts)) {
      out.mesh.mtu_black_holes = s->mesh.mtu_black_holes_total;
      out.mesh.blocked_pairs.clear();
      for (const auto& f : s->mesh.failures) out.mesh.blocked_pairs.emplace_back(f.from, f.to);
      out.mesh.silent_ranks = s->mesh.silent_ranks;
    }
    if (r.phase != "mesh") continue;
    Judged j = judge_record(scratch, r);
    if (!j.status) continue;
    out.mesh_status = *j.status;
    for (const auto& f : j.findings)
      if (j.stopped || f.severity == Severity::error) out.mesh_errors.push_back(f.code.code());
  }
  return out;
}

}  // namespace ncclsmoke::results
