#include "transports/mpi/mpi_observe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ncclsmoke::transports::mpi_observe {
namespace {

const char* const kFrameworks[] = {"pml", "btl", "mtl"};

bool parse_hex_u32(const std::string& s, uint32_t& out) {
  if (s.empty() || s.size() > 8) return false;
  char* end = nullptr;
  unsigned long v = std::strtoul(s.c_str(), &end, 16);
  if (*end != '\0') return false;
  out = static_cast<uint32_t>(v);
  return true;
}

// "0100007F:1F90" (v4) or 32 hex digits ":" port (v6): the kernel prints each 32-bit word of the
// network-order address as a native integer.
bool parse_endpoint(const std::string& s, bool v6, std::string& text, int& port) {
  auto colon = s.find(':');
  if (colon == std::string::npos) return false;
  std::string addr = s.substr(0, colon), p = s.substr(colon + 1);
  uint32_t port_v = 0;
  if (!parse_hex_u32(p, port_v) || port_v > 65535) return false;
  char buf[INET6_ADDRSTRLEN] = {};
  if (!v6) {
    uint32_t w;
    if (addr.size() != 8 || !parse_hex_u32(addr, w)) return false;
    in_addr a;
    std::memcpy(&a.s_addr, &w, 4);
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    text = std::string(buf) + ":" + std::to_string(port_v);
  } else {
    if (addr.size() != 32) return false;
    in6_addr a;
    for (int i = 0; i < 4; ++i) {
      uint32_t w;
      if (!parse_hex_u32(addr.substr(i * 8, 8), w)) return false;
      std::memcpy(reinterpret_cast<unsigned char*>(&a) + 4 * i, &w, 4);
    }
    inet_ntop(AF_INET6, &a, buf, sizeof buf);
    text = "[" + std::string(buf) + "]:" + std::to_string(port_v);
  }
  port = static_cast<int>(port_v);
  return true;
}

std::string read_file(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

VarOwner var_owner(const std::string& name) {
  for (const char* fw : kFrameworks) {
    std::string prefix = std::string(fw) + "_";
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    auto rest = name.substr(prefix.size());
    auto us = rest.find('_');
    if (us == std::string::npos || us == 0) return {fw, ""};  // e.g. "pml_wrapper"-like names
    std::string comp = rest.substr(0, us);
    if (comp == "base") return {fw, ""};
    return {fw, comp};
  }
  return {};
}

void add_survivor(Survivors& s, const std::string& cvar_name) {
  auto o = var_owner(cvar_name);
  if (!o.component.empty()) s[o.framework].insert(o.component);
}

std::vector<TcpConn> parse_proc_net_tcp(const std::string& text, bool v6) {
  std::vector<TcpConn> out;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string sl, local, remote, st, txrx, trtm, retr, uid, timeout, inode;
    if (!(ls >> sl >> local >> remote >> st >> txrx >> trtm >> retr >> uid >> timeout >> inode))
      continue;
    if (st != "01") continue;  // TCP_ESTABLISHED
    TcpConn c;
    int local_port = 0;
    if (!parse_endpoint(local, v6, c.local, local_port)) continue;
    if (!parse_endpoint(remote, v6, c.remote, c.remote_port)) continue;
    char* end = nullptr;
    c.inode = std::strtoul(inode.c_str(), &end, 10);
    if (*end != '\0' || c.inode == 0) continue;
    out.push_back(c);
  }
  return out;
}

std::set<int> uri_ports(const std::string& uri) {
  std::set<int> ports;
  std::size_t pos = 0;
  while ((pos = uri.find("://", pos)) != std::string::npos) {
    pos += 3;
    auto end = uri.find(';', pos);
    std::string hostport = uri.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    auto colon = hostport.rfind(':');
    if (colon != std::string::npos) {
      int port = std::atoi(hostport.c_str() + colon + 1);
      if (port > 0 && port < 65536) ports.insert(port);
    }
    if (end == std::string::npos) break;
    pos = end;
  }
  return ports;
}

std::set<int> launcher_ports(char** envp) {
  std::set<int> ports;
  for (char** e = envp; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    bool pmix = k.rfind("PMIX_SERVER_URI", 0) == 0;
    bool orte = k.rfind("OMPI_MCA_orte_", 0) == 0 && k.size() > 4 && k.substr(k.size() - 4) == "_uri";
    if (pmix || orte)
      for (int p : uri_ports(kv.substr(eq + 1))) ports.insert(p);
  }
  return ports;
}

std::set<unsigned long> own_socket_inodes() {
  std::set<unsigned long> inodes;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return inodes;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (++n > 100000) break;
    char path[300], target[128];
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(path, target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    unsigned long inode = 0;
    if (std::sscanf(target, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(d);
  return inodes;
}

std::vector<TcpConn> own_tcp_connections() {
  auto mine = own_socket_inodes();
  std::vector<TcpConn> out;
  for (bool v6 : {false, true}) {
    for (auto& c : parse_proc_net_tcp(read_file(v6 ? "/proc/self/net/tcp6" : "/proc/self/net/tcp"), v6))
      if (mine.count(c.inode)) out.push_back(c);
  }
  return out;
}

int vader_segments_mapped() {
  std::ifstream f("/proc/self/maps");
  std::set<std::string> files;
  std::string line;
  while (std::getline(f, line)) {
    auto pos = line.find("vader_segment");
    if (pos == std::string::npos) continue;
    auto slash = line.rfind('/', pos);
    files.insert(line.substr(slash == std::string::npos ? pos : slash));
  }
  return static_cast<int>(files.size());
}

}  // namespace ncclsmoke::transports::mpi_observe
