#include "transports/fabric/fi_lib.h"

#include <cstdlib>
#include <optional>

#include "transports/shared_library.h"

namespace ncclsmoke::transports::fabric {
namespace {

std::optional<FiLib> load(std::string& why) {
  FiLib lib;
  // RTLD_GLOBAL: providers that libfabric itself dlopens (its plugin folder) resolve libfabric's
  // own symbols through the global scope.
  void* h = shared_library::open_first({"libfabric.so.1"}, RTLD_NOW | RTLD_GLOBAL,
                                       "libfabric (libfabric.so.1; Debian: apt-get install libfabric1)",
                                       lib.path, why);
  if (!h) return std::nullopt;
  std::string missing;
  shared_library::resolve(h, "fi_getinfo", lib.path, lib.getinfo, missing);
  shared_library::resolve(h, "fi_freeinfo", lib.path, lib.freeinfo, missing);
  shared_library::resolve(h, "fi_dupinfo", lib.path, lib.dupinfo, missing);
  shared_library::resolve(h, "fi_fabric", lib.path, lib.fabric, missing);
  shared_library::resolve(h, "fi_strerror", lib.path, lib.strerror, missing);
  shared_library::resolve(h, "fi_version", lib.path, lib.version, missing);
  if (!missing.empty()) {
    why = "libfabric (" + lib.path + ") lacks entry points:" + missing;
    return std::nullopt;
  }
  return lib;
}

}  // namespace

const FiLib* fi_lib(std::string& why) { return shared_library::load_once(&load, why); }

const FiLib& loaded_fi_lib() {
  std::string why;
  const FiLib* lib = fi_lib(why);
  if (!lib) std::abort();  // a caller holding libfabric's objects means it loaded
  return *lib;
}

}  // namespace ncclsmoke::transports::fabric
