// Micro-benchmarks of the TCPStore wire codec (rendezvous/wire.h): encode_request and
// decode_request for the ops a rendezvous is made of, in both dialects, and decode_reply of GET.
// bytes_per_second counts encoded request (or reply) bytes; items_per_second counts whole requests
// (a 64-key WAIT is one item). Run: build/wire_codec_bench [--benchmark_format=json].
#include <benchmark/benchmark.h>

#include <string>

#include "rendezvous/wire.h"

namespace {

namespace wire = ncclsmoke::rendezvous::wire;

wire::Request make_set(std::size_t value_bytes) {
  wire::Request r;
  r.op = wire::Op::set;
  r.keys = {"/default_pg/0/store_based_barrier_key/1"};
  r.values = {std::string(value_bytes, 'x')};
  return r;
}

wire::Request make_add() {
  wire::Request r;
  r.op = wire::Op::add;
  r.keys = {"/default_pg/0/store_based_barrier_key/1"};
  r.delta = 1;
  return r;
}

wire::Request make_wait(int keys) {
  wire::Request r;
  r.op = wire::Op::wait;
  for (int i = 0; i < keys; ++i) r.keys.push_back("/rank/" + std::to_string(i) + "/addr");
  return r;
}

wire::Request make_multi_set(int keys, std::size_t value_bytes) {
  wire::Request r;
  r.op = wire::Op::multi_set;
  for (int i = 0; i < keys; ++i) {
    r.keys.push_back("/rank/" + std::to_string(i) + "/addr");
    r.values.push_back(std::string(value_bytes, 'a'));
  }
  return r;
}

enum Which { kSet, kAdd, kWait, kMultiSet };

wire::Request build(const benchmark::State& s, Which which) {
  switch (which) {
    case kSet: return make_set(static_cast<std::size_t>(s.range(0)));
    case kAdd: return make_add();
    case kWait: return make_wait(static_cast<int>(s.range(0)));
    case kMultiSet: break;
  }
  return make_multi_set(static_cast<int>(s.range(0)), 64);
}

void BM_Encode(benchmark::State& state, wire::Dialect d, Which which) {
  auto req = build(state, which);
  std::string out;
  wire::encode_request(d, req, out);
  const auto bytes = out.size();
  for (auto _ : state) {
    out.clear();
    wire::encode_request(d, req, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(state.iterations());
}

void BM_Decode(benchmark::State& state, wire::Dialect d, Which which) {
  auto req = build(state, which);
  std::string buf;
  wire::encode_request(d, req, buf);
  wire::Limits limits;
  auto check = wire::decode_request(d, buf, limits);
  if (check.status != wire::Status::ok || check.consumed != buf.size()) {
    state.SkipWithError("decode_request did not round-trip the encoded request");
    return;
  }
  for (auto _ : state) {
    auto r = wire::decode_request(d, buf, limits);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
  state.SetItemsProcessed(state.iterations());
}

// Names read BM_Encode/<op>_<dialect>/<arg>:<n>.
#define BOTH_DIALECTS(op, which, argname, ...)                                              \
  BENCHMARK_CAPTURE(BM_Encode, op##_legacy, wire::Dialect::legacy, which)                  \
      ->ArgName(argname)->Args({__VA_ARGS__});                                             \
  BENCHMARK_CAPTURE(BM_Encode, op##_modern, wire::Dialect::modern, which)                  \
      ->ArgName(argname)->Args({__VA_ARGS__});                                             \
  BENCHMARK_CAPTURE(BM_Decode, op##_legacy, wire::Dialect::legacy, which)                  \
      ->ArgName(argname)->Args({__VA_ARGS__});                                             \
  BENCHMARK_CAPTURE(BM_Decode, op##_modern, wire::Dialect::modern, which)                  \
      ->ArgName(argname)->Args({__VA_ARGS__})

BOTH_DIALECTS(set, kSet, "value_bytes", 16);
BOTH_DIALECTS(set, kSet, "value_bytes", 64 << 10);
BOTH_DIALECTS(add, kAdd, "keys", 1);
BOTH_DIALECTS(wait, kWait, "keys", 1);
BOTH_DIALECTS(wait, kWait, "keys", 64);
BOTH_DIALECTS(multi_set, kMultiSet, "keys", 64);

// The reply to GET is the same in both dialects: uint64 length + value bytes.
void BM_DecodeReplyGet(benchmark::State& state) {
  wire::Request req;
  req.op = wire::Op::get;
  req.keys = {"/default_pg/0/0"};
  std::string buf;
  wire::put_bytes(buf, std::string(static_cast<std::size_t>(state.range(0)), 'u'));
  wire::Limits limits;
  if (wire::decode_reply(req, buf, limits).status != wire::Status::ok) {
    state.SkipWithError("decode_reply rejected a well-formed GET reply");
    return;
  }
  for (auto _ : state) {
    auto r = wire::decode_reply(req, buf, limits);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeReplyGet)->ArgName("bytes")->Arg(16)->Arg(128)->Arg(64 << 10);

}  // namespace

BENCHMARK_MAIN();
