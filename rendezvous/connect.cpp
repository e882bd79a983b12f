#include "rendezvous/connect.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "rendezvous/net.h"

namespace ncclsmoke::rendezvous {
namespace {

constexpr std::size_t kKeepFirst = 4;  // attempts kept in the report: first ones ...
constexpr std::size_t kKeepLast = 4;   // ... and last ones
constexpr std::size_t kMaxDistinct = 16;  // distinct (address, error) entries in a message
constexpr Millis kAttemptCap{5000};    // one SYN exchange; the kernel retransmits within it
constexpr Millis kFinalRoundMargin{20};  // time left for the last round before the deadline


struct Address {
  sockaddr_storage storage{};
  socklen_t len = 0;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

struct Resolved {
  int gai = 0;      // 0 on success
  int sys_errno = 0;  // for EAI_SYSTEM
  bool unfinished = false;  // the lookup did not finish before the deadline
  std::vector<Address> addresses;
};

Resolved resolve_now(const std::string& host, uint16_t port) {
  Resolved r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  r.gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (r.gai != 0) {
    r.sys_errno = errno;
    return r;
  }
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Address a;
    std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.len = ai->ai_addrlen;
    bool dup = false;
    for (const auto& b : r.addresses)
      if (b.len == a.len && std::memcmp(&b.storage, &a.storage, a.len) == 0) dup = true;
    if (!dup) r.addresses.push_back(a);
  }
  ::freeaddrinfo(res);
  return r;
}

// getaddrinfo has no timeout (the resolver's own can reach tens of seconds), so it runs on a
// detached thread and we stop waiting at the deadline; a late answer is dropped with its state.
Resolved resolve(const std::string& host, uint16_t port, Deadline deadline) {
  // A numeric address never waits on a resolver: no helper thread for it (a 1024-rank mesh
  // dials thousands of numeric addresses, and a thread per dial is measurable CPU there).
  if (is_numeric_address(host)) return resolve_now(host, port);
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Resolved result;
  };
  auto shared = std::make_shared<Shared>();
  try {
    std::thread([shared, host, port] {
      Resolved r = resolve_now(host, port);
      std::lock_guard lock(shared->mu);
      shared->result = std::move(r);
      shared->done = true;
      shared->cv.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    return resolve_now(host, port);  // no thread available: resolve inline
  }
  std::unique_lock lock(shared->mu);
  if (!shared->cv.wait_until(lock, deadline, [&] { return shared->done; })) {
    Resolved r;
    r.gai = EAI_AGAIN;
    r.unfinished = true;
    return r;
  }
  return std::move(shared->result);
}

bool retryable_gai(int rc) {
  return rc == EAI_AGAIN || rc == EAI_NONAME || rc == EAI_FAIL
#ifdef EAI_NODATA
         || rc == EAI_NODATA
#endif
      ;
}

std::string gai_message(const Resolved& r) {
  if (r.unfinished) return "the lookup did not finish before the deadline";
  if (r.gai == EAI_SYSTEM) return fmt::format("getaddrinfo: {}", std::strerror(r.sys_errno));
  return ::gai_strerror(r.gai);
}

std::string attempt_message(ErrorClass cls, int err) {
  std::string text = std::strerror(err);
  switch (cls) {
    case ErrorClass::refused:
      return "connection refused (RST: the host is up but nothing listens on the port, or a "
             "REJECT rule)";
    case ErrorClass::timed_out:
      return "connection timed out (no answer to SYN: a DROP rule or dead host)";
    case ErrorClass::unreachable:
      return fmt::format("{} (no route to that address: routing, interface or an ICMP-rejecting "
                         "rule)",
                         text);
    default:
      return text;
  }
}

// One non-blocking connect bounded by `budget`. Returns the fd, or -1 with `err` set (ETIMEDOUT
// when nothing answered within the budget).
int try_connect(const Address& a, Millis budget, int& err, int max_segment_bytes) {
  int fd = ::socket(a.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  if (max_segment_bytes > 0)  // best effort: a kernel that refuses keeps the route's MSS
    ::setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &max_segment_bytes, sizeof max_segment_bytes);
  if (::connect(fd, a.sa(), a.len) == 0) return fd;
  if (errno != EINPROGRESS) {
    err = errno;
    ::close(fd);
    return -1;
  }
  Deadline until = Clock::now() + budget;
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    int n = ::poll(&p, 1, poll_timeout_ms(until));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      ::close(fd);
      return -1;
    }
    if (n == 0) {
      if (!expired(until)) continue;
      err = ETIMEDOUT;
      ::close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    if (so_error == 0) return fd;
    err = so_error;
    ::close(fd);
    return -1;
  }
}

// Bounded record of failed attempts plus per-(address, error) counts for the message.
class AttemptLog {
 public:
  void add(ConnectAttempt a) {
    ++total_;
    bool found = false;
    for (auto& d : distinct_)
      if (d.address == a.address && d.error_class == a.error_class && d.sys_errno == a.sys_errno) {
        ++d.count;
        found = true;
      }
    if (!found && distinct_.size() < kMaxDistinct)
      distinct_.push_back({a.address, a.error_class, a.sys_errno, a.message, 1});
    else if (!found)
      ++distinct_dropped_;
    if (first_.size() < kKeepFirst) {
      first_.push_back(std::move(a));
    } else {
      last_.push_back(std::move(a));
      if (last_.size() > kKeepLast) last_.pop_front();
    }
  }

  std::vector<ConnectAttempt> kept() const {
    std::vector<ConnectAttempt> out(first_.begin(), first_.end());
    out.insert(out.end(), last_.begin(), last_.end());
    return out;
  }

  bool any(ErrorClass c) const {
    for (const auto& d : distinct_)
      if (d.error_class == c) return true;
    return false;
  }

  std::size_t total() const { return total_; }

  std::string describe() const {
    std::string out;
    for (const auto& d : distinct_) {
      out += fmt::format("; {}: {}", d.address, d.message);
      if (d.count > 1) out += fmt::format(" ({} times)", d.count);
    }
    if (distinct_dropped_) out += fmt::format("; and {} other errors", distinct_dropped_);
    return out;
  }

 private:
  struct Distinct {
    std::string address;
    ErrorClass error_class;
    int sys_errno;
    std::string message;
    int count;
  };
  std::size_t total_ = 0;
  std::vector<ConnectAttempt> first_;
  std::deque<ConnectAttempt> last_;
  std::vector<Distinct> distinct_;
  std::size_t distinct_dropped_ = 0;
};

}  // namespace

ErrorClass classify_errno(int err) {
  switch (err) {
    case ECONNREFUSED:
      return ErrorClass::refused;
    case ETIMEDOUT:
      return ErrorClass::timed_out;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
    case EADDRNOTAVAIL:
    case EAFNOSUPPORT:
      return ErrorClass::unreachable;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
      return ErrorClass::reset;
    default:
      return ErrorClass::other;
  }
}

Millis backoff_delay(const Backoff& b, int round, double u, Millis left) {
  double cap = static_cast<double>(std::max<long long>(b.max.count(), 0));
  double base = static_cast<double>(b.initial.count()) * std::pow(b.multiplier, std::max(round, 0));
  if (!std::isfinite(base) || base > cap) base = cap;
  u = std::clamp(u, 0.0, 1.0);
  double jittered = base * (1.0 + b.jitter * (2.0 * u - 1.0));
  jittered = std::clamp(jittered, 0.0, cap);
  Millis d{static_cast<long long>(jittered)};
  return std::min(d, std::max(left, Millis{0}));
}

ConnectOutcome try_connect_tcp(const std::string& host, uint16_t port, Deadline deadline,
                               const Backoff& backoff, int max_segment_bytes) {
  const auto start = Clock::now();
  const std::string target = join_host_port(host, port);
  AttemptLog log;
  ConnectReport report;
  report.host = host;
  report.port = port;
  auto failed = [&](ErrorClass cls, std::string message) {
    ConnectOutcome out;
    out.report = std::move(report);
    out.error_class = cls;
    out.error = std::move(message);
    return out;
  };
  if (expired(deadline))
    return failed(ErrorClass::timed_out,
                  fmt::format("could not connect to {}: the deadline had already passed before "
                              "the first attempt",
                              target));
  std::vector<std::string> addresses_seen;
  int lookups = 0;
  std::string last_dns_error;
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);

  bool final_round = false;
  for (int round = 0;; ++round) {
    report.rounds = round + 1;
    ++lookups;
    Resolved r = resolve(host, port, deadline);
    if (r.gai != 0) {
      ++report.dns_failures;
      last_dns_error = gai_message(r);
      log.add({host, ErrorClass::dns, r.gai,
               fmt::format("name did not resolve: {}", last_dns_error), seconds_since(start)});
      if (!r.unfinished && !retryable_gai(r.gai)) break;  // e.g. EAI_SERVICE: retrying won't help
    } else {
      for (std::size_t i = 0; i < r.addresses.size(); ++i) {
        const Address& a = r.addresses[i];
        std::string text = format_address(a.sa(), a.len);
        if (std::find(addresses_seen.begin(), addresses_seen.end(), text) == addresses_seen.end())
          addresses_seen.push_back(text);
        Millis left = remaining(deadline);
        if (left.count() == 0 && i > 0) break;
        // Share what is left among the addresses not yet tried in this round.
        Millis budget = std::min(kAttemptCap, left / static_cast<long>(r.addresses.size() - i));
        if (budget.count() == 0) budget = left;
        int err = 0;
        int fd = try_connect(a, budget, err, max_segment_bytes);
        if (fd >= 0) {
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          int flags = ::fcntl(fd, F_GETFL);
          if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
          sockaddr_storage local{};
          socklen_t local_len = sizeof local;
          if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0) {
            report.local_address = format_address(reinterpret_cast<sockaddr*>(&local), local_len);
            report.local_interface = interface_of(reinterpret_cast<sockaddr*>(&local));
          }
          report.peer_address = text;
          report.attempts = log.kept();
          report.elapsed_s = seconds_since(start);
          ConnectOutcome out;
          out.fd = fd;
          out.report = std::move(report);
          return out;
        }
        ErrorClass cls = classify_errno(err);
        log.add({text, cls, err, attempt_message(cls, err), seconds_since(start)});
      }
    }
    // The backoff never sleeps past the deadline: when it would, one last round runs just
    // before the deadline instead (the server may have come up meanwhile).
    Millis left = remaining(deadline);
    if (final_round || left < kFinalRoundMargin * 2) break;
    Millis pause = backoff_delay(backoff, round, unit(rng), left);
    if (pause >= left - kFinalRoundMargin) {
      pause = left - kFinalRoundMargin;
      final_round = true;
    }
    std::this_thread::sleep_for(pause);
  }

  report.attempts = log.kept();
  report.elapsed_s = seconds_since(start);
  const std::string waited = seconds_text_fine(report.elapsed_s);
  const std::size_t tcp_attempts = log.total() - static_cast<std::size_t>(report.dns_failures);
  if (tcp_attempts == 0) {
    return failed(ErrorClass::dns,
                  fmt::format("could not connect to {} after {}: the name did not resolve in {} "
                              "{} ({}); check the host name, or that its DNS record (e.g. a "
                              "headless Service) has been published",
                              target, waited, lookups, lookups == 1 ? "lookup" : "lookups",
                              last_dns_error));
  }
  ErrorClass cls = ErrorClass::other;
  for (ErrorClass c : {ErrorClass::refused, ErrorClass::timed_out, ErrorClass::unreachable,
                       ErrorClass::reset}) {
    if (log.any(c)) {
      cls = c;
      break;
    }
  }
  return failed(cls, fmt::format("could not connect to {} after {}: {} {} over {} {} in {} {}{}",
                                 target, waited, tcp_attempts,
                                 tcp_attempts == 1 ? "attempt" : "attempts", addresses_seen.size(),
                                 addresses_seen.size() == 1 ? "address" : "addresses",
                                 report.rounds, report.rounds == 1 ? "round" : "rounds",
                                 log.describe()));
}

Connected connect_tcp(const std::string& host, uint16_t port, Deadline deadline,
                      const Backoff& backoff, int max_segment_bytes) {
  ConnectOutcome out = try_connect_tcp(host, port, deadline, backoff, max_segment_bytes);
  if (!out.ok()) throw StoreError(out.error_class, out.error);
  return Connected{out.fd, std::move(out.report)};
}

}  // namespace ncclsmoke::rendezvous
