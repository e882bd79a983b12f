#include "transports/registry.h"

#include "transports/nccl/nccl_transport.h"
#include "transports/socket/socket_transport.h"
#ifdef NCCLSMOKE_HAVE_FABRIC
#include "transports/fabric/fabric_transport.h"
#endif
#ifdef NCCLSMOKE_HAVE_MPI
#include "transports/mpi/mpi_transport.h"
#endif

namespace ncclsmoke::transports {

const std::vector<BackendInfo>& backends() {
  static const std::vector<BackendInfo> list = [] {
    std::vector<BackendInfo> b;
    b.push_back({"socket", "ring all-reduce over TCP sockets", [] { return make_socket_transport(); }, ""});
#ifdef NCCLSMOKE_HAVE_FABRIC
    b.push_back({"fabric", "ring all-reduce over libfabric RDM endpoints (efa, verbs, tcp, shm ...)",
                 [] { return make_fabric_transport(); }, ""});
#else
    b.push_back({"fabric", "libfabric", nullptr, "this binary was built without libfabric"});
#endif
#ifdef NCCLSMOKE_HAVE_MPI
    b.push_back({"mpi", "MPI_Allreduce through Open MPI (launch with mpirun)",
                 [] { return make_mpi_transport(); }, ""});
#else
    b.push_back({"mpi", "MPI", nullptr, "this binary was built without MPI"});
#endif
    b.push_back({"nccl", "NCCL all-reduce on GPUs (CUDA and NCCL loaded at run time)",
                 [] { return make_nccl_transport(); }, ""});
    return b;
  }();
  return list;
}

const BackendInfo* find_backend(const std::string& name) {
  for (const auto& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace ncclsmoke::transports
