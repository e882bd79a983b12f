#include "node/gpu_health.h"

#include <dlfcn.h>

#include <cstring>

namespace ncclsmoke::node {

namespace {

// NVML's API, as published: nvmlReturn_t is an int enum, nvmlDevice_t an opaque pointer.
using Ret = int;
using Device = void*;
constexpr Ret kSuccess = 0;
constexpr Ret kInsufficientSize = 7;
constexpr int kUncorrected = 1;      // nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;      // nvmlEccCounterType_t NVML_VOLATILE_ECC
constexpr int kAggregateEcc = 1;     // NVML_AGGREGATE_ECC
constexpr int kDoubleBitEcc = 1;     // nvmlPageRetirementCause_t ..._DOUBLE_BIT_ECC_ERROR

// nvmlPciInfo_t (nvml.h, the _v3 query): the legacy 16-byte bus id, five unsigned ints, then the
// 32-byte bus id. Read into a larger zeroed buffer so a longer struct cannot overrun it.
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
  char spare[256];
};

struct Nvml {
  void* lib = nullptr;
  Ret (*init)() = nullptr;
  Ret (*shutdown)() = nullptr;
  const char* (*error_string)(Ret) = nullptr;
  Ret (*driver_version)(char*, unsigned) = nullptr;
  Ret (*count)(unsigned*) = nullptr;
  Ret (*handle)(unsigned, Device*) = nullptr;
  Ret (*uuid)(Device, char*, unsigned) = nullptr;
  Ret (*name)(Device, char*, unsigned) = nullptr;
  Ret (*pci)(Device, PciInfo*) = nullptr;
  Ret (*ecc)(Device, int, int, unsigned long long*) = nullptr;
  Ret (*remapped)(Device, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  Ret (*retired)(Device, int, unsigned*, unsigned long long*) = nullptr;
  Ret (*retired_pending)(Device, int*) = nullptr;
  Ret (*width)(Device, unsigned*) = nullptr;
  Ret (*width_max)(Device, unsigned*) = nullptr;
  Ret (*gen)(Device, unsigned*) = nullptr;
  Ret (*gen_max)(Device, unsigned*) = nullptr;
  Ret (*clock_reasons)(Device, unsigned long long*) = nullptr;
};

template <typename Fn>
void bind(void* lib, const char* symbol, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, symbol));
}

std::string error_text(const Nvml& n, Ret rc) {
  const char* s = n.error_string ? n.error_string(rc) : nullptr;
  return s && *s ? std::string(s) : "NVML error " + std::to_string(rc);
}

// A text query into a bounded buffer; "" when it fails.
template <typename Fn>
std::string text_of(Fn fn, Device d) {
  if (!fn) return {};
  char buf[96] = {};
  if (fn(d, buf, sizeof buf - 1) != kSuccess) return {};
  return std::string(buf, strnlen(buf, sizeof buf - 1));
}

template <typename Fn>
int uint_of(Fn fn, Device d) {
  unsigned v = 0;
  return fn && fn(d, &v) == kSuccess ? static_cast<int>(v) : -1;
}

facts::GpuFacts read_gpu(const Nvml& n, unsigned index) {
  facts::GpuFacts g;
  g.index = static_cast<int>(index);
  Device d = nullptr;
  if (const Ret rc = n.handle(index, &d); rc != kSuccess || !d) {
    g.error = error_text(n, rc);
    return g;
  }
  g.uuid = text_of(n.uuid, d);
  g.name = text_of(n.name, d);
  if (n.pci) {
    PciInfo info{};
    if (n.pci(d, &info) == kSuccess)
      g.pci_bus_id.assign(info.bus_id, strnlen(info.bus_id, sizeof info.bus_id));
  }
  unsigned long long count = 0;
  if (n.ecc && n.ecc(d, kUncorrected, kVolatileEcc, &count) == kSuccess)
    g.ecc_uncorrected_volatile = static_cast<long long>(count);
  if (n.ecc && n.ecc(d, kUncorrected, kAggregateEcc, &count) == kSuccess)
    g.ecc_uncorrected_aggregate = static_cast<long long>(count);
  unsigned corrected = 0, uncorrectable = 0, pending = 0, failed = 0;
  if (n.remapped && n.remapped(d, &corrected, &uncorrectable, &pending, &failed) == kSuccess) {
    g.remapped_rows_uncorrectable = static_cast<int>(uncorrectable);
    g.remap_pending = pending ? 1 : 0;
    g.remap_failed = failed ? 1 : 0;
  }
  if (n.retired) {
    // A count of 0 and no buffer asks for the count: NVML answers it, with "insufficient size"
    // when there are pages to list.
    unsigned pages = 0;
    const Ret rc = n.retired(d, kDoubleBitEcc, &pages, nullptr);
    if (rc == kSuccess || rc == kInsufficientSize) g.retired_pages_dbe = pages;
  }
  int state = 0;
  if (n.retired_pending && n.retired_pending(d, &state) == kSuccess)
    g.retired_pages_pending = state ? 1 : 0;
  g.pcie_width = uint_of(n.width, d);
  g.pcie_width_max = uint_of(n.width_max, d);
  g.pcie_gen = uint_of(n.gen, d);
  g.pcie_gen_max = uint_of(n.gen_max, d);
  unsigned long long reasons = 0;
  if (n.clock_reasons && n.clock_reasons(d, &reasons) == kSuccess)
    g.clock_event_reasons = static_cast<long long>(reasons);
  return g;
}

}  // namespace

facts::GpuHealthFacts read_gpu_health(const std::string& library) {
  facts::GpuHealthFacts out;
  out.library = library;
  Nvml n;
  n.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) {
    const char* e = dlerror();
    out.init_error = -1;
    out.why_not = "cannot load " + library + ": " + (e ? e : "dlopen failed");
    return out;
  }
  bind(n.lib, "nvmlInit_v2", n.init);
  bind(n.lib, "nvmlShutdown", n.shutdown);
  bind(n.lib, "nvmlErrorString", n.error_string);
  bind(n.lib, "nvmlSystemGetDriverVersion", n.driver_version);
  bind(n.lib, "nvmlDeviceGetCount_v2", n.count);
  bind(n.lib, "nvmlDeviceGetHandleByIndex_v2", n.handle);
  bind(n.lib, "nvmlDeviceGetUUID", n.uuid);
  bind(n.lib, "nvmlDeviceGetName", n.name);
  bind(n.lib, "nvmlDeviceGetPciInfo_v3", n.pci);
  bind(n.lib, "nvmlDeviceGetTotalEccErrors", n.ecc);
  bind(n.lib, "nvmlDeviceGetRemappedRows", n.remapped);
  bind(n.lib, "nvmlDeviceGetRetiredPages", n.retired);
  bind(n.lib, "nvmlDeviceGetRetiredPagesPendingStatus", n.retired_pending);
  bind(n.lib, "nvmlDeviceGetCurrPcieLinkWidth", n.width);
  bind(n.lib, "nvmlDeviceGetMaxPcieLinkWidth", n.width_max);
  bind(n.lib, "nvmlDeviceGetCurrPcieLinkGeneration", n.gen);
  bind(n.lib, "nvmlDeviceGetMaxPcieLinkGeneration", n.gen_max);
  // The clocks' reasons were "throttle reasons" before driver 535, the same bit mask.
  bind(n.lib, "nvmlDeviceGetCurrentClocksEventReasons", n.clock_reasons);
  if (!n.clock_reasons) bind(n.lib, "nvmlDeviceGetCurrentClocksThrottleReasons", n.clock_reasons);
  // The library stays loaded: NVML's own threads may outlive nvmlShutdown on some drivers.
  if (!n.init || !n.shutdown || !n.count || !n.handle) {
    out.init_error = -1;
    out.why_not = library + " lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or "
                            "nvmlDeviceGetHandleByIndex_v2: not an NVML this reader knows";
    return out;
  }
  if (const Ret rc = n.init(); rc != kSuccess) {
    out.init_error = rc;
    out.why_not = "nvmlInit: " + error_text(n, rc);
    return out;
  }
  if (n.driver_version) {
    char buf[96] = {};
    if (n.driver_version(buf, sizeof buf - 1) == kSuccess)
      out.driver_version.assign(buf, strnlen(buf, sizeof buf - 1));
  }
  unsigned count = 0;
  if (const Ret rc = n.count(&count); rc != kSuccess) {
    out.why_not = "nvmlDeviceGetCount: " + error_text(n, rc);
    n.shutdown();
    return out;
  }
  out.read = true;
  for (unsigned i = 0; i < count && i < kMaxGpus; ++i) out.gpus.push_back(read_gpu(n, i));
  n.shutdown();
  return out;
}

}  // namespace ncclsmoke::node
