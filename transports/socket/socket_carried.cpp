// The socket transport on the "carried by" screen (transports/carried.h): the interface and what
// chose it; a warning when NCCL_SOCKET_IFNAME, not the route to the store, chose it.
#include "transports/carried.h"

namespace ncclsmoke::transports {
namespace {

std::string socket_line(const nlohmann::json& o) {
  std::string iface = observed_text(o, "interface");
  if (iface.empty()) return "";
  std::string source = observed_text(o, "address_source");
  std::string rule = observed_text(o, "ifname_rule");
  std::string why = source == "store route"          ? "the route to the store"
                    : source == "NCCL_SOCKET_IFNAME" ? "NCCL_SOCKET_IFNAME=" + rule
                    : source == "socket.ifname"      ? "--socket-ifname " + rule
                                                     : source;
  return "interface " + iface + (why.empty() ? "" : " (chosen by " + why + ")");
}

std::vector<std::string> socket_warnings(const std::vector<nlohmann::json>& observed,
                                         const std::map<std::string, std::string>&) {
  for (const auto& o : observed)
    if (observed_text(o, "address_source") == "NCCL_SOCKET_IFNAME")
      return {"WARNING: NCCL_SOCKET_IFNAME=" + observed_text(o, "ifname_rule") +
              " in the environment chose the interface (--socket-ifname overrides it)"};
  return {};
}

}  // namespace

CarriedBy socket_carried() { return {socket_line, socket_warnings}; }

}  // namespace ncclsmoke::transports
