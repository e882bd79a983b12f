#include "transports/port_rate.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>

namespace ncclsmoke::transports {

namespace fs = std::filesystem;

std::map<std::string, double> read_port_rates(const std::string& root) {
  std::map<std::string, double> out;
  if (root.empty()) return out;
  for (const auto& dev : sorted_subdirs(root)) {
    const fs::path ports = fs::path(root) / dev / "ports";
    for (const auto& port : sorted_subdirs(ports.string())) {
      std::ifstream in(ports / port / "rate");
      std::string line;
      if (in && std::getline(in, line))
        if (auto gbps = parse_port_rate(line)) out[dev + "/" + port] = *gbps;
    }
  }
  return out;
}

std::optional<PortRate> fastest_port(const std::map<std::string, double>& rates,
                                     const std::set<std::string>& carried_by) {
  std::optional<PortRate> best_carried, best_any;
  for (const auto& [port, gbps] : rates) {
    if (!best_any || gbps > best_any->gbps) best_any = PortRate{gbps, port, false};
    if (carried_by.count(port) && (!best_carried || gbps > best_carried->gbps))
      best_carried = PortRate{gbps, port, true};
  }
  return best_carried ? best_carried : best_any;
}

}  // namespace ncclsmoke::transports
