#include "transports/nccl/nccl_log.h"
#include "transports/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <system_error>

namespace ncclsmoke::transports {
namespace {

// Position just past `needle` in `hay`; npos when absent.
std::size_t after(std::string_view hay, std::string_view needle) {
  auto p = hay.find(needle);
  return p == std::string_view::npos ? p : p + needle.size();
}

void add_unique(std::vector<std::string>& v, std::string s) {
  if (s.empty()) return;
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(std::move(s));
}

void add_capped(std::vector<std::string>& v, std::string_view s, std::size_t cap) {
  if (v.size() < cap) v.emplace_back(s);
}

// "<host>:<pid>:<tid> [<dev>] NCCL ..." → host; empty when the line has no such prefix.
std::string host_of(std::string_view line) {
  auto nccl = line.find(" NCCL ");
  if (nccl == std::string_view::npos) return {};
  auto head = line.substr(0, nccl);
  auto colon = head.find(':');
  if (colon == std::string_view::npos || colon == 0) return {};
  auto host = head.substr(0, colon);
  if (host.find(' ') != std::string_view::npos) return {};
  return std::string(host);
}

// Plugin name from a plugin-loading line, loosely; empty when none is named.
std::string plugin_name(std::string_view line) {
  for (std::string_view key : {"Loaded net plugin ", "Initialized NET plugin ",
                               "Assigned NET plugin ", "Loaded coll plugin "}) {
    auto p = after(line, key);
    if (p == std::string_view::npos) continue;
    auto rest = line.substr(p);
    // a name may contain spaces ("AWS Libfabric"): stop at " (" / " to " / end of line
    auto end = std::min(rest.find(" ("), rest.find(" to "));
    auto name = trim(rest.substr(0, end));
    if (!name.empty()) return std::string(name);
  }
  auto p = after(line, "NET/OFI Initializing aws-ofi-nccl");
  if (p != std::string_view::npos) {
    auto v = trim(line.substr(p));
    return v.empty() ? "aws-ofi-nccl" : "aws-ofi-nccl " + std::string(v.substr(0, v.find(' ')));
  }
  return {};
}

struct ParseState {
  bool using_seen = false;  // a "Using network" line named the network
};

void parse_line(std::string_view line, NcclObserved& o, ParseState& st) {
  line = trim(line);
  if (line.empty()) return;
  bool nccl_line = line.find("NCCL INFO") != std::string_view::npos ||
                   line.find("NCCL WARN") != std::string_view::npos ||
                   line.find("NCCL version ") != std::string_view::npos;
  if (!nccl_line) return;
  o.found = true;
  if (o.host.empty()) o.host = host_of(line);
  bool matched = false;

  if (auto p = after(line, "NCCL WARN "); p != std::string_view::npos) {
    add_capped(o.warnings, trim(line.substr(p)), kMaxWarnings);
    matched = true;
  }
  if (auto p = after(line, "NCCL version "); p != std::string_view::npos && o.nccl_version.empty()) {
    auto v = trim(line.substr(p));
    o.nccl_version = std::string(v.substr(0, v.find_first_of(" \t")));
    matched = true;
  }
  if (auto p = after(line, "Using network "); p != std::string_view::npos) {
    auto name = std::string(trim(line.substr(p)));
    if (!name.empty()) {
      // the first "Using network" line names the network even when a channel line came first
      if (!st.using_seen) o.network = name;
      st.using_seen = true;
      add_unique(o.networks, name);
      matched = true;
    }
  }
  if (auto p = after(line, "via NET/"); p != std::string_view::npos) {
    auto rest = line.substr(p);
    auto slash = rest.find('/');
    auto name = std::string(trim(rest.substr(0, slash)));
    std::string dev;
    if (slash != std::string_view::npos) {
      auto tail = rest.substr(slash + 1);
      dev = std::string(tail.substr(0, tail.find_first_of("/( \t")));
    }
    if (!name.empty()) {
      ++o.net_channels;
      if (rest.find("/GDRDMA") != std::string_view::npos) {
        ++o.gdr_channels;
        o.gdr = true;
      }
      if (o.network.empty()) o.network = name;
      add_unique(o.networks, name);
      add_unique(o.net_devices, dev.empty() ? name : name + "/" + dev);
      matched = true;
    }
  }
  auto low = lower(line);
  if (low.find("net/ofi") != std::string::npos) {
    if (auto p = after(low, "selected provider is "); p != std::string::npos) {
      auto rest = std::string_view(line).substr(p);
      auto prov = trim(rest.substr(0, rest.find_first_of(", (\t")));
      if (!prov.empty()) o.ofi_provider = std::string(prov);
      if (auto f = after(low, "fabric is "); f != std::string::npos) {
        auto frest = std::string_view(line).substr(f);
        o.ofi_fabric = std::string(trim(frest.substr(0, frest.find_first_of(", (\t"))));
      }
      matched = true;
    }
  }
  bool plugin_line = low.find("libnccl-net") != std::string::npos ||
                     low.find("net/plugin") != std::string::npos ||
                     low.find("net plugin") != std::string::npos ||
                     low.find("net/ofi initializing") != std::string::npos;
  if (plugin_line) {
    add_capped(o.plugin_lines, line, kMaxPluginLines);
    if (o.plugin.empty()) o.plugin = plugin_name(line);
    matched = true;
  }
  if (auto p = after(line, "NET/IB : Using "); p != std::string_view::npos) {
    // "[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB ...": up to the ';', tokens "[i]<dev>:<port>/<type>".
    auto list = line.substr(p);
    list = list.substr(0, list.find(';'));
    while (!list.empty()) {
      auto sp = list.find(' ');
      auto tok = list.substr(0, sp);
      list = sp == std::string_view::npos ? std::string_view{} : list.substr(sp + 1);
      auto close = tok.find(']'), colon = tok.rfind(':'), slash = tok.rfind('/');
      if (tok.empty() || tok.front() != '[' || close == std::string_view::npos ||
          colon == std::string_view::npos || colon < close)
        continue;
      int index = -1, port = -1;
      auto [i_end, i_ec] = std::from_chars(tok.data() + 1, tok.data() + close, index);
      const char* port_end = tok.data() + (slash != std::string_view::npos && slash > colon ? slash : tok.size());
      auto [p_end, p_ec] = std::from_chars(tok.data() + colon + 1, port_end, port);
      if (i_ec != std::errc() || i_end != tok.data() + close || p_ec != std::errc() ||
          p_end != port_end || index < 0 || port < 0 || colon == close + 1)
        continue;
      o.ib_ports[index] =
          std::string(tok.substr(close + 1, colon - close - 1)) + "/" + std::to_string(port);
    }
  }
  if (!matched && (line.find("NET/IB : No device found") != std::string_view::npos ||
                   line.find("NET/IB : Using") != std::string_view::npos ||
                   line.find("NET/Socket : Using") != std::string_view::npos)) {
    matched = true;
  }
  if (matched) add_capped(o.lines, line, kMaxLines);
}

}  // namespace

nlohmann::json NcclObserved::to_json() const {
  nlohmann::json j = {
      {"network", network.empty() ? nlohmann::json() : nlohmann::json(network)},
      {"networks", networks},
      {"gdr", gdr},
      {"net_channels", net_channels},
      {"gdr_channels", gdr_channels},
      {"net_devices", net_devices},
      {"plugin", plugin.empty() ? nlohmann::json() : nlohmann::json(plugin)},
      {"ofi_provider", ofi_provider.empty() ? nlohmann::json() : nlohmann::json(ofi_provider)},
      {"ofi_fabric", ofi_fabric.empty() ? nlohmann::json() : nlohmann::json(ofi_fabric)},
      {"nccl_version", nccl_version.empty() ? nlohmann::json() : nlohmann::json(nccl_version)},
      {"found", found},
  };
  if (!host.empty()) j["host"] = host;
  if (!ib_ports.empty()) {
    nlohmann::json ports = nlohmann::json::object();
    for (const auto& [i, port] : ib_ports) ports[std::to_string(i)] = port;
    j["ib_ports"] = std::move(ports);
  }
  if (!warnings.empty()) j["warnings"] = warnings;
  if (!plugin_lines.empty()) j["plugin_lines"] = plugin_lines;
  if (!lines.empty()) j["log_lines"] = lines;
  if (!files.empty()) j["files"] = files;
  if (!missing_files.empty()) j["missing_files"] = missing_files;
  return j;
}

NcclObserved parse_nccl_log(std::string_view text) {
  NcclObserved o;
  ParseState st;
  while (!text.empty()) {
    auto nl = text.find('\n');
    parse_line(text.substr(0, nl), o, st);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return o;
}

NcclObserved read_nccl_log(const std::filesystem::path& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    NcclObserved o;
    o.missing_files.push_back(path.string());
    return o;
  }
  std::string text;
  char buf[1 << 16];
  while (text.size() < max_bytes && in) {
    in.read(buf, static_cast<std::streamsize>(std::min(sizeof buf, max_bytes - text.size())));
    text.append(buf, static_cast<std::size_t>(in.gcount()));
  }
  auto o = parse_nccl_log(text);
  o.files.push_back(path.string());
  return o;
}

NcclObserved merge_observed(const std::vector<NcclObserved>& parts) {
  NcclObserved m;
  for (const auto& p : parts) {
    if (m.network.empty()) m.network = p.network;
    for (const auto& n : p.networks) add_unique(m.networks, n);
    m.gdr = m.gdr || p.gdr;
    m.net_channels += p.net_channels;
    m.gdr_channels += p.gdr_channels;
    for (const auto& d : p.net_devices) add_unique(m.net_devices, d);
    m.ib_ports.insert(p.ib_ports.begin(), p.ib_ports.end());
    if (m.plugin.empty()) m.plugin = p.plugin;
    for (const auto& l : p.plugin_lines) add_capped(m.plugin_lines, l, kMaxPluginLines);
    if (m.ofi_provider.empty()) m.ofi_provider = p.ofi_provider;
    if (m.ofi_fabric.empty()) m.ofi_fabric = p.ofi_fabric;
    if (m.nccl_version.empty()) m.nccl_version = p.nccl_version;
    if (m.host.empty()) m.host = p.host;
    for (const auto& w : p.warnings) add_capped(m.warnings, w, kMaxWarnings);
    for (const auto& l : p.lines) add_capped(m.lines, l, kMaxLines);
    m.files.insert(m.files.end(), p.files.begin(), p.files.end());
    m.missing_files.insert(m.missing_files.end(), p.missing_files.begin(), p.missing_files.end());
    m.found = m.found || p.found;
  }
  return m;
}

NcclObserved read_nccl_logs(const std::vector<std::filesystem::path>& paths) {
  std::vector<NcclObserved> parts;
  parts.reserve(paths.size());
  for (const auto& p : paths) parts.push_back(read_nccl_log(p));
  return merge_observed(parts);
}

std::vector<std::filesystem::path> find_nccl_logs(const std::filesystem::path& dir,
                                                  std::string_view prefix) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0 && it->is_regular_file(ec)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<PortRate> nccl_port_rate(const NcclObserved& o,
                                       const std::map<std::string, double>& rates) {
  if (rates.empty() || o.net_channels == 0) return std::nullopt;
  std::set<std::string> all, carried;
  for (const auto& [port, gbps] : rates) all.insert(port);
  const std::string net = lower(o.network);
  if (net == "ib") {
    for (const auto& d : o.net_devices) {
      if (d.rfind("IB/", 0) != 0) continue;
      int index = -1;
      auto [end, ec] = std::from_chars(d.data() + 3, d.data() + d.size(), index);
      auto port = ec == std::errc() ? o.ib_ports.find(index) : o.ib_ports.end();
      if (port != o.ib_ports.end() && rates.count(port->second)) carried.insert(port->second);
    }
    if (carried.empty()) carried = all;  // NET/IB carried them; the log does not say on which
  } else if (net.find("libfabric") != std::string::npos) {
    if (o.ofi_provider.empty() || lower(o.ofi_provider).rfind("efa", 0) == 0) carried = all;
  } else if (net != "socket") {
    return std::nullopt;  // another plugin: which device it used is not known here
  }
  return fastest_port(rates, carried);
}

}  // namespace ncclsmoke::transports
