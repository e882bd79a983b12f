#pragma once
// A raw loopback client of the store server for its tests (store_budget_test.cpp,
// store_stranger_test.cpp): one dialect through the codec, every wait with a deadline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "rendezvous/wire.h"
#include "tests/rendezvous/server_test_util.h"

namespace ncclsmoke::rendezvous::server_testing {

// A raw loopback client speaking one dialect through the codec; every wait has a deadline.
class Raw {
 public:
  using Dialect = wire::Dialect;
  using Op = wire::Op;
  using Request = wire::Request;
  using SteadyClock = std::chrono::steady_clock;

  explicit Raw(uint16_t port, Dialect d = Dialect::modern, int rcvbuf = 0) : dialect_(d) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      int err = errno;
      ::close(fd_);
      throw std::runtime_error(std::string("connect: ") + std::strerror(err));
    }
    sockaddr_in local{};
    socklen_t len = sizeof local;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len);
    local_ = "127.0.0.1:" + std::to_string(ntohs(local.sin_port));
    if (d == Dialect::modern) {
      send(req(Op::validate, {}, {}, 0, wire::kValidateMagic));
      if (call(req(Op::ping, {}, {}, 0, 77)).u32 != 77) throw std::runtime_error("ping echo");
    }
  }
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  // The address the server logs for this connection.
  const std::string& local() const { return local_; }

  // False when the server has closed the connection (send fails).
  bool send_raw(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  bool send(const Request& r) {
    std::string out;
    wire::encode_request(dialect_, r, out);
    return send_raw(out);
  }
  wire::Reply read_reply(const Request& r, std::chrono::milliseconds budget = kIo) {
    auto deadline = SteadyClock::now() + budget;
    while (true) {
      auto d = wire::decode_reply(r, buf_, wire::Limits{});
      if (d.status == wire::Status::ok) {
        buf_.erase(0, d.consumed);
        return d.reply;
      }
      if (d.status == wire::Status::error) throw std::runtime_error("bad reply: " + d.error);
      if (!fill(deadline)) throw std::runtime_error("no reply to " + std::string(to_string(r.op)));
    }
  }
  wire::Reply call(const Request& r) {
    if (!send(r)) throw std::runtime_error("send failed: connection closed");
    return read_reply(r);
  }
  // True when the connection still answers a PING.
  bool alive() {
    try {
      return call(req(Op::ping, {}, {}, 0, 5)).u32 == 5;
    } catch (const std::exception&) {
      return false;
    }
  }
  // True when the server closed this connection (EOF or reset) within the budget; drains input.
  bool closed_within(std::chrono::milliseconds budget) {
    auto deadline = SteadyClock::now() + budget;
    while (SteadyClock::now() < deadline) {
      buf_.clear();
      if (!fill(deadline)) return eof_;
    }
    return false;
  }

 private:
  bool fill(SteadyClock::time_point deadline) {
    while (true) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int rc = ::poll(&p, 1, static_cast<int>(left.count()));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) return false;
      char tmp[65536];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n > 0) {
        buf_.append(tmp, static_cast<std::size_t>(n));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      eof_ = true;
      return false;
    }
  }

  int fd_ = -1;
  Dialect dialect_;
  std::string buf_;
  std::string local_;
  bool eof_ = false;
};

}  // namespace ncclsmoke::rendezvous::server_testing
