#pragma once
// Reading sysfs, forgivingly: what the node's devices say (network interfaces, RDMA ports) is read
// from small text files under a root that tests point at a copied layout (NCCLSMOKE_SYSFS_ROOT,
// else /sys). A missing directory lists nothing, an unreadable or odd file is "not known", and
// nothing throws: a CPU-only machine or a container without /sys/class/infiniband is not a broken
// one.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::node {

inline constexpr const char* kSysfsDefault = "/sys";

// `configured` (NCCLSMOKE_SYSFS_ROOT's value) when set and not empty, else /sys.
std::string sysfs_root(const std::optional<std::string>& configured);
// <root>/class/infiniband: the RDMA devices (InfiniBand, RoCE, EFA).
std::string rdma_class_dir(const std::string& root);
// <root>/class/net: the network interfaces.
std::string net_class_dir(const std::string& root);

// Sorted names of the sub-directories of `dir` (sysfs entries are symlinks to directories);
// empty when it cannot be listed.
std::vector<std::string> sorted_subdirs(const std::string& dir);
// Sorted names of the regular files of `dir`; empty when it cannot be listed.
std::vector<std::string> sorted_files(const std::string& dir);

// The first line of a file, at most 256 bytes, trailing blanks dropped; nullopt unreadable.
std::optional<std::string> read_line(const std::string& path);
// A file holding one unsigned decimal number; nullopt unreadable or not a number.
std::optional<std::uint64_t> read_count(const std::string& path);
// A file holding one signed decimal number (an interface's speed is -1 when unknown).
std::optional<long long> read_signed(const std::string& path);

// The Gb/s of the kernel's RDMA rate text (drivers/infiniband/core/sysfs.c rate_show:
// "<N>[.5] Gb/sec (<W>X <speed>)", e.g. "100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)"), nullopt
// for any other text.
std::optional<double> parse_port_rate(const std::string& text);

}  // namespace ncclsmoke::node
