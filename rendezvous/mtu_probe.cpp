#include "rendezvous/mtu_probe.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "rendezvous/net.h"

namespace ncclsmoke::rendezvous {
// Named, not anonymous: in a unity build this file shares a unit with dialect_probe.cpp (Fd,
// Prober) and peer_watch.cpp (kMagic).
namespace mtu_wire {

// Datagrams: a probe is "NSMU", kind 1, 3 zero bytes, seq, sender rank (all uint32, network
// order), then zeros up to its size; the ack is "NSMU", kind 2, 3 zero bytes, seq, responder rank,
// the size received, the responder's interface MTU.
constexpr char kMagic[4] = {'N', 'S', 'M', 'U'};
constexpr unsigned char kProbe = 1, kAck = 2;
constexpr std::size_t kProbeHeader = 16, kAckSize = 24;
constexpr int kSmallPayload = 548;  // a 576-byte IPv4 packet: every IP path carries it
constexpr int kMaxDatagram = 65535;

void put32(char* at, uint32_t v) {
  v = htonl(v);
  std::memcpy(at, &v, 4);
}
uint32_t get32(const char* at) {
  uint32_t v;
  std::memcpy(&v, at, 4);
  return ntohl(v);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int route_mtu(int fd, int family) {
  int mtu = 0;
  socklen_t len = sizeof mtu;
  int rc = family == AF_INET ? ::getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len)
                             : ::getsockopt(fd, IPPROTO_IPV6, IPV6_MTU, &mtu, &len);
  return rc == 0 ? mtu : 0;
}

// Every packet this socket sends has DF set and is never fragmented locally: too big for the
// route's MTU is EMSGSIZE; too big for a hop that drops silently is a datagram that vanishes.
bool set_dont_fragment(int fd, int family) {
  if (family == AF_INET) {
    int v = IP_PMTUDISC_DO;
    return ::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof v) == 0;
  }
  int v = IPV6_PMTUDISC_DO, on = 1;
  bool ok = ::setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v, sizeof v) == 0;
  [[maybe_unused]] int rc = ::setsockopt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, &on, sizeof on);
  return ok;
}

enum class Sent { ok, too_big, refused };

// One prober: a connected UDP socket towards the peer's echo.
class Prober {
 public:
  Prober(int fd, int self, int peer) : fd_(fd), self_(self), peer_(peer), buf_(kMaxDatagram) {}

  int peer_mtu() const { return peer_mtu_; }

  // Sends each size not yet acked (`copies` datagrams each), waits up to `per_try` for the acks,
  // `tries` times, by `deadline`. acked[i] says whether sizes[i] crossed. `first_rtt_s`, when not
  // null and still < 0, receives the first ack's round trip.
  Sent exchange(const std::vector<int>& sizes, int tries, int copies, Millis per_try,
                Deadline deadline, std::vector<bool>& acked, double* first_rtt_s = nullptr) {
    acked.assign(sizes.size(), false);
    std::map<uint32_t, std::size_t> index;  // seq -> which size
    std::size_t left = sizes.size();
    for (int t = 0; t < tries && left > 0 && !expired(deadline); ++t) {
      auto sent_at = Clock::now();
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        if (acked[i]) continue;
        for (int c = 0; c < copies; ++c) {
          uint32_t seq = next_seq_++;
          index[seq] = i;
          std::memcpy(buf_.data(), kMagic, 4);
          buf_[4] = static_cast<char>(kProbe);
          buf_[5] = buf_[6] = buf_[7] = 0;
          put32(buf_.data() + 8, seq);
          put32(buf_.data() + 12, static_cast<uint32_t>(self_));
          ssize_t n = ::send(fd_, buf_.data(), static_cast<std::size_t>(sizes[i]),
                             MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n < 0 && errno == EMSGSIZE) return Sent::too_big;
          if (n < 0 && errno == ECONNREFUSED) return Sent::refused;
          // EAGAIN / ENOBUFS: this copy is lost like a dropped packet; the next try resends.
        }
      }
      auto until = earliest(sent_at + per_try, deadline);
      for (int polls = 0; left > 0 && polls < 10000; ++polls) {
        pollfd p{fd_, POLLIN, 0};
        int n = ::poll(&p, 1, poll_timeout_ms(until));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;               // this try's wait is over
        for (int k = 0; k < 256; ++k) {  // drain what is there, bounded
          char ack[kAckSize + 8];
          ssize_t got = ::recv(fd_, ack, sizeof ack, MSG_DONTWAIT);
          if (got < 0) {
            if (errno == EINTR) continue;
            if (errno == ECONNREFUSED) return Sent::refused;
            if (errno == EMSGSIZE) return Sent::too_big;
            break;  // EAGAIN: drained
          }
          if (static_cast<std::size_t>(got) != kAckSize || std::memcmp(ack, kMagic, 4) != 0 ||
              static_cast<unsigned char>(ack[4]) != kAck ||
              static_cast<int>(get32(ack + 12)) != peer_)
            continue;
          auto it = index.find(get32(ack + 8));
          if (it == index.end() || acked[it->second]) continue;
          if (static_cast<int>(get32(ack + 16)) != sizes[it->second]) continue;  // truncated
          acked[it->second] = true;
          --left;
          peer_mtu_ = static_cast<int>(get32(ack + 20));
          if (first_rtt_s && *first_rtt_s < 0) *first_rtt_s = seconds_since(sent_at);
        }
        if (expired(until)) break;
      }
    }
    return Sent::ok;
  }

 private:
  int fd_;
  int self_, peer_;
  std::vector<char> buf_;
  uint32_t next_seq_ = 1;
  int peer_mtu_ = 0;
};

bool is_loopback(const std::string& ip) {
  sockaddr_storage ss{};
  if (!fill_sockaddr(ip, ss)) return false;
  if (ss.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
  return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
}

}  // namespace mtu_wire

const char* to_string(MtuOutcome o) {
  switch (o) {
    case MtuOutcome::skipped:
      return "skipped";
    case MtuOutcome::passed:
      return "passed";
    case MtuOutcome::black_hole:
      return "black_hole";
    case MtuOutcome::learned:
      return "learned";
    case MtuOutcome::no_answer:
      return "no_answer";
    case MtuOutcome::cut:
      return "cut";
  }
  return "skipped";
}

int open_mtu_echo(const std::string& bind_ip, uint16_t port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (bind_ip.empty() || !fill_sockaddr(bind_ip, ss, port, &len)) return -1;
  int fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void answer_mtu_probes(int fd, int rank, int interface_mtu, int answer_up_to,
                       double drop_probability) {
  if (fd < 0) return;
  thread_local std::vector<char> buf(mtu_wire::kMaxDatagram);
  for (int k = 0; k < 256; ++k) {  // bounded: the poll loop comes back for the rest
    sockaddr_storage from{};
    socklen_t flen = sizeof from;
    // MSG_TRUNC: the datagram's real length, so a truncated read still reports what arrived.
    ssize_t got = ::recvfrom(fd, buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC,
                             reinterpret_cast<sockaddr*>(&from), &flen);
    if (got < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: nothing more (an ICMP error on an ack we sent is dropped too)
    }
    if (static_cast<std::size_t>(got) < mtu_wire::kProbeHeader ||
        std::memcmp(buf.data(), mtu_wire::kMagic, 4) != 0 ||
        static_cast<unsigned char>(buf[4]) != mtu_wire::kProbe)
      continue;
    if (answer_up_to > 0 && got > answer_up_to) continue;
    if (drop_probability > 0) {
      thread_local std::mt19937 rng(std::random_device{}());
      if (std::uniform_real_distribution<double>(0, 1)(rng) < drop_probability) continue;
    }
    char ack[mtu_wire::kAckSize] = {};
    std::memcpy(ack, mtu_wire::kMagic, 4);
    ack[4] = static_cast<char>(mtu_wire::kAck);
    std::memcpy(ack + 8, buf.data() + 8, 4);  // the seq, as it came
    mtu_wire::put32(ack + 12, static_cast<uint32_t>(rank));
    mtu_wire::put32(ack + 16, static_cast<uint32_t>(got));
    mtu_wire::put32(ack + 20, static_cast<uint32_t>(std::max(interface_mtu, 0)));
    [[maybe_unused]] auto n = ::sendto(fd, ack, sizeof ack, MSG_DONTWAIT | MSG_NOSIGNAL,
                                       reinterpret_cast<sockaddr*>(&from), flen);
  }
}

int interface_mtu_of(const std::string& ip, std::string* name) {
  sockaddr_storage ss{};
  if (!fill_sockaddr(ip, ss)) return 0;
  std::string ifname = interface_of(reinterpret_cast<const sockaddr*>(&ss));
  if (name) *name = ifname;
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return 0;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::memcpy(req.ifr_name, ifname.c_str(), ifname.size() + 1);
  int mtu = ::ioctl(fd, SIOCGIFMTU, &req) == 0 ? req.ifr_mtu : 0;
  ::close(fd);
  return mtu;
}

bool same_host_path(const std::string& local_ip, const std::string& peer_ip) {
  return local_ip == peer_ip || mtu_wire::is_loopback(local_ip) || mtu_wire::is_loopback(peer_ip);
}

MtuProbeResult probe_path_mtu(int self, int peer, const std::string& local_ip,
                              const std::string& peer_ip, uint16_t port, Millis rtt_hint,
                              Deadline deadline) {
  auto start = Clock::now();
  MtuProbeResult r;
  r.path.from = self;
  r.path.to = peer;
  r.path.to_address = peer_ip;
  auto done = [&](MtuOutcome o) {
    r.outcome = o;
    r.duration_s = seconds_since(start);
    return r;
  };
  sockaddr_storage dst{}, src{};
  socklen_t dlen = 0, slen = 0;
  if (!fill_sockaddr(peer_ip, dst, port, &dlen)) return done(MtuOutcome::skipped);
  const int family = dst.ss_family;
  mtu_wire::Fd s{::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  if (s.fd < 0 || !mtu_wire::set_dont_fragment(s.fd, family)) return done(MtuOutcome::skipped);
  // From our mesh address, so the packets take the path the transports' will.
  if (fill_sockaddr(local_ip, src, 0, &slen) && src.ss_family == family) {
    [[maybe_unused]] int rc = ::bind(s.fd, reinterpret_cast<sockaddr*>(&src), slen);
  }
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&dst), dlen) != 0)
    return done(MtuOutcome::skipped);
  r.path.local_mtu = mtu_wire::route_mtu(s.fd, family);
  interface_mtu_of(local_ip, &r.path.interface);
  if (r.path.local_mtu <= 0) return done(MtuOutcome::skipped);
  const int overhead = family == AF_INET ? 28 : 48;  // IP + UDP headers
  const int max_payload = mtu_wire::kMaxDatagram - (family == AF_INET ? 28 : 8);

  auto clamp_try = [](Millis m) { return std::clamp(m, Millis{100}, Millis{500}); };
  Millis per_try = clamp_try(rtt_hint * 8);
  mtu_wire::Prober p(s.fd, self, peer);
  std::vector<bool> acked;

  // 1. Small: does UDP cross at all, and what is the peer's MTU?
  double rtt = -1;
  if (p.exchange({mtu_wire::kSmallPayload}, 4, 2, per_try, deadline, acked, &rtt) ==
      mtu_wire::Sent::refused)
    return done(MtuOutcome::no_answer);
  if (!acked[0]) return done(expired(deadline) ? MtuOutcome::cut : MtuOutcome::no_answer);
  per_try = clamp_try(
      std::max(rtt_hint, std::chrono::duration_cast<Millis>(std::chrono::duration<double>(rtt))) *
      8);
  r.path.peer_mtu = p.peer_mtu();
  r.path.probed_mtu =
      r.path.peer_mtu > 0 ? std::min(r.path.local_mtu, r.path.peer_mtu) : r.path.local_mtu;
  const int full = std::min(r.path.probed_mtu - overhead, max_payload);
  if (full <= mtu_wire::kSmallPayload) {
    r.path.path_mtu = r.path.probed_mtu;
    return done(MtuOutcome::passed);
  }
  auto learned = [&] {
    r.path.path_mtu = mtu_wire::route_mtu(s.fd, family);
    return done(MtuOutcome::learned);
  };

  // 2. Full: a packet as large as both ends believe the path carries, 4 copies a try (random
  // loss is not a black hole: at 30% loss each way all 20 copies vanish with p ~ 1e-6), and the
  // small one again as the control (a path that went dark altogether is not a black hole either).
  mtu_wire::Sent sent = p.exchange({full, mtu_wire::kSmallPayload}, 5, 4, per_try, deadline, acked);
  if (sent == mtu_wire::Sent::too_big) return learned();
  if (sent == mtu_wire::Sent::refused) return done(MtuOutcome::no_answer);
  if (acked[0]) {
    r.path.path_mtu = r.path.probed_mtu;
    return done(MtuOutcome::passed);
  }
  if (expired(deadline)) return done(MtuOutcome::cut);
  if (!acked[1]) return done(MtuOutcome::no_answer);

  // 3. A black hole: the largest size that crosses, up to 15 sizes in flight per round (two
  // copies each, against a lost datagram), the full size again as the control.
  int lo = mtu_wire::kSmallPayload, hi = full;
  for (int round = 0; round < 8 && hi - lo > 1 && !expired(deadline); ++round) {
    std::vector<int> sizes;
    const int k = std::min(15, hi - lo - 1);
    for (int j = 1; j <= k; ++j) {
      int v = lo + static_cast<int>(static_cast<long long>(hi - lo) * j / (k + 1));
      if (v > lo && v < hi && (sizes.empty() || sizes.back() != v)) sizes.push_back(v);
    }
    sizes.push_back(full);
    sent = p.exchange(sizes, 1, 2, per_try, deadline, acked);
    if (sent == mtu_wire::Sent::too_big) return learned();
    if (sent == mtu_wire::Sent::refused) break;
    if (acked.back()) {  // the full size crossed after all: not a black hole
      r.path.path_mtu = r.path.probed_mtu;
      return done(MtuOutcome::passed);
    }
    int new_lo = lo;
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i)
      if (acked[i]) new_lo = std::max(new_lo, sizes[i]);
    int new_hi = hi;
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i)
      if (!acked[i] && sizes[i] > new_lo) new_hi = std::min(new_hi, sizes[i]);
    lo = new_lo;
    hi = new_hi;
  }
  r.path.path_mtu = lo + overhead;
  return done(MtuOutcome::black_hole);
}

}  // namespace ncclsmoke::rendezvous
