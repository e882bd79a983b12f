#include "transports/mpi/mpi_lib.h"

#include <type_traits>

#include "transports/shared_library.h"

namespace ncclsmoke::transports::mpi_lib {

std::optional<MpiLib> MpiLib::load(std::string& why) {
  why.clear();
  MpiLib lib;
  void* h = shared_library::open_first({"libmpi.so.40", "libmpi.so"}, RTLD_NOW | RTLD_GLOBAL,
                                       "Open MPI (libmpi.so.40; Debian: apt-get install libopenmpi3)",
                                       lib.path, why);
  if (!h) return std::nullopt;
  std::string missing;
#define NCCLSMOKE_MPI_RESOLVE(fn) shared_library::resolve(h, #fn, lib.path, lib.fn, missing);
  NCCLSMOKE_MPI_FUNCTIONS(NCCLSMOKE_MPI_RESOLVE)
#undef NCCLSMOKE_MPI_RESOLVE
  // A handle is the address of the object every caller uses: looked up in the global scope first
  // (libmpi is loaded RTLD_GLOBAL), since a program that also links libmpi (a test) holds the
  // object as a copy relocation in its own image, and libmpi itself then uses that copy.
  auto handle = [&](const char* object, auto& out) {
    void* p = dlsym(RTLD_DEFAULT, object);
    if (!p) p = shared_library::symbol(h, object, lib.path, missing);
    if (p) out = static_cast<std::remove_reference_t<decltype(out)>>(p);
  };
  handle("ompi_mpi_comm_world", lib.comm_world);
  handle("ompi_mpi_comm_null", lib.comm_null);
  handle("ompi_mpi_group_null", lib.group_null);
  handle("ompi_request_null", lib.request_null);
  handle("ompi_mpi_op_null", lib.op_null);
  handle("ompi_mpi_op_sum", lib.op_sum);
  handle("ompi_mpi_char", lib.type_char);
  handle("ompi_mpi_float", lib.type_float);
  handle("ompi_mpi_uint16_t", lib.type_uint16);
  handle("ompi_mpi_errors_return", lib.errors_return);
  if (!missing.empty()) {
    why = "the MPI library " + lib.path + " is not a usable Open MPI (missing symbols):" + missing;
    return std::nullopt;
  }
  return lib;
}

const MpiLib* process_mpi_lib(std::string& why) {
  return shared_library::load_once(&MpiLib::load, why);
}

}  // namespace ncclsmoke::transports::mpi_lib
