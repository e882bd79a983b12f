#include "results/verdict/verdict.h"

#include <charconv>
#include <cmath>
#include <ctime>
#include <limits>
#include <random>
#include <type_traits>

#include <fmt/format.h>

#include "ncclsmoke/version.h"
#include "rendezvous/bounded_json.h"
#include "results/verdict/schema.h"

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

}  // namespace

void add_rank_ranges(std::vector<RankInfo>& into, const std::vector<int>& sorted_ranks,
                     const RankInfo& like) {
  for (std::size_t i = 0; i < sorted_ranks.size();) {
    std::size_t j = i;
    while (j + 1 < sorted_ranks.size() && sorted_ranks[j + 1] == sorted_ranks[j] + 1) ++j;
    RankInfo r = like;
    r.rank = sorted_ranks[i];
    r.through = j > i ? sorted_ranks[j] : -1;
    into.push_back(std::move(r));
    i = j + 1;
  }
}

namespace {

json to_json(const RankInfo& r) {
  json j = {{"rank", r.rank}, {"status", to_string(r.status)}};
  if (r.through > r.rank) j["through"] = r.through;
  put_if(j, "host", r.host);
  put_if(j, "node", r.node);
  if (r.pid > 0) j["pid"] = r.pid;
  put_if(j, "local_address", r.local_address);
  put_if(j, "interface", r.interface);
  if (r.link_speed_mbps > 0) j["link_speed_mbps"] = r.link_speed_mbps;
  put_if(j, "detail", r.detail);
  return j;
}

json to_json(const Phase& p) {
  json j = {{"name", p.name},
            {"status", to_string(p.status)},
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
  r.status = j.at("status").get<RankStatus>();  // enums.h from_json
  r.host = str_or(j, "host");
  r.node = str_or(j, "node");
  r.pid = j.value("pid", std::int64_t{0});
  r.local_address = str_or(j, "local_address");
  r.interface = str_or(j, "interface");
  r.link_speed_mbps = std::max(0, j.value("link_speed_mbps", 0));
  r.detail = str_or(j, "detail");
  r.through = j.value("through", -1);
  return r;
}

Phase phase_from(const json& j) {
  Phase p;
  p.name = j.at("name").get<std::string>();
  p.status = j.at("status").get<PhaseStatus>();
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
  f.code = j.at("code").get<AnyCode>();  // an unknown code keeps its text
  f.severity = j.at("severity").get<Severity>();
  f.layer = j.at("layer").get<Layer>();
  f.ranks = j.at("ranks").get<std::vector<int>>();
  f.hosts = j.at("hosts").get<std::vector<std::string>>();
  f.message = j.at("message").get<std::string>();
  f.hint = j.at("hint").get<std::string>();
  if (j.contains("evidence")) f.evidence = j.at("evidence");
  if (j.contains("message_template")) f.message_template = j.at("message_template").get<std::string>();
  if (j.contains("subject")) f.subject = subject_from_json(j.at("subject"));
  if (auto o = j.find("origin"); o != j.end() && o->is_string())
    f.origin = parse_finding_origin(o->get_ref<const std::string&>()).value_or(FindingOrigin::none);
  return f;
}

}  // namespace

Subject subject_from_json(const json& s) {
  Subject x;
  if (!s.is_object()) return x;
  if (s.contains("reporters")) x.reporters = s.at("reporters").get<std::vector<int>>();
  x.reporter_host = str_or(s, "reporter_host");
  x.peer = s.value("peer", -1);
  x.peer_host = str_or(s, "peer_host");
  x.transport = str_or(s, "transport");
  x.phase = str_or(s, "phase");
  x.item = str_or(s, "item");
  return x;
}

json to_json(const Subject& x) {
  json j = json::object();
  if (!x.reporters.empty()) j["reporters"] = x.reporters;
  if (!x.reporter_host.empty()) j["reporter_host"] = x.reporter_host;
  if (x.peer >= 0) j["peer"] = x.peer;
  if (!x.peer_host.empty()) j["peer_host"] = x.peer_host;
  if (!x.transport.empty()) j["transport"] = x.transport;
  if (!x.phase.empty()) j["phase"] = x.phase;
  if (!x.item.empty()) j["item"] = x.item;
  return j;
}

json to_json(const Finding& f) {
  json j = {{"code", to_string(f.code)},
            {"severity", to_string(f.severity)},
            {"layer", to_string(f.layer)},
            {"ranks", f.ranks},       {"hosts", f.hosts},       {"message", f.message},
            {"hint", f.hint}};
  if (f.evidence.is_object()) j["evidence"] = f.evidence;
  if (!f.subject.empty()) j["subject"] = to_json(f.subject);
  if (!f.message_template.empty()) j["message_template"] = f.message_template;
  if (f.origin != FindingOrigin::none) j["origin"] = to_string(f.origin);
  return j;
}

json to_json(const Verdict& v) {
  json j;
  j["schema_version"] = v.schema_version;
  j["schema_minor"] = v.schema_minor;
  j["tool"] = {{"name", v.tool.name}, {"version", v.tool.version}};
  j["run_id"] = v.run_id;
  j["started_at"] = v.started_at;
  j["duration_s"] = duration(v.duration_s);
  j["scope"] = v.scope;  // enums.h's to_json: the schema's spelling
  j["reporting_rank"] = v.reporting_rank;
  j["verdict"] = to_string(v.verdict);
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
                           {"era", s.era},             {"key_prefix", s.key_prefix},
                           {"authenticated", s.authenticated}};
  }
  // Up to kMaxExpandedRanks ranks in all, one entry a rank, as readers and jq scripts index
  // ranks[] by rank; past it, runs of alike ranks stay ranges ("through"), so a verdict's size
  // follows the ranks that joined, not WORLD_SIZE.
  std::size_t described = 0;
  for (const auto& r : v.ranks) described += static_cast<std::size_t>(ranks_in(r));
  const bool expand = described <= kMaxExpandedRanks;
  j["ranks"] = json::array();
  for (const auto& r : v.ranks) {
    if (!expand || r.through <= r.rank) {
      j["ranks"].push_back(to_json(r));
      continue;
    }
    RankInfo one = r;
    one.through = -1;
    for (one.rank = r.rank; one.rank <= r.through; ++one.rank) j["ranks"].push_back(to_json(one));
  }
  j["phases"] = json::array();
  for (const auto& p : v.phases) j["phases"].push_back(to_json(p));
  j["transports"] = json::array();
  for (const auto& t : v.transports) j["transports"].push_back(to_json(t));
  if (!v.identities.empty()) {
    j["identities"] = json::array();
    for (const auto& t : v.identities) j["identities"].push_back(to_json(t));
  }
  if (v.alike.is_object()) j["alike"] = v.alike;
  if (v.baseline.is_object()) j["baseline"] = v.baseline;
  j["findings"] = json::array();
  for (const auto& f : v.findings) j["findings"].push_back(to_json(f));
  j["env"] = v.env;
  j["versions"] = v.versions;
  if (v.nics.read) j["node"] = nics_to_json(v.nics);
  if (nvml_present(v.gpus)) j["node"]["gpus"] = gpus_to_json(v.gpus);
  return j;
}

json nics_to_json(const facts::NicFacts& n) {
  json interfaces = json::array();
  for (const auto& i : n.interfaces)
    interfaces.push_back({{"name", i.name},
                          {"operstate", i.operstate},
                          {"carrier", i.carrier},
                          {"speed_mbps", i.speed_mbps},
                          {"mtu", i.mtu},
                          {"rx_bytes", i.rx_bytes},
                          {"tx_bytes", i.tx_bytes},
                          {"moved", i.moved}});
  json ports = json::array();
  for (const auto& p : n.rdma_ports)
    ports.push_back({{"device", p.device},
                     {"port", p.port},
                     {"state", p.state},
                     {"phys_state", p.phys_state},
                     {"link_layer", p.link_layer},
                     {"rate_gbps", p.rate_gbps},
                     {"moved", p.moved}});
  return {{"nics", {{"root", n.root},
                    {"interval_s", n.interval_s},
                    {"interfaces", std::move(interfaces)},
                    {"rdma_ports", std::move(ports)}}}};
}

namespace {

template <typename T>
void take(const json& j, const char* key, T& into) {
  if (!j.is_object()) return;
  auto it = j.find(key);
  if (it == j.end()) return;
  if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) into = it->template get<std::string>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (it->is_number()) into = it->template get<T>();
  } else if constexpr (std::is_unsigned_v<T>) {
    if (it->is_number_unsigned() || (it->is_number_integer() && it->template get<long long>() >= 0))
      into = it->template get<T>();
  } else {
    if (it->is_number_integer()) {
      const auto v = it->template get<long long>();
      if (v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max())
        into = static_cast<T>(v);
    }
  }
}

std::map<std::string, std::uint64_t> counts_of(const json& j) {
  std::map<std::string, std::uint64_t> out;
  if (!j.is_object()) return out;
  auto it = j.find("moved");
  if (it == j.end() || !it->is_object()) return out;
  for (const auto& [name, v] : it->items())
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<long long>() >= 0))
      out[name] = v.get<std::uint64_t>();
  return out;
}

}  // namespace

json gpus_to_json(const facts::GpuHealthFacts& g) {
  json gpus = json::array();
  for (const auto& d : g.gpus)
    gpus.push_back({{"index", d.index},
                    {"uuid", d.uuid},
                    {"name", d.name},
                    {"pci_bus_id", d.pci_bus_id},
                    {"ecc_uncorrected_volatile", d.ecc_uncorrected_volatile},
                    {"ecc_uncorrected_aggregate", d.ecc_uncorrected_aggregate},
                    {"remapped_rows_uncorrectable", d.remapped_rows_uncorrectable},
                    {"remap_pending", d.remap_pending},
                    {"remap_failed", d.remap_failed},
                    {"retired_pages_dbe", d.retired_pages_dbe},
                    {"retired_pages_pending", d.retired_pages_pending},
                    {"pcie_width", d.pcie_width},
                    {"pcie_width_max", d.pcie_width_max},
                    {"pcie_gen", d.pcie_gen},
                    {"pcie_gen_max", d.pcie_gen_max},
                    {"clock_event_reasons", d.clock_event_reasons},
                    {"error", d.error}});
  return {{"read", g.read},
          {"why_not", g.why_not},
          {"init_error", g.init_error},
          {"library", g.library},
          {"driver_version", g.driver_version},
          {"gpus", std::move(gpus)}};
}

facts::GpuHealthFacts gpus_from_json(const json& node) {
  facts::GpuHealthFacts g;
  if (!node.is_object() || !node.contains("gpus") || !node["gpus"].is_object()) return g;
  const json& j = node["gpus"];
  if (auto it = j.find("read"); it != j.end() && it->is_boolean()) g.read = it->get<bool>();
  take(j, "why_not", g.why_not);
  take(j, "init_error", g.init_error);
  take(j, "library", g.library);
  take(j, "driver_version", g.driver_version);
  if (auto it = j.find("gpus"); it != j.end() && it->is_array())
    for (const auto& e : *it) {
      if (!e.is_object()) continue;
      facts::GpuFacts d;
      take(e, "index", d.index);
      take(e, "uuid", d.uuid);
      take(e, "name", d.name);
      take(e, "pci_bus_id", d.pci_bus_id);
      take(e, "ecc_uncorrected_volatile", d.ecc_uncorrected_volatile);
      take(e, "ecc_uncorrected_aggregate", d.ecc_uncorrected_aggregate);
      take(e, "remapped_rows_uncorrectable", d.remapped_rows_uncorrectable);
      take(e, "remap_pending", d.remap_pending);
      take(e, "remap_failed", d.remap_failed);
      take(e, "retired_pages_dbe", d.retired_pages_dbe);
      take(e, "retired_pages_pending", d.retired_pages_pending);
      take(e, "pcie_width", d.pcie_width);
      take(e, "pcie_width_max", d.pcie_width_max);
      take(e, "pcie_gen", d.pcie_gen);
      take(e, "pcie_gen_max", d.pcie_gen_max);
      take(e, "clock_event_reasons", d.clock_event_reasons);
      take(e, "error", d.error);
      g.gpus.push_back(std::move(d));
    }
  return g;
}

std::string reporting_host(const Verdict& v) {
  for (const auto& r : v.ranks)
    if (r.rank == v.reporting_rank) return r.host;
  return {};
}

facts::NicFacts nics_from_json(const json& node) {
  facts::NicFacts n;
  if (!node.is_object() || !node.contains("nics") || !node["nics"].is_object()) return n;
  const json& j = node["nics"];
  n.read = true;
  take(j, "root", n.root);
  take(j, "interval_s", n.interval_s);
  if (auto it = j.find("interfaces"); it != j.end() && it->is_array())
    for (const auto& e : *it) {
      if (!e.is_object()) continue;
      facts::NetInterfaceFacts i;
      take(e, "name", i.name);
      take(e, "operstate", i.operstate);
      take(e, "carrier", i.carrier);
      take(e, "speed_mbps", i.speed_mbps);
      take(e, "mtu", i.mtu);
      take(e, "rx_bytes", i.rx_bytes);
      take(e, "tx_bytes", i.tx_bytes);
      i.moved = counts_of(e);
      n.interfaces.push_back(std::move(i));
    }
  if (auto it = j.find("rdma_ports"); it != j.end() && it->is_array())
    for (const auto& e : *it) {
      if (!e.is_object()) continue;
      facts::RdmaPortFacts p;
      take(e, "device", p.device);
      take(e, "port", p.port);
      take(e, "state", p.state);
      take(e, "phys_state", p.phys_state);
      take(e, "link_layer", p.link_layer);
      take(e, "rate_gbps", p.rate_gbps);
      p.moved = counts_of(e);
      n.rdma_ports.push_back(std::move(p));
    }
  return n;
}

Verdict verdict_from_json(const json& j) {
  // The validator and everything after it recurse once per level: a tree deeper than any reader
  // lets through is refused before them (a tree from bounded_json.h never is).
  if (rendezvous::json_deeper_than(j))
    throw VerdictFormatError(
        fmt::format("not a valid ncclsmoke verdict: nested deeper than {} levels",
                    rendezvous::kMaxJsonDepth),
        {fmt::format("(document): nested deeper than {} levels", rendezvous::kMaxJsonDepth)});
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
  v.schema_minor = j.value("schema_minor", 0);
  v.tool.name = j.at("tool").at("name").get<std::string>();
  v.tool.version = j.at("tool").at("version").get<std::string>();
  v.run_id = j.at("run_id").get<std::string>();
  v.started_at = j.at("started_at").get<std::string>();
  v.duration_s = j.at("duration_s").get<double>();
  v.scope = j.at("scope").get<Scope>();
  v.reporting_rank = j.at("reporting_rank").get<int>();
  v.verdict = j.at("verdict").get<Outcome>();
  v.exit_code = j.at("exit_code").get<int>();
  const json& w = j.at("world");
  v.world.size = w.at("size").get<int>();
  v.world.master_addr = w.at("master_addr").get<std::string>();
  v.world.master_port = w.at("master_port").get<int>();
  v.world.source = w.at("source").get<AnyWorldSource>();  // unknown: kept as text
  v.world.job_id = w.value("job_id", "");
  v.world.job_id_source = w.value("job_id_source", "");
  v.world.restart_count = w.value("restart_count", 0);
  if (w.contains("sources")) v.world.sources = string_map(w.at("sources"));
  if (w.contains("store")) {
    const json& s = w.at("store");
    v.world.store.host = s.at("host").get<std::string>();
    v.world.store.port = s.at("port").get<int>();
    v.world.store.hosted_by = s.at("hosted_by").get<AnyStoreHostedBy>();
    v.world.store.dialect = s.at("dialect").get<StoreDialect>();
    v.world.store.era = s.at("era").get<AnyServerEra>();
    v.world.store.key_prefix = s.at("key_prefix").get<std::string>();
    v.world.store.authenticated = s.value("authenticated", false);
  }
  for (const auto& r : j.at("ranks")) v.ranks.push_back(rank_from(r));
  for (const auto& p : j.at("phases")) v.phases.push_back(phase_from(p));
  for (const auto& t : j.at("transports")) v.transports.push_back(row_from(t));
  if (j.contains("identities")) {
    for (const auto& t : j.at("identities")) v.identities.push_back(identity_from(t));
  }
  if (j.contains("alike")) v.alike = j.at("alike");
  if (j.contains("baseline")) v.baseline = j.at("baseline");
  for (const auto& f : j.at("findings")) v.findings.push_back(finding_from(f));
  v.env = string_map(j.at("env"));
  v.versions = string_map(j.at("versions"));
  if (j.contains("node")) {
    v.nics = nics_from_json(j.at("node"));
    v.gpus = gpus_from_json(j.at("node"));
  }
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

// ---------------------------------------------------------------------------------------------
// verdict_from_text_fast: one pass over the text, checking each member against the schema while
// filling the Verdict. Every case it is not certain about returns nullopt (the caller then takes
// the full path, which decides), so it only has to be right about what it accepts:
//   - keys are plain ASCII without escapes; a key seen twice, or one the schema does not name
//     where additionalProperties is false, gives up;
//   - strings with escapes, control or non-ASCII bytes are decoded by nlohmann (which checks
//     UTF-8), and give up in the fields with a pattern or a maxLength, and where a minLength
//     field holds a NUL (the validator counts up to it);
//   - integer fields take integer tokens only (no 1.0, no 1e0) inside int/int64 range; number
//     fields take either, converted as nlohmann's get<double>() does;
//   - free-form objects (baseline, evidence, expected, observed) are delimited here and parsed by
//     nlohmann itself.
namespace ncclsmoke::results {
namespace {

class FastReader {
 public:
  explicit FastReader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool at_end() {
    ws();
    return p_ == end_;
  }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool lit(char c) {
    ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    ws();
    return p_ < end_ && *p_ == c;
  }

  // `{ "key": value, ... }`; on_member(key) reads the value and returns false to give up.
  template <typename F>
  bool object(F on_member) {
    if (!lit('{')) return false;
    if (lit('}')) return true;
    for (;;) {
      std::string_view key;
      if (!plain_key(key) || !lit(':') || !on_member(key)) return false;
      if (lit(',')) continue;
      return lit('}');
    }
  }
  template <typename F>
  bool array(F on_item) {
    if (!lit('[')) return false;
    if (lit(']')) return true;
    for (;;) {
      if (!on_item()) return false;
      if (lit(',')) continue;
      return lit(']');
    }
  }

  // A string value. `plain_only`: give up unless it is ASCII without escapes (pattern fields).
  bool string(std::string& out, bool plain_only = false) {
    ws();
    if (p_ >= end_ || *p_ != '"') return false;
    const char* start = ++p_;
    while (p_ < end_) {
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out.assign(start, p_);
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) break;
      ++p_;
    }
    if (plain_only) return false;
    // The unusual string: find its end, let nlohmann decode and check it.
    if (!to_closing_quote()) return false;
    ++p_;
    auto j = json::parse(start - 1, p_, nullptr, false);
    if (!j.is_string()) return false;
    out = j.get<std::string>();
    return true;
  }
  // minLength 1. A NUL anywhere gives up: the validator's length count stops at one.
  bool string_min1(std::string& out) {
    return string(out) && !out.empty() && out.find('\0') == std::string::npos;
  }

  bool boolean(bool& out) {
    ws();
    if (word("true")) {
      out = true;
      return true;
    }
    if (word("false")) {
      out = false;
      return true;
    }
    return false;
  }
  bool null() {
    ws();
    return word("null");
  }

  // An integer token (no fraction, no exponent) within int64.
  bool int64(std::int64_t& out) {
    ws();
    const char* s = p_;
    if (!number_token()) return false;
    for (const char* q = s; q < p_; ++q)
      if (*q == '.' || *q == 'e' || *q == 'E') return false;
    auto [ptr, ec] = std::from_chars(s, p_, out);
    return ec == std::errc() && ptr == p_;
  }
  bool int32(int& out, std::int64_t min, std::int64_t max) {
    std::int64_t v = 0;
    if (!int64(v) || v < min || v > max) return false;
    out = static_cast<int>(v);
    return true;
  }
  // A number token, as nlohmann's get<double>() gives it; minimum 0.
  bool number_min0(double& out) {
    ws();
    const char* s = p_;
    if (!number_token()) return false;
    bool integral = true;
    for (const char* q = s; q < p_; ++q)
      if (*q == '.' || *q == 'e' || *q == 'E') integral = false;
    if (integral) {
      std::int64_t i = 0;
      auto [ptr, ec] = std::from_chars(s, p_, i);
      if (ec != std::errc() || ptr != p_) return false;
      out = static_cast<double>(i);
    } else {
      auto [ptr, ec] = std::from_chars(s, p_, out);
      if (ec != std::errc() || ptr != p_ || !std::isfinite(out)) return false;
    }
    return out >= 0;
  }

  // Any JSON object, delimited here and parsed (and checked) by nlohmann. At most
  // kFreeFormEnclosing levels enclose one (findings[i].evidence: the root, the list, the finding),
  // so one nested deeper than kMaxJsonDepth minus those gives up: the full path names it.
  static constexpr int kFreeFormEnclosing = 3;
  bool any_object(json& out) {
    ws();
    if (p_ >= end_ || *p_ != '{') return false;
    const char* start = p_;
    int depth = 0;
    while (p_ < end_) {
      char c = *p_;
      if (c == '"') {
        ++p_;
        if (!to_closing_quote()) return false;
      } else if (c == '{' || c == '[') {
        if (++depth > rendezvous::kMaxJsonDepth - kFreeFormEnclosing) return false;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) {
          ++p_;
          out = json::parse(start, p_, nullptr, false);
          return out.is_object();
        }
      }
      ++p_;
    }
    return false;
  }

  // {"k": "v", ...} with string values; keys may be anything (nlohmann decodes unusual ones).
  bool string_map(std::map<std::string, std::string>& out) {
    if (!lit('{')) return false;
    if (lit('}')) return true;
    for (;;) {
      std::string k, v;
      if (!string(k) || !lit(':') || !string(v)) return false;
      if (!out.emplace(std::move(k), std::move(v)).second) return false;  // duplicate key
      if (lit(',')) continue;
      return lit('}');
    }
  }

 private:
  bool plain_key(std::string_view& key) {
    ws();
    if (p_ >= end_ || *p_ != '"') return false;
    const char* start = ++p_;
    while (p_ < end_ && *p_ != '"') {
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    if (p_ >= end_) return false;
    key = std::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;
    return true;
  }
  // Inside a string: on to its closing quote (escapes skipped); false if there is none.
  bool to_closing_quote() {
    while (p_ < end_ && *p_ != '"') {
      if (*p_ == '\\' && ++p_ == end_) return false;
      ++p_;
    }
    return p_ < end_;
  }
  bool word(std::string_view w) {
    if (static_cast<size_t>(end_ - p_) < w.size() || std::string_view(p_, w.size()) != w)
      return false;
    p_ += w.size();
    return true;
  }
  // JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  bool number_token() {
    auto digit = [&] { return p_ < end_ && *p_ >= '0' && *p_ <= '9'; };
    if (p_ < end_ && *p_ == '-') ++p_;
    if (!digit()) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (digit()) ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (!digit()) return false;
      while (digit()) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digit()) return false;
      while (digit()) ++p_;
    }
    return true;
  }

  const char* p_;
  const char* end_;
};

// Members of one object: each key once; `required` bits must all be seen.
struct Seen {
  std::uint32_t bits = 0;
  bool first(int bit) {
    std::uint32_t b = 1u << bit;
    if (bits & b) return false;
    bits |= b;
    return true;
  }
  bool has(std::uint32_t mask) const { return (bits & mask) == mask; }
};

bool digits(const std::string& s, size_t from, size_t n) {
  if (s.size() < from + n) return false;
  for (size_t i = from; i < from + n; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$
bool rfc3339_shape(const std::string& s) {
  if (!digits(s, 0, 4) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2) || s[7] != '-' ||
      !digits(s, 8, 2) || s[10] != 'T' || !digits(s, 11, 2) || s[13] != ':' ||
      !digits(s, 14, 2) || s[16] != ':' || !digits(s, 17, 2))
    return false;
  size_t i = 19;
  if (s[i] == '.') {
    ++i;
    size_t d = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == d) return false;
  }
  return i + 1 == s.size() && s[i] == 'Z';
}

// ^[A-Z][A-Z0-9_]*$
bool code_shape(const std::string& s) {
  if (s.empty() || s[0] < 'A' || s[0] > 'Z') return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

// A string member holding one of an enum's spellings (enums.h parse_*); false for any other.
template <typename E>
bool read_enum(FastReader& r, E& out, std::optional<E> (*parse)(std::string_view)) {
  std::string s;
  if (!r.string(s)) return false;
  auto v = parse(s);
  if (!v) return false;
  out = *v;
  return true;
}

// A string member of an open list (enums.h Open<>): any string; an unknown one keeps its text.
template <typename Any>
bool read_open(FastReader& r, Any& out) {
  std::string s;
  if (!r.string(s)) return false;
  out = Any::from_text(s);
  return true;
}

bool read_code(FastReader& r, AnyCode& out) {
  std::string s;
  if (!r.string(s, true) || !code_shape(s)) return false;
  out = AnyCode::from_text(s);  // an unknown code keeps its text
  return true;
}

bool read_store(FastReader& r, StoreInfo& s) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "host") return seen.first(0) && r.string(s.host);
    if (k == "port") return seen.first(1) && r.int32(s.port, 0, 65535);
    if (k == "hosted_by") return seen.first(2) && read_open(r, s.hosted_by);
    if (k == "dialect") return seen.first(3) && read_enum(r, s.dialect, parse_store_dialect);
    if (k == "era") return seen.first(4) && read_open(r, s.era);
    if (k == "key_prefix") return seen.first(5) && r.string(s.key_prefix);
    if (k == "authenticated") return seen.first(6) && r.boolean(s.authenticated);
    return false;
  }) && seen.has(0x3f);
}

bool read_world(FastReader& r, World& w) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "size") return seen.first(0) && r.int32(w.size, 0, kIntMax);
    if (k == "master_addr") return seen.first(1) && r.string(w.master_addr);
    if (k == "master_port") return seen.first(2) && r.int32(w.master_port, 0, 65535);
    if (k == "source") return seen.first(3) && read_open(r, w.source);
    if (k == "job_id") return seen.first(4) && r.string(w.job_id, true) && w.job_id.size() <= 128;
    if (k == "job_id_source") return seen.first(5) && r.string(w.job_id_source);
    if (k == "restart_count") return seen.first(6) && r.int32(w.restart_count, 0, kIntMax);
    if (k == "sources") return seen.first(7) && r.string_map(w.sources);
    if (k == "store") return seen.first(8) && read_store(r, w.store);
    return false;
  }) && seen.has(0xf);
}

bool read_rank(FastReader& r, RankInfo& x) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "rank") return seen.first(0) && r.int32(x.rank, 0, kIntMax);
    if (k == "status")
      return seen.first(1) && read_enum(r, x.status, parse_rank_status);
    if (k == "host") return seen.first(2) && r.string(x.host);
    if (k == "node") return seen.first(3) && r.string(x.node);
    if (k == "pid") return seen.first(4) && r.int64(x.pid) && x.pid >= 0;
    if (k == "local_address") return seen.first(5) && r.string(x.local_address);
    if (k == "interface") return seen.first(6) && r.string(x.interface);
    if (k == "detail") return seen.first(7) && r.string(x.detail);
    if (k == "through") return seen.first(8) && r.int32(x.through, 0, kIntMax);
    if (k == "link_speed_mbps") return seen.first(9) && r.int32(x.link_speed_mbps, 1, kIntMax);
    return false;
  }) && seen.has(0x3);
}

bool read_phase(FastReader& r, Phase& x) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "name") return seen.first(0) && r.string_min1(x.name);
    if (k == "status")
      return seen.first(1) && read_enum(r, x.status, parse_phase_status);
    if (k == "duration_s") return seen.first(2) && r.number_min0(x.duration_s);
    if (k == "required") return seen.first(3) && r.boolean(x.required);
    if (k == "detail") return seen.first(4) && r.string(x.detail);
    return false;
  }) && seen.has(0x7);
}

bool measurement_or_null(FastReader& r, double& out) {
  if (r.peek('n')) {
    out = std::nan("");
    return r.null();
  }
  return r.number_min0(out);
}

bool read_row(FastReader& r, TransportRow& x) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "transport") return seen.first(0) && r.string_min1(x.transport);
    if (k == "bytes") return seen.first(1) && r.int64(x.bytes) && x.bytes >= 0;
    if (k == "count") return seen.first(2) && r.int64(x.count) && x.count >= 0;
    if (k == "dtype") return seen.first(3) && r.string_min1(x.dtype);
    if (k == "in_place") return seen.first(4) && r.boolean(x.in_place);
    if (k == "time_us") return seen.first(5) && measurement_or_null(r, x.time_us);
    if (k == "algbw_gbps") return seen.first(6) && measurement_or_null(r, x.algbw_gbps);
    if (k == "busbw_gbps") return seen.first(7) && measurement_or_null(r, x.busbw_gbps);
    if (k == "wrong") {
      if (!seen.first(8)) return false;
      if (r.peek('n')) return x.wrong = -1, r.null();
      return r.int64(x.wrong) && x.wrong >= 0;
    }
    if (k == "rank") return seen.first(9) && r.int32(x.rank, 0, kIntMax);
    if (k == "gate") return seen.first(10) && r.boolean(x.gate);
    if (k == "synthetic") return seen.first(11) && r.boolean(x.synthetic);
    return false;
  }) && seen.has(0x1ff);
}

bool read_identity(FastReader& r, TransportIdentity& x) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "transport") return seen.first(0) && r.string_min1(x.transport);
    if (k == "observed") return seen.first(1) && r.any_object(x.observed);
    if (k == "rank") return seen.first(2) && r.int32(x.rank, 0, kIntMax);
    if (k == "expected") return seen.first(3) && r.any_object(x.expected);
    return false;
  }) && seen.has(0x3);
}

bool read_subject(FastReader& r, Subject& x) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "reporters")
      return seen.first(0) && r.array([&] {
               int v = 0;
               if (!r.int32(v, 0, kIntMax)) return false;
               x.reporters.push_back(v);
               return true;
             });
    if (k == "reporter_host") return seen.first(1) && r.string(x.reporter_host);
    if (k == "peer") return seen.first(2) && r.int32(x.peer, 0, kIntMax);
    if (k == "peer_host") return seen.first(3) && r.string(x.peer_host);
    if (k == "transport") return seen.first(4) && r.string(x.transport);
    if (k == "phase") return seen.first(5) && r.string(x.phase);
    if (k == "item") return seen.first(6) && r.string(x.item);
    return false;
  });
}

bool read_finding(FastReader& r, Finding& x) {
  Seen seen;
  return r.object([&](std::string_view k) {
    if (k == "code") return seen.first(0) && read_code(r, x.code);
    if (k == "severity") return seen.first(1) && read_enum(r, x.severity, parse_severity);
    if (k == "layer") return seen.first(2) && read_enum(r, x.layer, parse_layer);
    if (k == "ranks")
      return seen.first(3) && r.array([&] {
               int v = 0;
               if (!r.int32(v, 0, kIntMax)) return false;
               x.ranks.push_back(v);
               return true;
             });
    if (k == "hosts")
      return seen.first(4) && r.array([&] {
               x.hosts.emplace_back();
               return r.string(x.hosts.back());
             });
    if (k == "message") return seen.first(5) && r.string_min1(x.message);
    if (k == "hint") return seen.first(6) && r.string(x.hint);
    if (k == "evidence") return seen.first(7) && r.any_object(x.evidence);
    if (k == "message_template") return seen.first(8) && r.string(x.message_template);
    if (k == "subject") return seen.first(9) && read_subject(r, x.subject);
    if (k == "origin") {
      std::string o;
      if (!seen.first(10) || !r.string_min1(o)) return false;
      x.origin = parse_finding_origin(o).value_or(FindingOrigin::none);
      return true;
    }
    return false;
  }) && seen.has(0x7f);
}

template <typename T, typename Read>
bool read_list(FastReader& r, std::vector<T>& out, Read read) {
  return r.array([&] {
    out.emplace_back();
    return read(r, out.back());
  });
}

}  // namespace

std::optional<Verdict> verdict_from_text_fast(std::string_view text) {
  if (text.size() > rendezvous::kMaxVerdictJsonBytes) return std::nullopt;
  FastReader r(text);
  Verdict v;
  v.schema_minor = 0;  // absent: written before minor versions
  Seen seen;
  bool ok = r.object([&](std::string_view k) {
    if (k == "schema_version") return seen.first(0) && r.int32(v.schema_version, 1, 1);
    if (k == "schema_minor") return seen.first(18) && r.int32(v.schema_minor, 0, kIntMax);
    if (k == "tool") {
      Seen t;
      return seen.first(1) && r.object([&](std::string_view tk) {
               if (tk == "name") return t.first(0) && r.string_min1(v.tool.name);
               if (tk == "version") return t.first(1) && r.string(v.tool.version);
               return false;
             }) && t.has(0x3);
    }
    if (k == "run_id")
      return seen.first(2) && r.string(v.run_id, true) && !v.run_id.empty() &&
             v.run_id.size() <= 128;
    if (k == "started_at")
      return seen.first(3) && r.string(v.started_at, true) && rfc3339_shape(v.started_at);
    if (k == "duration_s") return seen.first(4) && r.number_min0(v.duration_s);
    if (k == "scope") return seen.first(5) && read_enum(r, v.scope, parse_scope);
    if (k == "reporting_rank") return seen.first(6) && r.int32(v.reporting_rank, -1, kIntMax);
    if (k == "verdict")
      return seen.first(7) && read_enum(r, v.verdict, parse_outcome);
    if (k == "exit_code")
      return seen.first(8) && r.int32(v.exit_code, 0, 4) && v.exit_code != 2;
    if (k == "world") return seen.first(9) && read_world(r, v.world);
    if (k == "ranks") return seen.first(10) && read_list(r, v.ranks, read_rank);
    if (k == "phases") return seen.first(11) && read_list(r, v.phases, read_phase);
    if (k == "transports") return seen.first(12) && read_list(r, v.transports, read_row);
    if (k == "identities") return seen.first(13) && read_list(r, v.identities, read_identity);
    if (k == "baseline") return seen.first(14) && r.any_object(v.baseline);
    if (k == "alike") return seen.first(20) && r.any_object(v.alike);
    if (k == "findings") return seen.first(15) && read_list(r, v.findings, read_finding);
    if (k == "env") return seen.first(16) && r.string_map(v.env);
    if (k == "versions") return seen.first(17) && r.string_map(v.versions);
    if (k == "node") {
      json node;
      if (!seen.first(19) || !r.any_object(node)) return false;
      v.nics = nics_from_json(node);
      v.gpus = gpus_from_json(node);
      return true;
    }
    return false;
  });
  constexpr std::uint32_t kRequired = 0x3ffff & ~((1u << 13) | (1u << 14));
  if (!ok || !seen.has(kRequired) || !r.at_end()) return std::nullopt;
  const int expected_exit = v.verdict == Outcome::pass ? 0 : v.verdict == Outcome::fail ? 1
                            : v.verdict == Outcome::degraded ? 3 : 4;
  if (v.exit_code != expected_exit) return std::nullopt;
  return v;
}

}  // namespace ncclsmoke::results

namespace ncclsmoke::results {

Verdict verdict_from_text(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes)
    if (auto fast = verdict_from_text_fast(text)) return std::move(*fast);
  auto parsed = rendezvous::parse_bounded_json(text, max_bytes);
  if (!parsed.ok())
    throw VerdictFormatError("not a valid ncclsmoke verdict: " + parsed.error, {parsed.error});
  try {
    return verdict_from_json(parsed.value);
  } catch (const nlohmann::json::exception& e) {  // a type the schema let through, read as another
    throw VerdictFormatError(std::string("not a valid ncclsmoke verdict: ") + e.what(), {e.what()});
  }
}

}  // namespace ncclsmoke::results
