#include "node/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace ncclsmoke::node {
namespace {

// Seconds since boot from a line's prefix: a /dev/kmsg record's third field (microseconds) or
// dmesg's "[ seconds.micros]"; -1 when neither.
double stamp_of(std::string_view line) {
  if (!line.empty() && line.front() == '[') {
    auto close = line.find(']');
    if (close == std::string_view::npos) return -1;
    std::string_view t = line.substr(1, close - 1);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    double s = -1;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), s);
    return ec == std::errc() && end == t.data() + t.size() ? s : -1;
  }
  auto semi = line.find(';');
  if (semi == std::string_view::npos) return -1;
  std::string_view head = line.substr(0, semi);
  std::size_t f1 = head.find(','), f2 = f1 == std::string_view::npos ? f1 : head.find(',', f1 + 1);
  if (f2 == std::string_view::npos) return -1;
  std::size_t f3 = head.find(',', f2 + 1);
  std::string_view usec = head.substr(f2 + 1, f3 == std::string_view::npos ? f3 : f3 - f2 - 1);
  long long us = -1;
  auto [end, ec] = std::from_chars(usec.data(), usec.data() + usec.size(), us);
  return ec == std::errc() && end == usec.data() + usec.size() && us >= 0 ? us / 1e6 : -1;
}

void parse_line(std::string_view line, facts::KernelLogFacts& out) {
  constexpr std::string_view kMark = "NVRM: Xid (PCI:";
  auto at = line.find(kMark);
  if (at == std::string_view::npos) return;
  std::string_view rest = line.substr(at + kMark.size());
  auto close = rest.find("):");
  if (close == std::string_view::npos) return;
  facts::XidEvent e;
  e.pci = std::string(rest.substr(0, close));
  std::string_view num = rest.substr(close + 2);
  while (!num.empty() && num.front() == ' ') num.remove_prefix(1);
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), e.xid);
  if (ec != std::errc() || e.xid <= 0 || e.pci.empty() || e.pci.size() > 32) return;
  e.text = std::string(line.substr(at, kXidTextMax));
  e.at_s = stamp_of(line);
  out.xids.push_back(std::move(e));
}

}  // namespace

void parse_kernel_log(std::string_view text, facts::KernelLogFacts& out) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    parse_line(text.substr(0, nl), out);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

facts::KernelLogFacts read_kernel_log(const std::string& path, std::size_t max_bytes) {
  facts::KernelLogFacts out;
  out.source = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    out.why_not = std::strerror(errno);
    return out;
  }
  // /dev/kmsg returns one record a read (EINVAL for a buffer smaller than the record, EPIPE when
  // records were overwritten while reading: go on) and EAGAIN at the end; a file returns 0.
  std::string text;
  char buf[8192];
  for (int guard = 0; guard < 1 << 20; ++guard) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));  // a /dev/kmsg record ends in its newline
      if (text.size() >= max_bytes) {
        out.truncated = true;
        break;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) continue;
    if (n < 0 && errno != EAGAIN && text.empty()) {
      out.why_not = std::strerror(errno);
      ::close(fd);
      return out;
    }
    break;
  }
  ::close(fd);
  out.read = true;
  parse_kernel_log(text, out);
  return out;
}

}  // namespace ncclsmoke::node
