#include "transports/mpi/mpi_wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "rendezvous/bounded_json.h"

namespace ncclsmoke::transports::mpi_wire {

bool send_msg(int sock, const nlohmann::json& msg, int fd) {
  std::string text = msg.dump();
  if (text.size() > kMaxMessage) return false;
  iovec iov{text.data(), text.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (int tries = 0; tries < 1000; ++tries) {
    ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(text.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
  return false;
}

int recv_msg(int sock, nlohmann::json& out, rendezvous::Deadline deadline, int* fd_out) {
  if (fd_out) *fd_out = -1;
  for (;;) {
    auto left = rendezvous::remaining(deadline).count();
    pollfd p{sock, POLLIN, 0};
    int timeout = static_cast<int>(std::min<long long>(std::max<long long>(left, 0), 1 << 30));
    int r = poll(&p, 1, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    break;
  }
  std::vector<char> buf(kMaxMessage);
  iovec iov{buf.data(), buf.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  ssize_t n;
  do n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      if (fd_out) *fd_out = fd;
      else close(fd);
    }
  }
  out = rendezvous::parse_bounded_or_discarded(std::string_view(buf.data(), static_cast<std::size_t>(n)),
                                               kMaxMessage);
  return out.is_discarded() ? -1 : 1;
}

}  // namespace ncclsmoke::transports::mpi_wire

#include <algorithm>
#include <cctype>
#include <sstream>

#include "transports/transport.h"

namespace ncclsmoke::transports::mpi_wire {

std::string help_summary(const std::vector<std::string>& help, std::size_t max_chars) {
  // Per help text, its first sentence, or for the MPI_ERRORS_ARE_FATAL banner its
  // "An error occurred in <call>" line: the text itself is kept in the evidence.
  std::string out;
  for (auto& text : help) {
    std::string flat;
    std::istringstream in(text);
    std::string line, picked;
    while (std::getline(in, line)) {
      auto pos = line.find("*** An error occurred in ");
      if (pos != std::string::npos && picked.empty()) picked = line.substr(pos + 4);
      bool rule = std::all_of(line.begin(), line.end(), [](char c) {
        return c == '-' || std::isspace(static_cast<unsigned char>(c));
      });
      if (rule) continue;
      std::istringstream ws(line);
      for (std::string w; ws >> w;) flat += (flat.empty() ? "" : " ") + w;
    }
    if (picked.empty()) {
      auto dot = flat.find(". ");
      picked = dot == std::string::npos ? flat : flat.substr(0, dot + 1);
    }
    if (picked.empty()) continue;
    if (!out.empty()) out += " | ";
    out += picked;
  }
  if (out.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
  return out;
}

DeathVerdict classify_death(const ChildDeath& d, const std::string& what) {
  DeathVerdict v;
  std::string how;
  if (!d.reaped) how = "it did not exit within the grace period (killed)";
  else if (d.exited) how = "exit status " + std::to_string(d.code);
  else how = "killed by signal " + std::to_string(d.code);
  std::string summary = help_summary(d.help);
  if (d.reported_abort) {
    std::string reason = summary.empty() ? "no help text; PMIx_Abort message \"" + d.abort_message + "\""
                                         : summary;
    if (d.during_init) {
      v.kind = static_cast<int>(ErrorKind::init_failed);
      v.reason = "Open MPI aborted in " + what + ": " + reason;
    } else {
      // Open MPI aborts mid-collective mostly when a connection to a peer broke.
      std::string low = reason;
      std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
      bool peer = low.find("peer") != std::string::npos || low.find("connection") != std::string::npos ||
                  low.find("unreachable") != std::string::npos;
      v.kind = static_cast<int>(peer ? ErrorKind::peer_lost : ErrorKind::other);
      v.reason = "Open MPI aborted during " + what + ": " + reason;
    }
    v.reason += " (the MPI child process left PMIx and ended: " + how + ")";
    return v;
  }
  v.kind = static_cast<int>(d.during_init ? ErrorKind::init_failed : ErrorKind::other);
  v.reason = "the MPI child process died during " + what + " (" + how +
             ") without an Open MPI abort report";
  if (!summary.empty()) v.reason += "; Open MPI said: " + summary;
  else if (!d.stderr_tail.empty()) v.reason += "; its last stderr line: " + d.stderr_tail.back();
  return v;
}

}  // namespace ncclsmoke::transports::mpi_wire
