#include "transports/nccl/nccl_api.h"

#include "transports/shared_library.h"

namespace ncclsmoke::transports::nccl {

ncclConfig_t make_config() {
  ncclConfig_t c{};
  c.size = sizeof(ncclConfig_t);
  c.magic = 0xcafebeef;
  c.version = kHeaderNcclVersion;
  c.blocking = kConfigUndefInt;
  c.cgaClusterSize = kConfigUndefInt;
  c.minCTAs = kConfigUndefInt;
  c.maxCTAs = kConfigUndefInt;
  c.netName = nullptr;
  c.splitShare = kConfigUndefInt;
  c.trafficClass = kConfigUndefInt;
  c.commName = nullptr;
  c.collnetEnable = kConfigUndefInt;
  c.CTAPolicy = kConfigUndefInt;
  c.shrinkShare = kConfigUndefInt;
  c.nvlsCTAs = kConfigUndefInt;
  c.nChannelsPerNetPeer = kConfigUndefInt;
  c.nvlinkCentricSched = kConfigUndefInt;
  return c;
}

std::string nccl_version_string(int code) {
  int major, minor, patch;
  if (code >= 10000) {
    major = code / 10000; minor = code / 100 % 100; patch = code % 100;
  } else {
    major = code / 1000; minor = code / 100 % 10; patch = code % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

namespace {

constexpr const char* kCudaLibDir = "/usr/local/cuda/lib64/";

std::vector<std::string> candidates(const std::string& given, std::initializer_list<const char*> names) {
  if (!given.empty()) return {given};
  std::vector<std::string> out;
  for (const char* n : names) out.emplace_back(n);
  for (const char* n : names) out.push_back(std::string(kCudaLibDir) + n);
  return out;
}

}  // namespace

std::vector<std::string> NcclApi::cudart_candidates(const std::string& given) {
  return candidates(given, {"libcudart.so.13", "libcudart.so.12", "libcudart.so"});
}

std::vector<std::string> NcclApi::nccl_candidates(const std::string& given) {
  return candidates(given, {"libnccl.so.2", "libnccl.so"});
}

std::optional<NcclApi> NcclApi::load(const std::string& cudart_path, const std::string& nccl_path,
                                     std::string& why) {
  why.clear();
  NcclApi api;
  void* cudart = shared_library::open_first(cudart_candidates(cudart_path), RTLD_NOW | RTLD_LOCAL,
                                            "the CUDA runtime (libcudart)", api.cudart_path, why);
  void* nccl = shared_library::open_first(nccl_candidates(nccl_path), RTLD_NOW | RTLD_LOCAL,
                                          "NCCL (libnccl)", api.nccl_path, why);
  if (!cudart || !nccl) {
    return std::nullopt;
  }
  std::string missing;
#define NCCLSMOKE_RESOLVE(lib, path, fn) shared_library::resolve(lib, #fn, path, api.fn, missing)
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaGetDeviceCount);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaSetDevice);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaGetErrorString);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaMalloc);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaFree);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaMemcpy);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaStreamCreateWithFlags);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaStreamQuery);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaDeviceSynchronize);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaStreamDestroy);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaEventCreate);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaEventRecord);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaEventQuery);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaEventElapsedTime);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaEventDestroy);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaDeviceGetPCIBusId);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaRuntimeGetVersion);
  NCCLSMOKE_RESOLVE(cudart, api.cudart_path, cudaDriverGetVersion);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclGetVersion);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclGetUniqueId);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclCommInitRankConfig);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclCommGetAsyncError);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclCommAbort);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclCommDestroy);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclCommFinalize);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclAllReduce);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclGetErrorString);
  NCCLSMOKE_RESOLVE(nccl, api.nccl_path, ncclGetLastError);
#undef NCCLSMOKE_RESOLVE
  if (!missing.empty()) {
    why = "missing entry points (library too old?):" + missing;
    return std::nullopt;
  }
  return api;
}

std::string NcclApi::cuda_error(cudaError_t e) const {
  const char* s = cudaGetErrorString ? cudaGetErrorString(e) : nullptr;
  return std::string(s ? s : "unknown CUDA error") + " (cudaError " + std::to_string(int(e)) + ")";
}

std::string NcclApi::nccl_error(ncclResult_t r) const {
  const char* s = ncclGetErrorString ? ncclGetErrorString(r) : nullptr;
  return std::string(s ? s : "unknown NCCL error") + " (ncclResult " + std::to_string(int(r)) + ")";
}

}  // namespace ncclsmoke::transports::nccl
