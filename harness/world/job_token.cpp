#include "harness/world/job_token.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "harness/common/env.h"

namespace ncclsmoke::harness {
namespace {

JobTokenResult token_file_problem(const std::string& path, const std::string& variable,
                                  const std::string& what, const std::string& fix) {
  JobTokenResult r;
  r.source = variable;
  results::ConfigProblem p;
  p.kind = results::ConfigProblem::Kind::invalid;
  p.variable = variable;
  p.value = path;
  p.message = fmt::format("the job token file {} ({}) {}", path, variable, what);
  p.hint = fix;
  r.problem = std::move(p);
  return r;
}

}  // namespace

JobTokenResult read_job_token_file(const std::string& path, const std::string& variable) {
  const std::string mount_fix =
      "point it at the mounted Secret's key file (e.g. /var/run/secrets/ncclsmoke/token), or set "
      "NCCLSMOKE_JOB_TOKEN instead";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return token_file_problem(path, variable, "is a directory, not a file", mount_fix);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return token_file_problem(path, variable,
                              fmt::format("cannot be read: {}", std::strerror(errno)), mount_fix);
  std::string text;
  text.resize(kMaxJobTokenFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad())
    return token_file_problem(path, variable, "cannot be read (I/O error)", mount_fix);
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxJobTokenFileBytes)
    return token_file_problem(
        path, variable, fmt::format("is larger than {} bytes: not a token", kMaxJobTokenFileBytes),
        mount_fix);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty())
    return token_file_problem(path, variable, "is empty",
                              "write the shared secret into it (every rank of the job must read "
                              "the same one), e.g. from `openssl rand -hex 32`");
  JobTokenResult r;
  r.token = std::move(text);
  r.source = variable;
  return r;
}

JobTokenResult resolve_job_token(const std::string& file_flag) {
  if (!file_flag.empty()) return read_job_token_file(file_flag, "--job-token-file");
  if (auto t = env("NCCLSMOKE_JOB_TOKEN")) return {*t, "NCCLSMOKE_JOB_TOKEN", std::nullopt};
  if (auto f = env("NCCLSMOKE_JOB_TOKEN_FILE"))
    return read_job_token_file(*f, "NCCLSMOKE_JOB_TOKEN_FILE");
  return {};
}

bool job_token_given(const std::string& file_flag) {
  return !file_flag.empty() || env("NCCLSMOKE_JOB_TOKEN") || env("NCCLSMOKE_JOB_TOKEN_FILE");
}

}  // namespace ncclsmoke::harness
