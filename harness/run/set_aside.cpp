#include "harness/run/set_aside.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "harness/common/progress.h"
#include "results/verdict/write.h"

namespace ncclsmoke::harness {

namespace {

results::ConfigProblem file_problem(const std::string& path, int line, const std::string& what,
                                    const std::string& fix) {
  results::ConfigProblem p;
  p.kind = results::ConfigProblem::Kind::invalid;
  p.variable = "--exclude-file";
  p.value = line > 0 ? fmt::format("{}:{}", path, line) : path;
  p.message = line > 0 ? fmt::format("--exclude-file {} line {}: {}", path, line, what)
                       : fmt::format("--exclude-file {} {}", path, what);
  p.hint = fix;
  return p;
}

const char* kFileFix =
    "give the suspects.txt an earlier run wrote beside its verdict.json (one host or node name "
    "per line, '#' starts a comment), or drop --exclude-file";

// Reads at most limit + 1 bytes of a regular file; the problem otherwise. O_NONBLOCK: a FIFO
// named by mistake must not hang the run (it is refused as not a regular file anyway).
std::optional<results::ConfigProblem> read_regular_file(const std::string& path, std::string& text) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    return file_problem(path, 0,
                        err == ENOENT ? "does not exist"
                                      : fmt::format("cannot be opened: {}", std::strerror(err)),
                        kFileFix);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return file_problem(path, 0,
                        S_ISDIR(st.st_mode) ? "is a directory, not a file"
                                            : "is not a regular file (a device, FIFO or socket)",
                        kFileFix);
  }
  if (static_cast<std::uintmax_t>(st.st_size) > results::kMaxExcludeFileBytes) {
    ::close(fd);
    return file_problem(path, 0,
                        fmt::format("is {} bytes, larger than {}: not a suspects file",
                                    st.st_size, results::kMaxExcludeFileBytes),
                        kFileFix);
  }
  text.clear();
  char buf[65536];
  while (text.size() <= results::kMaxExcludeFileBytes) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return file_problem(path, 0, fmt::format("cannot be read: {}", std::strerror(err)), kFileFix);
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return std::nullopt;
}

}  // namespace

std::string check_exclude_hosts(const std::string& text) {
  results::SetAsideList list;
  if (auto p = results::parse_exclude_hosts(text, list)) return p->message;
  return "";
}

std::optional<results::ConfigProblem> load_set_aside(const std::string& exclude_hosts,
                                                     const std::string& exclude_file,
                                                     results::SetAsideList& into) {
  if (auto p = results::parse_exclude_hosts(exclude_hosts, into)) {
    results::ConfigProblem c;
    c.variable = "--exclude-hosts";
    c.value = exclude_hosts.substr(0, 200);
    c.message = "--exclude-hosts: " + p->message;
    c.hint = "a comma-separated list of host or node names, e.g. --exclude-hosts node-a,node-b";
    return c;
  }
  if (exclude_file.empty()) return std::nullopt;
  std::string text;
  if (auto p = read_regular_file(exclude_file, text)) return p;
  if (auto p = results::parse_suspects_text(text, exclude_file, into))
    return file_problem(exclude_file, p->line, p->message, kFileFix);
  return std::nullopt;
}

void set_aside_step(RunContext& ctx, const rendezvous::JoinResult& join) {
  const auto& list = ctx.set_aside;
  if (list.empty()) return;
  auto t0 = Clock::now();
  std::vector<results::RosterEntry> roster;
  for (const auto& id : join.present) roster.push_back({id.rank, id.host, id.node});
  // Whether any rank is set aside, and HOST_EXCLUDED naming them, is judging's
  // (set_aside_rules.h); next_step judges the same record (judged_so_far) and ends the run.
  ctx.end_step("set-aside", results::SetAsideSeen{std::move(roster), list}, t0);
}

std::string suspects_path(const RunContext& ctx) {
  std::filesystem::path global(ctx.global_path());
  return (global.parent_path().empty() ? std::filesystem::path(".") : global.parent_path())
      .append("suspects.txt")
      .string();
}

void write_suspects_file(const RunContext& ctx, const results::Verdict& global) {
  const std::string path = suspects_path(ctx);
  const std::string text = results::suspects_file_text(global);
  try {
    results::write_text_atomically(path, text);
  } catch (const std::exception& e) {
    log_error(fmt::format("ncclsmoke: rank 0: the suspects file was NOT written to {}: {}", path,
                          e.what()));
    return;
  }
  if (text.empty()) return;
  // One line at any world size: the first kMaxSuspectsNamed by name, the rest counted (the file
  // has them all).
  constexpr std::size_t kMaxSuspectsNamed = 32;
  const auto suspects = results::suspect_hosts(global);
  std::string named;
  for (std::size_t i = 0; i < suspects.size() && i < kMaxSuspectsNamed; ++i)
    named += fmt::format("{}{} ({})", named.empty() ? "" : ", ", suspects[i].node,
                         fmt::join(suspects[i].codes, ","));
  if (suspects.size() > kMaxSuspectsNamed)
    named += fmt::format(" and {} more", suspects.size() - kMaxSuspectsNamed);
  log_warn(fmt::format("suspects: {} (written to {}: give it to the next run's --exclude-file, or "
                       "`cut -d' ' -f1 {} | paste -sd,` to sbatch --exclude)",
                       named, path, path));
}

void remove_stale_suspects_file(const RunContext& ctx) {
  std::error_code ec;
  std::filesystem::remove(suspects_path(ctx), ec);
}

}  // namespace ncclsmoke::harness
