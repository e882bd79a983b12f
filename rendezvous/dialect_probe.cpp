#include "rendezvous/dialect_probe.h"
#include "rendezvous/socket_io.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

// The torch eras' dispatch that this relies on: pytorch/pytorch
// torch/csrc/distributed/c10d/TCPStoreBackend.cpp @f3e8ca07 (the VALIDATE-era classic server:
// TCPStoreMasterDaemon::query accepts VALIDATE..CANCEL_WAIT and throws "Unexpected query type",
// closing the socket, on anything else, e.g. PING).
namespace ncclsmoke::rendezvous {

namespace {

using wire::Dialect;
using wire::Op;

enum class Io { ok, eof, reset, timeout };

struct Outcome {
  Io io = Io::ok;
  int err = 0;            // errno for reset
  std::size_t got = 0;    // bytes read before eof/reset/timeout
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Outcome send_all(int fd, const std::string& bytes, Deadline d) {
  int err = 0;
  switch (send_bytes(fd, bytes.data(), bytes.size(), d, &err)) {
    case SendResult::ok: return {};
    case SendResult::timeout: return {Io::timeout, 0, 0};
    case SendResult::error: break;
  }
  return {Io::reset, err, 0};
}

Outcome read_exact(int fd, std::string& out, std::size_t n, Deadline d) {
  out.clear();
  char chunk[256];
  while (out.size() < n) {
    ssize_t r = ::recv(fd, chunk, std::min(sizeof chunk, n - out.size()), MSG_DONTWAIT);
    if (r > 0) {
      out.append(chunk, static_cast<std::size_t>(r));
      continue;
    }
    if (r == 0) return {Io::eof, 0, out.size()};
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return {Io::reset, errno, out.size()};
    pollfd p{fd, POLLIN, 0};
    int pr = ::poll(&p, 1, poll_timeout_ms(d));
    if (pr < 0 && errno != EINTR) return {Io::reset, errno, out.size()};
    if (pr == 0 && expired(d)) return {Io::timeout, 0, out.size()};
  }
  return {Io::ok, 0, out.size()};
}

std::string describe(const Outcome& o) {
  switch (o.io) {
    case Io::ok: return "answered";
    case Io::eof: return "closed the connection (EOF)";
    case Io::reset: return std::string("reset the connection (") + std::strerror(o.err) + ")";
    case Io::timeout: return "did not answer";
  }
  return "?";
}

std::string encode(Dialect d, Op op, uint32_t u32 = 0) {
  wire::Request r;
  r.op = op;
  r.u32 = u32;
  std::string out;
  wire::encode_request(d, r, out);
  return out;
}

// VALIDATE + GETNUMKEYS x4: 9 bytes, so a legacy server's SET key length is complete (and absurd)
// rather than awaited forever (see the header).
constexpr int kProbeCounts = 4;

std::string validate_probe_bytes() {
  std::string out = encode(Dialect::modern, Op::validate, wire::kValidateMagic);
  for (int i = 0; i < kProbeCounts; ++i) out += encode(Dialect::modern, Op::num_keys);
  return out;
}

DialectProbe make_probe(StoreEra era) {
  DialectProbe p{};
  p.era = era;
  p.dialect = era == StoreEra::torch_legacy ? Dialect::legacy : Dialect::modern;
  p.ping = era == StoreEra::validate_ping;
  switch (era) {
    case StoreEra::torch_legacy:
      p.era_text = "torch <= 2.0 (legacy dialect: the server reset VALIDATE)";
      break;
    case StoreEra::validate_no_ping:
      p.era_text = "torch 2.1-2.4 (VALIDATE, no PING)";
      break;
    case StoreEra::validate_ping:
      p.era_text = "torch >= 2.5 or ncclsmoke (VALIDATE + PING)";
      break;
  }
  return p;
}

class Prober {
 public:
  Prober(const std::string& host, uint16_t port, Deadline deadline, const Backoff& backoff)
      : host_(host), port_(port), deadline_(deadline), backoff_(backoff), start_(Clock::now()) {}

  DialectProbe run() {
    Fd c;
    std::string peer;
    open(c, peer);
    Outcome o = send_all(c.fd, validate_probe_bytes(), deadline_);
    std::string reply;
    if (o.io == Io::ok) o = read_exact(c.fd, reply, 8 * kProbeCounts, deadline_);
    if (o.io == Io::timeout) silent(peer, "VALIDATE + GETNUMKEYS", o);
    if (o.io != Io::ok) {
      if (o.got > 0)
        throw StoreError(ErrorClass::protocol,
                         "dialect probe of " + endpoint() + " (" + peer + "): the server sent " +
                             std::to_string(o.got) + " of the " + std::to_string(8 * kProbeCounts) +
                             " reply bytes to VALIDATE + GETNUMKEYS and then " + describe(o) +
                             " after " + waited() + ": not a TCPStore server");
      ::close(c.fd);
      c.fd = -1;
      return confirm_legacy(o);
    }
    // A VALIDATE-era server. PING with a nonce tells torch >= 2.5 (echo) from 2.1-2.4 (close).
    uint32_t nonce = static_cast<uint32_t>(::getpid()) ^ 0x5A5A0000u;
    o = send_all(c.fd, encode(Dialect::modern, Op::ping, nonce), deadline_);
    if (o.io == Io::ok) o = read_exact(c.fd, reply, 4, deadline_);
    if (o.io == Io::timeout) silent(peer, "PING (after VALIDATE + GETNUMKEYS were answered)", o);
    if (o.io != Io::ok) return finish(make_probe(StoreEra::validate_no_ping));
    uint32_t echo = 0;
    std::memcpy(&echo, reply.data(), 4);
    if (echo != nonce)
      throw StoreError(ErrorClass::protocol,
                       "dialect probe of " + endpoint() + " (" + peer + "): PING " +
                           std::to_string(nonce) + " was answered with " + std::to_string(echo) +
                           ": not a TCPStore server");
    return finish(make_probe(StoreEra::validate_ping));
  }

 private:
  std::string endpoint() const { return join_host_port(host_, port_); }
  std::string waited() const { return seconds_text_fine(seconds_since(start_)); }

  void open(Fd& c, std::string& peer) {
    Connected conn = connect_tcp(host_, port_, deadline_, backoff_);
    c.fd = conn.fd;
    peer = conn.report.peer_address;
  }

  [[noreturn]] void silent(const std::string& peer, const char* what, const Outcome& o) {
    throw StoreError(ErrorClass::stalled,
                     "dialect probe of " + endpoint() + ": connected to " + peer +
                         " but the server did not answer " + what + " within " + waited() +
                         (o.got ? " (" + std::to_string(o.got) + " reply bytes came)" : "") +
                         ": it accepts connections but is not answering as a TCPStore (stalled, "
                         "or not a TCPStore server)");
  }

  DialectProbe finish(DialectProbe p) {
    p.probe_s = seconds_since(start_);
    return p;
  }

  // The modern probe was closed on. A torch <= 2.0 server answers a legacy GETNUMKEYS (opcode 6)
  // on a new connection; a modern one would close that too (no VALIDATE first).
  DialectProbe confirm_legacy(const Outcome& modern) {
    Fd c;
    std::string peer;
    open(c, peer);
    Outcome o = send_all(c.fd, encode(Dialect::legacy, Op::num_keys), deadline_);
    std::string reply;
    if (o.io == Io::ok) o = read_exact(c.fd, reply, 8, deadline_);
    if (o.io == Io::timeout) silent(peer, "a legacy GETNUMKEYS (after it had closed on VALIDATE)", o);
    if (o.io != Io::ok)
      throw StoreError(ErrorClass::reset,
                       "dialect probe of " + endpoint() + " (" + peer + "): the server " +
                           describe(modern) + " on VALIDATE (modern dialect) and " + describe(o) +
                           " on a legacy GETNUMKEYS, after " + waited() +
                           ": it speaks neither TCPStore dialect (or is restarting)");
    return finish(make_probe(StoreEra::torch_legacy));
  }

  std::string host_;
  uint16_t port_;
  Deadline deadline_;
  Backoff backoff_;
  Clock::time_point start_;
};

struct CacheEntry {
  std::timed_mutex probing;          // held while the first caller probes
  std::optional<DialectProbe> answer;  // guarded by `probing`
};

std::mutex cache_mu;
std::map<std::string, std::shared_ptr<CacheEntry>>& cache() {
  static std::map<std::string, std::shared_ptr<CacheEntry>> c;
  return c;
}

}  // namespace

const char* to_string(StoreEra era) {
  switch (era) {
    case StoreEra::torch_legacy: return "torch<=2.0";
    case StoreEra::validate_no_ping: return "torch2.1-2.4";
    case StoreEra::validate_ping: return "torch>=2.5";
  }
  return "?";
}

DialectProbe probe_dialect(const std::string& host, uint16_t port, Deadline deadline,
                           const Backoff& backoff) {
  auto start = Clock::now();
  std::string key = join_host_port(host, port);
  std::shared_ptr<CacheEntry> entry;
  {
    std::lock_guard lock(cache_mu);
    auto& slot = cache()[key];
    if (!slot) slot = std::make_shared<CacheEntry>();
    entry = slot;
  }
  std::unique_lock lock(entry->probing, std::defer_lock);
  if (!lock.try_lock_until(deadline))
    throw StoreError(ErrorClass::timed_out,
                     "dialect probe of " + key + ": another thread's probe of the same endpoint "
                     "was still running after " + seconds_text_fine(seconds_since(start)));
  if (entry->answer) {
    DialectProbe p = *entry->answer;
    p.cached = true;
    p.probe_s = seconds_since(start);
    return p;
  }
  DialectProbe p = Prober(host, port, deadline, backoff).run();
  entry->answer = p;
  return p;
}

void forget_dialect_probes() {
  std::lock_guard lock(cache_mu);
  cache().clear();
}

}  // namespace ncclsmoke::rendezvous
