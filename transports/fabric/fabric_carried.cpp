// The fabric transport on the "carried by" screen (transports/carried.h): provider, domain,
// fabric and libfabric's version; warnings when the provider was the transport's tcp default (no
// --fabric-provider asked for) and when FI_PROVIDER narrowed what libfabric offered.
#include "transports/carried.h"

#include <algorithm>

#include <fmt/format.h>

namespace ncclsmoke::transports {
namespace {

std::string fabric_line(const nlohmann::json& o) {
  std::string prov = observed_text(o, "provider");
  if (prov.empty()) return "";
  std::string s = "provider " + prov;
  if (auto d = observed_text(o, "domain"); !d.empty()) s += ", domain " + d;
  if (auto f = observed_text(o, "fabric"); !f.empty()) s += ", fabric " + f;
  if (auto lv = observed_text(o, "libfabric_version"); !lv.empty()) s += ", libfabric " + lv;
  return s;
}

std::vector<std::string> fabric_warnings(const std::vector<nlohmann::json>& observed,
                                         const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  bool defaulted = std::any_of(observed.begin(), observed.end(), [](const nlohmann::json& o) {
    return observed_text(o, "requested_provider_from") == "default";
  });
  if (defaulted) {
    std::string req;
    for (const auto& o : observed)
      if (req.empty()) req = observed_text(o, "requested_provider");
    if (req.empty()) req = "tcp";
    out.push_back(fmt::format(
        "WARNING: {} is the fabric transport's default: no --fabric-provider was asked for, so "
        "this run tested libfabric over {}, not the cluster's fabric (pass --fabric-provider "
        "efa, verbs ... to test it)",
        req, req));
  }
  for (auto& w : narrowing_warnings({"FI_PROVIDER"}, "limits the providers libfabric offers", env))
    out.push_back(std::move(w));
  return out;
}

}  // namespace

CarriedBy fabric_carried() { return {fabric_line, fabric_warnings}; }

}  // namespace ncclsmoke::transports
