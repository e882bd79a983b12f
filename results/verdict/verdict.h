#pragma once
// The verdict model: what one run concluded, as written to JSON (results/verdict/verdict.schema.json).
// Every rank fills one with its own view (scope "local"); rank 0 merges them (merge.h) into the
// "global" one. Measurement code fills ranks/phases/transports/findings; only results/ decides the
// verdict (classify.h), so a skipped or missing number can never read as a pass.
//
// Enumerated fields are the enums of enums.h; the JSON spelling is converted only at the edges
// (to_json, verdict_from_json, verdict_from_text_fast). A finding's code is an AnyCode, so a code
// written by a newer ncclsmoke is kept as text and round-trips unchanged.
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "facts/node.h"
#include "rendezvous/bounded_json.h"
#include "results/verdict/enums.h"

namespace ncclsmoke::results {

inline constexpr int kSchemaVersion = 1;
// Minor versions add optional members only, so a reader of version 1 takes any minor (an absent
// "schema_minor" is 0). 1: findings' "subject" and "message_template"; world.store.authenticated.
// 2: findings' "origin". 3: ranks' "link_speed_mbps". 4: "node" (the reporting rank's network
// devices over the run). 5: "alike" (the identities and rows of a world past kMaxExpandedRanks
// ranks that no finding names, summarised: results/verdict/alike.h).
inline constexpr int kSchemaMinor = 5;

// What a finding is about, as data: merge, dedupe, gather, the report and suspect_host key on
// these, never on the message. A finding made with a subject has its message rendered from its
// template and these (render_message(), finding_codes.h); one read from an older verdict has an
// empty subject and keeps its message as written.
struct Subject {
  std::vector<int> reporters;  // the ranks that observed it: "{reporter}" in the template
  std::string reporter_host;   // their host ("" unknown); findings of other hosts stay apart
  int peer = -1;               // the other rank involved: "{peer}"; -1 none
  std::string peer_host;
  std::string transport;       // "socket", ...; "" none
  std::string phase;           // "transport:socket", "mesh", ...; "" none
  std::string item;            // anything else that tells two findings apart: a variable, an address
  bool empty() const {
    return reporters.empty() && peer < 0 && transport.empty() && phase.empty() && item.empty();
  }
  friend bool operator==(const Subject&, const Subject&) = default;
};

// One thing an operator must read. `code` is from finding_codes.h (make_finding() fills
// severity/layer/hint from its table). Messages name ranks, hosts, peers and time waited.
struct Finding {
  AnyCode code;                        // e.g. Code::RENDEZVOUS_TIMEOUT (unknown: kept as text)
  Severity severity = Severity::error;
  Layer layer = Layer::run;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  Subject subject;
  // The message with "{reporter}" / "{peer}" for the subject's ranks ("" for a finding without
  // a subject); `message` is its rendering, kept so every reader sees one line of text.
  std::string message_template;
  std::string message;   // one line
  std::string hint;      // what to do about it
  nlohmann::json evidence;  // optional object (null = absent): numbers, pairs, NCCL's last error ...
  // Which observer or rule made it (JSON "origin", absent when none): what another rule reads to
  // recognise it.
  FindingOrigin origin = FindingOrigin::none;
};

struct RankInfo {
  int rank = 0;
  RankStatus status = RankStatus::joined;
  std::string host;               // hostname (empty: unknown)
  std::string node;               // Kubernetes node name (NODE_NAME) if known
  std::int64_t pid = 0;           // 0: unknown
  std::string local_address;      // the address this rank used to reach the store
  std::string interface;          // the interface that address belongs to
  std::string detail;             // e.g. "killed after joining"
  // > rank: this entry stands for every rank from `rank` to `through`, alike (ranks that never
  // joined, written as ranges so a verdict's size grows with the ranks that joined, not with
  // WORLD_SIZE); -1 (or == rank): this rank only. JSON: "through", only when > rank.
  int through = -1;
  int link_speed_mbps = 0;  // the interface's speed as it reports it (sysfs); 0 unknown
};

struct Phase {
  std::string name;               // "world", "rendezvous", "mesh", "transport:socket" ...
  PhaseStatus status = PhaseStatus::not_run;
  double duration_s = 0;
  bool required = true;           // a required phase that is skipped/not_run => inconclusive
  std::string detail;             // e.g. the reason a phase was skipped
};

// One measurement row, nccl-tests style. Not-measured numbers are NaN here and null in JSON.
struct TransportRow {
  std::string transport;          // "socket", "fabric", "mpi", "nccl"
  int rank = -1;                  // -1: the row describes the whole world
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string dtype = "float32";
  bool in_place = false;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::int64_t wrong = -1;        // wrong elements; -1: not checked (null in JSON)
  bool gate = false;              // the gate size the judging step compares with baselines
  bool synthetic = false;         // several ranks sharing one GPU; never compared with baselines
};

// What a transport was expected to be vs what actually carried the bytes (free-form objects:
// e.g. {"network":"Socket","provider":"tcp","interface":"eth0"}).
struct TransportIdentity {
  std::string transport;
  int rank = -1;                  // -1: world-wide
  nlohmann::json expected;        // object or null (no expectation)
  nlohmann::json observed = nlohmann::json::object();
};

struct Tool {
  std::string name = "ncclsmoke";
  std::string version;
};

// The store the ranks met at, and how the client spoke to it. Written once the rank reached it.
struct StoreInfo {
  std::string host;               // empty: the rank never got as far as the store
  int port = 0;
  AnyStoreHostedBy hosted_by;     // rank 0 | torchelastic agent | external (--store)
  StoreDialect dialect = StoreDialect::modern;
  AnyServerEra era;               // torch<=2.0 | torch2.1-2.4 | torch>=2.5 | ncclsmoke
  std::string key_prefix;         // the run's namespace in the store, e.g. "ncclsmoke/<job>/0/"
  // Whether every value the rank read from the store had to carry the job token's signature
  // (NCCLSMOKE_JOB_TOKEN; rendezvous/signed_store.h). Absent in an older verdict: false.
  bool authenticated = false;
};

struct World {
  int size = 0;                   // 0: unknown
  std::string master_addr;        // empty: unknown
  int master_port = 0;            // 0: unknown
  AnyWorldSource source;          // flags, torchrun, openmpi, slurm, k8s-indexed-job; "": unknown
  std::string job_id;             // the job identity (harness/world/job_identity.h); empty: none
  std::string job_id_source;      // where it came from: "SLURM_JOB_ID", "--job-id", ...
  int restart_count = 0;          // TORCHELASTIC_RESTART_COUNT (0 elsewhere)
  // Field ("rank", "world_size", "master_addr", "master_port", ...) -> the flag or variable it
  // was read from ("--rank", "SLURM_STEP_NODELIST", "SLURM_JOB_ID", "default"...); empty: unknown.
  std::map<std::string, std::string> sources;
  StoreInfo store;
};

struct Verdict {
  int schema_version = kSchemaVersion;
  int schema_minor = kSchemaMinor;  // as read: 0 for a verdict written before minor versions
  Tool tool;
  std::string run_id;
  std::string started_at;         // RFC 3339, UTC
  double duration_s = 0;
  Scope scope = Scope::local;
  int reporting_rank = -1;        // -1: unknown (e.g. invalid configuration)
  Outcome verdict = Outcome::inconclusive;
  int exit_code = 4;
  World world;
  std::vector<RankInfo> ranks;
  std::vector<Phase> phases;
  std::vector<TransportRow> transports;
  std::vector<TransportIdentity> identities;
  // Object or null (absent): the identities and rows summarise_alike() summarised
  // (results/verdict/alike.h); kept as the JSON it is written as.
  nlohmann::json alike;
  nlohmann::json baseline;        // object or null: profile/baseline used by the judging step
  std::vector<Finding> findings;
  std::map<std::string, std::string> env;       // allow-listed only (env_allowlist.h)
  std::map<std::string, std::string> versions;
  // What the reporting rank read of its node's network devices (facts/node.h); written as
  // "node" when read. A rank's own view; the world's verdict leaves it out (each rank's file
  // keeps its own).
  facts::NicFacts nics;
  // What NVML said of the node's GPUs (facts/node.h), written as "node"."gpus" when NVML was
  // there (read, or present and failing to start): the rank that read it (the node's local
  // rank 0).
  facts::GpuHealthFacts gpus;
};

// "node" as written, and read back forgivingly: a member of another type, or missing, is left at
// its default (the schema checks "node" is an object; its members are the rank's own report).
nlohmann::json nics_to_json(const facts::NicFacts& n);
// "node"."gpus" (an object to merge into "node"); read back as forgivingly.
nlohmann::json gpus_to_json(const facts::GpuHealthFacts& g);
facts::GpuHealthFacts gpus_from_json(const nlohmann::json& node);
// True when NVML was there to say something (read, or its library loaded and failed to start).
inline bool nvml_present(const facts::GpuHealthFacts& g) { return g.read || g.init_error > 0; }
// The host of the rank that wrote `v` (its ranks[] entry); "" unknown.
std::string reporting_host(const Verdict& v);
facts::NicFacts nics_from_json(const nlohmann::json& j);

// Thrown by verdict_from_json(): the message lists each problem with its JSON path.
class VerdictFormatError : public std::runtime_error {
 public:
  VerdictFormatError(const std::string& message, std::vector<std::string> problems)
      : std::runtime_error(message), problems_(std::move(problems)) {}
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// A verdict describing at most this many ranks writes one ranks[] entry a rank.
inline constexpr std::size_t kMaxExpandedRanks = 1024;
// How many ranks the entry stands for (1, or the size of its range).
inline int ranks_in(const RankInfo& r) { return r.through > r.rank ? r.through - r.rank + 1 : 1; }
// Appends entries for `sorted_ranks` (ascending), alike but for their rank, one per run of
// consecutive ranks.
void add_rank_ranges(std::vector<RankInfo>& into, const std::vector<int>& sorted_ranks,
                     const RankInfo& like);

nlohmann::json to_json(const Verdict& v);
// Validates against the embedded schema first; throws VerdictFormatError naming every bad path,
// or the depth, for a tree nested deeper than kMaxJsonDepth (rendezvous/bounded_json.h).
Verdict verdict_from_json(const nlohmann::json& j);

// The import's fast path (`history import` reads ~12 KB a run, 100,000 runs and more): reads the
// text once, checking each member against the schema while it fills the Verdict, without building
// a JSON tree or running the schema validator. It returns a verdict only for a document it is sure
// the schema accepts, equal to verdict_from_json(json::parse(text)); for anything else (a bad
// document, or an unusual one: escaped keys, duplicate keys, 1.0 for an integer, non-ASCII in a
// patterned field ...) it returns nullopt and the caller takes the full path, which decides and
// names the problems. So what is accepted stays exactly what the schema accepts; the results
// tests check that on a corpus of mutated verdicts.
std::optional<Verdict> verdict_from_text_fast(std::string_view text);

// Text from outside (a verdict file, a rank's post) to a verdict: the one-pass reader, else the
// bounded parse (rendezvous/bounded_json.h: at most `max_bytes`, nested at most kMaxJsonDepth)
// and verdict_from_json. Throws VerdictFormatError naming the problem: a limit exceeded ("nested
// deeper than 64 levels at byte 1234"), "not JSON at byte N (...)", or the schema's paths.
Verdict verdict_from_text(std::string_view text,
                          std::size_t max_bytes = rendezvous::kMaxVerdictJsonBytes);

nlohmann::json to_json(const Finding& f);
// A subject's members that are set (an empty subject is {}); and back, absent members defaults.
nlohmann::json to_json(const Subject& s);
Subject subject_from_json(const nlohmann::json& j);

// "20240501T101500Z-3fa9c2d1": sortable by time, unique enough across a cluster's ranks when one
// rank generates it and the others adopt it.
std::string new_run_id();
// "2024-05-01T10:15:00.123Z"
std::string rfc3339_utc(std::chrono::system_clock::time_point t);

// A fresh local verdict: schema version, tool name/version, started_at = now, new run_id.
Verdict new_verdict(int reporting_rank);

}  // namespace ncclsmoke::results
