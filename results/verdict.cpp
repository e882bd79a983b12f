#include "results/verdict.h"

#include <cmath>
#include <ctime>
#include <random>

#include "ncclsmoke/version.h"
#include "results/schema.h"

namespace ncclsmoke::results {

using nlohmann::json;

namespace {

// Measurements: NaN / inf mean "not measured" and become null. Durations: never negative, never NaN.
json measurement(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }
double duration(double x) { return std::isfinite(x) && x > 0 ? x : 0.0; }
double measurement_from(const json& j) { return j.is_null() ? std::nan("") : j.get<double>(); }

void put_if(json& j, const char* key, const std::string& value) {
  if (!value.empty()) j[key] = value;
}

std::string str_or(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? std::string() : it->get<std::string>();
}

std::map<std::string, std::string> string_map(const json& j) {
  std::map<std::string, std::string> m;
  for (auto it = j.begin(); it != j.end(); ++it) m[it.key()] = it.value().get<std::string>();
  return m;
}

json to_json(const RankInfo& r) {
  json j = {{"rank", r.rank}, {"status", r.status}};
  put_if(j, "host", r.host);
  put_if(j, "node", r.node);
  if (r.pid > 0) j["pid"] = r.pid;
  put_if(j, "local_address", r.local_address);
  put_if(j, "interface", r.interface);
  put_if(j, "detail", r.detail);
  return j;
}

json to_json(const Phase& p) {
  json j = {{"name", p.name},
            {"status", p.status},
            {"duration_s", duration(p.duration_s)},
            {"required", p.required}};
  put_if(j, "detail", p.detail);
  return j;
}

json to_json(const TransportRow& t) {
  json j = {{"transport", t.transport},
            {"bytes", t.bytes},
            {"count", t.count},
            {"dtype", t.dtype},
            {"in_place", t.in_place},
            {"time_us", measurement(t.time_us)},
            {"algbw_gbps", measurement(t.algbw_gbps)},
            {"busbw_gbps", measurement(t.busbw_gbps)},
            {"wrong", t.wrong >= 0 ? json(t.wrong) : json(nullptr)}};
  if (t.rank >= 0) j["rank"] = t.rank;
  if (t.gate) j["gate"] = true;
  if (t.synthetic) j["synthetic"] = true;
  return j;
}

json to_json(const TransportIdentity& t) {
  json j = {{"transport", t.transport},
            {"observed", t.observed.is_object() ? t.observed : json::object()}};
  if (t.rank >= 0) j["rank"] = t.rank;
  if (t.expected.is_object()) j["expected"] = t.expected;
  return j;
}

RankInfo rank_from(const json& j) {
  RankInfo r;
  r.rank = j.at("rank").get<int>();
  r.status = j.at("status").get<std::string>();
  r.host = str_or(j, "host");
  r.node = str_or(j, "node");
  r.pid = j.value("pid", std::int64_t{0});
  r.local_address = str_or(j, "local_address");
  r.interface = str_or(j, "interface");
  r.detail = str_or(j, "detail");
  return r;
}

Phase phase_from(const json& j) {
  Phase p;
  p.name = j.at("name").get<std::string>();
  p.status = j.at("status").get<std::string>();
  p.duration_s = j.at("duration_s").get<double>();
  p.required = j.value("required", true);
  p.detail = str_or(j, "detail");
  return p;
}

TransportRow row_from(const json& j) {
  TransportRow t;
  t.transport = j.at("transport").get<std::string>();
  t.rank = j.value("rank", -1);
  t.bytes = j.at("bytes").get<std::int64_t>();
  t.count = j.at("count").get<std::int64_t>();
  t.dtype = j.at("dtype").get<std::string>();
  t.in_place = j.at("in_place").get<bool>();
  t.time_us = measurement_from(j.at("time_us"));
  t.algbw_gbps = measurement_from(j.at("algbw_gbps"));
  t.busbw_gbps = measurement_from(j.at("busbw_gbps"));
  t.wrong = j.at("wrong").is_null() ? -1 : j.at("wrong").get<std::int64_t>();
  t.gate = j.value("gate", false);
  t.synthetic = j.value("synthetic", false);
  return t;
}

TransportIdentity identity_from(const json& j) {
  TransportIdentity t;
  t.transport = j.at("transport").get<std::string>();
  t.rank = j.value("rank", -1);
  if (j.contains("expected")) t.expected = j.at("expected");
  t.observed = j.at("observed");
  return t;
}

Finding finding_from(const json& j) {
  Finding f;
  f.code = j.at("code").get<std::string>();
  f.severity = j.at("severity").get<std::string>();
  f.layer = j.at("layer").get<std::string>();
  f.ranks = j.at("ranks").get<std::vector<int>>();
  f.hosts = j.at("hosts").get<std::vector<std::string>>();
  f.message = j.at("message").get<std::string>();
  f.hint = j.at("hint").get<std::string>();
  if (j.contains("evidence")) f.evidence = j.at("evidence");
  return f;
}

}  // namespace

json to_json(const Finding& f) {
  json j = {{"code", f.code},         {"severity", f.severity}, {"layer", f.layer},
            {"ranks", f.ranks},       {"hosts", f.hosts},       {"message", f.message},
            {"hint", f.hint}};
  if (f.evidence.is_object()) j["evidence"] = f.evidence;
  return j;
}

json to_json(const Verdict& v) {
  json j;
  j["schema_version"] = v.schema_version;
  j["tool"] = {{"name", v.tool.name}, {"version", v.tool.version}};
  j["run_id"] = v.run_id;
  j["started_at"] = v.started_at;
  j["duration_s"] = duration(v.duration_s);
  j["scope"] = v.scope;
  j["reporting_rank"] = v.reporting_rank;
  j["verdict"] = v.verdict;
  j["exit_code"] = v.exit_code;
  j["world"] = {{"size", v.world.size},
                {"master_addr", v.world.master_addr},
                {"master_port", v.world.master_port},
                {"source", v.world.source}};
  if (!v.world.job_id.empty()) {
    j["world"]["job_id"] = v.world.job_id;
    j["world"]["job_id_source"] = v.world.job_id_source;
  }
  if (v.world.restart_count > 0) j["world"]["restart_count"] = v.world.restart_count;
  if (!v.world.sources.empty()) j["world"]["sources"] = v.world.sources;
  if (!v.world.store.host.empty()) {
    const auto& s = v.world.store;
    j["world"]["store"] = {{"host", s.host},           {"port", s.port},
                           {"hosted_by", s.hosted_by}, {"dialect", s.dialect},
                           {"era", s.era},             {"key_prefix", s.key_prefix}};
  }
  j["ranks"] = json::array();
  for (const auto& r : v.ranks) j["ranks"].push_back(to_json(r));
  j["phases"] = json::array();
  for (const auto& p : v.phases) j["phases"].push_back(to_json(p));
  j["transports"] = json::array();
  for (const auto& t : v.transports) j["transports"].push_back(to_json(t));
  if (!v.identities.empty()) {
    j["identities"] = json::array();
    for (const auto& t : v.identities) j["identities"].push_back(to_json(t));
  }
  if (v.baseline.is_object()) j["baseline"] = v.baseline;
  j["findings"] = json::array();
  for (const auto& f : v.findings) j["findings"].push_back(to_json(f));
  j["env"] = v.env;
  j["versions"] = v.versions;
  return j;
}

Verdict verdict_from_json(const json& j) {
  auto problems = validate_verdict_json(j);
  if (!problems.empty()) {
    std::string msg = "not a valid ncclsmoke verdict (schema version " +
                      std::to_string(kSchemaVersion) + "): ";
    const size_t shown = std::min<size_t>(problems.size(), 8);
    for (size_t i = 0; i < shown; ++i) msg += (i ? "; " : "") + problems[i];
    if (problems.size() > shown) {
      msg += "; and " + std::to_string(problems.size() - shown) + " more";
    }
    throw VerdictFormatError(msg, std::move(problems));
  }
  Verdict v;
  v.schema_version = j.at("schema_version").get<int>();
  v.tool.name = j.at("tool").at("name").get<std::string>();
  v.tool.version = j.at("tool").at("version").get<std::string>();
  v.run_id = j.at("run_id").get<std::string>();
  v.started_at = j.at("started_at").get<std::string>();
  v.duration_s = j.at("duration_s").get<double>();
  v.scope = j.at("scope").get<std::string>();
  v.reporting_rank = j.at("reporting_rank").get<int>();
  v.verdict = j.at("verdict").get<std::string>();
  v.exit_code = j.at("exit_code").get<int>();
  const json& w = j.at("world");
  v.world.size = w.at("size").get<int>();
  v.world.master_addr = w.at("master_addr").get<std::string>();
  v.world.master_port = w.at("master_port").get<int>();
  v.world.source = w.at("source").get<std::string>();
  v.world.job_id = w.value("job_id", "");
  v.world.job_id_source = w.value("job_id_source", "");
  v.world.restart_count = w.value("restart_count", 0);
  if (w.contains("sources")) v.world.sources = string_map(w.at("sources"));
  if (w.contains("store")) {
    const json& s = w.at("store");
    v.world.store.host = s.at("host").get<std::string>();
    v.world.store.port = s.at("port").get<int>();
    v.world.store.hosted_by = s.at("hosted_by").get<std::string>();
    v.world.store.dialect = s.at("dialect").get<std::string>();
    v.world.store.era = s.at("era").get<std::string>();
    v.world.store.key_prefix = s.at("key_prefix").get<std::string>();
  }
  for (const auto& r : j.at("ranks")) v.ranks.push_back(rank_from(r));
  for (const auto& p : j.at("phases")) v.phases.push_back(phase_from(p));
  for (const auto& t : j.at("transports")) v.transports.push_back(row_from(t));
  if (j.contains("identities")) {
    for (const auto& t : j.at("identities")) v.identities.push_back(identity_from(t));
  }
  if (j.contains("baseline")) v.baseline = j.at("baseline");
  for (const auto& f : j.at("findings")) v.findings.push_back(finding_from(f));
  v.env = string_map(j.at("env"));
  v.versions = string_map(j.at("versions"));
  return v;
}

std::string rfc3339_utc(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  auto secs = time_point_cast<seconds>(t);
  if (secs > t) secs -= seconds(1);  // floor for times before the epoch
  auto ms = duration_cast<milliseconds>(t - secs).count();
  std::time_t tt = system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
  return buf;
}

std::string new_run_id() {
  std::time_t tt = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char stamp[24];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::random_device rd;
  std::uint32_t r = rd();
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", r);
  return std::string(stamp) + "-" + hex;
}

Verdict new_verdict(int reporting_rank) {
  Verdict v;
  v.tool.version = ncclsmoke::kVersion;
  v.versions["ncclsmoke"] = ncclsmoke::kVersion;
  v.run_id = new_run_id();
  v.started_at = rfc3339_utc(std::chrono::system_clock::now());
  v.reporting_rank = reporting_rank;
  return v;
}

}  // namespace ncclsmoke::results
