#include "rendezvous/peer_watch.h"

#include "rendezvous/tcp_info.h"
#include "rendezvous/rank_ref.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "rendezvous/connect.h"
#include "rendezvous/socket_io.h"
#include "rendezvous/mesh.h"

namespace ncclsmoke::rendezvous {
namespace {

constexpr char kMagic[4] = {'N', 'S', 'P', 'W'};
constexpr char kBye = 'B';
// How long a stopping watch waits for its bye to be acknowledged (linger_until_acknowledged).
constexpr Millis kByeLinger{1500};
// Retransmits since a silent peer was last heard that mark its path lossy, not its process frozen.
constexpr std::int64_t kLossyRetransmits = 3;
constexpr char kLost = 'L';  // + uint32 lost rank + uint32 rank that saw it
constexpr char kHeartbeat = 'H';
constexpr char kSilent = 'S';   // + uint32 rank + uint32 witness + uint32 epoch + uint32 ms
constexpr char kResumed = 'R';  // the same
constexpr char kWait = 'W';     // + uint16 length + body (see the header)
constexpr std::size_t kHelloSize = 8;
constexpr std::size_t kLostSize = 9;
constexpr std::size_t kSilenceSize = 17;
constexpr std::size_t kPhaseMax = 64, kWhatMax = 256;
constexpr std::size_t kOutCap = 64 * 1024;  // per connection; see "Every message is queued"

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u16(std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); }
uint16_t read_u16(const char* p) {
  uint16_t v = 0;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t ms_of(double s) { return static_cast<uint32_t>(std::clamp(s * 1000.0, 0.0, 4e9)); }

uint32_t read_u32(const char* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, 4);
  return v;
}

std::string watch_hello(int rank) {
  std::string h(kMagic, 4);
  uint32_t r = static_cast<uint32_t>(rank);
  h.append(reinterpret_cast<const char*>(&r), 4);
  return h;
}

std::string errno_how(int err) {
  switch (err) {
    case ECONNRESET: return "reset (ECONNRESET)";
    case ETIMEDOUT: return "timed out (ETIMEDOUT)";
    case EPIPE: return "broken pipe (EPIPE)";
    case EHOSTUNREACH: return "host unreachable (EHOSTUNREACH)";
    default: return std::string("failed: ") + std::strerror(err);
  }
}

class PeerWatchImpl final : public PeerWatch {
 public:
  PeerWatchImpl(const PeerWatchOptions& opt, std::function<void(const LostPeer&)> on_lost)
      : opt_(opt), on_lost_(std::move(on_lost)), start_(Clock::now()) {}

  ~PeerWatchImpl() override {
    stop();
    {
      std::lock_guard<std::mutex> joining(join_mu_);
      if (thread_.joinable()) thread_.join();
    }
    close_owned();
  }

  void setup(Store& store) {
    check_options();
    auto listening = listen_in_range(opt_.bind_address, opt_.port_min, opt_.port_max, 1024,
                                     "peer watch: rank " + std::to_string(opt_.rank));
    listen_fd_ = listening.fd;
    port_ = listening.port;
    event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0)
      throw StoreError(ErrorClass::other, "peer watch: rank " + std::to_string(opt_.rank) +
                                              " cannot create an eventfd: " + std::strerror(errno));
    std::string advertise =
        opt_.advertise_address.empty() ? opt_.bind_address : opt_.advertise_address;
    if (advertise.empty()) advertise = "127.0.0.1";
    address_ = join_host_port(advertise, port_);

    auto peers = watch_peers(opt_.rank, opt_.ranks, opt_.full_threshold, opt_.random_peers);
    std::vector<int> dial;
    for (int p : peers) {
      expected_.insert(p);
      if (p > opt_.rank) dial.push_back(p);
      else expected_in_.insert(p);
    }
    thread_ = std::thread([this] { loop(); });
    std::vector<std::future<void>> dials;
    std::set<int> missing(dial.begin(), dial.end());
    // A store that fails or freezes now (rank 0 frozen or killed while the watch is set up) must
    // not cost the watch: the connections already made (a lower rank dials us) keep watching, and
    // are exactly what names the frozen rank 0. The peers not reached are unwatched, with why.
    try {
      store.set("watch/addr/" + std::to_string(opt_.rank), address_);

      // Poll the addresses with check() (never a blocking WAIT: a TcpStore holds its connection for
      // the whole WAIT, and one silent peer must not delay dialling the others).
      Millis pause{5};
      while (!missing.empty()) {
        for (auto it = missing.begin(); it != missing.end();) {
          std::string key = "watch/addr/" + std::to_string(*it);
          if (store.check({key})) {
            std::string addr = store.get(key, earliest(opt_.deadline, deadline_after(Millis{2000})));
            int peer = *it;
            dials.push_back(std::async(std::launch::async, [this, peer, addr] { dial_peer(peer, addr); }));
            it = missing.erase(it);
          } else {
            ++it;
          }
        }
        if (missing.empty() || expired(opt_.deadline)) break;
        std::this_thread::sleep_for(std::min(pause, remaining(opt_.deadline)));
        pause = std::min(pause * 2, Millis{100});
      }
    } catch (const StoreError& e) {
      for (int p : missing)
        note_unwatched(p, "the store failed while the watch was set up, after " +
                              seconds_text(seconds_since(start_)) + ": " + e.what());
      missing.clear();
    }
    for (int p : missing)
      note_unwatched(p, "rank " + std::to_string(p) + " never published watch/addr/" +
                            std::to_string(p) + " within " + seconds_text(seconds_since(start_)));
    for (auto& d : dials) d.get();

    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, opt_.deadline, [this] {
      for (int p : expected_in_)
        if (!watched_.count(p)) return false;
      return true;
    });
    for (int p : expected_in_)
      if (!watched_.count(p) && !why_.count(p))
        why_[p] = "rank " + std::to_string(p) + " never connected to " + address_ + " within " +
                  seconds_text(seconds_since(start_));
  }

  // Waits at most ~150 ms for the watch thread to say bye; if it is held up (a callback blocked
  // on a lock the caller holds), returns anyway and the destructor joins it later.
  void stop() override {
    if (!stopped_.exchange(true)) {
      stopping_ = true;
      wake();
    }
    std::lock_guard<std::mutex> joining(join_mu_);
    if (!thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) return;
    bool done;
    {
      std::unique_lock<std::mutex> lock(mu_);
      done = cv_.wait_for(lock, Millis{150}, [this] { return finished_; });
    }
    if (done) {
      thread_.join();
      close_owned();
    }
  }

  std::vector<int> watched() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return {watched_.begin(), watched_.end()};
  }
  std::vector<int> unwatched() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> out;
    for (int p : expected_)
      if (!watched_.count(p)) out.push_back(p);
    return out;
  }
  std::map<int, std::string> unwatched_reasons() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<int, std::string> out;
    for (int p : expected_)
      if (!watched_.count(p)) out[p] = why_.count(p) ? why_.at(p) : "not connected";
    return out;
  }
  std::vector<LostPeer> lost() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }
  std::string listen_address() const override { return address_; }

  std::vector<SilentPeer> silent() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return silent_;
  }
  std::vector<SilentPeer> resumed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return resumed_;
  }
  std::map<int, std::set<int>> silence_witnesses() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<int, std::set<int>> out;
    for (const auto& [k, by] : witness_)
      for (const auto& [s, w] : by)
        if (w.silent) out[k].insert(s);
    return out;
  }

  // Its own lock, which the watch thread only ever try_locks: an application calling this in a
  // hot loop must never delay a heartbeat (a starved watch thread looks frozen to its peers).
  void set_wait_state(const WaitState& state) override {
    WaitState w = state;
    if (w.phase.size() > kPhaseMax) w.phase.resize(kPhaseMax);
    if (w.what.size() > kWhatMax) w.what.resize(kWhatMax);
    if (w.since == Clock::time_point{}) w.since = Clock::now();
    {
      std::lock_guard<std::mutex> lock(wait_mu_);
      my_wait_ = std::move(w);
      wait_version_.store(wait_version_.load() + 1);  // only written under wait_mu_
    }
    if (!wait_wake_.exchange(true)) wake();
  }
  std::map<int, WaitState> peer_wait_states() const override {
    std::map<int, WaitState> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out = peer_waits_;
    }
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (wait_version_.load() != 0) out[opt_.rank] = my_wait_;
    return out;
  }

 private:
  struct Conn {
    int fd = -1;
    bool bye = false;
    std::string buf;  // received, not yet parsed
    std::string out;  // queued, not yet sent (whole frames only are ever added)
    Clock::time_point last_heard{};
    bool silent = false;        // our own judgement of this peer
    uint32_t epoch = 0;         // our silent/resumed transitions about it (for relays)
    uint64_t wait_version = 0;  // the version of our wait state it has been sent
    uint64_t retrans_heard = 0;  // its connection's retransmits (TCP_INFO) when last heard
    int send_errno = 0;  // a hard send error: the kernel hands it out once, so the read that
                         // follows sees only EOF and must report this instead
  };
  struct Pending {
    int fd = -1;
    Deadline deadline;
    std::string buf;
  };
  struct Witness {
    uint32_t epoch = 0;
    bool silent = false;
    double silent_for_s = 0;
  };

  void check_options() const {
    auto bad = [&](const std::string& why) {
      throw StoreError(ErrorClass::invalid, "peer watch: rank " + std::to_string(opt_.rank) + ": " +
                                                why);
    };
    if (opt_.heartbeat_interval.count() <= 0)
      bad("heartbeat_interval must be > 0 ms, got " +
          std::to_string(opt_.heartbeat_interval.count()) + " ms");
    if (opt_.silence_timeout.count() < 0 ||
        (opt_.silence_timeout.count() > 0 && opt_.silence_timeout < 2 * opt_.heartbeat_interval))
      bad("silence_timeout must be 0 (off) or at least twice heartbeat_interval (" +
          std::to_string(opt_.heartbeat_interval.count()) + " ms), got " +
          std::to_string(opt_.silence_timeout.count()) + " ms");
    if (opt_.wait_state_interval.count() < 0)
      bad("wait_state_interval must be >= 0 ms, got " +
          std::to_string(opt_.wait_state_interval.count()) + " ms");
  }

  std::string host_of(int r) const {
    auto it = opt_.hosts.find(r);
    return it == opt_.hosts.end() ? "" : it->second;
  }
  std::string peer_name(int r) const { return rank_text(r, host_of(r)); }

  void wake() {
    if (event_fd_ < 0) return;
    uint64_t one = 1;
    ssize_t n = ::write(event_fd_, &one, sizeof one);
    (void)n;
  }

  void note_unwatched(int peer, std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    why_[peer] = std::move(why);
  }

  void dial_peer(int peer, const std::string& addr) {
    std::string host;
    uint16_t port = 0;
    if (!split_host_port(addr, host, port)) {
      note_unwatched(peer, peer_name(peer) + " published a malformed address '" + addr + "'");
      return;
    }
    auto t0 = Clock::now();
    int fd = -1;
    try {
      Backoff quick;
      quick.initial = Millis{20};
      quick.max = Millis{200};
      fd = connect_tcp(host, port, opt_.deadline, quick).fd;
    } catch (const StoreError& e) {
      note_unwatched(peer, e.what());
      return;
    }
    std::string reply;
    std::string why;
    if (!send_all(fd, watch_hello(opt_.rank), opt_.deadline)) why = "could not send the handshake";
    else if (auto e = recv_exact(fd, kHelloSize, reply, opt_.deadline); !e.empty())
      why = "handshake: " + e;
    if (why.empty() && reply.compare(0, 4, kMagic, 4) != 0)
      why = "something other than an ncclsmoke peer watch answered";
    if (why.empty() && static_cast<int>(read_u32(reply.data() + 4)) != peer)
      why = "rank " + std::to_string(read_u32(reply.data() + 4)) + " answered instead";
    if (!why.empty()) {
      // The acceptor may already count us as watched: say bye, so giving up is not a loss.
      char b = kBye;
      ::send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      note_unwatched(peer, rank_text(opt_.rank) + " -> " + peer_name(peer) + " at " +
                               addr + ": " + why + " after " + seconds_text_fine(seconds_since(t0)));
      return;
    }
    int flags = ::fcntl(fd, F_GETFL, 0);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      handoff_.emplace_back(peer, fd);
      watched_.insert(peer);
    }
    handoff_waiting_ = true;
    wake();
  }

  // --- everything below runs on the watch thread ---

  static int ms_until(Clock::time_point t, Clock::time_point now) {
    auto ms = std::chrono::duration_cast<Millis>(t - now).count() + 1;
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
  }

  void loop() {
    next_heartbeat_ = Clock::now();
    while (true) {
      take_handoffs();
      if (stopping_) break;
      auto now = Clock::now();
      run_timers(now);  // after the previous round's reads: what piled up is heard first
      now = Clock::now();
      std::vector<pollfd> fds;
      fds.push_back({event_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      int timeout = std::min(1000, ms_until(next_heartbeat_, now));
      for (auto& p : pending_) {
        fds.push_back({p.fd, POLLIN, 0});
        timeout = std::min(timeout, ms_until(p.deadline, now));
      }
      bool wait_due = false;
      uint64_t version = wait_version_seen();
      std::vector<int> order;
      for (auto& [peer, c] : conns_) {
        short ev = POLLIN | POLLRDHUP;
        if (!c.out.empty()) ev |= POLLOUT;
        fds.push_back({c.fd, ev, 0});
        order.push_back(peer);
        if (c.wait_version != version) wait_due = true;
        if (silence_on() && !c.silent && !c.bye)
          timeout = std::min(timeout, ms_until(c.last_heard + opt_.silence_timeout, now));
      }
      if (wait_due) timeout = std::min(timeout, ms_until(next_wait_send_, now));
      int rc = ::poll(fds.data(), fds.size(), timeout);
      if (rc < 0) {
        for (auto& f : fds) f.revents = 0;
        if (errno != EINTR) std::this_thread::sleep_for(Millis{10});
      }
      if (fds[0].revents) {
        uint64_t v = 0;
        ssize_t n = ::read(event_fd_, &v, sizeof v);
        (void)n;
      }
      std::size_t i = 2;
      std::vector<Pending> keep;
      now = Clock::now();
      for (auto& p : pending_) {  // exactly those polled: accept_all() adds to pending_ below
        short ev = fds[i++].revents;
        if (ev && serve_pending(p)) continue;  // done with it (moved or closed)
        if (now >= p.deadline) {
          ::close(p.fd);
          continue;
        }
        keep.push_back(std::move(p));
      }
      pending_ = std::move(keep);
      if (fds[1].revents) accept_all();  // polled from the next round on
      for (int peer : order) {
        short ev = fds[i++].revents;
        if (!ev) continue;
        auto it = conns_.find(peer);
        if (it == conns_.end()) continue;  // lost while serving another (a relay cannot do that)
        if (ev & POLLOUT) flush(it->second);
        if (ev & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) read_conn(peer);
      }
    }
    say_bye();
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    cv_.notify_all();
  }

  bool silence_on() const { return opt_.silence_timeout.count() > 0; }

  uint64_t wait_version_seen() const { return wait_version_.load(); }

  // Heartbeats, our wait state, and the silence check, each when due.
  void run_timers(Clock::time_point now) {
    if (now >= next_heartbeat_) {
      for (auto& [peer, c] : conns_)
        if (c.out.empty()) queue(c, std::string(1, kHeartbeat));  // queued data beats anyway
      next_heartbeat_ = now + opt_.heartbeat_interval;
    }
    if (now >= next_wait_send_) {
      // Cleared only when a send is due: while rate-limited, set_wait_state() does not wake us
      // again (the poll timeout brings us back at next_wait_send_).
      wait_wake_.store(false);
      std::string msg;
      uint64_t version = 0;
      {
        std::unique_lock<std::mutex> lock(wait_mu_, std::try_to_lock);
        if (lock.owns_lock()) {
          version = wait_version_.load();
          if (version != 0) msg = encode_wait(my_wait_, now);
        } else {
          // The application holds it (a burst of set_wait_state): try again shortly, never wait.
          wait_wake_.store(true);
          next_wait_send_ = now + Millis{10};
        }
      }
      bool tried = false;
      if (version != 0)
        for (auto& [peer, c] : conns_) {
          if (c.wait_version == version) continue;
          tried = true;
          if (queue(c, msg)) c.wait_version = version;  // else retried at the next turn
        }
      if (tried) next_wait_send_ = now + std::max(opt_.wait_state_interval, Millis{10});
    }
    if (!silence_on()) return;
    std::vector<int> quiet;
    for (auto& [peer, c] : conns_)
      if (!c.silent && !c.bye && now - c.last_heard >= opt_.silence_timeout) quiet.push_back(peer);
    for (int peer : quiet) {
      // Read before judging: if this thread was itself stopped (SIGSTOP of our process, a long
      // stall), what the peer sent meanwhile is still unread in the socket.
      read_conn(peer);
      auto it = conns_.find(peer);
      if (it == conns_.end() || it->second.silent) continue;  // lost meanwhile, or judged
      Conn& c = it->second;
      now = std::max(now, Clock::now());
      if (now - c.last_heard < opt_.silence_timeout) continue;
      double for_s = std::chrono::duration<double>(now - c.last_heard).count();
      c.silent = true;
      ++c.epoch;
      set_witness(peer, opt_.rank, Witness{c.epoch, true, for_s});
      relay_silence(kSilent, peer, opt_.rank, c.epoch, for_s, -1);
      SilentPeer sp;
      sp.rank = peer;
      sp.silent_for_s = for_s;
      sp.seen_by = opt_.rank;
      // The path loses packets when our heartbeats to it went unacknowledged: several
      // retransmits since we last heard it, or one with the retransmission timer backing off
      // now. A single retransmit alone is not loss: a frozen peer's kernel acknowledges late
      // (delayed ACK, nothing of its own to send), so a tail-loss probe may fire once.
      if (auto ti = read_tcp_info(c.fd)) {
        auto delta = static_cast<std::int64_t>(
            ti->total_retrans - std::min<uint64_t>(ti->total_retrans, c.retrans_heard));
        bool rto_now = ti->unrecovered_rtos > 0 || ti->backoff > 0;
        sp.retransmits = (delta >= kLossyRetransmits || (delta > 0 && rto_now)) ? delta : 0;
      }
      sp.how = sp.retransmits > 0
                   ? "sent nothing for " + seconds_text_fine(for_s) + " while our connection to it "
                         "retransmitted " + std::to_string(sp.retransmits) +
                         " segments: the path loses packets"
                   : "sent nothing for " + seconds_text_fine(for_s) +
                         " (not even a heartbeat): stopped (SIGSTOP, a debugger), hung, swapping "
                         "or overloaded";
      update_silence(peer, sp);
    }
  }

  static std::string encode_wait(const WaitState& w, Clock::time_point now) {
    std::string body;
    put_u32(body, static_cast<uint32_t>(static_cast<int32_t>(w.waiting_on)));
    put_u32(body, ms_of(std::chrono::duration<double>(now - w.since).count()));
    body.push_back(static_cast<char>(w.phase.size()));
    body += w.phase;
    put_u16(body, static_cast<uint16_t>(w.what.size()));
    body += w.what;
    std::string msg(1, kWait);
    put_u16(msg, static_cast<uint16_t>(body.size()));
    return msg + body;
  }

  // False when the frame did not fit (dropped whole: the peer reads nothing, it is frozen).
  bool queue(Conn& c, const std::string& msg) {
    if (c.out.size() + msg.size() > kOutCap) return false;
    c.out += msg;
    flush(c);
    return true;
  }

  void flush(Conn& c) {
    while (!c.out.empty()) {
      ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(0, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        // The read that follows reports it (the socket forgot it). Not EPIPE: that is a reset
        // after the peer's FIN, and the read's EOF says better what the peer did.
        if (errno != EPIPE) c.send_errno = errno;
        c.out.clear();
      }
      return;
    }
  }

  void take_handoffs() {
    if (!handoff_waiting_.exchange(false) && !stopping_) return;  // no lock in the common case
    std::vector<std::pair<int, int>> got;
    {
      std::lock_guard<std::mutex> lock(mu_);
      got.swap(handoff_);
    }
    for (auto& [peer, fd] : got) {
      Conn c;
      c.fd = fd;
      c.last_heard = Clock::now();
      conns_[peer] = c;
    }
  }

  void accept_all() {
    for (int k = 0; k < 64; ++k) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;
      // Bound the fds: only the expected diallers (plus slack for retries) may be mid-handshake.
      if (pending_.size() >= expected_in_.size() + 4) {
        ::close(fd);
        continue;
      }
      Pending p;
      p.fd = fd;
      p.deadline = std::max(opt_.deadline, deadline_after(Millis{3000}));
      pending_.push_back(std::move(p));
    }
  }

  // True when the pending connection is finished with (became a Conn, or was closed).
  bool serve_pending(Pending& p) {
    char buf[kHelloSize];
    ssize_t n = ::recv(p.fd, buf, kHelloSize - p.buf.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (n <= 0) {
      ::close(p.fd);
      return true;
    }
    p.buf.append(buf, static_cast<std::size_t>(n));
    if (p.buf.size() < kHelloSize) return false;
    int peer = static_cast<int>(read_u32(p.buf.data() + 4));
    bool ok = p.buf.compare(0, 4, kMagic, 4) == 0 && expected_in_.count(peer) && !conns_.count(peer);
    if (ok) {
      std::string h = watch_hello(opt_.rank);
      ok = ::send(p.fd, h.data(), h.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
           static_cast<ssize_t>(h.size());
    }
    if (!ok) {
      ::close(p.fd);
      return true;
    }
    int one = 1;
    ::setsockopt(p.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Conn c;
    c.fd = p.fd;
    c.last_heard = Clock::now();
    conns_[peer] = c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      watched_.insert(peer);
      why_.erase(peer);
    }
    cv_.notify_all();
    return true;
  }

  void read_conn(int peer) {
    auto it = conns_.find(peer);
    if (it == conns_.end()) return;
    char buf[512];
    std::string how;
    for (int rounds = 0; rounds < 16; ++rounds) {
      ssize_t n = ::recv(it->second.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        heard(peer);
        it = conns_.find(peer);  // heard() and parse() never erase a connection, but be sure
        if (it == conns_.end()) return;
        Conn& c = it->second;
        c.buf.append(buf, static_cast<std::size_t>(n));
        parse(peer, c);
        if (c.buf.size() > 4096) c.buf.clear();  // garbage; a real peer never sends that much
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0)
        how = errno_how(errno);
      else if (it->second.send_errno != 0)
        how = errno_how(it->second.send_errno);  // a reset our send saw first
      else
        how = "closed the connection (EOF)";
      break;
    }
    if (how.empty()) return;
    bool clean = it->second.bye;
    if (clean) said_bye_.insert(peer);
    ::close(it->second.fd);
    conns_.erase(it);
    if (clean) {
      drop_silence(peer);  // a clean stop ends a silence without a loss (and without a resume)
      return;
    }
    record_loss(peer, how, opt_.rank);
  }

  // Something arrived from `peer`: it is not silent (any more).
  void heard(int peer) {
    Conn& c = conns_.at(peer);
    c.last_heard = Clock::now();
    if (auto ti = read_tcp_info(c.fd)) c.retrans_heard = ti->total_retrans;
    if (!c.silent) return;
    c.silent = false;
    ++c.epoch;
    set_witness(peer, opt_.rank, Witness{c.epoch, false, 0});
    relay_silence(kResumed, peer, opt_.rank, c.epoch, 0, -1);
    SilentPeer sp;
    sp.rank = peer;
    sp.seen_by = opt_.rank;
    sp.how = "speaks again";
    update_silence(peer, sp);
  }

  void parse(int from, Conn& c) {
    std::size_t off = 0;
    while (off < c.buf.size()) {
      char t = c.buf[off];
      std::size_t left = c.buf.size() - off;
      const char* p = c.buf.data() + off;
      if (t == kBye) {
        c.bye = true;
        ++off;
      } else if (t == kHeartbeat) {
        ++off;
      } else if (t == kLost) {
        if (left < kLostSize) break;
        int lost = static_cast<int>(read_u32(p + 1));
        int seen = static_cast<int>(read_u32(p + 5));
        off += kLostSize;
        // A peer we watch ourselves is judged by our own connection (its EOF comes at once if
        // it is really gone); the relay is for those we cannot see.
        if (lost != opt_.rank && !conns_.count(lost) && !said_bye_.count(lost))
          record_loss(lost,
                      "reported lost by rank " + std::to_string(seen) + " (relayed by rank " +
                          std::to_string(from) + ")",
                      seen);
      } else if (t == kSilent || t == kResumed) {
        if (left < kSilenceSize) break;
        int k = static_cast<int>(read_u32(p + 1));
        int witness = static_cast<int>(read_u32(p + 5));
        uint32_t epoch = read_u32(p + 9);
        double for_s = read_u32(p + 13) / 1000.0;
        off += kSilenceSize;
        on_silence_relay(t == kSilent, k, witness, epoch, for_s, from);
      } else if (t == kWait) {
        if (left < 3) break;
        std::size_t len = read_u16(p + 1);
        if (left < 3 + len) break;
        decode_wait(from, std::string(p + 3, len));
        off += 3 + len;
      } else {
        ++off;  // unknown byte: ignore
      }
    }
    c.buf.erase(0, off);
  }

  void decode_wait(int from, const std::string& b) {
    if (b.size() < 9) return;
    WaitState w;
    w.waiting_on = static_cast<int32_t>(read_u32(b.data()));
    uint32_t age_ms = read_u32(b.data() + 4);
    std::size_t plen = static_cast<unsigned char>(b[8]);
    if (b.size() < 9 + plen + 2) return;
    w.phase = b.substr(9, plen);
    std::size_t wlen = read_u16(b.data() + 9 + plen);
    if (b.size() < 11 + plen + wlen) return;
    w.what = b.substr(11 + plen, wlen);
    w.since = Clock::now() - Millis{age_ms};
    std::lock_guard<std::mutex> lock(mu_);
    peer_waits_[from] = std::move(w);
  }

  void set_witness(int k, int witness, const Witness& w) {
    std::lock_guard<std::mutex> lock(mu_);
    witness_[k][witness] = w;
  }

  // Sends a silent/resumed report to every connection but `except` and `about` itself.
  void relay_silence(char type, int about, int witness, uint32_t epoch, double for_s, int except) {
    if (!opt_.relay_silent) return;
    std::string msg(1, type);
    put_u32(msg, static_cast<uint32_t>(about));
    put_u32(msg, static_cast<uint32_t>(witness));
    put_u32(msg, epoch);
    put_u32(msg, ms_of(for_s));
    for (auto& [p, c] : conns_)
      if (p != about && p != except) queue(c, msg);
  }

  void on_silence_relay(bool silent, int k, int witness, uint32_t epoch, double for_s, int from) {
    if (witness == opt_.rank || said_bye_.count(k)) return;  // our own report, come back round
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lost_ranks_.count(k)) return;
      auto& by = witness_[k];
      auto it = by.find(witness);
      if (it != by.end() && it->second.epoch >= epoch) return;  // old news (or a duplicate)
      by[witness] = Witness{epoch, silent, for_s};
    }
    if (k == opt_.rank) return;  // someone cannot hear us: kept as evidence only
    // Only a rank that cannot judge k itself passes the news on (none do in a full mesh).
    if (!conns_.count(k)) relay_silence(silent ? kSilent : kResumed, k, witness, epoch, for_s, from);
    SilentPeer sp;
    sp.rank = k;
    sp.seen_by = witness;
    sp.silent_for_s = for_s;
    sp.how = std::string(silent ? "reported silent" : "heard again") + " by rank " +
             std::to_string(witness) + " (relayed by rank " + std::to_string(from) + ")";
    update_silence(k, sp);
  }

  // Whether we judge k silent: our own connection decides when we have one; otherwise any
  // witness that says so right now.
  bool judged_silent(int k) {
    if (k == opt_.rank || said_bye_.count(k)) return false;
    auto c = conns_.find(k);
    if (c != conns_.end()) return c->second.silent && !c->second.bye;
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_ranks_.count(k)) return false;
    auto it = witness_.find(k);
    if (it == witness_.end()) return false;
    for (const auto& [s, w] : it->second)
      if (w.silent) return true;
    return false;
  }

  // Reports a change of judgement about k (once each way); `why` says what caused it.
  void update_silence(int k, SilentPeer why) {
    if (stopping_) return;
    bool now_silent = judged_silent(k);
    why.host = host_of(k);
    why.after_s = seconds_since(start_);
    bool report = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = std::find_if(silent_.begin(), silent_.end(),
                             [&](const SilentPeer& s) { return s.rank == k; });
      bool was = it != silent_.end();
      if (now_silent && !was) {
        silent_.push_back(why);
        report = true;
      } else if (!now_silent && was) {
        // How long it was silent in all: before we learnt it, plus since.
        why.silent_for_s = it->silent_for_s + (why.after_s - it->after_s);
        silent_.erase(it);
        resumed_.push_back(why);
        report = true;
      }
    }
    if (!report) return;
    if (now_silent && opt_.on_silent) opt_.on_silent(why);
    if (!now_silent && opt_.on_resumed) opt_.on_resumed(why);
  }

  // Forgets any silence about k without reporting a resume (it was lost, or said bye).
  void drop_silence(int k) {
    std::lock_guard<std::mutex> lock(mu_);
    silent_.erase(std::remove_if(silent_.begin(), silent_.end(),
                                 [&](const SilentPeer& s) { return s.rank == k; }),
                  silent_.end());
    witness_.erase(k);
  }

  void record_loss(int peer, const std::string& how, int seen_by) {
    if (stopping_) return;
    LostPeer lp;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!lost_ranks_.insert(peer).second) return;
      lp.rank = peer;
      lp.host = host_of(peer);
      lp.how = how;
      lp.seen_by = seen_by;
      lp.after_s = seconds_since(start_);
      lost_.push_back(lp);
    }
    drop_silence(peer);
    if (opt_.relay_lost) {
      std::string msg(1, kLost);
      put_u32(msg, static_cast<uint32_t>(peer));
      put_u32(msg, static_cast<uint32_t>(seen_by));
      for (auto& [p, c] : conns_)
        if (p != peer) queue(c, msg);
    }
    if (on_lost_) on_lost_(lp);
  }

  void say_bye() {
    take_handoffs();
    char buf[512];
    for (auto& [peer, c] : conns_) {
      // Drain first: closing with unread data would send RST instead of FIN.
      for (int k = 0; k < 16 && ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT) > 0; ++k) {
      }
      queue(c, std::string(1, kBye));  // after what is queued: a frame is never cut by it
      ::shutdown(c.fd, SHUT_WR);
    }
    linger_until_acknowledged(buf, sizeof buf);
    for (auto& [peer, c] : conns_) ::close(c.fd);
    conns_.clear();
    for (auto& p : pending_) ::close(p.fd);
    pending_.clear();
  }

  // Loss is not death: on a lossy path our bye and FIN may still be in flight (retransmitting)
  // when we close, and the peer's next heartbeat then meets a closed socket, whose reset reaches
  // the peer before the bye does: a clean stop read as a crash (PEER_LOST). So keep the sockets
  // open, draining what arrives, until every byte we sent is acknowledged (SIOCOUTQ 0) or
  // kByeLinger has passed; on a healthy path that is one round trip.
  void linger_until_acknowledged(char* buf, std::size_t len) {
    const auto until = Clock::now() + kByeLinger;
    while (Clock::now() < until) {
      bool pending = false;
      for (auto& [peer, c] : conns_) {
        while (::recv(c.fd, buf, len, MSG_DONTWAIT) > 0) {
        }
        if (!c.out.empty()) flush(c);
        int unacked = 0;
        if (c.out.empty() && ::ioctl(c.fd, SIOCOUTQ, &unacked) == 0 && unacked == 0) continue;
        pending = true;
      }
      if (!pending) return;
      std::this_thread::sleep_for(Millis{5});
    }
  }

  void close_owned() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [peer, fd] : handoff_) ::close(fd);
      handoff_.clear();
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (event_fd_ >= 0) ::close(event_fd_);
    listen_fd_ = event_fd_ = -1;
  }

  PeerWatchOptions opt_;
  std::function<void(const LostPeer&)> on_lost_;
  Clock::time_point start_;
  int listen_fd_ = -1;
  int event_fd_ = -1;
  uint16_t port_ = 0;
  std::string address_;
  std::set<int> expected_, expected_in_;  // fixed after setup() starts the thread

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> watched_;
  std::map<int, std::string> why_;
  std::vector<LostPeer> lost_;
  std::set<int> lost_ranks_;
  std::vector<SilentPeer> silent_, resumed_;
  std::map<int, std::map<int, Witness>> witness_;  // k -> who says k is silent / heard again
  std::map<int, WaitState> peer_waits_;
  mutable std::mutex wait_mu_;  // my_wait_ only (see set_wait_state)
  WaitState my_wait_;
  std::atomic<uint64_t> wait_version_{0};  // 0 = never set
  std::atomic<bool> handoff_waiting_{false};
  std::vector<std::pair<int, int>> handoff_;  // (peer, fd) dialled, for the watch thread
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> wait_wake_{false};
  bool finished_ = false;  // the watch thread said bye and ends (under mu_)
  std::mutex join_mu_;

  // Watch thread only.
  std::map<int, Conn> conns_;
  std::set<int> said_bye_;
  std::vector<Pending> pending_;
  Clock::time_point next_heartbeat_{}, next_wait_send_{};
  std::thread thread_;
};

}  // namespace

std::vector<int> watch_peers(int rank, const std::vector<int>& ranks, std::size_t threshold,
                             std::size_t random_peers) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (!std::binary_search(sorted.begin(), sorted.end(), rank)) return {};
  auto mine = mesh_peers(rank, sorted, threshold, random_peers);
  if (sorted.size() <= threshold) return mine;
  std::set<int> out(mine.begin(), mine.end());
  for (std::size_t at = 0; at < sorted.size(); ++at) {
    const int r = sorted[at];
    if (r == rank || out.count(r)) continue;
    auto theirs = mesh_peers_at(sorted, at, threshold, random_peers);
    if (std::binary_search(theirs.begin(), theirs.end(), rank)) out.insert(r);
  }
  return {out.begin(), out.end()};
}

std::unique_ptr<PeerWatch> PeerWatch::start(Store& store, const PeerWatchOptions& options,
                                            std::function<void(const LostPeer&)> on_lost) {
  auto w = std::make_unique<PeerWatchImpl>(options, std::move(on_lost));
  w->setup(store);  // on a throw, the destructor stops the thread and closes what was opened
  return w;
}

namespace {

WaitChain walk_wait_chain(int from_rank, const std::map<int, WaitState>& states,
                          const std::set<int>& silent_or_lost) {
  WaitChain chain;
  std::set<int> seen;
  int r = from_rank;
  while (true) {
    chain.path.push_back(r);
    seen.insert(r);
    if (silent_or_lost.count(r)) {
      chain.root = r;
      chain.root_reason = "is silent or lost";
      return chain;
    }
    auto it = states.find(r);
    if (it == states.end()) {
      chain.root = r;
      chain.root_reason = "has no wait state";
      return chain;
    }
    int next = it->second.waiting_on;
    if (next < 0 || next == r) {
      chain.root = r;
      chain.root_reason = "waits on nobody";
      return chain;
    }
    if (seen.count(next)) {  // at most states.size() + 1 steps before this or a root
      chain.path.push_back(next);
      chain.cycle = true;
      chain.root_reason = "a wait cycle (deadlock): no root";
      return chain;
    }
    r = next;
  }
}

}  // namespace

WaitChain follow_wait_chain(int from_rank, const std::map<int, WaitState>& states,
                            const std::set<int>& silent_or_lost) {
  WaitChain chain = walk_wait_chain(from_rank, states, silent_or_lost);
  // Wait states travel on heartbeats, so the live ranks' states can predate a rank's death by a
  // beat: the walk then ends on a live rank (no state yet, waiting on nobody) or goes round a
  // cycle no ring makes on its own. With a rank known silent or lost, that rank is the root, not
  // a live one and not "no root".
  bool rooted = chain.root && silent_or_lost.count(*chain.root);
  if (!rooted && !silent_or_lost.empty()) {
    int stopped = *silent_or_lost.begin();
    chain.path.push_back(stopped);
    chain.root = stopped;
    chain.cycle = false;
    chain.root_reason =
        "is silent or lost (the live ranks' wait states, sent before it stopped, do not reach it)";
  }
  return chain;
}

std::optional<int> root_of_wait_chain(int from_rank, const std::map<int, WaitState>& states,
                                      const std::set<int>& silent_or_lost) {
  return follow_wait_chain(from_rank, states, silent_or_lost).root;
}

std::string wait_chain_text(const WaitChain& chain, const std::map<int, WaitState>& states,
                            const std::map<int, std::string>& hosts, Clock::time_point now) {
  auto name = [&](int r) {
    auto h = hosts.find(r);
    return rank_text(r, h == hosts.end() ? std::string_view() : std::string_view(h->second));
  };
  auto state_text = [&](const WaitState& w) {
    std::string t;
    if (!w.phase.empty()) t += " in " + w.phase;
    if (!w.what.empty()) t += " (" + w.what + ")";
    if (w.since != Clock::time_point{})
      t += " for " + seconds_text(std::chrono::duration<double>(now - w.since).count());
    return t;
  };
  std::string out;
  std::size_t edges = chain.path.empty() ? 0 : chain.path.size() - 1;
  for (std::size_t i = 0; i < edges; ++i) {
    if (!out.empty()) out += "; ";
    auto it = states.find(chain.path[i]);
    out += name(chain.path[i]) + " waits on " + name(chain.path[i + 1]) +
           (it == states.end() ? "" : state_text(it->second));
  }
  if (chain.cycle) return out + ": " + chain.root_reason;
  if (chain.root) {
    if (!out.empty()) out += "; ";
    out += name(*chain.root) + " " + chain.root_reason;
    auto it = states.find(*chain.root);
    if (it != states.end() && chain.root_reason != "waits on nobody") {
      std::string t = state_text(it->second);
      if (!t.empty()) out += " (last state:" + t + ")";
    } else if (it != states.end()) {
      out += state_text(it->second);
    }
  }
  return out;
}

}  // namespace ncclsmoke::rendezvous
