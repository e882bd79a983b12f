// Fuzz target for the TCPStore wire codec: whatever bytes a peer sends, dialect detection and
// request/reply decoding must neither crash nor read out of bounds, and what decodes must
// re-encode to exactly the bytes consumed (so server and client agree on framing).
//
// Built two ways:
//   - with libFuzzer (tests/fuzz/run_fuzz.sh: clang -fsanitize=fuzzer,address,undefined);
//   - with -DWIRE_FUZZ_STANDALONE as a plain program: `wire_fuzz_replay` checks the golden seeds
//     and a fixed-seed stream of mutations of them; `wire_fuzz_replay FILE|DIR...` replays a
//     corpus; `wire_fuzz_replay --write-seeds DIR` writes the seed corpus for libFuzzer.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/wire.h"

namespace {

using namespace ncclsmoke::rendezvous::wire;

[[noreturn]] void fail(const char* what, Dialect d, const Request* r = nullptr) {
  std::fprintf(stderr, "wire_fuzz invariant violated: %s (dialect %s, op %s)\n", what,
               to_string(d), r ? to_string(r->op) : "-");
  std::abort();
}

bool same(const Request& a, const Request& b) {
  return a.op == b.op && a.keys == b.keys && a.values == b.values && a.delta == b.delta &&
         a.u32 == b.u32;
}

// Small limits make the over-limit paths reachable with short inputs.
Limits small_limits() {
  Limits l;
  l.max_key_bytes = 64;
  l.max_value_bytes = 256;
  l.max_keys = 8;
  return l;
}

void check_requests(Dialect d, std::string_view buf, const Limits& limits) {
  // Decode a stream of back-to-back requests, as the server does.
  std::string_view rest = buf;
  for (int i = 0; i < 64 && !rest.empty(); ++i) {
    Decoded dec = decode_request(d, rest, limits);
    if (dec.status == Status::need_more) {
      if (dec.consumed != 0) fail("need_more with consumed != 0", d);
      return;
    }
    if (dec.status == Status::error) {
      if (dec.error.empty()) fail("error without a reason", d);
      return;
    }
    if (dec.consumed == 0 || dec.consumed > rest.size()) fail("consumed out of range", d);
    const Request& req = dec.request;
    if (req.op == Op::multi_set && req.keys.size() != req.values.size())
      fail("MULTI_SET keys/values mismatch", d, &req);
    for (const auto& k : req.keys)
      if (k.size() > limits.max_key_bytes) fail("key over the limit accepted", d, &req);
    for (const auto& v : req.values)
      if (v.size() > limits.max_value_bytes) fail("value over the limit accepted", d, &req);
    // Re-encoding gives back exactly the consumed bytes, and decodes to the same request.
    std::string again;
    encode_request(d, req, again);
    if (again != rest.substr(0, dec.consumed)) fail("re-encoding differs from the input", d, &req);
    Decoded dec2 = decode_request(d, again, limits);
    if (dec2.status != Status::ok || dec2.consumed != again.size() || !same(dec2.request, req))
      fail("re-encoded request does not decode to itself", d, &req);
    // One byte short of a complete request is need_more, never an error.
    if (decode_request(d, rest.substr(0, dec.consumed - 1), limits).status != Status::need_more)
      fail("strict prefix of a request is not need_more", d, &req);
    rest.remove_prefix(dec.consumed);
  }
}

void check_replies(std::string_view buf, const Limits& limits) {
  if (buf.empty()) return;
  // The first byte picks the request the reply answers (and MULTI_GET's key count).
  static const Op ops[] = {Op::validate,   Op::set,        Op::compare_set, Op::get,
                           Op::add,        Op::check,      Op::wait,        Op::num_keys,
                           Op::watch_key,  Op::delete_key, Op::append,      Op::multi_get,
                           Op::multi_set,  Op::cancel_wait, Op::ping,       Op::queue_push,
                           Op::queue_pop,  Op::queue_len,  Op::list};
  uint8_t b = static_cast<uint8_t>(buf[0]);
  Request req;
  req.op = ops[b % std::size(ops)];
  req.keys.assign(b / std::size(ops) % 5, "/k");
  std::string_view body = buf.substr(1);
  DecodedReply rep = decode_reply(req, body, limits);
  if (rep.status == Status::ok) {
    if (rep.consumed > body.size()) fail("reply consumed out of range", Dialect::modern, &req);
    if (!has_reply(req.op) && rep.consumed != 0)
      fail("reply consumed bytes for an op without a reply", Dialect::modern, &req);
    if (req.op == Op::multi_get && rep.reply.values.size() != req.keys.size())
      fail("MULTI_GET reply count differs from the key count", Dialect::modern, &req);
    for (const auto& v : rep.reply.values)
      if (v.size() > limits.max_value_bytes)
        fail("reply value over the limit accepted", Dialect::modern, &req);
  } else if (rep.status == Status::need_more && rep.consumed != 0) {
    fail("reply need_more with consumed != 0", Dialect::modern, &req);
  }
}

void run_one(const uint8_t* data, std::size_t size) {
  std::string_view buf(reinterpret_cast<const char*>(data), size);
  Detected det = detect_dialect(buf);
  if (det == Detected::need_more && size >= 5)
    fail("detect_dialect needs more than 5 bytes", Dialect::legacy);
  if (det == Detected::modern) {
    Decoded v = decode_request(Dialect::modern, buf, Limits{});
    if (v.status != Status::ok || v.request.op != Op::validate || v.request.u32 != kValidateMagic)
      fail("modern detection without a VALIDATE", Dialect::modern);
  }
  for (Limits limits : {small_limits(), Limits{}}) {
    check_requests(Dialect::legacy, buf, limits);
    check_requests(Dialect::modern, buf, limits);
    check_replies(buf, limits);
  }
}

// Golden requests: the seed corpus, one encoded request (or a short stream) per file.
std::vector<std::string> seeds() {
  auto r = [](Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
              int64_t delta = 0, uint32_t u32 = 0) {
    Request q;
    q.op = op;
    q.keys = std::move(keys);
    q.values = std::move(values);
    q.delta = delta;
    q.u32 = u32;
    return q;
  };
  std::vector<Request> reqs = {
      r(Op::validate, {}, {}, 0, kValidateMagic), r(Op::ping, {}, {}, 0, 1234),
      r(Op::set, {"/k"}, {"v"}),                  r(Op::compare_set, {"/k"}, {"v", "w"}),
      r(Op::get, {"/k"}),                         r(Op::add, {"init/"}, {}, 1),
      r(Op::check, {"/a", "/b"}),                 r(Op::wait, {"/a"}),
      r(Op::num_keys),                            r(Op::watch_key, {"/w"}),
      r(Op::delete_key, {"/k"}),                  r(Op::append, {"/k"}, {"x"}),
      r(Op::multi_get, {"/a", "/b"}),             r(Op::multi_set, {"/a", "/b"}, {"1", "2"}),
      r(Op::cancel_wait),                         r(Op::queue_push, {"/q"}, {"item"}),
      r(Op::queue_pop, {"/q"}),                   r(Op::queue_len, {"/q"}),
      r(Op::list)};
  std::vector<std::string> out;
  for (Dialect d : {Dialect::legacy, Dialect::modern}) {
    std::string stream;
    for (const auto& q : reqs) {
      if (!op_to_byte(d, q.op)) continue;
      std::string one;
      encode_request(d, q, one);
      out.push_back(one);
      stream += one;
    }
    out.push_back(stream);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  run_one(data, size);
  return 0;
}

#ifdef WIRE_FUZZ_STANDALONE
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

namespace fs = std::filesystem;

namespace {

void run_string(const std::string& s) {
  run_one(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

int replay(const fs::path& p) {
  int n = 0;
  if (fs::is_directory(p)) {
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_regular_file()) n += replay(e.path());
    return n;
  }
  std::ifstream f(p, std::ios::binary);
  run_string(std::string(std::istreambuf_iterator<char>(f), {}));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-seeds") {
    fs::create_directories(argv[2]);
    int i = 0;
    for (const auto& s : seeds()) {
      std::ofstream f(fs::path(argv[2]) / ("seed-" + std::to_string(i++)), std::ios::binary);
      f << s;
    }
    std::printf("wrote %d seeds to %s\n", i, argv[2]);
    return 0;
  }
  if (argc > 1) {
    int n = 0;
    for (int i = 1; i < argc; ++i) n += replay(argv[i]);
    std::printf("replayed %d inputs: invariants held\n", n);
    return 0;
  }
  // No arguments: seeds, every prefix of each, and a fixed-seed stream of mutations.
  auto base = seeds();
  std::mt19937_64 rng(20240611);
  long runs = 0;
  for (const auto& s : base) {
    for (std::size_t n = 0; n <= s.size(); ++n, ++runs) run_string(s.substr(0, n));
  }
  for (int i = 0; i < 200000; ++i, ++runs) {
    std::string s = base[rng() % base.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      std::size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = static_cast<char>(rng()); break;                    // flip a byte
        case 1: s.erase(at, 1 + rng() % 8); break;                            // drop bytes
        case 2: s.insert(at, std::string(1 + rng() % 4, static_cast<char>(rng()))); break;
        default: s += base[rng() % base.size()]; break;                       // concatenate
      }
    }
    run_string(s);
  }
  std::printf("%ld inputs: invariants held\n", runs);
  return 0;
}
#endif
