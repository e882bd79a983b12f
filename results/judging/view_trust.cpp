#include "results/judging/view_trust.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "results/verdict/finding_codes.h"
#include "results/verdict/finding_text.h"

namespace ncclsmoke::results {

namespace {

// "10.0.0.2:5123" -> "10.0.0.2", "[fe80::1]:5123" -> "fe80::1"; a bare host is itself.
std::string address_host(const std::string& a) {
  if (a.empty()) return a;
  if (a.front() == '[') {
    auto close = a.find(']');
    return close == std::string::npos ? a : a.substr(1, close - 1);
  }
  auto colon = a.rfind(':');
  if (colon != std::string::npos && a.find(':') == colon) return a.substr(0, colon);
  return a;
}

// Every host the job owns, as rank 0 knows it.
std::set<std::string> job_hosts(const Verdict& mine, const std::vector<RosterRank>& roster) {
  std::set<std::string> out;
  auto add = [&out](const std::string& h) {
    if (!h.empty()) out.insert(h);
  };
  for (const auto& r : roster) {
    add(r.host);
    add(address_host(r.address));
  }
  add(mine.world.master_addr);
  for (const auto& r : mine.ranks) {
    add(r.host);
    add(address_host(r.local_address));
  }
  for (const auto& f : mine.findings) {
    for (const auto& h : f.hosts) add(h);
    add(f.subject.reporter_host);
    add(f.subject.peer_host);
  }
  return out;
}

bool reports_world_mismatch(const Verdict& v, int rank) {
  return std::any_of(v.findings.begin(), v.findings.end(), [&](const Finding& f) {
    return f.code == Code::WORLD_MISMATCH &&
           std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end();
  });
}

int world_size_of(const Verdict& mine) { return mine.world.size; }

Finding disproved_finding(int rank, const std::string& host, const Verdict& mine,
                          const std::vector<std::string>& why) {
  Subject s;
  s.reporters = {mine.reporting_rank};
  s.peer = rank;
  s.peer_host = host;
  s.item = fmt::format("verdict/{}", rank);
  auto f = make_finding_about(
      Code::VERDICT_DISPROVED, s,
      fmt::format("{{reporter}} set aside the verdict posted for {{peer}}: {}", why.front()),
      {rank}, host.empty() ? std::vector<std::string>{} : std::vector<std::string>{host});
  f.evidence = {{"key", fmt::format("verdict/{}", rank)}, {"reasons", why}};
  return f;
}

Finding observed_world_mismatch(const RosterRank& r, const Verdict& mine) {
  Subject s;
  s.reporters = {mine.reporting_rank};
  s.peer = r.rank;
  s.peer_host = r.host;
  s.phase = "rendezvous";
  s.item = "world size";
  auto f = make_finding_about(
      Code::WORLD_MISMATCH, s,
      fmt::format("{{peer}} joined with world size {}, but {{reporter}} has {}", r.world_size,
                  world_size_of(mine)),
      {r.rank}, r.host.empty() ? std::vector<std::string>{} : std::vector<std::string>{r.host});
  f.evidence = {{"source", "join claim"}, {"their_world_size", r.world_size},
                {"world_size", world_size_of(mine)}};
  return f;
}

}  // namespace

namespace {

// What every view is checked against, built once a gather: each view looks up its own ranks,
// and at 4,096 views a scan of the roster and a fresh host set per view took rank 0 seconds.
struct RosterIndex {
  std::map<int, const RosterRank*> by_rank;
  std::set<std::string> hosts;  // job_hosts: the job's hosts as rank 0 knows them
  RosterIndex(const Verdict& mine, const std::vector<RosterRank>& roster)
      : hosts(job_hosts(mine, roster)) {
    for (const auto& r : roster) by_rank.try_emplace(r.rank, &r);  // the first, as find_rank
  }
  const RosterRank* find(int rank) const {
    auto it = by_rank.find(rank);
    return it == by_rank.end() ? nullptr : it->second;
  }
};

std::vector<std::string> disproofs_in(const Verdict& posted, int posted_as, const Verdict& mine,
                                      const RosterIndex& index) {
  std::vector<std::string> why;
  const RosterRank* me = index.find(posted_as);
  if (!me) {
    why.push_back(fmt::format("rank {} is not in the job's roster", posted_as));
    return why;
  }
  if (posted.reporting_rank != posted_as)
    why.push_back(fmt::format("it says it is rank {}'s, but it was posted under rank {}'s key",
                              posted.reporting_rank, posted_as));
  for (const auto& r : posted.ranks) {
    if (r.host.empty() || r.through > r.rank) continue;
    const RosterRank* theirs = index.find(r.rank);
    if (theirs && !theirs->host.empty() && theirs->host != r.host) {
      why.push_back(fmt::format("it puts rank {} on host {}, which joined from host {}", r.rank,
                                r.host, theirs->host));
      break;
    }
  }
  const auto& hosts = index.hosts;
  std::set<std::string> strangers;
  for (const auto& f : posted.findings) {
    std::vector<std::string> named = f.hosts;
    named.push_back(f.subject.reporter_host);
    named.push_back(f.subject.peer_host);
    for (const auto& h : named) {
      if (h.empty() || hosts.count(h)) continue;
      // A rank names the store address it dialled in its store and config findings, whatever
      // spelling its MASTER_ADDR had; nowhere else is it the rank's word alone.
      if ((f.layer == Layer::rendezvous || f.layer == Layer::config) &&
          h == posted.world.master_addr)
        continue;
      strangers.insert(h);
    }
  }
  if (!strangers.empty()) {
    // Quoted for the operator, but bounded: the names are the poster's text.
    std::vector<std::string> shown;
    for (const auto& h : strangers) {
      if (shown.size() == 3) break;
      shown.push_back(h.size() > 64 ? h.substr(0, 64) + "..." : h);
    }
    why.push_back(fmt::format("its findings name host{} {}{}, not in the job's roster",
                              strangers.size() > 1 ? "s" : "", fmt::join(shown, ", "),
                              strangers.size() > shown.size()
                                  ? fmt::format(" and {} more", strangers.size() - shown.size())
                                  : std::string()));
  }
  const int world = world_size_of(mine);
  if (world > 0 && me->world_size > 0 && me->world_size != world &&
      !reports_world_mismatch(posted, posted_as))
    why.push_back(fmt::format("rank {} joined with world size {} (rank 0 has {}), and its verdict "
                              "does not say so",
                              posted_as, me->world_size, world));
  return why;
}

}  // namespace

std::vector<std::string> disproofs(const Verdict& posted, int posted_as, const Verdict& mine,
                                   const std::vector<RosterRank>& roster) {
  return disproofs_in(posted, posted_as, mine, RosterIndex(mine, roster));
}

void set_aside_disproved_views(std::vector<Verdict>& views, const std::vector<int>& posted_as,
                               const std::vector<RosterRank>& roster) {
  if (views.empty()) return;
  std::vector<Verdict> kept;
  kept.reserve(views.size());  // `mine` stays valid while views are kept
  kept.push_back(std::move(views.front()));
  Verdict& mine = kept.front();
  // Built before any VERDICT_DISPROVED is added to `mine`: those name roster hosts only.
  const RosterIndex index(mine, roster);
  std::set<int> kept_ranks;
  for (std::size_t i = 1; i < views.size(); ++i) {
    const int as = i - 1 < posted_as.size() ? posted_as[i - 1] : views[i].reporting_rank;
    auto why = disproofs_in(views[i], as, mine, index);
    if (why.empty()) {
      kept_ranks.insert(as);
      kept.push_back(std::move(views[i]));
      continue;
    }
    const RosterRank* r = index.find(as);
    mine.findings.push_back(disproved_finding(as, r ? r->host : std::string(), mine, why));
  }
  // What rank 0 saw at the join stands when no kept view of that rank says it.
  const int world = world_size_of(mine);
  for (const auto& r : roster)
    if (world > 0 && r.world_size > 0 && r.world_size != world && r.rank != mine.reporting_rank &&
        !kept_ranks.count(r.rank))
      mine.findings.push_back(observed_world_mismatch(r, mine));
  views = std::move(kept);
}

}  // namespace ncclsmoke::results
