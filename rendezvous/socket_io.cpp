#include "rendezvous/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rendezvous/store_error.h"

namespace ncclsmoke::rendezvous {

Listening listen_in_range(const std::string& bind_address, uint16_t port_min, uint16_t port_max,
                          int backlog, const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  const char* node = bind_address.empty() ? nullptr : bind_address.c_str();
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(node, "0", &hints, &res);
  if (rc != 0)
    throw StoreError(ErrorClass::invalid,
                     who + " cannot use bind address '" + bind_address + "': " + gai_strerror(rc));
  Listening out;
  std::string last_error = "no usable address";
  const uint16_t lo = port_min, hi = std::max(port_min, port_max);
  for (addrinfo* ai = res; ai && out.fd < 0; ai = ai->ai_next) {
    for (uint32_t port = lo; port <= hi && out.fd < 0; ++port) {
      int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        last_error = std::strerror(errno);
        break;
      }
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_storage ss{};
      std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
      if (ss.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<uint16_t>(port));
      else
        reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<uint16_t>(port));
      if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), ai->ai_addrlen) == 0 &&
          ::listen(fd, backlog) == 0) {
        out.fd = fd;
      } else {
        last_error = "port " + std::to_string(port) + ": " + std::strerror(errno);
        ::close(fd);
      }
    }
  }
  ::freeaddrinfo(res);
  if (out.fd < 0)
    throw StoreError(ErrorClass::other, who + " cannot listen on '" + bind_address + "' ports " +
                                            std::to_string(port_min) + "-" +
                                            std::to_string(port_max) + ": " + last_error);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(out.fd, reinterpret_cast<sockaddr*>(&ss), &len);
  out.port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                     : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return out;
}

namespace {
// Wakes at least once a second, so a deadline is never overslept by a long poll.
int poll_slice_ms(Deadline d) { return static_cast<int>(std::min<int64_t>(remaining(d).count(), 1000)); }
}  // namespace

SendResult send_bytes(int fd, const char* data, std::size_t len, Deadline deadline, int* err) {
  std::size_t off = 0;
  while (off < len) {
    ssize_t n = ::send(fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      if (err) *err = n == 0 ? EPIPE : errno;
      return SendResult::error;
    }
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, poll_slice_ms(deadline));
    if (r < 0 && errno != EINTR) {
      if (err) *err = errno;
      return SendResult::error;
    }
    if (r == 0 && expired(deadline)) return SendResult::timeout;
  }
  return SendResult::ok;
}

bool send_all(int fd, const std::string& data, Deadline deadline) {
  return send_bytes(fd, data.data(), data.size(), deadline, nullptr) == SendResult::ok;
}

std::string recv_exact(int fd, std::size_t n, std::string& out, Deadline deadline) {
  out.resize(n);
  std::size_t off = 0;
  while (off < n) {
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, poll_slice_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) {
      if (expired(deadline)) return "timed out";
      continue;
    }
    ssize_t got = ::recv(fd, out.data() + off, n - off, 0);
    if (got == 0) return "the peer closed the connection";
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::strerror(errno);
    }
    off += static_cast<std::size_t>(got);
  }
  return "";
}

}  // namespace ncclsmoke::rendezvous
