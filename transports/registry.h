#pragma once
// The backends this binary was built with, by name. Adding a backend adds its folder and one
// entry in registry.cpp; the driver and the harness never branch on a transport's name. Each entry
// carries the backend's option declarations (options.h), from its folder's <name>_options.cpp,
// which is compiled even when the backend is not, so every binary accepts the same flags.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transports/carried.h"
#include "transports/options.h"
#include "transports/transport.h"

namespace ncclsmoke::transports {

struct BackendInfo {
  std::string name;
  std::string description;
  // nullptr when the backend was not built into this binary; `why_missing` then says why.
  std::function<std::unique_ptr<Transport>()> make;
  std::string why_missing;
  std::vector<OptionSpec> options;  // what TransportContext::options may carry for it
  CarriedBy carried;                // how the run's last screen tells what carried its bytes
  // Why a fresh 2-rank instance of it cannot be made inside the run, for the pairwise rounds
  // (results/judging/pairwise_rules.h); "" when it can.
  std::string no_pairs;
};

const std::vector<BackendInfo>& backends();
const BackendInfo* find_backend(const std::string& name);
// all_options() and find_option(key), over these backends' declarations, are declared in
// options.h (BackendOptions reads them) and defined in registry.cpp.

}  // namespace ncclsmoke::transports
