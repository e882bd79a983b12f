#pragma once
// A Store over one TCP connection to a TCPStore server (ours or PyTorch's). The client is told its
// dialect and never probes: sending VALIDATE to a torch 1.13 server would stall that server.
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
// the next operation reconnects within op_timeout. One mutex serialises operations, so a WAIT
// holds the connection until it returns, as in torch.
//
// Legacy dialect: APPEND and MULTI_SET go out as the post-2.0 legacy opcodes 9 and 11 (our server
// accepts them); a torch <= 2.0 server closes the connection on them, which a GETNUMKEYS sent
// right behind turns into StoreError(invalid). MULTI_GET becomes one GET per key; PING, LIST and
// the queue ops throw StoreError(invalid).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/connect.h"
#include "rendezvous/store.h"
#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 29500;
  wire::Dialect dialect = wire::Dialect::modern;
  std::string key_prefix = "/";
  std::chrono::milliseconds op_timeout{30000};
  Backoff backoff;  // connect retries (connect.h)
  wire::Limits limits;
};

class TcpStore final : public Store {
 public:
  // Resolves, connects with backoff, and (modern) sends VALIDATE + PING, all before `deadline`.
  // Throws StoreError classified dns / refused / timed_out / unreachable / reset, whose message
  // names host, port, every address tried, attempts and time waited.
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

  // Modern dialect only (StoreError(invalid) in legacy):
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
  const TcpStoreOptions& options() const;

 private:
  struct Impl;
  explicit TcpStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncclsmoke::rendezvous
