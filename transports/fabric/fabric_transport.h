#pragma once
// Ring all-reduce over libfabric reliable-datagram (FI_EP_RDM) endpoints; the provider is chosen
// at run time, addresses are exchanged through the store. The ring is the shared schedule
// (transports/ring_schedule.h) posted as a window of tagged sends/receives; every libfabric
// object is held by an owner that closes it (fi_handle.h). Options (TransportContext::options):
//   fabric.provider          libfabric provider name: efa, verbs, tcp, udp, shm ... (default tcp);
//                            RDM over tcp/udp comes back as the utility stacks "tcp;ofi_rxm" and
//                            "udp;ofi_rxd", which identify() reports as returned
//   fabric.domain            domain (e.g. "lo", "eth0", "rdmap0s6-rdm"); default: the domain bound
//                            to the address this rank reached the store from, else the first one
//   fabric.hw_counters_root  where EFA/IB hardware counters live (default /sys/class/infiniband)
//   fabric.hw_counters       auto (only for efa, default) | always | never
//   fabric.chunk_bytes       pipeline chunk (default 1M; capped by the provider's max_msg_size)
//   fabric.window            sends and receives in flight each way (default 4)
// open() pushes one message around the ring, so a fabric that cannot carry data fails there.
// A provider that is not present is TransportError(unavailable) with libfabric's error text and
// the providers that are. After a failed collective the endpoint is closed (the provider must not
// write into the caller's buffers any more); later calls throw.
// identify() reports the provider and fabric libfabric actually returned and, for efa, the
// per-device hardware-counter deltas between open() and identify().
#include <memory>

#include "transports/transport.h"

namespace ncclsmoke::transports {

std::unique_ptr<Transport> make_fabric_transport();

}  // namespace ncclsmoke::transports
