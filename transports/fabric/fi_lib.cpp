#include "transports/fabric/fi_lib.h"

#include <cstdlib>
#include <mutex>
#include <optional>

#include "transports/shared_library.h"

namespace ncclsmoke::transports::fabric {
namespace {

struct Loaded {
  std::optional<FiLib> lib;
  std::string why;
};

Loaded load() {
  Loaded out;
  FiLib lib;
  // RTLD_GLOBAL: providers that libfabric itself dlopens (its plugin folder) resolve libfabric's
  // own symbols through the global scope.
  void* h = shared_library::open_first({"libfabric.so.1"}, RTLD_NOW | RTLD_GLOBAL,
                                       "libfabric (libfabric.so.1; Debian: apt-get install libfabric1)",
                                       lib.path, out.why);
  if (!h) {
    if (!out.why.empty() && out.why.back() == '\n') out.why.pop_back();
    return out;
  }
  std::string missing;
  shared_library::resolve(h, "fi_getinfo", lib.path, lib.getinfo, missing);
  shared_library::resolve(h, "fi_freeinfo", lib.path, lib.freeinfo, missing);
  shared_library::resolve(h, "fi_dupinfo", lib.path, lib.dupinfo, missing);
  shared_library::resolve(h, "fi_fabric", lib.path, lib.fabric, missing);
  shared_library::resolve(h, "fi_strerror", lib.path, lib.strerror, missing);
  shared_library::resolve(h, "fi_version", lib.path, lib.version, missing);
  if (!missing.empty()) {
    out.why = "libfabric (" + lib.path + ") lacks entry points:" + missing;
    return out;
  }
  out.lib = std::move(lib);
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();  // once per process; later calls see the same result
  return l;
}

}  // namespace

const FiLib* fi_lib(std::string& why) {
  const Loaded& l = loaded();
  why = l.why;
  return l.lib ? &*l.lib : nullptr;
}

const FiLib& loaded_fi_lib() {
  const Loaded& l = loaded();
  if (!l.lib) std::abort();  // a caller holding libfabric's objects means it loaded
  return *l.lib;
}

}  // namespace ncclsmoke::transports::fabric
