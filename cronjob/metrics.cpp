#include "cronjob/metrics.h"

#include <charconv>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "results/verdict/finding_codes.h"
#include "results/verdict/suspects.h"
#include "results/history/history.h"
#include "results/verdict/phase_id.h"

namespace ncclsmoke::cronjob {
namespace {

struct Sample {
  Labels labels;
  double value = 0;
};

struct Family {
  std::string name;
  std::string help;
  std::vector<Sample> samples;
};

// Codes the alert rules match on: always present (0 when not found) at both severities a rule
// may see, so a resolved problem reads 0 rather than vanishing.
constexpr const char* kAlertCodes[] = {"SILENT_FALLBACK", "BANDWIDTH_REGRESSION", "STRAGGLER"};
constexpr const char* kAlertSeverities[] = {"error", "warning"};

std::string escape_help(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void render_family(std::ostringstream& out, const Family& f) {
  if (f.samples.empty()) return;
  out << "# HELP " << f.name << ' ' << escape_help(f.help) << '\n';
  out << "# TYPE " << f.name << " gauge\n";
  for (const auto& s : f.samples) {
    out << f.name;
    if (!s.labels.empty()) {
      out << '{';
      bool first = true;
      for (const auto& [k, v] : s.labels) {
        if (!first) out << ',';
        first = false;
        out << k << "=\"" << escape_label_value(v) << '"';
      }
      out << '}';
    }
    out << ' ' << format_value(s.value) << '\n';
  }
}

}  // namespace

std::string verdict_profile(const results::Verdict& v) {
  if (v.baseline.is_object()) {
    auto it = v.baseline.find("profile");
    if (it != v.baseline.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

std::string profile_label(const std::string& profile) { return profile.empty() ? "none" : profile; }

double run_end_unix(const results::Verdict& v) {
  try {
    return results::parse_rfc3339(v.started_at) + (std::isfinite(v.duration_s) ? v.duration_s : 0);
  } catch (const std::exception&) {
    return std::nan("");
  }
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Whole numbers (counts, bytes, bandwidth in B/s) read better without an exponent.
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", value);
    return buf;
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

std::string render_metrics(const results::Verdict& v, const MetricsOptions& options) {
  const std::string profile = profile_label(verdict_profile(v));
  auto labels = [&](Labels extra = {}) {
    Labels l{{"cluster", options.cluster}, {"profile", profile}};
    l.insert(l.end(), extra.begin(), extra.end());
    return l;
  };
  std::vector<Family> fs;

  Family verdict{"ncclsmoke_verdict",
                 "Verdict of the last smoke run: 1 for its verdict, 0 for the others.", {}};
  for (results::Outcome o : results::kAllOutcomes)
    verdict.samples.push_back({labels({{"verdict", results::to_string(o)}}), v.verdict == o ? 1.0 : 0.0});
  fs.push_back(std::move(verdict));

  fs.push_back({"ncclsmoke_exit_code",
                "Exit code of the last smoke run (0 pass, 1 fail, 3 degraded, 4 inconclusive).",
                {{labels(), static_cast<double>(v.exit_code)}}});
  if (std::isfinite(v.duration_s))
    fs.push_back({"ncclsmoke_run_duration_seconds", "Wall time of the last smoke run.",
                  {{labels(), v.duration_s}}});
  fs.push_back({"ncclsmoke_world_size", "Number of ranks the last smoke run expected (0 unknown).",
                {{labels(), static_cast<double>(v.world.size)}}});

  Family ranks{"ncclsmoke_ranks", "Ranks of the last smoke run by status.", {}};
  std::map<std::string, int> rank_counts;
  for (results::RankStatus s : results::kAllRankStatuses) rank_counts[results::to_string(s)] = 0;
  for (const auto& r : v.ranks) rank_counts[results::to_string(r.status)] += results::ranks_in(r);
  for (const auto& [status, n] : rank_counts)
    ranks.samples.push_back({labels({{"status", status}}), static_cast<double>(n)});
  fs.push_back(std::move(ranks));

  const double end = run_end_unix(v);
  if (std::isfinite(end))
    fs.push_back({"ncclsmoke_last_run_timestamp_seconds",
                  "When the last smoke run ended, seconds since the epoch.", {{labels(), end}}});
  double success = options.last_success_unix;
  if (v.verdict == results::Outcome::pass && std::isfinite(end))
    success = std::isfinite(success) ? std::max(success, end) : end;
  if (std::isfinite(success))
    fs.push_back({"ncclsmoke_last_success_timestamp_seconds",
                  "When the last passing smoke run ended, seconds since the epoch.",
                  {{labels(), success}}});

  Family busbw{"ncclsmoke_gate_busbw_bytes_per_second",
               "All-reduce bus bandwidth at the gate message size: the number the judge compares "
               "with the baseline (bytes per second).", {}};
  Family baseline{"ncclsmoke_gate_baseline_bytes_per_second",
                  "Baseline bus bandwidth at the gate size from the selected profile.", {}};
  Family ratio{"ncclsmoke_gate_ratio",
               "Gate bus bandwidth divided by the baseline (1 = at baseline).", {}};
  Family degraded_ratio{"ncclsmoke_gate_degraded_ratio",
                        "Ratio to baseline below which the run is degraded.", {}};
  Family fail_ratio{"ncclsmoke_gate_fail_ratio", "Ratio to baseline below which the run fails.",
                    {}};
  Family gate_bytes{"ncclsmoke_gate_message_bytes", "Message size of the gate measurement.", {}};
  Family identity{"ncclsmoke_transport_identity_info",
                  "What actually carried the bytes per transport (always 1).", {}};
  for (const auto& g : results::gates_of(v)) {
    Labels l = labels({{"transport", g.transport}, {"synthetic", g.synthetic ? "true" : "false"}});
    const double gbps = 1e9;
    if (std::isfinite(g.busbw_gbps)) busbw.samples.push_back({l, g.busbw_gbps * gbps});
    if (std::isfinite(g.baseline_gbps)) baseline.samples.push_back({l, g.baseline_gbps * gbps});
    if (std::isfinite(g.busbw_gbps) && std::isfinite(g.baseline_gbps) && g.baseline_gbps > 0)
      ratio.samples.push_back({l, g.busbw_gbps / g.baseline_gbps});
    if (std::isfinite(g.degraded_ratio)) degraded_ratio.samples.push_back({l, g.degraded_ratio});
    if (std::isfinite(g.fail_ratio)) fail_ratio.samples.push_back({l, g.fail_ratio});
    if (g.gate_bytes > 0) gate_bytes.samples.push_back({l, static_cast<double>(g.gate_bytes)});
    if (!g.identity.empty())
      identity.samples.push_back(
          {labels({{"transport", g.transport}, {"identity", g.identity}}), 1.0});
  }
  for (auto* f : {&busbw, &baseline, &ratio, &degraded_ratio, &fail_ratio, &gate_bytes, &identity})
    fs.push_back(std::move(*f));

  Family transport{"ncclsmoke_transport_status",
                   "Status of each transport phase of the last smoke run: 1 for its status.", {}};
  for (const auto& p : v.phases) {
    const auto id = results::PhaseId::parse(p.name);
    if (id.kind != results::PhaseKind::transport) continue;
    const std::string& name = id.transport;
    for (results::PhaseStatus s : results::kAllPhaseStatuses) {
      transport.samples.push_back({labels({{"transport", name}, {"status", results::to_string(s)}}),
                                   p.status == s ? 1.0 : 0.0});
    }
  }
  fs.push_back(std::move(transport));

  Family findings{"ncclsmoke_findings",
                  "Findings of the last smoke run by code and severity (see docs/findings.md).",
                  {}};
  std::map<std::pair<std::string, std::string>, int> counts;
  for (const auto& c : results::finding_codes())
    counts[{results::to_string(c.code), results::to_string(c.severity)}] = 0;
  for (const char* code : kAlertCodes)
    for (const char* sev : kAlertSeverities) counts[{code, sev}] = 0;
  for (const auto& f : v.findings) ++counts[{results::to_string(f.code), results::to_string(f.severity)}];
  for (const auto& [key, n] : counts)
    findings.samples.push_back(
        {labels({{"code", key.first}, {"severity", key.second}}), static_cast<double>(n)});
  fs.push_back(std::move(findings));

  // Suspect hosts: one series per (code, severity, host) a finding names; bounded (see the header).
  struct Suspect {
    int severity_rank;
    std::string code, severity, host, node;
    bool operator<(const Suspect& o) const {
      return std::tie(severity_rank, code, host, node, severity) <
             std::tie(o.severity_rank, o.code, o.host, o.node, o.severity);
    }
  };
  auto severity_rank = [](const std::string& s) { return s == "error" ? 0 : s == "warning" ? 1 : 2; };
  // The hosts the findings name, with their nodes: the one list (results/verdict/suspects.h) the
  // suspects file and the Slurm drain read too; here every named host, suspect or not.
  std::set<Suspect> suspects;
  for (const auto& n : results::hosts_named(v))
    suspects.insert({severity_rank(results::to_string(n.severity)), std::string(n.code.str()),
                     results::to_string(n.severity), n.host, n.node});
  Family suspect{"ncclsmoke_suspect_host",
                 "1 per (finding code, severity, host) a finding of the last smoke run names; node "
                 "is the host's Kubernetes node. One series without code/host (value 0) when none.",
                 {}};
  std::size_t listed = 0;
  for (const auto& s : suspects) {
    if (listed == kMaxSuspectSeries) break;
    suspect.samples.push_back(
        {labels({{"code", s.code}, {"severity", s.severity}, {"host", s.host}, {"node", s.node}}), 1.0});
    ++listed;
  }
  if (suspect.samples.empty()) suspect.samples.push_back({labels(), 0.0});
  fs.push_back(std::move(suspect));
  fs.push_back({"ncclsmoke_suspect_hosts_omitted",
                "(code, severity, host) pairs named by findings but left out of "
                "ncclsmoke_suspect_host (over its series limit).",
                {{labels(), static_cast<double>(suspects.size() - listed)}}});

  fs.push_back({"ncclsmoke_build_info", "Version of the ncclsmoke that ran (always 1).",
                {{labels({{"version", v.tool.version.empty() ? "unknown" : v.tool.version}}), 1.0}}});

  std::ostringstream out;
  for (const auto& f : fs) render_family(out, f);
  return out.str();
}

double last_success_from_text(const std::string& text) {
  const std::string name = "ncclsmoke_last_success_timestamp_seconds";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    std::size_t rest = name.size();
    if (rest < line.size() && line[rest] != '{' && line[rest] != ' ') continue;
    // The value follows the last space (label values may contain spaces; ours end with '}').
    std::size_t close = line.rfind('}');
    std::size_t sp = line.find(' ', close == std::string::npos ? rest : close);
    if (sp == std::string::npos) continue;
    try {
      std::size_t used = 0;
      double v = std::stod(line.substr(sp + 1), &used);
      if (std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
  }
  return std::nan("");
}

}  // namespace ncclsmoke::cronjob
