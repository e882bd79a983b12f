// The mpi transport on the "carried by" screen (transports/carried.h): the pml, btl and mtl Open
// MPI selected and its library; a warning when FI_PROVIDER narrowed what its ofi components see.
#include "transports/carried.h"

namespace ncclsmoke::transports {
namespace {

std::string mpi_line(const nlohmann::json& o) {
  auto selected = [&](const char* key) {
    return o.is_object() && o.contains(key) ? observed_text(o[key], "selected") : std::string();
  };
  std::string s;
  for (const char* k : {"pml", "btl", "mtl"})
    if (auto v = selected(k); !v.empty() && v != "null")
      s += (s.empty() ? "" : ", ") + (k + (" " + v));
  if (auto lib = observed_text(o, "library"); !lib.empty()) {
    if (lib.size() > 60) lib = lib.substr(0, 60) + "...";
    s += (s.empty() ? "" : " (") + lib + (s.empty() ? "" : ")");
  }
  return s;
}

std::vector<std::string> mpi_warnings(const std::vector<nlohmann::json>&,
                                      const std::map<std::string, std::string>& env) {
  return narrowing_warnings({"FI_PROVIDER"},
                            "limits the libfabric providers Open MPI's ofi components see", env);
}

}  // namespace

CarriedBy mpi_carried() { return {mpi_line, mpi_warnings}; }

}  // namespace ncclsmoke::transports
