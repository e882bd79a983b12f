#include "harness/common/env.h"

#include <cstdlib>

namespace ncclsmoke::harness {

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Environment map_environment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::optional<std::string> lookup(const Environment& env, const char* name) {
  if (!env || name == nullptr) return std::nullopt;
  try {
    return env(name);
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<std::string> env(const char* name) {
  auto v = lookup(process_environment(), name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

}  // namespace ncclsmoke::harness
