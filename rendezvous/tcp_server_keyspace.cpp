#include "rendezvous/tcp_server_keyspace.h"

#include <algorithm>

#include "rendezvous/store_util.h"

namespace ncclsmoke::rendezvous::detail {

using wire::Op;

bool ServerKeyspace::present(const std::string& key) const {
  if (data_.contains(key)) return true;
  if (queues_.empty()) return false;
  auto* q = queues_.find(key);
  return q && !q->second.empty();
}

void ServerKeyspace::wake(const std::string& key) {
  auto* it = waiters_.find(key);
  if (!it) return;
  auto conns = std::move(it->second);
  waiters_.erase(key);
  std::string stop;
  wire::put_u8(stop, wire::kWaitStop);
  for (ConnId c : conns) {
    auto w = waits_.find(c);
    if (w == waits_.end()) continue;
    if (w->second.erase(key)) unregister_wait_key(key);
    if (w->second.empty() && !opening_.count(c)) {
      waits_.erase(w);
      wait_order_.erase(c);
      reply(c, stop);
    }
  }
}

void ServerKeyspace::wake_one(const std::string& key) {
  auto* it = waiters_.find(key);
  if (!it) return;
  std::vector<std::pair<uint64_t, ConnId>> order;
  order.reserve(it->second.size());
  for (ConnId c : it->second) {
    auto o = wait_order_.find(c);
    order.emplace_back(o == wait_order_.end() ? 0 : o->second, c);
  }
  std::sort(order.begin(), order.end());
  std::string stop;
  wire::put_u8(stop, wire::kWaitStop);
  for (const auto& [seq, c] : order) {
    auto w = waits_.find(c);
    if (w == waits_.end()) continue;
    it->second.erase(c);
    if (w->second.erase(key)) unregister_wait_key(key);
    if (w->second.empty() && !opening_.count(c)) {
      waits_.erase(w);
      wait_order_.erase(c);
      reply(c, stop);
      break;
    }
  }
  if (it->second.empty()) waiters_.erase(key);
}

void ServerKeyspace::cancel_wait(ConnId conn) {
  opening_.erase(conn);
  auto w = waits_.find(conn);
  if (w == waits_.end()) return;
  if (w->second.size() > kCancelAtOnce) {
    // Withdrawing 32 Ki keys at once (a WAIT refused at --max-pending-keys) held the loop for
    // 40 ms: retire() does it a bounded amount per turn. Until then an index entry may outlive
    // the WAIT; wake() and wake_one() skip a key the connection's pending WAIT does not miss.
    Retiring r;
    r.conn = conn;
    r.live = true;
    r.wait_keys = std::move(w->second);
    retiring_.push_back(std::move(r));
  } else {
    w->second.for_each([&](const std::string& key) {
      unregister_wait_key(key);
      unindex(waiters_, key, conn);
    });
  }
  waits_.erase(w);
  wait_order_.erase(conn);
}

std::size_t ServerKeyspace::registrations(ConnId conn) const {
  std::size_t n = 0;
  if (auto w = waits_.find(conn); w != waits_.end()) n += w->second.size();
  if (auto w = watched_by_.find(conn); w != watched_by_.end()) n += w->second.size();
  return n;
}

void ServerKeyspace::forget(ConnId conn) {
  reserve_.forget(conn);
  // The index walks (wake, wake_one, notify_watchers) skip a connection with no pending WAIT or
  // that the server no longer has, so its entries may stay there until retired.
  opening_.erase(conn);
  wait_order_.erase(conn);
  Retiring r;
  r.conn = conn;
  if (auto w = waits_.find(conn); w != waits_.end()) {
    r.wait_keys = std::move(w->second);
    waits_.erase(w);
  }
  if (auto w = watched_by_.find(conn); w != watched_by_.end()) {
    r.watch_keys = std::move(w->second);
    watched_by_.erase(w);
  }
  if (!r.wait_keys.empty() || !r.watch_keys.empty()) retiring_.push_back(std::move(r));
}

void ServerKeyspace::retire(std::size_t max_keys, std::chrono::steady_clock::time_point until) {
  constexpr std::size_t kClockEvery = 32;
  std::size_t done = 0;
  auto more = [&] {
    return done < max_keys &&
           (done % kClockEvery != 0 || done == 0 || std::chrono::steady_clock::now() < until);
  };
  while (more() && !retiring_.empty()) {
    auto& r = retiring_.front();
    const KeySet* pending = nullptr;
    if (r.live)
      if (auto w = waits_.find(r.conn); w != waits_.end()) pending = &w->second;
    while (!r.wait_keys.empty() && more()) {
      auto node = r.wait_keys.extract_any();
      unregister_wait_key(node.value());
      // The connection's WAIT now pending registered this key again: the entry is its.
      if (!pending || !pending->contains(node.value())) unindex(waiters_, node.value(), r.conn);
      ++done;
    }
    while (!r.watch_keys.empty() && more()) {
      registered_ -= registration_bytes(r.watch_keys.back().size());
      unindex(watchers_, r.watch_keys.back(), r.conn);
      r.watch_keys.pop_back();
      ++done;
    }
    if (r.wait_keys.empty() && r.watch_keys.empty()) retiring_.pop_front();
  }
}

void ServerKeyspace::notify_watchers(const std::string& key, Change change,
                                     const SharedBytes& old_value, const SharedBytes& new_value) {
  auto* it = watchers_.find(key);
  if (!it) return;
  // torch 1.13's TCPStoreWorkerDaemon reads: type byte, key, old value, new value. Each watcher
  // is asked first, so the message is built only when someone can take it, and built once.
  std::size_t size = 1 + 3 * 8 + key.size() + old_value.len + new_value.len;
  std::vector<ConnId> takers;
  for (ConnId c : it->second)
    if (may_queue(c, size)) takers.push_back(c);
  if (takers.empty()) return;
  // Big values go out as they are stored (shared, never copied: an 8 MiB value's notification,
  // old + new, was a 16 MiB copy in one turn, bench/store_attack_bench.py watchers); the rest
  // is copied into small parts.
  std::vector<SharedBytes> parts;
  auto msg = std::make_shared<std::string>();
  auto cut = [&] {
    if (msg->empty()) return;
    std::size_t n = msg->size();
    parts.push_back({std::move(msg), 0, n});
    msg = std::make_shared<std::string>();
  };
  auto put = [&](const SharedBytes& v) {
    wire::put_u64(*msg, v.len);
    if (v.owner && v.len >= kShareFrom && send_shared_) {
      cut();
      parts.push_back(v);
    } else {
      msg->append(v.view());
    }
  };
  wire::put_u8(*msg, static_cast<uint8_t>(change));
  wire::put_bytes(*msg, key);
  put(old_value);
  put(new_value);
  cut();
  for (ConnId c : takers) {
    if (send_shared_) {
      send_shared_(c, parts);
    } else {
      std::string flat;
      flat.reserve(size);
      for (const auto& p : parts) flat.append(p.view());
      send_(c, std::move(flat));
    }
  }
}

void ServerKeyspace::set_status(std::string value) {
  if (status_key_.empty()) return;
  auto [it, fresh] = data_.try_emplace(status_key_);
  Value old = std::move(it->second);
  it->second = make_value(std::move(value));
  status_set_ = true;
  notify_watchers(status_key_, fresh ? Change::created : Change::updated, whole(old),
                  whole(it->second));
  wake(status_key_);
}

std::optional<Refusal> ServerKeyspace::refuse_status_write(const wire::Request& req) const {
  if (status_key_.empty()) return std::nullopt;
  switch (req.op) {
    case Op::set:
    case Op::multi_set:
    case Op::compare_set:
    case Op::add:
    case Op::append:
    case Op::delete_key:
    case Op::queue_push:
      for (const auto& k : req.keys)
        if (is_status_key(k))
          return Refusal(std::string(wire::to_string(req.op)) + " of " + printable(k) +
                         ", the store's own status key (read-only: the store writes it when a "
                         "limit refuses someone)");
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<Refusal> ServerKeyspace::admit(bool job, std::size_t new_entries, std::size_t grow,
                                             std::size_t item, const char* what) const {
  std::size_t entries = num_keys() + queues_.size();
  // A stranger may not take the reserve's unused keys (tcp_server_reserve.h); the job may take
  // the whole table.
  std::size_t held = job ? 0 : reserve_.unused_keys();
  std::size_t cap = limits_.max_stored_keys - std::min(limits_.max_stored_keys, held);
  if (new_entries > 0 && entries + new_entries > cap) {
    Refusal r(std::string(what) + " would create " + std::to_string(new_entries) +
                  " key(s) beyond the key-count limit: " + std::to_string(entries) +
                  " keys stored, max_stored_keys " + std::to_string(limits_.max_stored_keys) +
                  " (--max-keys)" +
                  (held > 0 ? ", of which " + std::to_string(held) +
                                  " are held for the job's claimed ranks (--reserved-ranks)"
                            : std::string()),
              true);
    r.keys_full = true;
    return r;
  }
  if (grow > 0 && limits_.may_grow) {
    std::size_t unused = reserve_.unused_bytes();
    if (auto why = limits_.may_grow(grow, item, job ? 0 : unused, job ? unused : 0))
      return Refusal(std::move(*why), true);
  }
  return std::nullopt;
}

std::optional<Refusal> ServerKeyspace::admit_registration(ConnId conn, std::size_t more,
                                                          std::size_t bytes,
                                                          const char* what) const {
  std::size_t have = registrations(conn);
  if (have + more > limits_.max_pending_keys)
    return Refusal(std::string(what) + " would register " + std::to_string(more) +
                       " more key(s) for this connection (" + std::to_string(have) +
                       " pending WAIT/WATCH_KEY keys already): over max_pending_keys " +
                       std::to_string(limits_.max_pending_keys) + " (--max-pending-keys)",
                   true);
  // Registrations together stay within max_registered_bytes: the rest of the budget is kept
  // for stored values and requests, so a client pinning keys cannot refuse another's SET. A
  // job's connection may go past it into the unused reserve.
  if (registered_ + bytes > limits_.max_registered_bytes && bytes > reserve_room(conn))
    return Refusal(std::string(what) + " would register " + std::to_string(more) +
                       " more key(s) (" + std::to_string(bytes) + " bytes) past the " +
                       std::to_string(limits_.max_registered_bytes) +
                       " bytes WAIT/WATCH_KEY registrations may hold together (" +
                       std::to_string(registered_) +
                       " held): 3/4 of max_total_bytes (--max-total-bytes), the rest is kept for "
                       "stored values and requests",
                   true);
  // A registration leaves with its connection: nothing is held back from it (only stored
  // bytes are), and a job's connection may use the unused reserve.
  if (limits_.may_grow)
    if (auto why = limits_.may_grow(bytes, bytes, 0, reserve_room(conn)))
      return Refusal("registering " + std::to_string(more) + " key(s) of " + what + ": " +
                         std::move(*why),
                     true);
  return std::nullopt;
}

bool ServerKeyspace::all_present(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!present(k)) return false;
  return true;
}

std::optional<Refusal> ServerKeyspace::wait_part(ConnId conn, std::vector<std::string>& keys,
                                                 bool first, bool last) {
  if (first) {
    // A new WAIT replaces a pending one: a 1.13 client whose wait timed out (it has no
    // CANCEL_WAIT) retries with another WAIT and must get exactly one STOP_WAITING.
    cancel_wait(conn);
    wait_order_[conn] = next_wait_++;
    if (!last) opening_.insert(conn);
  }
  auto& missing = waits_[conn];
  std::vector<std::string*> fresh;
  std::size_t cost = 0;
  for (auto& k : keys)
    if (!present(k) && !missing.contains(k)) {
      fresh.push_back(&k);
      cost += registration_bytes(k.size());
    }
  // Every registered key is memory a client chose to pin: capped per connection and counted
  // against the total budget (20 WAITs on 100,000 absent keys would otherwise hold GiBs).
  if (!fresh.empty()) {
    if (auto why = admit_registration(conn, fresh.size(), cost, "WAIT")) {
      cancel_wait(conn);
      return why;
    }
    registered_ += cost;
    // A key repeated within one request is registered once (the set de-duplicates it).
    for (std::string* k : fresh) {
      auto [it, inserted] = missing.insert(std::move(*k));
      if (inserted) waiters_.try_emplace(*it).first->second.insert(conn);
      else registered_ -= registration_bytes(it->size());
    }
  }
  if (!last) return std::nullopt;
  opening_.erase(conn);
  if (missing.empty()) {
    waits_.erase(conn);
    wait_order_.erase(conn);
    std::string out;
    wire::put_u8(out, wire::kWaitStop);
    reply(conn, std::move(out));
  }
  return std::nullopt;
}

std::optional<Refusal> ServerKeyspace::execute(ConnId conn, wire::Dialect dialect,
                                               wire::Request&& req) {
  if (auto why = refuse_status_write(req)) return why;
  std::string out;
  switch (req.op) {
    case Op::validate:
      return std::nullopt;  // handled by the server

    case Op::set:
    case Op::multi_set: {
      // All or nothing: the whole request is checked against the limits before anything changes.
      std::size_t new_entries = 0, grow = 0, item = 0;
      for (std::size_t i = 0; i < req.keys.size(); ++i) {
        auto it = data_.find(req.keys[i]);
        std::size_t vsize = req.values[i].size();
        item = std::max(item, vsize);
        if (!it) {
          ++new_entries;
          grow += kEntryOverhead + req.keys[i].size() + vsize;
        } else if (vsize > it->second->size()) {
          grow += vsize - it->second->size();
        }
      }
      const bool job = job_write(conn, req.keys);
      if (auto why = admit(job, new_entries, grow, item, wire::to_string(req.op))) return why;
      note_written(conn, job);
      for (std::size_t i = 0; i < req.keys.size(); ++i) {
        const auto& key = req.keys[i];
        auto it = data_.find(key);
        if (!it) {
          bytes_ += kEntryOverhead + key.size() + req.values[i].size();
          auto& v = data_.try_emplace(key, make_value(std::move(req.values[i]))).first->second;
          own(key, v, job);
          notify_watchers(key, Change::created, {}, whole(v));
        } else {
          bytes_ += req.values[i].size();
          bytes_ -= it->second->size();
          Value old = std::move(it->second);
          disown(key, old);
          it->second = make_value(std::move(req.values[i]));
          own(key, it->second, job);
          notify_watchers(key, Change::updated, whole(old), whole(it->second));
        }
        wake(key);
      }
      return std::nullopt;
    }

    case Op::compare_set: {
      const auto& key = req.keys[0];
      const auto& expected = req.values[0];
      auto& desired = req.values[1];
      auto it = data_.find(key);
      if (!it) {
        if (!expected.empty()) {
          if (!may_queue(conn, 8 + expected.size())) return std::nullopt;
          wire::put_bytes(out, expected);  // torch's "lying" answer for a missing key
        } else {
          // Creating <ns>/join/rank/<r> from "" is a rank's claim: the connection is the job's
          // from now on (tcp_server_reserve.h), when the claim is genuine (the job token's
          // signature, where the server knows the token); a forged one is a stranger's write.
          const bool claim = join_key_kind(key) == JoinKey::claim;
          const bool genuine =
              !claim || !limits_.claim_is_genuine || limits_.claim_is_genuine(key, desired);
          const bool job = genuine ? job_write(conn, req.keys) : reserve_.job(conn);
          if (auto why = admit(job, 1, kEntryOverhead + key.size() + desired.size(),
                               desired.size(), "COMPARE_SET"))
            return why;
          if (!may_queue(conn, 8 + desired.size())) return std::nullopt;
          if (job && claim) reserve_.claim(conn);
          note_written(conn, job);
          bytes_ += kEntryOverhead + key.size() + desired.size();
          auto& v = data_.try_emplace(key, make_value(std::move(desired))).first->second;
          own(key, v, job);
          notify_watchers(key, Change::created, {}, whole(v));
          wire::put_bytes(out, *v);
          wake(key);
        }
      } else {
        if (*it->second == expected) {
          const bool job = reserve_.job(conn);
          if (desired.size() > expected.size())
            if (auto why = admit(job, 0, desired.size() - expected.size(), desired.size(),
                                 "COMPARE_SET"))
              return why;
          bytes_ += desired.size();
          bytes_ -= expected.size();
          Value old = std::move(it->second);
          disown(key, old);
          it->second = make_value(std::move(desired));
          own(key, it->second, job);
          notify_watchers(key, Change::updated, whole(old), whole(it->second));
        }
        if (!may_queue(conn, 8 + it->second->size())) return std::nullopt;
        wire::put_bytes(out, *it->second);
      }
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::get: {
      auto it = data_.find(req.keys[0]);
      if (!it) {
        if (dialect == wire::Dialect::legacy)
          return "GET of missing key " + printable(req.keys[0]) +
                 " (closing, as torch 1.13's server does)";
        wire::put_bytes(out, {});  // the libuv server answers an empty value
      } else {
        if (!may_queue(conn, 8 + it->second->size())) return std::nullopt;
        wire::put_bytes(out, *it->second);
      }
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::add: {
      const auto& key = req.keys[0];
      auto it = data_.find(key);
      std::optional<int64_t> current = !it ? 0 : parse_counter(*it->second);
      if (!current)
        return "ADD on key " + printable(key) + " whose value " + printable(*it->second) +
               " is not a decimal integer";
      int64_t value;
      if (__builtin_add_overflow(*current, req.delta, &value))
        return "ADD of " + std::to_string(req.delta) + " to key " + printable(key) + " (" +
               std::to_string(*current) + ") overflows int64";
      std::string text = std::to_string(value);
      const bool job = reserve_.job(conn);
      if (!it) {
        if (auto why =
                admit(job, 1, kEntryOverhead + key.size() + text.size(), text.size(), "ADD"))
          return why;
        bytes_ += kEntryOverhead + key.size() + text.size();
        auto& v = data_.try_emplace(key, make_value(std::move(text))).first->second;
        own(key, v, job);
        notify_watchers(key, Change::created, {}, whole(v));
      } else {
        if (text.size() > it->second->size())
          if (auto why = admit(job, 0, text.size() - it->second->size(), text.size(), "ADD"))
            return why;
        bytes_ += text.size();
        bytes_ -= it->second->size();
        Value old = std::move(it->second);
        disown(key, old);
        it->second = make_value(std::move(text));
        own(key, it->second, job);
        notify_watchers(key, Change::updated, whole(old), whole(it->second));
      }
      wire::put_i64(out, value);
      reply(conn, std::move(out));
      wake(key);
      return std::nullopt;
    }

    case Op::check: {
      wire::put_u8(out, all_present(req.keys) ? wire::kCheckReady : wire::kCheckNotReady);
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::wait:
      return wait_part(conn, req.keys, true, true);

    case Op::cancel_wait:
      // Whether or not STOP_WAITING already went out, the client drains up to it and then
      // expects WAIT_CANCELED.
      cancel_wait(conn);
      wire::put_u8(out, wire::kWaitCanceled);
      reply(conn, std::move(out));
      return std::nullopt;

    case Op::num_keys:
      wire::put_i64(out, static_cast<int64_t>(num_keys()));
      reply(conn, std::move(out));
      return std::nullopt;

    case Op::delete_key: {
      const auto& key = req.keys[0];
      auto it = data_.find(key);
      int64_t deleted = 0;
      if (it) {
        notify_watchers(key, Change::deleted, whole(it->second), {});
        disown(key, it->second);
        bytes_ -= kEntryOverhead + key.size() + it->second->size();
        data_.erase(key);
        deleted = 1;
      }
      auto q = queues_.find(key);
      if (q) {
        bytes_ -= kEntryOverhead + key.size();
        for (const auto& item : q->second) bytes_ -= kItemOverhead + item.size();
        queues_.erase(key);
      }
      wire::put_i64(out, deleted);
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::append: {
      const auto& key = req.keys[0];
      auto& value = req.values[0];
      auto it = data_.find(key);
      const bool job = reserve_.job(conn);
      if (!it) {
        if (auto why = admit(job, 1, kEntryOverhead + key.size() + value.size(), value.size(),
                             "APPEND"))
          return why;
        bytes_ += kEntryOverhead + key.size() + value.size();
        auto& v = data_.try_emplace(key, make_value(std::move(value))).first->second;
        own(key, v, job);
        notify_watchers(key, Change::created, {}, whole(v));
      } else {
        std::size_t old_size = it->second->size();
        if (old_size + value.size() > limits_.max_value_bytes)
          return Refusal("APPEND of " + std::to_string(value.size()) + " bytes to key " +
                             printable(key) + " (" + std::to_string(old_size) +
                             " bytes) would exceed max_value_bytes " +
                             std::to_string(limits_.max_value_bytes) + " (--max-value-bytes)",
                         true);
        if (auto why = admit(job, 0, value.size(), old_size + value.size(), "APPEND")) return why;
        bytes_ += value.size();
        // In place, amortised: no copy of what is already stored, and what notifications
        // queued before hold of it (its first bytes) stays as it was.
        disown(key, it->second);
        it->second->append(value);
        own(key, it->second, job);
        notify_watchers(key, Change::appended, prefix(it->second, old_size), whole(it->second));
      }
      wake(key);
      return std::nullopt;
    }

    case Op::multi_get: {
      // torch's client WAITs for the keys first; a missing one gets an empty value. The reply's
      // size is known before it is built, so an over-cap reader costs no copy.
      std::size_t size = 0;
      for (const auto& k : req.keys) {
        auto it = data_.find(k);
        size += 8 + (!it ? 0 : it->second->size());
      }
      if (!may_queue(conn, size)) return std::nullopt;
      out.reserve(size);
      for (const auto& k : req.keys) {
        auto it = data_.find(k);
        wire::put_bytes(out, !it ? std::string_view{} : std::string_view{*it->second});
      }
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::ping:
      wire::put_u32(out, req.u32);
      reply(conn, std::move(out));
      return std::nullopt;

    case Op::queue_push: {
      const auto& key = req.keys[0];
      auto q = queues_.find(key);
      bool fresh = !q;
      std::size_t grow = kItemOverhead + req.values[0].size() +
                         (fresh ? kEntryOverhead + key.size() : 0);
      // Queues are never the job's (ncclsmoke does not use them); a job's connection may still
      // take the reserve for one.
      if (auto why = admit(reserve_.job(conn), fresh ? 1 : 0, grow, req.values[0].size(),
                           "QUEUE_PUSH"))
        return why;
      bytes_ += grow;
      if (fresh) q = queues_.try_emplace(key).first;
      q->second.push_back(std::move(req.values[0]));
      wake_one(key);
      return std::nullopt;
    }

    case Op::queue_pop: {
      auto it = queues_.find(req.keys[0]);
      int64_t len = !it ? 0 : static_cast<int64_t>(it->second.size());
      wire::put_i64(out, len);
      if (len > 0) {
        if (!may_queue(conn, 16 + it->second.front().size())) return std::nullopt;
        wire::put_bytes(out, it->second.front());
        bytes_ -= kItemOverhead + it->second.front().size();
        it->second.pop_front();
        if (it->second.empty()) {
          bytes_ -= kEntryOverhead + it->first.size();
          queues_.erase(req.keys[0]);
        }
      }
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::queue_len: {
      auto it = queues_.find(req.keys[0]);
      wire::put_i64(out, !it ? 0 : static_cast<int64_t>(it->second.size()));
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::list: {
      std::size_t size = 8;
      data_.for_each([&](const auto& kv) { size += 8 + kv.first.size(); });
      if (!may_queue(conn, size)) return std::nullopt;
      out.reserve(size);
      wire::put_i64(out, static_cast<int64_t>(data_.size()));
      data_.for_each([&](const auto& kv) { wire::put_bytes(out, kv.first); });
      reply(conn, std::move(out));
      return std::nullopt;
    }

    case Op::watch_key: {
      const auto& key = req.keys[0];
      auto it = watchers_.find(key);
      if (!it || !it->second.count(conn)) {
        std::size_t cost = registration_bytes(key.size());
        if (auto why = admit_registration(conn, 1, cost, "WATCH_KEY")) return why;
        registered_ += cost;
        watchers_.try_emplace(key).first->second.insert(conn);
        watched_by_[conn].push_back(key);
      }
      wire::put_u8(out, 3);  // WatchResponseType::KEY_CALLBACK_REGISTERED
      reply(conn, std::move(out));
      return std::nullopt;
    }
  }
  return "unhandled op " + std::string(wire::to_string(req.op));
}

}  // namespace ncclsmoke::rendezvous::detail
