// The fabric transport's run-time view of libfabric (transports/fabric/fi_lib.h) against the
// linked one: this program links libfabric (the binary does not), so each entry point fi_lib()
// resolves must be the linked function, and the library answers as the headers expect.
#include "transports/fabric/fi_lib.h"

#include <gtest/gtest.h>

namespace ncclsmoke::transports::fabric {
namespace {

TEST(FiLib, ResolvesTheLinkedLibfabricOnce) {
  std::string why;
  const FiLib* lib = fi_lib(why);
  ASSERT_NE(lib, nullptr) << why;
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(fi_lib(why), lib);
  EXPECT_EQ(&loaded_fi_lib(), lib);
  EXPECT_EQ(lib->getinfo, &::fi_getinfo);
  EXPECT_EQ(lib->freeinfo, &::fi_freeinfo);
  EXPECT_EQ(lib->dupinfo, &::fi_dupinfo);
  EXPECT_EQ(lib->fabric, &::fi_fabric);
  EXPECT_EQ(lib->strerror, &::fi_strerror);
  EXPECT_EQ(lib->version, &::fi_version);
}

TEST(FiLib, AnswersLikeTheHeaders) {
  std::string why;
  const FiLib* lib = fi_lib(why);
  ASSERT_NE(lib, nullptr) << why;
  EXPECT_GE(FI_MAJOR(lib->version()), 1u);
  EXPECT_STRNE(lib->strerror(FI_ENODATA), "");
  fi_info* hints = lib->dupinfo(nullptr);  // what fi_allocinfo() does
  ASSERT_NE(hints, nullptr);
  ASSERT_NE(hints->ep_attr, nullptr);
  ASSERT_NE(hints->domain_attr, nullptr);
  lib->freeinfo(hints);
}

}  // namespace
}  // namespace ncclsmoke::transports::fabric
