// A stand-in for libnvidia-ml.so.1 where no NVIDIA driver is (this machine, CI): the NVML entry
// points node/gpu_health.cpp calls, with the published signatures, answering as a scripted node
// would. Only for testing the reader and what judging makes of it; the real NVML is read on a GPU
// machine (bench/gpu/check.sh).
//   FAKE_NVML       healthy (default) | faulty | lost | mismatch | nodriver
//   FAKE_NVML_GPUS  how many GPUs (default 2)
// faulty: GPU 1 has 2 uncorrected ECC errors since the driver loaded, a row remap pending, its
// PCIe link at x8 of x16, and its clocks held down by a hardware slowdown (0x8).
// lost: GPU 1 answers "GPU is lost" (NVML_ERROR_GPU_IS_LOST, 15).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string scenario() {
  const char* s = std::getenv("FAKE_NVML");
  return s ? s : "healthy";
}
unsigned gpus() {
  const char* s = std::getenv("FAKE_NVML_GPUS");
  return s ? static_cast<unsigned>(std::atoi(s)) : 2u;
}
unsigned index_of(void* d) { return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(d) - 1); }
bool faulty(void* d) { return scenario() == "faulty" && index_of(d) == 1; }

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const std::string s = scenario();
  if (s == "mismatch") return 18;  // NVML_ERROR_LIB_RM_VERSION_MISMATCH
  if (s == "nodriver") return 9;   // NVML_ERROR_DRIVER_NOT_LOADED
  return 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 18: return "Driver/library version mismatch";
    default: return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char* v, unsigned n) {
  std::snprintf(v, n, "%s", "550.54.15");
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned* c) {
  *c = gpus();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i >= gpus()) return 2;
  if (scenario() == "lost" && i == 1) return 15;
  *d = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i) + 1);
  return 0;
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned n) {
  std::snprintf(out, n, "GPU-0000000%u-fake-uuid", index_of(d));
  return 0;
}
int nvmlDeviceGetName(void*, char* out, unsigned n) {
  std::snprintf(out, n, "%s", "NVIDIA H100 80GB HBM3");
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* d, PciInfo* p) {
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->bus_id, sizeof p->bus_id, "00000000:%02X:00.0", 0x18 + 0x10 * index_of(d));
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* c) {
  *c = (type == 1 && faulty(d)) ? (counter == 0 ? 2 : 5) : 0;
  return 0;
}
int nvmlDeviceGetRemappedRows(void* d, unsigned* corr, unsigned* unc, unsigned* pending,
                              unsigned* failed) {
  *corr = 0;
  *unc = faulty(d) ? 1 : 0;
  *pending = faulty(d) ? 1 : 0;
  *failed = 0;
  return 0;
}
// H100 retires no pages (row remapping replaced it): NVML_ERROR_NOT_SUPPORTED.
int nvmlDeviceGetRetiredPages(void*, int, unsigned*, unsigned long long*) { return 3; }
int nvmlDeviceGetRetiredPagesPendingStatus(void*, int*) { return 3; }
int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* w) {
  *w = faulty(d) ? 8 : 16;
  return 0;
}
int nvmlDeviceGetMaxPcieLinkWidth(void*, unsigned* w) {
  *w = 16;
  return 0;
}
// Idle links train down a generation to save power: current below max is normal.
int nvmlDeviceGetCurrPcieLinkGeneration(void*, unsigned* g) {
  *g = 1;
  return 0;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void*, unsigned* g) {
  *g = 5;
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* r) {
  *r = faulty(d) ? 0x8ull : 0x1ull;  // HwSlowdown; GpuIdle
  return 0;
}

}  // extern "C"
