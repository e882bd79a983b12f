#pragma once
// The job token: the shared secret every value in the store is signed with
// (rendezvous/signed_store.h). Where it comes from, first found wins:
//   --job-token-file PATH, NCCLSMOKE_JOB_TOKEN (the secret itself), NCCLSMOKE_JOB_TOKEN_FILE
//   (a file, e.g. a mounted Kubernetes Secret).
// A file is read whole, one trailing newline stripped (`echo secret > f`, kubectl's files); an
// unreadable, empty or oversized file is a ConfigProblem naming the flag or variable and the path
// (CONFIG_INVALID: the run stops before touching the network). No token at all is allowed: the
// store is then unauthenticated, and the verdict says so (world.store.authenticated: false).
// The token is never logged and never written into a verdict.
#include <optional>
#include <string>

#include "results/judging/config_problem.h"

namespace ncclsmoke::harness {

struct JobTokenResult {
  std::string token;   // "" none
  std::string source;  // "--job-token-file", "NCCLSMOKE_JOB_TOKEN", "NCCLSMOKE_JOB_TOKEN_FILE"; "" none
  std::optional<results::ConfigProblem> problem;
};

// The largest token file read (a Secret holds a short string; anything bigger is the wrong file).
inline constexpr std::size_t kMaxJobTokenFileBytes = 64 * 1024;

// `file_flag`: --job-token-file ("" not given). Reads NCCLSMOKE_JOB_TOKEN(_FILE) through env.h.
JobTokenResult resolve_job_token(const std::string& file_flag);

// Reads one token file as described above; `variable` names where the path came from.
JobTokenResult read_job_token_file(const std::string& path, const std::string& variable);

// Whether this process has a token from the environment or the given flag (launch: make one only
// when none is set).
bool job_token_given(const std::string& file_flag);

}  // namespace ncclsmoke::harness
