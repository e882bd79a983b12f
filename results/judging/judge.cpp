#include "results/judging/judge.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include "results/verdict/finding_codes.h"
#include "results/judging/baseline_learn.h"
#include "results/judging/nccl_judge.h"
#include "results/judging/transport_rules.h"
#include "rendezvous/rank_ref.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

std::string lower_trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  s.erase(0, i);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string value_text(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

std::string host_of(const Verdict& v, int rank) {
  for (const auto& r : v.ranks)
    if (r.rank == rank) return r.host;
  return {};
}

std::string where(const Verdict& v, int rank) { return rendezvous::rank_text(rank, host_of(v, rank)); }

std::vector<std::string> hosts_of(const Verdict& v, const std::vector<int>& ranks) {
  std::vector<std::string> hosts;
  for (int r : ranks) {
    std::string h = host_of(v, r);
    if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  return hosts;
}

// The subject of a judged transport finding: its transport and phase, what was compared, and
// the rank it is about (-1: the world).
Subject transport_subject(const std::string& transport, std::string item, int rank = -1,
                          std::string host = {}) {
  Subject s;
  s.transport = transport;
  s.phase = transport_phase_name(transport);
  s.item = std::move(item);
  s.peer = rank;
  s.peer_host = std::move(host);
  return s;
}

const Phase* phase_of(const Verdict& v, const std::string& transport) {
  for (const auto& p : v.phases)
    if (PhaseId::parse(p.name).is_transport(transport)) return &p;
  return nullptr;
}

std::string phase_text(const Verdict& v, const std::string& transport) {
  const Phase* p = phase_of(v, transport);
  if (!p) return "no " + transport_phase_name(transport) + " phase was recorded";
  return "phase " + transport_phase_name(transport) + " is " + to_string(p->status) +
         (p->detail.empty() ? std::string() : " (" + p->detail + ")");
}

// BASELINE_MISSING with a hint that says what is really missing: a baseline band (learn one),
// the gate size in this run's sweep (widen it), a usable number at that size, a profile entry, a
// measurement, or a profile at all. `hint` replaces the table's generic one.
Finding missing(const std::string& profile, const std::string& message, json evidence,
                const std::string& hint) {
  Finding f = make_finding(Code::BASELINE_MISSING, message, {}, {}, {{"profile", profile}});
  f.evidence = std::move(evidence);
  if (!hint.empty()) f.hint = hint;
  return f;
}

std::string size_flag(std::int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

// Identity rule for one transport: appends SILENT_FALLBACK (error) when any rank's observed value
// differs. Returns whether a mismatch was found; `unread` is set when some expected key was never
// reported by any identity row.
bool judge_identity(const Verdict& v, const TransportExpectation& t, std::vector<Finding>& out,
                    bool& unread, size_t& fallback_index) {
  unread = false;
  std::vector<int> ranks;
  json per_rank = json::array();
  std::string want_text, seen_text;  // the mismatched keys, each with its first observed value
  std::set<std::string> mismatched_keys;
  for (const auto& [key, want] : t.identity.items()) {
    bool read = false;
    for (const auto& id : v.identities) {
      if (id.transport != t.transport || !id.observed.is_object()) continue;
      auto it = id.observed.find(key);
      if (it == id.observed.end() || it->is_null()) continue;
      read = true;
      if (identity_value_matches(key, want, *it)) continue;
      if (id.rank >= 0 && std::find(ranks.begin(), ranks.end(), id.rank) == ranks.end())
        ranks.push_back(id.rank);
      per_rank.push_back({{"rank", id.rank}, {"key", key}, {"expected", want}, {"observed", *it}});
      if (mismatched_keys.insert(key).second) {
        want_text += (want_text.empty() ? "" : ", ") + key + "=" + value_text(want);
        seen_text += (seen_text.empty() ? "" : ", ") + key + "=" + value_text(*it);
      }
    }
    if (!read) unread = true;
  }
  if (per_rank.empty()) return false;
  std::sort(ranks.begin(), ranks.end());
  std::string who;
  for (int r : ranks) who += (who.empty() ? "" : ", ") + where(v, r);
  if (who.empty()) who = "the world-wide identity";
  Finding f = make_finding(Code::SILENT_FALLBACK,
                           t.transport + ": expected " + want_text + "; observed " + seen_text +
                               " on " + who,
                           ranks, hosts_of(v, ranks),
                           {{"expected", want_text}, {"observed", seen_text}});
  f.evidence = {{"transport", t.transport}, {"expected", t.identity}, {"mismatches", per_rank}};
  f.subject = transport_subject(t.transport, "identity");
  f.origin = FindingOrigin::profile_identity;
  fallback_index = out.size();
  out.push_back(std::move(f));
  return true;
}

void judge_bandwidth(const Verdict& v, const Profile& p, const TransportExpectation& t,
                     std::vector<Finding>& out) {
  bool unread = false;
  size_t fb_index = 0;
  bool mismatch = judge_identity(v, t, out, unread, fb_index);

  std::vector<const TransportRow*> real;
  bool any_synthetic = false;
  for (const auto& r : v.transports) {
    if (r.transport != t.transport) continue;
    if (r.synthetic)
      any_synthetic = true;
    else
      real.push_back(&r);
  }
  if (real.empty()) {
    if (any_synthetic || !t.required) return;  // synthetic only: never compared with baselines
    out.push_back(missing(p.name,
                          t.transport + ": profile " + p.name + " expects this transport but it " +
                              "produced no measurement; " + phase_text(v, t.transport),
                          {{"transport", t.transport}, {"profile", p.name}},
                          "Nothing was measured, so there is nothing to compare: the " +
                              t.transport + " transport did not run (see phase " +
                              transport_phase_name(t.transport) + " and its own finding); the baseline is not the "
                              "problem."));
    return;
  }
  const BaselineBand* band = find_band(t, v.world.size);
  if (!band) {
    out.push_back(missing(p.name,
                          t.transport + ": profile " + p.name + " has no baseline for world size " +
                              std::to_string(v.world.size) + " (nor one for any size)",
                          {{"transport", t.transport}, {"profile", p.name},
                           {"world_size", v.world.size}},
                          "No baseline for (" + t.transport + ", world size " +
                              std::to_string(v.world.size) + ", profile " + p.name +
                              "): record healthy runs in a history (--history DB) and run "
                              "`ncclsmoke baseline learn --history DB --profiles FILE --profile " +
                              p.name + " --write FILE`."));
    return;
  }
  const TransportRow* world_row = nullptr;
  const TransportRow* worst_rank = nullptr;
  bool any_nan = false;
  for (const TransportRow* r : real) {
    if (r->bytes != band->gate_bytes) continue;
    if (!std::isfinite(r->busbw_gbps)) {
      any_nan = true;
      continue;
    }
    if (r->rank < 0) {
      if (!world_row || r->busbw_gbps < world_row->busbw_gbps) world_row = r;
    } else if (!worst_rank || r->busbw_gbps < worst_rank->busbw_gbps) {
      worst_rank = r;
    }
  }
  const TransportRow* row = world_row ? world_row : worst_rank;
  if (!row) {
    std::set<std::int64_t> sizes;
    for (const TransportRow* r : real)
      if (r->gate) sizes.insert(r->bytes);
    std::string ran;
    for (auto s : sizes) ran += (ran.empty() ? "" : ", ") + std::to_string(s);
    std::string why = any_nan ? "its busbw at the gate size " + std::to_string(band->gate_bytes) +
                                    " bytes is missing (NaN)"
                              : "no row at the baseline's gate size " +
                                    std::to_string(band->gate_bytes) + " bytes" +
                                    (ran.empty() ? std::string() : " (run gated at " + ran + ")");
    std::string hint =
        any_nan ? "The baseline exists, but the " + t.transport + " row at its gate size " +
                      std::to_string(band->gate_bytes) +
                      " bytes has no busbw: the collective at that size did not complete (see "
                      "the transport's findings)."
                : "The baseline exists; this run's sweep did not measure its gate size " +
                      std::to_string(band->gate_bytes) + " bytes: widen --min-bytes/--max-bytes "
                      "to include it (e.g. --max-bytes " + size_flag(band->gate_bytes) +
                      "), or run with --gate to measure only the profile's gate size.";
    out.push_back(missing(p.name, t.transport + ": " + why,
                          {{"transport", t.transport}, {"profile", p.name},
                           {"gate_bytes", band->gate_bytes}, {"baseline", to_json(*band)}},
                          hint));
    return;
  }
  double ratio = row->busbw_gbps / band->busbw_gbps;
  json numbers = {{"transport", t.transport},
                  {"gate_bytes", band->gate_bytes},
                  {"busbw_gbps", row->busbw_gbps},
                  {"rank", row->rank},
                  {"baseline", to_json(*band)},
                  {"ratio", ratio},
                  {"profile", p.name}};
  std::string nums = fmt(row->busbw_gbps) + " GB/s busbw at " +
                     std::to_string(band->gate_bytes) + " bytes vs baseline " +
                     fmt(band->busbw_gbps) + " GB/s (" + fmt(ratio * 100) + "%)";
  std::vector<int> ranks;
  if (row->rank >= 0) ranks.push_back(row->rank);
  if (mismatch) out[fb_index].evidence["bandwidth"] = numbers;

  if (!mismatch && unread && !t.identity.empty() && ratio < kSuspectedFallbackRatio) {
    std::string want;
    for (const auto& [k, val] : t.identity.items())
      want += (want.empty() ? "" : ",") + k + "=" + value_text(val);
    Finding f = make_finding(Code::SILENT_FALLBACK,
                             t.transport + ": suspected fallback, identity not read and " + nums +
                                 " is in a slower transport class's band",
                             ranks, hosts_of(v, ranks),
                             {{"expected", want}, {"observed", "unknown (identity not read)"}});
    f.severity = Severity::warning;
    f.evidence = numbers;
    f.evidence["expected_identity"] = t.identity;
    f.subject = transport_subject(t.transport, "bandwidth band");
    out.push_back(std::move(f));
  }
  if (!mismatch && ratio < band->degraded_ratio) {
    bool hard = ratio < band->fail_ratio;
    std::string hosts;
    for (const auto& h : hosts_of(v, ranks)) hosts += (hosts.empty() ? "" : ", ") + h;
    Finding f = make_finding(
        Code::BANDWIDTH_REGRESSION,
        t.transport + ": " + nums + ", below the " + (hard ? "fail" : "degraded") + " threshold " +
            fmt((hard ? band->fail_ratio : band->degraded_ratio) * 100) + "%",
        ranks, hosts_of(v, ranks), {{"hosts", hosts.empty() ? "the run's hosts" : hosts}});
    f.severity = hard ? Severity::error : Severity::warning;
    f.evidence = numbers;
    f.subject = transport_subject(t.transport, "gate busbw");
    out.push_back(std::move(f));
  }
}

void judge_stragglers(const Verdict& v, std::vector<Finding>& out) {
  std::vector<std::string> transports;
  for (const auto& r : v.transports)
    if (std::find(transports.begin(), transports.end(), r.transport) == transports.end())
      transports.push_back(r.transport);
  for (const auto& id : v.identities)
    if (std::find(transports.begin(), transports.end(), id.transport) == transports.end())
      transports.push_back(id.transport);

  for (const auto& t : transports) {
    std::map<int, double> time_of;  // max time_us over the rank's gate rows
    for (const auto& r : v.transports) {
      if (r.transport != t || !r.gate || r.synthetic || r.rank < 0 || !std::isfinite(r.time_us))
        continue;
      auto [it, fresh] = time_of.emplace(r.rank, r.time_us);
      if (!fresh) it->second = std::max(it->second, r.time_us);
    }
    if (time_of.size() >= 2) {
      for (const auto& [rank, us] : time_of) {
        std::vector<double> others;
        for (const auto& [r2, us2] : time_of)
          if (r2 != rank) others.push_back(us2);
        double med = median(others);
        if (us > kStragglerTimeRatio * med && us - med > kStragglerTimeFloorUs) {
          Finding f = make_finding(Code::STRAGGLER,
                                   t + ": " + where(v, rank) + " took " + fmt(us / 1000) +
                                       " ms at the gate size vs a median of " + fmt(med / 1000) +
                                       " ms on its " + std::to_string(others.size()) + " peers",
                                   {rank}, hosts_of(v, {rank}));
          f.evidence = {{"transport", t}, {"rank", rank}, {"time_us", us}, {"peer_median_us", med},
                        {"rule", "time_us > 1.5 x peer median and > 1 ms above it"}};
          f.subject = transport_subject(t, "gate time", rank, host_of(v, rank));
          out.push_back(std::move(f));
        }
      }
    }

    std::map<int, double> blocked;
    std::map<int, int> next_of;  // the rank each one sends to, where its link stats say
    for (const auto& id : v.identities) {
      if (id.transport != t || id.rank < 0) continue;
      auto ls = link_stats_of(id);  // the typed link stats (transport_rules.h), any backend's
      if (!ls) continue;
      blocked[id.rank] = ls->send_blocked_s;
      if (ls->next_rank >= 0) next_of[id.rank] = ls->next_rank;
    }
    if (blocked.size() < 2) continue;
    int n = v.world.size > 0 ? v.world.size : static_cast<int>(blocked.rbegin()->first + 1);
    for (const auto& [rank, s] : blocked) {
      if (s <= kStragglerBlockedFloorS) continue;
      double max_other = 0;
      for (const auto& [r2, s2] : blocked)
        if (r2 != rank) max_other = std::max(max_other, s2);
      if (!(s > kStragglerBlockedRatio * max_other)) continue;
      int next = next_of.count(rank) ? next_of[rank] : n > 0 ? (rank + 1) % n : rank + 1;
      Finding f = make_finding(Code::STRAGGLER,
                               t + ": " + where(v, rank) + " was blocked sending to " +
                                   where(v, next) + " for " + fmt(s) +
                                   " s (every other rank <= " + fmt(max_other) +
                                   " s): the link from its host to the next rank's is slow",
                               {rank}, hosts_of(v, {rank}));
      f.evidence = {{"transport", t}, {"rank", rank}, {"next_rank", next},
                    {"send_blocked_s", s}, {"max_other_send_blocked_s", max_other},
                    {"rule", "send_blocked_s > 3 x every other rank's and > 0.5 s"}};
      f.subject = transport_subject(t, "send blocked", rank, host_of(v, rank));
      out.push_back(std::move(f));
    }
  }
}

}  // namespace

bool identity_value_matches(const std::string& key, const json& expected, const json& observed) {
  if (expected.is_boolean() || observed.is_boolean()) {
    auto as_bool = [](const json& j, bool& b) {
      if (j.is_boolean()) return b = j.get<bool>(), true;
      if (j.is_number()) return b = j.get<double>() != 0, true;
      if (j.is_string()) {
        std::string s = lower_trim(j.get<std::string>());
        if (s == "true" || s == "1" || s == "yes") return b = true, true;
        if (s == "false" || s == "0" || s == "no") return b = false, true;
      }
      return false;
    };
    bool a = false, b = false;
    return as_bool(expected, a) && as_bool(observed, b) && a == b;
  }
  if (expected.is_number() && observed.is_number())
    return expected.get<double>() == observed.get<double>();
  std::string e = lower_trim(value_text(expected)), o = lower_trim(value_text(observed));
  if (key == "network") return same_nccl_network(e, o);
  if (key == "provider") {
    e = lower_trim(e.substr(0, e.find(';')));
    o = lower_trim(o.substr(0, o.find(';')));
  }
  return e == o;
}

std::vector<Finding> judge(const Verdict& v, const Profile* profile) {
  std::vector<Finding> out;
  bool any_real = std::any_of(v.transports.begin(), v.transports.end(),
                              [](const TransportRow& r) { return !r.synthetic; });
  if (!profile) {
    if (any_real)
      out.push_back(missing("<none>",
                            "no profile was selected, so bandwidth and identity could not be judged",
                            {{"profile", nullptr}},
                            "Select a profile: --profiles FILE --profile NAME "
                            "(results/judging/profiles.example.yaml shows the format)."));
  } else {
    for (const auto& t : profile->transports) judge_bandwidth(v, *profile, t, out);
    std::set<std::string> unnamed;
    for (const auto& r : v.transports)
      if (!r.synthetic && !find_transport(*profile, r.transport)) unnamed.insert(r.transport);
    for (const auto& t : unnamed)
      out.push_back(missing(profile->name,
                            t + ": profile " + profile->name + " has no entry for this transport",
                            {{"transport", t}, {"profile", profile->name}},
                            "Add " + t + " to profile " + profile->name +
                                " in the profiles file (then learn its band with `ncclsmoke "
                                "baseline learn`), or leave it out of --transports."));
  }
  judge_stragglers(v, out);
  return out;
}

void add_judged_findings(std::vector<Finding>& findings, std::vector<Finding> judged) {
  auto is_profile_nccl_fallback = [](const Finding& f) {
    return f.code == Code::SILENT_FALLBACK && f.severity == Severity::error &&
           f.origin == FindingOrigin::profile_identity && f.subject.transport == "nccl";
  };
  // nccl_judge's fallbacks, by the mark it sets (nccl_judge.h), not by the evidence's shape.
  auto is_net_check = [](const Finding& f) {
    return f.code == Code::SILENT_FALLBACK && is_nccl_net_check(f);
  };
  for (auto& j : judged) {
    if (is_profile_nccl_fallback(j)) {
      json checks = json::array();
      std::set<int> ranks(j.ranks.begin(), j.ranks.end());
      std::set<std::string> hosts(j.hosts.begin(), j.hosts.end());
      for (auto it = findings.begin(); it != findings.end();) {
        if (!is_net_check(*it)) {
          ++it;
          continue;
        }
        checks.push_back({{"message", it->message}, {"ranks", it->ranks}, {"evidence", it->evidence}});
        ranks.insert(it->ranks.begin(), it->ranks.end());
        hosts.insert(it->hosts.begin(), it->hosts.end());
        it = findings.erase(it);
      }
      if (!checks.empty()) {
        j.evidence["nccl_net_check"] = checks;
        j.ranks.assign(ranks.begin(), ranks.end());
        j.hosts.assign(hosts.begin(), hosts.end());
      }
    }
    findings.push_back(std::move(j));
  }
}

json baseline_record(const Profile* profile, const Verdict& v) {
  if (!profile) return {{"profile", nullptr}, {"reason", "no profile selected"}};
  json ts = json::array();
  for (const auto& t : profile->transports) {
    const BaselineBand* b = find_band(t, v.world.size);
    int key = 0;
    if (b && t.by_world_size.count(v.world.size) && v.world.size != 0) key = v.world.size;
    ts.push_back({{"transport", t.transport},
                  {"identity", t.identity},
                  {"required", t.required},
                  {"world_size_key", b ? json(key) : json()},
                  {"band", b ? to_json(*b) : json()}});
  }
  return {{"profile", profile->name},
          {"description", profile->description},
          {"world_size", v.world.size},
          {"transports", ts}};
}

}  // namespace ncclsmoke::results
