#pragma once
// NCCL all-reduce on GPUs, the transport the project is named for. The CUDA runtime and NCCL are
// loaded at run time (nccl_api.h), so a node without a GPU or the libraries reports the phase
// unavailable (skipped) with the exact reason, never pass. Options (TransportContext::options):
//   nccl.cudart, nccl.lib  library paths; a given path is the only one tried (default: the
//                   sonames through the dynamic loader, then /usr/local/cuda/lib64)
//   nccl.gpu        device index (default: LOCAL_RANK, else 0; 0 in share_gpu mode)
//   nccl.share_gpu  "1": synthetic mode, several ranks on one GPU. Each rank gets a distinct
//                   NCCL_HOSTID ("ncclsmoke-synthetic-<rank>", NCCL < 2.30) so NCCL sees separate
//                   hosts and uses the NET transport; NCCL >= 2.30 gets NCCL_MULTI_RANK_GPU_ENABLE=1
//                   (with NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1 to keep NET). Unsupported by
//                   NVIDIA: identify() says "synthetic": true and such rows are never baselines.
//   nccl.net        the network expected to carry the bytes (e.g. IB, Socket, Libfabric)
//   nccl.policy     "pin": sets NCCL_NET=<net>, so a missing
//                   plugin fails init loudly; "observe": leaves NCCL's choice alone so a fallback
//                   is seen, not prevented (the default; the log parser then compares expected and observed)
//   nccl.debug_file this rank's NCCL log path, used as given ("%r" is replaced by the rank,
//                   "%h"/"%p" as NCCL does, nothing appended). Unless the user set NCCL_DEBUG_FILE, sets
//                   NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE before the first
//                   NCCL call. A user's own NCCL_DEBUG_FILE is kept, and its path reported
//                   expanded as NCCL expands it (%h, %p only).
// Environment variables are process-wide: one NCCL transport per process (one rank per process).
//
// open(): rank 0 creates the unique id and sets "unique_id" (128 raw bytes; "unique_id/<n>" for
// the n-th open on the same store, counted by "opens") in the store; others get it before the
// deadline. The communicator is created non-blocking (ncclConfig_t.blocking =
// 0) and ncclCommGetAsyncError is polled every 10 ms: past the deadline -> ncclCommAbort and
// timeout; an error -> ncclCommAbort and init_failed "<ncclGetErrorString>: <ncclGetLastError>"
// with evidence {nccl_last_error, nccl_version, net_requested, policy} (and a plugin /
// LD_LIBRARY_PATH hint when the network was pinned). No device or a driver older than the
// runtime -> unavailable "no CUDA device: <cudaGetErrorString>".
//
// allreduce(): ncclAllReduce on the transport's stream, then polls cudaStreamQuery and
// ncclCommGetAsyncError until done: deadline -> ncclCommAbort, timeout; an asynchronous NCCL error
// -> peer_lost (ncclRemoteError / ncclSystemError: a peer or its connection went away; peer -1,
// as NCCL does not name the rank, and the message says so) or other,
// with NCCL's text. After an abort every later call throws. timed_allreduce() times `iters`
// back-to-back collectives between two CUDA events on the stream. Buffers are device memory
// (allocate/release/copy_in/copy_out: cudaMalloc/cudaFree/cudaMemcpy).
//
// identify(): {"nccl_version", "nccl_version_code", "cuda_runtime", "cuda_driver", "gpu",
// "gpu_source" (nccl.gpu | LOCAL_RANK | default),
// "pci_bus_id", "libraries": {cudart, nccl}, "debug_file" (path or null), "debug_file_source"
// ("ncclsmoke" | "user" | null), "net_requested", "policy", "env_nccl_net", "synthetic",
// "env_set" (the NCCL_* variables this transport set)}. NCCL has no API naming the network it
// chose: the log parser reads it from debug_file_path().
#include <memory>
#include <string>

#include "transports/transport.h"

namespace ncclsmoke::transports {

class NcclTransport : public Transport {
 public:
  // The per-rank NCCL log this rank writes, "" when none is known (set by open()).
  virtual std::string debug_file_path() const = 0;
};

std::unique_ptr<Transport> make_nccl_transport();

// debug_file_path() when `t` is the NCCL transport, else "".
std::string nccl_debug_file_path(const Transport& t);

}  // namespace ncclsmoke::transports
