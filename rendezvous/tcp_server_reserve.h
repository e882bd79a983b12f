#pragma once
// The job's reserve in the TCPStore server ("no stranger"): room in the key table and
// in the stored bytes that only the job's own connections may take, so a stranger who floods the
// store up to --max-keys / --max-total-bytes still leaves the job's ranks the room their run
// needs. It is what reserved_connections is for connection slots, for keys and bytes.
//
// Whose connection is the job's. The store is torch's open protocol: no login, no job field. What
// tells the job's ranks apart is the join (rendezvous/join.h): every rank of `ncclsmoke run`
// claims its rank with a COMPARE_SET from "" that creates
//     /ncclsmoke/<job>/<restart>/join/rank/<r>
// A connection whose COMPARE_SET creates such a key has claimed a rank: from then on it is the
// job's (JobReserve::claim). Writing under the job's key prefix is not enough (the prefix is
// public: LIST, ncclsmoke/owner): a stranger's SET of any key, the job's included, is a
// stranger's write. Before its claim a rank writes a few keys of its own (rank 0: ncclsmoke/owner
// when it hosts the store, run/id, join/arrived/0, join/world_size; every other rank:
// join/arrived/<r>), so a connection that has not claimed yet may take at most kPreClaimKeys
// writes from the reserve, and only of those exact join keys; all such writes of connections
// that never claimed count against one store-wide cap (ranks x kPreClaimKeys), so opening
// connection after connection does not drain the reserve that way either.
//
// What the reserve holds back. A key belongs to the job while the last write to it came from a
// job's connection (or a covered pre-claim write); the job's keys and their bytes (kEntryOverhead +
// key + value, as stored_bytes() counts them) are counted. Strangers may not take the reserve's
// unused part: a stranger's request creating a key is refused once
//     keys stored + 1 > max_stored_keys - (reserved keys - the job's keys)
// and a stranger's stored bytes likewise against max_total_bytes. The job's connections may use
// the whole table and budget. Only what a request leaves *stored* is held back: buffered
// requests, queued replies and WAIT/WATCH_KEY registrations live and die with their connection
// and are bounded per connection already (--request-timeout, --max-output-bytes,
// --max-pending-keys); the job's connections may also take the unused reserve for those.
//
// Sizing (TcpStoreServerOptions::reserved_ranks: rank 0 hosting the store uses the world size;
// `store serve` --reserved-ranks, default 64). Per rank, what one rank of `ncclsmoke run` stores:
// join/arrived, join/rank, join/here, mesh/addr, mesh/result, watch/addr, verdict, pairwise
// summary/done, and per transport addr, sweep (+ abort, NCCL's unique_id/opens); rank 0 also
// owner, run/id, join/world_size, join/count, join/roster, mesh/done, pairwise/plan: 11 keys a
// rank for a 4-rank socket run (44 measured), ~21 with four transports, ~28 for rank 0, a few
// more per pairwise round -> kReservedKeysPerRank 64. Bytes: the verdict dominates (4.6 KiB a
// rank at 4 ranks, 10.8 KiB at 16, measured; bounded near 200 KiB at 16k ranks, where the mesh
// probes ring neighbours and k random peers, not all pairs) -> kReservedBytesPerRank 256 KiB.
// Each total is at most half of its limit (as reserved connections are), so strangers always
// keep half.
//
// With a job token where the server knows it (rank 0 hosting the store: TcpStoreServerOptions::
// claim_is_genuine), a claim counts only when its value carries the token's signature, so a
// stranger that imitates the join stays a stranger. What it does not stop: without a token (or
// under `store serve`, which has none) a stranger that speaks the join (claims a made-up rank) is
// the job's to the server and can use the reserve, as it could claim the job's own ranks and
// break its join anyway (RANK_TAKEN); the few pre-claim writes are not checked either. A rank whose connection drops and reconnects (the client
// does after an error or a legacy WAIT timeout) does not claim again: its new connection writes
// in the general pool like a stranger's. torch's own clients never claim: they share the general
// pool.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace ncclsmoke::rendezvous::detail {

using ConnId = uint64_t;

inline constexpr std::size_t kReservedKeysPerRank = 64;
inline constexpr std::size_t kReservedBytesPerRank = 256 * 1024;
// Writes a connection may take from the reserve before it claims a rank (see above).
inline constexpr std::size_t kPreClaimKeys = 4;

// What a key is to the join, as the server sees it (torch's clients send "/" + key).
enum class JoinKey : uint8_t { none, pre_claim, claim };

inline JoinKey join_key_kind(std::string_view key) {
  constexpr std::string_view kRoot = "/ncclsmoke/";
  if (key == "/ncclsmoke/owner") return JoinKey::pre_claim;
  if (key.substr(0, kRoot.size()) != kRoot) return JoinKey::none;
  std::string_view rest = key.substr(kRoot.size());  // <job>/<restart>/...
  auto ends_with = [&](std::string_view tail) {
    return rest.size() > tail.size() && rest.substr(rest.size() - tail.size()) == tail;
  };
  if (ends_with("/run/id") || ends_with("/join/world_size")) return JoinKey::pre_claim;
  // <ns>/join/arrived/<r> or <ns>/join/rank/<r>: a non-empty namespace and a decimal rank.
  auto rank_under = [&](std::string_view dir) {
    auto at = rest.rfind(dir);
    if (at == std::string_view::npos || at == 0) return false;
    std::string_view digits = rest.substr(at + dir.size());
    return !digits.empty() && digits.size() <= 10 &&
           std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (rank_under("/join/arrived/")) return JoinKey::pre_claim;
  if (rank_under("/join/rank/")) return JoinKey::claim;
  return JoinKey::none;
}

// The reserve's bookkeeping: which connections are the job's, what the job holds. Only the
// server's event-loop thread touches it (through ServerKeyspace), so it has no locks.
class JobReserve {
 public:
  JobReserve() = default;
  // `ranks`: how many ranks the reserve is for (bounds the pre-claim writes of connections that
  // never claimed); `keys`/`bytes`: the reserve itself (already capped by the caller).
  JobReserve(std::size_t ranks, std::size_t keys, std::size_t bytes)
      : ranks_(ranks), keys_(keys), bytes_(bytes) {}

  std::size_t keys() const { return keys_; }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return keys_ == 0 && bytes_ == 0; }

  // Whether `conn` has claimed a rank (its writes are the job's).
  bool job(ConnId conn) const { return !claimed_.empty() && claimed_.count(conn) > 0; }
  std::size_t job_connections() const { return claimed_.size(); }

  // Whether `conn`'s write of `key` may come from the reserve, and the key then belong to the
  // job: a job's connection, a claim, or one of the join's pre-claim keys within the allowance.
  bool covers(ConnId conn, std::string_view key) const {
    if (empty()) return false;
    if (job(conn)) return true;
    switch (join_key_kind(key)) {
      case JoinKey::claim:
        return true;
      case JoinKey::pre_claim: {
        auto it = pre_claim_.find(conn);
        std::size_t mine = it == pre_claim_.end() ? 0 : it->second;
        return mine < kPreClaimKeys && unclaimed_writes_ < ranks_ * kPreClaimKeys;
      }
      case JoinKey::none:
        return false;
    }
    return false;
  }
  // A covered write by `conn` that is not (yet) the job's: one of its pre-claim writes.
  void note_pre_claim(ConnId conn) {
    if (job(conn)) return;
    ++pre_claim_[conn];
    ++unclaimed_writes_;
  }
  // `conn` created a rank's claim key: it is the job's from now on, and its pre-claim writes no
  // longer count against the cap for connections that never claim.
  void claim(ConnId conn) {
    if (empty() || !claimed_.insert(conn).second) return;
    if (auto it = pre_claim_.find(conn); it != pre_claim_.end()) {
      unclaimed_writes_ -= it->second;
      pre_claim_.erase(it);
    }
  }
  // A closed connection. Pre-claim writes of one that never claimed stay counted (their keys
  // may still be stored), so the cap stays a bound for good.
  void forget(ConnId conn) {
    claimed_.erase(conn);
    pre_claim_.erase(conn);
  }

  // A key of `charge` stored bytes became / stopped being the job's.
  void hold(std::size_t charge) {
    ++held_keys_;
    held_bytes_ += charge;
  }
  void release(std::size_t charge) {
    --held_keys_;
    held_bytes_ -= charge;
  }
  std::size_t job_keys() const { return held_keys_; }
  std::size_t job_bytes() const { return held_bytes_; }
  // The reserve's part the job does not use yet: what strangers may not take.
  std::size_t unused_keys() const { return keys_ - std::min(keys_, held_keys_); }
  std::size_t unused_bytes() const { return bytes_ - std::min(bytes_, held_bytes_); }

 private:
  std::size_t ranks_ = 0, keys_ = 0, bytes_ = 0;
  std::size_t held_keys_ = 0, held_bytes_ = 0;
  std::unordered_set<ConnId> claimed_;
  std::unordered_map<ConnId, std::size_t> pre_claim_;  // connections that have not claimed
  std::size_t unclaimed_writes_ = 0;  // pre-claim writes of connections not (yet) claimed
};

}  // namespace ncclsmoke::rendezvous::detail
