#pragma once
// Profiles: what a node class is expected to deliver, in one human-edited file (YAML; JSON is
// accepted too, being YAML's subset, so a ConfigMap can carry either). A profile names a node
// class and, per transport, the identity that must carry the bytes and the bus bandwidth expected
// at a gate size, keyed by world size where it matters. judge.h compares a verdict with one.
//
// File shape (see results/judging/profiles.example.yaml):
//   profiles:
//     - name: p5.48xlarge-efa
//       description: ...
//       transports:
//         - transport: nccl
//           identity: {network: Libfabric, provider: efa, gdr: true}
//           baselines:
//             - {world_size: 16, busbw_gbps: 487, gate_bytes: 17179869184, source: "public figure: ..."}
//       environment: {FI_PROVIDER: efa, FI_EFA_USE_DEVICE_RDMA: "1", NCCL_SOCKET_IFNAME: ~}
// world_size 0 (or absent) means "any world size"; an exact world size wins over it.
// Loading is strict: an unknown key, a wrong type or a bad value throws ProfileError naming the
// path (e.g. "profiles[0].transports[1].baselines[0].busbw_gbps"), because a typo in a threshold
// must not quietly become "no threshold".
//
// Bounded work on hostile input: yaml-cpp parses an alias into a node shared with its anchor
// (linear), but converting to JSON walks each alias again, so nine levels of ten aliases
// ("billion laughs") would be 10^9 nodes. Conversion therefore counts the nodes it visits and
// refuses the file past kMaxYamlNodes (a real profiles file has a few thousand), or nested deeper
// than kMaxYamlDepth, or a file over kMaxProfilesFileBytes (a ConfigMap holds at most 1 MiB):
// ProfileError naming the file, after at most ~100k node visits (milliseconds), in every caller
// (`run --profiles`, `launch`, `baseline learn`). Aliases of small nodes stay allowed.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ncclsmoke::results {

inline constexpr std::size_t kMaxYamlNodes = 100000;
inline constexpr int kMaxYamlDepth = 64;
inline constexpr std::size_t kMaxProfilesFileBytes = 16u << 20;

struct BaselineBand {
  double busbw_gbps = 0;        // expected bus bandwidth at gate_bytes, GB/s (1e9 B/s), > 0
  double degraded_ratio = 0.85; // gate busbw below this x baseline -> BANDWIDTH_REGRESSION warning
  double fail_ratio = 0.5;      // below this x baseline -> BANDWIDTH_REGRESSION error
  std::int64_t gate_bytes = 0;  // the message size the baseline was measured at, > 0
  std::string source;           // "measured 2026-..", "public figure: ..."
};

struct TransportExpectation {
  std::string transport;        // "nccl", "socket", "fabric", "mpi"
  // Keys the transport's observed identity must match, e.g. {"network":"Libfabric",
  // "provider":"efa","gdr":true} for nccl, {"provider":"efa"} for fabric. Empty: no expectation.
  nlohmann::json identity = nlohmann::json::object();
  std::map<int, BaselineBand> by_world_size;  // key 0 = any world size
  // false: a run that did not measure this transport at all is not held against the profile
  // (file key `required`, default true). Rows that exist are judged either way.
  bool required = true;
};

struct Profile {
  std::string name;
  std::string description;
  std::vector<TransportExpectation> transports;
  // The environment policy (file key `environment`): variables every rank must run with, and the
  // value each must have; nullopt (YAML ~) means set, to any value. Names are those a verdict
  // keeps (env_allowlist.h); a secret's (TOKEN, KEY, ...) value is never kept, so it can only be
  // required set. Values are text: quote numbers ("1"). ENV_POLICY names each rank off it.
  std::map<std::string, std::optional<std::string>> environment;
};

class ProfileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses YAML (or JSON) text. Throws ProfileError naming the path/field for bad input, duplicate
// profile names, duplicate transports in a profile, or duplicate world sizes in a transport.
std::vector<Profile> load_profiles(const std::string& text);
// The same from an already-parsed JSON document ({"profiles": [...]}).
std::vector<Profile> profiles_from_json(const nlohmann::json& doc);
// Reads a file and load_profiles() it; errors name the file.
std::vector<Profile> load_profiles_file(const std::string& path);

// nullptr when no profile has that name.
const Profile* find_profile(const std::vector<Profile>& profiles, const std::string& name);
// nullptr when the profile has no entry for the transport.
const TransportExpectation* find_transport(const Profile& p, const std::string& transport);
// The band for `world_size`: the exact key, else key 0; nullptr when neither exists.
const BaselineBand* find_band(const TransportExpectation& t, int world_size);

nlohmann::json to_json(const BaselineBand& b);

}  // namespace ncclsmoke::results
