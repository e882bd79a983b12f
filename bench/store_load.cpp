// store_load: a load generator for any TCPStore-compatible server (ours, or PyTorch's). One thread,
// one epoll loop, non-blocking sockets, so that 1024 clients cost the driver almost nothing and the
// figures measure the server. Every request goes through rendezvous/wire.h, the same codec the
// server and client use. Keys carry torch's "/" prefix.
//
// Workloads (one result line per run; --format json for one JSON object per line):
//   barrier     N connections. ts = first connect() issued. Once every connection is connected
//               (and, in the modern dialect, has been VALIDATEd and answered its PING): t0. Then
//               every client sends ADD(count, 1); the one that reads N back SETs the done key;
//               every client WAITs on the done key. t1 = the last client received STOP_WAITING.
//               barrier_s = t1 - t0 (the server's work), total_s = t1 - ts (including connect).
//   throughput  C connections, each repeating SET(k_c, v) + GET(k_c) back to back (one
//               round trip per pair, depth 1) for --duration seconds after all connected.
//               ops_s = 2 * pairs / elapsed; p50/p99 are per-pair round-trip times.
// Every run is bounded by --timeout; a run that cannot finish reports which phase and how many
// clients were still outstanding, and the process exits 1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "rendezvous/deadline.h"
#include "rendezvous/wire.h"

namespace ncclsmoke::bench {
namespace {

namespace wire = rendezvous::wire;
using rendezvous::Clock;
using rendezvous::Deadline;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string dialect = "legacy";
  std::string workload = "barrier";
  std::vector<int> clients{64};
  int repeat = 1;
  double duration_s = 2.0;
  std::size_t value_bytes = 32;
  double timeout_s = 30.0;
  std::string format = "text";
  std::string label;
  std::string key_prefix;
};

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string errno_text(int err) { return std::string(std::strerror(err)); }

// Raised by the driver for anything that ends a run: the message names the peer, the client and
// the time waited.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Conn {
  int fd = -1;
  int index = 0;
  bool connected = false;
  bool ready = false;  // connected, and validated in the modern dialect
  bool want_out = false;
  std::string out;
  std::size_t out_off = 0;
  std::string in;
  std::size_t in_off = 0;
  std::deque<wire::Request> awaiting;  // requests whose replies are still due, in order
  uint32_t nonce = 0;
  // Workload state.
  int stage = 0;
  uint64_t iteration = 0;
  Clock::time_point sent_at{};
  std::string expect;
};

// Owns the epoll instance and the connections of one run.
class Driver {
 public:
  using ReplyFn = std::function<void(Conn&, const wire::Request&, const wire::Reply&)>;

  Driver(const sockaddr_storage& addr, socklen_t addr_len, std::string peer, wire::Dialect d)
      : addr_(addr), addr_len_(addr_len), peer_(std::move(peer)), dialect_(d) {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) throw RunError("epoll_create1: " + errno_text(errno));
    started_ = Clock::now();
  }
  ~Driver() {
    for (auto& c : conns_)
      if (c.fd >= 0) ::close(c.fd);
    if (ep_ >= 0) ::close(ep_);
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  std::vector<Conn>& conns() { return conns_; }
  int ready_count() const { return ready_; }
  void on_reply(ReplyFn fn) { on_reply_ = std::move(fn); }

  // Issues n non-blocking connects; readiness arrives through poll().
  void open(int n) {
    conns_.resize(n);
    for (int i = 0; i < n; ++i) {
      Conn& c = conns_[i];
      c.index = i;
      c.fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c.fd < 0) throw RunError("socket() for client " + std::to_string(i) + ": " + errno_text(errno));
      int one = 1;
      ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      int rc = ::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_);
      if (rc < 0 && errno != EINPROGRESS)
        throw RunError("connect to " + peer_ + " (client " + std::to_string(i) +
                       "): " + errno_text(errno) + " after " + fmt_elapsed());
      epoll_event ev{};
      ev.events = EPOLLOUT | EPOLLIN;
      ev.data.u32 = static_cast<uint32_t>(i);
      if (::epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev) < 0)
        throw RunError("epoll_ctl: " + errno_text(errno));
      c.want_out = true;
      if (rc == 0) on_connected(c);
    }
  }

  void send(Conn& c, wire::Request req) {
    wire::encode_request(dialect_, req, c.out);
    if (wire::has_reply(req.op)) c.awaiting.push_back(std::move(req));
    flush(c);
  }

  // Runs the loop until done() or the deadline; throws RunError naming `phase` on timeout.
  void poll(Deadline deadline, const std::function<bool()>& done, const std::string& phase,
            const std::function<std::string()>& outstanding) {
    epoll_event events[256];
    while (!done()) {
      auto left = rendezvous::remaining(deadline);
      if (left.count() == 0)
        throw RunError("timed out in phase '" + phase + "' against " + peer_ + " after " +
                       fmt_elapsed() + ": " + outstanding());
      int timeout_ms = static_cast<int>(std::min<long long>(left.count(), 100));
      int n = ::epoll_wait(ep_, events, 256, timeout_ms);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw RunError("epoll_wait: " + errno_text(errno));
      }
      for (int i = 0; i < n; ++i) handle(conns_[events[i].data.u32], events[i].events);
    }
  }

  std::string fmt_elapsed() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3fs", rendezvous::seconds_since(started_));
    return buf;
  }
  const std::string& peer() const { return peer_; }

 private:
  void on_connected(Conn& c) {
    c.connected = true;
    if (dialect_ == wire::Dialect::modern) {
      wire::Request v;
      v.op = wire::Op::validate;
      v.u32 = wire::kValidateMagic;
      send(c, v);
      wire::Request p;
      p.op = wire::Op::ping;
      p.u32 = c.nonce = 0x5A000000u + static_cast<uint32_t>(c.index);
      send(c, p);
    } else {
      mark_ready(c);
    }
  }

  void mark_ready(Conn& c) {
    c.ready = true;
    ++ready_;
  }

  void set_interest(Conn& c, bool out) {
    if (c.want_out == out) return;
    epoll_event ev{};
    ev.events = EPOLLIN | (out ? EPOLLOUT : 0u);
    ev.data.u32 = static_cast<uint32_t>(c.index);
    if (::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev) < 0)
      throw RunError("epoll_ctl: " + errno_text(errno));
    c.want_out = out;
  }

  void flush(Conn& c) {
    if (!c.connected) return;  // sent once the connect completes
    while (c.out_off < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        throw RunError("send to " + peer_ + " (client " + std::to_string(c.index) +
                       "): " + errno_text(errno) + " after " + fmt_elapsed());
      }
      c.out_off += static_cast<std::size_t>(n);
    }
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    set_interest(c, !c.out.empty());
  }

  void handle(Conn& c, uint32_t events) {
    if (!c.connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0)
        throw RunError("connect to " + peer_ + " (client " + std::to_string(c.index) +
                       "): " + errno_text(err) + " after " + fmt_elapsed());
      on_connected(c);
      flush(c);
      if (!(events & EPOLLIN)) return;
    }
    if (events & EPOLLOUT) flush(c);
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) read(c);
  }

  void read(Conn& c) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < sizeof buf) break;
        continue;
      }
      if (n == 0)
        throw RunError(peer_ + " closed the connection of client " + std::to_string(c.index) +
                       " after " + fmt_elapsed() + " with " + std::to_string(c.awaiting.size()) +
                       " repl(ies) outstanding");
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      throw RunError("recv from " + peer_ + " (client " + std::to_string(c.index) +
                     "): " + errno_text(errno) + " after " + fmt_elapsed());
    }
    while (!c.awaiting.empty() && c.in_off < c.in.size()) {
      std::string_view rest(c.in.data() + c.in_off, c.in.size() - c.in_off);
      auto r = wire::decode_reply(c.awaiting.front(), rest, limits_);
      if (r.status == wire::Status::need_more) break;
      if (r.status == wire::Status::error)
        throw RunError("bad reply from " + peer_ + " to " + wire::to_string(c.awaiting.front().op) +
                       " (client " + std::to_string(c.index) + "): " + r.error);
      c.in_off += r.consumed;
      wire::Request req = std::move(c.awaiting.front());
      c.awaiting.pop_front();
      if (req.op == wire::Op::ping && !c.ready) {
        if (r.reply.u32 != c.nonce)
          throw RunError("PING from client " + std::to_string(c.index) + " to " + peer_ +
                         " echoed " + std::to_string(r.reply.u32) + ", sent " +
                         std::to_string(c.nonce));
        mark_ready(c);
        continue;
      }
      if (on_reply_) on_reply_(c, req, r.reply);
    }
    if (c.in_off == c.in.size()) {
      c.in.clear();
      c.in_off = 0;
    } else if (c.awaiting.empty()) {
      throw RunError(peer_ + " sent " + std::to_string(c.in.size() - c.in_off) +
                     " unexpected byte(s) to client " + std::to_string(c.index));
    }
  }

  sockaddr_storage addr_;
  socklen_t addr_len_;
  std::string peer_;
  wire::Dialect dialect_;
  wire::Limits limits_;
  int ep_ = -1;
  std::vector<Conn> conns_;
  int ready_ = 0;
  ReplyFn on_reply_;
  Clock::time_point started_;
};

wire::Request make(wire::Op op, std::vector<std::string> keys, std::vector<std::string> values = {},
                   int64_t delta = 0) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  return r;
}

struct Target {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string peer;
};

Target resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) throw RunError("cannot resolve " + host + ": " + ::gai_strerror(rc));
  Target t;
  std::memcpy(&t.addr, res->ai_addr, res->ai_addrlen);
  t.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  t.peer = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(port);
  return t;
}

using Json = nlohmann::ordered_json;

Json run_barrier(const Options& o, const Target& t, wire::Dialect d, int n, int rep) {
  Json out;
  Driver drv(t.addr, t.len, t.peer, d);
  const std::string base = o.key_prefix + "/barrier/" + std::to_string(n) + "/" + std::to_string(rep);
  const std::string count_key = base + "/count", done_key = base + "/done";
  Deadline deadline = rendezvous::deadline_after(
      std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000)));

  int add_replies = 0, released = 0, last_arrivers = 0;
  int64_t max_seen = 0;
  Clock::time_point t_adds{}, t_set{};
  drv.on_reply([&](Conn& c, const wire::Request& req, const wire::Reply& rep_) {
    if (req.op == wire::Op::add) {
      ++add_replies;
      max_seen = std::max(max_seen, rep_.number);
      if (add_replies == n) t_adds = Clock::now();
      if (rep_.number == n) {
        ++last_arrivers;
        t_set = Clock::now();
        drv.send(c, make(wire::Op::set, {done_key}, {"1"}));
      }
      drv.send(c, make(wire::Op::wait, {done_key}));
    } else if (req.op == wire::Op::wait) {
      if (rep_.byte != wire::kWaitStop)
        throw RunError("WAIT of client " + std::to_string(c.index) + " answered " +
                       std::to_string(rep_.byte) + ", expected STOP_WAITING");
      ++released;
    }
  });

  auto ts = Clock::now();
  drv.open(n);
  drv.poll(
      deadline, [&] { return drv.ready_count() == n; }, "connect",
      [&] { return std::to_string(n - drv.ready_count()) + " of " + std::to_string(n) + " clients not yet connected"; });
  auto t0 = Clock::now();
  for (auto& c : drv.conns()) drv.send(c, make(wire::Op::add, {count_key}, {}, 1));
  drv.poll(
      deadline, [&] { return released == n; }, "barrier", [&] {
        return std::to_string(n - add_replies) + " ADD repl(ies) and " +
               std::to_string(n - released) + " STOP_WAITING missing of " + std::to_string(n) +
               " (highest count seen " + std::to_string(max_seen) + ")";
      });
  auto t1 = Clock::now();
  if (last_arrivers != 1 || max_seen != n)
    throw RunError("barrier counter at " + t.peer + " reached " + std::to_string(max_seen) +
                   " with " + std::to_string(last_arrivers) + " last arriver(s); expected " +
                   std::to_string(n) + " and 1");
  out["connect_s"] = secs(t0 - ts);
  out["barrier_s"] = secs(t1 - t0);
  out["total_s"] = secs(t1 - ts);
  out["adds_s"] = secs(t_adds - t0);    // every ADD answered
  out["release_s"] = secs(t1 - t_set);  // done key SET -> last STOP_WAITING received
  return out;
}

Json run_throughput(const Options& o, const Target& t, wire::Dialect d, int n, int rep) {
  Json out;
  Driver drv(t.addr, t.len, t.peer, d);
  const std::string base =
      o.key_prefix + "/tp/" + std::to_string(n) + "/" + std::to_string(rep) + "/";
  Deadline deadline = rendezvous::deadline_after(std::chrono::milliseconds(
      static_cast<long long>((o.timeout_s + o.duration_s) * 1000)));
  const std::string filler(o.value_bytes, 'v');

  uint64_t pairs = 0;
  int idle = 0;
  std::vector<double> lat_us;
  lat_us.reserve(1 << 16);
  Clock::time_point end{};
  auto issue = [&](Conn& c) {
    c.expect = filler;
    auto tag = std::to_string(c.iteration++);
    c.expect.replace(0, std::min(tag.size(), c.expect.size()), tag, 0,
                     std::min(tag.size(), c.expect.size()));
    std::string key = base + std::to_string(c.index);
    c.sent_at = Clock::now();
    // SET has no reply; sending both at once makes one round trip per pair.
    drv.send(c, make(wire::Op::set, {key}, {c.expect}));
    drv.send(c, make(wire::Op::get, {key}));
  };
  drv.on_reply([&](Conn& c, const wire::Request& req, const wire::Reply& r) {
    if (req.op != wire::Op::get) return;
    if (r.values.empty() || r.values[0] != c.expect)
      throw RunError("GET " + req.keys[0] + " from " + t.peer + " returned " +
                     std::to_string(r.values.empty() ? 0 : r.values[0].size()) +
                     " byte(s) that differ from the value just SET");
    auto now = Clock::now();
    ++pairs;
    lat_us.push_back(std::chrono::duration<double, std::micro>(now - c.sent_at).count());
    if (now < end) issue(c);
    else ++idle;
  });

  drv.open(n);
  drv.poll(
      deadline, [&] { return drv.ready_count() == n; }, "connect",
      [&] { return std::to_string(n - drv.ready_count()) + " of " + std::to_string(n) + " clients not yet connected"; });
  auto t0 = Clock::now();
  end = t0 + std::chrono::microseconds(static_cast<long long>(o.duration_s * 1e6));
  for (auto& c : drv.conns()) issue(c);
  drv.poll(
      deadline, [&] { return idle == n; }, "throughput",
      [&] { return std::to_string(n - idle) + " of " + std::to_string(n) + " clients still waiting on GET"; });
  double elapsed = secs(Clock::now() - t0);
  std::sort(lat_us.begin(), lat_us.end());
  auto pct = [&](double p) {
    return lat_us.empty() ? 0.0 : lat_us[std::min(lat_us.size() - 1, static_cast<std::size_t>(p * lat_us.size()))];
  };
  out["elapsed_s"] = elapsed;
  out["pairs"] = pairs;
  out["ops_s"] = 2.0 * static_cast<double>(pairs) / elapsed;
  out["p50_us"] = pct(0.50);
  out["p99_us"] = pct(0.99);
  return out;
}

std::string text_line(const Json& j) {
  char buf[512];
  std::string head = j["workload"].get<std::string>() + " n=" + std::to_string(j["clients"].get<int>()) +
                     " " + j["dialect"].get<std::string>() + " " + j["target"].get<std::string>() +
                     (j["label"].get<std::string>().empty() ? "" : " [" + j["label"].get<std::string>() + "]") +
                     " rep " + std::to_string(j["rep"].get<int>()) + ": ";
  if (!j["ok"].get<bool>()) return head + "ERROR " + j["error"].get<std::string>();
  if (j["workload"] == "barrier")
    std::snprintf(buf, sizeof buf,
                  "barrier %.4fs (ADDs answered %.4fs, release fan-out %.4fs), connect %.4fs, "
                  "total %.4fs",
                  j["barrier_s"].get<double>(), j["adds_s"].get<double>(),
                  j["release_s"].get<double>(), j["connect_s"].get<double>(),
                  j["total_s"].get<double>());
  else
    std::snprintf(buf, sizeof buf, "%.0f ops/s (%llu SET+GET pairs in %.3fs), pair p50 %.1fus p99 %.1fus",
                  j["ops_s"].get<double>(), static_cast<unsigned long long>(j["pairs"].get<uint64_t>()),
                  j["elapsed_s"].get<double>(), j["p50_us"].get<double>(), j["p99_us"].get<double>());
  return head + buf;
}

// Lifts the soft descriptor limit to the hard one; returns the soft limit now in force.
rlim_t raise_nofile() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

int run(const Options& o) {
  wire::Dialect d = o.dialect == "modern" ? wire::Dialect::modern : wire::Dialect::legacy;
  rlim_t nofile = raise_nofile();
  int worst = *std::max_element(o.clients.begin(), o.clients.end());
  if (nofile != RLIM_INFINITY && static_cast<rlim_t>(worst) + 16 > nofile) {
    std::cerr << "store_load: error: " << worst << " clients need more file descriptors than the "
              << "limit of " << nofile << " (raise `ulimit -Hn`)\n";
    return 2;
  }
  Target t = resolve(o.host, o.port);
  int failures = 0;
  for (int n : o.clients) {
    for (int rep = 0; rep < o.repeat; ++rep) {
      Json j;
      j["workload"] = o.workload;
      j["dialect"] = o.dialect;
      j["target"] = t.peer;
      j["label"] = o.label;
      j["clients"] = n;
      j["rep"] = rep;
      if (o.workload == "throughput") {
        j["duration_s"] = o.duration_s;
        j["value_bytes"] = o.value_bytes;
      }
      try {
        Json r = o.workload == "barrier" ? run_barrier(o, t, d, n, rep)
                                         : run_throughput(o, t, d, n, rep);
        j["ok"] = true;
        j.update(r);
      } catch (const std::exception& e) {
        j["ok"] = false;
        j["error"] = e.what();
        ++failures;
      }
      std::cout << (o.format == "json" ? j.dump() : text_line(j)) << std::endl;
    }
  }
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace ncclsmoke::bench

int main(int argc, char** argv) {
  using ncclsmoke::bench::Options;
  Options o;
  CLI::App app{
      "store_load: barrier and throughput load against any TCPStore server (ours or PyTorch's).\n"
      "barrier: t0 = all clients connected (and validated in the modern dialect); every client "
      "ADDs, the last arriver SETs the done key, every client WAITs; t1 = the last STOP_WAITING.\n"
      "throughput: SET+GET pairs, one round trip each, per connection, for --duration."};
  app.add_option("--host", o.host, "Server host")->capture_default_str();
  app.add_option("--port", o.port, "Server port")->required()->check(CLI::Range(1, 65535));
  app.add_option("--dialect", o.dialect,
                 "Wire dialect: legacy (torch <= 2.0, e.g. 1.13's server) or modern (>= 2.1)")
      ->check(CLI::IsMember({"legacy", "modern"}))
      ->capture_default_str();
  app.add_option("--workload", o.workload, "barrier or throughput")
      ->check(CLI::IsMember({"barrier", "throughput"}))
      ->capture_default_str();
  app.add_option("--clients,-n", o.clients, "Connection counts, one run (set) each")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  app.add_option("--repeat", o.repeat, "Runs per connection count")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--duration", o.duration_s, "Seconds per throughput run")
      ->check(CLI::Range(0.05, 600.0))
      ->capture_default_str();
  app.add_option("--value-bytes", o.value_bytes, "Value size for throughput SETs")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 22))
      ->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "Seconds a run may take (throughput: beyond --duration)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--format", o.format, "text or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--label", o.label, "Name of the contender, copied into each result");
  app.add_option("--key-prefix", o.key_prefix,
                 "Prefix of every key (default /ncclsmoke_bench/<pid>-<random>)");
  CLI11_PARSE(app, argc, argv);
  if (o.key_prefix.empty()) {
    std::random_device rd;
    o.key_prefix = "/ncclsmoke_bench/" + std::to_string(::getpid()) + "-" + std::to_string(rd() % 1000000);
  }
  try {
    return ncclsmoke::bench::run(o);
  } catch (const std::exception& e) {
    std::cerr << "store_load: error: " << e.what() << "\n";
    return 1;
  }
}
