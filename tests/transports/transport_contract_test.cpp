// One contract suite for every backend that can run as threads of one process (gloo's pattern:
// every algorithm on every transport and size): correct sums for odd counts and world sizes
// 2, 3, 4, in-place and out-of-place, float32 and bfloat16; the sweep's data check catches a
// corrupted reduction; a peer that goes away ends in peer_lost/timeout, not a hang.
#include <gtest/gtest.h>

#include <thread>

#include "transports/reduce.h"
#include "transports/registry.h"
#include "transports/sweep.h"
#include "tests/transports/rank_world.h"
#include "tests/wait_until.h"

namespace ncclsmoke::transports {
namespace {

using namespace std::chrono_literals;

struct BackendCase {
  std::string label;
  std::string backend;
  std::map<std::string, std::string> options;
};

std::vector<BackendCase> cases() {
  return {{"socket", "socket", {}},
          {"socket_2conn", "socket", {{"socket.nconn", "2"}, {"socket.chunk", "65536"}}},
          {"fabric_tcp", "fabric", {{"fabric.provider", "tcp"}}},
          {"fabric_udp", "fabric", {{"fabric.provider", "udp"}}}};
}

// n ranks of the case's backend (rank_world.h), opened within 20 s.
class World : public testing::RankWorld {
 public:
  World(const BackendCase& c, int n)
      : RankWorld(n, c.backend, find_backend(c.backend)->make, c.options, 20s) {}
};

struct Param {
  BackendCase backend;
  int world;
};

class TransportContract : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const BackendInfo* b = find_backend(GetParam().backend.backend);
    if (!b || !b->make)
      GTEST_SKIP() << GetParam().backend.backend << " is not built into this binary: "
                   << (b ? b->why_missing : "unknown backend");
  }
};

TEST_P(TransportContract, SumsAreCorrectForOddCountsBothPlacesAndTypes) {
  World w(GetParam().backend, GetParam().world);
  for (DType dtype : {DType::float32, DType::bfloat16}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{4099},
                              (std::size_t{1} << 18) + 3}) {
      for (bool in_place : {false, true}) {
        std::vector<int64_t> wrong(w.n, -1);
        w.each([&](int r) {
          std::vector<unsigned char> send(count * dtype_size(dtype)), recv(send.size(), 0xFF);
          fill_input(send.data(), count, dtype, r);
          void* out = in_place ? send.data() : recv.data();
          w.ts[r]->allreduce(send.data(), out, count, dtype, ReduceOp::sum,
                              rendezvous::deadline_after(20s));
          wrong[r] = count_wrong(out, count, dtype, w.n);
        });
        for (int r = 0; r < w.n; ++r)
          EXPECT_EQ(wrong[r], 0) << "rank " << r << " count " << count << " " << to_string(dtype)
                                 << (in_place ? " in-place" : " out-of-place");
      }
    }
  }
}

TEST_P(TransportContract, SweepMeasuresEverySizeWithNoWrongElements) {
  World w(GetParam().backend, GetParam().world);
  SweepOptions o;
  o.min_bytes = 4096;
  o.max_bytes = 256 * 1024;
  o.factor = 4;
  o.iters = 2;
  o.warmup_iters = 1;
  o.gate_bytes = 64 * 1024;
  std::vector<SweepResult> results(w.n);
  w.each([&](int r) {
    results[r] = run_sweep(*w.ts[r], w.ctxs[r], *w.store, o, rendezvous::deadline_after(30s));
  });
  ASSERT_EQ(results[0].rows.size(), sweep_sizes(o).size() * 2);
  int gates = 0;
  for (const auto& row : results[0].rows) {
    EXPECT_EQ(row.wrong, 0);
    EXPECT_GT(row.busbw_gbps, 0);
    EXPECT_EQ(row.rank_time_us.size(), static_cast<std::size_t>(w.n));
    gates += row.gate;
  }
  EXPECT_EQ(gates, 1);
  EXPECT_TRUE(results[0].complete);
}

// Wraps a backend and corrupts `bad` elements of the result on one rank.
class Corrupting : public Transport {
 public:
  Corrupting(Transport& inner, bool active) : inner_(inner), active_(active) {}
  std::string name() const override { return inner_.name(); }
  void open(const TransportContext& c, Deadline d) override { inner_.open(c, d); }
  void allreduce(const void* s, void* r, std::size_t n, DType t, ReduceOp op,
                 Deadline d) override {
    inner_.allreduce(s, r, n, t, op, d);
    if (active_ && t == DType::float32 && n > 10) {
      auto* p = static_cast<float*>(r);
      p[3] += 1.0f;
      p[n - 1] = -7.0f;
    }
  }
  nlohmann::json identify() override { return inner_.identify(); }

 private:
  Transport& inner_;
  bool active_;
};

TEST_P(TransportContract, TheDataCheckCatchesACorruptedReduction) {
  World w(GetParam().backend, GetParam().world);
  SweepOptions o;
  o.min_bytes = o.max_bytes = o.gate_bytes = 64 * 1024;
  o.iters = 1;
  o.warmup_iters = 0;
  std::vector<SweepResult> results(w.n);
  const int bad_rank = w.n - 1;
  w.each([&](int r) {
    Corrupting c(*w.ts[r], r == bad_rank);
    results[r] = run_sweep(c, w.ctxs[r], *w.store, o, rendezvous::deadline_after(30s));
  });
  for (const auto& row : results[0].rows) {
    EXPECT_EQ(row.wrong, 2);
    EXPECT_EQ(row.rank_wrong[bad_rank], 2);
    for (int r = 0; r < bad_rank; ++r) EXPECT_EQ(row.rank_wrong[r], 0);
  }
}

TEST_P(TransportContract, APeerThatGoesAwayEndsInAnErrorBeforeTheDeadline) {
  World w(GetParam().backend, GetParam().world);
  const int gone = 1;
  const std::size_t count = 1 << 20;
  auto start = rendezvous::Clock::now();
  std::vector<ErrorKind> kinds(w.n, ErrorKind::other);
  std::vector<bool> threw(w.n, false);
  w.each([&](int r) {
    if (r == gone) {
      ncclsmoke::testing::pause_for(100ms);  // goes away mid-collective: the test's fault
      w.ts[r]->close();  // as if the process died: its connections close
      return;
    }
    std::vector<float> buf(count, 1.0f);
    try {
      // A connectionless backend (fabric's RDM endpoints) learns of the loss only at the
      // deadline: 0.5 s is well past the peer's going (0.1 s) and keeps the case short.
      w.ts[r]->allreduce(buf.data(), buf.data(), count, DType::float32, ReduceOp::sum,
                          rendezvous::deadline_after(500ms));
    } catch (const TransportError& e) {
      threw[r] = true;
      kinds[r] = e.kind();
    }
  });
  EXPECT_LT(rendezvous::Clock::now() - start, 8s);
  for (int r = 0; r < w.n; ++r) {
    if (r == gone) continue;
    EXPECT_TRUE(threw[r]) << "rank " << r << " returned from an all-reduce missing a peer";
    EXPECT_TRUE(kinds[r] == ErrorKind::peer_lost || kinds[r] == ErrorKind::timeout)
        << "rank " << r << ": " << to_string(kinds[r]);
  }
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const auto& c : cases())
    for (int n : {2, 3, 4}) out.push_back({c, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllBackends, TransportContract, ::testing::ValuesIn(params()),
                         [](const auto& info) {
                           return info.param.backend.label + "_world" +
                                  std::to_string(info.param.world);
                         });

TEST(SweepMath, SizesGateAndBusbwFactor) {
  SweepOptions o;
  o.min_bytes = 1 << 20;
  o.max_bytes = 64 << 20;
  auto sizes = sweep_sizes(o);
  ASSERT_EQ(sizes.size(), 7u);
  EXPECT_EQ(sizes.front(), 1u << 20);
  EXPECT_EQ(sizes.back(), 64u << 20);
  o.gate_bytes = 40 << 20;
  EXPECT_EQ(gate_size(o), 32u << 20);
  EXPECT_DOUBLE_EQ(allreduce_busbw_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw_factor(4), 1.5);
  o.min_bytes = 3;  // below one float: rounded up to one element
  o.max_bytes = 3;
  EXPECT_EQ(sweep_sizes(o), std::vector<std::size_t>{4});
}

TEST(SweepMath, DataPatternSumsAreExactAndWrongOnesAreCounted) {
  for (DType d : {DType::float32, DType::bfloat16}) {
    const int n = 5;
    const std::size_t count = 1001;
    std::vector<unsigned char> acc(count * dtype_size(d)), in(acc.size());
    fill_input(acc.data(), count, d, 0);
    for (int r = 1; r < n; ++r) {
      fill_input(in.data(), count, d, r);
      reduce_sum(acc.data(), in.data(), count, d);
    }
    EXPECT_EQ(count_wrong(acc.data(), count, d, n), 0) << to_string(d);
    EXPECT_EQ(count_wrong(acc.data(), count, d, n + 1), static_cast<int64_t>(count));
  }
}

}  // namespace
}  // namespace ncclsmoke::transports
