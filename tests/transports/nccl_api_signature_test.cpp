// Checks our run-time-loaded NCCL/CUDA declarations (transports/nccl/nccl_api.h) against the real
// headers, at compile time: each function-pointer type, mapped type by type onto the real types,
// must be exactly decltype(&::realFunction); enum values and ncclConfig_t's layout must match.
// Built only when /usr/local/cuda/include/nccl.h exists. The headers may be any NCCL >= 2.28 (the
// build machines have 2.28.9, the GPU machine 2.28.3). The runtime tests load the libraries the
// way the transport does (NcclApi::load with no pinned path: the dynamic loader, then
// /usr/local/cuda/lib64), else from $CUDA_HOME/lib64.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <type_traits>

#include "transports/nccl/nccl_api.h"

namespace ours = ncclsmoke::transports::nccl;

namespace {

// ToReal<T>: our type -> the real header's type; identity for everything else (int, size_t,
// char, void, and the opaque handles, which already use the real struct tags).
template <typename T> struct ToReal { using type = T; };
template <typename T> using to_real_t = typename ToReal<T>::type;
template <typename T> struct ToReal<T*> { using type = to_real_t<T>*; };
template <typename T> struct ToReal<const T> { using type = const to_real_t<T>; };
template <typename R, typename... A> struct ToReal<R (*)(A...)> {
  using type = to_real_t<R> (*)(to_real_t<A>...);
};
template <> struct ToReal<ours::cudaError_t> { using type = ::cudaError_t; };
template <> struct ToReal<ours::cudaMemcpyKind> { using type = ::cudaMemcpyKind; };
template <> struct ToReal<ours::ncclResult_t> { using type = ::ncclResult_t; };
template <> struct ToReal<ours::ncclDataType_t> { using type = ::ncclDataType_t; };
template <> struct ToReal<ours::ncclRedOp_t> { using type = ::ncclRedOp_t; };
template <> struct ToReal<ours::ncclUniqueId> { using type = ::ncclUniqueId; };
template <> struct ToReal<ours::ncclConfig_t> { using type = ::ncclConfig_t; };

// A mapped type is only a faithful stand-in when it is passed the same way: same size and
// alignment (enums with an int underlying type, structs of the same layout).
template <typename Ours>
constexpr bool same_abi = sizeof(Ours) == sizeof(to_real_t<Ours>) &&
                          alignof(Ours) == alignof(to_real_t<Ours>);
static_assert(same_abi<ours::cudaError_t>);
static_assert(same_abi<ours::cudaMemcpyKind>);
static_assert(same_abi<ours::ncclResult_t>);
static_assert(same_abi<ours::ncclDataType_t>);
static_assert(same_abi<ours::ncclRedOp_t>);
static_assert(same_abi<ours::ncclUniqueId>);
static_assert(same_abi<ours::ncclConfig_t>);
static_assert(std::is_same_v<ours::ncclComm_t, ::ncclComm_t>);
static_assert(std::is_same_v<ours::cudaStream_t, ::cudaStream_t>);
static_assert(std::is_same_v<ours::cudaEvent_t, ::cudaEvent_t>);

#define CHECK_SIG(fn) \
  static_assert(std::is_same_v<to_real_t<ours::fn##_fn>, decltype(&::fn)>, #fn " signature differs")
CHECK_SIG(cudaGetDeviceCount);
CHECK_SIG(cudaSetDevice);
CHECK_SIG(cudaGetErrorString);
CHECK_SIG(cudaFree);
CHECK_SIG(cudaMemcpy);
CHECK_SIG(cudaStreamCreateWithFlags);
CHECK_SIG(cudaStreamQuery);
CHECK_SIG(cudaDeviceSynchronize);
CHECK_SIG(cudaStreamDestroy);
CHECK_SIG(cudaEventRecord);
CHECK_SIG(cudaEventQuery);
CHECK_SIG(cudaEventElapsedTime);
CHECK_SIG(cudaEventDestroy);
CHECK_SIG(cudaDeviceGetPCIBusId);
CHECK_SIG(cudaRuntimeGetVersion);
CHECK_SIG(cudaDriverGetVersion);
CHECK_SIG(ncclGetVersion);
CHECK_SIG(ncclGetUniqueId);
CHECK_SIG(ncclCommInitRankConfig);
CHECK_SIG(ncclCommGetAsyncError);
CHECK_SIG(ncclCommAbort);
CHECK_SIG(ncclCommDestroy);
CHECK_SIG(ncclCommFinalize);
CHECK_SIG(ncclAllReduce);
CHECK_SIG(ncclGetErrorString);
CHECK_SIG(ncclGetLastError);
#undef CHECK_SIG

// cuda_runtime.h adds C++ template overloads of some names (cudaMalloc(T**, size_t),
// cudaEventCreate(cudaEvent_t*, unsigned)), so &::name alone is ambiguous there: converting it
// to our exact (mapped) type compiles only when a declaration has exactly that type.
template <typename F> constexpr bool has_exact(F f) { return f != nullptr; }
#define CHECK_SIG_OVERLOADED(fn) \
  static_assert(has_exact<to_real_t<ours::fn##_fn>>(&::fn), #fn " signature differs")
CHECK_SIG_OVERLOADED(cudaMalloc);
CHECK_SIG_OVERLOADED(cudaEventCreate);
#undef CHECK_SIG_OVERLOADED

// The mapping itself must not be vacuous: a wrong signature is rejected.
static_assert(!std::is_same_v<to_real_t<ours::cudaFree_fn>, decltype(&::cudaSetDevice)>);
static_assert(!std::is_same_v<to_real_t<ncclResult_t (*)(int)>, decltype(&::ncclGetVersion)>);

// Enum values.
static_assert(int(ours::cudaSuccess) == int(::cudaSuccess));
static_assert(int(ours::cudaErrorInsufficientDriver) == int(::cudaErrorInsufficientDriver));
static_assert(int(ours::cudaErrorNoDevice) == int(::cudaErrorNoDevice));
static_assert(int(ours::cudaErrorNotReady) == int(::cudaErrorNotReady));
static_assert(int(ours::cudaMemcpyHostToDevice) == int(::cudaMemcpyHostToDevice));
static_assert(int(ours::cudaMemcpyDeviceToHost) == int(::cudaMemcpyDeviceToHost));
static_assert(ours::kCudaStreamNonBlocking == cudaStreamNonBlocking);
static_assert(int(ours::ncclSuccess) == int(::ncclSuccess));
static_assert(int(ours::ncclUnhandledCudaError) == int(::ncclUnhandledCudaError));
static_assert(int(ours::ncclSystemError) == int(::ncclSystemError));
static_assert(int(ours::ncclInternalError) == int(::ncclInternalError));
static_assert(int(ours::ncclInvalidArgument) == int(::ncclInvalidArgument));
static_assert(int(ours::ncclInvalidUsage) == int(::ncclInvalidUsage));
static_assert(int(ours::ncclRemoteError) == int(::ncclRemoteError));
static_assert(int(ours::ncclInProgress) == int(::ncclInProgress));
static_assert(int(ours::ncclFloat32) == int(::ncclFloat32));
static_assert(int(ours::ncclBfloat16) == int(::ncclBfloat16));
static_assert(int(ours::ncclSum) == int(::ncclSum));
static_assert(ours::kConfigUndefInt == NCCL_CONFIG_UNDEF_INT);
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0), "nccl.h older than 2.28");
static_assert(ours::kHeaderNcclVersion >= NCCL_VERSION(2, 28, 0));
static_assert(ours::nccl_version_code(2, 28, 9) == NCCL_VERSION(2, 28, 9));
static_assert(ours::nccl_version_code(2, 8, 4) == NCCL_VERSION(2, 8, 4));
static_assert(sizeof(ours::ncclUniqueId) == NCCL_UNIQUE_ID_BYTES);

// ncclConfig_t layout, field by field.
#define CHECK_FIELD(f)                                                                  \
  static_assert(offsetof(ours::ncclConfig_t, f) == offsetof(::ncclConfig_t, f), #f);   \
  static_assert(sizeof(ours::ncclConfig_t::f) == sizeof(::ncclConfig_t::f), #f)
CHECK_FIELD(size);
CHECK_FIELD(magic);
CHECK_FIELD(version);
CHECK_FIELD(blocking);
CHECK_FIELD(cgaClusterSize);
CHECK_FIELD(minCTAs);
CHECK_FIELD(maxCTAs);
CHECK_FIELD(netName);
CHECK_FIELD(splitShare);
CHECK_FIELD(trafficClass);
CHECK_FIELD(commName);
CHECK_FIELD(collnetEnable);
CHECK_FIELD(CTAPolicy);
CHECK_FIELD(shrinkShare);
CHECK_FIELD(nvlsCTAs);
CHECK_FIELD(nChannelsPerNetPeer);
CHECK_FIELD(nvlinkCentricSched);
#undef CHECK_FIELD
static_assert(sizeof(ours::ncclConfig_t) == sizeof(::ncclConfig_t));

}  // namespace

// make_config() is NCCL_CONFIG_INITIALIZER, byte for byte where it matters (every field).
TEST(NcclApiSignature, MakeConfigEqualsInitializer) {
  ::ncclConfig_t real = NCCL_CONFIG_INITIALIZER;
  ours::ncclConfig_t mine = ours::make_config();
  EXPECT_EQ(mine.size, real.size);
  EXPECT_EQ(mine.magic, real.magic);
  // version: the struct version we were written against (2.28.9), not this header's.
  EXPECT_EQ(mine.version, unsigned(ours::kHeaderNcclVersion));
  EXPECT_GE(real.version, unsigned(NCCL_VERSION(2, 28, 0)));
  EXPECT_EQ(mine.blocking, real.blocking);
  EXPECT_EQ(mine.cgaClusterSize, real.cgaClusterSize);
  EXPECT_EQ(mine.minCTAs, real.minCTAs);
  EXPECT_EQ(mine.maxCTAs, real.maxCTAs);
  EXPECT_EQ(mine.netName, real.netName);
  EXPECT_EQ(mine.splitShare, real.splitShare);
  EXPECT_EQ(mine.trafficClass, real.trafficClass);
  EXPECT_EQ(mine.commName, real.commName);
  EXPECT_EQ(mine.collnetEnable, real.collnetEnable);
  EXPECT_EQ(mine.CTAPolicy, real.CTAPolicy);
  EXPECT_EQ(mine.shrinkShare, real.shrinkShare);
  EXPECT_EQ(mine.nvlsCTAs, real.nvlsCTAs);
  EXPECT_EQ(mine.nChannelsPerNetPeer, real.nChannelsPerNetPeer);
  EXPECT_EQ(mine.nvlinkCentricSched, real.nvlinkCentricSched);
}

// The libraries load the way the transport finds them (else under $CUDA_HOME/lib64) and resolve
// every entry point; NCCL reports >= 2.28.
TEST(NcclApiSignature, LoadsTheWayTheTransportDoes) {
  std::string why;
  auto api = ours::NcclApi::load("", "", why);
  if (!api) {
    const char* home = std::getenv("CUDA_HOME");
    ASSERT_TRUE(home && *home) << "not loadable through the transport's search, CUDA_HOME unset:\n" << why;
    std::string lib = std::string(home) + "/lib64/";
    std::string why_home;
    api = ours::NcclApi::load(lib + "libcudart.so", lib + "libnccl.so.2", why_home);
    ASSERT_TRUE(api.has_value()) << why << "\n" << why_home;
  }
  std::cerr << "loaded " << api->cudart_path << " and " << api->nccl_path << "\n";
  int version = 0;
  ASSERT_EQ(api->ncclGetVersion(&version), ours::ncclSuccess);
  EXPECT_GE(version, 22800);
  EXPECT_EQ(ours::nccl_version_string(version).rfind("2.", 0), 0u) << version;
  int rt = 0;
  EXPECT_EQ(api->cudaRuntimeGetVersion(&rt), ours::cudaSuccess);
  EXPECT_GE(rt, 12000);
  // Error strings come from the loaded libraries, through our enum types.
  EXPECT_STRNE(api->ncclGetErrorString(ours::ncclInProgress), "");
  EXPECT_NE(api->nccl_error(ours::ncclSystemError).find("ncclResult 2"), std::string::npos);
  EXPECT_NE(api->cuda_error(ours::cudaErrorNoDevice).find("cudaError 100"), std::string::npos);
}

TEST(NcclApiSignature, BogusPathIsNamedInWhy) {
  std::string why;
  auto api = ours::NcclApi::load("", "/nonexistent/libnccl.so", why);
  EXPECT_FALSE(api.has_value());
  EXPECT_NE(why.find("/nonexistent/libnccl.so"), std::string::npos) << why;
  EXPECT_NE(why.find("No such file"), std::string::npos) << why;  // dlerror()'s text
  // A pinned path is the only one tried: no silent fallback to the system NCCL.
  EXPECT_EQ(why.find("libnccl.so.2"), std::string::npos) << why;

  auto both = ours::NcclApi::load("/nonexistent/libcudart.so.99", "/nonexistent/libnccl.so", why);
  EXPECT_FALSE(both.has_value());
  EXPECT_NE(why.find("/nonexistent/libcudart.so.99"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/libnccl.so"), std::string::npos) << why;
}

TEST(NcclApiSignature, DefaultCandidates) {
  auto c = ours::NcclApi::cudart_candidates("");
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c[0], "libcudart.so.13");
  EXPECT_EQ(c[1], "libcudart.so.12");
  EXPECT_EQ(ours::NcclApi::nccl_candidates("")[0], "libnccl.so.2");
  EXPECT_EQ(ours::NcclApi::nccl_candidates("/x/libnccl.so"), std::vector<std::string>{"/x/libnccl.so"});
}
