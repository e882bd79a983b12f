#pragma once
// GPU_XID: the NVIDIA driver's GPU faults in a rank's kernel log (facts/node.h, read by
// node/kernel_log.h). One finding per (Xid, GPU) a rank read, with the count, the last time (since
// boot), the line, and what the Xid means. The Xids that mean the GPU needs a reset or replacing
// (48 double-bit ECC, 64 a row remapping failure, 74 NVLink, 79 fallen off the bus, 95 uncontained
// ECC: NVIDIA's Xid catalogue; the EKS GPU checklist this project answers cordons on 48, 74, 79)
// are errors, and name the host as a suspect (suspects.h); the others (an application's fault such
// as 13 or 31, a row remapped, a contained ECC error) are warnings.
// The ring buffer holds the events since boot: a GPU reset without a reboot does not clear a line,
// so a host stays named until it is rebooted or the log wraps (the finding says when it was
// logged). A log that could not be read says nothing (a CPU node, a container without
// /dev/kmsg): no finding.
//
// explain_by_node_faults: the transport failures and peer losses of a rank whose host has a node
// fault that is an error (GPU_XID, GPU_HEALTH; NIC_DOWN, NIC_ERRORS: nic_rules.h) become its consequences
// (info, evidence consequence_of_host), the fault the error: a GPU off the bus makes NCCL hang on
// that rank, a link that went down stalls its collectives, and the hang is not the cause.
#include <string>
#include <vector>

#include "facts/node.h"
#include "rendezvous/rank_ref.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

using facts::KernelLogFacts;
using facts::XidEvent;

// "the GPU has fallen off the bus", ...; "" for an Xid this table does not know.
std::string xid_meaning(int xid);
// True for the Xids that mean the GPU needs a reset or replacing.
bool xid_replaces_gpu(int xid);

std::vector<Finding> xid_findings(const KernelLogFacts& log, const rendezvous::RankRef& self);

// GPU_HEALTH, from what NVML said on a rank's node (facts/node.h GpuHealthFacts, read by
// node/gpu_health.h on the node's local rank 0): one finding per GPU with a problem, listing
// each. Errors, the node a suspect: the GPU is lost (NVML cannot open it), uncorrected ECC errors
// since the driver loaded, a row remap or page retirement pending (the GPU needs a reset before
// it is trusted), a row remap that failed (it needs replacing). Warnings: a PCIe link narrower
// than its maximum width (the generation is not compared: idle links train down to save power),
// clocks held down now by a hardware slowdown (0x8), software or hardware thermal slowdown (0x20,
// 0x40) or the power brake (0x80) (NVML's clocks event reasons). NVML whose library is there but
// that does not start (a driver and library that disagree after an upgrade) is one warning; no
// library, no driver loaded, or no permission says nothing (a CPU node).
std::vector<Finding> gpu_health_findings(const facts::GpuHealthFacts& gpus,
                                         const rendezvous::RankRef& self);

// GPU_HEALTH across nodes: a node whose NVML lists fewer GPUs than most nodes' does (ties: the
// larger count) has lost one (off the bus, disabled): an error naming it, the node a suspect.
// Nodes are told apart by their ranks' node name, else the host; one view per node.
std::vector<Finding> judge_gpu_counts(const std::vector<Verdict>& views);

void explain_by_node_faults(std::vector<Finding>& findings);

}  // namespace ncclsmoke::results
