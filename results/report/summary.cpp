#include "results/report/summary.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_set>

#include "results/judging/classify.h"
#include "results/judging/merge.h"

namespace ncclsmoke::results {

namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// Distinct strings in the order first seen, each lookup O(1): a fleet has thousands of hosts
// and a finding a rank.
struct FirstSeen {
  std::vector<std::string> order;
  std::unordered_set<std::string> seen;
  void add(const std::string& s) {
    if (seen.insert(s).second) order.push_back(s);
  }
};

std::string bytes_text(std::int64_t b) {
  if (b >= (1 << 30) && b % (1 << 30) == 0) return std::to_string(b >> 30) + " GiB";
  if (b >= (1 << 20) && b % (1 << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1 << 10) && b % (1 << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

}  // namespace

std::vector<GateHeadline> gate_headlines(const Verdict& v) {
  std::vector<GateHeadline> out;
  for (auto& g : gates_of(v)) {
    GateHeadline h;
    h.gate = std::move(g);
    if (std::isfinite(h.gate.busbw_gbps)) {
      bool world = std::any_of(v.transports.begin(), v.transports.end(), [&](const TransportRow& r) {
        return r.transport == h.gate.transport && r.bytes == h.gate.gate_bytes && r.rank < 0 &&
               std::isfinite(r.busbw_gbps);
      });
      for (const auto& r : v.transports) {
        if (r.transport != h.gate.transport || r.bytes != h.gate.gate_bytes ||
            (r.rank < 0) != world || r.busbw_gbps != h.gate.busbw_gbps)
          continue;
        h.row = &r;  // ties: the first (out-of-place comes first in a sweep)
        break;
      }
    }
    out.push_back(std::move(h));
  }
  return out;
}

bool is_summary_headline(std::string_view line) {
  for (Outcome o : {Outcome::pass, Outcome::degraded, Outcome::fail, Outcome::inconclusive}) {
    const std::string head = "ncclsmoke " + to_string(o) + " (exit ";
    if (line.substr(0, head.size()) == head) return true;
  }
  return false;
}

std::string human_summary(const Verdict& verdict) {
  constexpr const char* kRunWide = "(run)";
  // The summary stays a screenful at any world size; verdict.json has everything.
  constexpr std::size_t kMaxLineMessage = 600, kMaxLinesPerHost = 12, kMaxOkHosts = 32,
                        kMaxTroubledHosts = 64;
  // Verdicts merged before dedupe_findings existed (or one rank's local view) may still carry
  // the same finding once per rank: print it once, naming every rank.
  std::vector<Finding> findings = verdict.findings;
  dedupe_findings(findings);
  const Verdict& v = verdict;
  std::string out = "ncclsmoke " + to_string(v.verdict) + " (exit " + std::to_string(v.exit_code) + "): run " +
                    (v.run_id.empty() ? "?" : v.run_id) + ", " + to_string(v.scope);
  if (v.scope == Scope::local && v.reporting_rank >= 0) {
    out += " view of rank " + std::to_string(v.reporting_rank);
  }
  out += ", " + std::to_string(v.world.size) + " rank" + (v.world.size == 1 ? "" : "s") + ", " +
         std::to_string(findings.size()) + " finding" + (findings.size() == 1 ? "" : "s") +
         ", " + fixed(v.duration_s, 1) + " s\n";
  if (!v.world.store.host.empty()) {
    const auto& st = v.world.store;
    out += "store " + st.host + ":" + std::to_string(st.port) + " hosted by " + to_string(st.hosted_by) +
           ", " + to_string(st.dialect) + " dialect (" + to_string(st.era) + "), launcher " +
           to_string(v.world.source) +
           (v.world.job_id.empty() ? "" : ", job " + v.world.job_id + " from " + v.world.job_id_source) +
           "\n";
  }

  std::map<int, std::string> host_of_rank;
  FirstSeen seen_hosts;  // display order
  for (const auto& r : v.ranks) {
    if (!r.host.empty()) {
      host_of_rank[r.rank] = r.host;
      seen_hosts.add(r.host);
    }
  }

  // host -> lines, in finding order
  std::map<std::string, std::vector<std::string>> lines;
  std::map<std::string, bool> troubled;
  std::map<std::string, std::vector<std::string>> codes_of;  // host -> its findings' codes
  for (const auto& f : findings) {
    std::vector<std::string> named;
    for (const auto& h : f.hosts) add_unique(named, h);
    for (int r : f.ranks) {
      auto it = host_of_rank.find(r);
      if (it != host_of_rank.end()) add_unique(named, it->second);
    }
    if (named.empty()) named.push_back(kRunWide);
    // One finding is one line, bounded, at any world size (the message may quote a peer's text).
    std::string msg = f.message.size() > kMaxLineMessage
                          ? f.message.substr(0, kMaxLineMessage) + "... (cut; verdict.json has it)"
                          : f.message;
    std::string line = upper(to_string(f.severity)) + ": " + msg + " [" + to_string(f.code) + "]";
    for (const auto& h : named) {
      seen_hosts.add(h);
      lines[h].push_back(line);
      codes_of[h].push_back(to_string(f.code));
      if (f.severity != Severity::info) troubled[h] = true;
    }
  }
  std::vector<std::string> hosts = std::move(seen_hosts.order);
  // "(run)" last
  auto run_it = std::find(hosts.begin(), hosts.end(), kRunWide);
  if (run_it != hosts.end()) {
    hosts.erase(run_it);
    hosts.push_back(kRunWide);
  }

  size_t width = 0;
  for (const auto& h : hosts) width = std::max(width, h.size());
  // Bounded too: at most kMaxOkHosts healthy hosts by name, kMaxTroubledHosts hosts with
  // findings ("(run)" always) and kMaxLinesPerHost lines a host, each with the count of what was
  // left out; the hosts with findings left out are counted by code.
  std::size_t ok_shown = 0, ok_left = 0, troubled_shown = 0, troubled_left = 0;
  std::map<std::string, std::size_t> left_by_code;
  for (const auto& h : hosts) {
    if (troubled[h] && h != kRunWide) {
      if (troubled_shown == kMaxTroubledHosts) {
        ++troubled_left;
        for (const auto& code : codes_of[h]) ++left_by_code[code];
        continue;
      }
      ++troubled_shown;
    }
    if (!troubled[h] && h != kRunWide) {
      if (ok_shown == kMaxOkHosts) {
        ++ok_left;
        continue;
      }
      ++ok_shown;
      out += pad(h, width) + " | OK\n";
    }
    const auto& ls = lines[h];
    for (std::size_t i = 0; i < ls.size() && i < kMaxLinesPerHost; ++i)
      out += pad(h, width) + " | " + ls[i] + "\n";
    if (ls.size() > kMaxLinesPerHost)
      out += pad(h, width) + " | ... and " + std::to_string(ls.size() - kMaxLinesPerHost) +
             " more findings (verdict.json)\n";
  }
  if (troubled_left) {
    std::string codes;
    for (const auto& [code, n] : left_by_code)
      codes += (codes.empty() ? "" : ", ") + code + " " + std::to_string(n);
    out += "(" + std::to_string(troubled_left) + " more hosts with findings: " + codes +
           "; verdict.json and suspects.txt name them)\n";
  }
  if (ok_left) out += "(" + std::to_string(ok_left) + " more hosts OK)\n";
  if (hosts.empty()) out += "(no hosts known)\n";

  if (!v.phases.empty()) {
    size_t name_w = 5, status_w = 6;
    for (const auto& p : v.phases) {
      name_w = std::max(name_w, p.name.size());
      status_w = std::max(status_w, name(p.status).size());
    }
    out += "\n" + pad("phase", name_w) + "  " + pad("status", status_w) + "  seconds\n";
    for (const auto& p : v.phases) {
      std::string secs = fixed(p.duration_s, 2);
      out += pad(p.name, name_w) + "  " + pad(to_string(p.status), status_w) + "  " +
             std::string(secs.size() < 7 ? 7 - secs.size() : 0, ' ') + secs;
      if (!p.detail.empty()) out += "  " + p.detail;
      out += "\n";
    }
  }

  // The headline number per transport, the one the judge, the metrics and the report use.
  auto heads = gate_headlines(v);
  if (!heads.empty()) {
    size_t tw = 0;
    for (const auto& h : heads) tw = std::max(tw, h.gate.transport.size());
    out += "\ngate (busbw at the gate size, the lower of out-of-place and in-place):\n";
    for (const auto& h : heads) {
      const auto& g = h.gate;
      out += "  " + pad(g.transport, tw) + "  ";
      if (!std::isfinite(g.busbw_gbps)) {
        out += "not measured at " + bytes_text(g.gate_bytes);
      } else {
        out += fixed(g.busbw_gbps, 3) + " GB/s at " + bytes_text(g.gate_bytes);
        if (h.row) out += std::string(" (") + (h.row->in_place ? "in-place" : "out-of-place") +
                          (h.row->rank >= 0 ? ", rank " + std::to_string(h.row->rank) : "") + ")";
      }
      if (std::isfinite(g.baseline_gbps) && g.baseline_gbps > 0) {
        out += ", baseline " + fixed(g.baseline_gbps, 3) + " GB/s";
        if (std::isfinite(g.busbw_gbps))
          out += " (" + fixed(100 * g.busbw_gbps / g.baseline_gbps, 0) + "%)";
      } else {
        out += ", no baseline";
      }
      if (g.synthetic) out += ", synthetic (not judged)";
      out += "\n";
    }
  }

  FirstSeen hint_lines;
  for (const auto& f : findings) {
    if (!f.hint.empty()) hint_lines.add("  " + to_string(f.code) + ": " + f.hint);
  }
  if (!hint_lines.order.empty()) {
    out += "\nhints:\n";
    for (const auto& h : hint_lines.order) out += h + "\n";
  }
  return out;
}

std::vector<Finding> errors_not_shown(const Verdict* shown, const std::vector<Verdict>& own) {
  std::set<std::string> on_screen;
  if (shown)
    for (const auto& f : shown->findings) on_screen.insert(finding_dedupe_key(f));
  std::vector<Finding> out;
  for (const auto& v : own)
    for (const auto& f : v.findings)
      if (f.severity == Severity::error && !on_screen.count(finding_dedupe_key(f)))
        out.push_back(f);
  dedupe_findings(out);
  return out;
}

std::vector<Finding> distinct_errors(const Verdict& v) {
  std::vector<Finding> errors;
  for (const auto& f : v.findings)
    if (f.severity == Severity::error) errors.push_back(f);
  dedupe_findings(errors);
  return errors;
}

}  // namespace ncclsmoke::results
