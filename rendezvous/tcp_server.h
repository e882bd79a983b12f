#pragma once
// A TCPStore server that PyTorch's clients (1.13 legacy and >= 2.1 modern) and ours can join.
// One epoll event loop on its own thread serves every connection; the dialect is detected per
// connection from its first bytes (wire::detect_dialect). WAIT replies are deferred until the
// keys exist (fan-out to every waiter when a key is set); CANCEL_WAIT withdraws a pending wait.
//
// Bad input never takes the server down: a connection that sends garbage, an over-limit length,
// an unknown opcode, a non-numeric value under ADD, or stalls mid-request is closed with one log
// line naming the peer and the reason; everyone else keeps being served. A connection that never
// sends anything is kept (torch 1.13 opens such a second socket for WATCH_KEY) but counts against
// max_connections.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous {

struct TcpStoreServerOptions {
  // "" listens on every address: IPv6 dual-stack (v4-mapped), falling back to IPv4 where IPv6 is
  // off. Otherwise a literal address or a name, bound as given.
  std::string host;
  uint16_t port = 0;  // 0 picks a free port; port() reports it
  wire::Limits limits;
  int backlog = 4096;
  std::size_t max_connections = 16384;
  // A connection that sent part of a request and then nothing for this long is closed.
  std::chrono::milliseconds stalled_request_timeout{30000};
  // Log sink for the one-line reasons a connection was closed (default: stderr).
  std::function<void(const std::string&)> log;
};

struct TcpStoreServerStats {
  uint64_t accepted = 0;
  uint64_t open_connections = 0;
  uint64_t legacy_connections = 0;
  uint64_t modern_connections = 0;
  uint64_t closed_for_errors = 0;
  uint64_t requests = 0;
  uint64_t keys = 0;
};

class TcpStoreServer {
 public:
  // Binds, listens and starts the event loop thread. Throws StoreError naming the address and the
  // errno when it cannot bind (e.g. "address already in use").
  static std::unique_ptr<TcpStoreServer> start(const TcpStoreServerOptions& options);

  virtual ~TcpStoreServer() = default;
  virtual uint16_t port() const = 0;
  // Human-readable listening addresses, e.g. "[::]:29500 (dual-stack)".
  virtual std::vector<std::string> listen_addresses() const = 0;
  // Stops the loop, closes every connection, joins the thread. Idempotent.
  virtual void stop() = 0;
  virtual TcpStoreServerStats stats() const = 0;
};

}  // namespace ncclsmoke::rendezvous
