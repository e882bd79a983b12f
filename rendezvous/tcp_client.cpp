#include "rendezvous/tcp_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "rendezvous/store_util.h"
#include "rendezvous/socket_io.h"

// Implementation notes (the header states the contract):
// - The socket from connect_tcp stays blocking; every send/recv uses MSG_DONTWAIT behind a poll()
//   bounded by the operation's deadline, so no call can block past it.
// - After any I/O failure or a timed-out non-wait operation the connection is closed (a late reply
//   would desync it); the next operation reconnects (bounded by op_timeout) and, if that fails,
//   throws the connect error.
// - One mutex serialises operations (torch's activeOpLock_): replies are matched by order.
namespace ncclsmoke::rendezvous {

using wire::Dialect;
using wire::Op;
using wire::Reply;
using wire::Request;

namespace {

constexpr std::size_t kMaxKeysToCheck = 16;  // after a timed-out wait, CHECK each of these
constexpr Millis kJoinPoll{10};              // torch's waitForWorkers polls every 10 ms
// The store's segments fit the smallest MTU any IPv6 path carries (1280): its messages are small,
// and a path-MTU black hole (a hop with a smaller MTU that drops instead of answering) then cannot
// stall the rendezvous, so the mesh that runs after it can name the black hole.
constexpr int kStoreMaxSegment = 1280 - 40 - 20;  // the IPv6 minimum MTU, less IPv6 and TCP headers
// After a wait's deadline, CANCEL_WAIT (modern) or the reconnect (legacy) get at most this long
// (and at most op_timeout), so a timed-out wait returns close to its deadline even when the
// server has died meanwhile.
constexpr Millis kAfterDeadlineGrace{1000};

std::string on_keys(const std::vector<std::string>& keys) {
  if (keys.empty()) return "";
  return (keys.size() == 1 ? " on key " : " on keys ") + describe_keys(keys);
}

Request make(Op op) {
  Request r;
  r.op = op;
  return r;
}

// What the ops older servers lack need (LAUNCHERS.md "Store dialects by torch version").
constexpr const char* kNeedsPing = "torch >= 2.5 or an ncclsmoke server";
constexpr const char* kNeedsQueues = "a torch >= 2.8 libuv server or an ncclsmoke server";
constexpr const char* kNeedsList = "a torch >= 2.10 libuv server or an ncclsmoke server";

// Thrown internally when a reply did not come in time; converted to a StoreError by the caller,
// which knows whether the deadline was the op timeout or the caller's wait deadline.
struct IoTimeout {};

}  // namespace

struct TcpStore::Impl {
  TcpStoreOptions opt;
  std::mutex mu;
  int fd = -1;
  std::string rbuf;
  ConnectReport report;
  bool joined = false;
  std::optional<DialectProbe> probe;  // set by negotiation, reused by every reconnect
  bool queues_ok = false;             // a queue op was answered once: the server has them

  explicit Impl(TcpStoreOptions o) : opt(std::move(o)) {}
  ~Impl() { close_fd(); }

  std::string peer() const {
    if (!report.peer_address.empty()) return report.peer_address;
    return join_host_port(opt.host, opt.port);
  }

  std::string wire_key(const std::string& key) const {
    return key == "init/" ? key : opt.key_prefix + key;
  }

  std::vector<std::string> wire_keys(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(wire_key(k));
    return out;
  }

  void close_fd() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    rbuf.clear();
  }

  Deadline op_deadline() const { return deadline_after(opt.op_timeout); }

  // ---- connection ----

  void open(Deadline deadline) {
    auto start = Clock::now();
    if (opt.negotiate && !probe) {
      probe = probe_dialect(opt.host, opt.port, deadline, opt.backoff);
      opt.dialect = probe->dialect;
    }
    int handshake_resets = 0;
    std::string last_reset;
    // After the server accepted and then hung up on the handshake, the message must say so, not
    // just that the last reconnect ran out of time.
    auto handshake_failure = [&](const std::string& extra) {
      return StoreError(ErrorClass::reset,
                        "connected to " + peer() + " but the server closed the connection during "
                        "the VALIDATE/PING handshake (" + std::to_string(handshake_resets) +
                            (handshake_resets == 1 ? " time" : " times") + " in " +
                            seconds_text_fine(seconds_since(start)) +
                            "): a torch <= 2.0 server does this, it needs the legacy dialect" +
                            (probe ? std::string(" (negotiated: ") + probe->era_text + ")"
                                   : std::string("; a torch 2.1-2.4 server closes on PING "
                                                 "(negotiate finds out which)")) +
                            "; last error: " + last_reset + extra);
    };
    for (int round = 0;; ++round) {
      Connected c;
      try {
        c = connect_tcp(opt.host, opt.port, deadline, opt.backoff, kStoreMaxSegment);
      } catch (const StoreError& e) {
        if (handshake_resets == 0) throw;
        throw handshake_failure(std::string("; then: ") + e.what());
      }
      fd = c.fd;
      report = std::move(c.report);
      rbuf.clear();
      if (opt.dialect == Dialect::legacy) return;
      try {
        handshake(earliest(deadline, op_deadline()));
        return;
      } catch (const StoreError& e) {
        close_fd();
        // A reset during the handshake (server restarting, accept queue overflow) is retried
        // like a refused connect; anything else is the answer.
        if (e.error_class() != ErrorClass::reset) throw;
        ++handshake_resets;
        last_reset = e.what();
        Millis pause = backoff_delay(opt.backoff, round, 0.5, remaining(deadline));
        if (expired(deadline) || pause >= remaining(deadline)) throw handshake_failure("");
        std::this_thread::sleep_for(pause);
      }
    }
  }

  // VALIDATE-era server without PING (torch 2.1-2.4): VALIDATE + GETNUMKEYS x4 is the round trip
  // (4, not 1, so a legacy server that took over the endpoint resets instead of stalling).
  void handshake_no_ping(Deadline d) {
    auto start = Clock::now();
    Request validate = make(Op::validate);
    validate.u32 = wire::kValidateMagic;
    Request count = make(Op::num_keys);
    std::string out;
    wire::encode_request(Dialect::modern, validate, out);
    for (int i = 0; i < 4; ++i) wire::encode_request(Dialect::modern, count, out);
    try {
      send_all(out, d, "VALIDATE", {});
      for (int i = 0; i < 4; ++i) read_reply(count, d, "VALIDATE + GETNUMKEYS", {});
    } catch (const IoTimeout&) {
      // Accepted but silent: the kernel completed the TCP handshake (a listen backlog does that
      // even for a stopped process), so this is a stalled server, not a dropped SYN.
      throw StoreError(ErrorClass::stalled,
                       "connected to " + peer() + " but VALIDATE + GETNUMKEYS got no answer "
                       "within " + seconds_text_fine(seconds_since(start)) + " (negotiated: " +
                           probe->era_text + "): the server accepts the connection but does not "
                           "answer (stalled: SIGSTOP, a debugger, swap; or overloaded)");
    }
    report.elapsed_s += seconds_since(start);
  }

  void handshake(Deadline d) {
    if (probe && !probe->ping) return handshake_no_ping(d);
    auto start = Clock::now();
    uint32_t nonce = static_cast<uint32_t>(::getpid());
    Request validate = make(Op::validate);
    validate.u32 = wire::kValidateMagic;
    Request ping = make(Op::ping);
    ping.u32 = nonce;
    std::string out;
    wire::encode_request(Dialect::modern, validate, out);
    wire::encode_request(Dialect::modern, ping, out);
    try {
      send_all(out, d, "VALIDATE", {});
      Reply r = read_reply(ping, d, "PING", {});
      if (r.u32 != nonce)
        throw StoreError(ErrorClass::protocol,
                         "the server at " + peer() + " answered PING with " +
                             std::to_string(r.u32) + " instead of the nonce " +
                             std::to_string(nonce) + ": not a TCPStore server of the modern "
                             "dialect");
    } catch (const IoTimeout&) {
      // Accepted but silent (see handshake_no_ping): stalled, never a firewall.
      throw StoreError(ErrorClass::stalled,
                       "connected to " + peer() + " but the VALIDATE/PING handshake got no answer "
                       "within " + seconds_text_fine(seconds_since(start)) +
                           ": the server accepts the connection but does not answer (stalled: "
                           "SIGSTOP, a debugger, swap; or overloaded); or it is a torch <= 2.0 "
                           "TCPStore, which needs the legacy dialect");
    }
    report.elapsed_s += seconds_since(start);
  }

  void ensure_open(const char* op) {
    if (fd >= 0) return;
    try {
      open(op_deadline());
    } catch (const StoreError& e) {
      throw StoreError(e.error_class(),
                       std::string("reconnecting for ") + op + " (the previous connection was "
                       "closed after an error): " + e.what());
    }
  }

  // ---- I/O ----

  [[noreturn]] void io_failure(int err, const char* op, const std::vector<std::string>& keys,
                               Clock::time_point start) {
    close_fd();
    ErrorClass cls = classify_errno(err);
    if (cls == ErrorClass::other) cls = ErrorClass::reset;
    throw StoreError(cls, std::string("connection to ") + peer() + " failed during " + op +
                              on_keys(keys) + " after " + seconds_text_fine(seconds_since(start)) + ": " +
                              std::strerror(err));
  }

  void send_all(const std::string& bytes, Deadline d, const char* op,
                const std::vector<std::string>& keys) {
    auto start = Clock::now();
    int err = 0;
    switch (send_bytes(fd, bytes.data(), bytes.size(), d, &err)) {
      case SendResult::ok: return;
      case SendResult::timeout: throw IoTimeout{};
      case SendResult::error: io_failure(err, op, keys, start);
    }
  }

  Reply read_reply(const Request& req, Deadline d, const char* op,
                   const std::vector<std::string>& keys) {
    auto start = Clock::now();
    char chunk[64 * 1024];
    for (;;) {
      if (!rbuf.empty()) {
        auto dec = wire::decode_reply(req, rbuf, opt.limits);
        if (dec.status == wire::Status::ok) {
          rbuf.erase(0, dec.consumed);
          return std::move(dec.reply);
        }
        if (dec.status == wire::Status::error) {
          close_fd();
          throw StoreError(ErrorClass::protocol, std::string("malformed reply to ") + op +
                                                     on_keys(keys) + " from " + peer() + ": " +
                                                     dec.error);
        }
      }
      ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n > 0) {
        rbuf.append(chunk, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) {
        close_fd();
        throw StoreError(ErrorClass::reset, std::string("server closed the connection during ") +
                                                op + on_keys(keys) + " (peer " + peer() +
                                                ", after " + seconds_text_fine(seconds_since(start)) + ")" +
                                                closed_hint(req.op));
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) io_failure(errno, op, keys, start);
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, poll_timeout_ms(d));
      if (r < 0 && errno != EINTR) io_failure(errno, op, keys, start);
      if (r == 0 && expired(d)) throw IoTimeout{};
    }
  }

  std::string closed_hint(Op op) const {
    switch (op) {
      case Op::add:
        return "; a TCPStore server drops the connection when ADD meets a non-numeric value";
      case Op::get:
        return "; a torch <= 2.0 server drops the connection on GET of a missing key";
      default:
        return "";
    }
  }

  // One request and (when the op has one) its reply, bounded by op_timeout. A timeout closes the
  // connection: a late reply would be read as the answer to the next request.
  Reply roundtrip(const Request& req) {
    const char* op = wire::to_string(req.op);
    const auto& keys = req.keys;
    ensure_open(op);
    auto start = Clock::now();
    Deadline d = op_deadline();
    std::string out;
    encode(req, out);
    try {
      send_all(out, d, op, keys);
      if (!wire::has_reply(req.op)) return {};
      return read_reply(req, d, op, keys);
    } catch (const IoTimeout&) {
      close_fd();
      throw StoreError(ErrorClass::timed_out,
                       std::string(op) + on_keys(keys) + " to " + peer() + " timed out after " +
                           seconds_text_fine(seconds_since(start)) + " without a reply (op_timeout " +
                           seconds_text_fine(opt.op_timeout) + "); the connection was closed and the next "
                           "operation reconnects");
    }
  }

  void encode(const Request& req, std::string& out) {
    try {
      wire::encode_request(opt.dialect, req, out);
    } catch (const std::invalid_argument& e) {
      throw StoreError(ErrorClass::invalid, std::string(e.what()) + " (server " + peer() + ")");
    }
  }

  void require_modern(const char* what, const char* needs) const {
    if (opt.dialect != Dialect::modern)
      throw StoreError(ErrorClass::invalid,
                       std::string(what) + " needs " + needs + " (the modern dialect); this "
                       "client speaks legacy to " + peer() + era_note());
  }

  // " (era torch 2.1-2.4)" when negotiated, "" otherwise.
  std::string era_note() const {
    if (!probe) return "";
    return " (era " + probe->era_text.substr(0, probe->era_text.find(" (")) + ")";
  }

  // The server closed the connection on `op` (a reset StoreError from the op itself). Whether the
  // server is alive (a fresh connection answers GETNUMKEYS) tells "does not know the op" from "went
  // away"; the former becomes StoreError(invalid) naming what the op needs.
  [[noreturn]] void unsupported(const char* op, const char* needs, const StoreError& e) {
    bool alive = false;
    try {
      close_fd();
      open(deadline_after(std::min(opt.op_timeout, kAfterDeadlineGrace * 2)));
      Request probe_req = make(Op::num_keys);
      roundtrip(probe_req);
      alive = true;
    } catch (const StoreError&) {
    }
    if (!alive) throw e;
    throw StoreError(ErrorClass::invalid,
                     std::string(op) + " needs " + needs + "; the server at " + peer() +
                         era_note() + " closed the connection on it (" + e.what() + ")");
  }

  // An op with a reply that older servers lack; `name` is the public op (default: req.op's).
  Reply newer_op(const Request& req, const char* needs, const char* name = nullptr) {
    try {
      return roundtrip(req);
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::reset) throw;
      unsupported(name ? name : wire::to_string(req.op), needs, e);
    }
  }

  // Sends a no-reply op with a GETNUMKEYS right behind it: a server that does not know the op
  // closes the connection on it silently, and the probe's reply turns that into
  // StoreError(reset) here instead of a lost write.
  void send_probed(const Request& req) {
    const char* op = wire::to_string(req.op);
    ensure_open(op);
    Request probe_req = make(Op::num_keys);
    std::string out;
    encode(req, out);
    encode(probe_req, out);
    auto start = Clock::now();
    Deadline d = op_deadline();
    try {
      send_all(out, d, op, req.keys);
      read_reply(probe_req, d, op, req.keys);
    } catch (const IoTimeout&) {
      close_fd();
      throw StoreError(ErrorClass::timed_out, std::string(op) + on_keys(req.keys) + " to " +
                                                  peer() + " timed out after " +
                                                  seconds_text_fine(seconds_since(start)));
    }
  }

  // A no-reply op that older servers lack (QUEUE_PUSH).
  void newer_no_reply_op(const Request& req, const char* needs) {
    try {
      send_probed(req);
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::reset) throw;
      unsupported(wire::to_string(req.op), needs, e);
    }
  }

  // A no-reply extension op (APPEND, MULTI_SET) in the legacy dialect: a torch <= 2.0 server does
  // not know it.
  void legacy_extension(const Request& req) {
    try {
      send_probed(req);
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::reset) throw;
      throw StoreError(ErrorClass::invalid,
                       std::string(wire::to_string(req.op)) +
                           " needs the modern dialect (torch >= 2.1) or an ncclsmoke server: the "
                           "legacy server at " + peer() + era_note() +
                           " closed the connection on it (" + e.what() + ")");
    }
  }

  // ---- waiting ----

  bool check_wire(const std::vector<std::string>& wkeys) {
    Request req = make(Op::check);
    req.keys = wkeys;
    return roundtrip(req).byte == wire::kCheckReady;
  }

  [[noreturn]] void wait_timed_out(const char* op, const std::vector<std::string>& keys,
                                   Clock::time_point start, const std::string& note) {
    double waited = seconds_since(start);
    // Say which keys are missing when it is cheap and the connection is usable.
    std::string missing_text;
    if (fd >= 0 && keys.size() <= kMaxKeysToCheck) {
      try {
        std::vector<std::string> missing;
        for (const auto& k : keys)
          if (!check_wire({wire_key(k)})) missing.push_back(wire_key(k));
        if (!missing.empty())
          missing_text = "; still missing: " + describe_keys(missing);
        else
          missing_text = "; every key exists now (set just after the deadline)";
      } catch (const StoreError&) {
      }
    }
    if (missing_text.empty()) missing_text = "; awaited " + describe_keys(wire_keys(keys));
    throw StoreError(ErrorClass::timed_out,
                     std::string(op) + " timed out after " + seconds_text_fine(waited) + " waiting for " +
                         std::to_string(keys.size()) + (keys.size() == 1 ? " key" : " keys") +
                         " at " + peer() + missing_text + note);
  }

  // WAIT until every key exists or the caller's deadline; `op` names the public operation.
  void wait_keys(const std::vector<std::string>& keys, Deadline deadline, const char* op) {
    ensure_open(op);
    auto start = Clock::now();
    std::vector<std::string> wkeys = wire_keys(keys);
    if (expired(deadline)) {
      // No time to wait: answer from CHECK rather than racing a WAIT reply against poll(0).
      if (check_wire(wkeys)) return;
      wait_timed_out(op, keys, start, "");
    }
    Request req = make(Op::wait);
    req.keys = wkeys;
    std::string out;
    encode(req, out);
    try {
      send_all(out, op_deadline(), op, wkeys);
    } catch (const IoTimeout&) {
      close_fd();
      throw StoreError(ErrorClass::timed_out, std::string(op) + on_keys(wkeys) + ": sending WAIT to " +
                                                  peer() + " timed out after " +
                                                  seconds_text_fine(seconds_since(start)));
    }
    Reply r;
    try {
      r = read_reply(req, deadline, op, wkeys);
    } catch (const IoTimeout&) {
      cancel_wait(op, keys, start);  // returns only when the keys arrived meanwhile
      return;
    }
    if (r.byte != wire::kWaitStop) {
      close_fd();
      throw StoreError(ErrorClass::protocol, std::string("unexpected WAIT reply byte ") +
                                                 std::to_string(r.byte) + " from " + peer() +
                                                 " during " + op + on_keys(wkeys));
    }
  }

  // The caller's deadline passed with a WAIT outstanding. Modern: CANCEL_WAIT and drain; a
  // STOP_WAITING that raced the cancel means the keys arrived, which counts as success. Legacy
  // (no CANCEL_WAIT on torch <= 2.0): reconnect so the late STOP_WAITING cannot desync the next op.
  void cancel_wait(const char* op, const std::vector<std::string>& keys, Clock::time_point start) {
    if (opt.dialect == Dialect::modern) {
      Request cancel = make(Op::cancel_wait);
      std::string out;
      encode(cancel, out);
      Deadline d = deadline_after(std::min(opt.op_timeout, kAfterDeadlineGrace));
      try {
        send_all(out, d, "CANCEL_WAIT", wire_keys(keys));
        Reply r = read_reply(cancel, d, "CANCEL_WAIT", wire_keys(keys));
        bool arrived = false;
        if (r.byte == wire::kWaitStop) {
          arrived = true;
          r = read_reply(cancel, d, "CANCEL_WAIT", wire_keys(keys));
        }
        if (r.byte != wire::kWaitCanceled) {
          close_fd();
          throw StoreError(ErrorClass::protocol,
                           "unexpected reply byte " + std::to_string(r.byte) +
                               " to CANCEL_WAIT from " + peer() + " during " + op);
        }
        if (arrived) return;
      } catch (const IoTimeout&) {
        close_fd();
        wait_timed_out(op, keys, start, "; CANCEL_WAIT got no answer either, connection closed");
      }
      wait_timed_out(op, keys, start, "");
    }
    close_fd();
    std::string note;
    try {
      open(deadline_after(std::min(opt.op_timeout, kAfterDeadlineGrace)));
    } catch (const StoreError& e) {
      note = std::string("; reconnecting after the timeout failed (the next operation retries): ") +
             e.what();
    }
    wait_timed_out(op, keys, start, note);
  }
};

TcpStore::TcpStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStore::~TcpStore() = default;

std::unique_ptr<TcpStore> TcpStore::connect(const TcpStoreOptions& options, Deadline deadline) {
  auto impl = std::make_unique<Impl>(options);
  impl->open(deadline);
  return std::unique_ptr<TcpStore>(new TcpStore(std::move(impl)));
}

void TcpStore::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(impl_->mu);
  Request req = make(Op::set);
  req.keys = {impl_->wire_key(key)};
  req.values = {value};
  impl_->roundtrip(req);
}

std::string TcpStore::get(const std::string& key, Deadline deadline) {
  std::lock_guard lock(impl_->mu);
  impl_->wait_keys({key}, deadline, "GET");
  Request req = make(Op::get);
  req.keys = {impl_->wire_key(key)};
  Reply r = impl_->roundtrip(req);
  return r.values.empty() ? std::string() : std::move(r.values[0]);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::lock_guard lock(impl_->mu);
  Request req = make(Op::add);
  req.keys = {impl_->wire_key(key)};
  req.delta = delta;
  return impl_->roundtrip(req).number;
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(impl_->mu);
  return impl_->check_wire(impl_->wire_keys(keys));
}

void TcpStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  std::lock_guard lock(impl_->mu);
  impl_->wait_keys(keys, deadline, "WAIT");
}

std::string TcpStore::compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  std::lock_guard lock(impl_->mu);
  Request req = make(Op::compare_set);
  req.keys = {impl_->wire_key(key)};
  req.values = {expected, desired};
  Reply r = impl_->roundtrip(req);
  return r.values.empty() ? std::string() : std::move(r.values[0]);
}

bool TcpStore::delete_key(const std::string& key) {
  std::lock_guard lock(impl_->mu);
  Request req = make(Op::delete_key);
  req.keys = {impl_->wire_key(key)};
  return impl_->roundtrip(req).number > 0;
}

int64_t TcpStore::num_keys() {
  std::lock_guard lock(impl_->mu);
  return impl_->roundtrip(make(Op::num_keys)).number;
}

void TcpStore::append(const std::string& key, const std::string& value) {
  std::lock_guard lock(impl_->mu);
  Request req = make(Op::append);
  req.keys = {impl_->wire_key(key)};
  req.values = {value};
  if (impl_->opt.dialect == Dialect::legacy)
    impl_->legacy_extension(req);
  else
    impl_->roundtrip(req);
}

std::vector<std::string> TcpStore::multi_get(const std::vector<std::string>& keys,
                                             Deadline deadline) {
  std::lock_guard lock(impl_->mu);
  if (keys.empty()) return {};
  impl_->wait_keys(keys, deadline, "MULTI_GET");
  if (impl_->opt.dialect == Dialect::legacy) {
    // torch <= 2.0 has no MULTI_GET: one GET per key (each exists now).
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) {
      Request req = make(Op::get);
      req.keys = {impl_->wire_key(k)};
      Reply r = impl_->roundtrip(req);
      out.push_back(r.values.empty() ? std::string() : std::move(r.values[0]));
    }
    return out;
  }
  Request req = make(Op::multi_get);
  req.keys = impl_->wire_keys(keys);
  return impl_->roundtrip(req).values;
}

void TcpStore::multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::string>& values) {
  std::lock_guard lock(impl_->mu);
  if (keys.size() != values.size())
    throw StoreError(ErrorClass::invalid, "multi_set with " + std::to_string(keys.size()) +
                                              " keys but " + std::to_string(values.size()) +
                                              " values (server " + impl_->peer() + ")");
  if (keys.empty()) return;
  Request req = make(Op::multi_set);
  req.keys = impl_->wire_keys(keys);
  req.values = values;
  if (impl_->opt.dialect == Dialect::legacy)
    impl_->legacy_extension(req);
  else
    impl_->roundtrip(req);
}

uint32_t TcpStore::ping(uint32_t nonce) {
  std::lock_guard lock(impl_->mu);
  impl_->require_modern("PING", kNeedsPing);
  Request req = make(Op::ping);
  req.u32 = nonce;
  return impl_->newer_op(req, kNeedsPing).u32;
}

std::vector<std::string> TcpStore::list() {
  std::lock_guard lock(impl_->mu);
  impl_->require_modern("LIST", kNeedsList);
  auto keys = impl_->newer_op(make(Op::list), kNeedsList).values;
  const std::string& prefix = impl_->opt.key_prefix;
  std::vector<std::string> out;
  for (auto& k : keys)
    if (k.compare(0, prefix.size(), prefix) == 0) out.push_back(k.substr(prefix.size()));
  return out;
}

void TcpStore::queue_push(const std::string& key, const std::string& value) {
  std::lock_guard lock(impl_->mu);
  impl_->require_modern("QUEUE_PUSH", kNeedsQueues);
  Request req = make(Op::queue_push);
  req.keys = {impl_->wire_key(key)};
  req.values = {value};
  impl_->newer_no_reply_op(req, kNeedsQueues);
  impl_->queues_ok = true;
}

std::string TcpStore::queue_pop(const std::string& key, Deadline deadline) {
  std::lock_guard lock(impl_->mu);
  impl_->require_modern("QUEUE_POP", kNeedsQueues);
  if (!impl_->queues_ok) {
    // Ask QUEUE_LEN first: on a server without queues the WAIT below would just run out.
    Request len = make(Op::queue_len);
    len.keys = {impl_->wire_key(key)};
    impl_->newer_op(len, kNeedsQueues, "QUEUE_POP");
    impl_->queues_ok = true;
  }
  // WAIT treats a non-empty queue as present; another client may pop first, so loop.
  for (;;) {
    impl_->wait_keys({key}, deadline, "QUEUE_POP");
    Request req = make(Op::queue_pop);
    req.keys = {impl_->wire_key(key)};
    Reply r = impl_->roundtrip(req);
    if (r.number > 0 && !r.values.empty()) return std::move(r.values[0]);
    if (expired(deadline))
      throw StoreError(ErrorClass::timed_out, "QUEUE_POP on key " +
                                                  printable(impl_->wire_key(key)) + " at " +
                                                  impl_->peer() +
                                                  ": the queue stayed empty until the deadline");
  }
}

int64_t TcpStore::queue_len(const std::string& key) {
  std::lock_guard lock(impl_->mu);
  impl_->require_modern("QUEUE_LEN", kNeedsQueues);
  Request req = make(Op::queue_len);
  req.keys = {impl_->wire_key(key)};
  int64_t n = impl_->newer_op(req, kNeedsQueues).number;
  impl_->queues_ok = true;
  return n;
}

int64_t TcpStore::join_workers(int64_t world_size, Deadline deadline) {
  auto start = Clock::now();
  auto counter = [&](int64_t delta) {
    std::lock_guard lock(impl_->mu);
    Request req = make(Op::add);
    req.keys = {"init/"};  // torch's worker counter: never prefixed
    req.delta = delta;
    return impl_->roundtrip(req).number;
  };
  int64_t seen;
  {
    bool first;
    {
      std::lock_guard lock(impl_->mu);
      first = !impl_->joined;
      impl_->joined = true;
    }
    try {
      seen = counter(first ? 1 : 0);
    } catch (...) {
      if (first) {
        std::lock_guard lock(impl_->mu);
        impl_->joined = false;  // the ADD may not have landed; let a retry count us
      }
      throw;
    }
  }
  // ADD 0 reads the counter without a GET's implicit WAIT (a counter threshold can't be WAITed).
  while (seen < world_size) {
    if (expired(deadline))
      throw StoreError(ErrorClass::timed_out,
                       std::to_string(seen) + "/" + std::to_string(world_size) +
                           " workers joined the store at " + impl_->peer() + " after " +
                           seconds_text_fine(seconds_since(start)) + " (counter 'init/')");
    std::this_thread::sleep_for(std::min(kJoinPoll, remaining(deadline)));
    seen = counter(0);
  }
  return seen;
}

const ConnectReport& TcpStore::connect_report() const { return impl_->report; }
const TcpStoreOptions& TcpStore::options() const { return impl_->opt; }
std::optional<DialectProbe> TcpStore::negotiation() const { return impl_->probe; }

}  // namespace ncclsmoke::rendezvous
