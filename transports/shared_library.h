#pragma once
// Opening a backend's library at run time (dlopen) and resolving its entry points. NCCL, libfabric
// and Open MPI are optional on a node and costly to load (libfabric's PSM provider pins the CPU
// and sleeps in its constructor), so the binary links none of them: a backend opens its library
// the first time it runs, and a process that never runs it (`--version`, `--help`, `publish`, a
// socket-only rank) never loads it. A library that is missing makes that backend unavailable, with
// the paths tried and the loader's reasons; it never stops the binary from starting.
#include <dlfcn.h>

#include <string>
#include <vector>

namespace ncclsmoke::transports::shared_library {

// Opens the first of `paths` that loads (dlopen with `flags`); sets `opened` to it. On failure
// appends "cannot load <what>; tried:\n  <path>: <dlerror>..." and a newline to `why`, returns null.
void* open_first(const std::vector<std::string>& paths, int flags, const char* what,
                 std::string& opened, std::string& why);

// The symbol `name` of `lib` as `Fn`; on failure appends "\n  <name> in <path>: <dlerror>" to
// `missing` and leaves `out` as it was.
void* symbol(void* lib, const char* name, const std::string& path, std::string& missing);
template <typename Fn>
void resolve(void* lib, const char* name, const std::string& path, Fn& out, std::string& missing) {
  if (void* sym = symbol(lib, name, path, missing)) out = reinterpret_cast<Fn>(sym);
}

}  // namespace ncclsmoke::transports::shared_library
