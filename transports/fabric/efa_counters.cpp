#include "transports/fabric/efa_counters.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "node/sysfs.h"

namespace ncclsmoke::transports {

namespace fs = std::filesystem;

CounterSnapshot read_hw_counters(const std::string& root) {
  CounterSnapshot snap;
  if (root.empty()) return snap;
  for (const auto& dev : sorted_subdirs(root)) {
    fs::path ports = fs::path(root) / dev / "ports";
    for (const auto& port : sorted_subdirs(ports.string())) {
      const std::string dir = (ports / port / "hw_counters").string();
      std::map<std::string, uint64_t> counters;
      for (const auto& name : node::sorted_files(dir))
        if (auto v = node::read_count(dir + "/" + name)) counters[name] = *v;
      if (!counters.empty()) snap[dev + "/" + port] = std::move(counters);
    }
  }
  return snap;
}

nlohmann::json counter_deltas(const CounterSnapshot& before, const CounterSnapshot& after) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, now] : after) {
    auto b = before.find(key);
    if (b == before.end()) continue;
    nlohmann::json d = nlohmann::json::object();
    for (const auto& [name, v] : now) {
      auto old = b->second.find(name);
      if (old == b->second.end()) continue;
      d[name] = v >= old->second ? v - old->second : v;
    }
    if (!d.empty()) out[key] = std::move(d);
  }
  return out;
}

std::optional<PortRate> run_port_rate(const std::map<std::string, double>& rates,
                                      const nlohmann::json& deltas) {
  std::set<std::string> moved;
  if (deltas.is_object())
    for (const auto& [port, d] : deltas.items())
      for (const char* name : {"tx_bytes", "rx_bytes"})
        if (d.contains(name) && d[name].is_number_unsigned() && d[name].get<uint64_t>() > 0)
          moved.insert(port);
  return fastest_port(rates, moved);
}

std::optional<DeviceRetransmits> device_retransmits(const nlohmann::json& deltas) {
  if (!deltas.is_object()) return std::nullopt;
  auto count = [](const nlohmann::json& d, const char* name) -> std::optional<std::int64_t> {
    auto it = d.find(name);
    if (it == d.end() || !it->is_number_unsigned()) return std::nullopt;
    return static_cast<std::int64_t>(it->get<uint64_t>());
  };
  std::optional<DeviceRetransmits> out;
  for (const auto& [port, d] : deltas.items()) {
    const auto sent = count(d, "tx_pkts"), again = count(d, "retrans_pkts");
    if (!sent || *sent == 0 || !again) continue;
    if (!out) out.emplace();
    out->tx_pkts += *sent;
    out->retrans_pkts += *again;
  }
  return out;
}

}  // namespace ncclsmoke::transports
