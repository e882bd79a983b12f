#pragma once
// The MPI child's guard against Open MPI's own abort (see abort_guard.cpp for the mechanism).
#include <string>
#include <vector>

namespace ncclsmoke::transports::abort_guard {

// Arms the guard in the MPI child: an abort is then reported on `report_sock` (one message
// {"event":"abort", "status", "message", "help": [...]}) and the process finalises PMIx and exits
// with mpi_wire::kExitAborted instead of ending the whole job. Unarmed (any other process), the
// interposers forward to Open MPI's own functions.
void arm(int report_sock);
// Help texts Open MPI rendered in this process so far (newest last, at most 16).
std::vector<std::string> help_texts();
// PMIx_Finalize(NULL, 0) from libpmix (not ours); false when it is not loaded.
bool finalize_pmix();

}  // namespace ncclsmoke::transports::abort_guard
