#pragma once
// MPI_Allreduce through the MPI library this binary links (Open MPI), for clusters that launch
// with mpirun / MPIJob. Runs only when the process was started by an MPI launcher (otherwise the
// transport is unavailable: skipped, with the reason). identify() reports what Open MPI selected
// (pml / btl / mtl) as far as it can be read.
#include <memory>

#include "transports/transport.h"

namespace ncclsmoke::transports {

std::unique_ptr<Transport> make_mpi_transport();

}  // namespace ncclsmoke::transports
