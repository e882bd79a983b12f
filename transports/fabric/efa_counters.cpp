#include "transports/fabric/efa_counters.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <vector>

namespace ncclsmoke::transports {
namespace {

namespace fs = std::filesystem;

// Sorted names of the sub-directories of `dir` (sysfs device entries are symlinks to directories).
std::vector<std::string> subdirs(const fs::path& dir) {
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

bool read_number(const fs::path& file, uint64_t& value) {
  std::ifstream in(file);
  if (!in) return false;
  std::string text;
  char buf[64];
  in.read(buf, sizeof buf);
  text.assign(buf, static_cast<std::size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

CounterSnapshot read_hw_counters(const std::string& root) {
  CounterSnapshot snap;
  if (root.empty()) return snap;
  for (const auto& dev : subdirs(root)) {
    fs::path ports = fs::path(root) / dev / "ports";
    for (const auto& port : subdirs(ports)) {
      fs::path dir = ports / port / "hw_counters";
      std::error_code ec;
      fs::directory_iterator it(dir, ec), end;
      std::map<std::string, uint64_t> counters;
      for (; !ec && it != end; it.increment(ec)) {
        std::error_code ec2;
        if (!fs::is_regular_file(it->path(), ec2)) continue;
        uint64_t v = 0;
        if (read_number(it->path(), v)) counters[it->path().filename().string()] = v;
      }
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
  for (const auto& dev : subdirs(root)) {
    fs::path ports = fs::path(root) / dev / "ports";
    for (const auto& port : subdirs(ports)) {
      std::ifstream in(ports / port / "rate");
      std::string line;
      if (in && std::getline(in, line))
        if (auto gbps = parse_port_rate(line)) out[dev + "/" + port] = *gbps;
    }
  }
  return out;
}

std::optional<PortRate> run_port_rate(const std::map<std::string, double>& rates,
                                      const nlohmann::json& deltas) {
  auto moved = [&](const std::string& port) {
    if (!deltas.is_object() || !deltas.contains(port)) return false;
    const auto& d = deltas[port];
    for (const char* name : {"tx_bytes", "rx_bytes"})
      if (d.contains(name) && d[name].is_number_unsigned() && d[name].get<uint64_t>() > 0)
        return true;
    return false;
  };
  std::optional<PortRate> best_moved, best_any;
  for (const auto& [port, gbps] : rates) {
    if (!best_any || gbps > best_any->gbps) best_any = PortRate{gbps, port, false};
    if (moved(port) && (!best_moved || gbps > best_moved->gbps)) best_moved = PortRate{gbps, port, true};
  }
  return best_moved ? best_moved : best_any;
}

}  // namespace ncclsmoke::transports
