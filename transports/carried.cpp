#include "transports/carried.h"

#include <fmt/format.h>

namespace ncclsmoke::transports {

std::string observed_text(const nlohmann::json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string s;
    for (const auto& e : *it)
      if (e.is_string()) s += (s.empty() ? "" : ",") + e.get<std::string>();
    return s;
  }
  return it->dump();
}

std::vector<std::string> narrowing_warnings(const std::vector<std::string>& names,
                                            std::string_view effect,
                                            const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const auto& name : names)
    if (auto it = env.find(name); it != env.end())
      out.push_back(fmt::format("WARNING: {}={} in the environment {}", name, it->second, effect));
  return out;
}

}  // namespace ncclsmoke::transports
