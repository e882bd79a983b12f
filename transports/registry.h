#pragma once
// The backends this binary was built with, by name. Adding a backend adds its folder and one
// entry in registry.cpp; the driver and the harness never branch on a transport's name.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace ncclsmoke::transports {

struct BackendInfo {
  std::string name;
  std::string description;
  // nullptr when the backend was not built into this binary; `why_missing` then says why.
  std::function<std::unique_ptr<Transport>()> make;
  std::string why_missing;
};

const std::vector<BackendInfo>& backends();
const BackendInfo* find_backend(const std::string& name);

}  // namespace ncclsmoke::transports
