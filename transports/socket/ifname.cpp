#include "transports/socket/ifname.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "transports/transport.h"

namespace ncclsmoke::transports::sock {
namespace {

bool usable_address(const NetInterface& i) {
  if (i.family == AF_INET) return true;
  if (i.family != AF_INET6) return false;
  in6_addr a{};
  if (::inet_pton(AF_INET6, i.address.c_str(), &a) != 1) return false;
  return !IN6_IS_ADDR_LOOPBACK(&a) && !IN6_IS_ADDR_LINKLOCAL(&a);
}

// Why this (interface, address) is not eligible; "" when it is.
std::string why_not(const NetInterface& i, const IfnameRule& rule) {
  bool listed = ifname_listed(rule, i.name);
  if (listed == rule.exclude) return rule.exclude ? "excluded by the rule" : "not in the list";
  if (hidden_by_default(i.name) && rule.exclude)
    return "lo and docker* are used only when a rule names them";
  if (i.family == 0) return "no address";
  if (!i.up) return "down";
  if (!usable_address(i)) return "only loopback/link-local IPv6";
  return "";
}

std::string strip_brackets(std::string a) {
  if (a.size() >= 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  auto pct = a.find('%');
  if (pct != std::string::npos) a.resize(pct);
  return a;
}

}  // namespace

IfnameRule parse_ifname_rule(const std::string& text) {
  IfnameRule r;
  r.text = text;
  std::size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') {
    r.exclude = true;
    ++pos;
  }
  if (pos < text.size() && text[pos] == '=') {
    r.exact = true;
    ++pos;
  }
  while (pos <= text.size()) {
    auto comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string entry = text.substr(pos, comma - pos);
    entry.erase(0, entry.find_first_not_of(" \t"));
    auto last = entry.find_last_not_of(" \t");
    entry.erase(last == std::string::npos ? 0 : last + 1);
    if (!entry.empty()) r.names.push_back(entry);
    pos = comma + 1;
  }
  return r;
}

bool ifname_listed(const IfnameRule& rule, const std::string& name) {
  for (const auto& e : rule.names) {
    if (rule.exact ? name == e : name.compare(0, e.size(), e) == 0) return true;
  }
  return false;
}

bool hidden_by_default(const std::string& name) {
  return name.rfind("lo", 0) == 0 || name.rfind("docker", 0) == 0;
}

std::vector<NetInterface> list_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  std::vector<std::string> with_address, seen;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_name) continue;
    std::string name = i->ifa_name;
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) seen.push_back(name);
    if (!i->ifa_addr) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    char ip[INET6_ADDRSTRLEN] = {0};
    const void* src = fam == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    ::inet_ntop(fam, src, ip, sizeof ip);
    NetInterface ni;
    ni.name = name;
    ni.family = fam;
    ni.address = ip;
    ni.up = (i->ifa_flags & IFF_UP) != 0;
    ni.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(ni);
    with_address.push_back(name);
  }
  // Interfaces without an address (AF_PACKET entries only) still belong in error messages.
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_name || !i->ifa_addr || i->ifa_addr->sa_family == AF_INET ||
        i->ifa_addr->sa_family == AF_INET6)
      continue;
    std::string name = i->ifa_name;
    if (std::find(with_address.begin(), with_address.end(), name) != with_address.end()) continue;
    with_address.push_back(name);
    NetInterface ni;
    ni.name = name;
    ni.up = (i->ifa_flags & IFF_UP) != 0;
    ni.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(ni);
  }
  ::freeifaddrs(list);
  return out;
}

IfnameChoice select_interface(const std::vector<NetInterface>& available, const IfnameRule& rule) {
  IfnameChoice c;
  const NetInterface* best = nullptr;
  for (const auto& i : available) {
    if (!why_not(i, rule).empty()) continue;
    if (std::find(c.matched.begin(), c.matched.end(), i.name) == c.matched.end())
      c.matched.push_back(i.name);
    // The first eligible interface wins; within it, IPv4 before IPv6.
    if (!best) best = &i;
    else if (best->name == i.name && best->family == AF_INET6 && i.family == AF_INET) best = &i;
  }
  if (best) {
    c.chosen = *best;
    return c;
  }
  // Explain each interface once, with the reason of its most promising address.
  std::string detail;
  std::vector<std::string> done;
  for (const auto& i : available) {
    if (std::find(done.begin(), done.end(), i.name) != done.end()) continue;
    done.push_back(i.name);
    std::string addrs, reason;
    for (const auto& j : available) {
      if (j.name != i.name) continue;
      if (j.family) addrs += (addrs.empty() ? "" : ", ") + j.address;
      if (reason.empty()) reason = why_not(j, rule);
    }
    detail += (detail.empty() ? "" : "; ") + i.name + (addrs.empty() ? "" : " [" + addrs + "]") +
              " (" + reason + ")";
  }
  throw TransportError(ErrorKind::init_failed,
                       "NCCL_SOCKET_IFNAME rule \"" + rule.text +
                           "\" matches no usable interface; available: " +
                           (detail.empty() ? "none" : detail));
}

const NetInterface* interface_owning(const std::vector<NetInterface>& available,
                                     const std::string& address) {
  std::string a = strip_brackets(address);
  unsigned char want[16] = {0};
  int fam = 0;
  if (::inet_pton(AF_INET, a.c_str(), want) == 1) fam = AF_INET;
  else if (::inet_pton(AF_INET6, a.c_str(), want) == 1) fam = AF_INET6;
  else return nullptr;
  // A v4-mapped IPv6 address belongs to the interface owning the IPv4 address.
  if (fam == AF_INET6 && IN6_IS_ADDR_V4MAPPED(reinterpret_cast<in6_addr*>(want))) {
    std::memmove(want, want + 12, 4);
    fam = AF_INET;
  }
  for (const auto& i : available) {
    if (i.family != fam) continue;
    unsigned char have[16] = {0};
    if (::inet_pton(fam, i.address.c_str(), have) != 1) continue;
    if (std::memcmp(want, have, fam == AF_INET ? 4 : 16) == 0) return &i;
  }
  return nullptr;
}

std::string describe_interfaces(const std::vector<NetInterface>& available) {
  std::string out;
  std::vector<std::string> done;
  for (const auto& i : available) {
    if (std::find(done.begin(), done.end(), i.name) != done.end()) continue;
    done.push_back(i.name);
    std::string addrs;
    for (const auto& j : available)
      if (j.name == i.name && j.family) addrs += (addrs.empty() ? "" : ", ") + j.address;
    std::string flags = i.up ? "" : "down";
    if (addrs.empty()) flags += flags.empty() ? "no address" : ", no address";
    out += (out.empty() ? "" : ", ") + i.name + (addrs.empty() ? "" : " [" + addrs + "]") +
           (flags.empty() ? "" : " (" + flags + ")");
  }
  return out.empty() ? "none" : out;
}

}  // namespace ncclsmoke::transports::sock
