#include "transports/nccl/nccl_policy.h"
#include "transports/text.h"

#include <cctype>

namespace ncclsmoke::transports {
namespace {

}  // namespace

bool parse_policy(std::string_view text, NetPolicy& out) {
  auto t = lower(trim(text));
  if (t == "pin") {
    out = NetPolicy::pin;
    return true;
  }
  if (t == "observe") {
    out = NetPolicy::observe;
    return true;
  }
  return false;
}

std::string_view policy_name(NetPolicy p) { return p == NetPolicy::pin ? "pin" : "observe"; }

std::optional<std::string> NetExpectation::nccl_net_env() const {
  if (policy != NetPolicy::pin || net.empty()) return std::nullopt;
  return net;
}

nlohmann::json NetExpectation::to_json() const {
  if (net.empty()) return nullptr;
  return {{"network", net}, {"policy", std::string(policy_name(policy))}};
}

std::string parse_expectation(std::string_view net, std::string_view policy, NetExpectation& out) {
  NetExpectation e;
  if (!parse_policy(policy, e.policy))
    return "--nccl-policy '" + std::string(policy) + "' is not one of: pin, observe";
  e.net = std::string(trim(net));
  for (unsigned char c : e.net) {
    if (c == ',' || std::iscntrl(c))
      return "--nccl-net '" + e.net + "' is not a single network name (e.g. IB, Socket, Libfabric)";
  }
  if (e.policy == NetPolicy::pin && e.net.empty())
    return "--nccl-policy pin needs --nccl-net (e.g. IB, Socket, Libfabric): there is nothing to pin";
  out = std::move(e);
  return {};
}

}  // namespace ncclsmoke::transports
