#pragma once
// How a backend tells, on a run's last screen, what carried its bytes ("carried by:", after the
// human summary; harness/common/summary_tables.h): one line from one rank's identify() observation, and
// the warnings about a choice that was not the cluster's (a default the user never asked for, an
// environment variable that narrowed what the library could pick). Each backend's
// <name>/<name>_carried.cpp defines its own and registry.cpp hands it over in BackendInfo, so the
// harness reads no backend's identity fields. Compiled even when the backend is not, so a verdict
// from any rank can be told.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ncclsmoke::transports {

struct CarriedBy {
  // One rank's observation as a line ("interface lo (chosen by ...)"); "" when it says nothing.
  std::string (*line)(const nlohmann::json& observed) = nullptr;
  // Warnings over every rank's observations and the run's allow-listed environment.
  std::vector<std::string> (*warnings)(const std::vector<nlohmann::json>& observed,
                                       const std::map<std::string, std::string>& env) = nullptr;
};

// observed[key] as text: a string as it is, an array of strings joined by ',', any other value
// as JSON; "" when absent or null (or `observed` is no object).
std::string observed_text(const nlohmann::json& observed, const char* key);
// "WARNING: NAME=value in the environment <effect>" for each of `names` set in `env`.
std::vector<std::string> narrowing_warnings(const std::vector<std::string>& names,
                                            std::string_view effect,
                                            const std::map<std::string, std::string>& env);

}  // namespace ncclsmoke::transports
