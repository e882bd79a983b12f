#pragma once
// What the node itself says, read by node/ and judged by results/judging/node_rules.h.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ncclsmoke::facts {

// One "NVRM: Xid (PCI:<bus id>): <n>, ..." line of the kernel log: the NVIDIA driver's report of
// a GPU fault (NVIDIA's Xid catalogue gives each number's meaning).
struct XidEvent {
  int xid = 0;
  std::string pci;    // "0000:3b:00"
  std::string text;   // the line from "NVRM:" on, bounded
  double at_s = -1;   // seconds since boot the kernel stamped it with; -1 unknown
};

// The kernel log as one rank read it: every Xid in it (the ring buffer holds the events since
// boot, or since it wrapped), or why it could not be read (no /dev/kmsg in a container, no
// CAP_SYSLOG): then nothing is known, which is not "healthy".
struct KernelLogFacts {
  std::string source;  // the path read
  bool read = false;
  std::string why_not;
  std::vector<XidEvent> xids;
  bool truncated = false;  // stopped at the byte bound; older or newer lines may be missing
};

// One network interface the rank's traffic left on (/sys/class/net/<name>): its state at the end
// of the run, and what its counters moved by over the run.
struct NetInterfaceFacts {
  std::string name;        // "eth0"
  std::string operstate;   // "up", "down", "unknown" (loopback, many virtual devices)
  int carrier = -1;        // 1, 0; -1 unreadable (down interfaces refuse the read)
  long long speed_mbps = -1;  // -1 unknown (virtual devices)
  int mtu = -1;
  std::uint64_t rx_bytes = 0;  // deltas over the run
  std::uint64_t tx_bytes = 0;
  // The error and drop counters (statistics/) that moved: name -> delta.
  std::map<std::string, std::uint64_t> moved;
};

// One RDMA port (/sys/class/infiniband/<device>/ports/<port>): InfiniBand, RoCE or EFA.
struct RdmaPortFacts {
  std::string device;      // "mlx5_0", "efa_0"
  int port = 0;
  std::string state;       // "ACTIVE", "DOWN", "INIT", "ARMED" (the kernel's "4: ACTIVE")
  std::string phys_state;  // "LinkUp", "Polling", "Disabled" (from "5: LinkUp")
  std::string link_layer;  // "InfiniBand", "Ethernet", "Unspecified" (EFA)
  double rate_gbps = 0;    // 0 unknown
  // The error counters (counters/ and hw_counters/) that moved over the run: name -> delta.
  std::map<std::string, std::uint64_t> moved;
  std::string key() const { return device + "/" + std::to_string(port); }
};

// The node's network devices over the run, as one rank read them under its sysfs root: the
// interfaces holding the rank's address and every RDMA port, with the counters' deltas between
// the start (the world step) and the end (before the verdict). Not read (no sysfs, a root that
// is not there): nothing is known, which is not "healthy".
struct NicFacts {
  bool read = false;
  std::string root;        // "/sys", or NCCLSMOKE_SYSFS_ROOT
  double interval_s = 0;   // between the two readings
  std::vector<NetInterfaceFacts> interfaces;
  std::vector<RdmaPortFacts> rdma_ports;
};

// One GPU as NVML reports it (NVIDIA's NVML API reference). -1: the device does not support the
// query (NVML_ERROR_NOT_SUPPORTED) or it failed; nothing is inferred from an unknown.
struct GpuFacts {
  int index = -1;
  std::string uuid;
  std::string name;
  std::string pci_bus_id;                   // "00000000:3B:00.0"
  long long ecc_uncorrected_volatile = -1;  // since the driver loaded
  long long ecc_uncorrected_aggregate = -1; // over the GPU's life
  int remapped_rows_uncorrectable = -1;     // rows remapped for uncorrectable errors
  int remap_pending = -1;                   // 1: a remap waits for a GPU reset
  int remap_failed = -1;                    // 1: a remap failed (the GPU needs replacing)
  long long retired_pages_dbe = -1;         // pages retired for double-bit ECC errors
  int retired_pages_pending = -1;           // 1: a retirement waits for a reboot or reset
  int pcie_width = -1, pcie_width_max = -1;
  int pcie_gen = -1, pcie_gen_max = -1;
  long long clock_event_reasons = -1;       // nvmlClocksEventReason bit mask
  std::string error;  // the device could not be opened (e.g. "GPU is lost"); nothing else read
};

// NVML's return codes that mean "no NVIDIA driver here, or not for us": nothing is known, and
// nothing is judged (the NVML API reference's nvmlReturn_t).
inline constexpr int kNvmlNoPermission = 4;
inline constexpr int kNvmlDriverNotLoaded = 9;
inline constexpr int kNvmlLibraryNotFound = 12;

// NVML as one rank read it: opened at run time (never linked), or why not (no driver: a CPU node,
// which is not a broken GPU node).
struct GpuHealthFacts {
  bool read = false;
  std::string why_not;
  int init_error = 0;          // NVML's code when it did not start; -1 the library did not load
  std::string library;         // the library opened
  std::string driver_version;  // "550.54.15"
  std::vector<GpuFacts> gpus;
};

}  // namespace ncclsmoke::facts
