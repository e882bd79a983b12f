#include "rendezvous/wire.h"

#include <cstring>
#include <stdexcept>

namespace ncclsmoke::rendezvous::wire {
namespace {

// Legacy (<= 2.0) numbering; 9..12 are the post-2.0 additions accepted as an extension.
constexpr Op kLegacy[] = {Op::set,        Op::compare_set, Op::get,       Op::add,
                          Op::check,      Op::wait,        Op::num_keys,  Op::watch_key,
                          Op::delete_key, Op::append,      Op::multi_get, Op::multi_set,
                          Op::cancel_wait};
// Modern (>= 2.1, LIST era) numbering.
constexpr Op kModern[] = {Op::validate,   Op::set,        Op::compare_set, Op::get,
                          Op::add,        Op::check,      Op::wait,        Op::num_keys,
                          Op::delete_key, Op::append,     Op::multi_get,   Op::multi_set,
                          Op::cancel_wait, Op::ping,      Op::queue_push,  Op::queue_pop,
                          Op::queue_len,  Op::list};

template <std::size_t N>
std::optional<uint8_t> index_of(const Op (&table)[N], Op op) {
  for (std::size_t i = 0; i < N; ++i)
    if (table[i] == op) return static_cast<uint8_t>(i);
  return std::nullopt;
}

// Reads little-endian fields from a buffer that may end mid-message. Every read either succeeds,
// reports "need more bytes" (short), or fails with a reason (bad).
class Cursor {
 public:
  // copy=false only checks and skips the fields (strings come back empty): a partial request
  // that is still arriving costs no copy of what it has so far.
  Cursor(std::string_view buf, const Limits& limits, bool copy = true)
      : buf_(buf), limits_(limits), copy_(copy) {}

  bool short_read() const { return short_; }
  bool bad() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  std::size_t pos() const { return pos_; }
  bool ok() const { return !short_ && error_.empty(); }

  template <typename T>
  T scalar() {
    T v{};
    if (!ok()) return v;
    if (buf_.size() - pos_ < sizeof(T)) {
      short_ = true;
      return v;
    }
    std::memcpy(&v, buf_.data() + pos_, sizeof(T));  // host order == little-endian
    pos_ += sizeof(T);
    return v;
  }

  std::string bytes(std::size_t max, const char* what) {
    uint64_t len = scalar<uint64_t>();
    if (!ok()) return {};
    if (len > max) {
      fail(std::string(what) + " length " + std::to_string(len) + " exceeds the limit of " +
           std::to_string(max) + " bytes");
      return {};
    }
    if (buf_.size() - pos_ < len) {
      short_ = true;
      return {};
    }
    if (!copy_) {
      pos_ += len;
      return {};
    }
    std::string out(buf_.data() + pos_, len);
    pos_ += len;
    return out;
  }

  std::string key() { return bytes(limits_.max_key_bytes, "key"); }
  std::string value() { return bytes(limits_.max_value_bytes, "value"); }

  // A key count: CHECK/WAIT/MULTI_GET send uint64, MULTI_SET sends int64 (same bytes when sane).
  std::size_t count() {
    uint64_t n = scalar<uint64_t>();
    if (!ok()) return 0;
    if (n > limits_.max_keys) {
      fail("key count " + std::to_string(static_cast<int64_t>(n)) + " exceeds the limit of " +
           std::to_string(limits_.max_keys));
      return 0;
    }
    return static_cast<std::size_t>(n);
  }

  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }

 private:
  std::string_view buf_;
  const Limits& limits_;
  bool copy_ = true;
  std::size_t pos_ = 0;
  bool short_ = false;
  std::string error_;
};

template <typename Result>
Result finish(Cursor& c, Result r) {
  if (c.bad()) {
    r.status = Status::error;
    r.error = c.error();
  } else if (c.short_read()) {
    r.status = Status::need_more;
  } else {
    r.status = Status::ok;
    r.consumed = c.pos();
  }
  return r;
}

void put_raw(std::string& out, const void* p, std::size_t n) {
  out.append(static_cast<const char*>(p), n);
}

}  // namespace

const char* to_string(Dialect d) { return d == Dialect::legacy ? "legacy" : "modern"; }

const char* to_string(Op op) {
  switch (op) {
    case Op::validate: return "VALIDATE";
    case Op::set: return "SET";
    case Op::compare_set: return "COMPARE_SET";
    case Op::get: return "GET";
    case Op::add: return "ADD";
    case Op::check: return "CHECK";
    case Op::wait: return "WAIT";
    case Op::num_keys: return "GETNUMKEYS";
    case Op::watch_key: return "WATCH_KEY";
    case Op::delete_key: return "DELETE_KEY";
    case Op::append: return "APPEND";
    case Op::multi_get: return "MULTI_GET";
    case Op::multi_set: return "MULTI_SET";
    case Op::cancel_wait: return "CANCEL_WAIT";
    case Op::ping: return "PING";
    case Op::queue_push: return "QUEUE_PUSH";
    case Op::queue_pop: return "QUEUE_POP";
    case Op::queue_len: return "QUEUE_LEN";
    case Op::list: return "LIST";
  }
  return "?";
}

std::optional<Op> op_from_byte(Dialect d, uint8_t byte) {
  if (d == Dialect::legacy) {
    if (byte < std::size(kLegacy)) return kLegacy[byte];
  } else {
    if (byte < std::size(kModern)) return kModern[byte];
  }
  return std::nullopt;
}

std::optional<uint8_t> op_to_byte(Dialect d, Op op) {
  return d == Dialect::legacy ? index_of(kLegacy, op) : index_of(kModern, op);
}

Detected detect_dialect(std::string_view b) {
  if (b.empty()) return Detected::need_more;
  if (static_cast<uint8_t>(b[0]) != 0) return Detected::legacy;
  if (b.size() < 5) return Detected::need_more;
  uint32_t magic;
  std::memcpy(&magic, b.data() + 1, 4);
  return magic == kValidateMagic ? Detected::modern : Detected::legacy;
}

static Decoded decode_request_pass(Dialect d, std::string_view buf, const Limits& limits,
                                   bool copy);

// Checks first without copying, so a request still arriving (need_more) or a bad one costs no
// copy of its payload; only a complete request is decoded for real.
Decoded decode_request(Dialect d, std::string_view buf, const Limits& limits) {
  Decoded scan = decode_request_pass(d, buf, limits, false);
  if (scan.status != Status::ok) return scan;
  return decode_request_pass(d, buf, limits, true);
}

Decoded decode_request(Dialect d, std::string_view buf, const Limits& limits,
                       std::size_t lazy_keys, std::size_t lazy_bytes) {
  Decoded scan = decode_request_pass(d, buf, limits, false);
  if (scan.status != Status::ok) return scan;
  auto op = scan.request.op;
  bool list = op == Op::check || op == Op::wait || op == Op::multi_get || op == Op::multi_set;
  if (list && (scan.count > lazy_keys || scan.consumed > lazy_bytes)) {
    scan.lazy = true;
    scan.body_at = 1 + 8;  // opcode, then the key count
    scan.request.keys.clear();
    scan.request.values.clear();
    return scan;
  }
  return decode_request_pass(d, buf, limits, true);
}

void decode_slice(Op op, std::string_view body, std::size_t& pos, std::size_t max_keys,
                  std::size_t max_bytes, Request& into) {
  Limits any{SIZE_MAX, SIZE_MAX, SIZE_MAX};
  Cursor c(body.substr(pos), any, true);
  std::size_t start = pos;
  for (std::size_t i = 0; i < max_keys && c.ok() && c.pos() < body.size() - start; ++i) {
    if (i > 0 && c.pos() >= max_bytes) break;
    into.keys.push_back(c.key());
    if (op == Op::multi_set) into.values.push_back(c.value());
  }
  pos = start + c.pos();
}

static Decoded decode_request_pass(Dialect d, std::string_view buf, const Limits& limits,
                                   bool copy) {
  Decoded r;
  if (buf.empty()) return r;
  auto op = op_from_byte(d, static_cast<uint8_t>(buf[0]));
  if (!op) {
    r.status = Status::error;
    r.error = "unknown opcode " + std::to_string(static_cast<uint8_t>(buf[0])) + " in the " +
              to_string(d) + " dialect";
    return r;
  }
  r.request.op = *op;
  Cursor c(buf.substr(1), limits, copy);
  auto& req = r.request;
  switch (*op) {
    case Op::validate:
    case Op::ping:
      req.u32 = c.scalar<uint32_t>();
      break;
    case Op::set:
    case Op::append:
    case Op::queue_push:
      req.keys.push_back(c.key());
      req.values.push_back(c.value());
      break;
    case Op::compare_set:
      req.keys.push_back(c.key());
      req.values.push_back(c.value());
      req.values.push_back(c.value());
      break;
    case Op::get:
    case Op::watch_key:
    case Op::delete_key:
    case Op::queue_pop:
    case Op::queue_len:
      req.keys.push_back(c.key());
      break;
    case Op::add:
      req.keys.push_back(c.key());
      req.delta = c.scalar<int64_t>();
      break;
    case Op::check:
    case Op::wait:
    case Op::multi_get: {
      std::size_t n = r.count = c.count();
      if (copy) req.keys.reserve(n);
      for (std::size_t i = 0; i < n && c.ok(); ++i) {
        auto k = c.key();
        if (copy) req.keys.push_back(std::move(k));
      }
      break;
    }
    case Op::multi_set: {
      std::size_t n = r.count = c.count();
      if (copy) {
        req.keys.reserve(n);
        req.values.reserve(n);
      }
      for (std::size_t i = 0; i < n && c.ok(); ++i) {
        auto k = c.key();
        auto v = c.value();
        if (copy) {
          req.keys.push_back(std::move(k));
          req.values.push_back(std::move(v));
        }
      }
      break;
    }
    case Op::num_keys:
    case Op::cancel_wait:
    case Op::list:
      break;
  }
  r = finish(c, std::move(r));
  if (r.status == Status::ok) r.consumed += 1;  // the opcode byte
  else if (r.status == Status::need_more) r.request = Request{};
  return r;
}

void encode_request(Dialect d, const Request& req, std::string& out) {
  auto byte = op_to_byte(d, req.op);
  if (!byte)
    throw std::invalid_argument(std::string("op ") + to_string(req.op) + " does not exist in the " +
                                to_string(d) + " dialect");
  auto need = [&](std::size_t keys, std::size_t values) {
    if (req.keys.size() != keys || req.values.size() != values)
      throw std::invalid_argument(std::string(to_string(req.op)) + " needs " +
                                  std::to_string(keys) + " key(s) and " + std::to_string(values) +
                                  " value(s)");
  };
  put_u8(out, *byte);
  switch (req.op) {
    case Op::validate:
    case Op::ping:
      put_u32(out, req.u32);
      break;
    case Op::set:
    case Op::append:
    case Op::queue_push:
      need(1, 1);
      put_bytes(out, req.keys[0]);
      put_bytes(out, req.values[0]);
      break;
    case Op::compare_set:
      need(1, 2);
      put_bytes(out, req.keys[0]);
      put_bytes(out, req.values[0]);
      put_bytes(out, req.values[1]);
      break;
    case Op::get:
    case Op::watch_key:
    case Op::delete_key:
    case Op::queue_pop:
    case Op::queue_len:
      need(1, 0);
      put_bytes(out, req.keys[0]);
      break;
    case Op::add:
      need(1, 0);
      put_bytes(out, req.keys[0]);
      put_i64(out, req.delta);
      break;
    case Op::check:
    case Op::wait:
    case Op::multi_get:
      put_u64(out, req.keys.size());
      for (const auto& k : req.keys) put_bytes(out, k);
      break;
    case Op::multi_set:
      need(req.keys.size(), req.keys.size());
      put_i64(out, static_cast<int64_t>(req.keys.size()));
      for (std::size_t i = 0; i < req.keys.size(); ++i) {
        put_bytes(out, req.keys[i]);
        put_bytes(out, req.values[i]);
      }
      break;
    case Op::num_keys:
    case Op::cancel_wait:
    case Op::list:
      break;
  }
}

bool has_reply(Op op) {
  switch (op) {
    case Op::validate:
    case Op::set:
    case Op::append:
    case Op::multi_set:
    case Op::queue_push:
      return false;
    default:
      return true;
  }
}

DecodedReply decode_reply(const Request& req, std::string_view buf, const Limits& limits) {
  DecodedReply r;
  Cursor c(buf, limits);
  auto& rep = r.reply;
  switch (req.op) {
    case Op::check:
    case Op::wait:
    case Op::cancel_wait:
    case Op::watch_key:
      rep.byte = c.scalar<uint8_t>();
      break;
    case Op::add:
    case Op::num_keys:
    case Op::delete_key:
    case Op::queue_len:
      rep.number = c.scalar<int64_t>();
      break;
    case Op::ping:
      rep.u32 = c.scalar<uint32_t>();
      break;
    case Op::get:
    case Op::compare_set:
      rep.values.push_back(c.value());
      break;
    case Op::multi_get:
      for (std::size_t i = 0; i < req.keys.size() && c.ok(); ++i) rep.values.push_back(c.value());
      break;
    case Op::queue_pop:
      rep.number = c.scalar<int64_t>();
      if (c.ok() && rep.number > 0) rep.values.push_back(c.value());
      break;
    case Op::list: {
      int64_t n = c.scalar<int64_t>();
      if (c.ok() && (n < 0 || static_cast<uint64_t>(n) > limits.max_keys))
        c.fail("LIST reply count " + std::to_string(n) + " is out of range");
      for (int64_t i = 0; i < n && c.ok(); ++i) rep.values.push_back(c.key());
      break;
    }
    case Op::validate:
    case Op::set:
    case Op::append:
    case Op::multi_set:
    case Op::queue_push:
      break;  // no reply
  }
  r = finish(c, std::move(r));
  if (r.status == Status::need_more) r.reply = Reply{};
  return r;
}

void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
void put_u32(std::string& out, uint32_t v) { put_raw(out, &v, sizeof v); }
void put_i64(std::string& out, int64_t v) { put_raw(out, &v, sizeof v); }
void put_u64(std::string& out, uint64_t v) { put_raw(out, &v, sizeof v); }
void put_bytes(std::string& out, std::string_view bytes) {
  put_u64(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

}  // namespace ncclsmoke::rendezvous::wire
