#pragma once
// MPI_Allreduce through the MPI library this binary links (Open MPI), for clusters that launch
// with mpirun / MPIJob. Runs only when the process was started by an MPI launcher (otherwise the
// transport is unavailable: skipped, with the reason). identify() reports what Open MPI selected
// (pml / btl / mtl) as far as it can be read.
//
// Contract details:
//  - MPI runs in a child process of the rank, never in the rank itself, so that Open MPI's own
//    abort (a failed MPI_Init_thread: "at least one MPI process is unreachable"; mpirun then
//    kills every rank) ends only that child and the rank still writes its verdict. The first
//    open() starts `<this binary> __mpi-child <pid>` (/proc/self/exe; the executable's main must
//    dispatch to mpi_child_main, below) with the rank's environment, so PMIx registers the child
//    as that rank. Later transports of the process share it (MPI is initialised once per
//    process); it calls MPI_Finalize at exit, bounded by NCCLSMOKE_MPI_FINALIZE_TIMEOUT_S (60).
//  - The guard (abort_guard.cpp) in the child catches Open MPI's PMIx_Abort and help texts: the
//    rank gets TransportError(init_failed) (or peer_lost / other mid-collective) with Open MPI's
//    own reason; evidence: the help texts, the child's exit and its last 40 stderr lines (which
//    are also forwarded to the rank's stderr).
//  - In the child, open() does MPI_Init_thread (FUNNELED, on the thread that serves requests),
//    checks MPI_COMM_WORLD's size and rank against the harness's (init_failed otherwise) and
//    duplicates it with MPI_ERRORS_RETURN.
//  - allocate() hands out memfd shared memory mapped in both processes, so a collective moves
//    no data between them: the rank sends {buffers, count, dtype, budget} over a socketpair and
//    waits with its deadline. Other memory is copied through a shared scratch buffer.
//    timed_allreduce() runs the whole loop in the child, which times it; the rank bounds each
//    collective by watching a progress counter in a shared page.
//  - A call that misses its deadline cannot be cancelled: the rank abandons the child (SIGUSR1:
//    it leaves PMIx cleanly and exits; SIGKILL 2 s later) and throws TransportError(timeout);
//    nothing can land late in the caller's buffers, and later MPI calls throw "unusable".
//  - Option "mpi.collective": "allreduce" (default; blocking MPI_Allreduce, Open MPI's tuned
//    algorithms) or "iallreduce" (MPI_Iallreduce + MPI_Test polling, libnbc's algorithms).
//  - float32 uses MPI_FLOAT + MPI_SUM; bfloat16 travels as MPI_UINT16_T with a user op
//    (MPI_Op_create, commutative) that sums through transports::reduce_sum.
//  - A rank that dies is normally handled by mpirun, which ends the whole job: survivors are
//    killed rather than seeing an MPI error, so PEER_LOST is rarely reported by this transport.
//  - Pairs (TransportContext::world_ranks set: the pairwise rounds' 2-rank instances,
//    harness/run/pairwise_step.h): open() never starts MPI (MPI_Init waits for the whole mpirun
//    job); it needs the child a world instance opened in this process, alive (else the pair is
//    unavailable, on both sides, saying why: MPI was not opened here, the child is dead, or the
//    world open failed: the pair never ran, so it says nothing about the link).
//    The pair first agrees through its store (keys "mpi/info/<rank>", "mpi/arrived",
//    "mpi/decision"): each rank posts whether it can take part, the last to arrive settles "go"
//    and one that waited in vain "off" (compare_set), so a partner that never comes, or comes
//    after the other gave up, is a timeout with no MPI call made, and a partner whose MPI is
//    unusable makes the pair unavailable at once, with its reason. On "go" the child makes the
//    pair's communicator with MPI_Comm_create_group (collective over the pair only, so disjoint
//    pairs form theirs at once) from a second duplicate of MPI_COMM_WORLD made at the first world
//    open, with the tag the pair's lower rank posted (a per-process counter: creations never
//    match across pairs); bounded by the open deadline like any call (a partner that agreed,
//    then stopped, ends in timeout and the child is abandoned). allreduce / timed_allreduce run
//    on it; close() frees it (MPI_Comm_free). No link_stats(): a pair's sample has its time only.
#include <memory>

#include "transports/transport.h"

namespace ncclsmoke::transports {

std::unique_ptr<Transport> make_mpi_transport();

// The MPI child's entry point: an executable that links this transport calls it first thing,
//   if (argc > 1 && std::string(argv[1]) == "__mpi-child") return mpi_child_main(argc, argv);
// It returns the child's exit status.
int mpi_child_main(int argc, char** argv);

}  // namespace ncclsmoke::transports
