#pragma once
// The CUDA runtime and NCCL, loaded at run time (dlopen), so one binary runs on CPU and GPU
// nodes: a node without a GPU or without the libraries reports why the NCCL transport is
// unavailable instead of failing to start. Only the entry points the transport uses are declared,
// with minimal copies of the types they take. The copies follow NCCL 2.28's nccl.h and CUDA's
// cuda_runtime_api.h; tests/transports/nccl_api_signature_test.cpp checks every pointer type,
// enum value and the ncclConfig_t layout against the real headers at compile time when they exist
// at build time (/usr/local/cuda/include).
//
// Opaque handles use the real headers' struct tags (ncclComm, CUstream_st, CUevent_st), so those
// pointer types are the real ones; enums and structs live in this namespace.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

struct ncclComm;
struct CUstream_st;
struct CUevent_st;

namespace ncclsmoke::transports::nccl {

// ---- CUDA runtime ----
enum cudaError_t : int { cudaSuccess = 0, cudaErrorInsufficientDriver = 35, cudaErrorNoDevice = 100,
                         cudaErrorNotReady = 600 };
enum cudaMemcpyKind : int { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
constexpr unsigned int kCudaStreamNonBlocking = 0x01;  // cudaStreamNonBlocking (a macro there)

// ---- NCCL ----
using ncclComm_t = ncclComm*;
struct ncclUniqueId { char internal[128]; };
enum ncclResult_t : int { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2,
                          ncclInternalError = 3, ncclInvalidArgument = 4, ncclInvalidUsage = 5,
                          ncclRemoteError = 6, ncclInProgress = 7 };
enum ncclDataType_t : int { ncclFloat32 = 7, ncclBfloat16 = 9 };
enum ncclRedOp_t : int { ncclSum = 0 };

// NCCL 2.28's ncclConfig_v22800. NCCL reads `size` and `version` first, so an older library
// ignores fields it does not know; make_config() is NCCL_CONFIG_INITIALIZER.
struct ncclConfig_t {
  std::size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
};
constexpr int kConfigUndefInt = -2147483647 - 1;  // NCCL_CONFIG_UNDEF_INT (INT_MIN)
constexpr int kHeaderNcclVersion = 22809;         // the nccl.h this layout was taken from
ncclConfig_t make_config();

// NCCL_VERSION(X,Y,Z): 2.8.x and older used X*1000+Y*100+Z, later X*10000+Y*100+Z.
constexpr int nccl_version_code(int x, int y, int z) {
  return (x <= 2 && y <= 8) ? x * 1000 + y * 100 + z : x * 10000 + y * 100 + z;
}
std::string nccl_version_string(int code);  // 22803 -> "2.28.3"

// Function-pointer types, one per entry point (the names NCCL and CUDA export).
using cudaGetDeviceCount_fn = cudaError_t (*)(int*);
using cudaSetDevice_fn = cudaError_t (*)(int);
using cudaGetErrorString_fn = const char* (*)(cudaError_t);
using cudaMalloc_fn = cudaError_t (*)(void**, std::size_t);
using cudaFree_fn = cudaError_t (*)(void*);
using cudaMemcpy_fn = cudaError_t (*)(void*, const void*, std::size_t, cudaMemcpyKind);
using cudaStreamCreateWithFlags_fn = cudaError_t (*)(cudaStream_t*, unsigned int);
using cudaStreamQuery_fn = cudaError_t (*)(cudaStream_t);
using cudaDeviceSynchronize_fn = cudaError_t (*)();
using cudaStreamDestroy_fn = cudaError_t (*)(cudaStream_t);
using cudaEventCreate_fn = cudaError_t (*)(cudaEvent_t*);
using cudaEventRecord_fn = cudaError_t (*)(cudaEvent_t, cudaStream_t);
using cudaEventQuery_fn = cudaError_t (*)(cudaEvent_t);
using cudaEventElapsedTime_fn = cudaError_t (*)(float*, cudaEvent_t, cudaEvent_t);
using cudaEventDestroy_fn = cudaError_t (*)(cudaEvent_t);
using cudaDeviceGetPCIBusId_fn = cudaError_t (*)(char*, int, int);
using cudaRuntimeGetVersion_fn = cudaError_t (*)(int*);
using cudaDriverGetVersion_fn = cudaError_t (*)(int*);

using ncclGetVersion_fn = ncclResult_t (*)(int*);
using ncclGetUniqueId_fn = ncclResult_t (*)(ncclUniqueId*);
using ncclCommInitRankConfig_fn = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int,
                                                   ncclConfig_t*);
using ncclCommGetAsyncError_fn = ncclResult_t (*)(ncclComm_t, ncclResult_t*);
using ncclCommAbort_fn = ncclResult_t (*)(ncclComm_t);
using ncclCommDestroy_fn = ncclResult_t (*)(ncclComm_t);
using ncclCommFinalize_fn = ncclResult_t (*)(ncclComm_t);
using ncclAllReduce_fn = ncclResult_t (*)(const void*, void*, std::size_t, ncclDataType_t,
                                          ncclRedOp_t, ncclComm_t, cudaStream_t);
using ncclGetErrorString_fn = const char* (*)(ncclResult_t);
using ncclGetLastError_fn = const char* (*)(ncclComm_t);

// The loaded entry points. Libraries stay loaded for the life of the process (unloading NCCL
// while its threads may still run is unsafe), so copies of NcclApi stay valid.
struct NcclApi {
  std::string cudart_path;  // what was opened (the path or soname that worked)
  std::string nccl_path;

  cudaGetDeviceCount_fn cudaGetDeviceCount = nullptr;
  cudaSetDevice_fn cudaSetDevice = nullptr;
  cudaGetErrorString_fn cudaGetErrorString = nullptr;
  cudaMalloc_fn cudaMalloc = nullptr;
  cudaFree_fn cudaFree = nullptr;
  cudaMemcpy_fn cudaMemcpy = nullptr;
  cudaStreamCreateWithFlags_fn cudaStreamCreateWithFlags = nullptr;
  cudaStreamQuery_fn cudaStreamQuery = nullptr;
  cudaDeviceSynchronize_fn cudaDeviceSynchronize = nullptr;
  cudaStreamDestroy_fn cudaStreamDestroy = nullptr;
  cudaEventCreate_fn cudaEventCreate = nullptr;
  cudaEventRecord_fn cudaEventRecord = nullptr;
  cudaEventQuery_fn cudaEventQuery = nullptr;
  cudaEventElapsedTime_fn cudaEventElapsedTime = nullptr;
  cudaEventDestroy_fn cudaEventDestroy = nullptr;
  cudaDeviceGetPCIBusId_fn cudaDeviceGetPCIBusId = nullptr;
  cudaRuntimeGetVersion_fn cudaRuntimeGetVersion = nullptr;
  cudaDriverGetVersion_fn cudaDriverGetVersion = nullptr;

  ncclGetVersion_fn ncclGetVersion = nullptr;
  ncclGetUniqueId_fn ncclGetUniqueId = nullptr;
  ncclCommInitRankConfig_fn ncclCommInitRankConfig = nullptr;
  ncclCommGetAsyncError_fn ncclCommGetAsyncError = nullptr;
  ncclCommAbort_fn ncclCommAbort = nullptr;
  ncclCommDestroy_fn ncclCommDestroy = nullptr;
  ncclCommFinalize_fn ncclCommFinalize = nullptr;
  ncclAllReduce_fn ncclAllReduce = nullptr;
  ncclGetErrorString_fn ncclGetErrorString = nullptr;
  ncclGetLastError_fn ncclGetLastError = nullptr;

  // Where load() looks: a given path alone (a pinned library never silently falls back), else
  // the sonames through the dynamic loader (libcudart.so.13, .so.12, libcudart.so; libnccl.so.2,
  // libnccl.so), then the same names under /usr/local/cuda/lib64.
  static std::vector<std::string> cudart_candidates(const std::string& given);
  static std::vector<std::string> nccl_candidates(const std::string& given);

  // Opens both libraries (dlopen RTLD_NOW | RTLD_LOCAL) and resolves every entry point. On
  // failure returns nullopt and `why` lists each path tried with dlerror()'s text, for both
  // libraries, and any missing symbol.
  static std::optional<NcclApi> load(const std::string& cudart_path, const std::string& nccl_path,
                                     std::string& why);

  // "cudaErrorX (35): text" / "ncclX: text" for messages; safe on any code.
  std::string cuda_error(cudaError_t e) const;
  std::string nccl_error(ncclResult_t r) const;
};

}  // namespace ncclsmoke::transports::nccl
