#include "transports/shared_library.h"

namespace ncclsmoke::transports::shared_library {

void* open_first(const std::vector<std::string>& paths, int flags, const char* what,
                 std::string& opened, std::string& why) {
  std::string tried;
  for (const auto& p : paths) {
    dlerror();
    if (void* h = dlopen(p.c_str(), flags)) {
      opened = p;
      return h;
    }
    const char* e = dlerror();
    std::string err = e ? e : "dlopen failed";
    tried += "\n  " + (err.rfind(p, 0) == 0 ? err : p + ": " + err);  // dlerror often names it
  }
  if (!why.empty()) why += "\n";
  why += std::string("cannot load ") + what + "; tried:" + tried;
  return nullptr;
}

void* symbol(void* lib, const char* name, const std::string& path, std::string& missing) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (!sym) {
    const char* e = dlerror();
    missing += "\n  " + std::string(name) + " in " + path + ": " + (e ? e : "not found");
  }
  return sym;
}

}  // namespace ncclsmoke::transports::shared_library
