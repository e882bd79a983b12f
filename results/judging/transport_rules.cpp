#include "results/judging/transport_rules.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>

#include "rendezvous/seconds_text.h"
#include "rendezvous/rank_ref.h"
#include "results/judging/nccl_judge.h"
#include "results/judging/run_rules.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;
using rendezvous::RankRef;
using ErrorKind = TransportFailureKind;
using TransportFailure = TransportFailureFacts;

// The judging rank, as its findings name it.
RankRef self_of(const TransportJudgeContext& ctx) { return {ctx.rank, ctx.host}; }

std::string host_of(const TransportJudgeContext& ctx, int rank) {
  if (rank == ctx.rank && !ctx.host.empty()) return ctx.host;
  auto it = ctx.hosts.find(rank);
  return it == ctx.hosts.end() ? std::string() : it->second;
}

TransportRow world_row(const std::string& name, const SweepRowFacts& r, bool synthetic) {
  return {.transport = name,
          .rank = -1,
          .bytes = static_cast<std::int64_t>(r.bytes),
          .count = static_cast<std::int64_t>(r.count),
          .dtype = to_string(r.dtype),
          .in_place = r.in_place,
          .time_us = r.time_us,
          .algbw_gbps = r.algbw_gbps,
          .busbw_gbps = r.busbw_gbps,
          .wrong = r.wrong,
          .gate = r.gate,
          .synthetic = synthetic};
}

// A row's per-rank figures, as the sweep computed them (sweep.h: one bandwidth formula).
TransportRow rank_row(const std::string& name, const SweepRowFacts& r, bool synthetic, std::size_t k) {
  auto at = [k](const auto& v, auto fallback) { return k < v.size() ? v[k] : fallback; };
  TransportRow row = world_row(name, r, synthetic);
  row.rank = static_cast<int>(k);
  row.time_us = at(r.rank_time_us, double{NAN});
  row.algbw_gbps = at(r.rank_algbw_gbps, double{NAN});
  row.busbw_gbps = at(r.rank_busbw_gbps, double{NAN});
  row.wrong = at(r.rank_wrong, int64_t{-1});
  row.gate = false;
  return row;
}

Finding failure_finding(const TransportFailure& e, const std::string& name,
                        const std::string& stage, const TransportJudgeContext& ctx) {
  const std::string phase = transport_phase_name(name);
  if (e.source == TransportFailure::Source::store)
    return make_finding_about(Code::RENDEZVOUS_LOST,
                              reported_by(self_of(ctx), phase, stage, name),
                              fmt::format("{{reporter}} lost the store during transport {} ({}): {}",
                                          name, stage, e.message),
                              {ctx.rank}, {ctx.host});

  std::vector<int> ranks{ctx.rank};
  std::vector<std::string> hosts{ctx.host};
  const bool named_peer = e.peer >= 0 && e.peer != ctx.rank;
  const std::string peer_host = named_peer ? host_of(ctx, e.peer) : std::string();
  if (named_peer) {
    ranks.push_back(e.peer);
    if (!peer_host.empty()) hosts.push_back(peer_host);
  }
  std::map<std::string, std::string> vars{{"transport", name}, {"phase", phase}};
  const std::string waited = rendezvous::seconds_text(e.waited_s);
  // The same failure seen by several ranks of a host (same stage, kind and peer) is one finding.
  Subject about = reported_by(self_of(ctx), phase,
                              fmt::format("{}/{}", stage, to_string(e.kind)), name);
  if (e.peer >= 0) {
    about.peer = e.peer;
    about.peer_host = host_of(ctx, e.peer);
  }
  Finding f;
  switch (e.kind) {
    case ErrorKind::unavailable:
      f = make_finding_about(Code::TRANSPORT_UNAVAILABLE, about,
                             fmt::format("transport {} skipped on {{reporter}}: {}", name, e.message),
                             ranks, hosts, vars);
      break;
    case ErrorKind::init_failed:
      vars["interface"] = "see evidence";
      f = make_finding_about(Code::TRANSPORT_INIT_FAILED, about,
                             fmt::format("transport {} failed to initialise on {{reporter}} after "
                                         "{}: {}",
                                         name, waited, e.message),
                             ranks, hosts, vars);
      break;
    case ErrorKind::timeout:
      f = make_finding_about(Code::TRANSPORT_TIMEOUT, about,
                             fmt::format("transport {} timed out on {{reporter}} after {}: {}", name,
                                         waited, e.message),
                             ranks, hosts, vars);
      break;
    case ErrorKind::peer_lost:
      // The peer is the rank the backend named; without one, say so rather than "rank -1".
      f = make_finding_about(Code::PEER_LOST, about,
                             fmt::format("transport {} on {{reporter}} lost {}: {}", name,
                                         e.peer >= 0 ? "{peer}"
                                                     : "a peer (the transport does not say which)",
                                         e.message),
                             e.peer >= 0 ? std::vector<int>{e.peer} : ranks, hosts, vars);
      break;
    case ErrorKind::other:
      f = make_finding_about(Code::TRANSPORT_INIT_FAILED, about,
                             fmt::format("transport {} failed on {{reporter}}: {}", name, e.message),
                             ranks, hosts, vars);
      break;
  }
  f.evidence = {{"error_kind", to_string(e.kind)}, {"waited_s", e.waited_s}};
  if (!e.evidence.is_null()) f.evidence["detail"] = e.evidence;
  return f;
}

// A measured backend: rows, identity, the network report, the data check, completeness.
void judge_measured(const TransportFacts& o, const TransportJudgeContext& ctx, Phase& phase,
                    TransportJudgement& out) {
  TransportIdentity id;
  id.transport = o.name;
  id.rank = ctx.rank;
  id.observed = o.identity.is_null() ? json::object() : o.identity;
  if (o.links && id.observed.is_object()) write_link_stats(id.observed, *o.links);
  if (o.network) id.expected = o.network->expected;
  out.identities.push_back(id);
  if (o.network) {
    if (auto f = judge_nccl_network(o.network->expected, o.network->observed, ctx.rank, ctx.host))
      out.findings.push_back(std::move(*f));
  }

  std::set<int> corrupt_ranks;
  int64_t wrong_total = 0;
  json wrong_by_rank = json::object();
  for (const auto& r : o.sweep.rows) {
    out.rows.push_back(world_row(o.name, r, o.synthetic));
    for (std::size_t k = 0; k < r.rank_time_us.size(); ++k) {
      TransportRow row = rank_row(o.name, r, o.synthetic, k);
      if (row.wrong > 0) {
        corrupt_ranks.insert(row.rank);
        wrong_total += row.wrong;
        const std::string key = std::to_string(row.rank);
        wrong_by_rank[key] = wrong_by_rank.value(key, int64_t{0}) + row.wrong;
      }
      out.rows.push_back(row);
    }
  }
  if (!corrupt_ranks.empty()) {
    std::vector<int> ranks(corrupt_ranks.begin(), corrupt_ranks.end());
    std::vector<std::string> hosts;
    for (int r : ranks)
      if (auto h = host_of(ctx, r); !h.empty()) hosts.push_back(h);
    Subject about;
    about.transport = o.name;
    about.phase = transport_phase_name(o.name);
    auto f = make_finding_about(Code::DATA_CORRUPTION, about,
                          fmt::format("transport {}: all-reduce returned {} wrong elements on {} "
                                      "rank(s)",
                                      o.name, wrong_total, ranks.size()),
                          ranks, hosts);
    f.evidence = {{"wrong_by_rank", wrong_by_rank}};
    out.findings.push_back(std::move(f));
  }
  if (!o.sweep.complete) {
    out.findings.push_back(make_finding_about(
        Code::RESULTS_MISSING,
        reported_by(self_of(ctx), transport_phase_name(o.name), "sweep figures", o.name),
        fmt::format("transport {}: some ranks' sweep figures never arrived on {{reporter}}", o.name),
        {ctx.rank}, {ctx.host}));
  }
  phase.status = corrupt_ranks.empty() ? PhaseStatus::pass : PhaseStatus::fail;
  phase.detail = fmt::format("{} sizes/modes measured", o.sweep.rows.size());
}

}  // namespace

TransportJudgement judge_transports(const std::vector<TransportFacts>& outcomes,
                                    const TransportJudgeContext& ctx) {
  TransportJudgement out;
  for (const auto& o : outcomes) {
    Phase phase;
    phase.name = transport_phase_name(o.name);
    phase.duration_s = o.duration_s;
    if (o.not_built) {
      phase.status = PhaseStatus::skipped;
      phase.detail = *o.not_built;
      out.findings.push_back(make_finding_about(
          Code::TRANSPORT_UNAVAILABLE,
          reported_by(self_of(ctx), phase.name, "not built", o.name),
          fmt::format("transport {} skipped on {{reporter}}: {}", o.name, *o.not_built),
          {ctx.rank}, {ctx.host}, {{"transport", o.name}}));
    } else if (o.not_started) {
      phase.status = PhaseStatus::not_run;
      phase.detail = *o.not_started;
    } else if (o.error && o.run_deadline_bound &&
               o.error->source == TransportFailure::Source::transport &&
               o.error->kind == ErrorKind::timeout) {
      const std::string stage = to_string(o.stage);
      auto f = run_timeout_during(self_of(ctx), ctx.run_timeout_s, phase.name,
                                  o.error->waited_s);
      f.evidence = {{"error_kind", to_string(o.error->kind)},
                    {"waited_s", o.error->waited_s}, {"stage", stage}};
      out.findings.push_back(std::move(f));
      phase.status = PhaseStatus::inconclusive;
      phase.detail = fmt::format("{}: the run's --timeout ended it: {}", stage, o.error->message);
    } else if (o.error) {
      const std::string stage = to_string(o.stage);
      out.findings.push_back(failure_finding(*o.error, o.name, stage, ctx));
      bool skipped = o.error->source == TransportFailure::Source::transport &&
                     o.error->kind == ErrorKind::unavailable;
      phase.status = skipped ? PhaseStatus::skipped : PhaseStatus::fail;
      phase.detail = fmt::format("{}: {}", stage, o.error->message);
      if (o.links) {  // what the links saw up to the failure (link_rules.h reads it)
        TransportIdentity id;
        id.transport = o.name;
        id.rank = ctx.rank;
        id.observed = {{"failed", stage}};
        write_link_stats(id.observed, *o.links);
        out.identities.push_back(std::move(id));
      }
    } else {
      judge_measured(o, ctx, phase, out);
    }
    out.phases.push_back(std::move(phase));
  }
  return out;
}

void write_link_stats(json& observed, const LinkFacts& s) {
  json& ls = observed[kLinkStatsKey];
  if (!ls.is_object()) ls = json::object();
  json& to = ls["to_next"];
  if (!to.is_object()) to = json::object();
  to["rank"] = s.next_rank;
  to["send_blocked_s"] = s.send_blocked_s;
  to["bytes"] = s.bytes_sent;
  if (s.tx_segs_out >= 0) {  // the kernel's view of the link (TCP backends only)
    to["retrans"] = s.tx_retrans;
    to["segs_out"] = s.tx_segs_out;
    if (std::isfinite(s.tx_rtt_us)) to["rtt_us"] = s.tx_rtt_us;
  }
  json& from = ls["from_prev"];
  if (!from.is_object()) from = json::object();
  from["rank"] = s.prev_rank;
  from["recv_wait_s"] = s.recv_wait_s;
  from["bytes"] = s.bytes_received;
}

std::optional<LinkFacts> link_stats_of(const TransportIdentity& id) {
  if (!id.observed.is_object()) return std::nullopt;
  auto ls = id.observed.find(kLinkStatsKey);
  if (ls == id.observed.end()) return std::nullopt;
  return link_stats_from(*ls);
}

std::optional<LinkFacts> link_stats_from(const json& stats) {
  if (!stats.is_object()) return std::nullopt;
  auto to = stats.find("to_next");
  if (to == stats.end() || !to->is_object()) return std::nullopt;
  auto blocked = to->find("send_blocked_s");
  if (blocked == to->end() || !blocked->is_number() || !std::isfinite(blocked->get<double>()))
    return std::nullopt;
  auto num = [](const json& obj, const char* key, auto fallback) { return number_or(obj, key, fallback); };
  LinkFacts s;
  s.send_blocked_s = blocked->get<double>();
  s.next_rank = num(*to, "rank", -1);
  s.bytes_sent = num(*to, "bytes", int64_t{0});
  s.tx_retrans = num(*to, "retrans", int64_t{-1});
  s.tx_segs_out = num(*to, "segs_out", int64_t{-1});
  s.tx_rtt_us = num(*to, "rtt_us", std::numeric_limits<double>::quiet_NaN());
  const json from = stats.value("from_prev", json());
  s.prev_rank = num(from, "rank", -1);
  s.recv_wait_s = num(from, "recv_wait_s", 0.0);
  s.bytes_received = num(from, "bytes", int64_t{0});
  return s;
}

}  // namespace ncclsmoke::results
