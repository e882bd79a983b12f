#include "rendezvous/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>

namespace ncclsmoke::rendezvous {
std::string format_address(const sockaddr* addr, socklen_t len) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    ::inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    return fmt::format("{}:{}", ip, ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      ::inet_ntop(AF_INET, in6->sin6_addr.s6_addr + 12, ip, sizeof ip);
      return fmt::format("{}:{}", ip, ntohs(in6->sin6_port));
    }
    ::inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    std::string scope;
    if (in6->sin6_scope_id) {
      char name[IF_NAMESIZE] = {0};
      scope = ::if_indextoname(in6->sin6_scope_id, name)
                  ? fmt::format("%{}", name)
                  : fmt::format("%{}", in6->sin6_scope_id);
    }
    return fmt::format("[{}{}]:{}", ip, scope, ntohs(in6->sin6_port));
  }
  return fmt::format("(unknown address family {})", addr->sa_family);
}

bool split_host_port(std::string_view text, std::string& host, uint16_t& port) {
  std::string_view h, p;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) return false;
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  auto v = parse_port(p);
  if (h.empty() || !v) return false;
  host = std::string(h);
  port = *v;
  return true;
}

std::string join_host_port(std::string_view host, uint16_t port) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::string host_part(const std::string& host_port) {
  std::string h;
  uint16_t p = 0;
  return split_host_port(host_port, h, p) ? h : host_port;
}

bool is_numeric_address(const std::string& text) {
  in6_addr scratch{};
  return ::inet_pton(AF_INET, text.c_str(), &scratch) == 1 ||
         ::inet_pton(AF_INET6, text.c_str(), &scratch) == 1;
}

bool fill_sockaddr(const std::string& ip, sockaddr_storage& ss, uint16_t port, socklen_t* len) {
  ss = sockaddr_storage{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    if (len) *len = sizeof(sockaddr_in);
    return true;
  }
  if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    if (len) *len = sizeof(sockaddr_in6);
    return true;
  }
  ss = sockaddr_storage{};
  return false;
}

std::string interface_of(const sockaddr* addr) {
  in_addr v4{};
  bool is_v4 = false;
  const in6_addr* v6 = nullptr;
  if (addr->sa_family == AF_INET) {
    v4 = reinterpret_cast<const sockaddr_in*>(addr)->sin_addr;
    is_v4 = true;
  } else if (addr->sa_family == AF_INET6) {
    v6 = &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(v6)) {
      std::memcpy(&v4, v6->s6_addr + 12, 4);
      is_v4 = true;
    }
  } else {
    return "";
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i && name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (is_v4 && i->ifa_addr->sa_family == AF_INET) {
      if (reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == v4.s_addr)
        name = i->ifa_name;
    } else if (!is_v4 && i->ifa_addr->sa_family == AF_INET6) {
      if (std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, v6,
                      sizeof(in6_addr)) == 0)
        name = i->ifa_name;
    }
  }
  ::freeifaddrs(list);
  return name;
}

std::string route_source_address(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return "";
  std::string out;
  for (addrinfo* ai = res; ai && out.empty(); ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        std::string h;
        uint16_t p = 0;
        if (split_host_port(format_address(reinterpret_cast<sockaddr*>(&ss), len), h, p)) out = h;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

std::optional<uint16_t> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v < 1 || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

std::string parse_port_range(std::string_view text, uint16_t& lo, uint16_t& hi) {
  lo = hi = 0;
  constexpr const char* accepted =
      "accepted: a port N or a range A-B with 1 <= A <= B <= 65535, e.g. 30000-30100";
  const auto dash = text.find('-');
  const auto a = parse_port(text.substr(0, dash));
  const auto b = dash == std::string_view::npos ? a : parse_port(text.substr(dash + 1));
  if (!a || !b) return fmt::format("'{}' is not a port range ({})", text, accepted);
  if (*a > *b) return fmt::format("'{}' is reversed ({})", text, accepted);
  lo = *a;
  hi = *b;
  return "";
}

int interface_speed_mbps(const std::string& name, const std::string& sysfs_root) {
  if (name.empty() || name.size() > 64 || name.find('/') != std::string::npos || name == "." ||
      name == "..")
    return 0;
  std::ifstream in(sysfs_root + "/class/net/" + name + "/speed");
  long long mbps = 0;
  // A link that is down, or a device without a speed, fails the read or reports -1.
  if (!(in >> mbps) || mbps <= 0 || mbps > 100'000'000) return 0;
  return static_cast<int>(mbps);
}

}  // namespace ncclsmoke::rendezvous
