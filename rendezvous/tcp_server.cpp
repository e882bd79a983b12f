// The TCPStore-compatible server: one level-triggered epoll loop on its own thread, non-blocking
// sockets, an eventfd to wake the loop for stop(). Each connection has an input buffer (at most
// one partial request beyond what has been executed) and an output buffer written when the
// socket is writable, so a slow reader never blocks the loop. Store semantics live in
// tcp_server_keyspace.*.
#include "rendezvous/tcp_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "rendezvous/deadline.h"
#include "rendezvous/store_error.h"
#include "rendezvous/store_util.h"
#include "rendezvous/tcp_server_keyspace.h"

namespace ncclsmoke::rendezvous {
namespace {

using detail::ConnId;
using SteadyClock = std::chrono::steady_clock;

constexpr ConnId kListenId = 0;
constexpr ConnId kWakeId = 1;
constexpr std::size_t kReadChunk = 256 * 1024;
constexpr std::size_t kKeepBuffer = 64 * 1024;  // larger per-connection buffers are released
constexpr std::size_t kReadBudgetPerEvent = 4 * 1024 * 1024;  // fairness between connections
// Output back-pressure: stop executing a connection's requests while this much is queued for it,
// resume below the low mark. A reader that lets more than kOutputStall pile up (a single huge
// reply, or watch notifications) and reads nothing for stalled_request_timeout is closed.
constexpr std::size_t kOutputHigh = 4 * 1024 * 1024;
constexpr std::size_t kOutputLow = 1024 * 1024;
constexpr std::size_t kOutputStall = 64 * 1024 * 1024;
constexpr std::size_t kOutputHardCap = 512 * 1024 * 1024;
// A partial request this large is re-decoded only after it grew by half, or the sender paused
// (decode copies every complete field, so re-decoding on every read would be quadratic).
constexpr std::size_t kDeferDecodeFrom = 1024 * 1024;
constexpr auto kDeferredDecodeIdle = std::chrono::milliseconds(10);

std::string errno_text(int err) { return std::strerror(err); }

// "127.0.0.1:5000" / "[::1]:5000"; v4-mapped IPv6 addresses are shown as IPv4.
std::string format_address(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, in6->sin6_addr.s6_addr + 12, host, sizeof host);
      return std::string(host) + ":" + std::to_string(ntohs(in6->sin6_port));
    }
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "(unknown address family " + std::to_string(sa->sa_family) + ")";
}

// Lets the server hold thousands of sockets without the caller having to raise `ulimit -n`.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

struct Conn {
  ConnId id = 0;
  int fd = -1;
  std::string peer;
  std::optional<wire::Dialect> dialect;
  bool validated = false;
  std::string in;
  std::size_t in_pos = 0;
  std::string out;
  std::size_t out_pos = 0;
  uint64_t requests = 0;
  SteadyClock::time_point opened;
  SteadyClock::time_point last_rx;
  SteadyClock::time_point last_tx_progress;
  std::size_t defer_until = 0;  // re-decode the partial request once in.size() - in_pos >= this
  std::size_t decoded_at = 0;   // in_pending() at the last need_more decode: nothing new, no decode
  bool deferred = false;
  bool partial = false;  // the buffered bytes are an incomplete request
  bool paused = false;   // output back-pressure: not executing, not reading
  bool eof = false;      // the peer finished sending; close once the output is flushed
  bool dirty = false;    // in the loop's to-flush list
  uint32_t interest = 0;

  std::size_t out_pending() const { return out.size() - out_pos; }
  std::size_t in_pending() const { return in.size() - in_pos; }
};

class Server final : public TcpStoreServer {
 public:
  explicit Server(const TcpStoreServerOptions& opt)
      : opt_(opt), keyspace_([this](ConnId c, std::string_view b) { send_to(c, b); }) {
    if (!opt_.log) opt_.log = [](const std::string& line) { std::cerr << line << std::endl; };
    request_cap_ = 64 * 1024 * 1024 + opt_.limits.max_value_bytes + opt_.limits.max_key_bytes + 64;
    auto tick = opt_.stalled_request_timeout / 4;
    tick_ = std::clamp<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(tick), std::chrono::milliseconds(5),
        std::chrono::milliseconds(500));
  }

  ~Server() override {
    stop();
    for (int fd : {listen_fd_, wake_fd_, epoll_fd_, spare_fd_})
      if (fd >= 0) ::close(fd);
  }

  void start() {
    raise_fd_limit();
    bind_and_listen();
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0)
      throw StoreError(ErrorClass::other,
                       "tcp store server: cannot create epoll/eventfd: " + errno_text(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    ev.data.u64 = kWakeId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { run(); });
  }

  uint16_t port() const override { return port_; }
  std::vector<std::string> listen_addresses() const override { return addresses_; }

  void stop() override {
    std::lock_guard lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    if (wake_fd_ >= 0) {
      uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
    }
    if (thread_.joinable()) {
      if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
      else thread_.join();
    }
    for (auto& [id, c] : conns_) ::close(c.fd);
    conns_.clear();
    stats_.open.store(0);
    if (listen_fd_ >= 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
    }
  }

  TcpStoreServerStats stats() const override {
    TcpStoreServerStats s;
    s.accepted = stats_.accepted.load();
    s.open_connections = stats_.open.load();
    s.legacy_connections = stats_.legacy.load();
    s.modern_connections = stats_.modern.load();
    s.closed_for_errors = stats_.errors.load();
    s.requests = stats_.requests.load();
    s.keys = stats_.keys.load();
    return s;
  }

 private:
  // ---- listening -----------------------------------------------------------------------------

  // Binds one address; returns the fd or -1 with `why` filled in.
  int try_bind(int family, const sockaddr* sa, socklen_t len, bool dual_stack, std::string& why) {
    int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = "socket: " + errno_text(errno);
      return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6) {
      int v6only = dual_stack ? 0 : 1;
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    }
    if (::bind(fd, sa, len) != 0) {
      why = "bind: " + errno_text(errno);
      bind_errno_ = errno;
      ::close(fd);
      return -1;
    }
    if (::listen(fd, opt_.backlog) != 0) {
      why = "listen: " + errno_text(errno);
      bind_errno_ = errno;
      ::close(fd);
      return -1;
    }
    return fd;
  }

  void bind_and_listen() {
    std::vector<std::string> failures;
    std::string why;
    if (opt_.host.empty()) {
      sockaddr_in6 a6{};
      a6.sin6_family = AF_INET6;
      a6.sin6_addr = in6addr_any;
      a6.sin6_port = htons(opt_.port);
      listen_fd_ = try_bind(AF_INET6, reinterpret_cast<sockaddr*>(&a6), sizeof a6, true, why);
      if (listen_fd_ >= 0) {
        dual_stack_ = true;
      } else {
        failures.push_back("[::]:" + std::to_string(opt_.port) + " (" + why + ")");
        // Fall back to IPv4 only when IPv6 itself is unavailable, never on "in use".
        if (bind_errno_ != EADDRINUSE) {
          sockaddr_in a4{};
          a4.sin_family = AF_INET;
          a4.sin_addr.s_addr = htonl(INADDR_ANY);
          a4.sin_port = htons(opt_.port);
          listen_fd_ = try_bind(AF_INET, reinterpret_cast<sockaddr*>(&a4), sizeof a4, false, why);
          if (listen_fd_ < 0)
            failures.push_back("0.0.0.0:" + std::to_string(opt_.port) + " (" + why + ")");
        }
      }
    } else {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_PASSIVE;
      addrinfo* res = nullptr;
      std::string port_text = std::to_string(opt_.port);
      int rc = getaddrinfo(opt_.host.c_str(), port_text.c_str(), &hints, &res);
      if (rc != 0)
        throw StoreError(ErrorClass::dns, "tcp store server: cannot resolve listen address '" +
                                              opt_.host + "' (port " + port_text +
                                              "): " + gai_strerror(rc));
      for (addrinfo* ai = res; ai && listen_fd_ < 0; ai = ai->ai_next) {
        auto* a6 = reinterpret_cast<sockaddr_in6*>(ai->ai_addr);
        bool any6 = ai->ai_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
        listen_fd_ = try_bind(ai->ai_family, ai->ai_addr, ai->ai_addrlen, any6, why);
        if (listen_fd_ < 0) failures.push_back(format_address(ai->ai_addr) + " (" + why + ")");
        else dual_stack_ = any6;
      }
      freeaddrinfo(res);
    }
    if (listen_fd_ < 0) {
      std::string list;
      for (const auto& f : failures) list += (list.empty() ? "" : "; ") + f;
      std::string hint = bind_errno_ == EADDRINUSE
                             ? " (another process, maybe an earlier run, holds the port)"
                             : "";
      throw StoreError(ErrorClass::other, "tcp store server: cannot listen on host '" + opt_.host +
                                              "' port " + std::to_string(opt_.port) + ": " +
                                              list + hint);
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
    port_ = ntohs(sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                            : reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
    std::string addr = sa->sa_family == AF_INET6 && dual_stack_
                           ? "[::]:" + std::to_string(port_) + " (dual-stack)"
                           : format_address(sa);
    addresses_.push_back(addr);
  }

  // ---- event loop ----------------------------------------------------------------------------

  void run() {
    std::vector<epoll_event> events(512);
    auto next_sweep = SteadyClock::now() + tick_;
    while (!stopping_) {
      int timeout = -1;
      if (!timed_.empty()) {
        auto ms = any_deferred_ ? kDeferredDecodeIdle : tick_;
        timeout = static_cast<int>(ms.count());
      }
      int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout);
      if (n < 0) {
        if (errno == EINTR) continue;
        opt_.log("tcp store server: epoll_wait failed: " + errno_text(errno) + "; stopping");
        break;
      }
      for (int i = 0; i < n && !stopping_; ++i) {
        ConnId id = events[i].data.u64;
        uint32_t ev = events[i].events;
        if (id == kListenId) {
          accept_all();
        } else if (id == kWakeId) {
          uint64_t v;
          [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
        } else {
          on_event(id, ev);
        }
      }
      flush_dirty();
      auto now = SteadyClock::now();
      if (!timed_.empty() && (any_deferred_ || now >= next_sweep)) {
        sweep(now);
        flush_dirty();
        next_sweep = now + tick_;
      }
    }
  }

  void accept_all() {
    for (int i = 0; i < 256; ++i) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: accept with the spare one and drop, so the listen socket does
          // not spin; say so at most once a second.
          int err = errno;
          if (spare_fd_ >= 0) {
            ::close(spare_fd_);
            int dropped = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (dropped >= 0) ::close(dropped);
            spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          }
          stats_.errors++;
          auto now = SteadyClock::now();
          if (now - last_fd_log_ >= std::chrono::seconds(1)) {
            last_fd_log_ = now;
            opt_.log("tcp store server: out of file descriptors (" + errno_text(err) + ") with " +
                     std::to_string(conns_.size()) +
                     " connections open; dropping new connections (raise ulimit -n)");
          }
        }
        return;  // EAGAIN or a hard error
      }
      std::string peer = format_address(reinterpret_cast<sockaddr*>(&ss));
      stats_.accepted++;
      if (conns_.size() >= opt_.max_connections) {
        opt_.log("tcp store server: refused connection from " + peer + ": " +
                 std::to_string(conns_.size()) + " connections open (max_connections " +
                 std::to_string(opt_.max_connections) + ")");
        stats_.errors++;
        ::close(fd);
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ConnId id = next_id_++;
      auto& c = conns_[id];
      c.id = id;
      c.fd = fd;
      c.peer = std::move(peer);
      c.opened = c.last_rx = c.last_tx_progress = SteadyClock::now();
      epoll_event ev{};
      ev.events = c.interest = EPOLLIN | EPOLLRDHUP;
      ev.data.u64 = id;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        opt_.log("tcp store server: epoll_ctl for " + c.peer + " failed: " + errno_text(errno));
        ::close(fd);
        conns_.erase(id);
        continue;
      }
      stats_.open.store(conns_.size());
    }
  }

  Conn* find(ConnId id) {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : &it->second;
  }

  void on_event(ConnId id, uint32_t ev) {
    Conn* c = find(id);
    if (!c) return;
    if (ev & EPOLLERR) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
      close_quietly_or_log(*c, "socket error: " + errno_text(err));
      return;
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
      if (!on_readable(*c)) return;
    }
    if (ev & EPOLLOUT) flush(*c);
  }

  // Reads what the socket has (up to a budget) and executes complete requests as they arrive.
  // Returns false when the connection was closed.
  bool on_readable(Conn& c) {
    std::size_t budget = kReadBudgetPerEvent;
    while (budget > 0 && !c.paused && !c.eof) {
      // Through the loop's buffer, so an idle connection keeps no big buffer of its own.
      ssize_t n = ::recv(c.fd, rbuf_.data(), rbuf_.size(), 0);
      if (n > 0) {
        c.in.append(rbuf_.data(), static_cast<std::size_t>(n));
        c.last_rx = SteadyClock::now();
        budget -= std::min<std::size_t>(budget, static_cast<std::size_t>(n));
        if (!process(c, false)) return false;
        continue;
      }
      if (n == 0) {
        c.eof = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close_quietly_or_log(c, "recv: " + errno_text(errno));
      return false;
    }
    if (c.eof) {
      if (!c.paused && !process(c, true)) return false;
      if (c.in_pending() > 0 && !c.paused) {
        close_with_reason(c, "peer closed the connection in the middle of a request (" +
                                 std::to_string(c.in_pending()) + " bytes of " + head_op(c) +
                                 " buffered)");
        return false;
      }
      if (c.out_pending() == 0 || c.paused) {
        close_conn(c);
        return false;
      }
      update_interest(c);  // flush what is queued, then close
    }
    return true;
  }

  // Executes every complete request in the input buffer. `force` ignores the deferral of a
  // large partial request. Returns false when the connection was closed.
  bool process(Conn& c, bool force) {
    if (!c.dialect) {
      switch (wire::detect_dialect(std::string_view(c.in).substr(c.in_pos))) {
        case wire::Detected::need_more:
          mark_partial(c, c.in_pending() > 0);
          return true;
        case wire::Detected::legacy:
          c.dialect = wire::Dialect::legacy;
          stats_.legacy++;
          break;
        case wire::Detected::modern:
          c.dialect = wire::Dialect::modern;
          stats_.modern++;
          break;
      }
    }
    while (!c.paused && c.in_pending() > 0) {
      if (!force && c.defer_until > 0 && c.in_pending() < c.defer_until) {
        set_deferred(c, true);
        break;
      }
      if (c.in_pending() == c.decoded_at) break;  // nothing new since the last need_more
      std::string_view view = std::string_view(c.in).substr(c.in_pos);
      auto d = wire::decode_request(*c.dialect, view, opt_.limits);
      if (d.status == wire::Status::error) {
        std::string reason = d.error;
        if (c.requests == 0 && *c.dialect == wire::Dialect::legacy && !view.empty() &&
            view[0] == 0 && view.size() >= 5)
          reason += " (a first byte 0 read as a legacy SET; a torch >= 2.1 client would mean"
                    " its VALIDATE magic was wrong)";
        if (d.error.rfind("unknown opcode", 0) == 0)
          reason += "; bytes start " + printable(std::string(view.substr(0, 16)));
        close_with_reason(c, reason);
        return false;
      }
      if (d.status == wire::Status::need_more) {
        if (view.size() > request_cap_) {
          close_with_reason(c, head_op(c) + " request exceeds " + std::to_string(request_cap_) +
                                   " bytes without completing");
          return false;
        }
        c.defer_until = view.size() >= kDeferDecodeFrom ? view.size() + view.size() / 2 : 0;
        c.decoded_at = view.size();
        set_deferred(c, false);
        mark_partial(c, true);
        break;
      }
      c.defer_until = 0;
      c.decoded_at = 0;
      c.partial = false;
      set_deferred(c, false);
      c.in_pos += d.consumed;
      c.requests++;
      stats_.requests++;
      if (auto why = execute(c, d.request)) {
        close_with_reason(c, *why);
        return false;
      }
      stats_.keys.store(keyspace_.num_keys());
      if (c.out_pending() > kOutputHigh) pause(c, true);
    }
    if (c.in_pos == c.in.size()) {
      c.in.clear();
      if (c.in.capacity() > kKeepBuffer) c.in.shrink_to_fit();
      c.in_pos = 0;
      mark_partial(c, false);
    } else if (c.in_pos > 64 * 1024 && c.in_pos * 2 > c.in.size()) {
      c.in.erase(0, c.in_pos);
      c.in_pos = 0;
    }
    return true;
  }

  std::optional<std::string> execute(Conn& c, const wire::Request& req) {
    if (*c.dialect == wire::Dialect::modern) {
      if (req.op == wire::Op::validate) {
        if (req.u32 != wire::kValidateMagic) {
          char buf[16];
          std::snprintf(buf, sizeof buf, "0x%08X", req.u32);
          return std::string("VALIDATE with a wrong magic ") + buf;
        }
        c.validated = true;
        return std::nullopt;
      }
      if (!c.validated) return "first request is " + std::string(wire::to_string(req.op)) +
                               ", not VALIDATE (torch >= 2.1 servers close such clients)";
    }
    return keyspace_.execute(c.id, *c.dialect, req);
  }

  // ---- output --------------------------------------------------------------------------------

  void send_to(ConnId id, std::string_view bytes) {
    Conn* c = find(id);
    if (!c) return;
    c->out.append(bytes.data(), bytes.size());
    if (!c->dirty) {
      c->dirty = true;
      dirty_.push_back(id);
    }
  }

  void flush_dirty() {
    // flush() may resume a paused connection, whose requests may queue output for others.
    while (!dirty_.empty()) {
      auto batch = std::move(dirty_);
      dirty_.clear();
      for (ConnId id : batch) {
        Conn* c = find(id);
        if (!c) continue;
        c->dirty = false;
        flush(*c);
      }
    }
  }

  // Writes what the socket takes now; the rest waits for EPOLLOUT. Returns false when closed.
  bool flush(Conn& c) {
    while (c.out_pending() > 0) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.out_pending(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out_pos += static_cast<std::size_t>(n);
        c.last_tx_progress = SteadyClock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      close_quietly_or_log(c, "send: " + errno_text(errno));
      return false;
    }
    if (c.out_pos == c.out.size()) {
      c.out.clear();
      if (c.out.capacity() > kKeepBuffer) c.out.shrink_to_fit();
      c.out_pos = 0;
    } else if (c.out_pos > 1024 * 1024 && c.out_pos * 2 > c.out.size()) {
      c.out.erase(0, c.out_pos);
      c.out_pos = 0;
    }
    if (c.out_pending() > kOutputHardCap) {
      close_with_reason(c, std::to_string(c.out_pending() >> 20) +
                               " MiB of replies queued for a peer that does not read them");
      return false;
    }
    if (c.eof && c.out_pending() == 0) {
      close_conn(c);
      return false;
    }
    if (c.paused && c.out_pending() < kOutputLow) {
      pause(c, false);
      if (!process(c, false)) return false;
      if (c.out_pending() > 0 && !c.dirty) {
        c.dirty = true;
        dirty_.push_back(c.id);
      }
    }
    set_timed(c);
    update_interest(c);
    return true;
  }

  void pause(Conn& c, bool on) {
    c.paused = on;
    update_interest(c);
  }

  void update_interest(Conn& c) {
    uint32_t want = 0;
    if (!c.paused && !c.eof) want |= EPOLLIN | EPOLLRDHUP;
    if (c.out_pending() > 0) want |= EPOLLOUT;
    if (want == c.interest) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = c.id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    c.interest = want;
  }

  // ---- timers (stalled requests, stalled readers, deferred decodes) --------------------------

  void mark_partial(Conn& c, bool on) {
    c.partial = on;
    set_timed(c);
  }

  void set_deferred(Conn& c, bool on) {
    c.deferred = on;
    if (on) any_deferred_ = true;
    set_timed(c);
  }

  void set_timed(Conn& c) {
    bool timed = c.partial || c.deferred || c.out_pending() > kOutputStall;
    if (timed) timed_.insert(c.id);
    else timed_.erase(c.id);
  }

  void sweep(SteadyClock::time_point now) {
    any_deferred_ = false;
    std::vector<ConnId> ids(timed_.begin(), timed_.end());
    for (ConnId id : ids) {
      Conn* c = find(id);
      if (!c) {
        timed_.erase(id);
        continue;
      }
      if (c->deferred) {
        if (now - c->last_rx >= kDeferredDecodeIdle) {
          if (!process(*c, true)) continue;
        } else {
          any_deferred_ = true;
        }
      }
      if (c->partial && !c->paused && now - c->last_rx >= opt_.stalled_request_timeout) {
        close_with_reason(*c, "stalled mid-request: " + std::to_string(c->in_pending()) +
                                  " bytes of " + head_op(*c) +
                                  " buffered and nothing received for " +
                                  seconds(now - c->last_rx));
        continue;
      }
      if (c->out_pending() > kOutputStall &&
          now - c->last_tx_progress >= opt_.stalled_request_timeout) {
        close_with_reason(*c, "peer reads nothing: " + std::to_string(c->out_pending() >> 20) +
                                  " MiB of replies queued and no progress for " +
                                  seconds(now - c->last_tx_progress));
        continue;
      }
      set_timed(*c);
    }
  }

  // ---- closing -------------------------------------------------------------------------------

  std::string head_op(const Conn& c) const {
    if (c.in_pending() == 0) return "no request";
    uint8_t byte = static_cast<uint8_t>(c.in[c.in_pos]);
    if (!c.dialect) return "an undetected-dialect request";
    auto op = wire::op_from_byte(*c.dialect, byte);
    return op ? std::string("a ") + wire::to_string(*op) : "opcode " + std::to_string(byte);
  }

  static std::string seconds(SteadyClock::duration d) {
    return rendezvous::seconds_text(std::chrono::duration<double>(d).count());
  }

  // The one log line for a connection closed because of what it sent.
  void close_with_reason(Conn& c, const std::string& reason) {
    opt_.log("tcp store server: closed connection from " + c.peer + " (dialect " +
             (c.dialect ? wire::to_string(*c.dialect) : "undetected") + ", requests " +
             std::to_string(c.requests) + ", open " +
             seconds(SteadyClock::now() - c.opened) + "): " + reason);
    stats_.errors++;
    close_conn(c);
  }

  // A reset or EOF between requests is a client going away; in the middle of one it is worth a
  // line.
  void close_quietly_or_log(Conn& c, const std::string& reason) {
    if (c.in_pending() > 0) close_with_reason(c, reason + " in the middle of " + head_op(c));
    else close_conn(c);
  }

  void close_conn(Conn& c) {
    ConnId id = c.id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    keyspace_.forget(id);
    timed_.erase(id);
    conns_.erase(id);
    stats_.open.store(conns_.size());
  }

  TcpStoreServerOptions opt_;
  detail::ServerKeyspace keyspace_;
  std::size_t request_cap_ = 0;
  std::vector<char> rbuf_ = std::vector<char>(kReadChunk);
  std::chrono::milliseconds tick_{100};

  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1, spare_fd_ = -1;
  int bind_errno_ = 0;
  bool dual_stack_ = false;
  uint16_t port_ = 0;
  std::vector<std::string> addresses_;

  std::thread thread_;
  std::mutex stop_mu_;
  bool stopped_ = false;
  std::atomic<bool> stopping_{false};

  std::unordered_map<ConnId, Conn> conns_;
  ConnId next_id_ = 2;
  std::vector<ConnId> dirty_;
  std::unordered_set<ConnId> timed_;
  bool any_deferred_ = false;
  SteadyClock::time_point last_fd_log_{};

  struct {
    std::atomic<uint64_t> accepted{0}, open{0}, legacy{0}, modern{0}, errors{0}, requests{0},
        keys{0};
  } stats_;
};

}  // namespace

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  auto server = std::make_unique<Server>(options);
  server->start();
  return server;
}

}  // namespace ncclsmoke::rendezvous
