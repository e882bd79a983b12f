#pragma once
// MPI_Allreduce through the MPI library this binary links (Open MPI), for clusters that launch
// with mpirun / MPIJob. Runs only when the process was started by an MPI launcher (otherwise the
// transport is unavailable: skipped, with the reason). identify() reports what Open MPI selected
// (pml / btl / mtl) as far as it can be read.
//
// Contract details:
//  - open() initialises MPI once per process (MPI_Init_thread, FUNNELED), checks that
//    MPI_COMM_WORLD's size and rank equal the harness's (init_failed otherwise) and duplicates it
//    with MPI_ERRORS_RETURN. MPI_Finalize runs once, at exit, only if we initialised, bounded by
//    NCCLSMOKE_MPI_FINALIZE_TIMEOUT_S (default 60).
//  - Every MPI call runs on one dedicated thread and the caller waits with its deadline, so even
//    MPI_Init (which waits for every rank) and a blocking MPI_Allreduce are bounded. A call that
//    misses its deadline cannot be cancelled: the transport throws TransportError(timeout) and the
//    process makes no further MPI calls (later calls throw, MPI_Finalize is skipped, and mpirun
//    then reports the rank as exiting without finalizing).
//  - Option "mpi.collective": "allreduce" (default; blocking MPI_Allreduce, Open MPI's tuned
//    algorithms) or "iallreduce" (MPI_Iallreduce + MPI_Test polling, libnbc's algorithms, 1.7x
//    slower at 64 MiB here). A timed-out blocking call is parked inside Open MPI's progress loop so
//    it cannot write into the caller's buffers later; without that hook, iallreduce is used.
//  - float32 uses MPI_FLOAT + MPI_SUM; bfloat16 travels as MPI_UINT16_T with a user op
//    (MPI_Op_create, commutative) that sums through transports::reduce_sum.
//  - A rank that dies is normally handled by mpirun, which ends the whole job: survivors are
//    killed rather than seeing an MPI error, so PEER_LOST is not reported by this transport.
#include <memory>

#include "transports/transport.h"

namespace ncclsmoke::transports {

std::unique_ptr<Transport> make_mpi_transport();

}  // namespace ncclsmoke::transports
