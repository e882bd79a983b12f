#pragma once
// The c10d TCPStore wire protocol, both dialects, as a pure codec (no sockets): the server, the
// client, the fuzz target and the benchmarks all go through these functions.
//
// Framing: none. A request is one opcode byte followed by that op's arguments; replies come back
// in order on the same connection. Integers are little-endian (torch sends host order; every
// platform it ships on is little-endian). Keys and values are a uint64 length then the bytes.
//
// Dialects (FACTS.md; research/anchors.md §1.3):
//   legacy  torch <= 2.0 (Debian's 1.13): SET=0 ... DELETE_KEY=8, WATCH_KEY=7, no handshake.
//           The post-2.0 ops APPEND..CANCEL_WAIT (9..12) are accepted as an extension.
//   modern  torch >= 2.1: the connection starts with VALIDATE (00 CE F7 85 3C), then PING.
//           SET=1 ... LIST=17, including the libuv queue ops.
// A server detects the dialect from a connection's first bytes (detect_dialect); a client must be
// told or negotiate (dialect_probe.h): a 1.13 server reads a bare VALIDATE as a SET whose key
// length is still incomplete and stalls its whole store; VALIDATE followed by at least 4 more
// bytes makes it reset that one connection.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclsmoke::rendezvous::wire {

enum class Dialect { legacy, modern };
const char* to_string(Dialect d);

enum class Op : uint8_t {
  validate,
  set,
  compare_set,
  get,
  add,
  check,
  wait,
  num_keys,
  watch_key,  // legacy only; answered with an error close (see server)
  delete_key,
  append,
  multi_get,
  multi_set,
  cancel_wait,
  ping,
  queue_push,
  queue_pop,
  queue_len,
  list,
};
const char* to_string(Op op);

// Opcode byte <-> op for a dialect; nullopt when the dialect has no such op/byte.
std::optional<Op> op_from_byte(Dialect d, uint8_t byte);
std::optional<uint8_t> op_to_byte(Dialect d, Op op);

inline constexpr uint32_t kValidateMagic = 0x3C85F7CE;

// Reply bytes for CHECK and WAIT / CANCEL_WAIT.
inline constexpr uint8_t kCheckReady = 0, kCheckNotReady = 1;
inline constexpr uint8_t kWaitStop = 0, kWaitCanceled = 1;

// Bounds that keep a server's memory bounded against garbage: the libuv server's limits
// (torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp, pytorch/pytorch: MAX_STRING_LEN 8 KiB,
// MAX_PAYLOAD_LEN 8 MiB, MAX_KEY_COUNT 128 Ki keys per request), checked before any payload byte
// is awaited.
struct Limits {
  std::size_t max_key_bytes = 8 * 1024;
  std::size_t max_value_bytes = 8 * 1024 * 1024;
  std::size_t max_keys = 128 * 1024;  // per CHECK / WAIT / MULTI_GET / MULTI_SET
};

struct Request {
  Op op = Op::set;
  std::vector<std::string> keys;    // SET..QUEUE_LEN: the key(s)
  std::vector<std::string> values;  // SET/APPEND/QUEUE_PUSH: [value]; COMPARE_SET: [expected,
                                    // desired]; MULTI_SET: one per key
  int64_t delta = 0;                // ADD
  uint32_t u32 = 0;                 // VALIDATE magic, PING nonce
};

enum class Status { need_more, ok, error };

struct Decoded {
  Status status = Status::need_more;
  std::size_t consumed = 0;  // bytes of the request, when ok
  Request request;
  std::string error;  // when error: why, for the log line that closes the connection
  // A lazy decode (decode_request's lazy_from): the request is complete and valid but its keys
  // (and MULTI_SET's values) were not copied; they start at byte `body_at` of the request and
  // number `count`, for decode_slice.
  bool lazy = false;
  std::size_t body_at = 0;
  std::size_t count = 0;
};

// Which dialect a connection speaks, from its first bytes. need_more until it can tell (at most
// 5 bytes are needed: a first byte 0 may be legacy SET or modern VALIDATE + magic).
enum class Detected { need_more, legacy, modern };
Detected detect_dialect(std::string_view first_bytes);

// Decodes one request from the front of `buf`. Length fields are checked against `limits`
// before any byte of the payload is awaited, so garbage never makes the caller buffer more than
// one bounded request.
Decoded decode_request(Dialect d, std::string_view buf, const Limits& limits);
// The same, but a CHECK / WAIT / MULTI_GET / MULTI_SET of more than `lazy_keys` keys or more than
// `lazy_bytes` bytes is only checked, not copied (Decoded::lazy): a server runs such a request a
// slice at a time from its own buffer instead of copying 128 Ki keys in one go.
Decoded decode_request(Dialect d, std::string_view buf, const Limits& limits,
                       std::size_t lazy_keys, std::size_t lazy_bytes);
// Appends the next keys (MULTI_SET: key and value) of a lazy request's body to `into`, starting
// at `pos` in `body` and advancing it: at most `max_keys`, and no more once `max_bytes` were taken
// (at least one). The body was checked by decode_request, so this cannot fail.
void decode_slice(Op op, std::string_view body, std::size_t& pos, std::size_t max_keys,
                  std::size_t max_bytes, Request& into);

// Appends the encoded request to `out`. Throws std::invalid_argument when the op does not exist
// in the dialect or the request's fields do not fit the op.
void encode_request(Dialect d, const Request& req, std::string& out);

// Whether the server answers this op (SET, APPEND, MULTI_SET, QUEUE_PUSH, VALIDATE don't).
bool has_reply(Op op);

struct Reply {
  uint8_t byte = 0;                 // CHECK, WAIT, CANCEL_WAIT
  int64_t number = 0;               // ADD, GETNUMKEYS, DELETE_KEY, QUEUE_LEN, QUEUE_POP (length)
  uint32_t u32 = 0;                 // PING
  std::vector<std::string> values;  // GET, COMPARE_SET: [value]; MULTI_GET: one per key;
                                    // QUEUE_POP: [value] when number > 0; LIST: the keys
};

struct DecodedReply {
  Status status = Status::need_more;
  std::size_t consumed = 0;
  Reply reply;
  std::string error;
};

// Decodes the reply to `req` from the front of `buf` (MULTI_GET needs the request's key count).
DecodedReply decode_reply(const Request& req, std::string_view buf, const Limits& limits);

// Reply encoders for the server: append to `out`.
void put_u8(std::string& out, uint8_t v);
void put_u32(std::string& out, uint32_t v);
void put_i64(std::string& out, int64_t v);
void put_u64(std::string& out, uint64_t v);
void put_bytes(std::string& out, std::string_view bytes);  // uint64 length + bytes

}  // namespace ncclsmoke::rendezvous::wire
