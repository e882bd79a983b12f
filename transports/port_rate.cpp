#include "transports/port_rate.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>

namespace ncclsmoke::transports {

namespace fs = std::filesystem;

std::vector<std::string> sorted_subdirs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (fs::is_directory(it->path(), ec2)) out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<double> parse_port_rate(const std::string& text) {
  // "<N>[.5] Gb/sec ...": a whole number of Gb/s, or one and a half.
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0 || i > 6) return std::nullopt;
  double gbps = 0;
  std::from_chars(text.data(), text.data() + i, gbps);
  if (text.compare(i, 2, ".5") == 0) {
    gbps += 0.5;
    i += 2;
  }
  if (text.compare(i, 7, " Gb/sec") != 0 || gbps <= 0) return std::nullopt;
  return gbps;
}

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
