#pragma once
// What the node itself says, read by node/ and judged by results/judging/node_rules.h.
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

}  // namespace ncclsmoke::facts
