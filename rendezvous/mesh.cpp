#include "rendezvous/mesh.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "rendezvous/connect.h"

namespace ncclsmoke::rendezvous {
namespace {

using nlohmann::json;

// 8-byte hello both ways: "NSMK" + uint32 rank, so a dial that reaches the wrong process (a stale
// address, a port reused by something else) is not counted as a working path.
constexpr char kHelloMagic[4] = {'N', 'S', 'M', 'K'};

std::string hello(int rank) {
  std::string h(kHelloMagic, 4);
  uint32_t r = static_cast<uint32_t>(rank);
  h.append(reinterpret_cast<const char*>(&r), 4);
  return h;
}

// Sends and receives exactly n bytes before the deadline; false on timeout, EOF or error.
bool send_all(int fd, const std::string& data, Deadline deadline) {
  std::size_t off = 0;
  while (off < data.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(remaining(deadline).count())) <= 0) return false;
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

bool recv_exact(int fd, std::size_t n, std::string& out, Deadline deadline) {
  out.resize(n);
  std::size_t off = 0;
  while (off < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(remaining(deadline).count())) <= 0) return false;
    ssize_t got = ::recv(fd, out.data() + off, n - off, 0);
    if (got <= 0) {
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    off += static_cast<std::size_t>(got);
  }
  return true;
}

class Listener {
 public:
  Listener(const MeshOptions& opt, int rank) : rank_(rank) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
    const char* node = opt.bind_address.empty() ? nullptr : opt.bind_address.c_str();
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(node, "0", &hints, &res);
    if (rc != 0)
      throw StoreError(ErrorClass::invalid, "mesh: cannot use bind address '" + opt.bind_address +
                                                "': " + gai_strerror(rc));
    std::string last_error = "no usable address";
    for (addrinfo* ai = res; ai && fd_ < 0; ai = ai->ai_next) {
      uint16_t lo = opt.port_min, hi = std::max(opt.port_min, opt.port_max);
      for (uint32_t port = lo; port <= hi && fd_ < 0; ++port) {
        int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0) {
          last_error = std::strerror(errno);
          break;
        }
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_storage ss{};
        std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        if (ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
        else reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), ai->ai_addrlen) == 0 &&
            ::listen(fd, 1024) == 0) {
          fd_ = fd;
        } else {
          last_error = "port " + std::to_string(port) + ": " + std::strerror(errno);
          ::close(fd);
        }
      }
    }
    ::freeaddrinfo(res);
    if (fd_ < 0)
      throw StoreError(ErrorClass::other, "mesh: rank " + std::to_string(rank) +
                                              " cannot listen on '" + opt.bind_address +
                                              "': " + last_error);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    port_ = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                    : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~Listener() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }

  uint16_t port() const { return port_; }

 private:
  // Answers each dial with our hello. Handshakes are tiny, so one thread serves them in turn.
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string in;
      auto d = deadline_after(Millis{1000});
      if (recv_exact(c, 8, in, d) && in.compare(0, 4, kHelloMagic, 4) == 0)
        send_all(c, hello(rank_), d);
      ::close(c);
    }
  }

  int rank_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string join_host_port(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// Dials one peer at `addr` and checks its hello; nullopt on success.
std::optional<PairFailure> probe_pair(int self, int peer, const std::string& addr,
                                      const MeshOptions& opt) {
  auto start = Clock::now();
  PairFailure f;
  f.from = self;
  f.to = peer;
  f.to_address = addr;
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(addr, host, port)) {
    f.error_class = ErrorClass::protocol;
    f.message = "rank " + std::to_string(peer) + " published a malformed address '" + addr + "'";
    return f;
  }
  auto pair_deadline = earliest(deadline_after(opt.pair_timeout), opt.deadline);
  try {
    Backoff quick;
    quick.initial = Millis{50};
    quick.max = Millis{300};
    auto conn = connect_tcp(host, port, pair_deadline, quick);
    std::string reply;
    bool ok = send_all(conn.fd, hello(self), pair_deadline) &&
              recv_exact(conn.fd, 8, reply, pair_deadline);
    ::close(conn.fd);
    uint32_t their = 0;
    if (ok && reply.compare(0, 4, kHelloMagic, 4) == 0) {
      std::memcpy(&their, reply.data() + 4, 4);
      if (static_cast<int>(their) == peer) return std::nullopt;
      f.error_class = ErrorClass::protocol;
      f.message = "connected to " + addr + " but rank " + std::to_string(their) +
                  " answered instead of rank " + std::to_string(peer);
    } else {
      f.error_class = ok ? ErrorClass::protocol : ErrorClass::timed_out;
      f.message = "connected to " + addr + " but no ncclsmoke handshake came back within " +
                  std::to_string(remaining(pair_deadline).count()) + "ms";
    }
  } catch (const StoreError& e) {
    f.error_class = e.error_class();
    f.message = e.what();
  }
  f.waited_s = seconds_since(start);
  return f;
}

json failure_to_json(const PairFailure& f) {
  return {{"from", f.from},       {"to", f.to},           {"to_address", f.to_address},
          {"class", to_string(f.error_class)}, {"message", f.message}, {"waited_s", f.waited_s}};
}

PairFailure failure_from_json(const json& j) {
  PairFailure f;
  f.from = j.value("from", -1);
  f.to = j.value("to", -1);
  f.to_address = j.value("to_address", "");
  f.message = j.value("message", "");
  f.waited_s = j.value("waited_s", 0.0);
  std::string cls = j.value("class", "other");
  for (auto c : {ErrorClass::dns, ErrorClass::refused, ErrorClass::timed_out,
                 ErrorClass::unreachable, ErrorClass::reset, ErrorClass::protocol})
    if (cls == to_string(c)) f.error_class = c;
  return f;
}

}  // namespace

bool split_host_port(const std::string& text, std::string& host, uint16_t& port) {
  std::string p;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    host = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return false;
    host = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (host.empty() || p.empty() || p.size() > 5) return false;
  for (char c : p)
    if (c < '0' || c > '9') return false;
  int v = std::stoi(p);
  if (v < 1 || v > 65535) return false;
  port = static_cast<uint16_t>(v);
  return true;
}

std::vector<int> mesh_peers(int rank, const std::vector<int>& ranks, std::size_t threshold,
                            std::size_t random_peers) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<int> out;
  auto me = std::find(sorted.begin(), sorted.end(), rank);
  if (me == sorted.end()) return out;
  if (sorted.size() <= threshold) {
    for (int r : sorted)
      if (r != rank) out.push_back(r);
    return out;
  }
  std::size_t n = sorted.size(), i = static_cast<std::size_t>(me - sorted.begin());
  out.push_back(sorted[(i + 1) % n]);
  out.push_back(sorted[(i + n - 1) % n]);
  std::mt19937 rng(static_cast<uint32_t>(rank) * 2654435761u + 17u);
  std::vector<int> others;
  for (int r : sorted)
    if (r != rank && std::find(out.begin(), out.end(), r) == out.end()) others.push_back(r);
  std::shuffle(others.begin(), others.end(), rng);
  for (std::size_t k = 0; k < random_peers && k < others.size(); ++k) out.push_back(others[k]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

MeshResult run_mesh_probe(Store& store, const MeshOptions& opt) {
  auto start = Clock::now();
  MeshResult result;
  Listener listener(opt, opt.rank);
  std::string advertise = opt.advertise_address.empty() ? opt.bind_address : opt.advertise_address;
  if (advertise.empty()) advertise = "127.0.0.1";
  result.listen_address = join_host_port(advertise, listener.port());
  store.set("mesh/addr/" + std::to_string(opt.rank), result.listen_address);

  result.peers = mesh_peers(opt.rank, opt.ranks, opt.full_mesh_threshold, opt.random_peers);
  // Addresses first, under a deadline that leaves time to dial: a peer that died after joining
  // never publishes, and must not eat the whole probe's budget.
  auto addr_deadline = std::max(Clock::now(), opt.deadline - opt.pair_timeout - Millis{500});
  std::vector<std::string> keys;
  for (int peer : result.peers) keys.push_back("mesh/addr/" + std::to_string(peer));
  try {
    store.wait(keys, addr_deadline);
  } catch (const StoreError& e) {
    if (e.error_class() != ErrorClass::timed_out) throw;
  }
  std::vector<std::future<std::optional<PairFailure>>> probes;
  for (std::size_t i = 0; i < result.peers.size(); ++i) {
    int peer = result.peers[i];
    if (!store.check({keys[i]})) {
      result.silent_ranks.push_back(peer);  // never published: a silent rank, not a failed pair
      continue;
    }
    auto addr = store.get(keys[i], deadline_after(Millis{2000}));
    probes.push_back(std::async(std::launch::async,
                                [&, peer, addr] { return probe_pair(opt.rank, peer, addr, opt); }));
  }
  json mine{{"tested", probes.size()}, {"silent", result.silent_ranks}, {"failures", json::array()}};
  for (auto& p : probes) {
    auto f = p.get();
    if (f) {
      mine["failures"].push_back(failure_to_json(*f));
      result.failures.push_back(*f);
    }
  }
  result.pairs_tested = probes.size();
  store.set("mesh/result/" + std::to_string(opt.rank), mine.dump());

  if (opt.rank == 0) {
    std::vector<PairFailure> all;
    std::vector<int> silent;
    std::size_t tested = 0;
    for (int r : opt.ranks) {
      std::string text;
      if (r != opt.rank && !store.check({"mesh/addr/" + std::to_string(r)})) {
        silent.push_back(r);  // never listened: its result cannot come either
        continue;
      }
      try {
        text = store.get("mesh/result/" + std::to_string(r), opt.deadline + opt.done_grace);
      } catch (const StoreError& e) {
        if (e.error_class() != ErrorClass::timed_out) throw;
        silent.push_back(r);
        continue;
      }
      auto j = json::parse(text, nullptr, false);
      if (j.is_discarded()) continue;
      tested += j.value("tested", std::size_t{0});
      for (int s : j.value("silent", std::vector<int>{})) silent.push_back(s);
      for (const auto& f : j.value("failures", json::array())) all.push_back(failure_from_json(f));
    }
    std::sort(silent.begin(), silent.end());
    silent.erase(std::unique(silent.begin(), silent.end()), silent.end());
    json done{{"tested", tested}, {"silent", silent}, {"failures", json::array()}};
    for (const auto& f : all) done["failures"].push_back(failure_to_json(f));
    store.set("mesh/done", done.dump());
    result.failures = std::move(all);
    result.silent_ranks = std::move(silent);
    result.pairs_tested = tested;
    result.summary_received = true;
  } else {
    try {
      auto j = json::parse(store.get("mesh/done", opt.deadline + 2 * opt.done_grace), nullptr, false);
      if (!j.is_discarded()) {
        result.summary_received = true;
        result.pairs_tested = j.value("tested", std::size_t{0});
        result.silent_ranks = j.value("silent", std::vector<int>{});
        result.failures.clear();
        for (const auto& f : j.value("failures", json::array()))
          result.failures.push_back(failure_from_json(f));
      }
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) throw;
    }
  }
  result.duration_s = seconds_since(start);
  return result;
}

}  // namespace ncclsmoke::rendezvous
