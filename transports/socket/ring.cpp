#include "transports/socket/ring.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transports/reduce.h"
#include "transports/ring_schedule.h"

namespace ncclsmoke::transports::sock {
namespace {

constexpr uint32_t kOpMagic = 0x5241534eu;  // "NSAR" little-endian
constexpr std::size_t kHdr = 24;

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

struct Cursor {
  int t = 0;          // step: 0 .. 2(n-1)-1, then done
  std::size_t k = 0;  // chunk index within the step's segment
};

// The shared ring schedule (transports/ring_schedule.h) plus this engine's striping: chunk k of
// every step rides connection k % nconn, so each connection walks its own subsequence.
struct Plan {
  Plan(const RingConfig& cfg, std::size_t count, std::size_t elem_size, int conns)
      : s(cfg.rank, cfg.world_size, count, std::max<std::size_t>(1, cfg.chunk_bytes / elem_size)),
        steps(s.steps()), nconn(conns), es(elem_size) {}
  RingSchedule s;
  int steps = 0, nconn = 1;
  std::size_t es = 4;  // element size

  void settle(Cursor& cur, bool send_side, int c) const {
    while (cur.t < steps) {
      if (cur.k < (send_side ? s.send_chunks(cur.t) : s.recv_chunks(cur.t))) return;
      ++cur.t;
      cur.k = static_cast<std::size_t>(c);
    }
  }
  uint64_t stream_bytes(bool send_side, int c) const {
    uint64_t total = 0;
    for (int t = 0; t < steps; ++t) {
      int seg = send_side ? s.send_segment(t) : s.recv_segment(t);
      for (std::size_t k = static_cast<std::size_t>(c); k < s.chunks(seg); k += nconn)
        total += s.chunk(seg, k).len * es;
    }
    return total;
  }
};

struct Tx {
  int fd = -1;
  Cursor cur;
  std::size_t off = 0;  // bytes of the current chunk already sent
  std::size_t hdr_off = 0;
  bool blocked = false;  // last send hit EAGAIN; wait for POLLOUT
  unsigned char hdr[kHdr];
  uint64_t sent = 0, total = 0;
};

struct Rx {
  int fd = -1;
  Cursor cur;
  std::size_t got = 0;      // bytes of the current chunk received
  std::size_t reduced = 0;  // elements of the current chunk reduced
  std::size_t ready = 0;    // bytes of the current chunk final (forwardable)
  std::size_t hdr_got = 0;
  bool blocked = false;
  unsigned char hdr[kHdr];
  unsigned char* stage = nullptr;
  uint64_t received = 0, total = 0;
};

class Engine {
 public:
  Engine(const RingLinks& links, const RingConfig& cfg, const void* send, void* recv,
         std::size_t count, DType dtype, uint64_t seq, std::vector<unsigned char>& staging,
         RingStats& stats)
      : stats_(stats), cfg_(cfg), send_(static_cast<const unsigned char*>(send)),
        recv_(static_cast<unsigned char*>(recv)), dtype_(dtype), count_(count), seq_(seq),
        in_place_(send == recv),
        p_(cfg, count, dtype_size(dtype), static_cast<int>(links.to_next.size())) {
    if (in_place_) {
      std::size_t need = static_cast<std::size_t>(p_.nconn) * p_.s.chunk_elems() * p_.es;
      if (staging.size() < need) staging.resize(need);
    }
    unsigned char hdr[kHdr];
    put_u32(hdr, kOpMagic);
    put_u32(hdr + 4, static_cast<uint32_t>(dtype));
    put_u64(hdr + 8, seq);
    put_u64(hdr + 16, count);
    tx_.resize(p_.nconn);
    rx_.resize(p_.nconn);
    for (int c = 0; c < p_.nconn; ++c) {
      Tx& x = tx_[c];
      x.fd = links.to_next[c];
      x.cur.k = static_cast<std::size_t>(c);
      p_.settle(x.cur, true, c);
      std::memcpy(x.hdr, hdr, kHdr);
      x.total = p_.stream_bytes(true, c);
      Rx& y = rx_[c];
      y.fd = links.from_prev[c];
      y.cur.k = static_cast<std::size_t>(c);
      p_.settle(y.cur, false, c);
      if (in_place_)
        y.stage = staging.data() + static_cast<std::size_t>(c) * p_.s.chunk_elems() * p_.es;
      y.total = p_.stream_bytes(false, c);
    }
  }

  void run(Deadline deadline) {
    std::vector<pollfd> fds;
    fds.reserve(2 * tx_.size());
    for (;;) {
      bool progress = false;
      for (int c = 0; c < p_.nconn; ++c) progress |= pump_rx(c);
      for (int c = 0; c < p_.nconn; ++c) progress |= pump_tx(c);
      if (all_done()) {
        note_wait(-1, "");
        return;
      }
      if (rendezvous::expired(deadline)) fail(RingFault::timeout, rx_all_done(), -1, 0, "deadline passed");
      if (progress) continue;

      fds.clear();
      for (const Rx& y : rx_)
        if (!rx_done(y)) fds.push_back({y.fd, POLLIN, 0});
      std::size_t first_tx = fds.size();
      bool tx_stuck = false;  // some connection to the next rank refused ready bytes
      // A connection to the next rank with bytes still to carry is watched for a close from its
      // far end even while it waits on data to forward: the next rank never writes to it, so
      // readable means gone. Once our part is sent, the next rank may finish and close first.
      for (const Tx& x : tx_) {
        short ev = tx_done(x) ? 0 : static_cast<short>(POLLRDHUP | (x.blocked ? POLLOUT : 0));
        fds.push_back({ev ? x.fd : -1, ev, 0});
        tx_stuck |= ev && x.blocked;
      }
      if (tx_stuck) note_wait(p_.s.next(), "send to");
      else if (first_tx > 0) note_wait(p_.s.prev(), "recv from");
      auto before = Clock::now();
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - before);
      int ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60000));
      int rc = ::poll(fds.data(), fds.size(), ms);
      // The wait goes to the side that held this rank up (ring.h, "Link accounting").
      if (tx_stuck) stats_.send_blocked += Clock::now() - before;
      else if (first_tx > 0) stats_.recv_wait += Clock::now() - before;
      if (rc < 0) {
        if (errno == EINTR) continue;
        fail(RingFault::io_error, false, -1, errno, "poll failed");
      }
      std::size_t i = 0;
      for (Rx& y : rx_)
        if (!rx_done(y)) {
          if (fds[i].revents) y.blocked = false;
          ++i;
        }
      for (int c = 0; c < p_.nconn; ++c) {
        short ev = fds[first_tx + c].revents;
        if (ev & (POLLRDHUP | POLLIN | POLLERR | POLLHUP)) inspect_next(c);
        if (ev & POLLOUT) tx_[c].blocked = false;
      }
    }
  }

 private:
  // Only a change is reported (RingConfig::on_wait): a poll loop may turn thousands of times.
  void note_wait(int rank, const char* what) {
    if (!cfg_.on_wait || !*cfg_.on_wait || rank == waiting_on_) return;
    waiting_on_ = rank;
    (*cfg_.on_wait)(rank, what);
  }

  bool tx_done(const Tx& x) const { return x.hdr_off == kHdr && x.cur.t >= p_.steps; }
  bool rx_done(const Rx& y) const { return y.hdr_got == kHdr && y.cur.t >= p_.steps; }
  bool rx_all_done() const {
    return std::all_of(rx_.begin(), rx_.end(), [&](const Rx& y) { return rx_done(y); });
  }
  bool all_done() const {
    return rx_all_done() &&
           std::all_of(tx_.begin(), tx_.end(), [&](const Tx& x) { return tx_done(x); });
  }

 public:
  RingProgress progress() const {
    RingProgress p;
    for (const Rx& y : rx_) {
      p.received += y.received;
      p.to_receive += y.total;
    }
    for (const Tx& x : tx_) {
      p.sent += x.sent;
      p.to_send += x.total;
    }
    return p;
  }

 private:
  [[noreturn]] void fail(RingFault f, bool next_side, int conn, int err, const std::string& what) {
    throw RingFailure(f, next_side, conn, err, what, progress());
  }

  // Bytes of tx chunk (t, k) that are final: everything at step 0, else what the matching
  // receive (same connection index, step t-1, same chunk) has completed.
  std::size_t tx_ready(int c, std::size_t chunk_bytes) const {
    const Tx& x = tx_[c];
    if (x.cur.t == 0) return chunk_bytes;
    const Rx& y = rx_[c];
    if (y.hdr_got < kHdr) return 0;
    int t = x.cur.t - 1;
    if (y.cur.t > t || (y.cur.t == t && y.cur.k > x.cur.k)) return chunk_bytes;
    if (y.cur.t == t && y.cur.k == x.cur.k) return y.ready;
    return 0;
  }

  bool pump_tx(int c) {
    Tx& x = tx_[c];
    if (x.blocked || tx_done(x)) return false;
    iovec iov[2];
    int niov = 0;
    std::size_t hdr_left = kHdr - x.hdr_off;
    if (hdr_left) iov[niov++] = {x.hdr + x.hdr_off, hdr_left};
    std::size_t chunk_bytes = 0;
    if (x.cur.t < p_.steps) {
      RingSpan ck = p_.s.chunk(p_.s.send_segment(x.cur.t), x.cur.k);
      chunk_bytes = ck.len * p_.es;
      std::size_t avail = tx_ready(c, chunk_bytes) - x.off;
      if (avail > 0 && (hdr_left || avail >= std::min(cfg_.min_send_bytes, chunk_bytes - x.off))) {
        const unsigned char* base = x.cur.t == 0 ? send_ : recv_;
        iov[niov++] = {const_cast<unsigned char*>(base + ck.off * p_.es + x.off),
                       avail};
      }
    }
    if (niov == 0) return false;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = niov;
    ssize_t n = ::sendmsg(x.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        x.blocked = true;
        return false;
      }
      if (errno == EINTR) return true;
      int err = errno;
      fail(err == EPIPE || err == ECONNRESET ? RingFault::closed : RingFault::io_error, true, c,
           err, "send failed");
    }
    std::size_t m = static_cast<std::size_t>(n);
    std::size_t h = std::min(m, hdr_left);
    x.hdr_off += h;
    m -= h;
    if (m) {
      x.off += m;
      x.sent += m;
      if (x.off == chunk_bytes) {
        x.off = 0;
        x.cur.k += p_.nconn;
        p_.settle(x.cur, true, c);
      }
    }
    return true;
  }

  void check_header(int c) {
    const Rx& y = rx_[c];
    uint32_t magic = get_u32(y.hdr);
    uint32_t dt = get_u32(y.hdr + 4);
    uint64_t seq = get_u64(y.hdr + 8), count = get_u64(y.hdr + 16);
    if (magic != kOpMagic)
      fail(RingFault::protocol, false, c, 0, "sent no all-reduce header where one was due (the streams are out of step)");
    if (seq != seq_ || count != count_ || dt != static_cast<uint32_t>(dtype_)) {
      DType theirs = dt == static_cast<uint32_t>(DType::bfloat16) ? DType::bfloat16 : DType::float32;
      fail(RingFault::protocol, false, c, 0,
           fmt::format("called all-reduce #{} with {} {} elements, this rank all-reduce #{} with "
                       "{} {} elements (every rank must call with the same count and dtype)",
                       seq, count, to_string(theirs), seq_, count_, to_string(dtype_)));
    }
  }

  bool pump_rx(int c) {
    Rx& y = rx_[c];
    if (y.blocked || rx_done(y)) return false;
    iovec iov[2];
    int niov = 0;
    std::size_t hdr_left = kHdr - y.hdr_got;
    if (hdr_left) iov[niov++] = {y.hdr + y.hdr_got, hdr_left};
    std::size_t chunk_bytes = 0, chunk_byte_off = 0;
    bool reduce = false;
    if (y.cur.t < p_.steps) {
      RingSpan ck = p_.s.chunk(p_.s.recv_segment(y.cur.t), y.cur.k);
      chunk_bytes = ck.len * p_.es;
      chunk_byte_off = ck.off * p_.es;
      reduce = p_.s.reduces(y.cur.t);
      unsigned char* target = reduce && in_place_ ? y.stage : recv_ + chunk_byte_off;
      iov[niov++] = {target + y.got, chunk_bytes - y.got};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = niov;
    ssize_t n = ::recvmsg(y.fd, &msg, MSG_DONTWAIT);
    if (n == 0) fail(RingFault::closed, false, c, 0, "connection closed");
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        y.blocked = true;
        return false;
      }
      if (errno == EINTR) return true;
      int err = errno;
      fail(err == ECONNRESET ? RingFault::closed : RingFault::io_error, false, c, err,
           "receive failed");
    }
    std::size_t m = static_cast<std::size_t>(n);
    std::size_t h = std::min(m, hdr_left);
    y.hdr_got += h;
    m -= h;
    if (h && y.hdr_got == kHdr) check_header(c);
    if (m) {
      y.got += m;
      y.received += m;
      if (reduce) {
        std::size_t whole = y.got / p_.es;
        std::size_t fresh = whole - y.reduced;
        if (fresh) {
          unsigned char* dst = recv_ + chunk_byte_off + y.reduced * p_.es;
          const unsigned char* src = in_place_ ? y.stage + y.reduced * p_.es
                                               : send_ + chunk_byte_off + y.reduced * p_.es;
          reduce_sum(dst, src, fresh, dtype_);
          y.reduced = whole;
        }
        y.ready = y.reduced * p_.es;
      } else {
        y.ready = y.got;
      }
      if (y.got == chunk_bytes) {
        y.got = y.reduced = y.ready = 0;
        y.cur.k += p_.nconn;
        p_.settle(y.cur, false, c);
      }
    }
    return true;
  }

  // The next rank never writes on our connection to it: readable there means closed or broken.
  void inspect_next(int c) {
    Tx& x = tx_[c];
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(x.fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0)
      fail(err == ECONNRESET || err == EPIPE ? RingFault::closed : RingFault::io_error, true, c,
           err, "connection failed");
    char b;
    ssize_t n = ::recv(x.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) fail(RingFault::closed, true, c, 0, "connection closed");
    if (n > 0) fail(RingFault::protocol, true, c, 0, "wrote on a connection it should only read (the streams are out of step)");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      fail(errno == ECONNRESET ? RingFault::closed : RingFault::io_error, true, c, errno,
           "connection failed");
    x.blocked = false;  // POLLERR/POLLHUP without a pending error: let send() report it
  }

  RingStats& stats_;
  RingConfig cfg_;
  const unsigned char* send_;
  unsigned char* recv_;
  DType dtype_;
  std::size_t count_;
  uint64_t seq_;
  bool in_place_;
  int waiting_on_ = -1;
  Plan p_;
  std::vector<Tx> tx_;
  std::vector<Rx> rx_;
};

}  // namespace

void RingAllreduce::run(const RingLinks& links, const RingConfig& cfg, const void* send,
                        void* recv, std::size_t count, DType dtype, uint64_t seq,
                        Deadline deadline) {
  Engine e(links, cfg, send, recv, count, dtype, seq, staging_, stats_);
  try {
    e.run(deadline);
  } catch (const RingFailure& f) {
    stats_.bytes_sent += f.progress.sent;
    stats_.bytes_received += f.progress.received;
    throw;
  }
  RingProgress p = e.progress();
  stats_.bytes_sent += p.sent;
  stats_.bytes_received += p.received;
  ++stats_.collectives;
}

}  // namespace ncclsmoke::transports::sock
