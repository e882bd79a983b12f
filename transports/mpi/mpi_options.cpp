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

}  // namespace ncclsmoke::transports
