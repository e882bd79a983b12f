#include "rendezvous/tcp_server_keyspace.h"

#include "rendezvous/store_util.h"

namespace ncclsmoke::rendezvous::detail {

using wire::Op;

bool ServerKeyspace::present(const std::string& key) const {
  if (data_.count(key)) return true;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

void ServerKeyspace::wake(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  auto conns = std::move(it->second);
  waiters_.erase(it);
  std::string stop;
  wire::put_u8(stop, wire::kWaitStop);
  for (ConnId c : conns) {
    auto w = waits_.find(c);
    if (w == waits_.end()) continue;
    w->second.erase(key);
    if (w->second.empty()) {
      waits_.erase(w);
      reply(c, stop);
    }
  }
}

void ServerKeyspace::cancel_wait(ConnId conn) {
  auto w = waits_.find(conn);
  if (w == waits_.end()) return;
  for (const auto& key : w->second) {
    auto it = waiters_.find(key);
    if (it == waiters_.end()) continue;
    it->second.erase(conn);
    if (it->second.empty()) waiters_.erase(it);
  }
  waits_.erase(w);
}

void ServerKeyspace::forget(ConnId conn) {
  cancel_wait(conn);
  auto w = watched_by_.find(conn);
  if (w == watched_by_.end()) return;
  for (const auto& key : w->second) {
    auto it = watchers_.find(key);
    if (it == watchers_.end()) continue;
    it->second.erase(conn);
    if (it->second.empty()) watchers_.erase(it);
  }
  watched_by_.erase(w);
}

void ServerKeyspace::notify_watchers(const std::string& key, Change change,
                                     std::string_view old_value, std::string_view new_value) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  // torch 1.13's TCPStoreWorkerDaemon reads: type byte, key, old value, new value.
  std::string msg;
  wire::put_u8(msg, static_cast<uint8_t>(change));
  wire::put_bytes(msg, key);
  wire::put_bytes(msg, old_value);
  wire::put_bytes(msg, new_value);
  for (ConnId c : it->second) reply(c, msg);
}

std::optional<std::string> ServerKeyspace::execute(ConnId conn, wire::Dialect dialect,
                                                   const wire::Request& req) {
  std::string out;
  switch (req.op) {
    case Op::validate:
      return std::nullopt;  // handled by the server

    case Op::set:
    case Op::multi_set: {
      for (std::size_t i = 0; i < req.keys.size(); ++i) {
        const auto& key = req.keys[i];
        auto it = data_.find(key);
        if (it == data_.end()) {
          data_.emplace(key, req.values[i]);
          notify_watchers(key, Change::created, {}, req.values[i]);
        } else {
          std::string old = std::move(it->second);
          it->second = req.values[i];
          notify_watchers(key, Change::updated, old, req.values[i]);
        }
        wake(key);
      }
      return std::nullopt;
    }

    case Op::compare_set: {
      const auto& key = req.keys[0];
      const auto& expected = req.values[0];
      const auto& desired = req.values[1];
      auto it = data_.find(key);
      if (it == data_.end()) {
        if (!expected.empty()) {
          wire::put_bytes(out, expected);  // torch's "lying" answer for a missing key
        } else {
          data_.emplace(key, desired);
          notify_watchers(key, Change::created, {}, desired);
          wire::put_bytes(out, desired);
          wake(key);
        }
      } else {
        if (it->second == expected) {
          it->second = desired;
          notify_watchers(key, Change::updated, expected, desired);
        }
        wire::put_bytes(out, it->second);
      }
      reply(conn, out);
      return std::nullopt;
    }

    case Op::get: {
      auto it = data_.find(req.keys[0]);
      if (it == data_.end()) {
        if (dialect == wire::Dialect::legacy)
          return "GET of missing key " + printable(req.keys[0]) +
                 " (closing, as torch 1.13's server does)";
        wire::put_bytes(out, {});  // the libuv server answers an empty value
      } else {
        wire::put_bytes(out, it->second);
      }
      reply(conn, out);
      return std::nullopt;
    }

    case Op::add: {
      const auto& key = req.keys[0];
      auto it = data_.find(key);
      std::optional<int64_t> current = it == data_.end() ? 0 : parse_counter(it->second);
      if (!current)
        return "ADD on key " + printable(key) + " whose value " + printable(it->second) +
               " is not a decimal integer";
      int64_t value;
      if (__builtin_add_overflow(*current, req.delta, &value))
        return "ADD of " + std::to_string(req.delta) + " to key " + printable(key) + " (" +
               std::to_string(*current) + ") overflows int64";
      std::string text = std::to_string(value);
      if (it == data_.end()) {
        data_.emplace(key, text);
        notify_watchers(key, Change::created, {}, text);
      } else {
        std::string old = std::move(it->second);
        it->second = text;
        notify_watchers(key, Change::updated, old, text);
      }
      wire::put_i64(out, value);
      reply(conn, out);
      wake(key);
      return std::nullopt;
    }

    case Op::check: {
      bool all = true;
      for (const auto& k : req.keys) all = all && present(k);
      wire::put_u8(out, all ? wire::kCheckReady : wire::kCheckNotReady);
      reply(conn, out);
      return std::nullopt;
    }

    case Op::wait: {
      // A new WAIT replaces a pending one: a 1.13 client whose wait timed out (it has no
      // CANCEL_WAIT) retries with another WAIT and must get exactly one STOP_WAITING.
      cancel_wait(conn);
      std::unordered_set<std::string> missing;
      for (const auto& k : req.keys)
        if (!present(k)) missing.insert(k);
      if (missing.empty()) {
        wire::put_u8(out, wire::kWaitStop);
        reply(conn, out);
        return std::nullopt;
      }
      for (const auto& k : missing) waiters_[k].insert(conn);
      waits_.emplace(conn, std::move(missing));
      return std::nullopt;
    }

    case Op::cancel_wait:
      // Whether or not STOP_WAITING already went out, the client drains up to it and then
      // expects WAIT_CANCELED.
      cancel_wait(conn);
      wire::put_u8(out, wire::kWaitCanceled);
      reply(conn, out);
      return std::nullopt;

    case Op::num_keys:
      wire::put_i64(out, static_cast<int64_t>(data_.size()));
      reply(conn, out);
      return std::nullopt;

    case Op::delete_key: {
      const auto& key = req.keys[0];
      auto it = data_.find(key);
      int64_t deleted = 0;
      if (it != data_.end()) {
        notify_watchers(key, Change::deleted, it->second, {});
        data_.erase(it);
        deleted = 1;
      }
      queues_.erase(key);
      wire::put_i64(out, deleted);
      reply(conn, out);
      return std::nullopt;
    }

    case Op::append: {
      const auto& key = req.keys[0];
      auto it = data_.find(key);
      if (it == data_.end()) {
        data_.emplace(key, req.values[0]);
        notify_watchers(key, Change::created, {}, req.values[0]);
      } else {
        std::string old = it->second;
        it->second += req.values[0];
        notify_watchers(key, Change::appended, old, it->second);
      }
      wake(key);
      return std::nullopt;
    }

    case Op::multi_get:
      // torch's client WAITs for the keys first; a missing one gets an empty value.
      for (const auto& k : req.keys) {
        auto it = data_.find(k);
        wire::put_bytes(out, it == data_.end() ? std::string_view{} : std::string_view{it->second});
      }
      reply(conn, out);
      return std::nullopt;

    case Op::ping:
      wire::put_u32(out, req.u32);
      reply(conn, out);
      return std::nullopt;

    case Op::queue_push:
      queues_[req.keys[0]].push_back(req.values[0]);
      wake(req.keys[0]);
      return std::nullopt;

    case Op::queue_pop: {
      auto it = queues_.find(req.keys[0]);
      int64_t len = it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size());
      wire::put_i64(out, len);
      if (len > 0) {
        wire::put_bytes(out, it->second.front());
        it->second.pop_front();
        if (it->second.empty()) queues_.erase(it);
      }
      reply(conn, out);
      return std::nullopt;
    }

    case Op::queue_len: {
      auto it = queues_.find(req.keys[0]);
      wire::put_i64(out, it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size()));
      reply(conn, out);
      return std::nullopt;
    }

    case Op::list:
      wire::put_i64(out, static_cast<int64_t>(data_.size()));
      for (const auto& [k, v] : data_) wire::put_bytes(out, k);
      reply(conn, out);
      return std::nullopt;

    case Op::watch_key: {
      const auto& key = req.keys[0];
      if (watchers_[key].insert(conn).second) watched_by_[conn].push_back(key);
      wire::put_u8(out, 3);  // WatchResponseType::KEY_CALLBACK_REGISTERED
      reply(conn, out);
      return std::nullopt;
    }
  }
  return "unhandled op " + std::string(wire::to_string(req.op));
}

}  // namespace ncclsmoke::rendezvous::detail
