// The TCPStore wire codec against golden bytes (anchors.md §1: torch's test_store.py
// TestClientProtocol and the 1.13 server's recv order), dialect detection, round trips of every
// op in both dialects, and the codec's behaviour on truncated, over-limit and unknown input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous::wire {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

std::string u64le(uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

std::string encode(Dialect d, const Request& r) {
  std::string out;
  encode_request(d, r, out);
  return out;
}

Request req(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
            int64_t delta = 0, uint32_t u32 = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  r.u32 = u32;
  return r;
}

// One representative request per op, with binary-unsafe bytes where they fit.
std::vector<Request> sample_requests() {
  std::string bin("a\0b\xff", 4);
  return {
      req(Op::validate, {}, {}, 0, kValidateMagic),
      req(Op::set, {"/k"}, {bin}),
      req(Op::set, {""}, {""}),
      req(Op::compare_set, {"/k"}, {"old", "new"}),
      req(Op::compare_set, {"/k"}, {"", "new"}),
      req(Op::get, {"/k"}),
      req(Op::add, {"init/"}, {}, 1),
      req(Op::add, {"/n"}, {}, -9'000'000'000'000'000'000LL),
      req(Op::check, {"/a", "/b"}),
      req(Op::check, {}),
      req(Op::wait, {"/a", "/b", "/c"}),
      req(Op::num_keys),
      req(Op::watch_key, {"/w"}),
      req(Op::delete_key, {"/k"}),
      req(Op::append, {"/k"}, {bin}),
      req(Op::multi_get, {"/a", "/b"}),
      req(Op::multi_set, {"/a", "/b"}, {"1", bin}),
      req(Op::cancel_wait),
      req(Op::ping, {}, {}, 0, 0xDEADBEEF),
      req(Op::queue_push, {"/q"}, {bin}),
      req(Op::queue_pop, {"/q"}),
      req(Op::queue_len, {"/q"}),
      req(Op::list),
  };
}

void expect_same(const Request& a, const Request& b) {
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.delta, b.delta);
  EXPECT_EQ(a.u32, b.u32);
}

// ---- golden bytes ------------------------------------------------------------------------------

TEST(WireGolden, ModernValidateIsExactly00CEF7853C) {
  EXPECT_EQ(encode(Dialect::modern, req(Op::validate, {}, {}, 0, kValidateMagic)),
            bytes({0x00, 0xCE, 0xF7, 0x85, 0x3C}));
}

TEST(WireGolden, ModernPingIs0DThenNonce) {
  EXPECT_EQ(encode(Dialect::modern, req(Op::ping, {}, {}, 0, 0x04030201)),
            bytes({0x0D, 0x01, 0x02, 0x03, 0x04}));
}

TEST(WireGolden, LegacySet) {
  // SET=0, uint64 key length, key, uint64 value length, value.
  EXPECT_EQ(encode(Dialect::legacy, req(Op::set, {"/k"}, {"xyz"})),
            bytes({0x00}) + u64le(2) + "/k" + u64le(3) + "xyz");
}

TEST(WireGolden, LegacyAdd) {
  EXPECT_EQ(encode(Dialect::legacy, req(Op::add, {"init/"}, {}, 1)),
            bytes({0x03}) + u64le(5) + "init/" + bytes({1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(encode(Dialect::legacy, req(Op::add, {"a"}, {}, -2)),
            bytes({0x03}) + u64le(1) + "a" + bytes({0xFE, 0xFF, 0xFF, 0xFF}) +
                bytes({0xFF, 0xFF, 0xFF, 0xFF}));
}

TEST(WireGolden, LegacyCheckAndWait) {
  EXPECT_EQ(encode(Dialect::legacy, req(Op::check, {"/a", "/bc"})),
            bytes({0x04}) + u64le(2) + u64le(2) + "/a" + u64le(3) + "/bc");
  EXPECT_EQ(encode(Dialect::legacy, req(Op::wait, {"/a"})),
            bytes({0x05}) + u64le(1) + u64le(2) + "/a");
}

TEST(WireGolden, LegacyOpcodeNumbering) {
  const std::pair<Op, int> legacy[] = {
      {Op::set, 0},        {Op::compare_set, 1}, {Op::get, 2},        {Op::add, 3},
      {Op::check, 4},      {Op::wait, 5},        {Op::num_keys, 6},   {Op::watch_key, 7},
      {Op::delete_key, 8}, {Op::append, 9},      {Op::multi_get, 10}, {Op::multi_set, 11},
      {Op::cancel_wait, 12}};
  for (auto [op, byte] : legacy) {
    EXPECT_EQ(op_to_byte(Dialect::legacy, op), byte) << to_string(op);
    EXPECT_EQ(op_from_byte(Dialect::legacy, static_cast<uint8_t>(byte)), op);
  }
  for (Op op : {Op::validate, Op::ping, Op::queue_push, Op::queue_pop, Op::queue_len, Op::list})
    EXPECT_FALSE(op_to_byte(Dialect::legacy, op).has_value()) << to_string(op);
}

TEST(WireGolden, ModernOpcodeNumbering) {
  const Op modern[] = {Op::validate,   Op::set,        Op::compare_set, Op::get,
                       Op::add,        Op::check,      Op::wait,        Op::num_keys,
                       Op::delete_key, Op::append,     Op::multi_get,   Op::multi_set,
                       Op::cancel_wait, Op::ping,      Op::queue_push,  Op::queue_pop,
                       Op::queue_len,  Op::list};
  for (std::size_t i = 0; i < std::size(modern); ++i) {
    EXPECT_EQ(op_to_byte(Dialect::modern, modern[i]), i) << to_string(modern[i]);
    EXPECT_EQ(op_from_byte(Dialect::modern, static_cast<uint8_t>(i)), modern[i]);
  }
  EXPECT_FALSE(op_to_byte(Dialect::modern, Op::watch_key).has_value());
}

TEST(WireGolden, ReplyEncoders) {
  std::string out;
  put_u8(out, kCheckNotReady);
  put_u32(out, 0x01020304);
  put_i64(out, -1);
  put_bytes(out, "hi");
  EXPECT_EQ(out, bytes({0x01, 0x04, 0x03, 0x02, 0x01}) + std::string(8, '\xff') + u64le(2) + "hi");
}

// ---- dialect detection -------------------------------------------------------------------------

TEST(WireDialect, DetectsModernFromValidate) {
  EXPECT_EQ(detect_dialect(bytes({0x00, 0xCE, 0xF7, 0x85, 0x3C})), Detected::modern);
  EXPECT_EQ(detect_dialect(bytes({0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x0D, 1, 2, 3, 4})),
            Detected::modern);
}

TEST(WireDialect, LegacySetStartsWithZeroToo) {
  std::string set = encode(Dialect::legacy, req(Op::set, {"/k"}, {"v"}));
  EXPECT_EQ(static_cast<uint8_t>(set[0]), 0);
  EXPECT_EQ(detect_dialect(set), Detected::legacy);
}

TEST(WireDialect, NeedsMoreUntilItCanTell) {
  EXPECT_EQ(detect_dialect(""), Detected::need_more);
  std::string validate = bytes({0x00, 0xCE, 0xF7, 0x85, 0x3C});
  for (std::size_t n = 1; n < 5; ++n)
    EXPECT_EQ(detect_dialect(validate.substr(0, n)), Detected::need_more) << n;
  std::string set = encode(Dialect::legacy, req(Op::set, {"/k"}, {"v"}));
  for (std::size_t n = 1; n < 5; ++n)
    EXPECT_EQ(detect_dialect(set.substr(0, n)), Detected::need_more) << n;
}

TEST(WireDialect, NonZeroFirstByteIsLegacyAtOnce) {
  EXPECT_EQ(detect_dialect(bytes({0x03})), Detected::legacy);  // ADD
  // Garbage is "legacy"; decoding it then fails.
  EXPECT_EQ(detect_dialect("GET / HTTP/1.1\r\n"), Detected::legacy);
}

TEST(WireDialect, WrongMagicIsNotModern) {
  EXPECT_EQ(detect_dialect(bytes({0x00, 0xCE, 0xF7, 0x85, 0x3D})), Detected::legacy);
}

// ---- round trips -------------------------------------------------------------------------------

TEST(WireRoundTrip, EveryOpInBothDialects) {
  Limits limits;
  for (Dialect d : {Dialect::legacy, Dialect::modern}) {
    for (const auto& r : sample_requests()) {
      SCOPED_TRACE(std::string(to_string(d)) + " " + to_string(r.op));
      if (!op_to_byte(d, r.op)) {
        std::string out;
        EXPECT_THROW(encode_request(d, r, out), std::invalid_argument);
        continue;
      }
      std::string enc = encode(d, r);
      auto dec = decode_request(d, enc, limits);
      ASSERT_EQ(dec.status, Status::ok) << dec.error;
      EXPECT_EQ(dec.consumed, enc.size());
      expect_same(dec.request, r);
    }
  }
}

TEST(WireRoundTrip, BackToBackRequestsDecodeOneAtATime) {
  Limits limits;
  std::string stream;
  auto all = sample_requests();
  std::vector<Request> sent;
  for (const auto& r : all)
    if (op_to_byte(Dialect::modern, r.op)) {
      encode_request(Dialect::modern, r, stream);
      sent.push_back(r);
    }
  std::string_view rest = stream;
  for (const auto& r : sent) {
    auto dec = decode_request(Dialect::modern, rest, limits);
    ASSERT_EQ(dec.status, Status::ok) << to_string(r.op) << ": " << dec.error;
    expect_same(dec.request, r);
    rest.remove_prefix(dec.consumed);
  }
  EXPECT_TRUE(rest.empty());
}

TEST(WireRoundTrip, EncodeRejectsMalformedRequests) {
  std::string out;
  EXPECT_THROW(encode_request(Dialect::legacy, req(Op::set, {"/k"}), out), std::invalid_argument);
  EXPECT_THROW(encode_request(Dialect::modern, req(Op::compare_set, {"/k"}, {"x"}), out),
               std::invalid_argument);
  EXPECT_THROW(encode_request(Dialect::modern, req(Op::multi_set, {"/a", "/b"}, {"1"}), out),
               std::invalid_argument);
  EXPECT_THROW(encode_request(Dialect::modern, req(Op::watch_key, {"/w"}), out),
               std::invalid_argument);
}

// ---- truncation, limits, unknown opcodes --------------------------------------------------------

TEST(WireDecode, EveryStrictPrefixNeedsMore) {
  Limits limits;
  for (Dialect d : {Dialect::legacy, Dialect::modern}) {
    for (const auto& r : sample_requests()) {
      if (!op_to_byte(d, r.op)) continue;
      std::string enc = encode(d, r);
      for (std::size_t n = 0; n < enc.size(); ++n) {
        auto dec = decode_request(d, std::string_view(enc).substr(0, n), limits);
        ASSERT_EQ(dec.status, Status::need_more)
            << to_string(d) << " " << to_string(r.op) << " prefix " << n << ": " << dec.error;
        EXPECT_EQ(dec.consumed, 0u);
      }
    }
  }
}

TEST(WireDecode, OverLimitKeyLengthIsAnErrorBeforeThePayload) {
  Limits limits;
  // SET with a key length of 2^40 and no key bytes at all: rejected from the length field.
  std::string huge = bytes({0x00}) + u64le(uint64_t{1} << 40);
  auto dec = decode_request(Dialect::legacy, huge, limits);
  EXPECT_EQ(dec.status, Status::error);
  EXPECT_NE(dec.error.find("key length"), std::string::npos) << dec.error;
  // Exactly at the limit is fine (need_more), one over is not.
  auto at = decode_request(Dialect::legacy, bytes({0x02}) + u64le(limits.max_key_bytes), limits);
  EXPECT_EQ(at.status, Status::need_more);
  auto over =
      decode_request(Dialect::legacy, bytes({0x02}) + u64le(limits.max_key_bytes + 1), limits);
  EXPECT_EQ(over.status, Status::error);
}

TEST(WireDecode, OverLimitValueAndCountAreErrors) {
  Limits limits;
  limits.max_value_bytes = 16;
  limits.max_keys = 4;
  auto v = decode_request(Dialect::modern, bytes({0x01}) + u64le(1) + "k" + u64le(17), limits);
  EXPECT_EQ(v.status, Status::error);
  EXPECT_NE(v.error.find("value length"), std::string::npos) << v.error;
  auto n = decode_request(Dialect::modern, bytes({0x06}) + u64le(5), limits);  // WAIT, 5 keys
  EXPECT_EQ(n.status, Status::error);
  EXPECT_NE(n.error.find("key count"), std::string::npos) << n.error;
  // A negative MULTI_SET count (int64 on the wire) is huge as uint64: also an error.
  auto neg = decode_request(Dialect::modern, bytes({0x0B}) + std::string(8, '\xff'), limits);
  EXPECT_EQ(neg.status, Status::error);
}

TEST(WireDecode, UnknownOpcodesAreErrors) {
  Limits limits;
  for (int b = 13; b < 256; ++b) {
    auto dec = decode_request(Dialect::legacy, bytes({b}), limits);
    EXPECT_EQ(dec.status, Status::error) << "legacy " << b;
  }
  for (int b = 18; b < 256; ++b) {
    auto dec = decode_request(Dialect::modern, bytes({b}), limits);
    EXPECT_EQ(dec.status, Status::error) << "modern " << b;
    EXPECT_NE(dec.error.find("unknown opcode"), std::string::npos);
  }
}

TEST(WireDecode, EmptyBufferNeedsMore) {
  EXPECT_EQ(decode_request(Dialect::legacy, "", Limits{}).status, Status::need_more);
  EXPECT_EQ(decode_request(Dialect::modern, "", Limits{}).status, Status::need_more);
}

// ---- replies -----------------------------------------------------------------------------------

TEST(WireReply, DecodesEachReplyShape) {
  Limits limits;
  struct Case {
    Request request;
    std::string wire;
    Reply expect;
  };
  auto rep = [](uint8_t byte, int64_t number, uint32_t u32, std::vector<std::string> values) {
    Reply r;
    r.byte = byte;
    r.number = number;
    r.u32 = u32;
    r.values = std::move(values);
    return r;
  };
  std::string two_values = u64le(1) + "x" + u64le(0);
  std::vector<Case> cases = {
      {req(Op::check, {"/a"}), bytes({1}), rep(kCheckNotReady, 0, 0, {})},
      {req(Op::wait, {"/a"}), bytes({0}), rep(kWaitStop, 0, 0, {})},
      {req(Op::cancel_wait), bytes({1}), rep(kWaitCanceled, 0, 0, {})},
      {req(Op::watch_key, {"/w"}), bytes({3}), rep(3, 0, 0, {})},
      {req(Op::add, {"/n"}, {}, 2), u64le(42), rep(0, 42, 0, {})},
      {req(Op::num_keys), u64le(7), rep(0, 7, 0, {})},
      {req(Op::delete_key, {"/k"}), u64le(1), rep(0, 1, 0, {})},
      {req(Op::queue_len, {"/q"}), u64le(3), rep(0, 3, 0, {})},
      {req(Op::ping, {}, {}, 0, 9), bytes({9, 0, 0, 0}), rep(0, 0, 9, {})},
      {req(Op::get, {"/k"}), u64le(3) + "val", rep(0, 0, 0, {"val"})},
      {req(Op::compare_set, {"/k"}, {"a", "b"}), u64le(1) + "b", rep(0, 0, 0, {"b"})},
      {req(Op::multi_get, {"/a", "/b"}), two_values, rep(0, 0, 0, {"x", ""})},
      {req(Op::queue_pop, {"/q"}), u64le(0), rep(0, 0, 0, {})},
      {req(Op::queue_pop, {"/q"}), u64le(2) + u64le(2) + "hi", rep(0, 2, 0, {"hi"})},
      {req(Op::list), u64le(2) + u64le(2) + "/a" + u64le(5) + "init/",
       rep(0, 0, 0, {"/a", "init/"})},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(to_string(c.request.op));
    auto dec = decode_reply(c.request, c.wire, limits);
    ASSERT_EQ(dec.status, Status::ok) << dec.error;
    EXPECT_EQ(dec.consumed, c.wire.size());
    EXPECT_EQ(dec.reply.byte, c.expect.byte);
    EXPECT_EQ(dec.reply.number, c.expect.number);
    EXPECT_EQ(dec.reply.u32, c.expect.u32);
    EXPECT_EQ(dec.reply.values, c.expect.values);
    for (std::size_t n = 0; n < c.wire.size(); ++n)
      EXPECT_EQ(decode_reply(c.request, std::string_view(c.wire).substr(0, n), limits).status,
                Status::need_more)
          << "prefix " << n;
  }
}

TEST(WireReply, OpsWithoutReplies) {
  for (Op op : {Op::validate, Op::set, Op::append, Op::multi_set, Op::queue_push})
    EXPECT_FALSE(has_reply(op)) << to_string(op);
  for (Op op : {Op::get, Op::add, Op::check, Op::wait, Op::ping, Op::list, Op::cancel_wait})
    EXPECT_TRUE(has_reply(op)) << to_string(op);
  auto dec = decode_reply(req(Op::set, {"/k"}, {"v"}), "", Limits{});
  EXPECT_EQ(dec.status, Status::ok);
  EXPECT_EQ(dec.consumed, 0u);
}

TEST(WireReply, OverLimitReplyValueAndListCountAreErrors) {
  Limits limits;
  limits.max_value_bytes = 8;
  auto get = decode_reply(req(Op::get, {"/k"}), u64le(9), limits);
  EXPECT_EQ(get.status, Status::error);
  auto list = decode_reply(req(Op::list), std::string(8, '\xff'), limits);  // n = -1
  EXPECT_EQ(list.status, Status::error);
}

}  // namespace
}  // namespace ncclsmoke::rendezvous::wire
