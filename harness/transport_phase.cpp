#include "harness/transport_phase.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

#include "rendezvous/prefix_store.h"
#include "results/finding_codes.h"
#include "results/nccl_judge.h"
#include "results/summary.h"
#include "transports/registry.h"

namespace ncclsmoke::harness {
namespace {

using namespace ncclsmoke::transports;
using results::Finding;
using rendezvous::Clock;
using rendezvous::Millis;

using rendezvous::seconds_text;

results::TransportRow world_row(const std::string& name, const SweepRow& r, bool synthetic) {
  results::TransportRow row;
  row.transport = name;
  row.rank = -1;
  row.bytes = static_cast<int64_t>(r.bytes);
  row.count = static_cast<int64_t>(r.count);
  row.dtype = to_string(r.dtype);
  row.in_place = r.in_place;
  row.time_us = r.time_us;
  row.algbw_gbps = r.algbw_gbps;
  row.busbw_gbps = r.busbw_gbps;
  row.wrong = r.wrong;
  row.gate = r.gate;
  row.synthetic = synthetic;
  return row;
}

Finding error_finding(const TransportError& e, const std::string& name,
                      const TransportPhaseInput& in, double waited_s) {
  std::vector<int> ranks{in.rank};
  std::vector<std::string> hosts{in.host};
  if (e.peer() >= 0 && e.peer() != in.rank) {
    ranks.push_back(e.peer());
    auto it = in.hosts.find(e.peer());
    if (it != in.hosts.end()) hosts.push_back(it->second);
  }
  std::string who = "rank " + std::to_string(in.rank) + " (host " + in.host + ")";
  std::map<std::string, std::string> vars{{"transport", name}, {"phase", "transport:" + name}};
  Finding f;
  switch (e.kind()) {
    case ErrorKind::unavailable:
      f = results::make_finding("TRANSPORT_UNAVAILABLE",
                                "transport " + name + " skipped on " + who + ": " + e.what(),
                                ranks, hosts, vars);
      break;
    case ErrorKind::init_failed:
      vars["interface"] = "see evidence";
      f = results::make_finding("TRANSPORT_INIT_FAILED",
                                "transport " + name + " failed to initialise on " + who + " after " +
                                    seconds_text(waited_s) + ": " + e.what(),
                                ranks, hosts, vars);
      break;
    case ErrorKind::timeout:
      f = results::make_finding("TRANSPORT_TIMEOUT",
                                "transport " + name + " timed out on " + who + " after " +
                                    seconds_text(waited_s) + ": " + e.what(),
                                ranks, hosts, vars);
      break;
    case ErrorKind::peer_lost:
      f = results::make_finding("PEER_LOST",
                                "transport " + name + " on " + who + " lost " +
                                    (e.peer() >= 0
                                         ? "rank " + std::to_string(e.peer())
                                         : std::string("a peer (the transport does not say which)")) +
                                    ": " + e.what(),
                                e.peer() >= 0 ? std::vector<int>{e.peer()} : ranks, hosts, vars);
      f.layer = "transport";
      break;
    case ErrorKind::other:
      f = results::make_finding("TRANSPORT_INIT_FAILED",
                                "transport " + name + " failed on " + who + ": " + e.what(), ranks,
                                hosts, vars);
  }
  f.evidence = {{"error_kind", to_string(e.kind())}, {"waited_s", waited_s}};
  if (!e.evidence().is_null()) f.evidence["detail"] = e.evidence();
  return f;
}

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
  const char* at = std::getenv("NCCLSMOKE_TEST_PAUSE_AT");
  if (!at || point != at || paused.exchange(true)) return;
  std::fprintf(stderr, "ncclsmoke: test hook: rank %d stops itself at %s\n", rank, point.c_str());
  std::fflush(stderr);
  std::raise(SIGSTOP);
}

bool parse_size(const std::string& text, std::size_t& bytes) {
  if (text.empty()) return false;
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    return false;
  }
  if (text[0] == '-') return false;
  std::string suffix = text.substr(pos);
  unsigned long long mult = 1;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") mult = 1ull << 30;
  else return false;
  if (v > (1ull << 40) / mult) return false;
  bytes = static_cast<std::size_t>(v * mult);
  return true;
}

TransportPhaseOutput run_transports(const TransportPhaseInput& in, const TransportPhaseOptions& o) {
  TransportPhaseOutput out;
  for (const auto& name : o.transports) {
    auto t0 = Clock::now();
    results::Phase phase;
    phase.name = "transport:" + name;
    const BackendInfo* backend = find_backend(name);
    if (!backend || !backend->make) {
      std::string why = backend ? backend->why_missing : "no transport of that name";
      phase.status = "skipped";
      phase.detail = why;
      out.phases.push_back(phase);
      out.findings.push_back(results::make_finding(
          "TRANSPORT_UNAVAILABLE",
          "transport " + name + " skipped on rank " + std::to_string(in.rank) + " (host " +
              in.host + "): " + why,
          {in.rank}, {in.host}, {{"transport", name}}));
      continue;
    }
    auto deadline = Clock::now() + Millis(static_cast<long long>(o.timeout_s * 1000));
    GuardedStore guarded(*in.store, in.store_unusable);
    rendezvous::PrefixStore store("transport/" + name, guarded);
    TransportContext ctx;
    ctx.rank = in.rank;
    ctx.world_size = in.world_size;
    ctx.hosts = in.hosts;
    ctx.local_address = in.local_address;
    ctx.store = &store;
    ctx.options = o.backend_options;
    std::string stage = "open";
    Clock::time_point sweep_start{};
    bool pause_in_sweep = out.phases.empty() && std::getenv("NCCLSMOKE_TEST_PAUSE_AT");
    if (in.set_wait_state || pause_in_sweep)
      ctx.set_wait_state = [&, phase = phase.name](int peer, const std::string& what) {
        if (pause_in_sweep && stage == "sweep" && Clock::now() - sweep_start > Millis{300})
          test_pause_point("sweep", in.rank);
        if (!in.set_wait_state) return;
        rendezvous::WaitState w;
        w.phase = phase;
        w.waiting_on = peer;
        if (peer >= 0) w.what = stage + ": " + what;
        in.set_wait_state(w);
      };
    auto t = backend->make();
    try {
      t->open(ctx, deadline);
      stage = "sweep";
      sweep_start = Clock::now();
      auto sweep = run_sweep(*t, ctx, store, o.sweep, deadline);
      stage = "identify";
      results::TransportIdentity id;
      id.transport = name;
      id.rank = in.rank;
      id.observed = t->identify();
      out.identities.push_back(id);
      // A backend that reports a NCCL log is judged on it: expected vs observed network.
      if (id.observed.is_object() && id.observed.contains("nccl_log")) {
        id.expected = id.observed.value("expected", nlohmann::json());
        out.identities.back().expected = id.expected;
        if (auto f = results::judge_nccl_network(id.expected, id.observed["nccl_log"], in.rank,
                                                 in.host))
          out.findings.push_back(std::move(*f));
      }
      // Ranks sharing one device (synthetic mode) measure a path no real job takes.
      bool synthetic = id.observed.is_object() && id.observed.value("synthetic", false);
      std::set<int> corrupt_ranks;
      int64_t wrong_total = 0;
      nlohmann::json wrong_by_rank = nlohmann::json::object();
      for (const auto& r : sweep.rows) {
        out.rows.push_back(world_row(name, r, synthetic));
        for (int k = 0; k < static_cast<int>(r.rank_time_us.size()); ++k) {
          auto row = world_row(name, r, synthetic);
          row.rank = k;
          row.time_us = r.rank_time_us[k];
          row.algbw_gbps = std::isfinite(row.time_us) && row.time_us > 0
                               ? static_cast<double>(r.bytes) / (row.time_us * 1e-6) / 1e9
                               : NAN;
          row.busbw_gbps = row.algbw_gbps * allreduce_busbw_factor(in.world_size);
          row.wrong = k < static_cast<int>(r.rank_wrong.size()) ? r.rank_wrong[k] : -1;
          row.gate = false;
          if (row.wrong > 0) {
            corrupt_ranks.insert(k);
            wrong_total += row.wrong;
            wrong_by_rank[std::to_string(k)] =
                wrong_by_rank.value(std::to_string(k), int64_t{0}) + row.wrong;
          }
          out.rows.push_back(row);
        }
      }
      bool bad = false;
      if (!corrupt_ranks.empty()) {
        std::vector<int> ranks(corrupt_ranks.begin(), corrupt_ranks.end());
        std::vector<std::string> hosts;
        for (int r : ranks) hosts.push_back(ctx.host_of(r));
        auto f = results::make_finding(
            "DATA_CORRUPTION",
            "transport " + name + ": all-reduce returned " + std::to_string(wrong_total) +
                " wrong elements on " + std::to_string(ranks.size()) + " rank(s)",
            ranks, hosts);
        f.evidence = {{"wrong_by_rank", wrong_by_rank}};
        out.findings.push_back(f);
        bad = true;
      }
      if (!sweep.complete) {
        out.findings.push_back(results::make_finding(
            "RESULTS_MISSING",
            "transport " + name + ": some ranks' sweep figures never arrived on rank " +
                std::to_string(in.rank),
            {in.rank}, {in.host}));
      }
      phase.status = bad ? "fail" : "pass";
      phase.detail = std::to_string(sweep.rows.size()) + " sizes/modes measured";
      if (in.set_wait_state) in.set_wait_state(rendezvous::WaitState{});  // done: waits on nobody
    } catch (const TransportError& e) {
      auto f = error_finding(e, name, in, rendezvous::seconds_since(t0));
      phase.status = e.kind() == ErrorKind::unavailable ? "skipped" : "fail";
      phase.detail = stage + ": " + e.what();
      out.findings.push_back(std::move(f));
    } catch (const rendezvous::StoreError& e) {
      out.findings.push_back(results::make_finding(
          "RENDEZVOUS_LOST",
          "rank " + std::to_string(in.rank) + " lost the store during transport " + name + " (" +
              stage + "): " + e.what(),
          {in.rank}, {in.host}));
      phase.status = "fail";
      phase.detail = stage + ": " + e.what();
    }
    t->close();
    phase.duration_s = rendezvous::seconds_since(t0);
    out.phases.push_back(phase);
  }
  return out;
}

std::string transport_table(const results::Verdict& v) {
  std::ostringstream os;
  std::string current;
  char line[256];
  // The arrow marks the row the headline gate number comes from (the lower of out-of-place and
  // in-place), the number the judge, the metrics and the report use.
  const auto heads = results::gate_headlines(v);
  auto is_gate = [&](const results::TransportRow& r) {
    return std::any_of(heads.begin(), heads.end(), [&](const auto& h) { return h.row == &r; });
  };
  for (const auto& r : v.transports) {
    if (r.rank != -1) continue;
    if (r.transport != current) {
      current = r.transport;
      os << "\n# transport " << current << " (" << v.world.size << " ranks)\n";
      std::snprintf(line, sizeof line, "#%13s %12s %9s  %-8s %10s %8s %8s %7s\n", "size(B)",
                    "count", "type", "place", "time(us)", "algbw", "busbw", "#wrong");
      os << line;
    }
    char wrong[24];
    if (r.wrong < 0) std::snprintf(wrong, sizeof wrong, "%s", "n/a");
    else std::snprintf(wrong, sizeof wrong, "%lld", static_cast<long long>(r.wrong));
    std::snprintf(line, sizeof line, "%14lld %12lld %9s  %-8s %10.1f %8.3f %8.3f %7s%s\n",
                  static_cast<long long>(r.bytes), static_cast<long long>(r.count),
                  r.dtype.c_str(), r.in_place ? "in" : "out", r.time_us, r.algbw_gbps,
                  r.busbw_gbps, wrong, is_gate(r) ? "  <- gate" : "");
    os << line;
  }
  return os.str();
}

}  // namespace ncclsmoke::harness
