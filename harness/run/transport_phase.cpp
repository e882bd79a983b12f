#include "harness/run/transport_phase.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <set>

#include "harness/common/env.h"
#include "rendezvous/prefix_store.h"
#include "results/verdict/phase_id.h"
#include "transports/registry.h"

namespace ncclsmoke::harness {
namespace {

using namespace ncclsmoke::transports;
using rendezvous::Clock;
using rendezvous::Millis;

using rendezvous::seconds_text;

// The transport's view of the store: each operation first asks whether the store is known to be
// frozen or dead (TransportPhaseInput::store_unusable) and fails at once if so.
class GuardedStore final : public rendezvous::Store {
 public:
  GuardedStore(rendezvous::Store& inner, std::function<std::string()> unusable)
      : inner_(inner), unusable_(std::move(unusable)) {}
  void set(const std::string& k, const std::string& v) override { guard(), inner_.set(k, v); }
  std::string get(const std::string& k, rendezvous::Deadline d) override {
    return guard(), inner_.get(k, d);
  }
  int64_t add(const std::string& k, int64_t d) override { return guard(), inner_.add(k, d); }
  bool check(const std::vector<std::string>& k) override { return guard(), inner_.check(k); }
  void wait(const std::vector<std::string>& k, rendezvous::Deadline d) override {
    guard(), inner_.wait(k, d);
  }
  std::string compare_set(const std::string& k, const std::string& e,
                          const std::string& v) override {
    return guard(), inner_.compare_set(k, e, v);
  }
  bool delete_key(const std::string& k) override { return guard(), inner_.delete_key(k); }
  int64_t num_keys() override { return guard(), inner_.num_keys(); }
  void append(const std::string& k, const std::string& v) override { guard(), inner_.append(k, v); }
  std::vector<std::string> multi_get(const std::vector<std::string>& k,
                                     rendezvous::Deadline d) override {
    return guard(), inner_.multi_get(k, d);
  }
  void multi_set(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    guard(), inner_.multi_set(k, v);
  }

 private:
  int guard() const {
    if (unusable_) {
      std::string why = unusable_();
      if (!why.empty()) throw rendezvous::StoreError(rendezvous::ErrorClass::stalled, why);
    }
    return 0;
  }
  rendezvous::Store& inner_;
  std::function<std::string()> unusable_;
};

}  // namespace

void test_pause_point(const std::string& point, int rank) {
  static std::atomic<bool> paused{false};
  const auto at = env("NCCLSMOKE_TEST_PAUSE_AT");
  if (!at || point != *at || paused.exchange(true)) return;
  std::fprintf(stderr, "ncclsmoke: test hook: rank %d stops itself at %s\n", rank, point.c_str());
  std::fflush(stderr);
  std::raise(SIGSTOP);
}

std::vector<transports::TransportOutcome> measure_transports(const TransportPhaseInput& in,
                                                            const TransportPhaseOptions& o) {
  std::vector<TransportOutcome> out;
  for (const auto& name : o.transports) {
    auto t0 = Clock::now();
    TransportOutcome& oc = out.emplace_back();
    oc.name = name;
    const BackendInfo* backend = find_backend(name);
    if (!backend || !backend->make) {
      oc.not_built = backend ? backend->why_missing : "no transport of that name";
      continue;
    }
    if (Clock::now() >= o.run_limit) {
      oc.not_started = "the run reached its --timeout before this transport started";
      continue;
    }
    auto own = Clock::now() + Millis(static_cast<long long>(o.timeout_s * 1000));
    oc.run_deadline_bound = o.run_limit < own;
    auto deadline = std::min(own, o.run_limit);
    GuardedStore guarded(*in.store, in.store_unusable);
    rendezvous::PrefixStore store("transport/" + name, guarded);
    TransportContext ctx;
    ctx.rank = in.rank;
    ctx.world_size = in.world_size;
    ctx.hosts = in.hosts;
    ctx.ranks_on_host = ranks_on_host(in.hosts, in.rank);
    ctx.local_address = in.local_address;
    ctx.store = &store;
    ctx.options = o.backend_options;
    const std::string phase = results::transport_phase_name(name);
    Clock::time_point sweep_start{};
    bool pause_in_sweep = out.size() == 1 && env("NCCLSMOKE_TEST_PAUSE_AT").has_value();
    if (in.set_wait_state || pause_in_sweep)
      ctx.set_wait_state = [&, phase](int peer, const std::string& what) {
        if (pause_in_sweep && oc.stage == TransportStage::sweep &&
            Clock::now() - sweep_start > Millis{300})
          test_pause_point("sweep", in.rank);
        if (!in.set_wait_state) return;
        rendezvous::WaitState w;
        w.phase = phase;
        w.waiting_on = peer;
        if (peer >= 0) w.what = fmt::format("{}: {}", to_string(oc.stage), what);
        in.set_wait_state(w);
      };
    auto t = backend->make();
    try {
      t->open(ctx, deadline);
      oc.stage = TransportStage::sweep;
      sweep_start = Clock::now();
      auto sweep = run_sweep(*t, ctx, store, o.sweep, deadline);
      oc.stage = TransportStage::identify;
      nlohmann::json identity = t->identify();
      oc.links = t->link_stats();
      oc.network = t->network_report();
      // Ranks sharing one device (synthetic mode) measure a path no real job takes.
      oc.synthetic = identity.is_object() && identity.value("synthetic", false);
      oc.identity = std::move(identity);
      oc.sweep = std::move(sweep);
      oc.stage = TransportStage::done;
      if (in.set_wait_state) in.set_wait_state(rendezvous::WaitState{});  // done: waits on nobody
    } catch (const TransportError& e) {
      oc.error = TransportFailure{TransportFailure::Source::transport, e.kind(),
                                  rendezvous::ErrorClass::other, e.what(), e.peer(),
                                  e.evidence(), rendezvous::seconds_since(t0)};
    } catch (const rendezvous::StoreError& e) {
      oc.error = TransportFailure{TransportFailure::Source::store, ErrorKind::other,
                                  e.error_class(), e.what(), -1, nullptr,
                                  rendezvous::seconds_since(t0)};
    }
    // A failed transport's link stats are the evidence of why (a lossy host's retransmits).
    if (oc.error && !oc.links) oc.links = t->link_stats();
    t->close();
    oc.duration_s = rendezvous::seconds_since(t0);
  }
  return out;
}

}  // namespace ncclsmoke::harness
