#include "transports/socket/socket_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "rendezvous/bounded_json.h"
#include "rendezvous/connect.h"
#include "rendezvous/net.h"
#include "rendezvous/rank_ref.h"
#include "rendezvous/tcp_info.h"
#include "transports/socket/ifname.h"
#include "transports/socket/ring.h"

namespace ncclsmoke::transports {
namespace {

using nlohmann::json;
using rendezvous::deadline_after;
using rendezvous::expired;
using rendezvous::remaining;
using rendezvous::StoreError;
using sock::NetInterface;

// Connection handshake: the dialling rank says who it is and how it was configured; the
// accepting rank checks that it is the expected neighbour and answers with its own rank, so
// accept order does not matter and a wrong peer is caught on both ends.
constexpr uint32_t kHelloMagic = 0x4b52534eu;  // "NSRK"
constexpr uint32_t kAckMagic = 0x4b41534eu;    // "NSAK"
constexpr uint32_t kVersion = 1;
constexpr std::size_t kHello = 32, kAck = 16;
// Published in place of an address by a rank whose set-up failed before it had one (no usable
// interface, a bad option), followed by why: its previous rank, which waits for that key, fails at
// once naming it, instead of waiting out the deadline.
constexpr std::string_view kSetupFailedMark = "!setup-failed: ";
// A rank waiting for its previous rank's connections looks for that rank's word in the store
// (one or two store round trips) once they are this late, then this often.
constexpr std::chrono::milliseconds kPrevLookAfter{500};
constexpr std::chrono::milliseconds kPrevLookEvery{250};
// A connect to the next rank is tried in slices this long, its word looked for between them.
constexpr std::chrono::milliseconds kConnectSlice{1000};
// Measured on loopback (2 ranks, 64 MiB): 1 MiB chunks beat 128 KiB..4 MiB, and the kernel's
// buffer autotuning beat every fixed SO_SNDBUF/SO_RCVBUF from 256 KiB to 8 MiB.
constexpr std::size_t kDefaultChunk = 1 << 20;
constexpr int kDefaultBufBytes = 0;  // SO_SNDBUF/SO_RCVBUF ask; 0 leaves autotuning on
constexpr std::size_t kMaxPendingAccepts = 64;

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

using rendezvous::seconds_text_fine;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Asks for large buffers; past the administrator's cap (net.core.*mem_max) the kernel clamps,
// and CAP_NET_ADMIN may force. 0 keeps the kernel's autotuning.
void set_buffers(int fd, int bytes) {
  if (bytes <= 0) return;
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

int get_int_opt(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof v;
  return ::getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

std::string local_end(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return rendezvous::format_address(reinterpret_cast<sockaddr*>(&ss), len);
}

std::string remote_end(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return rendezvous::format_address(reinterpret_cast<sockaddr*>(&ss), len);
}

enum class Io { ok, eof, timeout, error };

// Moves exactly `len` bytes on a socket before the deadline, whatever its blocking mode.
Io send_exact(int fd, const void* buf, std::size_t len, Deadline deadline, int& err) {
  const char* p = static_cast<const char*>(buf);
  while (len) {
    ssize_t n = ::send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      err = errno;
      return Io::error;
    }
    if (expired(deadline)) return Io::timeout;
    pollfd pfd{fd, POLLOUT, 0};
    ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(1, remaining(deadline).count())));
  }
  return Io::ok;
}

Io recv_exact(int fd, void* buf, std::size_t len, Deadline deadline, int& err) {
  char* p = static_cast<char*>(buf);
  while (len) {
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return Io::eof;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      err = errno;
      return Io::error;
    }
    if (expired(deadline)) return Io::timeout;
    pollfd pfd{fd, POLLIN, 0};
    ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(1, remaining(deadline).count())));
  }
  return Io::ok;
}

ErrorKind parse_kind(const std::string& s) {
  for (ErrorKind k : {ErrorKind::unavailable, ErrorKind::init_failed, ErrorKind::timeout,
                      ErrorKind::peer_lost, ErrorKind::other})
    if (s == to_string(k)) return k;
  return ErrorKind::other;
}

class SocketTransport final : public Transport {
 public:
  ~SocketTransport() override { close(); }

  std::string name() const override { return "socket"; }

  void open(const TransportContext& ctx, Deadline deadline) override {
    ctx_ = ctx;
    auto start = Clock::now();
    if (ctx.world_size < 1 || ctx.rank < 0 || ctx.rank >= ctx.world_size)
      throw TransportError(ErrorKind::init_failed,
                           who() + ": rank " + std::to_string(ctx.rank) + " is outside world size " +
                               std::to_string(ctx.world_size));
    try {
      read_options();
      choose_address();
    } catch (const TransportError& e) {
      if (ctx.store && ctx.world_size > 1) {
        try {
          ctx.store->set("addr/" + std::to_string(ctx.rank), std::string(kSetupFailedMark) + e.what());
        } catch (const std::exception&) {
        }
      }
      throw;
    }
    n_ = ctx.world_size;
    next_ = (ctx.rank + 1) % n_;
    prev_ = (ctx.rank - 1 + n_) % n_;
    if (n_ == 1) {
      opened_ = true;
      return;
    }
    if (!ctx.store)
      throw TransportError(ErrorKind::init_failed, who() + ": the socket transport needs a store");
    try {
      listen_now();
      publish_and_connect(deadline, start);
      accept_from_prev(deadline, start);
      read_acks(deadline, start);
    } catch (const TransportError& e) {
      leave_abort_record(e);
      close();
      throw;
    } catch (...) {
      close();
      throw;
    }
    close_fd(listen_fd_);
    for (int fd : links_.to_next) locals_.push_back(local_end(fd));
    for (int fd : links_.from_prev) remotes_.push_back(remote_end(fd));
    sndbuf_ = get_int_opt(links_.to_next[0], SOL_SOCKET, SO_SNDBUF);
    rcvbuf_ = get_int_opt(links_.from_prev[0], SOL_SOCKET, SO_RCVBUF);
    opened_ = true;
  }

  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 Deadline deadline) override {
    (void)op;  // sum is the only operation
    if (broken_)
      throw TransportError(broken_kind_,
                           who() + ": the socket transport is unusable after an earlier error: " +
                               broken_message_,
                           broken_peer_);
    if (!opened_)
      throw TransportError(ErrorKind::other, who() + ": all-reduce on a socket transport that is not open");
    if (n_ == 1) {
      if (send != recv && count) std::memmove(recv, send, count * dtype_size(dtype));
      ++collectives_;
      return;
    }
    auto start = Clock::now();
    uint64_t seq = ++seq_;
    sock::RingConfig cfg;
    cfg.rank = ctx_.rank;
    cfg.world_size = n_;
    cfg.chunk_bytes = chunk_;
    cfg.on_wait = &ctx_.set_wait_state;
    try {
      ring_.run(links_, cfg, send, recv, count, dtype, seq, deadline);
    } catch (const sock::RingFailure& f) {
      TransportError e = explain(f, count * dtype_size(dtype), seq, start);
      give_up(e);
      throw e;
    }
    ++collectives_;
  }

  json identify() override {
    json j = {{"interface", iface_},
              {"address", address_},
              {"address_source", address_source_},
              {"ifname_rule", rule_text_.empty() ? "default" : rule_text_},
              {"nconn", nconn_},
              {"chunk_bytes", chunk_},
              {"world_size", n_},
              {"rank", ctx_.rank}};
    if (!matched_.empty()) j["matched_interfaces"] = matched_;
    if (n_ > 1) {
      j["listen"] = listen_;
      j["peers"] = {{"send_to", {{"rank", next_}, {"host", ctx_.host_of(next_)},
                                 {"address", next_addr_}, {"local", locals_}}},
                    {"recv_from", {{"rank", prev_}, {"host", ctx_.host_of(prev_)},
                                   {"address", prev_addr_}, {"remote", remotes_}}}};
      // Read now when still connected: with autotuning the kernel grows them while data flows.
      bool live = !links_.to_next.empty() && links_.to_next[0] >= 0;
      j["socket_buffers"] = {
          {"requested", buf_bytes_},
          {"sndbuf", live ? get_int_opt(links_.to_next[0], SOL_SOCKET, SO_SNDBUF) : sndbuf_},
          {"rcvbuf", live ? get_int_opt(links_.from_prev[0], SOL_SOCKET, SO_RCVBUF) : rcvbuf_}};
      // Where this rank waited, over the transport's life (ring.h, "Link accounting"): the rank
      // behind a slow egress has by far the largest send_blocked_s.
      const sock::RingStats& st = ring_.stats();
      j["link_stats"] = {
          {"to_next", {{"rank", next_}, {"host", ctx_.host_of(next_)},
                       {"send_blocked_s", std::chrono::duration<double>(st.send_blocked).count()},
                       {"bytes", st.bytes_sent}}},
          {"from_prev", {{"rank", prev_}, {"host", ctx_.host_of(prev_)},
                         {"recv_wait_s", std::chrono::duration<double>(st.recv_wait).count()},
                         {"bytes", st.bytes_received}}},
          {"collectives", collectives_}};
    } else {
      j["listen"] = nullptr;
      j["peers"] = json::object();
      j["link_stats"] = {{"collectives", collectives_}};  // no links in a world of one
    }
    if (broken_) j["error"] = broken_message_;
    return j;
  }

  // The contract's typed link stats (transport.h), the same figures as identify()'s link_stats.
  std::optional<LinkStats> link_stats() const override {
    if (n_ <= 1) return std::nullopt;  // no links in a world of one
    const sock::RingStats& st = ring_.stats();
    LinkStats ls;
    ls.next_rank = next_;
    ls.send_blocked_s = std::chrono::duration<double>(st.send_blocked).count();
    ls.bytes_sent = static_cast<std::int64_t>(st.bytes_sent);
    ls.prev_rank = prev_;
    ls.recv_wait_s = std::chrono::duration<double>(st.recv_wait).count();
    ls.bytes_received = static_cast<std::int64_t>(st.bytes_received);
    TxTotals tx = tx_totals();
    if (tx.seen) {
      ls.tx_retrans = static_cast<std::int64_t>(tx.retrans);
      ls.tx_segs_out = static_cast<std::int64_t>(tx.segs_out);
      ls.tx_rtt_us = tx.rtt_us;
    }
    return ls;
  }

  void close() override {
    tx_at_close_ = tx_totals();  // the kernel forgets a connection's counters with it
    for (int& fd : links_.to_next) close_fd(fd);
    for (int& fd : links_.from_prev) close_fd(fd);
    close_fd(listen_fd_);
    opened_ = false;
  }

 private:
  std::string who() const {
    return fmt::format("{}", rendezvous::RankRef{ctx_.rank, ctx_.host_of(ctx_.rank)});
  }
  // "rank 3 (host node-b, 10.0.0.8:41000)": the peer and the address it published.
  std::string peer(int r) const {
    std::string addr = r == next_ ? next_addr_ : r == prev_ ? prev_addr_ : "";
    std::string host = ctx_.host_of(r);
    if (addr.empty()) return fmt::format("{}", rendezvous::RankRef{r, host});
    return fmt::format("rank {} (host {}, {})", r, host, addr);
  }

  // Declared in socket_options.cpp; checked at the door, and again here for a context a test built.
  void read_options() {
    try {
      nconn_ = static_cast<int>(ctx_.options.get_int("socket.nconn"));
      chunk_ = static_cast<std::size_t>(ctx_.options.get_size("socket.chunk"));
      buf_bytes_ = static_cast<int>(ctx_.options.get_size("socket.bufsize"));
      ctx_.options.validate("socket");
    } catch (const OptionError& e) {
      throw TransportError(ErrorKind::init_failed, who() + ": " + e.what());
    }
  }

  void choose_address() {
    std::string source = "socket.ifname";
    rule_text_ = ctx_.options.get_string("socket.ifname");
    if (rule_text_.empty()) {
      const char* env = std::getenv("NCCL_SOCKET_IFNAME");
      if (env && *env) {
        rule_text_ = env;
        source = "NCCL_SOCKET_IFNAME";
      }
    }
    auto ifs = sock::list_interfaces();
    if (!rule_text_.empty()) {
      try {
        auto choice = sock::select_interface(ifs, sock::parse_ifname_rule(rule_text_));
        take(choice.chosen, source);
        matched_ = choice.matched;
      } catch (const TransportError& e) {
        throw TransportError(ErrorKind::init_failed,
                             who() + ": " + e.what() + " (rule from " + source + ")");
      }
      return;
    }
    if (!ctx_.local_address.empty()) {
      const NetInterface* i = sock::interface_owning(ifs, ctx_.local_address);
      if (!i)
        throw TransportError(ErrorKind::init_failed,
                             who() + ": the address this rank reaches the store from (" +
                                 ctx_.local_address + ") is on no local interface (" +
                                 sock::describe_interfaces(ifs) +
                                 "); name one with socket.ifname or NCCL_SOCKET_IFNAME");
      take(*i, "store route");
      return;
    }
    // No hint at all: NCCL's own default order.
    for (const char* rule : {"^docker,lo", "docker", "lo"}) {
      try {
        auto choice = sock::select_interface(ifs, sock::parse_ifname_rule(rule));
        take(choice.chosen, std::string("default (") + rule + ")");
        return;
      } catch (const TransportError&) {
      }
    }
    throw TransportError(ErrorKind::init_failed,
                         who() + ": no usable network interface; available: " +
                             sock::describe_interfaces(ifs));
  }

  void take(const NetInterface& i, const std::string& source) {
    iface_ = i.name;
    address_ = i.address;
    family_ = i.family;
    address_source_ = source;
  }

  void listen_now() {
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (!rendezvous::fill_sockaddr(address_, ss, 0, &len) || ss.ss_family != family_)
      throw TransportError(ErrorKind::init_failed,
                           fmt::format("{}: interface {} has no usable numeric address ('{}')",
                                       who(), iface_, address_));
    listen_fd_ = ::socket(family_, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd_ < 0)
      throw TransportError(ErrorKind::init_failed,
                           who() + ": cannot create a socket: " + std::strerror(errno));
    set_buffers(listen_fd_, buf_bytes_);  // accepted connections inherit them
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
        ::listen(listen_fd_, 64) != 0)
      throw TransportError(ErrorKind::init_failed,
                           who() + ": cannot listen on " + address_ + " (interface " + iface_ +
                               "): " + std::strerror(errno));
    listen_ = local_end(listen_fd_);
  }

  void publish_and_connect(Deadline deadline, Clock::time_point start) {
    std::string key = "addr/" + std::to_string(next_);
    std::string published;
    try {
      ctx_.store->set("addr/" + std::to_string(ctx_.rank), listen_);
      published = ctx_.store->get(key, deadline);
    } catch (const StoreError& e) {
      bool late = e.error_class() == rendezvous::ErrorClass::timed_out;
      throw TransportError(late ? ErrorKind::timeout : ErrorKind::init_failed,
                           who() + ": socket transport set-up " +
                               (late ? "timed out after " + seconds_text_fine(rendezvous::seconds_since(start)) +
                                           " waiting for " + peer(next_) +
                                           " to publish its address (key " + key + ")"
                                     : std::string("could not exchange addresses through the store")) +
                               ": " + e.what(),
                           next_);
    }
    if (published.rfind(kSetupFailedMark, 0) == 0)
      throw TransportError(ErrorKind::init_failed,
                           who() + ": " + peer(next_) + " could not set up its socket transport: " +
                               published.substr(kSetupFailedMark.size()),
                           next_);
    next_addr_ = published;
    std::string host;
    uint16_t port = 0;
    if (!rendezvous::split_host_port(next_addr_, host, port))
      throw TransportError(ErrorKind::init_failed,
                           who() + ": " + peer(next_) + " published an unusable address \"" +
                               next_addr_ + "\"", next_);
    for (int c = 0; c < nconn_; ++c) {
      // The net layer's classified connect, without an exception to re-wrap: its class says
      // whether the deadline ran out (timeout) or the peer could not be reached (init_failed).
      // In slices: between them, the next rank may have said in the store that it gave up (its
      // listener is gone, and a refused connect would otherwise be retried to the deadline).
      const auto connect_start = Clock::now();
      auto conn = rendezvous::try_connect_tcp(host, port, std::min(deadline, deadline_after(kConnectSlice)));
      while (!conn.ok() && !expired(deadline)) {
        if (auto gave = peer_gave_up(next_))
          throw TransportError(ErrorKind::init_failed,
                               who() + ": " + peer(next_) + " gave up before it accepted" +
                                   root_text(next_, *gave) + ": " + gave->why,
                               gave->root);
        conn = rendezvous::try_connect_tcp(host, port, std::min(deadline, deadline_after(kConnectSlice)));
      }
      if (!conn.ok()) {
        bool late = conn.error_class == rendezvous::ErrorClass::timed_out;
        throw TransportError(
            late ? ErrorKind::timeout : ErrorKind::init_failed,
            fmt::format("{}: cannot connect to {} (connection {} of {}) in {}; the last try: {}",
                        who(), peer(next_), c + 1, nconn_,
                        seconds_text_fine(rendezvous::seconds_since(connect_start)), conn.error),
            next_);
      }
      int fd = conn.fd;
      links_.to_next.push_back(fd);
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      set_nonblocking(fd);
      set_buffers(fd, buf_bytes_);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      unsigned char hello[kHello] = {0};
      put_u32(hello, kHelloMagic);
      put_u32(hello + 4, kVersion);
      put_u32(hello + 8, static_cast<uint32_t>(ctx_.rank));
      put_u32(hello + 12, static_cast<uint32_t>(n_));
      put_u32(hello + 16, static_cast<uint32_t>(nconn_));
      put_u32(hello + 20, static_cast<uint32_t>(c));
      put_u32(hello + 24, static_cast<uint32_t>(chunk_));
      int err = 0;
      Io r = send_exact(fd, hello, kHello, deadline, err);
      if (r != Io::ok) {
        if (r != Io::timeout) next_gave_up_in_handshake();
        throw TransportError(r == Io::timeout ? ErrorKind::timeout : ErrorKind::init_failed,
                             who() + ": handshake with " + peer(next_) + " failed after " +
                                 seconds_text_fine(rendezvous::seconds_since(start)) + ": " +
                                 (r == Io::timeout ? "send timed out" : std::strerror(err)),
                             next_);
      }
    }
  }

  // Accepts nconn connections from the previous rank, in any order. Connections that do not
  // speak the handshake are dropped (and mentioned if the deadline passes); one that does but
  // names the wrong rank or configuration fails the set-up.
  void accept_from_prev(Deadline deadline, Clock::time_point start) {
    struct Pending {
      int fd;
      std::string remote;
      unsigned char buf[kHello];
      std::size_t got = 0;
    };
    std::vector<Pending> pending;
    std::vector<std::string> strangers;
    links_.from_prev.assign(nconn_, -1);
    int accepted = 0;
    auto drop = [&](std::size_t i, const std::string& why) {
      strangers.push_back(pending[i].remote + " (" + why + ")");
      ::close(pending[i].fd);
      pending.erase(pending.begin() + static_cast<long>(i));
    };
    // The previous rank may have failed before it could connect: it says so in the store
    // (kSetupFailedMark in place of its address, or its abort record), read every so often once
    // its connection is late (a healthy one comes in milliseconds: no store traffic then).
    auto next_look = Clock::now() + kPrevLookAfter;
    try {
      while (accepted < nconn_) {
        if (accepted == 0 && Clock::now() >= next_look) {
          next_look = Clock::now() + kPrevLookEvery;
          if (auto gave = peer_gave_up(prev_))
            throw TransportError(ErrorKind::init_failed,
                                 who() + ": " + peer(prev_) + " gave up before connecting" +
                                     root_text(prev_, *gave) + ": " + gave->why,
                                 gave->root);
        }
        if (expired(deadline)) {
          std::string msg = who() + ": socket transport set-up timed out after " +
                            seconds_text_fine(rendezvous::seconds_since(start)) + ": " +
                            std::to_string(accepted) + " of " + std::to_string(nconn_) +
                            " connections from " + peer(prev_) + " arrived on " + listen_;
          if (!strangers.empty()) {
            msg += "; dropped connections that did not speak the handshake:";
            for (const auto& s : strangers) msg += " " + s;
          }
          if (!pending.empty()) {
            msg += "; connections that never finished the handshake:";
            for (const auto& p : pending) msg += " " + p.remote;
          }
          throw TransportError(ErrorKind::timeout, msg, prev_);
        }
        std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
        for (const auto& p : pending) fds.push_back({p.fd, POLLIN, 0});
        int ms = static_cast<int>(std::clamp<int64_t>(remaining(deadline).count(), 1,
                                                      kPrevLookEvery.count()));
        if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR)
          throw TransportError(ErrorKind::init_failed, who() + ": poll failed: " + std::strerror(errno));
        for (std::size_t i = pending.size(); i-- > 0;) {
          if (!fds[i + 1].revents) continue;
          Pending& p = pending[i];
          ssize_t n = ::recv(p.fd, p.buf + p.got, kHello - p.got, MSG_DONTWAIT);
          if (n == 0) {
            drop(i, "closed before its handshake");
            continue;
          }
          if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
              drop(i, std::strerror(errno));
            continue;
          }
          p.got += static_cast<std::size_t>(n);
          if (p.got >= 4 && get_u32(p.buf) != kHelloMagic) {
            drop(i, "not an ncclsmoke socket-transport handshake");
            continue;
          }
          if (p.got < kHello) continue;
          check_hello(p.buf, p.remote);
          int conn = static_cast<int>(get_u32(p.buf + 20));
          unsigned char ack[kAck] = {0};
          put_u32(ack, kAckMagic);
          put_u32(ack + 4, static_cast<uint32_t>(ctx_.rank));
          put_u32(ack + 8, static_cast<uint32_t>(conn));
          int err = 0;
          Io r = send_exact(p.fd, ack, kAck, deadline, err);
          if (r != Io::ok)
            throw TransportError(r == Io::timeout ? ErrorKind::timeout : ErrorKind::init_failed,
                                 who() + ": handshake answer to " + peer(prev_) + " failed: " +
                                     (r == Io::timeout ? "timed out" : std::strerror(err)),
                                 prev_);
          links_.from_prev[conn] = p.fd;
          prev_remote_ = p.remote;
          pending.erase(pending.begin() + static_cast<long>(i));
          ++accepted;
        }
        if (fds[0].revents) {
          for (;;) {
            sockaddr_storage ss{};
            socklen_t len = sizeof ss;
            int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            std::string remote = rendezvous::format_address(reinterpret_cast<sockaddr*>(&ss), len);
            if (pending.size() >= kMaxPendingAccepts) {
              ::close(fd);
              strangers.push_back(remote + " (too many pending connections)");
              continue;
            }
            pending.push_back(Pending{fd, remote, {}, 0});
          }
        }
      }
    } catch (...) {
      for (auto& p : pending) ::close(p.fd);
      throw;
    }
    for (auto& p : pending) ::close(p.fd);
    try {
      prev_addr_ = ctx_.store->get("addr/" + std::to_string(prev_), deadline);
    } catch (const StoreError&) {
      prev_addr_ = prev_remote_;
    }
  }

  void check_hello(const unsigned char* b, const std::string& remote) {
    uint32_t version = get_u32(b + 4), rank = get_u32(b + 8), world = get_u32(b + 12),
             nconn = get_u32(b + 16), conn = get_u32(b + 20), chunk = get_u32(b + 24);
    std::string from = "a connection from " + remote + " claiming rank " + std::to_string(rank);
    auto bad = [&](const std::string& why) {
      throw TransportError(ErrorKind::init_failed, who() + ": " + from + " on " + listen_ + ": " + why,
                           static_cast<int>(rank) < n_ ? static_cast<int>(rank) : prev_);
    };
    if (version != kVersion)
      bad("handshake version " + std::to_string(version) + ", this rank speaks " + std::to_string(kVersion));
    if (static_cast<int>(rank) != prev_)
      bad("expected only rank " + std::to_string(prev_) + " (host " + ctx_.host_of(prev_) +
          ") to connect here; two runs sharing one store, or ranks disagreeing on the world size");
    if (static_cast<int>(world) != n_)
      bad("it has world size " + std::to_string(world) + ", this rank " + std::to_string(n_));
    if (static_cast<int>(nconn) != nconn_ || chunk != static_cast<uint32_t>(chunk_))
      bad("it uses socket.nconn=" + std::to_string(nconn) + " socket.chunk=" + std::to_string(chunk) +
          ", this rank socket.nconn=" + std::to_string(nconn_) + " socket.chunk=" +
          std::to_string(chunk_) + " (every rank needs the same options)");
    if (static_cast<int>(conn) >= nconn_ || links_.from_prev[conn] >= 0)
      bad("connection index " + std::to_string(conn) + " is out of range or repeated");
  }

  void read_acks(Deadline deadline, Clock::time_point start) {
    for (int c = 0; c < nconn_; ++c) {
      unsigned char ack[kAck];
      int err = 0;
      Io r = recv_exact(links_.to_next[c], ack, kAck, deadline, err);
      if (r == Io::timeout)
        throw TransportError(ErrorKind::timeout,
                             who() + ": socket transport set-up timed out after " +
                                 seconds_text_fine(rendezvous::seconds_since(start)) + " waiting for " +
                                 peer(next_) + " to answer the handshake on connection " +
                                 std::to_string(c + 1) + " of " + std::to_string(nconn_),
                             next_);
      if (r != Io::ok) {
        next_gave_up_in_handshake();
        throw TransportError(ErrorKind::init_failed,
                             who() + ": " + peer(next_) + " " +
                                 (r == Io::eof ? "closed the connection" : std::strerror(err)) +
                                 " during the handshake",
                             next_);
      }
      uint32_t rank = get_u32(ack + 4), conn = get_u32(ack + 8);
      if (get_u32(ack) != kAckMagic)
        throw TransportError(ErrorKind::init_failed,
                             who() + ": " + next_addr_ + ", published by rank " +
                                 std::to_string(next_) +
                                 ", answered with something that is not an ncclsmoke handshake",
                             next_);
      if (static_cast<int>(rank) != next_ || static_cast<int>(conn) != c)
        throw TransportError(ErrorKind::init_failed,
                             who() + ": dialled " + peer(next_) + " but rank " +
                                 std::to_string(rank) + " answered (connection " +
                                 std::to_string(conn) + ")",
                             next_);
    }
  }

  TransportError explain(const sock::RingFailure& f, std::size_t bytes, uint64_t seq,
                         Clock::time_point start) {
    int p = f.next_side ? next_ : prev_;
    std::string took = seconds_text_fine(rendezvous::seconds_since(start));
    std::string op = "all-reduce #" + std::to_string(seq) + " of " + std::to_string(bytes) + " bytes";
    std::string progress = "this rank received " + std::to_string(f.progress.received) + " of " +
                           std::to_string(f.progress.to_receive) + " bytes from rank " +
                           std::to_string(prev_) + ", sent " + std::to_string(f.progress.sent) +
                           " of " + std::to_string(f.progress.to_send) + " bytes to rank " +
                           std::to_string(next_);
    switch (f.fault) {
      case sock::RingFault::timeout:
        return TransportError(ErrorKind::timeout,
                              who() + ": " + op + " timed out after " + took + " waiting for " +
                                  peer(p) + " (" + progress + ")",
                              p);
      case sock::RingFault::closed:
      case sock::RingFault::io_error: {
        std::string how = f.fault == sock::RingFault::closed
                              ? (f.sys_errno ? "reset the connection (" + std::string(std::strerror(f.sys_errno)) + ")"
                                             : std::string("closed the connection"))
                              : "connection failed: " + std::string(std::strerror(f.sys_errno));
        // A neighbour that gave up first leaves its reason in the store before closing: name
        // the rank that caused it rather than the messenger.
        json root = read_abort_record(p);
        if (root.is_object()) {
          int cause = root.value("peer", -1);
          ErrorKind kind = parse_kind(root.value("kind", "peer_lost"));
          std::string msg = who() + ": " + op + " aborted after " + took + ": " + peer(p) + " " +
                            how + " after it failed: " + root.value("message", "");
          if (cause < 0 || cause == ctx_.rank) {
            // It gave up on this rank (or we disagree on the call). If it timed out waiting for
            // us while we were still waiting on our own upstream, the fault is further up.
            bool rx_pending = f.progress.received < f.progress.to_receive;
            int waiting_on = rx_pending ? prev_ : p;
            cause = kind == ErrorKind::timeout ? waiting_on : p;
            if (kind != ErrorKind::other && kind != ErrorKind::timeout) kind = ErrorKind::peer_lost;
            if (waiting_on != p) msg += "; this rank was itself waiting for " + peer(waiting_on);
          }
          return TransportError(kind, msg + " (" + progress + ")", cause);
        }
        return TransportError(ErrorKind::peer_lost,
                              who() + ": " + peer(p) + " " + how + " during " + op + " after " +
                                  took + " (" + progress + ")",
                              p);
      }
      case sock::RingFault::protocol:
        return TransportError(ErrorKind::other,
                              who() + ": " + op + ": " + peer(p) + " " + f.what() +
                                  (f.next_side ? "" : " (on connection " + std::to_string(f.conn + 1) + ")"),
                              p);
    }
    return TransportError(ErrorKind::other, who() + ": " + op + " failed: " + f.what(), p);
  }

  json read_abort_record(int r) {
    try {
      std::string key = "abort/" + std::to_string(r);
      if (!ctx_.store->check({key})) return nullptr;
      auto j = rendezvous::parse_bounded_or_discarded(ctx_.store->get(key, deadline_after(Millis(1000))),
                                                      rendezvous::kMaxStorePostJsonBytes);
      return j.is_discarded() ? json(nullptr) : j;
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  // The reason this rank gave up, for the neighbours (read_abort_record).
  void leave_abort_record(const TransportError& e) {
    try {
      ctx_.store->set("abort/" + std::to_string(ctx_.rank),
                      json{{"kind", to_string(e.kind())}, {"peer", e.peer()}, {"message", e.what()}}
                          .dump());
    } catch (const std::exception&) {
    }
  }

  // After a failure the transport is done: leave the reason for the neighbours, then close every
  // connection so they stop waiting on this rank at once.
  void give_up(const TransportError& e) {
    broken_ = true;
    broken_kind_ = e.kind();
    broken_message_ = e.what();
    broken_peer_ = e.peer();
    leave_abort_record(e);
    close();
  }

  // Why rank `r` (a neighbour) gave up during set-up, when it said so in the store, and the rank
  // at the root of it: `r` itself when its own set-up failed, else the rank its abort record
  // blames (a neighbour that gave up because its own neighbour did), so the error names the rank
  // that failed, not the one between. nullopt when it said nothing.
  struct GaveUp {
    std::string why;
    int root = -1;
  };
  std::optional<GaveUp> peer_gave_up(int r) {
    try {
      const std::string key = "addr/" + std::to_string(r);
      if (ctx_.store->check({key})) {
        const std::string published = ctx_.store->get(key, deadline_after(Millis(1000)));
        if (published.rfind(kSetupFailedMark, 0) == 0)
          return GaveUp{published.substr(kSetupFailedMark.size()), r};
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
    json record = read_abort_record(r);
    if (!record.is_object()) return std::nullopt;
    int root = r;
    if (auto p = record.find("peer"); p != record.end() && p->is_number_integer()) {
      const auto blamed = p->get<long long>();
      if (blamed >= 0 && blamed < n_ && blamed != ctx_.rank) root = static_cast<int>(blamed);
    }
    return GaveUp{record.value("message", std::string("it gave up")), root};
  }
  // The next rank closed or reset a connection in the handshake: when it said in the store that it
  // gave up (its own set-up, or its other neighbour's), that is the error, naming the root.
  void next_gave_up_in_handshake() {
    if (auto gave = peer_gave_up(next_))
      throw TransportError(ErrorKind::init_failed,
                           who() + ": " + peer(next_) + " gave up during the handshake" +
                               root_text(next_, *gave) + ": " + gave->why,
                           gave->root);
  }
  // " (at the root: rank 2 (host h))" when the neighbour gave up because of another rank.
  std::string root_text(int neighbour, const GaveUp& g) const {
    return g.root == neighbour ? std::string() : " (at the root: " + peer(g.root) + ")";
  }

  TransportContext ctx_;
  int n_ = 1, next_ = 0, prev_ = 0;
  int nconn_ = 1;
  std::size_t chunk_ = kDefaultChunk;
  int buf_bytes_ = kDefaultBufBytes;
  std::string rule_text_, address_source_, iface_, address_, listen_;
  std::vector<std::string> matched_;
  int family_ = AF_INET;
  int listen_fd_ = -1;
  std::string next_addr_, prev_addr_, prev_remote_;
  std::vector<std::string> locals_, remotes_;  // our ends towards next, their ends from prev
  int sndbuf_ = -1, rcvbuf_ = -1;
  sock::RingLinks links_;
  sock::RingAllreduce ring_;
  // TCP_INFO over the connections to the next rank: segments sent and retransmitted (summed), and
  // the largest smoothed RTT. Read live while they are open, else as they were at close().
  struct TxTotals {
    bool seen = false;
    std::uint64_t retrans = 0, segs_out = 0;
    double rtt_us = 0;
  };
  TxTotals tx_at_close_;
  TxTotals tx_totals() const {
    TxTotals t;
    for (int fd : links_.to_next) {
      auto ti = rendezvous::read_tcp_info(fd);
      if (!ti) continue;
      t.seen = true;
      t.retrans += ti->total_retrans;
      t.segs_out += ti->segs_out;
      t.rtt_us = std::max(t.rtt_us, ti->rtt_us);
    }
    return t.seen ? t : tx_at_close_;
  }
  uint64_t seq_ = 0;
  uint64_t collectives_ = 0;  // completed all-reduces
  bool opened_ = false;
  bool broken_ = false;
  ErrorKind broken_kind_ = ErrorKind::other;
  std::string broken_message_;
  int broken_peer_ = -1;
};

}  // namespace

std::unique_ptr<Transport> make_socket_transport() { return std::make_unique<SocketTransport>(); }

}  // namespace ncclsmoke::transports
