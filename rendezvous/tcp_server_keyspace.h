#pragma once
// The TCPStore server's data and its semantics, apart from sockets: the key map, the libuv-style
// queues, pending WAITs indexed by key (so one SET releases every waiter on it), and torch 1.13's
// WATCH_KEY callbacks. Only the server's event-loop thread touches it, so it has no locks.
//
// Replies and deferred wake-ups go out through the `Send` callback (the server appends them to
// that connection's output buffer). execute() returns a reason when the request must close the
// connection instead (legacy GET of a missing key, ADD on a non-numeric value ...), as torch's
// servers do.
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous::detail {

using ConnId = uint64_t;

class ServerKeyspace {
 public:
  using Send = std::function<void(ConnId, std::string_view)>;
  explicit ServerKeyspace(Send send) : send_(std::move(send)) {}

  // Runs one decoded request from `conn` (VALIDATE is the server's business, not ours).
  std::optional<std::string> execute(ConnId conn, wire::Dialect dialect, const wire::Request& req);
  // Forgets a closed connection's pending WAIT and watches.
  void forget(ConnId conn);

  std::size_t num_keys() const { return data_.size(); }
  bool has_pending_wait(ConnId conn) const { return waits_.count(conn) > 0; }
  std::size_t pending_waits() const { return waits_.size(); }

 private:
  bool present(const std::string& key) const;
  // The key now exists (or its queue is non-empty): answer every WAIT that was missing only it.
  void wake(const std::string& key);
  void cancel_wait(ConnId conn);
  enum class Change : uint8_t { updated = 0, created = 1, deleted = 2, appended = 4 };
  void notify_watchers(const std::string& key, Change change, std::string_view old_value,
                       std::string_view new_value);
  void reply(ConnId conn, const std::string& bytes) { send_(conn, bytes); }

  Send send_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  // Pending WAITs: the keys each connection still misses, and the reverse index.
  std::unordered_map<ConnId, std::unordered_set<std::string>> waits_;
  std::unordered_map<std::string, std::unordered_set<ConnId>> waiters_;
  // Legacy WATCH_KEY registrations (torch 1.13's callback connection).
  std::unordered_map<std::string, std::unordered_set<ConnId>> watchers_;
  std::unordered_map<ConnId, std::vector<std::string>> watched_by_;
};

}  // namespace ncclsmoke::rendezvous::detail
