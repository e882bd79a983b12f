#pragma once
// A Store over one TCP connection to a TCPStore server (ours or PyTorch's, of any era).
//
// Dialect: told (options.dialect), or negotiated (options.negotiate) with probe_dialect
// (dialect_probe.h), which also finds the era: torch <= 2.0 legacy, torch 2.1-2.4 (VALIDATE but no
// PING), torch >= 2.5 / ncclsmoke (VALIDATE + PING). Never send a bare VALIDATE to a server that
// might be torch <= 2.0: 1.13 reads it as a SET whose 8-byte key length is still incomplete and
// stalls its whole store waiting for the rest (seen here); VALIDATE followed by >= 4 more bytes
// (PING + nonce, or 4 GETNUMKEYS) completes an absurd length and 1.13 resets that one connection
// and keeps serving others (seen here). Hence the told-modern handshake VALIDATE + PING is safe to
// try, and the no-PING handshake is VALIDATE + GETNUMKEYS x4.
//
// Keys: like torch's TCPStore, every user key goes on the wire as key_prefix + key ("/" by
// default), so ours and torch's clients share one keyspace; the worker counter "init/" is not
// prefixed.
//
// Deadlines: connect() takes one; wait/get/multi_get take one; every other op is bounded by
// options.op_timeout. A WAIT that times out is cancelled with CANCEL_WAIT in the modern dialect;
// in the legacy dialect (no CANCEL_WAIT) the connection is closed and reopened, because a late
// reply would otherwise desync it (torch 1.13's own bug). Any other timed-out operation or I/O
// error closes the connection (StoreError timed_out / reset naming op, key, peer, time waited);
// the next operation reconnects within op_timeout (in the negotiated dialect, without probing
// again). One mutex serialises operations, so a WAIT holds the connection until it returns, as in
// torch.
//
// Ops an older server lacks: a server that does not know an op closes the connection on it. The
// client turns that into StoreError(invalid) on that op itself, naming the torch it needs and the
// negotiated era when known: APPEND / MULTI_SET in legacy (torch >= 2.1), PING (torch >= 2.5),
// QUEUE_PUSH / QUEUE_POP / QUEUE_LEN (a torch >= 2.8 libuv server), LIST (a torch >= 2.10 libuv
// server). No-reply ops (QUEUE_PUSH; APPEND / MULTI_SET in legacy) are followed by a GETNUMKEYS so
// the close is seen on them; QUEUE_POP asks QUEUE_LEN first so it does not just WAIT forever.
// In the legacy dialect MULTI_GET becomes one GET per key; PING, LIST and the queue ops throw
// StoreError(invalid) without sending anything.
//
// Reply limits (kClientLimits) are the client's own and larger than the server's value limit:
// torch's classic server has no value-size limit and APPEND concatenation is uncapped even in the
// libuv server, so a GET may legitimately return more than the 8 MiB a server accepts per request.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/connect.h"
#include "rendezvous/dialect_probe.h"
#include "rendezvous/store.h"
#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous {

// Client reply limits: values up to 1 GiB (a value built by APPENDs, or set on a torch classic
// server, has no 8 MiB cap), keys up to 1 MiB, LIST / count fields up to 16M entries. Still bounded,
// so a garbage length cannot make the client allocate without end.
inline constexpr wire::Limits kClientLimits{1024 * 1024, std::size_t{1} << 30, 16 * 1024 * 1024};

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 29500;
  wire::Dialect dialect = wire::Dialect::modern;
  std::string key_prefix = "/";
  std::chrono::milliseconds op_timeout{30000};
  Backoff backoff;  // connect retries (connect.h)
  wire::Limits limits = kClientLimits;  // limits on what the server sends back
  // Probe the server's era (probe_dialect, cached per endpoint) and connect in the dialect found,
  // ignoring `dialect`; the modern handshake sends PING only where the era has it.
  bool negotiate = false;
};

class TcpStore final : public Store {
 public:
  // Resolves, connects with backoff, (negotiate) probes the era, and (modern) sends VALIDATE + PING
  // (VALIDATE + GETNUMKEYS x4 for a torch 2.1-2.4 server), all before `deadline`. Throws
  // StoreError classified dns / refused / timed_out (the SYN went unanswered) / stalled (connected,
  // but the handshake got no answer) / unreachable / reset, whose message names
  // host, port, every address tried, attempts and time waited.
  static std::unique_ptr<TcpStore> connect(const TcpStoreOptions& options, Deadline deadline);
  ~TcpStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const std::string& value) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     Deadline deadline) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;

  // Modern dialect only (StoreError(invalid) in legacy; also invalid, naming the torch needed,
  // when the server closes the connection on them):
  uint32_t ping(uint32_t nonce);
  std::vector<std::string> list();  // user keys, prefix stripped, as torch's list() does
  void queue_push(const std::string& key, const std::string& value);
  std::string queue_pop(const std::string& key, Deadline deadline);  // waits for an item
  int64_t queue_len(const std::string& key);

  // torch's wait_for_workers: ADD("init/", 1) (once per client) then wait until the counter
  // reaches world_size. Returns the count seen.
  int64_t join_workers(int64_t world_size, Deadline deadline);

  // How the connection was made: address used, local address/interface, attempts, time.
  const ConnectReport& connect_report() const;
  // The options in effect; after negotiation `dialect` is the negotiated one.
  const TcpStoreOptions& options() const;
  // What negotiation found (nullopt when options.negotiate was false).
  std::optional<DialectProbe> negotiation() const;

 private:
  struct Impl;
  explicit TcpStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncclsmoke::rendezvous
