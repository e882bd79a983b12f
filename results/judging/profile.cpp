#include "results/judging/profile.h"

#include "results/verdict/env_allowlist.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace ncclsmoke::results {
namespace {

using nlohmann::json;

// A plain (unquoted) YAML scalar becomes null/bool/integer/number when it reads as one; a quoted
// scalar always stays a string (so `version: "1.0"` is not a number).
json scalar_to_json(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  std::int64_t i = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && p == s.data() + s.size()) return i;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end && *end == '\0' && end != s.c_str() && std::isfinite(d)) return d;
  return s;
}

// Converting walks every alias again (yaml-cpp shares the aliased node, the walk does not), so a
// budget of visited nodes and a depth limit bound the work whatever the aliases multiply to.
struct Budget {
  std::size_t nodes_left = kMaxYamlNodes;
};

json yaml_to_json(const YAML::Node& n, Budget& budget, int depth) {
  if (budget.nodes_left == 0)
    throw ProfileError("profiles: more than " + std::to_string(kMaxYamlNodes) +
                       " YAML nodes once aliases are expanded (an alias bomb?); a profiles file "
                       "needs far fewer: write the repeated parts out, or use fewer aliases");
  --budget.nodes_left;
  if (depth > kMaxYamlDepth)
    throw ProfileError("profiles: nested deeper than " + std::to_string(kMaxYamlDepth) +
                       " levels at line " + std::to_string(n.Mark().line + 1));
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(n);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e, budget, depth + 1));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar())
          throw ProfileError("profiles: a mapping key at line " +
                             std::to_string(kv.first.Mark().line + 1) + " is not a plain scalar");
        std::string key = kv.first.Scalar();
        if (o.contains(key)) {
          throw ProfileError("profiles: duplicate key '" + key + "' at line " +
                             std::to_string(kv.first.Mark().line + 1));
        }
        o[key] = yaml_to_json(kv.second, budget, depth + 1);
      }
      return o;
    }
  }
  return nullptr;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ProfileError("profiles: " + path + ": " + what);
}

void only_keys(const json& o, const std::string& path, std::set<std::string> allowed) {
  for (const auto& [k, _] : o.items()) {
    if (!allowed.count(k)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      bad(path + "." + k, "unknown key (allowed: " + list + ")");
    }
  }
}

const json& object_at(const json& o, const std::string& key, const std::string& path) {
  auto it = o.find(key);
  if (it == o.end()) bad(path + "." + key, "missing");
  if (!it->is_object()) bad(path + "." + key, "expected a mapping");
  return *it;
}

std::string string_at(const json& o, const std::string& key, const std::string& path,
                      bool required) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    if (required) bad(path + "." + key, "missing");
    return {};
  }
  if (!it->is_string()) bad(path + "." + key, "expected a string, got " + it->dump());
  if (required && it->get<std::string>().empty()) bad(path + "." + key, "must not be empty");
  return it->get<std::string>();
}

double number_at(const json& o, const std::string& key, const std::string& path, bool required,
                 double fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    if (required) bad(path + "." + key, "missing");
    return fallback;
  }
  if (!it->is_number()) bad(path + "." + key, "expected a number, got " + it->dump());
  return it->get<double>();
}

std::int64_t integer_at(const json& o, const std::string& key, const std::string& path,
                        bool required, std::int64_t fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    if (required) bad(path + "." + key, "missing");
    return fallback;
  }
  if (!it->is_number_integer()) bad(path + "." + key, "expected an integer, got " + it->dump());
  return it->get<std::int64_t>();
}

BaselineBand band_from(const json& b, const std::string& path) {
  if (!b.is_object()) bad(path, "expected a mapping");
  only_keys(b, path,
            {"world_size", "busbw_gbps", "degraded_ratio", "fail_ratio", "gate_bytes", "source"});
  BaselineBand band;
  band.busbw_gbps = number_at(b, "busbw_gbps", path, true, 0);
  if (!(band.busbw_gbps > 0)) bad(path + ".busbw_gbps", "must be > 0");
  band.degraded_ratio = number_at(b, "degraded_ratio", path, false, band.degraded_ratio);
  band.fail_ratio = number_at(b, "fail_ratio", path, false, band.fail_ratio);
  if (!(band.degraded_ratio > 0 && band.degraded_ratio <= 1))
    bad(path + ".degraded_ratio", "must be in (0, 1]");
  if (!(band.fail_ratio > 0 && band.fail_ratio <= band.degraded_ratio))
    bad(path + ".fail_ratio", "must be in (0, degraded_ratio]");
  band.gate_bytes = integer_at(b, "gate_bytes", path, true, 0);
  if (band.gate_bytes <= 0) bad(path + ".gate_bytes", "must be > 0");
  band.source = string_at(b, "source", path, true);
  return band;
}

}  // namespace

std::vector<Profile> profiles_from_json(const json& doc) {
  if (!doc.is_object()) bad("(top)", "expected a mapping with key 'profiles'");
  only_keys(doc, "(top)", {"profiles"});
  auto it = doc.find("profiles");
  if (it == doc.end() || !it->is_array()) bad("profiles", "expected a list of profiles");
  std::vector<Profile> out;
  std::set<std::string> names;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& p = (*it)[i];
    std::string path = "profiles[" + std::to_string(i) + "]";
    if (!p.is_object()) bad(path, "expected a mapping");
    only_keys(p, path, {"name", "description", "transports", "environment"});
    Profile prof;
    prof.name = string_at(p, "name", path, true);
    if (!names.insert(prof.name).second) bad(path + ".name", "duplicate profile '" + prof.name + "'");
    path = "profiles[" + std::to_string(i) + "] (" + prof.name + ")";
    prof.description = string_at(p, "description", path, false);
    if (p.contains("environment") && !p["environment"].is_null()) {
      const json& env = object_at(p, "environment", path);
      for (const auto& [name, value] : env.items()) {
        const std::string vpath = path + ".environment." + name;
        if (!env_name_allowed(name))
          bad(vpath, "not a variable a verdict keeps, so it cannot be checked (NCCL_*, FI_*, OFI_*, "
                     "OMPI_MCA_*, UCX_*, TORCH_*, ...: results/verdict/env_allowlist.h)");
        if (value.is_null()) {
          prof.environment[name] = std::nullopt;
        } else if (!value.is_string()) {
          bad(vpath, "expected a quoted string (an environment value is text: \"1\"), or ~ for "
                     "any value, got " + value.dump());
        } else if (env_name_secret(name)) {
          bad(vpath, "a secret's value is never kept in a verdict: require it set with ~");
        } else {
          prof.environment[name] = value.get<std::string>();
        }
      }
    }
    auto ts = p.find("transports");
    if (ts == p.end() || !ts->is_array() || ts->empty())
      bad(path + ".transports", "expected a non-empty list");
    std::set<std::string> seen;
    for (size_t k = 0; k < ts->size(); ++k) {
      const json& t = (*ts)[k];
      std::string tpath = path + ".transports[" + std::to_string(k) + "]";
      if (!t.is_object()) bad(tpath, "expected a mapping");
      only_keys(t, tpath, {"transport", "identity", "baselines", "required"});
      TransportExpectation te;
      te.transport = string_at(t, "transport", tpath, true);
      if (!seen.insert(te.transport).second)
        bad(tpath + ".transport", "duplicate transport '" + te.transport + "'");
      if (t.contains("required") && !t["required"].is_null()) {
        if (!t["required"].is_boolean()) bad(tpath + ".required", "expected true or false");
        te.required = t["required"].get<bool>();
      }
      if (t.contains("identity") && !t["identity"].is_null()) {
        te.identity = object_at(t, "identity", tpath);
        for (const auto& [key, val] : te.identity.items()) {
          if (!val.is_string() && !val.is_boolean() && !val.is_number())
            bad(tpath + ".identity." + key, "expected a string, boolean or number");
        }
      }
      if (t.contains("baselines") && !t["baselines"].is_null()) {
        const json& bs = t["baselines"];
        if (!bs.is_array()) bad(tpath + ".baselines", "expected a list");
        for (size_t b = 0; b < bs.size(); ++b) {
          std::string bpath = tpath + ".baselines[" + std::to_string(b) + "]";
          BaselineBand band = band_from(bs[b], bpath);
          std::int64_t ws = integer_at(bs[b], "world_size", bpath, false, 0);
          if (ws < 0 || ws > 1'000'000) bad(bpath + ".world_size", "must be 0 (any) or a world size");
          if (!te.by_world_size.emplace(static_cast<int>(ws), band).second)
            bad(bpath + ".world_size", "duplicate world size " + std::to_string(ws));
        }
      }
      prof.transports.push_back(std::move(te));
    }
    out.push_back(std::move(prof));
  }
  return out;
}

std::vector<Profile> load_profiles(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ProfileError("profiles: syntax error at line " + std::to_string(e.mark.line + 1) +
                       ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  Budget budget;
  return profiles_from_json(yaml_to_json(root, budget, 0));
}

std::vector<Profile> load_profiles_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ProfileError("profiles: cannot read '" + path + "'");
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > static_cast<std::streamoff>(kMaxProfilesFileBytes))
    throw ProfileError(path + ": profiles: " + std::to_string(static_cast<long long>(size)) +
                       " bytes, more than the " + std::to_string(kMaxProfilesFileBytes) +
                       " a profiles file may have");
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return load_profiles(ss.str());
  } catch (const ProfileError& e) {
    throw ProfileError(path + ": " + e.what());
  }
}

const Profile* find_profile(const std::vector<Profile>& profiles, const std::string& name) {
  for (const auto& p : profiles)
    if (p.name == name) return &p;
  return nullptr;
}

const TransportExpectation* find_transport(const Profile& p, const std::string& transport) {
  for (const auto& t : p.transports)
    if (t.transport == transport) return &t;
  return nullptr;
}

const BaselineBand* find_band(const TransportExpectation& t, int world_size) {
  if (auto it = t.by_world_size.find(world_size); it != t.by_world_size.end()) return &it->second;
  if (auto it = t.by_world_size.find(0); it != t.by_world_size.end()) return &it->second;
  return nullptr;
}

nlohmann::json to_json(const BaselineBand& b) {
  return {{"busbw_gbps", b.busbw_gbps}, {"degraded_ratio", b.degraded_ratio},
          {"fail_ratio", b.fail_ratio}, {"gate_bytes", b.gate_bytes}, {"source", b.source}};
}

}  // namespace ncclsmoke::results
