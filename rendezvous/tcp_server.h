#pragma once
// A TCPStore server that PyTorch's clients (1.13 legacy and >= 2.1 modern) and ours can join.
// One epoll event loop on its own thread serves every connection; the dialect is detected per
// connection from its first bytes (wire::detect_dialect). WAIT replies are deferred until the
// keys exist (fan-out to every waiter when a key is set; a QUEUE_PUSH wakes only the oldest waiter,
// as torch's libuv server does); CANCEL_WAIT withdraws a pending wait.
//
// Bad input never takes the server down: a connection that sends garbage, an over-limit length,
// an unknown opcode, a non-numeric value under ADD, or stalls mid-request is closed with one log
// line naming the peer and the reason; everyone else keeps being served.
//
// Connections (no stranger crowds out the job's ranks):
//   idle       a connection that completes no request within idle_timeout of connecting (30 s,
//              --idle-timeout) is closed. torch 1.13 opens a second socket for WATCH_KEY that
//              sends its first request only later, right after its main socket's first request:
//              such a socket is kept while a connection from the same host, accepted just before
//              it and past its first request, vouches for it (each vouches for one).
//   full       at max_connections (16384, --max-connections) a new connection sheds the oldest
//              connection that never completed a request before it is refused; never-requested
//              connections may hold at most max_connections - reserved_connections slots (the
//              harness reserves its world size), so the ranks' connections always find room.
//              With nobody to shed, up to kStatusOnlyConnections more are kept read-only (a
//              write closes them) so a refused rank can read kStoreFullKey, the reason.
//
// Memory has a budget, whatever clients do (the limits below, each a flag of `store serve`):
//   value      a SET, MULTI_SET, COMPARE_SET or APPEND that would make a value longer than
//              limits.max_value_bytes (8 MiB, --max-value-bytes) closes that connection; APPEND
//              grows the value in place (amortised), never copies it per append.
//   keys       more than max_stored_keys keys + queues (1 Mi, --max-keys): the request that would
//              create one closes its connection; the store is unchanged.
//   output     every reply and WATCH_KEY notification is counted against its connection's
//              max_output_bytes (64 MiB, --max-output-bytes) when it is queued: a connection that
//              would go over it (a client that does not read) is dropped, not buffered. A single
//              reply bigger than the cap is let through when nothing else is queued for that
//              connection (a MULTI_GET of many values); a reader that then takes nothing for
//              stalled_request_timeout is closed.
//   total      stored keys and values (+96 bytes per key) + buffered request bytes + queued reply
//              bytes + WAIT/WATCH_KEY registrations <= max_total_bytes (8 GiB, --max-total-bytes). A request, a reply or a
//              notification that would exceed it closes the connection it belongs to. Requests or
//              replies over 64 KiB may fill only 7/8 of it: the last eighth is kept for small
//              ones, so a flood of big half-sent requests cannot lock out everyone's barriers.
//   deadline   a request must be complete stalled_request_timeout (30 s, --request-timeout) after
//              its first byte; a trickle of bytes does not restart it (slowloris).
//   pending    the keys a connection WAITs on (its pending WAIT's missing keys) and WATCHes are
//              registrations: each costs registration_bytes (128 + twice the key) against
//              max_total_bytes (never its last quarter: that is kept for stored values and
//              requests, so keys one client pins cannot refuse another client's SET), and one
//              connection may hold at most max_pending_keys of them
//              (32 Ki, --max-pending-keys; our ranks wait on one key at a time, a rank 0 of a
//              16k-rank world waiting on every rank's key needs 16 Ki). A decoded request being
//              run in slices counts as buffered request bytes.
// Each closes only the offending connection, with one log line naming the peer, the limit, its
// value and its flag; everyone else keeps being served.
//
// The job's reserve (no stranger fills the store the job needs; tcp_server_reserve.h):
//   reserve    of max_stored_keys and max_total_bytes, reserved_ranks x 64 keys and x 256 KiB
//              (each at most half of its limit) are kept for connections that claimed a rank:
//              the one whose COMPARE_SET created /ncclsmoke/<job>/<restart>/join/rank/<r>, as
//              every rank of `ncclsmoke run` does to join (plus the few keys a rank writes just
//              before its claim). Anyone else's request that would store a key or bytes in the
//              reserve's unused part is refused as over --max-keys / --max-total-bytes (and
//              recorded, STORE_FULL); a key belongs to the job while a job's connection wrote it
//              last, so writing under the job's prefix takes nothing from the reserve. Only stored
//              keys and bytes are held back (requests, replies and registrations leave with their
//              connection). reserved_ranks defaults to reserved_connections: the harness's world
//              size; `store serve` --reserved-ranks, 64 unless --reserved-connections is given. The loop never does O(value) work for a
// tiny op: a connection gets at most 256 requests and 256 KiB of reading per turn, a request still
// arriving is checked without being copied, big input buffers grow by mremap; torch 1.13's
// WATCH_KEY notification, which carries the whole old and new value, refers to the stored values
// instead of copying them, is shared by every watcher, and is queued only for watchers with room
// for it. A WAIT, CHECK, MULTI_GET or MULTI_SET of more than 1024 keys (torch allows 128 Ki per
// request) runs in slices of 256 keys, as many per turn as the turn's 2 ms budget allows (what
// arrived since the last turn is served first), so no request holds the loop for long: a
// MULTI_SET is then all-or-nothing per slice, and others may see its first slices before its
// last. Defaults fit a 16k-rank world: 16384
// ranks x (~16 keys of ~1 KiB + a 200 KiB verdict) ~ 3.5 GiB stored, plus as much again when
// every rank posts its verdict at the same instant (one partial request per connection) -> 8 GiB;
// 16384 x 16 keys = 256 Ki keys -> 1 Mi keys leaves 4x room.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
  // The memory budget (see above).
  std::size_t max_total_bytes = std::size_t{8} << 30;
  std::size_t max_stored_keys = std::size_t{1} << 20;
  std::size_t max_output_bytes = std::size_t{64} << 20;
  std::size_t max_pending_keys = std::size_t{32} << 10;  // per connection (see above)
  // A request not complete this long after its first byte is closed (however it trickles in).
  std::chrono::milliseconds stalled_request_timeout{30000};
  // A connection with no complete request this long after connecting is closed (see above).
  std::chrono::milliseconds idle_timeout{30000};
  // Of max_connections, slots never-requested connections cannot take (the job's world size;
  // at most half of max_connections).
  std::size_t reserved_connections = 0;
  // Ranks the job's reserve of keys and bytes is sized for (see "The job's reserve" above);
  // nullopt: reserved_connections (the harness sets that to its world size). 0: no reserve.
  std::optional<std::size_t> reserved_ranks;
  // Optional: whether a rank's claim (the value a COMPARE_SET stores under
  // /ncclsmoke/<job>/<restart>/join/rank/<r>) is genuine. Set where the server knows the job
  // token (rank 0 hosting the store): a claim whose value fails the token's signature does not make
  // its connection the job's, so a stranger cannot use the reserve by imitating the join. Unset
  // (no token, `store serve`): any claim counts (tcp_server_reserve.h).
  std::function<bool(const std::string& key, const std::string& value)> claim_is_genuine;
  // Log sink for the one-line reasons a connection was closed (default: stderr).
  std::function<void(const std::string&)> log;
};

// A store-wide limit refused someone: the store is full (of keys, of bytes, of connections), not
// broken. The refused client only sees its connection closed or refused, so the job learns the
// reason here: rank 0 hosts the server in-process and reports it (STORE_FULL).
struct StoreFullHit {
  std::string limit;     // the option: "max_stored_keys", "max_total_bytes", "max_connections"
  std::string flag;      // its `store serve` flag: "--max-keys", "--max-total-bytes", ...
  uint64_t value = 0;    // the limit's value
  uint64_t in_use = 0;   // what the store held when it last refused (keys, bytes, connections)
  uint64_t refusals = 0;
  // Of refusals, those of connections that had claimed a rank (the job's own, past its reserve).
  // 0 with refusals > 0: only strangers were refused, short of the job's reserve; the job had
  // room (tcp_server_reserve.h).
  uint64_t job_refusals = 0;
  std::string last_peer;  // who was refused last
};

// The store's own status key: JSON of every store-wide refusal so far (StoreFullHit), so a job
// whose store is served apart from it (`store serve`) learns why it was refused. Written by the
// server only (a client's write to it closes that connection), outside the budget and the key
// count, at most 3 entries of bounded size. Absent until a limit refuses someone.
//   {"store_full":[{"limit":"max_stored_keys","flag":"--max-keys","value":1000,"in_use":1000,
//                   "refusals":3,"job_refusals":0,"last_peer":"127.0.0.1:41234"}]}
// (job_refusals: absent from an older server's status, read as 0.)
// When every connection slot is taken by clients past their first request, up to
// kStatusOnlyConnections more are accepted that may only read (VALIDATE, PING, GET, CHECK,
// MULTI_GET, WAIT, GETNUMKEYS): a rank refused at the cap can still read why.
// kStoreFullKey is the key as a store client names it; torch's TCPStore (and ours) put it on
// the wire with its "/" prefix, which is the key the server keeps (kStoreFullWireKey).
inline constexpr const char* kStoreFullKey = "ncclsmoke/store_full";
inline constexpr const char* kStoreFullWireKey = "/ncclsmoke/store_full";
inline constexpr std::size_t kStatusOnlyConnections = 4;
std::string store_full_status_json(const std::vector<StoreFullHit>& hits);
// The hits in a status value; nullopt when it is not one (bounded parse, 64 KiB).
std::optional<std::vector<StoreFullHit>> parse_store_full_status(std::string_view text);

struct TcpStoreServerStats {
  uint64_t accepted = 0;
  uint64_t open_connections = 0;
  uint64_t legacy_connections = 0;
  uint64_t modern_connections = 0;
  uint64_t closed_for_errors = 0;
  uint64_t requests = 0;
  uint64_t keys = 0;
  uint64_t closed_for_limits = 0;  // of closed_for_errors: a budget, cap or deadline was hit
  // The budget's three parts, as of the end of the event loop's last iteration.
  uint64_t stored_bytes = 0;
  uint64_t buffered_request_bytes = 0;
  uint64_t queued_reply_bytes = 0;
  uint64_t registered_bytes = 0;  // pending WAIT / WATCH_KEY registrations
  uint64_t closed_idle = 0;       // idle past idle_timeout
  uint64_t shed_idle = 0;         // never-requested connections shed to make room
  // The longest event-loop turn so far (epoll_wait's return to the next call), in microseconds.
  uint64_t longest_turn_us = 0;
  // That turn's CPU time on the loop thread (CLOCK_THREAD_CPUTIME_ID): on a loaded machine a
  // turn's wall time includes time the thread was descheduled, which is not the loop's doing.
  uint64_t longest_turn_its_cpu_us = 0;
  uint64_t longest_turn_cpu_us = 0;  // the most CPU time any one turn took
  uint64_t slow_turns = 0;           // turns over 10 ms by wall time
  uint64_t slow_cpu_turns = 0;       // turns over 10 ms of CPU time
  // The job's reserve (its size; what the job holds now; connections that claimed a rank).
  uint64_t reserved_keys = 0;
  uint64_t reserved_bytes = 0;
  uint64_t job_keys = 0;
  uint64_t job_bytes = 0;
  uint64_t job_connections = 0;
  // One entry per store-wide limit that refused at least once, in the order first hit.
  std::vector<StoreFullHit> full;
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
