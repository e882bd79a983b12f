// The mpi transport's run-time view of Open MPI (transports/mpi/mpi_lib.h) against the linked
// one: this program links libmpi (the binary does not), so every function MpiLib resolves must be
// the linked function and every predefined handle the value of mpi.h's macro. A handle resolved to
// the wrong object would pass MPI calls a wrong communicator, datatype or op.
#include "transports/mpi/mpi_lib.h"

#include <gtest/gtest.h>

namespace ncclsmoke::transports::mpi_lib {
namespace {

TEST(MpiLib, LoadsTheLinkedOpenMpiAndResolvesEveryFunction) {
  std::string why;
  auto lib = MpiLib::load(why);
  ASSERT_TRUE(lib) << why;
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(lib->path, "libmpi.so.40");
#define NCCLSMOKE_EXPECT_LINKED(fn) EXPECT_EQ(lib->fn, &::fn) << #fn;
  NCCLSMOKE_MPI_FUNCTIONS(NCCLSMOKE_EXPECT_LINKED)
#undef NCCLSMOKE_EXPECT_LINKED
}

TEST(MpiLib, PredefinedHandlesAreTheMacrosValues) {
  std::string why;
  auto lib = MpiLib::load(why);
  ASSERT_TRUE(lib) << why;
  EXPECT_EQ(lib->comm_world, MPI_COMM_WORLD);
  EXPECT_EQ(lib->comm_null, MPI_COMM_NULL);
  EXPECT_EQ(lib->group_null, MPI_GROUP_NULL);
  EXPECT_EQ(lib->request_null, MPI_REQUEST_NULL);
  EXPECT_EQ(lib->op_null, MPI_OP_NULL);
  EXPECT_EQ(lib->op_sum, MPI_SUM);
  EXPECT_EQ(lib->type_char, MPI_CHAR);
  EXPECT_EQ(lib->type_float, MPI_FLOAT);
  EXPECT_EQ(lib->type_uint16, MPI_UINT16_T);
  EXPECT_EQ(lib->errors_return, MPI_ERRORS_RETURN);
  // Distinct objects: a copy-paste of one name for another would show here too.
  EXPECT_NE(lib->comm_world, lib->comm_null);
  EXPECT_NE(lib->op_sum, lib->op_null);
  EXPECT_NE(lib->type_float, lib->type_uint16);
}

TEST(MpiLib, TheProcessLibraryIsLoadedOnceAndCallable) {
  std::string why;
  const MpiLib* a = process_mpi_lib(why);
  ASSERT_NE(a, nullptr) << why;
  EXPECT_EQ(process_mpi_lib(why), a);
  int major = 0, minor = 0;
  EXPECT_EQ(a->MPI_Get_version(&major, &minor), MPI_SUCCESS);  // allowed before MPI_Init
  EXPECT_EQ(major, MPI_VERSION);
  EXPECT_EQ(minor, MPI_SUBVERSION);
}

}  // namespace
}  // namespace ncclsmoke::transports::mpi_lib
