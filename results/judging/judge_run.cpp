#include "results/judging/judge_run.h"

#include <algorithm>
#include <stdexcept>

#include "rendezvous/rank_ref.h"
#include "results/judging/classify.h"
#include "results/judging/config_skew_rule.h"
#include "results/judging/judge.h"
#include "results/judging/link_rules.h"
#include "results/judging/lossy_path_rule.h"
#include "results/judging/merge.h"
#include "results/judging/nic_rules.h"
#include "results/judging/node_rules.h"
#include "results/judging/run_rules.h"

namespace ncclsmoke::results {

void judge_local(Verdict& v, const LocalFacts& facts) {
  list_phases_not_run(v.phases);
  note_store_tampered(v.findings, {facts.rank, facts.host}, facts.store, facts.tampered);
  demote_consequences(v.findings, facts.watch_lost, facts.rank0_hosts_store);
  explain_by_node_faults(v.findings);
  attach_nic_evidence(v.findings);
  v.duration_s = facts.duration_s;
  apply_verdict(v);
}

Verdict judge_world(std::vector<Verdict> views, const WorldRoster& roster, const Profile* profile) {
  if (views.empty()) throw std::invalid_argument("judge_world: no local views");
  for (std::size_t i = 1; i < views.size() && i - 1 < roster.posted_as.size(); ++i) {
    const int rank = roster.posted_as[i - 1];
    if (std::find(roster.taken_for_dead.begin(), roster.taken_for_dead.end(), rank) !=
        roster.taken_for_dead.end())
      explained_by_itself(views.front(), views[i], rank);
  }
  if (!roster.joined.empty()) set_aside_disproved_views(views, roster.posted_as, roster.joined);
  note_store_tampered(views.front().findings, {roster.reporting_rank, roster.reporting_host},
                      roster.store, roster.tampered);
  std::vector<UnreportedRank> unreported;
  unreported.reserve(roster.unreported.size());
  for (const auto& r : roster.unreported)
    unreported.push_back({rendezvous::RankRef{r.rank, r.host}, r.seen_alive});
  name_unreported_ranks(views.front(), unreported, roster.gathered_s);
  for (const auto& u : roster.unreadable)
    name_unreadable_post(views.front(), rendezvous::RankRef{u.rank, u.host}, u.key, u.problem);
  MergeOptions mo;
  mo.reporting_rank = roster.reporting_rank;
  mo.world_size = roster.world_size;
  for (const auto& r : roster.unreported)
    if (r.seen_alive) mo.alive_at_end.push_back(r.rank);
  Verdict global = merge_rank_verdicts(views, mo);
  global.duration_s = roster.duration_s;
  // Per-link evidence needs no baseline: every run compares a host's links with its other links.
  add_judged_findings(global.findings, judge_links(global));
  // The first run's expectation: what the slowest interface says it can carry.
  add_judged_findings(global.findings, judge_line_rate(global));
  // Ranks that run another stack or other settings than the rest (each rank's own view); a
  // variable the profile's environment policy names is judged against the policy instead.
  auto configs = rank_configs(views);
  if (profile)
    for (auto& c : configs)
      for (const auto& [name, wanted] : profile->environment) c.variables.erase(name);
  add_judged_findings(global.findings, judge_config_skew(configs));
  // Loss so heavy that the links were never measured is still seen by the liveness watches, but
  // not through a witness whose own path is suspect; and a host named now can discount more.
  discount_suspect_witnesses(global);
  add_judged_findings(global.findings, judge_lossy_paths(global));
  explain_by_slow_hosts(global.findings);
  // An RDMA port down where the other hosts have it up (each rank's own view).
  add_judged_findings(global.findings, judge_nic_ports(host_ports(views)));
  // A node whose NVML lists fewer GPUs than most nodes' does.
  add_judged_findings(global.findings, judge_gpu_counts(views));
  // A GPU that fell off the bus, or a link that went down, explains the hang on its rank, and
  // what followed; a device's moved counters are evidence beside the link and host findings.
  explain_by_node_faults(global.findings);
  attach_nic_evidence(global.findings);
  discount_suspect_witnesses(global);
  if (profile) {
    add_judged_findings(global.findings, judge(global, profile));
    add_judged_findings(global.findings, judge_env_policy(views, *profile));
    global.baseline = baseline_record(profile, global);
  }
  apply_verdict(global);
  return global;
}

}  // namespace ncclsmoke::results
