// The TCPStore-compatible server: one level-triggered epoll loop on its own thread, non-blocking
// sockets, an eventfd to wake the loop for stop(). Each connection has an input buffer (at most
// one partial request beyond what has been executed) and an output queue of segments written
// when the socket is writable, so a slow reader never blocks the loop; a WATCH_KEY notification
// is one shared segment however many watchers get it. Every buffer is counted against the memory
// budget (tcp_server.h) when it grows, not after the packet that grew it. Store semantics live in
// tcp_server_keyspace.*.
#include "rendezvous/tcp_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <iostream>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "rendezvous/bounded_json.h"
#include "rendezvous/deadline.h"
#include "rendezvous/net.h"
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
constexpr std::size_t kReadBudgetPerEvent = 256 * 1024;  // fairness between connections
constexpr std::size_t kDirectReadFrom = 64 * 1024;  // recv into the connection's own buffer
constexpr int kOpsPerTurn = 256;  // requests run per connection before the others get a turn
// ... or once its requests queued this much output (WATCH_KEY notifications of big values).
constexpr std::size_t kOutputPerTurn = 8 * 1024 * 1024;
// Output back-pressure: stop executing a connection's requests while this much is queued for it,
// resume below the low mark. Beyond that, max_output_bytes drops a reader that does not read.
constexpr std::size_t kOutputHigh = 4 * 1024 * 1024;
constexpr std::size_t kOutputLow = 1024 * 1024;
// Requests/replies above this may use only 7/8 of max_total_bytes (the rest is for small ones).
constexpr std::size_t kSmallItem = 64 * 1024;
// Bytes handed to one socket per flush (the rest when it is writable again, next turn).
constexpr std::size_t kWritePerFlush = 1024 * 1024;
// Small replies are coalesced into one segment up to this size.
constexpr std::size_t kCoalesce = 64 * 1024;
// Freed memory is handed back to the OS (malloc_trim) at most once a second, after this much.
constexpr std::size_t kTrimAfter = 16 * 1024 * 1024;
// A partial request this large is re-decoded only after it grew by half, or the sender paused
// (checking one walks every field: a MULTI_SET of 128 Ki keys would be quadratic on every read).
constexpr std::size_t kDeferDecodeFrom = 1024 * 1024;
constexpr auto kDeferredDecodeIdle = std::chrono::milliseconds(10);
// A WAIT / CHECK / MULTI_GET / MULTI_SET with more keys or bytes runs one slice of at most this
// many keys and bytes per turn, decoded from the connection's buffer as it goes (128 Ki keys
// decoded and registered in one go held the loop for 200-300 ms). A slice of 1024 keys costs
// about 1-2.5 ms on a 128 Ki-key store (five hash lookups a key, each a few cache misses;
// 4096-key slices took 4-10 ms, bench/store_attack_bench.py big_wait); slices follow each other
// within a turn while its budget (kTurnBudget) lasts.
constexpr std::size_t kSliceKeys = 1024;
constexpr std::size_t kSliceBytes = 256 * 1024;
// Such a request then runs in slices of this many keys and bytes, so the turn's budget is
// checked every 0.3-1 ms: a 1024-key slice took 1-4.5 ms on a loaded 2-core box, and one
// begun near the budget's end doubled the turn (big_wait).
constexpr std::size_t kRunSliceKeys = 256;
constexpr std::size_t kRunSliceBytes = 64 * 1024;
// Idle connections closed per turn at most (16k expiring at once would hold the loop).
constexpr int kIdleClosesPerTurn = 512;
// The work of one event-loop turn: past this, a connection with more than one request's (or
// slice's) work waits for the next turn in the backlog, behind the others. 20 WAIT floods each
// running one slice in the same turn held it for 20-50 ms while a bystander's GET waited
// (bench/store_attack_bench.py, wait_flood).
constexpr auto kTurnBudget = std::chrono::microseconds(2000);
// A turn longer than this counts as slow (TcpStoreServerStats::slow_turns; the loop's turn bound).
constexpr uint64_t kSlowTurnUs = 10000;
// Index entries of closed connections removed per turn (ServerKeyspace::retire), while the turn's
// budget lasts, and for at least kRetireMin.
constexpr std::size_t kRetirePerTurn = 8192;
constexpr auto kRetireMin = std::chrono::microseconds(500);
// How far back (in accept order) a never-requested socket looks for the connection that
// vouches for it (torch 1.13's main socket, accepted just before its WATCH_KEY socket).
constexpr ConnId kVouchWindow = 64;

std::string errno_text(int err) { return std::strerror(err); }

// Lets the server hold thousands of sockets without the caller having to raise `ulimit -n`.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// Unmaps big buffers off the event loop. Unmapping a 32 MiB buffer of a half-sent MULTI_SET
// frees 8192 pages (2-6 ms measured), and a sweep that times out several at once stalled every
// other client for 10-20 ms (bench/store_attack_bench.py, half_multiset). The loop hands the
// mapping here and carries on; the thread starts on first use and unmaps in order. The memory
// leaves the budget when handed over (it is no longer any connection's) and the process within
// milliseconds.
class MappingReaper {
 public:
  MappingReaper() = default;
  MappingReaper(const MappingReaper&) = delete;
  MappingReaper& operator=(const MappingReaper&) = delete;
  ~MappingReaper() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    for (auto [p, n] : queue_) ::munmap(p, n);  // if the thread could not be started
  }

  // Frees a big reply or notification off the loop too: freeing a 16 MiB string is an munmap of
  // 4096 touched pages (the watchers attack's notification, dropped with its last watcher, held
  // a turn for 5-7 ms). Smaller ones are freed at once.
  static constexpr std::size_t kFreeOffLoopFrom = 1024 * 1024;
  void give(std::shared_ptr<const std::string>&& s) {
    if (!s || s.use_count() > 1 || s->size() < kFreeOffLoopFrom) return;  // not the last, small
    std::lock_guard<std::mutex> lk(mu_);
    strings_.push_back(std::move(s));
    start_locked();
  }
  void give(std::string&& s) {
    if (s.capacity() < kFreeOffLoopFrom) return;
    give(std::make_shared<const std::string>(std::move(s)));
  }

  void give(void* p, std::size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_back(p, n);
    start_locked();
  }

 private:
  void start_locked() {
    if (!started_) {
      started_ = true;
      try {
        thread_ = std::thread([this] { run(); });
      } catch (const std::system_error&) {
        // No thread: unmap here, on the event loop, rather than keep the memory.
        for (auto [q, m] : queue_) ::munmap(q, m);
        queue_.clear();
        strings_.clear();
        started_ = false;
        return;
      }
    }
    cv_.notify_one();
  }

  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [this] { return stop_ || !queue_.empty() || !strings_.empty(); });
      if (queue_.empty() && strings_.empty()) return;  // stop_ and nothing left
      auto batch = std::move(queue_);
      queue_.clear();
      auto strings = std::move(strings_);
      strings_.clear();
      lk.unlock();
      for (auto [p, n] : batch) ::munmap(p, n);
      strings.clear();
      lk.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<void*, std::size_t>> queue_;
  std::vector<std::shared_ptr<const std::string>> strings_;
  std::thread thread_;
  bool started_ = false, stop_ = false;
};

// A connection's input buffer. Big buffers live in their own mapping: growing one is an mremap,
// not a copy of everything received so far (a half-sent 64 MiB MULTI_SET would otherwise be
// copied at every doubling, on the loop thread), and releasing one hands the memory straight
// back to the OS.
class InBuffer {
 public:
  InBuffer() = default;
  InBuffer(const InBuffer&) = delete;
  InBuffer& operator=(const InBuffer&) = delete;
  ~InBuffer() { release(); }

  const char* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return cap_; }
  char operator[](std::size_t i) const { return data_[i]; }
  operator std::string_view() const { return {data_, size_}; }

  void append(const char* p, std::size_t n) {
    if (size_ + n > cap_) grow(size_ + n);
    std::memcpy(data_ + size_, p, n);
    size_ += n;
  }
  // Free space after the data, to recv() into directly (then commit() what arrived).
  char* tail() { return data_ + size_; }
  std::size_t room() const { return cap_ - size_; }
  void commit(std::size_t n) { size_ += n; }
  void clear() { size_ = 0; }
  void erase_front(std::size_t n) {
    std::memmove(data_, data_ + n, size_ - n);
    size_ -= n;
  }
  // With a reaper, a mapping is unmapped on its thread instead of this one.
  void release(MappingReaper* reaper = nullptr) {
    if (!data_) return;
    if (mapped_ && reaper) reaper->give(data_, cap_);
    else if (mapped_) ::munmap(data_, cap_);
    else std::free(data_);
    data_ = nullptr;
    size_ = cap_ = 0;
    mapped_ = false;
  }

 private:
  static constexpr std::size_t kMapFrom = 1024 * 1024;
  void grow(std::size_t need) {
    std::size_t cap = std::max({need, cap_ * 2, std::size_t{4096}});
    void* p = nullptr;
    if (cap >= kMapFrom) {
      cap = (cap + 4095) & ~std::size_t{4095};
      if (mapped_) {
        p = ::mremap(data_, cap_, cap, MREMAP_MAYMOVE);
      } else {
        p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED && data_) {
          std::memcpy(p, data_, size_);
          std::free(data_);
        }
      }
      if (p == MAP_FAILED) throw std::bad_alloc();
      mapped_ = true;
    } else {
      p = std::realloc(data_, cap);
      if (!p) throw std::bad_alloc();
    }
    data_ = static_cast<char*>(p);
    cap_ = cap;
  }

  char* data_ = nullptr;
  std::size_t size_ = 0, cap_ = 0;
  bool mapped_ = false;
};

struct Conn {
  ConnId id = 0;
  int fd = -1;
  std::string peer;
  std::string host;        // peer without the port: who may vouch for an idle socket
  ConnId companion = 0;    // the idle socket this connection vouches for (torch 1.13's watch one)
  bool vouched = false;    // never requested, but kept: a connection from its host vouches for it
  bool status_only = false;  // accepted past max_connections: may only read (kStoreFullKey)
  // A big list request (wire::Decoded::lazy) run one slice per turn, straight from `in`: it
  // starts at in_pos (which stays there until its last slice), its next field is at
  // in_pos + big_next, it ends at in_pos + big_end.
  std::optional<wire::Op> big;
  std::size_t big_next = 0, big_end = 0;
  bool big_first = true;
  bool big_all = true;  // CHECK: every slice so far was present
  std::optional<wire::Dialect> dialect;
  bool validated = false;
  InBuffer in;
  std::size_t in_pos = 0;
  // Output: owned replies, or a part of a notification shared with other watchers (`len` bytes
  // at `off` of `shared`: a stored value is sent from where it is stored).
  struct Segment {
    std::string own;
    std::shared_ptr<const std::string> shared;
    std::size_t off = 0, len = 0;
    std::string_view bytes() const {
      return shared ? std::string_view(*shared).substr(off, len) : std::string_view(own);
    }
  };
  std::deque<Segment> out;
  std::size_t out_pos = 0;    // into out.front()
  std::size_t out_bytes = 0;  // queued and not yet sent
  std::size_t counted_in = 0, counted_out = 0;  // this connection's share of the budget totals
  std::string drop_reason;  // set when a limit was hit while queueing: close at the next chance
  uint64_t requests = 0;
  SteadyClock::time_point opened;
  SteadyClock::time_point last_rx;
  SteadyClock::time_point request_started;  // first byte of the partial request
  SteadyClock::time_point last_tx_progress;
  std::size_t defer_until = 0;  // re-decode the partial request once in.size() - in_pos >= this
  std::size_t decoded_at = 0;   // in_pending() at the last need_more decode: nothing new, no decode
  bool deferred = false;
  bool partial = false;  // the buffered bytes are an incomplete request
  bool paused = false;   // output back-pressure: not executing, not reading
  bool eof = false;      // the peer finished sending; close once the output is flushed
  bool dirty = false;    // in the loop's to-flush list
  bool backlogged = false;  // complete requests left over from its last turn (in backlog_)
  uint32_t interest = 0;

  std::size_t out_pending() const { return out_bytes; }
  std::size_t in_pending() const { return in.size() - in_pos; }
  // Never completed a request and nobody vouches for it: idle_timeout and shedding apply.
  // A read-only connection past max_connections is none: it holds no slot, and only a newer
  // such one sheds it (kStatusOnlyConnections).
  bool stranger() const { return requests == 0 && !vouched && !status_only; }
};



class Server final : public TcpStoreServer {
 public:
  explicit Server(const TcpStoreServerOptions& opt)
      : opt_(opt),
        keyspace_([this](ConnId c, std::string&& b) { send_to(c, std::move(b)); },
                  keyspace_limits(),
                  [this](ConnId c, const std::vector<detail::SharedBytes>& parts) {
                    send_shared(c, parts);
                  }) {
    if (!opt_.log) opt_.log = [](const std::string& line) { std::cerr << line << std::endl; };
    keyspace_.reserve_status_key(kStoreFullWireKey);
    stats_.reserved_keys.store(keyspace_.reserve().keys());
    stats_.reserved_bytes.store(keyspace_.reserve().bytes());
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
    if (stats_.longest_turn_us.load() > kSlowTurnUs) {
      // Said once, as it stops: wall time beside the loop's own CPU time, so a turn stretched by
      // a loaded machine (the thread descheduled) is told apart from one that did too much work.
      char line[320];
      std::snprintf(line, sizeof line,
                    "tcp store server: longest event-loop turn %.1f ms wall, %.1f ms on CPU; "
                    "most CPU in one turn %.1f ms; turns over %.0f ms: %llu by wall, %llu by CPU",
                    static_cast<double>(stats_.longest_turn_us.load()) / 1000.0,
                    static_cast<double>(stats_.longest_turn_its_cpu_us.load()) / 1000.0,
                    static_cast<double>(stats_.longest_turn_cpu_us.load()) / 1000.0,
                    static_cast<double>(kSlowTurnUs) / 1000.0,
                    static_cast<unsigned long long>(stats_.slow_turns.load()),
                    static_cast<unsigned long long>(stats_.slow_cpu_turns.load()));
      opt_.log(line);
    }
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
    s.closed_for_limits = stats_.limits.load();
    s.stored_bytes = stats_.stored.load();
    s.buffered_request_bytes = stats_.buffered.load();
    s.queued_reply_bytes = stats_.queued.load();
    s.registered_bytes = stats_.registered.load();
    s.closed_idle = stats_.idle.load();
    s.shed_idle = stats_.shed.load();
    s.longest_turn_us = stats_.longest_turn_us.load();
    s.longest_turn_its_cpu_us = stats_.longest_turn_its_cpu_us.load();
    s.longest_turn_cpu_us = stats_.longest_turn_cpu_us.load();
    s.slow_turns = stats_.slow_turns.load();
    s.slow_cpu_turns = stats_.slow_cpu_turns.load();
    s.reserved_keys = stats_.reserved_keys.load();
    s.reserved_bytes = stats_.reserved_bytes.load();
    s.job_keys = stats_.job_keys.load();
    s.job_bytes = stats_.job_bytes.load();
    s.job_connections = stats_.job_connections.load();
    std::lock_guard lock(full_mu_);
    s.full = full_;
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
        if (listen_fd_ < 0)
          failures.push_back(
              fmt::format("{} ({})", format_address(ai->ai_addr, ai->ai_addrlen), why));
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
                           : format_address(sa, len);
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
      if (!fresh_.empty()) {
        auto until = std::chrono::ceil<std::chrono::milliseconds>(
            fresh_.front().first + opt_.idle_timeout - SteadyClock::now());
        int ms = static_cast<int>(std::clamp<int64_t>(until.count(), 0, 1000));
        timeout = timeout < 0 ? ms : std::min(timeout, ms);
      }
      if (!backlog_.empty() || keyspace_.retiring()) timeout = 0;
      int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout);
      if (n < 0) {
        if (errno == EINTR) continue;
        opt_.log("tcp store server: epoll_wait failed: " + errno_text(errno) + "; stopping");
        break;
      }
      turn_start_ = SteadyClock::now();
      const int64_t cpu_start = thread_cpu_ns();
      // What arrived since the last turn first: a fresh request (a rank's GET) is one cheap op
      // and is answered at once, ahead of the slices and pipelined requests a flood left in the
      // backlog (those ran first before: a bystander's GET waited behind a turn's budget of
      // them on every round trip, wait_flood and big_wait). A connection left in the backlog
      // reads nothing new until its turn there comes.
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
      // Then last turn's leftovers (at least one of them, however long the events took).
      if (!backlog_.empty()) {
        run_backlog();
        flush_dirty();
      }
      if (keyspace_.retiring())
        keyspace_.retire(kRetirePerTurn,
                         std::max(turn_start_ + kTurnBudget, SteadyClock::now() + kRetireMin));
      auto now = SteadyClock::now();
      if (!timed_.empty() && (any_deferred_ || now >= next_sweep)) {
        sweep(now);
        flush_dirty();
        next_sweep = now + tick_;
      }
      if (!fresh_.empty()) expire_idle(now);
      publish(now);
      auto took = std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() -
                                                                        turn_start_);
      record_turn(static_cast<uint64_t>(took.count()),
                  static_cast<uint64_t>(std::max<int64_t>(0, thread_cpu_ns() - cpu_start) / 1000));
    }
  }

  // The loop thread's CPU time (user + system, page faults included), in ns. A turn's wall time
  // minus this is time the thread was runnable but descheduled (a loaded box), not the loop's
  // work.
  static int64_t thread_cpu_ns() {
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }

  void record_turn(uint64_t wall_us, uint64_t cpu_us) {
    if (wall_us > stats_.longest_turn_us.load()) {
      stats_.longest_turn_us.store(wall_us);
      stats_.longest_turn_its_cpu_us.store(cpu_us);
    }
    if (cpu_us > stats_.longest_turn_cpu_us.load()) stats_.longest_turn_cpu_us.store(cpu_us);
    if (wall_us > kSlowTurnUs) stats_.slow_turns++;
    if (cpu_us > kSlowTurnUs) stats_.slow_cpu_turns++;
  }

  // Stats for other threads, and freed memory back to the OS after a big release (a closed
  // attacker's buffers, a DELETE of big values), at most once a second.
  void publish(SteadyClock::time_point now) {
    if (status_dirty_) {
      // Between requests (a refusal is found inside one): the status key and its waiters.
      status_dirty_ = false;
      std::string status;
      {
        std::lock_guard lock(full_mu_);
        status = store_full_status_json(full_);
      }
      keyspace_.set_status(std::move(status));
      flush_dirty();
    }
    std::size_t stored = keyspace_.stored_bytes();
    if (stored < last_stored_) released_ += last_stored_ - stored;
    last_stored_ = stored;
    stats_.stored.store(stored);
    stats_.buffered.store(in_total_);
    stats_.queued.store(out_total_);
    stats_.registered.store(keyspace_.registered_bytes());
    stats_.keys.store(keyspace_.num_keys());
    const auto& reserve = keyspace_.reserve();
    stats_.job_keys.store(reserve.job_keys());
    stats_.job_bytes.store(reserve.job_bytes());
    stats_.job_connections.store(reserve.job_connections());
    if (released_ >= kTrimAfter && now - last_trim_ >= std::chrono::seconds(1)) {
      malloc_trim(0);
      released_ = 0;
      last_trim_ = now;
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
      std::string peer = format_address(reinterpret_cast<sockaddr*>(&ss), len);
      stats_.accepted++;
      bool status_only = false;
      if (!make_room(peer)) {
        std::string why = std::to_string(conns_.size() - status_only_.size()) +
                          " connections open, each past its first request or vouched for "
                          "(max_connections " + std::to_string(opt_.max_connections) +
                          ", --max-connections)";
        stats_.errors++;
        stats_.limits++;
        record_full("max_connections", "--max-connections", opt_.max_connections,
                    conns_.size() - status_only_.size(), peer, false);
        // A few more may read the store's status (why it is full); the oldest such makes room.
        if (status_only_.size() >= kStatusOnlyConnections) {
          if (Conn* old = find(status_only_.front()))
            close_with_reason(*old, "read-only connection past max_connections shed for " + peer,
                              true);
        }
        if (status_only_.size() >= kStatusOnlyConnections) {
          opt_.log("tcp store server: refused connection from " + peer + ": " + why);
          ::close(fd);
          continue;
        }
        opt_.log("tcp store server: connection from " + peer + " may only read (" +
                 kStoreFullKey + "): " + why);
        status_only = true;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ConnId id = next_id_++;
      auto& c = conns_[id];
      c.id = id;
      c.fd = fd;
      c.peer = std::move(peer);
      c.host = host_part(c.peer);
      c.status_only = status_only;
      if (status_only) status_only_.push_back(id);
      c.opened = c.last_rx = c.last_tx_progress = SteadyClock::now();
      if (!status_only) {
        fresh_.emplace_back(c.opened, id);
        ++strangers_;
      }
      epoll_event ev{};
      ev.events = c.interest = EPOLLIN | EPOLLRDHUP;
      ev.data.u64 = id;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        opt_.log("tcp store server: epoll_ctl for " + c.peer + " failed: " + errno_text(errno));
        ::close(fd);
        if (status_only) status_only_.pop_back();
        else --strangers_;
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
    if (!c->drop_reason.empty()) {
      close_with_reason(*c, c->drop_reason, true);
      return;
    }
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
    while (budget > 0 && !c.paused && !c.eof && !c.backlogged) {
      // Reading into a big request costs (copies, page faults: 20 WAIT floods each taking 256 KiB
      // a turn held it for 5-15 ms): once the turn's budget is spent, a request already arriving
      // waits for a later turn (epoll reports the socket again); a new one is read, as one cheap
      // request may be all it is.
      if (c.in_pending() > 0 && turn_spent()) break;
      // Through the loop's buffer, so an idle connection keeps no big buffer of its own; but a
      // request already arriving into a buffer with room is read straight into it (a 32 MiB
      // half-sent MULTI_SET is then copied once, by the kernel, not twice).
      const bool direct = c.in_pending() > 0 && c.in.room() >= kDirectReadFrom;
      char* into = direct ? c.in.tail() : rbuf_.data();
      ssize_t n = ::recv(c.fd, into, direct ? std::min(c.in.room(), kReadChunk) : rbuf_.size(), 0);
      if (n > 0) {
        auto got = static_cast<std::size_t>(n);
        if (auto why =
                over_budget(got, c.in_pending() + got, &c, 0, keyspace_.reserve_room(c.id))) {
          std::string what = c.in_pending() > 0 ? head_op(c) : op_name(c, rbuf_[0]);
          close_with_reason(c, "buffering " + std::to_string(c.in_pending() + got) + " bytes of " +
                                   what + " " + *why, true);
          return false;
        }
        if (direct) c.in.commit(got);
        else c.in.append(rbuf_.data(), got);
        count(c);
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
    return c.eof ? finish_eof(c) : true;
  }

  // The peer finished sending: run what is complete, then close once the replies are out.
  bool finish_eof(Conn& c) {
    if (c.backlogged) return true;  // the backlog runner comes back here
    {
      if (!c.paused && !process(c, true)) return false;
      if (c.backlogged) return true;
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

  // Connections that had more complete requests than one turn runs: one more turn each, so a
  // pipelined flood of tiny requests takes turns with everyone else instead of holding the loop.
  void run_backlog() {
    auto ids = std::move(backlog_);
    backlog_.clear();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      // At least one each turn; once the turn's budget is spent the rest stay, in order, ahead
      // of what this turn adds.
      if (i > 0 && turn_spent()) {
        backlog_.insert(backlog_.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i), ids.end());
        return;
      }
      ConnId id = ids[i];
      Conn* c = find(id);
      if (!c || !c->backlogged) continue;
      c->backlogged = false;
      // The first runs at least one request or slice even when the events spent the budget, so
      // the backlog always moves.
      progress_once_ = i == 0;
      bool open = process(*c, false);
      progress_once_ = false;
      if (!open) continue;
      if (c->eof) {
        if (!finish_eof(*c)) continue;
      } else {
        update_interest(*c);
      }
    }
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
    int turn = 0;
    turn_output_ = 0;
    while (!c.paused && (c.big || c.in_pending() > 0)) {
      // A light request arriving after the turn's budget is spent still runs (one cheap op);
      // a slice of a big one, or a second request, waits for a later turn.
      if (turn == kOpsPerTurn || turn_output_ >= kOutputPerTurn ||
          ((turn > 0 || (c.big && !progress_once_)) && turn_spent())) {
        c.backlogged = true;
        backlog_.push_back(c.id);
        update_interest(c);
        break;
      }
      if (c.big) {
        // A big request's slices, while the turn's budget lasts; its later requests wait behind
        // it, in order.
        if (!run_slice(c)) return false;
        ++turn;
        continue;
      }
      if (!force && c.defer_until > 0 && c.in_pending() < c.defer_until) {
        set_deferred(c, true);
        break;
      }
      if (c.in_pending() == c.decoded_at) break;  // nothing new since the last need_more
      std::string_view view = std::string_view(c.in).substr(c.in_pos);
      auto d = wire::decode_request(*c.dialect, view, opt_.limits, kSliceKeys, kSliceBytes);
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
      ++turn;
      if (c.requests++ == 0 && !c.vouched && !c.status_only) --strangers_;
      stats_.requests++;
      if (d.lazy && !(*c.dialect == wire::Dialect::modern && !c.validated)) {
        // Its bytes stay in the buffer (counted there) while its slices run.
        c.big = d.request.op;
        c.big_next = d.body_at;
        c.big_end = d.consumed;
        c.big_first = true;
        c.big_all = true;
        continue;  // its first slice runs next
      }
      c.in_pos += d.consumed;
      if (!after_request(c, run_request(c, d.request))) return false;
    }
    if (c.in_pos == c.in.size()) {
      c.in.clear();
      if (c.in.capacity() > kKeepBuffer) c.in.release(&reaper_);
      c.in_pos = 0;
      mark_partial(c, false);
    } else if (c.in_pos > 64 * 1024 && c.in_pos * 2 > c.in.size()) {
      c.in.erase_front(c.in_pos);
      c.in_pos = 0;
    }
    count(c);
    return true;
  }

  bool turn_spent() const { return SteadyClock::now() - turn_start_ >= kTurnBudget; }

  // Executes one request (or slice), recording a store-wide refusal for the job.
  std::optional<detail::Refusal> run_request(Conn& c, wire::Request& req) {
    running_ = &c;
    auto refused = execute(c, req);
    running_ = nullptr;
    if (refused && refused->keys_full)
      record_full("max_stored_keys", "--max-keys", opt_.max_stored_keys, keyspace_.num_keys(),
                  c.peer, keyspace_.reserve().job(c.id));
    return refused;
  }

  // Runs the next kRunSliceKeys keys of c.big: WAIT registers them (answering after the last),
  // CHECK ands them (answering after the last), MULTI_GET answers them (the slices' replies
  // concatenated are the whole reply), MULTI_SET sets them. Returns false when closed.
  bool run_slice(Conn& c) {
    wire::Request part;
    part.op = *c.big;
    std::string_view body = std::string_view(c.in).substr(c.in_pos, c.big_end);
    wire::decode_slice(part.op, body, c.big_next, kRunSliceKeys, kRunSliceBytes, part);
    bool first = c.big_first, last = c.big_next >= c.big_end;
    c.big_first = false;
    std::optional<detail::Refusal> refused;
    switch (part.op) {
      case wire::Op::wait:
        running_ = &c;
        refused = keyspace_.wait_part(c.id, part.keys, first, last);
        running_ = nullptr;
        break;
      case wire::Op::check:
        c.big_all = c.big_all && keyspace_.all_present(part.keys);
        if (last) {
          std::string out;
          wire::put_u8(out, c.big_all ? wire::kCheckReady : wire::kCheckNotReady);
          send_to(c.id, std::move(out));
        }
        break;
      default:
        refused = run_request(c, part);
    }
    if (last) {
      c.big.reset();
      c.in_pos += c.big_end;
    }
    return after_request(c, refused);
  }

  // What follows every request or slice: a refusal or a drop closes the connection (false), the
  // stats follow the keyspace, and a client with too much output queued is paused.
  bool after_request(Conn& c, const std::optional<detail::Refusal>& refused) {
    if (refused) {
      close_with_reason(c, refused->why, refused->limit);
      return false;
    }
    stats_.keys.store(keyspace_.num_keys());
    stats_.stored.store(keyspace_.stored_bytes());
    if (!c.drop_reason.empty()) {
      close_with_reason(c, c.drop_reason, true);
      return false;
    }
    if (c.out_pending() > kOutputHigh) pause(c, true);
    return true;
  }

  std::optional<detail::Refusal> execute(Conn& c, wire::Request& req) {
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
    if (c.status_only && !read_only(req.op))
      return detail::Refusal(
          std::string(wire::to_string(req.op)) + " on a connection accepted past max_connections " +
              std::to_string(opt_.max_connections) + " (--max-connections), which may only read " +
              "(" + kStoreFullKey + " says why the store is full)",
          true);
    return keyspace_.execute(c.id, *c.dialect, std::move(req));
  }

  static bool read_only(wire::Op op) {
    switch (op) {
      case wire::Op::validate:
      case wire::Op::ping:
      case wire::Op::get:
      case wire::Op::check:
      case wire::Op::wait:
      case wire::Op::cancel_wait:
      case wire::Op::multi_get:
      case wire::Op::num_keys:
        return true;
      default:
        return false;
    }
  }

  // ---- output --------------------------------------------------------------------------------

  // ---- budget --------------------------------------------------------------------------------

  detail::KeyspaceLimits keyspace_limits() {
    detail::KeyspaceLimits l;
    l.max_value_bytes = opt_.limits.max_value_bytes;
    l.max_stored_keys = opt_.max_stored_keys;
    l.max_pending_keys = opt_.max_pending_keys;
    l.max_registered_bytes = opt_.max_total_bytes - opt_.max_total_bytes / 4;
    l.may_queue = [this](ConnId id, std::size_t bytes) {
      Conn* c = find(id);
      return c && admit_output(*c, bytes);
    };
    l.may_grow = [this](std::size_t grow, std::size_t item, std::size_t held_back,
                        std::size_t room) -> std::optional<std::string> {
      if (auto why = over_budget(grow, item, nullptr, held_back, room))
        return "storing " + std::to_string(grow) + " more bytes " + *why;
      return std::nullopt;
    };
    // The job's reserve (tcp_server_reserve.h), each part at most half of its limit.
    l.reserved_ranks = reserved_ranks();
    l.claim_is_genuine = opt_.claim_is_genuine;
    l.reserved_keys = std::min(l.reserved_ranks * detail::kReservedKeysPerRank,
                               opt_.max_stored_keys / 2);
    l.reserved_bytes = std::min(l.reserved_ranks * detail::kReservedBytesPerRank,
                                opt_.max_total_bytes / 2);
    return l;
  }

  std::size_t reserved_ranks() const {
    return opt_.reserved_ranks.value_or(opt_.reserved_connections);
  }

  std::size_t in_use() const {
    return keyspace_.stored_bytes() + keyspace_.registered_bytes() + in_total_ + out_total_;
  }

  // Why `grow` more bytes for an item (a request, a reply, a value) of `item` bytes do not fit
  // the total budget, or nullopt when they do. Big items may use only 7/8 of it. The job's
  // reserve (tcp_server_reserve.h): `held_back` bytes of it a stranger's stored bytes may not
  // take; `room` bytes of it the job's connection may take past the usual cap (up to the whole
  // budget). A refusal is recorded for the job (stats().full), naming `who` (else the running
  // request's connection).
  std::optional<std::string> over_budget(std::size_t grow, std::size_t item, const Conn* who,
                                         std::size_t held_back, std::size_t room) {
    std::size_t cap = opt_.max_total_bytes;
    if (item > kSmallItem) cap -= cap / 8;
    std::size_t used = in_use();
    if (used + grow + held_back <= cap) return std::nullopt;
    if (grow <= room && used + grow <= opt_.max_total_bytes) return std::nullopt;
    if (!who) who = running_;
    record_full("max_total_bytes", "--max-total-bytes", opt_.max_total_bytes, used,
                who ? who->peer : std::string(), who && keyspace_.reserve().job(who->id));
    return "would exceed the total memory budget: " + std::to_string(used) + " bytes in use (" +
           std::to_string(keyspace_.stored_bytes()) + " stored, " +
           std::to_string(keyspace_.registered_bytes()) + " in WAIT/WATCH_KEY registrations, " +
           std::to_string(in_total_) + " in buffered requests, " + std::to_string(out_total_) +
           " in queued replies) of " + "max_total_bytes " +
           std::to_string(opt_.max_total_bytes) + " (--max-total-bytes" +
           (item > kSmallItem ? "; items over 64 KiB may use 7/8 of it" : "") +
           (held_back > 0 ? "; " + std::to_string(held_back) +
                                " bytes are held for the job's claimed ranks (--reserved-ranks))"
                          : ")");
  }

  // `job`: the refused connection had claimed a rank (StoreFullHit::job_refusals).
  void record_full(const char* limit, const char* flag, uint64_t value, uint64_t in_use,
                   const std::string& peer, bool job) {
    std::lock_guard lock(full_mu_);
    auto it = std::find_if(full_.begin(), full_.end(),
                           [&](const StoreFullHit& h) { return h.limit == limit; });
    if (it == full_.end()) {
      it = full_.insert(full_.end(), StoreFullHit{});
      it->limit = limit;
      it->flag = flag;
    }
    it->value = value;
    it->in_use = in_use;
    it->refusals++;
    if (job) it->job_refusals++;
    it->last_peer = peer.substr(0, 256);
    status_dirty_ = true;
  }

  // Brings the totals up to date with this connection's buffers.
  void count(Conn& c) {
    std::size_t in = c.in.size(), out = c.out_bytes;
    in_total_ = in_total_ - c.counted_in + in;
    out_total_ = out_total_ - c.counted_out + out;
    c.counted_in = in;
    c.counted_out = out;
  }

  // Whether `bytes` more may be queued for `c`; when not, the connection is marked to be closed
  // (at the next safe point: the keyspace may be iterating its watchers) and takes no more.
  bool admit_output(Conn& c, std::size_t bytes) {
    if (!c.drop_reason.empty()) return false;
    std::size_t pending = c.out_pending();
    if (pending > 0 && pending + bytes > opt_.max_output_bytes) {
      doom(c, "peer reads nothing: a reply or notification of " + std::to_string(bytes) +
                  " bytes would queue " + std::to_string(pending + bytes) + " bytes (" +
                  std::to_string((pending + bytes) >> 20) + " MiB of replies queued) for it, " +
                  "over max_output_bytes " + std::to_string(opt_.max_output_bytes) +
                  " (--max-output-bytes)");
      return false;
    }
    if (auto why = over_budget(bytes, pending + bytes, &c, 0, keyspace_.reserve_room(c.id))) {
      doom(c, "queueing a reply or notification of " + std::to_string(bytes) + " bytes " + *why);
      return false;
    }
    return true;
  }

  void doom(Conn& c, std::string reason) {
    c.drop_reason = std::move(reason);
    mark_dirty(c);
  }

  void mark_dirty(Conn& c) {
    if (!c.dirty) {
      c.dirty = true;
      dirty_.push_back(c.id);
    }
  }

  // ---- output --------------------------------------------------------------------------------

  void send_to(ConnId id, std::string&& bytes) {
    Conn* c = find(id);
    if (!c || bytes.empty() || !admit_output(*c, bytes.size())) return;
    c->out_bytes += bytes.size();
    turn_output_ += bytes.size();
    auto& q = c->out;
    if (!q.empty() && !q.back().shared && q.back().own.size() + bytes.size() <= kCoalesce)
      q.back().own.append(bytes);
    else
      q.push_back({std::move(bytes), nullptr, 0, 0});
    count(*c);
    mark_dirty(*c);
  }

  void send_shared(ConnId id, const std::vector<detail::SharedBytes>& parts) {
    Conn* c = find(id);
    std::size_t size = 0;
    for (const auto& p : parts) size += p.len;
    if (!c || size == 0 || !admit_output(*c, size)) return;
    c->out_bytes += size;
    turn_output_ += size;
    for (const auto& p : parts)
      if (p.len > 0) c->out.push_back({{}, p.owner, p.off, p.len});
    count(*c);
    mark_dirty(*c);
  }

  // A big segment is freed off the loop (MappingReaper).
  void reap(Conn::Segment& seg) {
    if (seg.shared) reaper_.give(std::move(seg.shared));
    else reaper_.give(std::move(seg.own));
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
        if (!c->drop_reason.empty()) {
          close_with_reason(*c, c->drop_reason, true);
          continue;
        }
        flush(*c);
      }
    }
  }

  // Writes what the socket takes now; the rest waits for EPOLLOUT. Returns false when closed.
  bool flush(Conn& c) {
    // The kernel copies what it takes: a big reply into a wide-open socket buffer (4 MiB of a
    // notification) held a turn for 5 ms. At most kWritePerFlush a call; EPOLLOUT brings the rest.
    std::size_t allowance = kWritePerFlush;
    while (c.out_bytes > 0 && allowance > 0) {
      iovec iov[64];
      int n_iov = 0;
      std::size_t skip = c.out_pos, room = allowance;
      for (auto it = c.out.begin(); it != c.out.end() && n_iov < 64 && room > 0; ++it) {
        std::string_view b = it->bytes();
        iov[n_iov].iov_base = const_cast<char*>(b.data()) + skip;
        iov[n_iov].iov_len = std::min(b.size() - skip, room);
        room -= iov[n_iov].iov_len;
        skip = 0;
        ++n_iov;
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(n_iov);
      ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL);
      if (n > 0) {
        auto sent = static_cast<std::size_t>(n);
        c.out_bytes -= sent;
        allowance -= std::min(allowance, sent);
        while (sent > 0) {
          std::size_t left = c.out.front().bytes().size() - c.out_pos;
          if (sent < left) {
            c.out_pos += sent;
            break;
          }
          sent -= left;
          reap(c.out.front());
          c.out.pop_front();
          c.out_pos = 0;
        }
        c.last_tx_progress = SteadyClock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      close_quietly_or_log(c, "send: " + errno_text(errno));
      return false;
    }
    count(c);
    if (c.eof && c.out_pending() == 0) {
      close_conn(c);
      return false;
    }
    if (c.paused && c.out_pending() < kOutputLow) {
      pause(c, false);
      if (!process(c, false)) return false;
      if (c.out_pending() > 0) mark_dirty(c);
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
    if (!c.paused && !c.eof && !c.backlogged) want |= EPOLLIN | EPOLLRDHUP;
    if (c.out_pending() > 0) want |= EPOLLOUT;
    if (want == c.interest) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = c.id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    c.interest = want;
  }

  // ---- timers (stalled requests, stalled readers, deferred decodes) --------------------------

  // A request's deadline runs from its first byte: set when a partial request begins, kept while
  // more of it trickles in.
  void mark_partial(Conn& c, bool on) {
    if (on && !c.partial) c.request_started = c.last_rx;
    c.partial = on;
    set_timed(c);
  }

  // Whether the socket holds bytes the loop has not read yet.
  static bool unread_bytes(const Conn& c) {
    int n = 0;
    return ::ioctl(c.fd, FIONREAD, &n) == 0 && n > 0;
  }

  void set_deferred(Conn& c, bool on) {
    c.deferred = on;
    if (on) any_deferred_ = true;
    set_timed(c);
  }

  void set_timed(Conn& c) {
    bool timed = c.partial || c.deferred || c.out_pending() > opt_.max_output_bytes;
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
        // A forced decode walks the whole partial request so far (20 WAIT floods of 40 MB each
        // re-decoded in one sweep held a turn for 3-6 ms): they share the turn's budget, and
        // the rest wait for the next sweep (10 ms on).
        // And a connection whose socket still holds bytes is not idle: the loop left them there
        // (its turn's budget was spent), and the decode comes once they are read.
        if (now - c->last_rx >= kDeferredDecodeIdle && !turn_spent() && !unread_bytes(*c)) {
          if (!process(*c, true)) continue;
        } else {
          any_deferred_ = true;
        }
      }
      if (!c->drop_reason.empty()) {
        close_with_reason(*c, c->drop_reason, true);
        continue;
      }
      if (c->partial && !c->paused && now - c->request_started >= opt_.stalled_request_timeout) {
        close_with_reason(*c,
                          "stalled mid-request: " + std::to_string(c->in_pending()) +
                              " bytes of " + head_op(*c) + " buffered, still incomplete " +
                              seconds(now - c->request_started) +
                              " after its first byte (last byte " + seconds(now - c->last_rx) +
                              " ago; request timeout " + seconds(opt_.stalled_request_timeout) +
                              ", --request-timeout)",
                          true);
        continue;
      }
      if (c->out_pending() > opt_.max_output_bytes &&
          now - c->last_tx_progress >= opt_.stalled_request_timeout) {
        close_with_reason(*c,
                          "peer reads nothing: " + std::to_string(c->out_pending() >> 20) +
                              " MiB of replies queued and no progress for " +
                              seconds(now - c->last_tx_progress) + " (max_output_bytes " +
                              std::to_string(opt_.max_output_bytes) + ", --max-output-bytes)",
                          true);
        continue;
      }
      set_timed(*c);
    }
  }

  // ---- connections: idle strangers, room for the job's ranks ---------------------------------

  std::size_t reserved() const {
    return std::min(opt_.reserved_connections, opt_.max_connections / 2);
  }

  // Whether a new connection may be accepted: at max_connections, or with every slot that is not
  // reserved held by strangers, the oldest stranger is shed to make room. False: nobody to shed.
  bool make_room(const std::string& newcomer) {
    bool full = conns_.size() - status_only_.size() >= opt_.max_connections;
    bool strangers_full = strangers_ >= opt_.max_connections - reserved();
    if (!full && !strangers_full) return true;
    while (!fresh_.empty()) {
      auto [since, id] = fresh_.front();
      fresh_.pop_front();
      Conn* c = find(id);
      if (!c || !c->stranger() || try_vouch(*c)) continue;
      stats_.shed++;
      close_with_reason(
          *c,
          "shed to make room for " + newcomer + ": never completed a request in " +
              seconds(SteadyClock::now() - c->opened) + ", the oldest such of " +
              std::to_string(strangers_) + " with " + std::to_string(conns_.size()) +
              " connections open (max_connections " + std::to_string(opt_.max_connections) +
              ", --max-connections; " + std::to_string(reserved()) +
              " kept for the job's ranks)",
          true);
      return true;
    }
    return !full;
  }

  // Closes strangers past idle_timeout, oldest first, a bounded number per turn.
  void expire_idle(SteadyClock::time_point now) {
    for (int closed = 0; !fresh_.empty() && closed < kIdleClosesPerTurn;) {
      auto [since, id] = fresh_.front();
      if (now - since < opt_.idle_timeout) return;
      fresh_.pop_front();
      Conn* c = find(id);
      if (!c || !c->stranger() || try_vouch(*c)) continue;
      stats_.idle++;
      ++closed;
      close_with_reason(*c,
                        "idle: no complete request " + seconds(now - c->opened) +
                            " after connecting (idle timeout " + seconds(opt_.idle_timeout) +
                            ", --idle-timeout)",
                        true);
    }
  }

  // torch 1.13's WATCH_KEY socket: kept when a connection from the same host, accepted just
  // before it and past its first request, vouches for no other socket yet.
  bool try_vouch(Conn& c) {
    for (ConnId id = c.id - 1; id > kWakeId && id + kVouchWindow > c.id; --id) {
      Conn* d = find(id);
      if (!d || d->requests == 0 || d->companion || d->host != c.host) continue;
      d->companion = c.id;
      c.vouched = true;
      --strangers_;
      return true;
    }
    return false;
  }

  // ---- closing -------------------------------------------------------------------------------

  static std::string op_name(const Conn& c, char first) {
    if (!c.dialect) return "an undetected-dialect request";
    auto op = wire::op_from_byte(*c.dialect, static_cast<uint8_t>(first));
    return op ? std::string("a ") + wire::to_string(*op)
              : "opcode " + std::to_string(static_cast<uint8_t>(first));
  }

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
  void close_with_reason(Conn& c, const std::string& reason, bool limit = false) {
    if (limit) stats_.limits++;
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
    if (c.status_only)
      status_only_.erase(std::find(status_only_.begin(), status_only_.end(), id));
    if (c.stranger()) --strangers_;
    if (c.companion) {
      // The socket it vouched for is a stranger again, with a fresh idle deadline.
      if (Conn* e = find(c.companion); e && e->vouched) {
        e->vouched = false;
        if (e->requests == 0) {
          ++strangers_;
          fresh_.emplace_back(SteadyClock::now(), e->id);
        }
      }
    }
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    keyspace_.forget(id);
    released_ += c.counted_out;  // a big input buffer is its own mapping: unmapped, no trim needed
    in_total_ -= c.counted_in;
    out_total_ -= c.counted_out;
    timed_.erase(id);
    c.in.release(&reaper_);  // a big buffer is unmapped off the loop
    for (auto& seg : c.out) reap(seg);
    conns_.erase(id);
    stats_.open.store(conns_.size());
  }

  TcpStoreServerOptions opt_;
  detail::ServerKeyspace keyspace_;
  std::size_t request_cap_ = 0;
  std::size_t in_total_ = 0, out_total_ = 0;  // over every connection
  bool progress_once_ = false;  // run_backlog's first: one request or slice whatever the budget
  std::size_t turn_output_ = 0;               // output queued by the running turn
  SteadyClock::time_point turn_start_{};      // when the running turn began (kTurnBudget)
  std::size_t released_ = 0;                  // freed since the last malloc_trim
  std::size_t last_stored_ = 0;
  SteadyClock::time_point last_trim_{};
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

  MappingReaper reaper_;  // before conns_: outlives every connection's buffer
  std::unordered_map<ConnId, Conn> conns_;
  ConnId next_id_ = 2;
  std::vector<ConnId> dirty_;
  std::vector<ConnId> backlog_;
  std::unordered_set<ConnId> timed_;
  bool any_deferred_ = false;
  SteadyClock::time_point last_fd_log_{};

  struct {
    std::atomic<uint64_t> accepted{0}, open{0}, legacy{0}, modern{0}, errors{0}, requests{0},
        keys{0}, limits{0}, stored{0}, buffered{0}, queued{0}, registered{0}, idle{0}, shed{0},
        longest_turn_us{0}, longest_turn_its_cpu_us{0}, longest_turn_cpu_us{0}, slow_turns{0},
        slow_cpu_turns{0}, reserved_keys{0}, reserved_bytes{0}, job_keys{0}, job_bytes{0},
        job_connections{0};
  } stats_;
  mutable std::mutex full_mu_;
  std::vector<StoreFullHit> full_;  // under full_mu_
  const Conn* running_ = nullptr;   // whose request is executing (names the peer of a refusal)
  std::deque<std::pair<SteadyClock::time_point, ConnId>> fresh_;  // accept order: idle deadline
  std::size_t strangers_ = 0;       // open connections with stranger()
  std::vector<ConnId> status_only_;  // open status-only connections, oldest first
  bool status_dirty_ = false;        // full_ changed: rewrite kStoreFullKey (publish)
};

}  // namespace

std::string store_full_status_json(const std::vector<StoreFullHit>& hits) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& h : hits)
    list.push_back({{"limit", h.limit},
                    {"flag", h.flag},
                    {"value", h.value},
                    {"in_use", h.in_use},
                    {"refusals", h.refusals},
                    {"job_refusals", h.job_refusals},
                    {"last_peer", h.last_peer}});
  return nlohmann::json{{"store_full", std::move(list)}}.dump();
}

std::optional<std::vector<StoreFullHit>> parse_store_full_status(std::string_view text) {
  auto parsed = parse_bounded_json(text, 64 * 1024, 8);
  if (!parsed.ok() || !parsed.value.is_object()) return std::nullopt;
  auto it = parsed.value.find("store_full");
  if (it == parsed.value.end() || !it->is_array()) return std::nullopt;
  std::vector<StoreFullHit> hits;
  for (const auto& e : *it) {
    if (!e.is_object() || hits.size() >= 8) return std::nullopt;
    StoreFullHit h;
    try {
      h.limit = e.at("limit").get<std::string>();
      h.flag = e.at("flag").get<std::string>();
      h.value = e.at("value").get<uint64_t>();
      h.in_use = e.at("in_use").get<uint64_t>();
      h.refusals = e.at("refusals").get<uint64_t>();
      h.last_peer = e.value("last_peer", std::string());
      h.job_refusals = e.value("job_refusals", uint64_t{0});
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
    hits.push_back(std::move(h));
  }
  return hits;
}

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  // No glibc fastbins: freed small chunks (hash nodes, keys) piled up there by the tens of
  // thousands as a flood's registrations were retired, and the next malloc of 1 KiB or more, or
  // free of 64 KiB, ran malloc_consolidate over all of them at once: 9-17 ms in one event-loop
  // turn (perf, bench/store_attack_bench.py wait_flood). Without them a free coalesces as it
  // goes. Process-wide, and cheap for the rest of the process (tcache still serves the hot
  // small sizes).
  static const bool no_fastbins = [] { return mallopt(M_MXFAST, 0) == 1; }();
  (void)no_fastbins;
  auto server = std::make_unique<Server>(options);
  server->start();
  return server;
}

}  // namespace ncclsmoke::rendezvous
