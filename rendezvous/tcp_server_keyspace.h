#pragma once
// The TCPStore server's data and its semantics, apart from sockets: the key map, the libuv-style
// queues, pending WAITs indexed by key (so one SET releases every waiter on it, while one
// QUEUE_PUSH releases only the longest-waiting one, as torch's libuv server does: one item can
// feed only one QUEUE_POP), and torch 1.13's
// WATCH_KEY callbacks. Only the server's event-loop thread touches it, so it has no locks.
//
// Replies and deferred wake-ups go out through the `Send` callback (the server appends them to
// that connection's output buffer). execute() returns a reason when the request must close the
// connection instead (legacy GET of a missing key, ADD on a non-numeric value ...), as torch's
// servers do.
//
// Memory budget (KeyspaceLimits, all optional): stored_bytes() counts every key and value (plus a
// fixed overhead per entry, so a million empty keys are not free). A request that would grow a
// value past max_value_bytes (APPEND included: torch's libuv appendHandler checks only each
// appended payload, TCPStoreLibUvBackend.cpp, pytorch/pytorch), create more than max_stored_keys
// keys or queues, or that `may_grow` refuses, changes nothing and returns its reason (the server
// closes that connection). Big replies and WATCH_KEY notifications ask `may_queue` before they are
// built, so a reader over its output cap costs no copy. No op copies a stored value except to send
// it: APPEND grows the value in place (amortised), and a WATCH_KEY notification refers to the
// stored values (old and new; after an APPEND the old is the new's first bytes) instead of
// copying them.
//
// The job's reserve (tcp_server_reserve.h): KeyspaceLimits::reserved_* keys and stored bytes
// that only connections which claimed a rank may take. A request of anyone else is admitted
// against max_stored_keys less the reserve's unused part, and may_grow is told to hold the unused
// bytes back from its stored bytes; every entry records whether the job wrote it last, so the
// job's keys and bytes are known exactly.
#include <chrono>
#include <cstdint>
#include <memory>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rendezvous/tcp_server_reserve.h"
#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous::detail {

// A hash table that never rehashes all its entries at once. std::unordered_map doubles in one go:
// relinking 64 Ki-1 Mi scattered nodes held the event loop for 10-40 ms (a 128 Ki-key WAIT, a
// key flood; bench/store_attack_bench.py). Once a big table is full, this one moves it aside
// and opens a new one twice its size; every insert or erase then moves a few entries across
// (Redis's incremental rehash), so the old one is empty long before the new one is full.
// Lookups try both while entries move. Elements never move in memory (nodes are relinked), so
// pointers to them stay valid. `Map` is a std::unordered_map or std::unordered_set.
template <typename Map>
class IncrementalHash {
 public:
  using key_type = typename Map::key_type;
  using value_type = typename Map::value_type;
  using node_type = typename Map::node_type;
  using pointer = decltype(&*std::declval<Map&>().begin());  // const for a set
  // Entries moved per insert/erase: the new table (twice the old size) holds the old's n plus
  // the n/4 inserts it takes to empty the old one.
  static constexpr std::size_t kMovePerOp = 4;
  // Smaller tables rehash the ordinary way (cheap).
  static constexpr std::size_t kIncrementalFrom = 2048;

  std::size_t size() const { return cur_.size() + old_.size(); }
  bool empty() const { return cur_.empty() && old_.empty(); }
  bool migrating() const { return !old_.empty(); }

  pointer find(const key_type& k) {
    if (auto it = cur_.find(k); it != cur_.end()) return &*it;
    if (old_.empty()) return nullptr;
    auto it = old_.find(k);
    return it == old_.end() ? nullptr : &*it;
  }
  const value_type* find(const key_type& k) const {
    return const_cast<IncrementalHash*>(this)->find(k);
  }
  bool contains(const key_type& k) const { return find(k) != nullptr; }

  // map: the entry for `k`, default-constructed (or from `args`) when absent; set: inserts `k`.
  template <typename K, typename... Args>
  std::pair<pointer, bool> try_emplace(K&& k, Args&&... args) {
    if (auto* p = find(k)) return {p, false};
    make_room();
    if constexpr (std::is_same_v<key_type, value_type>) {
      static_assert(sizeof...(Args) == 0);
      return {&*cur_.insert(std::forward<K>(k)).first, true};
    } else {
      return {&*cur_.try_emplace(std::forward<K>(k), std::forward<Args>(args)...).first, true};
    }
  }
  std::pair<pointer, bool> insert(key_type k) { return try_emplace(std::move(k)); }

  std::size_t erase(const key_type& k) {
    std::size_t n = cur_.erase(k);
    if (!n && !old_.empty()) n = old_.erase(k);
    move_some(kMovePerOp);
    return n;
  }
  // Takes any one entry out (the table must not be empty).
  node_type extract_any() {
    Map& from = old_.empty() ? cur_ : old_;
    return from.extract(from.begin());
  }
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& e : old_) f(e);
    for (const auto& e : cur_) f(e);
  }
  void clear() {
    cur_.clear();
    old_.clear();
  }

 private:
  void move_some(std::size_t n) {
    for (; n > 0 && !old_.empty(); --n) cur_.insert(old_.extract(old_.begin()));
  }
  void make_room() {
    move_some(kMovePerOp);
    if (!old_.empty() || cur_.size() < kIncrementalFrom ||
        static_cast<float>(cur_.size() + 1) <=
            static_cast<float>(cur_.bucket_count()) * cur_.max_load_factor())
      return;
    old_ = std::move(cur_);
    cur_ = Map();
    cur_.reserve(old_.size() * 2);
  }

  Map cur_, old_;
};

// Bytes charged per stored key / queue (map node, string headers) and per queued item.
inline constexpr std::size_t kEntryOverhead = 96;
inline constexpr std::size_t kItemOverhead = 48;
// Bytes charged per key a connection WAITs on or WATCHes: the key is held twice (the connection's
// set and the per-key index) plus two hash nodes.
inline constexpr std::size_t kRegistrationOverhead = 128;
inline std::size_t registration_bytes(std::size_t key_size) {
  return kRegistrationOverhead + 2 * key_size;
}

// Why a request was refused (the server closes the connection, saying `why`). `limit`: a limit
// the operator set (--max-keys, --max-total-bytes) refused it, not a wrong request; the server
// counts those apart, so the flag says it, never the text.
struct Refusal {
  Refusal(std::string why_text, bool by_limit = false)  // NOLINT: a reason reads as a refusal
      : why(std::move(why_text)), limit(by_limit) {}
  std::string why;
  bool limit = false;
  // The store-wide key-count limit refused it (the store is full, not this client wrong): the
  // server records it for the job (TcpStoreServerStats::full). Bytes are recorded by may_grow.
  bool keys_full = false;
};

struct KeyspaceLimits {
  std::size_t max_value_bytes = SIZE_MAX;
  std::size_t max_stored_keys = SIZE_MAX;  // keys + non-empty queues
  // Keys one connection may be registered on at once: missing keys of its pending WAIT plus its
  // WATCH_KEY registrations (--max-pending-keys).
  std::size_t max_pending_keys = SIZE_MAX;
  // The most WAIT/WATCH_KEY registrations may hold together (3/4 of max_total_bytes): the last
  // quarter is kept for stored values and requests in flight, so keys pinned by one client never
  // refuse another client's SET (tcp_server.h, "pending").
  std::size_t max_registered_bytes = SIZE_MAX;
  // May `bytes` more be queued for `conn`? false: the server drops that connection (and logs why).
  std::function<bool(ConnId, std::size_t bytes)> may_queue;
  // May the store grow by `grow` bytes for an item of `item` bytes? A reason when not.
  // `held_back`: bytes of the job's reserve this growth may not take (a stranger's stored bytes);
  // `room`: bytes of the reserve it may take beyond the usual caps (the job's own growth).
  std::function<std::optional<std::string>(std::size_t grow, std::size_t item,
                                           std::size_t held_back, std::size_t room)>
      may_grow;
  // The job's reserve (tcp_server_reserve.h): for how many ranks, and its keys and stored bytes
  // (0: none; the caller caps them).
  std::size_t reserved_ranks = 0;
  std::size_t reserved_keys = 0;
  std::size_t reserved_bytes = 0;
  // TcpStoreServerOptions::claim_is_genuine (unset: every claim counts).
  std::function<bool(const std::string& key, const std::string& value)> claim_is_genuine;
};

// `len` bytes at `off` of a shared buffer: a stored value (or its first bytes) or a part of a
// notification, queued for several connections without a copy. A stored value is never changed
// in place except by APPEND, which only adds at its end, so a part queued earlier stays right.
struct SharedBytes {
  std::shared_ptr<const std::string> owner;
  std::size_t off = 0, len = 0;
  std::string_view view() const {
    return owner ? std::string_view(*owner).substr(off, len) : std::string_view();
  }
};

class ServerKeyspace {
 public:
  // Queues reply bytes for a connection (moved: a big reply is not copied again).
  using Send = std::function<void(ConnId, std::string&&)>;
  // Queues a notification shared by several connections without a copy per connection: the
  // parts, in order, are the message.
  using SendShared = std::function<void(ConnId, const std::vector<SharedBytes>&)>;
  // Values at least this big go into a notification by reference, not copied.
  static constexpr std::size_t kShareFrom = 64 * 1024;
  explicit ServerKeyspace(Send send, KeyspaceLimits limits = {}, SendShared send_shared = nullptr)
      : send_(std::move(send)),
        send_shared_(std::move(send_shared)),
        limits_(std::move(limits)),
        reserve_(limits_.reserved_ranks, limits_.reserved_keys, limits_.reserved_bytes) {}

  // Runs one decoded request from `conn` (VALIDATE is the server's business, not ours). The
  // rvalue form moves the request's values into the store.
  std::optional<Refusal> execute(ConnId conn, wire::Dialect dialect, wire::Request&& req);
  std::optional<Refusal> execute(ConnId conn, wire::Dialect dialect, const wire::Request& req) {
    wire::Request copy = req;
    return execute(conn, dialect, std::move(copy));
  }
  // Forgets a closed connection: its pending WAIT and watches end at once (nothing is sent to
  // it again), but its entries in the per-key indexes are removed later, by retire(), a bounded
  // number a turn: a closed flood of 32 Ki registrations torn down at once held the event loop
  // for tens of ms (bench/store_attack_bench.py, wait_flood). Their bytes stay in
  // registered_bytes() until retired.
  void forget(ConnId conn);
  // Removes up to `max_keys` index entries of forgotten connections (and of WAITs cancelled or
  // refused with many keys), oldest first, and stops at `until` (keys of 8 KiB take microseconds
  // each to hash: 8192 of them held a turn for 20 ms, watch_flood).
  void retire(std::size_t max_keys,
              std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max());
  bool retiring() const { return !retiring_.empty(); }

  // A WAIT too big for one event-loop turn, registered in parts (the server runs slices of its
  // keys while a turn's budget lasts): the first part replaces a pending WAIT, each part
  // registers its missing keys (capped and budgeted like a whole WAIT), and the last part answers
  // at once when nothing is missing. A key set in between is simply not missing any more; no
  // reply goes out before the last part. execute(WAIT) is the one-part case.
  std::optional<Refusal> wait_part(ConnId conn, std::vector<std::string>& keys, bool first,
                                   bool last);
  // Whether every key is present (CHECK, also in parts).
  bool all_present(const std::vector<std::string>& keys) const;

  // Keys clients stored (the status key is not one of them).
  std::size_t num_keys() const { return data_.size() - (status_set_ ? 1 : 0); }

  // The server's own status key (TcpStoreServer's kStoreFullKey): readable, waitable and
  // watchable like any key, outside the budget and the key count, and no client may write,
  // append to, delete or queue under it (such a request closes its connection, as a forged
  // status would mislead the job).
  void reserve_status_key(std::string key) { status_key_ = std::move(key); }
  // Sets the status value (the server, between requests) and wakes its waiters.
  void set_status(std::string value);
  // WAITs with at most this many keys are withdrawn at once; bigger ones through retire().
  static constexpr std::size_t kCancelAtOnce = 256;
  std::size_t stored_bytes() const { return bytes_; }
  // Bytes of pending WAIT and WATCH_KEY registrations (registration_bytes per key), apart from
  // stored_bytes(): they are the connections', not the store's, and leave with them.
  std::size_t registered_bytes() const { return registered_; }
  // Keys `conn` is registered on (its pending WAIT's missing keys + its watched keys).
  std::size_t registrations(ConnId conn) const;
  bool has_pending_wait(ConnId conn) const { return waits_.count(conn) > 0; }

  std::size_t pending_waits() const { return waits_.size(); }

  // The job's reserve: who has claimed a rank, what the job holds (tcp_server_reserve.h).
  const JobReserve& reserve() const { return reserve_; }
  // Bytes of the reserve `conn` may use beyond the usual caps for what it has in flight
  // (buffered requests, queued replies): the unused reserve for a job's connection, else 0.
  std::size_t reserve_room(ConnId conn) const {
    return reserve_.job(conn) ? reserve_.unused_bytes() : 0;
  }

 private:
  bool present(const std::string& key) const;
  bool is_status_key(std::string_view key) const {
    return !status_key_.empty() && key == status_key_;
  }
  std::optional<Refusal> refuse_status_write(const wire::Request& req) const;
  // The key now exists (or its queue is non-empty): answer every WAIT that was missing only it.
  void wake(const std::string& key);
  // A queue item arrived: in wait order, the key counts as present for each waiter until one is
  // complete; that one is answered and the rest keep waiting on the key (libuv's
  // wakeupOneWaitingClient).
  void wake_one(const std::string& key);
  void cancel_wait(ConnId conn);
  enum class Change : uint8_t { updated = 0, created = 1, deleted = 2, appended = 4 };
  // A stored value: shared, so a notification can carry it without a copy (SharedBytes), and
  // whether the job's connection wrote it last (its bytes then count as the job's).
  struct Stored : std::string {
    explicit Stored(std::string&& v) : std::string(std::move(v)) {}
    bool job = false;
  };
  using Value = std::shared_ptr<Stored>;
  static Value make_value(std::string&& v) { return std::make_shared<Stored>(std::move(v)); }
  // What stored_bytes() counts for an entry.
  static std::size_t charge(const std::string& key, const Value& v) {
    return kEntryOverhead + key.size() + v->size();
  }
  // The entry's bytes leave / join the job's count (before / after a write changes it); a write
  // makes the entry the job's when `job`, else a stranger's.
  void disown(const std::string& key, const Value& v) {
    if (v && v->job) reserve_.release(charge(key, v));
  }
  void own(const std::string& key, const Value& v, bool job) {
    v->job = job;
    if (job) reserve_.hold(charge(key, v));
  }
  // Whether `conn`'s write of `keys` is the job's and may use the reserve: a job's connection,
  // or a single key the join writes before (or as) its claim (JobReserve::covers). The caller
  // records a pre-claim write with note_written() once it is done.
  bool job_write(ConnId conn, const std::vector<std::string>& keys) const {
    return reserve_.job(conn) || (keys.size() == 1 && reserve_.covers(conn, keys[0]));
  }
  void note_written(ConnId conn, bool job) {
    if (job && !reserve_.job(conn)) reserve_.note_pre_claim(conn);
  }
  static SharedBytes whole(const Value& v) { return {v, 0, v ? v->size() : 0}; }
  static SharedBytes prefix(const Value& v, std::size_t n) { return {v, 0, n}; }
  void notify_watchers(const std::string& key, Change change, const SharedBytes& old_value,
                       const SharedBytes& new_value);
  void reply(ConnId conn, std::string bytes) { send_(conn, std::move(bytes)); }
  bool may_queue(ConnId conn, std::size_t bytes) const {
    return !limits_.may_queue || limits_.may_queue(conn, bytes);
  }
  // nullopt when the store may take `new_entries` more keys/queues and `grow` more bytes.
  // `job`: the write is the job's (covered by the reserve); otherwise the reserve's unused keys
  // and bytes are held back from it.
  std::optional<Refusal> admit(bool job, std::size_t new_entries, std::size_t grow,
                               std::size_t item, const char* what) const;
  // nullopt when `conn` may register `more` keys costing `bytes` (the per-connection cap, then
  // the total budget through may_grow).
  std::optional<Refusal> admit_registration(ConnId conn, std::size_t more, std::size_t bytes,
                                            const char* what) const;
  void unregister_wait_key(const std::string& key) { registered_ -= registration_bytes(key.size()); }
  using KeySet = IncrementalHash<std::unordered_set<std::string>>;
  using Index = IncrementalHash<std::unordered_map<std::string, std::unordered_set<ConnId>>>;
  // Removes `conn` from `index[key]` (waiters_ or watchers_), and the key once nobody is left.
  static void unindex(Index& index, const std::string& key, ConnId conn) {
    auto* e = index.find(key);
    if (!e) return;
    e->second.erase(conn);
    if (e->second.empty()) index.erase(std::string(key));
  }

  Send send_;
  SendShared send_shared_;
  KeyspaceLimits limits_;
  JobReserve reserve_;
  std::size_t bytes_ = 0;
  std::size_t registered_ = 0;
  std::string status_key_;
  bool status_set_ = false;
  IncrementalHash<std::unordered_map<std::string, Value>> data_;  // never null
  IncrementalHash<std::unordered_map<std::string, std::deque<std::string>>> queues_;
  // Pending WAITs: the keys each connection still misses, and the reverse index.
  std::unordered_map<ConnId, KeySet> waits_;
  Index waiters_;
  // When each pending WAIT arrived (wake_one serves the oldest first).
  std::unordered_map<ConnId, uint64_t> wait_order_;
  // WAITs whose last part has not arrived: not answered even when nothing is missing yet.
  std::unordered_set<ConnId> opening_;
  uint64_t next_wait_ = 0;
  // Legacy WATCH_KEY registrations (torch 1.13's callback connection).
  Index watchers_;
  std::unordered_map<ConnId, std::vector<std::string>> watched_by_;
  // Index entries still to be removed (retire()): of forgotten connections, and of big WAITs
  // cancelled, replaced or refused while their connection lives on (`live`: an entry the
  // connection's pending WAIT has registered again is kept).
  struct Retiring {
    ConnId conn = 0;
    bool live = false;
    KeySet wait_keys;
    std::vector<std::string> watch_keys;
  };
  std::deque<Retiring> retiring_;
};

}  // namespace ncclsmoke::rendezvous::detail
