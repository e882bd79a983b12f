#pragma once
// Open MPI, opened at run time by the MPI child (mpi_child.cpp), the only process of a rank that
// calls MPI: the binary does not link libmpi, so a process that never runs the mpi transport never
// loads it (and a node without libopenmpi3 runs every other transport). Under mpirun the child
// opens the node's libmpi.so.40 with RTLD_GLOBAL, as Open MPI's components (which it dlopens
// itself) need its symbols in the global scope; the abort guard's PMIx_Abort and orte_show_help,
// exported by the executable, still come first in that scope (abort_guard.cpp).
//
// Types and constants come from the build's <mpi.h>. Open MPI's predefined handles are not
// constants: MPI_COMM_WORLD, MPI_SUM, MPI_FLOAT ... are macros for the addresses of global
// objects of libmpi (OMPI_PREDEFINED_GLOBAL(MPI_Comm, ompi_mpi_comm_world) in Open MPI 4.1's
// mpi.h), so the loader resolves those objects by name; code that uses the macros would need
// libmpi linked, and does not link. tests/transports/mpi_lib_test.cpp checks each resolved handle
// against the macro's value in a program that links libmpi.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <optional>
#include <string>

namespace ncclsmoke::transports::mpi_lib {

// The MPI functions the child calls, each a member of MpiLib of the function's own type.
#define NCCLSMOKE_MPI_FUNCTIONS(X)                                                              \
  X(MPI_Init_thread) X(MPI_Finalize) X(MPI_Finalized) X(MPI_Get_version)                       \
  X(MPI_Get_library_version) X(MPI_Get_processor_name) X(MPI_Error_string) X(MPI_Error_class)  \
  X(MPI_Comm_set_errhandler) X(MPI_Comm_size) X(MPI_Comm_rank) X(MPI_Comm_dup)                 \
  X(MPI_Comm_free) X(MPI_Comm_get_attr) X(MPI_Comm_group) X(MPI_Comm_create_group)             \
  X(MPI_Group_incl) X(MPI_Group_free) X(MPI_Op_create) X(MPI_Allreduce) X(MPI_Iallreduce)      \
  X(MPI_Test) X(MPI_T_init_thread) X(MPI_T_finalize) X(MPI_T_cvar_get_num)                     \
  X(MPI_T_cvar_get_info) X(MPI_T_cvar_handle_alloc) X(MPI_T_cvar_handle_free) X(MPI_T_cvar_read)

struct MpiLib {
  std::string path;  // what was opened
#define NCCLSMOKE_MPI_MEMBER(fn) decltype(&::fn) fn = nullptr;
  NCCLSMOKE_MPI_FUNCTIONS(NCCLSMOKE_MPI_MEMBER)
#undef NCCLSMOKE_MPI_MEMBER

  // Open MPI's predefined handles (the object each mpi.h macro names).
  MPI_Comm comm_world = nullptr;        // MPI_COMM_WORLD: ompi_mpi_comm_world
  MPI_Comm comm_null = nullptr;         // MPI_COMM_NULL: ompi_mpi_comm_null
  MPI_Group group_null = nullptr;       // MPI_GROUP_NULL: ompi_mpi_group_null
  MPI_Request request_null = nullptr;   // MPI_REQUEST_NULL: ompi_request_null
  MPI_Op op_null = nullptr;             // MPI_OP_NULL: ompi_mpi_op_null
  MPI_Op op_sum = nullptr;              // MPI_SUM: ompi_mpi_op_sum
  MPI_Datatype type_char = nullptr;     // MPI_CHAR: ompi_mpi_char
  MPI_Datatype type_float = nullptr;    // MPI_FLOAT: ompi_mpi_float
  MPI_Datatype type_uint16 = nullptr;   // MPI_UINT16_T: ompi_mpi_uint16_t
  MPI_Errhandler errors_return = nullptr;  // MPI_ERRORS_RETURN: ompi_mpi_errors_return

  // Opens libmpi.so.40 (Open MPI 3 to 5's soname), else libmpi.so, and resolves every function
  // and handle. On failure returns nullopt and `why` names the paths tried with the loader's
  // reasons, or the missing symbols (another MPI than Open MPI has none of the handles).
  static std::optional<MpiLib> load(std::string& why);
};

// This process's Open MPI: MpiLib::load() on the first call (thread-safe), kept for the life of
// the process (Open MPI cannot be unloaded). Null when it could not be loaded; `why` then says
// why (the same text on every call).
const MpiLib* process_mpi_lib(std::string& why);

}  // namespace ncclsmoke::transports::mpi_lib
