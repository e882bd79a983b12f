#pragma once
// Opening a backend's library at run time (dlopen) and resolving its entry points. NCCL, libfabric
// and Open MPI are optional on a node and costly to load (libfabric's PSM provider pins the CPU
// and sleeps in its constructor), so the binary links none of them: a backend opens its library
// the first time it runs, and a process that never runs it (`--version`, `--help`, `publish`, a
// socket-only rank) never loads it. A library that is missing makes that backend unavailable, with
// the paths tried and the loader's reasons; it never stops the binary from starting.
#include <dlfcn.h>

#include <optional>
#include <string>
#include <vector>

namespace ncclsmoke::transports::shared_library {

// Opens the first of `paths` that loads (dlopen with `flags`); sets `opened` to it. On failure
// appends "cannot load <what>; tried:\n  <path>: <dlerror>..." to `why` (on a new line when `why`
// already holds another library's reason) and returns null.
void* open_first(const std::vector<std::string>& paths, int flags, const char* what,
                 std::string& opened, std::string& why);

// The symbol `name` of `lib` as `Fn`; on failure appends "\n  <name> in <path>: <dlerror>" to
// `missing` and leaves `out` as it was.
void* symbol(void* lib, const char* name, const std::string& path, std::string& missing);
template <typename Fn>
void resolve(void* lib, const char* name, const std::string& path, Fn& out, std::string& missing) {
  if (void* sym = symbol(lib, name, path, missing)) out = reinterpret_cast<Fn>(sym);
}

// The process's copy of a library: `load(why)` runs on the first call (thread-safe) and its
// result, with its reason, is what every later call gets. A library stays loaded for the life of
// the process (unloading one whose threads may still run is unsafe).
template <typename Lib>
const Lib* load_once(std::optional<Lib> (*load)(std::string&), std::string& why) {
  struct Loaded {
    std::optional<Lib> lib;
    std::string why;
  };
  static const Loaded loaded = [load] {
    Loaded l;
    l.lib = load(l.why);
    return l;
  }();
  why = loaded.why;
  return loaded.lib ? &*loaded.lib : nullptr;
}

}  // namespace ncclsmoke::transports::shared_library
