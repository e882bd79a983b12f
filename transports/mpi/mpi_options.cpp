// What the mpi transport accepts (transports/options.h): one declaration per option, read in
// mpi_transport.cpp with ctx.options.get_*("mpi.<name>"). Compiled into every binary.
#include "transports/options.h"

namespace ncclsmoke::transports {

std::vector<OptionSpec> mpi_options() {
  return {
      choice_option("mpi", "collective",
                    "allreduce: blocking MPI_Allreduce; iallreduce: MPI_Iallreduce + MPI_Test "
                    "polling",
                    "allreduce", {"allreduce", "iallreduce"}),
  };
}

// Why the pairwise rounds cannot use it (BackendInfo::no_pairs): the backend checks
// MPI_COMM_WORLD's size against the harness's, and that world is the one mpirun started.
std::string mpi_no_pairs() {
  return "a 2-rank MPI world cannot be formed inside the run (MPI_COMM_WORLD is the one mpirun "
         "started)";
}

}  // namespace ncclsmoke::transports
