#pragma once
// --nccl-net / --nccl-policy: which network NCCL is expected to use, and how that is enforced.
//   pin:     NCCL_NET=<net> (or ncclConfig_t.netName) is set, so a missing plugin is a hard init
//            error (TRANSPORT_INIT_FAILED) instead of a silent fall back to Socket.
//   observe: NCCL chooses as training would; results/judging/nccl_judge.h compares what the log says with
//            <net> and reports SILENT_FALLBACK on a mismatch.
// Only parsing lives here: transports measure, results/ decides (DESIGN.md).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ncclsmoke::transports {

enum class NetPolicy { pin, observe };

// "pin" | "observe" (case-insensitive). False, `out` untouched, for anything else.
bool parse_policy(std::string_view text, NetPolicy& out);
std::string_view policy_name(NetPolicy p);

struct NetExpectation {
  std::string net;  // as the user wrote it: "Libfabric" (also matches "AWS Libfabric"), "IB", "Socket"
  NetPolicy policy = NetPolicy::observe;

  bool has_net() const { return !net.empty(); }
  // The value for NCCL_NET / ncclConfig_t.netName under policy pin; nullopt when nothing is pinned
  // (observe, or no --nccl-net). NCCL matches it case-insensitively; aws-ofi-nccl renames itself to
  // "AWS Libfabric" or "OFI" when NCCL_NET asks for those, so the user's spelling is passed as is.
  std::optional<std::string> nccl_net_env() const;
  // {"network": net, "policy": "pin"|"observe"} for TransportIdentity::expected; null without a net.
  nlohmann::json to_json() const;
};

// Builds an expectation from the flag values. Errors (returned, empty on success): an unknown
// policy; "pin" without a network; a network name with characters NCCL_NET cannot carry
// (',' or control characters). The name is trimmed.
std::string parse_expectation(std::string_view net, std::string_view policy, NetExpectation& out);

}  // namespace ncclsmoke::transports
