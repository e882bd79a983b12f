#pragma once
// The rank fixture the transport tests share (socket_test, fabric_test, transport_contract_test):
// n ranks of one backend in this process, one thread each, over one in-memory store seen through
// PrefixStore("transport/<backend>"), each rank's context filled as the harness fills it (address
// 127.0.0.1, peers named "host-<k>" for the error messages).
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/deadline.h"
#include "rendezvous/memory_store.h"
#include "rendezvous/prefix_store.h"
#include "transports/transport.h"

namespace ncclsmoke::transports::testing {

using Options = std::map<std::string, std::string>;

inline TransportContext make_ctx(int rank, int n, rendezvous::Store* store, const Options& options) {
  TransportContext ctx;
  ctx.rank = rank;
  ctx.world_size = n;
  ctx.local_address = "127.0.0.1";
  ctx.store = store;
  ctx.options = options;
  for (int k = 0; k < n; ++k) ctx.hosts[k] = "host-" + std::to_string(k);
  return ctx;
}

// Runs fn(rank) on n threads and waits for all; returns each rank's exception (nullptr when it
// returned).
inline std::vector<std::exception_ptr> on_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// Rethrows the lowest rank's exception, if any.
inline void rethrow_any(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

class RankWorld {
 public:
  using Factory = std::function<std::unique_ptr<Transport>()>;
  // Makes n transports with `make` and opens them on every rank at once within `open_within`
  // (zero: leaves them closed, for a test that opens them itself).
  RankWorld(int ranks, const std::string& backend, const Factory& make, const Options& options,
            std::chrono::milliseconds open_within)
      : n(ranks) {
    inner = std::make_shared<rendezvous::MemoryStore>();
    store = std::make_shared<rendezvous::PrefixStore>("transport/" + backend, inner);
    for (int r = 0; r < n; ++r) {
      ctxs.push_back(make_ctx(r, n, store.get(), options));
      ts.push_back(make());
    }
    if (open_within.count() > 0)
      each([&](int r) { ts[r]->open(ctxs[r], rendezvous::deadline_after(open_within)); });
  }
  RankWorld(const RankWorld&) = delete;
  RankWorld& operator=(const RankWorld&) = delete;
  ~RankWorld() {
    for (auto& t : ts) t->close();
  }

  // Runs fn(rank) on every rank concurrently; once all finished, rethrows the lowest rank's
  // exception.
  void each(const std::function<void(int)>& fn) { rethrow_any(on_ranks(n, fn)); }

  int n;
  std::shared_ptr<rendezvous::MemoryStore> inner;
  std::shared_ptr<rendezvous::Store> store;
  std::vector<TransportContext> ctxs;
  std::vector<std::unique_ptr<Transport>> ts;
};

}  // namespace ncclsmoke::transports::testing
