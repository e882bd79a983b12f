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

// Each backend's option declarations, in its folder: <name>/<name>_options.cpp.
std::vector<OptionSpec> socket_options();
std::vector<OptionSpec> fabric_options();
std::vector<OptionSpec> mpi_options();
std::vector<OptionSpec> nccl_options();
// And how each tells what carried its bytes: <name>/<name>_carried.cpp.
CarriedBy socket_carried();
CarriedBy fabric_carried();
CarriedBy mpi_carried();
CarriedBy nccl_carried();

const std::vector<BackendInfo>& backends() {
  static const std::vector<BackendInfo> list = [] {
    std::vector<BackendInfo> b;
    b.push_back({"socket", "ring all-reduce over TCP sockets", [] { return make_socket_transport(); }, "",
                 socket_options(), socket_carried(), ""});
#ifdef NCCLSMOKE_HAVE_FABRIC
    b.push_back({"fabric", "ring all-reduce over libfabric RDM endpoints (efa, verbs, tcp, shm ...)",
                 [] { return make_fabric_transport(); }, "", fabric_options(), fabric_carried(), ""});
#else
    b.push_back({"fabric", "libfabric", nullptr, "this binary was built without libfabric",
                 fabric_options(), fabric_carried(), ""});
#endif
#ifdef NCCLSMOKE_HAVE_MPI
    b.push_back({"mpi", "MPI_Allreduce through Open MPI (launch with mpirun)",
                 [] { return make_mpi_transport(); }, "", mpi_options(), mpi_carried(), ""});
#else
    b.push_back({"mpi", "MPI", nullptr, "this binary was built without MPI", mpi_options(),
                 mpi_carried(), ""});
#endif
    b.push_back({"nccl", "NCCL all-reduce on GPUs (CUDA and NCCL loaded at run time)",
                 [] { return make_nccl_transport(); }, "", nccl_options(), nccl_carried(), ""});
    return b;
  }();
  return list;
}

const BackendInfo* find_backend(const std::string& name) {
  for (const auto& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<const OptionSpec*> all_options() {
  std::vector<const OptionSpec*> out;
  for (const auto& b : backends())
    for (const auto& o : b.options) out.push_back(&o);
  return out;
}

const OptionSpec* find_option(const std::string& key) {
  for (const auto& b : backends())
    for (const auto& o : b.options)
      if (o.key() == key) return &o;
  return nullptr;
}

}  // namespace ncclsmoke::transports
