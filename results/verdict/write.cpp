#include "results/verdict/write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace ncclsmoke::results {

namespace {

std::string why(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& path, const std::string& reason) {
  throw WriteError("cannot write '" + path + "': " + reason);
}

}  // namespace

void write_text_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  if (path.empty()) throw WriteError("cannot write '': empty path");
  fs::path target(path);
  if (target.filename().empty()) fail(path, "the path names a directory, not a file");
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";

  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) fail(path, "directory '" + dir.string() + "' does not exist");
    if (err == ENOTDIR) fail(path, "a component of '" + dir.string() + "' is not a directory");
    fail(path, "cannot access directory '" + dir.string() + "': " + why(err));
  }
  if (!S_ISDIR(st.st_mode)) fail(path, "'" + dir.string() + "' is not a directory");

  std::random_device rd;
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, ".%d.%08x.tmp", static_cast<int>(::getpid()), rd());
  fs::path tmp = dir / ("." + target.filename().string() + suffix);

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    if (err == EACCES || err == EPERM || err == EROFS) {
      fail(path, "directory '" + dir.string() + "' is not writable (" + why(err) + ")");
    }
    fail(path, "cannot create a temporary file in '" + dir.string() + "': " + why(err));
  }
  auto abandon = [&](const std::string& reason) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, reason);
  };
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("write to '" + tmp.string() + "' failed: " + why(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) abandon("fsync of '" + tmp.string() + "' failed: " + why(errno));
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "close of '" + tmp.string() + "' failed: " + why(err));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "rename from '" + tmp.string() + "' failed: " + why(err));
  }
  // Make the rename itself durable; best effort (some filesystems refuse fsync on directories).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_json_atomically(const std::string& path, const nlohmann::json& doc) {
  write_text_atomically(path,
                        doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace ncclsmoke::results
