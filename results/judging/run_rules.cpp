#include "results/judging/run_rules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "rendezvous/seconds_text.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {

using rendezvous::RankRef;

namespace {

bool is_store_finding(const Finding& f) {
  return f.code == Code::RENDEZVOUS_LOST || f.code == Code::RENDEZVOUS_STALLED;
}

std::string job_text(std::string_view id) { return id.empty() ? "(none)" : std::string(id); }

// A finding about a lost or frozen rank: the peer is its subject, the witness a reporter (no
// reporter host: witnesses on several hosts see the same loss).
Subject lost_subject(int rank, std::string_view host, int seen_by) {
  Subject s;
  s.peer = rank;
  s.peer_host = std::string(host);
  if (seen_by >= 0) s.reporters = {seen_by};
  return s;
}

}  // namespace

bool names_rank(const std::vector<Finding>& findings, Code code, int rank) {
  return std::any_of(findings.begin(), findings.end(), [&](const Finding& f) {
    return f.code == code && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end();
  });
}

// ---- liveness watch ----------------------------------------------------------------------------

Finding peer_lost_finding(const LostPeerFact& lost, RankRef seen_by) {
  // The witness stays literal: merge_rank_verdicts joins PEER_LOST by the rank lost, and lists
  // every witness in evidence.reported_by.
  auto f = make_finding_about(
      Code::PEER_LOST, lost_subject(lost.rank, lost.host, seen_by.rank),
      fmt::format("{{peer}} {} mid-run, seen by {} {} after the liveness watch started: the "
                  "process died (killed, crashed, OOM) or its host went away",
                  lost.how, seen_by, rendezvous::seconds_text_fine(lost.after_s)),
      {lost.rank}, {lost.host});
  f.evidence = nlohmann::json{{"source", "liveness watch"}, {"how", lost.how},
                              {"after_s", lost.after_s}};
  f.origin = FindingOrigin::liveness_watch;
  return f;
}

Finding peer_stalled_finding(const SilentPeerFact& s, int this_rank) {
  const int seen_by = s.seen_by < 0 ? this_rank : s.seen_by;
  if (s.retransmits > 0) {
    // Loss is not death: its kernel did not acknowledge our heartbeats either, so the path, not
    // the process, went quiet. A warning that names the loss; the per-link rules name the host.
    Subject about = lost_subject(s.rank, s.host, seen_by);
    about.item = "lossy path";  // apart from a frozen-process PEER_STALLED in merge and dedupe
    auto f = make_finding_about(
        Code::PEER_STALLED, about,
        fmt::format("{{peer}} was not heard for {} (liveness heartbeats) while rank {}'s "
                    "connection to it retransmitted {} segments: packet loss on the path to its "
                    "host, not a frozen process",
                    rendezvous::seconds_text_fine(s.silent_for_s), seen_by, s.retransmits),
        {s.rank}, {s.host});
    f.severity = Severity::warning;
    f.evidence = nlohmann::json{{"silent_for_s", s.silent_for_s}, {"seen_by", s.seen_by},
                                {"how", s.how}, {"retransmits", s.retransmits}};
    f.origin = FindingOrigin::lossy_path;
    return f;
  }
  auto f = make_finding_about(
      Code::PEER_STALLED, lost_subject(s.rank, s.host, seen_by),
      fmt::format("{{peer}} stopped answering for {} (not even the liveness heartbeat) while its "
                  "connections stayed open, seen by rank {}: frozen (SIGSTOP, a debugger), "
                  "swapping or starved",
                  rendezvous::seconds_text_fine(s.silent_for_s), seen_by),
      {s.rank}, {s.host});
  f.evidence = nlohmann::json{{"silent_for_s", s.silent_for_s}, {"seen_by", s.seen_by},
                              {"how", s.how}};
  return f;
}

bool from_liveness_watch(const Finding& f) {
  return f.code == Code::PEER_LOST && f.origin == FindingOrigin::liveness_watch;
}

void mark_rank(Verdict& v, int rank, RankStatus status, const std::string& detail) {
  for (auto& ri : v.ranks)
    if (ri.rank == rank) {
      ri.status = status;
      ri.detail = detail;
    }
}

void note_peer_lost(Verdict& v, const LostPeerFact& lost, RankRef seen_by) {
  if (!names_rank(v.findings, Code::PEER_LOST, lost.rank))
    v.findings.push_back(peer_lost_finding(lost, seen_by));
  mark_rank(v, lost.rank, RankStatus::lost, fmt::format("died mid-run ({})", lost.how));
}

void note_peer_silent(Verdict& v, const SilentPeerFact& s, int this_rank) {
  if (names_rank(v.findings, Code::PEER_STALLED, s.rank)) return;
  v.findings.push_back(peer_stalled_finding(s, this_rank));
  if (s.retransmits > 0) return;  // a lossy path, the rank itself is not failed
  for (auto& ri : v.ranks)
    if (ri.rank == s.rank && ri.status == RankStatus::joined) {
      ri.status = RankStatus::failed;
      ri.detail = "stopped answering (frozen or starved)";
    }
}

void note_peer_resumed(Verdict& v, const SilentPeerFact& s) {
  for (auto& f : v.findings)
    if (f.code == Code::PEER_STALLED && f.ranks == std::vector<int>{s.rank} && f.severity == Severity::error) {
      f.severity = Severity::warning;
      set_message_template(f, fmt::format("{{peer}} was unresponsive for {} (no liveness "
                                          "heartbeat), then answered again: frozen for a while, "
                                          "swapping or starved",
                                          rendezvous::seconds_text_fine(s.silent_for_s)));
    }
  for (auto& ri : v.ranks)
    if (ri.rank == s.rank && ri.status == RankStatus::failed && ri.detail.rfind("stopped answering", 0) == 0) {
      ri.status = RankStatus::joined;
      ri.detail.clear();
    }
}

void demote_consequences(std::vector<Finding>& findings, const std::set<int>& watch_lost,
                         bool rank0_hosts_store) {
  std::vector<int> stalled;
  for (const auto& f : findings)
    if ((f.code == Code::PEER_STALLED || from_liveness_watch(f)) && f.severity == Severity::error)
      stalled.insert(stalled.end(), f.ranks.begin(), f.ranks.end());
  if (stalled.empty()) return;
  auto is_stalled = [&](int r) { return std::find(stalled.begin(), stalled.end(), r) != stalled.end(); };
  const std::string who = fmt::format("rank {}", fmt::join(stalled, ", "));
  for (auto& f : findings) {
    bool about_stalled = std::any_of(f.ranks.begin(), f.ranks.end(), is_stalled);
    // A store finding (lost, stalled) is about rank 0 when rank 0 hosts the store.
    if (is_store_finding(f) && rank0_hosts_store && is_stalled(0)) about_stalled = true;
    bool consequence = f.code == Code::PEER_LOST || f.code == Code::TRANSPORT_TIMEOUT ||
                       (is_store_finding(f) && about_stalled) ||
                       (f.code == Code::TRANSPORT_INIT_FAILED && about_stalled);
    if (f.code == Code::PEER_STALLED || !consequence || f.severity != Severity::error) continue;
    // It also died: that stays. A mesh guess "stopped answering" about a rank the watch saw
    // frozen (alive, silent) is a consequence of PEER_STALLED.
    bool frozen_not_dead = f.code == Code::PEER_LOST && !from_liveness_watch(f) &&
                           std::all_of(f.ranks.begin(), f.ranks.end(), [&](int r) {
                             return names_rank(findings, Code::PEER_STALLED, r) && !watch_lost.count(r);
                           });
    if (f.code == Code::PEER_LOST && about_stalled && !frozen_not_dead) continue;
    f.severity = Severity::info;
    wrap_message(f, fmt::format("a consequence of {} stopping (frozen or dead): ", who), "");
    if (!f.evidence.is_object()) f.evidence = nlohmann::json::object();
    f.evidence["consequence_of"] = stalled;
  }
}

void attach_wait_chain(std::vector<Finding>& findings, const WaitChainEvidence& e) {
  for (auto& f : findings) {
    if (f.code != Code::TRANSPORT_TIMEOUT && !(f.code == Code::PEER_LOST && e.reaches_stopped)) continue;
    if (!f.evidence.is_object()) f.evidence = nlohmann::json::object();
    f.evidence["wait_states"] = e.wait_states;
    f.evidence["wait_chain"] = {{"path", e.chain.path},
                                {"root", e.chain.root ? *e.chain.root : -1},
                                {"root_reason", e.chain.root_reason},
                                {"cycle", e.chain.cycle}};
    if (e.chain.path.size() > 1) wrap_message(f, "", fmt::format("; wait chain: {}", e.text));
  }
}

// ---- the run's endings -------------------------------------------------------------------------

Finding run_timeout_finding(RankRef self, double timeout_s, std::string_view last_phase) {
  return make_finding_about(
      Code::RUN_TIMEOUT, reported_by(self, {}, fmt::format("after {}", last_phase)),
      fmt::format("{{reporter}} did not finish within --timeout {}s", timeout_s),
      {self.rank}, {std::string(self.host)},
      {{"phase", last_phase == "none" ? std::string("the first phase (world)")
                                      : fmt::format("the phase after {}", last_phase)}});
}

Finding run_timeout_during(RankRef self, double timeout_s, std::string_view phase, double ran_s) {
  return make_finding_about(Code::RUN_TIMEOUT, reported_by(self, std::string(phase)),
                            fmt::format("{{reporter}} did not finish within --timeout {}s: {} was "
                                        "still running after {}",
                                        timeout_s, phase, rendezvous::seconds_text(ran_s)),
                            {self.rank}, {std::string(self.host)}, {{"phase", std::string(phase)}});
}

Finding run_terminated_finding(RankRef self, std::string_view signal_name, double after_s,
                               std::string_view last_phase, const TerminationCause& cause) {
  return make_finding_about(Code::RUN_TERMINATED,
                            reported_by(self, {}, std::string(signal_name)),
                            fmt::format("{{reporter}} was stopped by {} after {}; last phase "
                                        "finished: {}; likely sender: {}",
                                        signal_name, rendezvous::seconds_text(after_s), last_phase,
                                        cause.sender),
                            {self.rank}, {std::string(self.host)},
                            {{"deadline_fix", cause.deadline_fix}});
}

// ---- store and configuration -------------------------------------------------------------------

Finding store_tampered_finding(RankRef reader, std::string_view master,
                               const TamperedValueFact& value) {
  auto f = make_finding_about(
      Code::STORE_TAMPERED, reported_by(reader, "store", value.key),
      fmt::format("{{reporter}} refused the store key '{}': its value failed the job token's "
                  "verification ({}); it was treated as not there",
                  value.key, value.why),
      {reader.rank}, {std::string(reader.host)},
      {{"master", master.empty() ? std::string("MASTER_ADDR:MASTER_PORT") : std::string(master)},
       {"key", value.key}});
  f.evidence = nlohmann::json{{"key", value.key}, {"why", value.why}};
  return f;
}

void note_store_tampered(std::vector<Finding>& findings, RankRef reader, std::string_view master,
                         const std::vector<TamperedValueFact>& values) {
  for (const auto& value : values) {
    const bool named = std::any_of(findings.begin(), findings.end(), [&](const Finding& f) {
      return f.code == Code::STORE_TAMPERED && f.subject.item == value.key &&
             std::find(f.subject.reporters.begin(), f.subject.reporters.end(), reader.rank) !=
                 f.subject.reporters.end();
    });
    if (!named) findings.push_back(store_tampered_finding(reader, master, value));
  }
}

Finding store_foreign_job_finding(const ForeignStore& s) {
  auto f = make_finding_about(
      Code::STORE_FOREIGN_JOB, reported_by(s.self, "rendezvous", std::string(s.store)),
      fmt::format("{{reporter}} of job {}{} reached the store at {} after {}, but it belongs to "
                  "job {} (world size {}, rank 0 on host {}, pid {}); this rank did not join it",
                  job_text(s.this_job),
                  s.job_id_source.empty() ? std::string() : fmt::format(" (from {})", s.job_id_source),
                  s.store, rendezvous::seconds_text(s.waited_s), job_text(s.other_job),
                  s.other_world_size, s.other_host, s.other_pid),
      {s.self.rank}, {std::string(s.self.host)},
      {{"port", std::to_string(s.port)},
       {"this_job", job_text(s.this_job)},
       {"other_job", job_text(s.other_job)}});
  f.evidence = nlohmann::json{{"store", s.store},
                              {"this_job", s.this_job},
                              {"other_job", s.other_job},
                              {"other_world_size", s.other_world_size},
                              {"other_host", s.other_host}};
  return f;
}

namespace {
// 1048576 -> "1,048,576"
std::string grouped_number(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string store_full_what(const StoreFull& s) {
  if (s.limit == "max_stored_keys")
    return fmt::format("holds {} keys, its {} limit", grouped_number(s.in_use), s.flag);
  if (s.limit == "max_connections")
    return fmt::format("has {} connections open, its {} limit", grouped_number(s.in_use), s.flag);
  return fmt::format("holds {} bytes of keys, values, registrations and buffers, against its {} "
                     "limit of {}",
                     grouped_number(s.in_use), s.flag, grouped_number(s.value));
}
}  // namespace

Finding store_full_finding(const StoreFull& s) {
  std::string peer = s.last_peer.empty() ? std::string("(not known)") : s.last_peer;
  auto f = make_finding_about(
      Code::STORE_FULL, reported_by(s.rank0, "rendezvous", s.flag),
      fmt::format("{} {} ({} {}): it refused {} request(s) or "
                  "connection(s), the last from {}; a client refused there sees its connection "
                  "closed or refused, not the reason",
                  s.external_store.empty()
                      ? std::string("the store served by {reporter}")
                      : fmt::format("the store at {} (served apart; its status key read by "
                                    "{{reporter}})",
                                    s.external_store),
                  store_full_what(s), s.limit, s.value, grouped_number(s.refusals), peer),
      {s.rank0.rank}, {std::string(s.rank0.host)},
      {{"flag", s.flag}, {"value", std::to_string(s.value)}, {"peer", peer}});
  f.evidence = nlohmann::json{{"limit", s.limit},   {"flag", s.flag},
                              {"value", s.value},   {"in_use", s.in_use},
                              {"refusals", s.refusals}, {"job_refusals", s.job_refusals},
                              {"last_peer", s.last_peer}};
  if (s.job_refusals == 0 && s.job_unharmed) {
    // The job's reserve held (rendezvous/tcp_server_reserve.h): name the filler, fail nothing.
    f.severity = Severity::warning;
    wrap_message(f, "",
                 "; none of the job's own ranks was refused (every rank joined, within the room "
                 "the store keeps for the job): something outside the job is filling the store");
  }
  return f;
}

Finding store_port_finding(RankRef rank0, std::string_view job_id, int port, std::string_view error,
                           std::string_view holder) {
  std::string fix =
      holder.empty()
          ? "Another process holds MASTER_PORT on rank 0's host (a previous run, another job's "
            "store, torchrun's agent store without TORCHELASTIC_USE_AGENT_STORE?): pick a free "
            "MASTER_PORT or stop that process."
          : "Two jobs use one MASTER_PORT on this host: give each job its own (under Slurm, leave "
            "MASTER_PORT unset and ncclsmoke derives one from SLURM_JOB_ID).";
  auto f = make_finding_about(
      Code::CONFIG_INVALID, reported_by(rank0, {}, "MASTER_PORT"),
      fmt::format("{{reporter}} of job {} cannot serve the store on port {}: {}{}",
                  job_text(job_id), port, error,
                  holder.empty() ? std::string() : fmt::format("; the port is held by {}", holder)),
      {rank0.rank}, {std::string(rank0.host)},
      {{"variable", "MASTER_PORT"}, {"value", std::to_string(port)}, {"fix", fix}});
  f.evidence = nlohmann::json{{"variable", "MASTER_PORT"}, {"value", std::to_string(port)}};
  f.origin = FindingOrigin::store_port;
  return f;
}

namespace {
Finding profiles_finding(RankRef self, std::string message, std::string_view profiles_file,
                         std::string fix) {
  auto f = make_finding_about(Code::CONFIG_INVALID, reported_by(self, {}, "--profiles"),
                              std::move(message), {self.rank}, {std::string(self.host)},
                        {{"variable", "--profiles"}, {"value", std::string(profiles_file)},
                         {"fix", std::move(fix)}});
  f.evidence = nlohmann::json{{"variable", "--profiles"}, {"value", profiles_file}};
  return f;
}
}  // namespace

Finding profiles_unreadable_finding(RankRef self, std::string_view profiles_file,
                                    std::string_view error) {
  return profiles_finding(self, fmt::format("cannot use --profiles {}: {}", profiles_file, error),
                          profiles_file,
                          "Fix the profiles file (see results/judging/profiles.example.yaml).");
}

Finding profile_unknown_finding(RankRef self, std::string_view profile,
                                std::string_view profiles_file,
                                const std::vector<std::string>& names) {
  return profiles_finding(self, fmt::format("--profile {} is not in {}", profile, profiles_file),
                          profiles_file, fmt::format("Pick one of: {}", fmt::join(names, ", ")));
}

Finding mesh_not_run_finding(RankRef self, std::string_view error) {
  auto f = make_finding_about(Code::MESH_BLOCKED, reported_by(self, "mesh"),
                              fmt::format("{{reporter}} could not run the mesh probe: {}", error),
                              {self.rank}, {std::string(self.host)},
                              {{"suspect", std::string(self.host)}});
  // Not a blocked pair but this rank's own listener: the table's "open the ports" hint would
  // send the operator to the firewall.
  f.hint = "Check --mesh-bind / --mesh-port-range on this host.";
  return f;
}

// ---- rank 0's gather ---------------------------------------------------------------------------

void name_unreported_rank(Verdict& mine, RankRef rank, bool seen_alive, double waited_s) {
  name_unreported_ranks(mine, {{rank, seen_alive}}, waited_s);
}

void name_unreported_ranks(Verdict& mine, const std::vector<UnreportedRank>& ranks,
                           double waited_s) {
  std::set<int> named;  // by a PEER_LOST or PEER_STALLED already
  for (const auto& f : mine.findings)
    if (f.code == Code::PEER_LOST || f.code == Code::PEER_STALLED)
      named.insert(f.ranks.begin(), f.ranks.end());
  std::unordered_map<int, std::vector<RankInfo*>> entries;
  for (auto& ri : mine.ranks) entries[ri.rank].push_back(&ri);
  for (const auto& [rank, seen_alive] : ranks) {
    if (seen_alive) {
      Subject s = lost_subject(rank.rank, rank.host, mine.reporting_rank);
      s.phase = "gather";
      auto f = make_finding_about(
          Code::RESULTS_MISSING, s,
          fmt::format("{{peer}} was alive to the end (rank {}'s liveness watch heard it) but its "
                      "verdict did not reach rank {} within {}: it was lost or removed in the "
                      "store, or the rank could not post it",
                      mine.reporting_rank, mine.reporting_rank,
                      rendezvous::seconds_text_fine(waited_s)),
          {rank.rank}, {std::string(rank.host)});
      f.evidence = {{"source", "liveness watch"}, {"seen_alive", true}};
      f.origin = FindingOrigin::liveness_watch;
      mine.findings.push_back(std::move(f));
      continue;
    }
    if (named.insert(rank.rank).second)
      mine.findings.push_back(make_finding_about(Code::PEER_LOST,
                                                 lost_subject(rank.rank, rank.host, mine.reporting_rank),
                                                 "{peer} joined but never reported its verdict",
                                                 {rank.rank}, {std::string(rank.host)}));
    if (auto it = entries.find(rank.rank); it != entries.end())
      for (auto* ri : it->second)
        if (ri->status == RankStatus::joined) ri->status = RankStatus::lost;
  }
}

void name_unreadable_post(Verdict& mine, RankRef rank, std::string_view key,
                          std::string_view problem) {
  auto f = make_finding_about(
      Code::RESULTS_MISSING, lost_subject(rank.rank, rank.host, mine.reporting_rank),
      fmt::format("the verdict posted for {{peer}} under store key {} cannot be read ({}); its "
                  "measurements are missing from the global verdict. If that rank did not post "
                  "it, something else writes into this job's store",
                  key, problem),
      {rank.rank}, {std::string(rank.host)});
  f.evidence = nlohmann::json{{"key", key}, {"problem", problem}};
  mine.findings.push_back(std::move(f));
}

void explained_by_itself(Verdict& mine, const Verdict& theirs, int rank) {
  auto cause = std::find_if(theirs.findings.begin(), theirs.findings.end(), [&](const Finding& f) {
    return f.severity == Severity::error && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end();
  });
  if (cause == theirs.findings.end()) return;
  mark_rank(mine, rank, RankStatus::failed, fmt::format("stopped on its own error: {}", cause->code));
}

// ---- phase statuses ----------------------------------------------------------------------------

PhaseStatus stopped_phase_status(const Finding& cause) {
  return cause.severity == Severity::error ? PhaseStatus::fail : PhaseStatus::inconclusive;
}

PhaseStatus world_phase_status(const std::vector<ConfigProblem>& problems, bool world_built,
                               bool profile_usable) {
  bool stops = std::any_of(problems.begin(), problems.end(),
                           [](const ConfigProblem& p) { return p.blocking(); });
  return !world_built || stops || !profile_usable ? PhaseStatus::fail : PhaseStatus::pass;
}

PhaseStatus rendezvous_phase_status(const JoinFacts& join) {
  return join.complete() && join.roster_received ? PhaseStatus::pass : PhaseStatus::fail;
}

PhaseOutcome mesh_outcome_with_stopped(PhaseOutcome judged, const std::vector<int>& stopped,
                                       bool pairs_set_aside) {
  if (stopped.empty()) return judged;
  judged.status = PhaseStatus::fail;
  judged.detail = fmt::format("{}; rank {} stopped answering (liveness watch){}", judged.detail,
                              fmt::join(stopped, ", "),
                              pairs_set_aside ? ": its pairs are not tested" : "");
  return judged;
}

Phase not_run_phase(std::string name, std::string detail) {
  Phase p;
  p.name = std::move(name);
  p.status = PhaseStatus::not_run;
  p.detail = std::move(detail);
  return p;
}

void list_phases_not_run(std::vector<Phase>& phases) {
  // Why they did not run: the first phase that failed, else the run ended first (its deadline or
  // a signal, whose finding says which).
  const auto failed = std::find_if(phases.begin(), phases.end(),
                                   [](const Phase& p) { return p.status == PhaseStatus::fail; });
  const std::string why = failed != phases.end()
                              ? fmt::format("the {} phase failed", failed->name)
                              : std::string("the run ended before it started");
  for (const char* name : {"world", "rendezvous", "mesh"}) {
    bool seen = std::any_of(phases.begin(), phases.end(), [&](const Phase& p) { return p.name == name; });
    if (!seen) phases.push_back(not_run_phase(name, why));
  }
}

}  // namespace ncclsmoke::results
