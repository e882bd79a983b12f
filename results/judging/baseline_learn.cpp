#include "results/judging/baseline_learn.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <map>
#include <sstream>

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

// Shortest text that reads back as exactly `v` (std::to_chars without a precision).
std::string number_text(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return std::to_string(v);
  std::string s(buf, p);
  return s;
}

double round_significant(double v, int digits) {
  if (!(v > 0) || !std::isfinite(v)) return v;
  double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(v))));
  double r = std::round(v * scale) / scale;
  // Re-read through the shortest text so the value equals what a YAML reader will get.
  return std::strtod(number_text(r).c_str(), nullptr);
}

std::string size_text(std::int64_t b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  std::int64_t v = b;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  return std::to_string(v) + " " + units[u];
}

std::string gbps_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string world_text(int ws) { return ws == 0 ? "any" : std::to_string(ws); }

bool accepted_verdict(const LearnGate& g, const LearnOptions& o,
                      const std::set<std::string>& degraded_allowed) {
  if (g.verdict == Outcome::pass) return true;
  return o.include_degraded && g.verdict == Outcome::degraded && degraded_allowed.count(g.run_id);
}

void emit_scalar_json(YAML::Emitter& e, const json& v) {
  if (v.is_string()) {
    e << YAML::DoubleQuoted << v.get<std::string>();
  } else if (v.is_boolean()) {
    e << v.get<bool>();
  } else if (v.is_number_integer()) {
    e << std::to_string(v.get<std::int64_t>());
  } else if (v.is_number()) {
    e << number_text(v.get<double>());
  } else {
    e << YAML::Null;
  }
}

bool same_band(const BaselineBand& a, const BaselineBand& b) {
  return a.busbw_gbps == b.busbw_gbps && a.degraded_ratio == b.degraded_ratio &&
         a.fail_ratio == b.fail_ratio && a.gate_bytes == b.gate_bytes && a.source == b.source;
}

}  // namespace

int LearnResult::written() const {
  int n = 0;
  for (const auto& p : proposals)
    if (p.status == Proposal::Status::kChanged || p.status == Proposal::Status::kNew) ++n;
  return n;
}

double median(std::vector<double> values) {
  if (values.empty()) throw LearnError("median of no values");
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string utc_time(double unix_seconds) {
  std::time_t t = static_cast<std::time_t>(std::floor(unix_seconds));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::set<std::string> degraded_only_by_bandwidth(const std::vector<LearnFinding>& findings) {
  std::map<std::string, bool> ok;  // run_id -> every warning/error is a BANDWIDTH_REGRESSION warning
  for (const auto& f : findings) {
    if (f.severity != Severity::warning && f.severity != Severity::error) continue;
    bool this_ok = f.code == Code::BANDWIDTH_REGRESSION && f.severity == Severity::warning;
    auto [it, inserted] = ok.emplace(f.run_id, this_ok);
    if (!inserted) it->second = it->second && this_ok;
  }
  std::set<std::string> out;
  for (const auto& [id, good] : ok)
    if (good) out.insert(id);
  return out;
}

LearnResult learn_baselines(const std::vector<LearnGate>& gates,
                            const std::vector<Profile>& profiles, const LearnOptions& o) {
  if (o.last < 1) throw LearnError("--last must be at least 1 (got " + std::to_string(o.last) + ")");
  if (o.min_runs < 1)
    throw LearnError("--min-runs must be at least 1 (got " + std::to_string(o.min_runs) + ")");
  if (o.min_runs > o.last)
    throw LearnError("--min-runs (" + std::to_string(o.min_runs) + ") is larger than --last (" +
                     std::to_string(o.last) + "): no key could ever be proposed");
  const Profile* prof = find_profile(profiles, o.profile);
  if (!prof) {
    std::string names;
    for (const auto& p : profiles) names += (names.empty() ? "" : ", ") + p.name;
    throw LearnError("profile '" + o.profile + "' is not in the profiles file (profiles there: " +
                     (names.empty() ? "none" : names) + ")");
  }
  const std::set<std::string> degraded_allowed =
      o.include_degraded ? degraded_only_by_bandwidth(o.degraded_findings) : std::set<std::string>{};

  LearnResult r;
  r.profile = o.profile;
  r.last = o.last;
  r.min_runs = o.min_runs;
  // Per key: run_id -> (start time, busbw). One number per run and key (the lowest if a run
  // somehow stored two: the conservative one, as the judge does).
  struct Sample {
    double started = 0;
    double busbw = 0;
  };
  std::map<LearnKey, std::map<std::string, Sample>> groups;
  std::set<std::string> runs;
  for (const auto& g : gates) {
    if (g.profile != o.profile) {
      ++r.excluded_other_profile;
      continue;
    }
    if (!accepted_verdict(g, o, degraded_allowed)) {
      ++r.excluded_verdict;
      continue;
    }
    if (g.synthetic) {
      ++r.excluded_synthetic;
      continue;
    }
    if (!std::isfinite(g.busbw_gbps) || g.busbw_gbps <= 0 || g.gate_bytes <= 0 ||
        g.world_size <= 0 || g.transport.empty()) {
      ++r.excluded_unmeasured;
      continue;
    }
    LearnKey k{g.transport, g.world_size, g.gate_bytes};
    auto [it, inserted] = groups[k].emplace(g.run_id, Sample{g.started_unix, g.busbw_gbps});
    if (!inserted) it->second.busbw = std::min(it->second.busbw, g.busbw_gbps);
    runs.insert(g.run_id);
    ++r.gates_used;
  }
  r.runs_accepted = static_cast<int>(runs.size());

  for (auto& [key, by_run] : groups) {
    std::vector<std::pair<std::string, Sample>> samples(by_run.begin(), by_run.end());
    std::sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
      return a.second.started != b.second.started ? a.second.started < b.second.started
                                                  : a.first < b.first;
    });
    Proposal p;
    p.key = key;
    p.runs_available = static_cast<int>(samples.size());
    if (samples.size() > static_cast<size_t>(o.last))
      samples.erase(samples.begin(), samples.end() - o.last);
    p.runs = static_cast<int>(samples.size());
    std::vector<double> values;
    for (const auto& [id, s] : samples) {
      p.run_ids.push_back(id);
      values.push_back(s.busbw);
    }
    p.first_unix = samples.front().second.started;
    p.last_unix = samples.back().second.started;
    p.median_gbps = median(values);
    p.min_gbps = *std::min_element(values.begin(), values.end());
    p.max_gbps = *std::max_element(values.begin(), values.end());
    const TransportExpectation* te = find_transport(*prof, key.transport);
    p.new_transport = te == nullptr;
    if (te) {
      if (auto it = te->by_world_size.find(key.world_size); it != te->by_world_size.end()) {
        p.has_current = true;
        p.current_world_size = key.world_size;
        p.current = it->second;
      } else if (auto it0 = te->by_world_size.find(0); it0 != te->by_world_size.end()) {
        p.has_current = true;
        p.current_world_size = 0;
        p.current = it0->second;
      }
    }
    p.proposed = BaselineBand{};
    if (p.has_current) {
      p.proposed.degraded_ratio = p.current.degraded_ratio;
      p.proposed.fail_ratio = p.current.fail_ratio;
    }
    p.proposed.busbw_gbps = round_significant(p.median_gbps, 4);
    p.proposed.gate_bytes = key.gate_bytes;
    p.proposed.source = "learned: median of " + std::to_string(p.runs) + " passing runs " +
                        utc_time(p.first_unix) + ".." + utc_time(p.last_unix) +
                        " (ncclsmoke baseline learn)";
    if (p.runs < o.min_runs) {
      p.status = Proposal::Status::kNotEnough;
    } else {
      p.status = p.has_current && p.current_world_size == key.world_size
                     ? Proposal::Status::kChanged
                     : Proposal::Status::kNew;
    }
    r.proposals.push_back(std::move(p));
  }

  // One band per (transport, world size): pick among the gate sizes with enough runs.
  std::map<std::pair<std::string, int>, std::vector<Proposal*>> by_slot;
  for (auto& p : r.proposals)
    if (p.status != Proposal::Status::kNotEnough)
      by_slot[{p.key.transport, p.key.world_size}].push_back(&p);
  for (auto& [slot, ps] : by_slot) {
    if (ps.size() < 2) continue;
    Proposal* best = nullptr;
    for (Proposal* p : ps) {
      if (p->status == Proposal::Status::kChanged && p->current.gate_bytes == p->key.gate_bytes) {
        best = p;
        break;
      }
    }
    if (!best) {
      for (Proposal* p : ps) {
        if (!best || p->runs > best->runs ||
            (p->runs == best->runs && p->key.gate_bytes > best->key.gate_bytes))
          best = p;
      }
    }
    for (Proposal* p : ps)
      if (p != best) p->status = Proposal::Status::kNotWritten;
  }

  // The merged profiles.
  r.merged = profiles;
  Profile* mp = nullptr;
  for (auto& p : r.merged)
    if (p.name == o.profile) mp = &p;
  for (const auto& p : r.proposals) {
    if (p.status != Proposal::Status::kChanged && p.status != Proposal::Status::kNew) continue;
    TransportExpectation* te = nullptr;
    for (auto& t : mp->transports)
      if (t.transport == p.key.transport) te = &t;
    if (!te) {
      TransportExpectation added;
      added.transport = p.key.transport;
      added.required = false;
      mp->transports.push_back(std::move(added));
      te = &mp->transports.back();
    }
    te->by_world_size[p.key.world_size] = p.proposed;
  }
  std::set<std::pair<std::string, int>> replaced;
  for (const auto& p : r.proposals)
    if (p.status == Proposal::Status::kChanged || p.status == Proposal::Status::kNew)
      replaced.insert({p.key.transport, p.key.world_size});
  for (const auto& t : prof->transports)
    for (const auto& [ws, band] : t.by_world_size)
      if (!replaced.count({t.transport, ws})) r.kept.push_back({t.transport, ws, band});
  return r;
}

std::string diff_text(const LearnResult& r, const std::string& profiles_file) {
  std::ostringstream out;
  out << "baseline learn: profile " << r.profile << " (" << profiles_file << "): "
      << r.runs_accepted << " passing run" << (r.runs_accepted == 1 ? "" : "s") << ", "
      << r.gates_used << " gate number" << (r.gates_used == 1 ? "" : "s") << ", newest "
      << r.last << " per key, at least " << r.min_runs;
  std::vector<std::string> excluded;
  if (r.excluded_verdict) excluded.push_back(std::to_string(r.excluded_verdict) + " not passing");
  if (r.excluded_synthetic) excluded.push_back(std::to_string(r.excluded_synthetic) + " synthetic");
  if (r.excluded_unmeasured)
    excluded.push_back(std::to_string(r.excluded_unmeasured) + " without a number");
  if (r.excluded_other_profile)
    excluded.push_back(std::to_string(r.excluded_other_profile) + " of other profiles");
  if (!excluded.empty()) {
    out << "; gates excluded:";
    for (size_t i = 0; i < excluded.size(); ++i) out << (i ? ", " : " ") << excluded[i];
  }
  out << "\n";
  for (const auto& p : r.proposals) {
    out << "  " << p.key.transport << " world_size " << p.key.world_size << " gate "
        << size_text(p.key.gate_bytes) << ": ";
    std::string current;
    if (p.has_current) {
      current = gbps_text(p.current.busbw_gbps) + " GB/s";
      if (p.current_world_size != p.key.world_size) current += " (any-world-size band)";
      if (p.current.gate_bytes != p.key.gate_bytes)
        current += " (at gate " + size_text(p.current.gate_bytes) + ")";
    }
    std::string change;
    if (p.has_current && p.current.gate_bytes == p.key.gate_bytes && p.current.busbw_gbps > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " (%+.1f%%)",
                    100.0 * (p.proposed.busbw_gbps / p.current.busbw_gbps - 1.0));
      change = buf;
    }
    std::string runs = "median of " + std::to_string(p.runs) + " run" + (p.runs == 1 ? "" : "s") +
                       " " + utc_time(p.first_unix) + ".." + utc_time(p.last_unix) + ", range " +
                       gbps_text(p.min_gbps) + ".." + gbps_text(p.max_gbps) + " GB/s";
    switch (p.status) {
      case Proposal::Status::kNotEnough:
        out << "not enough runs (" << p.runs << " of " << r.min_runs << "): not proposed"
            << (p.has_current ? "; kept " + current : "");
        break;
      case Proposal::Status::kChanged:
        out << current << " -> " << gbps_text(p.proposed.busbw_gbps) << " GB/s" << change << "; "
            << runs;
        break;
      case Proposal::Status::kNew:
        out << "new " << gbps_text(p.proposed.busbw_gbps) << " GB/s";
        if (p.new_transport)
          out << " (transport not in the profile: added with required: false)";
        else if (p.has_current)
          out << " (was " << current << ")" << change;
        out << "; " << runs;
        break;
      case Proposal::Status::kNotWritten:
        out << "proposed " << gbps_text(p.proposed.busbw_gbps) << " GB/s, not written (one band "
            << "per transport and world size; another gate size was chosen); " << runs;
        break;
    }
    out << "\n";
  }
  for (const auto& k : r.kept) {
    out << "  " << k.transport << " world_size " << world_text(k.world_size) << " gate "
        << size_text(k.band.gate_bytes) << ": " << gbps_text(k.band.busbw_gbps)
        << " GB/s kept: no passing runs in the history for this key\n";
  }
  if (r.proposals.empty()) out << "  (nothing to propose)\n";
  return out.str();
}

std::string profiles_to_yaml(const std::vector<Profile>& profiles, const std::string& header) {
  YAML::Emitter e;
  e.SetIndent(2);
  e << YAML::BeginMap << YAML::Key << "profiles" << YAML::Value << YAML::BeginSeq;
  for (const auto& p : profiles) {
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << p.name;
    if (!p.description.empty())
      e << YAML::Key << "description" << YAML::Value << YAML::DoubleQuoted << p.description;
    e << YAML::Key << "transports" << YAML::Value << YAML::BeginSeq;
    for (const auto& t : p.transports) {
      e << YAML::BeginMap;
      e << YAML::Key << "transport" << YAML::Value << YAML::DoubleQuoted << t.transport;
      if (!t.required) e << YAML::Key << "required" << YAML::Value << false;
      if (t.identity.is_object() && !t.identity.empty()) {
        e << YAML::Key << "identity" << YAML::Value << YAML::Flow << YAML::BeginMap;
        for (const auto& [k, v] : t.identity.items()) {
          e << YAML::Key << k << YAML::Value;
          emit_scalar_json(e, v);
        }
        e << YAML::EndMap;
      }
      if (!t.by_world_size.empty()) {
        e << YAML::Key << "baselines" << YAML::Value << YAML::BeginSeq;
        for (const auto& [ws, b] : t.by_world_size) {
          e << YAML::BeginMap;
          if (ws != 0) e << YAML::Key << "world_size" << YAML::Value << std::to_string(ws);
          e << YAML::Key << "busbw_gbps" << YAML::Value << number_text(b.busbw_gbps);
          e << YAML::Key << "gate_bytes" << YAML::Value << std::to_string(b.gate_bytes);
          e << YAML::Key << "degraded_ratio" << YAML::Value << number_text(b.degraded_ratio);
          e << YAML::Key << "fail_ratio" << YAML::Value << number_text(b.fail_ratio);
          e << YAML::Key << "source" << YAML::Value << YAML::DoubleQuoted << b.source;
          e << YAML::EndMap;
        }
        e << YAML::EndSeq;
      }
      e << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  if (!e.good()) throw LearnError("profiles: YAML emitter: " + e.GetLastError());
  std::string out;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
  out += e.c_str();
  out += "\n";
  return out;
}

bool same_profiles(const std::vector<Profile>& a, const std::vector<Profile>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Profile& x = a[i];
    const Profile& y = b[i];
    if (x.name != y.name || x.description != y.description ||
        x.transports.size() != y.transports.size())
      return false;
    for (size_t k = 0; k < x.transports.size(); ++k) {
      const auto& s = x.transports[k];
      const auto& t = y.transports[k];
      if (s.transport != t.transport || s.required != t.required || s.identity != t.identity ||
          s.by_world_size.size() != t.by_world_size.size())
        return false;
      for (const auto& [ws, band] : s.by_world_size) {
        auto it = t.by_world_size.find(ws);
        if (it == t.by_world_size.end() || !same_band(band, it->second)) return false;
      }
    }
  }
  return true;
}

std::string merged_yaml(const LearnResult& r, const std::string& header) {
  std::string text = profiles_to_yaml(r.merged, header);
  std::vector<Profile> back;
  try {
    back = load_profiles(text);
  } catch (const ProfileError& e) {
    throw LearnError(std::string("the merged profiles do not load back: ") + e.what());
  }
  if (!same_profiles(back, r.merged))
    throw LearnError("the merged profiles do not read back identically (not written)");
  return text;
}

}  // namespace ncclsmoke::results
