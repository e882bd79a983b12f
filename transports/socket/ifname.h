#pragma once
// Interface selection for the socket transport with NCCL_SOCKET_IFNAME semantics, so the value an
// operator already sets for NCCL picks the same NIC here:
//   "eth,ens"     prefix list: an interface whose name starts with any entry
//   "^docker,lo"  leading '^': every interface except those matching the prefixes
//   "=eth0"       leading '=': exact names only;  "^=eth0": every interface except exactly eth0
// Like NCCL's default, "lo" and "docker*" are used only when a positive rule names them ("lo",
// "=lo", "docker0"); an exclude rule never selects them, so "^eth1" cannot silently land on
// loopback. IPv6 loopback and link-local addresses are never used (no scope to dial them with).
// Among the eligible interfaces the first in getifaddrs order wins, its IPv4 address preferred.
// Pure functions over an interface list, so tests feed their own lists.
#include <string>
#include <vector>

namespace ncclsmoke::transports::sock {

struct IfnameRule {
  std::string text;     // as given
  bool exclude = false;  // leading '^'
  bool exact = false;    // '=' (after the optional '^')
  std::vector<std::string> names;  // comma-separated entries, empty ones dropped
};

IfnameRule parse_ifname_rule(const std::string& text);
// True when `name` matches an entry of the list (exact or prefix), before the '^' inversion.
bool ifname_listed(const IfnameRule& rule, const std::string& name);
// "lo*" and "docker*" (NCCL's default exclusion, a prefix rule): used only when a positive rule
// names them.
bool hidden_by_default(const std::string& name);

struct NetInterface {
  std::string name;
  int family = 0;        // AF_INET, AF_INET6, or 0 for an interface with no address
  std::string address;   // numeric, no brackets, no port ("" when family is 0)
  bool up = false;
  bool loopback = false;
};

// One entry per (interface, address) from getifaddrs, plus one address-less entry for each
// interface that has none, in the kernel's order.
std::vector<NetInterface> list_interfaces();

struct IfnameChoice {
  NetInterface chosen;
  std::vector<std::string> matched;  // every eligible interface name, in order
};

// Picks the interface/address the rule selects. Throws TransportError(init_failed) naming the
// rule and every available interface with why it was not used.
IfnameChoice select_interface(const std::vector<NetInterface>& available, const IfnameRule& rule);

// The interface that owns `address` (numeric IPv4/IPv6, brackets allowed); nullptr when none.
const NetInterface* interface_owning(const std::vector<NetInterface>& available,
                                     const std::string& address);

// "lo [127.0.0.1, ::1] (loopback), eth0 [192.0.2.2], ifb0 (down, no address)".
std::string describe_interfaces(const std::vector<NetInterface>& available);

}  // namespace ncclsmoke::transports::sock
