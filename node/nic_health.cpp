#include "node/nic_health.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>
#include <string_view>

#include "node/sysfs.h"

namespace ncclsmoke::node {

namespace {

// statistics/ counters read: the two byte counts, and the error and drop counters.
constexpr std::array<const char*, 13> kInterfaceCounters = {
    "rx_bytes",        "tx_bytes",         "rx_errors",        "tx_errors",
    "rx_dropped",      "tx_dropped",       "rx_crc_errors",    "rx_frame_errors",
    "rx_fifo_errors",  "rx_missed_errors", "rx_over_errors",   "tx_carrier_errors",
    "tx_aborted_errors"};

constexpr std::array<const char*, 4> kInterfaceText = {"operstate", "carrier", "speed", "mtu"};
constexpr std::array<const char*, 4> kPortText = {"state", "phys_state", "link_layer", "rate"};

// "4: ACTIVE" -> "ACTIVE"; text without the number is kept as it is.
std::string after_colon(const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos) return text;
  auto start = text.find_first_not_of(' ', colon + 1);
  return start == std::string::npos ? std::string() : text.substr(start);
}

DeviceSample read_interface(const std::string& dir) {
  DeviceSample s;
  for (const char* name : kInterfaceText)
    if (auto t = read_line(dir + "/" + name)) s.text[name] = *t;
  for (const char* name : kInterfaceCounters)
    if (auto v = read_count(dir + "/statistics/" + name)) s.counters[name] = *v;
  return s;
}

DeviceSample read_port(const std::string& dir) {
  DeviceSample s;
  for (const char* name : kPortText)
    if (auto t = read_line(dir + "/" + name)) s.text[name] = *t;
  // Only the counters that count a fault: a port has dozens, read twice a run.
  for (const char* sub : {"counters", "hw_counters"}) {
    const std::string d = dir + "/" + sub;
    for (const auto& name : sorted_files(d))
      if (rdma_error_counter(name))
        if (auto v = read_count(d + "/" + name)) s.counters[name] = *v;
  }
  return s;
}

std::uint64_t delta(std::uint64_t before, std::uint64_t after) {
  return after >= before ? after - before : after;
}

// The counters of `counted` that moved between the two samples.
std::map<std::string, std::uint64_t> moved(const DeviceSample& before, const DeviceSample& after,
                                           bool (*counted)(const std::string&)) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, v] : after.counters) {
    if (!counted(name)) continue;
    auto b = before.counters.find(name);
    if (b == before.counters.end()) continue;
    if (auto d = delta(b->second, v); d > 0) out[name] = d;
  }
  return out;
}

std::string text_of(const DeviceSample& s, const char* name) {
  auto it = s.text.find(name);
  return it == s.text.end() ? std::string() : it->second;
}

}  // namespace

bool interface_error_counter(const std::string& name) {
  return name != "rx_bytes" && name != "tx_bytes" &&
         std::find_if(kInterfaceCounters.begin(), kInterfaceCounters.end(),
                      [&](const char* c) { return name == c; }) != kInterfaceCounters.end();
}

bool rdma_error_counter(const std::string& name) {
  static const std::set<std::string> kCounted = {
      // InfiniBand port counters (IBTA PortCounters; the kernel's counters/)
      "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
      "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
      "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
      "excessive_buffer_overrun_errors", "VL15_dropped",
      // mlx5's hw_counters: retries that ran out, requests the peer refused
      "rnr_nak_retry_err", "local_ack_timeout_err", "req_remote_access_errors",
      "req_remote_invalid_request", "resp_local_length_error", "req_cqe_error", "resp_cqe_error",
      // EFA's hw_counters
      "rx_drops", "unresponsive_remote_events", "impaired_remote_conn_events",
      "retrans_timeout_events"};
  return kCounted.count(name) > 0;
}

NicSnapshot read_nic_snapshot(const std::string& root, const std::vector<std::string>* only) {
  NicSnapshot snap;
  snap.root = root;
  snap.at = std::chrono::steady_clock::now();
  const std::string net = net_class_dir(root);
  const std::vector<std::string> listed = only ? *only : sorted_subdirs(net);
  for (const auto& name : listed) {
    if (snap.interfaces.size() >= kMaxInterfaces) break;
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      continue;
    auto s = read_interface(net + "/" + name);
    if (s.text.empty() && s.counters.empty()) continue;
    snap.interfaces[name] = std::move(s);
  }
  const std::string rdma = rdma_class_dir(root);
  for (const auto& dev : sorted_subdirs(rdma)) {
    const std::string ports = rdma + "/" + dev + "/ports";
    for (const auto& port : sorted_subdirs(ports)) {
      if (snap.rdma_ports.size() >= kMaxRdmaPorts) break;
      snap.rdma_ports[dev + "/" + port] = read_port(ports + "/" + port);
    }
  }
  snap.read = !snap.interfaces.empty() || !snap.rdma_ports.empty();
  return snap;
}

facts::NicFacts nic_facts(const NicSnapshot& before, const NicSnapshot& after,
                          const std::vector<std::string>& interfaces) {
  facts::NicFacts f;
  f.root = after.root;
  f.read = before.read && after.read;
  if (!f.read) return f;
  f.interval_s = std::chrono::duration<double>(after.at - before.at).count();
  for (const auto& name : interfaces) {
    auto a = after.interfaces.find(name);
    auto b = before.interfaces.find(name);
    if (a == after.interfaces.end() || b == before.interfaces.end()) continue;
    facts::NetInterfaceFacts i;
    i.name = name;
    i.operstate = text_of(a->second, "operstate");
    const std::string carrier = text_of(a->second, "carrier");
    if (carrier == "0" || carrier == "1") i.carrier = carrier == "1";
    if (auto sp = text_of(a->second, "speed"); !sp.empty()) {
      long long v = -1;
      if (std::sscanf(sp.c_str(), "%lld", &v) == 1 && v > 0) i.speed_mbps = v;
    }
    if (auto mtu = text_of(a->second, "mtu"); !mtu.empty()) {
      int v = -1;
      if (std::sscanf(mtu.c_str(), "%d", &v) == 1 && v > 0) i.mtu = v;
    }
    auto bytes = [&](const char* name) -> std::uint64_t {
      auto x = a->second.counters.find(name), y = b->second.counters.find(name);
      return x == a->second.counters.end() || y == b->second.counters.end()
                 ? 0 : delta(y->second, x->second);
    };
    i.rx_bytes = bytes("rx_bytes");
    i.tx_bytes = bytes("tx_bytes");
    i.moved = moved(b->second, a->second, interface_error_counter);
    f.interfaces.push_back(std::move(i));
  }
  for (const auto& [key, now] : after.rdma_ports) {
    auto b = before.rdma_ports.find(key);
    if (b == before.rdma_ports.end()) continue;
    facts::RdmaPortFacts p;
    const auto slash = key.rfind('/');
    p.device = key.substr(0, slash);
    std::sscanf(key.c_str() + slash + 1, "%d", &p.port);
    p.state = after_colon(text_of(now, "state"));
    p.phys_state = after_colon(text_of(now, "phys_state"));
    p.link_layer = text_of(now, "link_layer");
    if (auto gbps = parse_port_rate(text_of(now, "rate"))) p.rate_gbps = *gbps;
    p.moved = moved(b->second, now, rdma_error_counter);
    f.rdma_ports.push_back(std::move(p));
  }
  return f;
}

}  // namespace ncclsmoke::node
