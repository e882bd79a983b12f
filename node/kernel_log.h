#pragma once
// The kernel log's GPU faults: the NVIDIA driver writes "NVRM: Xid (PCI:<bus id>): <n>, ..." for
// each (NVIDIA's Xid catalogue; the EKS GPU checklist this project answers cordons on 48, 74, 79).
// Lines are read in either form the kernel gives them:
//   /dev/kmsg records  "<prio>,<seq>,<usec since boot>,<flags>;NVRM: Xid (PCI:0000:3b:00): 79, ..."
//   dmesg text         "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, ..."
// Reading is bounded and never throws: a file that cannot be opened (a container without
// /dev/kmsg, no CAP_SYSLOG) gives read = false and why.
#include <cstddef>
#include <string>
#include <string_view>

#include "facts/node.h"

namespace ncclsmoke::node {

inline constexpr const char* kKernelLogDefault = "/dev/kmsg";
// The most of the log read; the kernel's ring buffer is usually 128 KiB to a few MiB.
inline constexpr std::size_t kKernelLogMaxBytes = 8u << 20;
// An Xid line is kept up to this length as evidence.
inline constexpr std::size_t kXidTextMax = 400;

// Every Xid line of `text`, in order.
void parse_kernel_log(std::string_view text, facts::KernelLogFacts& out);

// Reads `path` (a /dev/kmsg-like device, one record per read, non-blocking to its end; or a
// regular file) up to `max_bytes` and parses it.
facts::KernelLogFacts read_kernel_log(const std::string& path,
                                      std::size_t max_bytes = kKernelLogMaxBytes);

}  // namespace ncclsmoke::node
