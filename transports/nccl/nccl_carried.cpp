// The nccl transport on the "carried by" screen (transports/carried.h): the network NCCL used
// (from its log), the plugin, aws-ofi-nccl's provider, GDR, synthetic ranks; a warning for each
// NCCL_* (or FI_PROVIDER) variable that narrowed what NCCL may choose.
#include "transports/carried.h"

namespace ncclsmoke::transports {
namespace {

std::string nccl_line(const nlohmann::json& o) {
  if (!o.is_object() || o.empty()) return "";
  const nlohmann::json log = o.value("nccl_log", nlohmann::json(nullptr));
  std::string network = observed_text(o, "network");
  if (network.empty()) network = observed_text(log, "network");
  std::string s =
      network.empty() ? "network not known (no NCCL log was read)" : "network " + network;
  std::string plugin = observed_text(log, "plugin");
  s += ", plugin " + (plugin.empty() ? std::string("none named") : plugin);
  if (auto p = observed_text(log, "ofi_provider"); !p.empty()) s += ", ofi provider " + p;
  if (o.value("gdr", false)) s += ", GDR";
  if (o.value("synthetic", false)) s += ", synthetic (ranks share a GPU)";
  return s;
}

std::vector<std::string> nccl_warnings(const std::vector<nlohmann::json>&,
                                       const std::map<std::string, std::string>& env) {
  return narrowing_warnings({"NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_IB_DISABLE", "NCCL_IB_HCA",
                             "NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL", "NCCL_COLLNET_ENABLE",
                             "FI_PROVIDER"},
                            "narrows what NCCL may choose", env);
}

}  // namespace

CarriedBy nccl_carried() { return {nccl_line, nccl_warnings}; }

}  // namespace ncclsmoke::transports
