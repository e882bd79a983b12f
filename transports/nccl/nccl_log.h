#pragma once
// What NCCL says carried the bytes, read from its own INFO log (NCCL_DEBUG=INFO,
// NCCL_DEBUG_SUBSYS=INIT,NET, NCCL_DEBUG_FILE=<dir>/nccl.%h.%p: one file per rank).
//
// Why a log parser: no NCCL API reports the chosen network (through 2.30), so the log is the only
// first-hand evidence. Only lines that have been stable since 2.12 are matched exactly:
//   "Using network <name>"                       (INIT; <name> may contain spaces: "AWS Libfabric")
//   "Channel xx/yy : a[b] -> c[d] [send|receive] via NET/<name>/<dev>[/GDRDMA][(PCI)][/Shared]"
//   "NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)"  (aws-ofi-nccl >= 1.15;
//    older: "Selected Provider is efa (found 4 nics)"; matched case-insensitively)
//   "NCCL version 2.x.y+cudaZ", and "NCCL WARN <msg>" lines.
//   "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>"  (the IB devices)
// Plugin-loading messages change wording in nearly every release, so they are only kept as
// evidence, and a plugin name is taken loosely ("Loaded net plugin <name>", "Initialized NET plugin
// <name>", "NET/OFI Initializing aws-ofi-nccl X.Y.Z").
//
// This module only reports what the log says; results/judging/nccl_judge.h compares it with what was
// expected and decides whether that is a finding.
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "transports/port_rate.h"

namespace ncclsmoke::transports {

struct NcclObserved {
  std::string network;                // first "Using network" name, else the first NET/<name>
  std::vector<std::string> networks;  // every distinct network named, in order of appearance
  bool gdr = false;                   // at least one NET channel line carried /GDRDMA
  int net_channels = 0;               // "via NET/..." channel lines seen
  int gdr_channels = 0;               // ... of which carried /GDRDMA
  std::vector<std::string> net_devices;  // distinct "<name>/<dev>" from the channel lines
  // NET/IB's devices by index, as "<device>/<port>" (sysfs' spelling), from
  // "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>"
  std::map<int, std::string> ib_ports;
  std::string plugin;                 // e.g. "Libfabric", "aws-ofi-nccl 1.13.2"; empty: none named
  std::vector<std::string> plugin_lines;  // plugin load/fail messages, verbatim (evidence)
  std::string ofi_provider;           // "efa", "tcp;ofi_rxm" ... (aws-ofi-nccl)
  std::string ofi_fabric;             // "efa-direct" ... (aws-ofi-nccl >= 1.15)
  std::string nccl_version;           // "2.28.3+cuda12.9"
  std::string host;                   // from the first line's "<host>:<pid>:<tid>" prefix
  std::vector<std::string> warnings;  // "NCCL WARN" messages (capped at kMaxWarnings)
  std::vector<std::string> lines;     // the matched lines, verbatim (capped at kMaxLines)
  std::vector<std::string> files;     // files read (file readers only)
  std::vector<std::string> missing_files;  // files that could not be read
  bool found = false;                 // at least one NCCL line was seen

  nlohmann::json to_json() const;
};

inline constexpr std::size_t kMaxWarnings = 32;
inline constexpr std::size_t kMaxLines = 48;
inline constexpr std::size_t kMaxPluginLines = 16;

// Parses one rank's log text (any NCCL version 2.12+; lines with or without the host prefix).
NcclObserved parse_nccl_log(std::string_view text);

// Reads and parses one file. A missing or unreadable file gives found = false with the path in
// missing_files; it never throws. At most `max_bytes` are read (NCCL INFO logs are small).
NcclObserved read_nccl_log(const std::filesystem::path& path,
                           std::size_t max_bytes = 64u << 20);

// The rate of the RDMA port NCCL's network bytes had to live with (port_rate.h), from what the
// log says carried them and `rates` (read_port_rates of this host): NET/IB over its devices (the
// channel lines' indices through ib_ports; every port when the log does not map them), the
// Libfabric plugin on efa (every port: EFA devices carry no name in the log); NET/Socket, or the
// plugin on another provider, with RDMA ports present: the fastest of them, not carried (the
// bytes fell back to another path). nullopt: no port has a rate, NCCL used no network (every
// peer on this host), or a network this cannot place.
std::optional<PortRate> nccl_port_rate(const NcclObserved& o,
                                       const std::map<std::string, double>& rates);

// Several ranks' observations as one: networks/devices are unions, counts add up, gdr is true
// when any rank used GDR (net_channels/gdr_channels give the detail), found when any rank's was.
NcclObserved merge_observed(const std::vector<NcclObserved>& parts);

// read_nccl_log() for each path, then merge_observed().
NcclObserved read_nccl_logs(const std::vector<std::filesystem::path>& paths);

// The files in `dir` whose name starts with `prefix` (e.g. the NCCL_DEBUG_FILE pattern's part
// before %h), sorted. Empty when the directory does not exist.
std::vector<std::filesystem::path> find_nccl_logs(const std::filesystem::path& dir,
                                                  std::string_view prefix);

}  // namespace ncclsmoke::transports
