#pragma once
// The GPUs' own health, read through NVML (NVIDIA's management library, part of the driver),
// opened at run time and never linked: a node without the driver has no libnvidia-ml.so.1, and
// that is a CPU node, not a broken GPU node. What is read per GPU (facts/node.h GpuFacts):
// uncorrected ECC errors (volatile and aggregate), remapped rows (uncorrectable, pending, failed),
// pages retired for double-bit errors and whether a retirement is pending, the PCIe link's width
// and generation against their maximum, and the reasons the clocks are held down now.
// Judged by results/judging/node_rules.h (GPU_HEALTH). The prototypes and constants below are
// NVML's published API (the NVML API reference, nvml.h), declared here so no header is needed to
// build.
#include <string>

#include "facts/node.h"

namespace ncclsmoke::node {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";
// At most this many GPUs are read (NVML's own limit on one node is far below it).
inline constexpr unsigned kMaxGpus = 64;

// Opens `library` (a path, or a name the loader searches), starts NVML, reads every GPU and shuts
// NVML down. Never throws; a library that does not load gives read = false, init_error = -1 and
// why_not; NVML that does not start gives read = false, init_error its code and why_not its text.
facts::GpuHealthFacts read_gpu_health(const std::string& library = kNvmlLibrary);

}  // namespace ncclsmoke::node
