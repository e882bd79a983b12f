#include "harness/run/pairwise_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <thread>

#include "harness/common/progress.h"
#include "harness/run/pairwise_plan.h"
#include "harness/run/transport_phase.h"  // test_pause_point
#include "rendezvous/bounded_json.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/store_error.h"
#include "results/judging/baseline_learn.h"  // median
#include "results/judging/link_rules.h"      // pair samples as links, their wire layout
#include "results/verdict/phase_id.h"
#include "transports/pair_schedule.h"
#include "transports/registry.h"
#include "transports/sweep.h"

namespace ncclsmoke::harness {

using namespace ncclsmoke::rendezvous;
using transports::DType;
using transports::ReduceOp;
using transports::TransportError;

namespace {

// How long rank 0 waits for a summary that does not come: no arrival for this long (a rank whose
// transport timed out ends up to one collective's deadline after the others), at most twice it.
Millis summary_window(const RunContext& ctx) { return ms(std::max(5.0, ctx.o.op_timeout_s + 2)); }
// Rank 0 waits for the others' "done" this long past its own budget's end.
constexpr Millis kDoneGrace{2000};
// A round is not started with less than this left before its deadline: a pair cut that short says
// nothing about its link, and a timeout would read as one (the phase says the budget was spent).
constexpr Millis kMinRoundShare{1000};

// The pair's view of the store: a wait for the partner's keys is cut into slices, and ends as
// soon as the liveness watch says the partner stopped (dead or frozen), instead of at the round's
// deadline.
class PartnerGuard final : public Store {
 public:
  PartnerGuard(Store& inner, std::function<bool()> gone, int peer)
      : inner_(inner), gone_(std::move(gone)), peer_(peer) {}
  void set(const std::string& k, const std::string& v) override { inner_.set(k, v); }
  std::string get(const std::string& k, Deadline d) override {
    return sliced(d, [&](Deadline s) { return inner_.get(k, s); });
  }
  int64_t add(const std::string& k, int64_t d) override { return inner_.add(k, d); }
  bool check(const std::vector<std::string>& k) override { return inner_.check(k); }
  void wait(const std::vector<std::string>& k, Deadline d) override {
    sliced(d, [&](Deadline s) { return inner_.wait(k, s), 0; });
  }
  std::string compare_set(const std::string& k, const std::string& e,
                          const std::string& v) override {
    return inner_.compare_set(k, e, v);
  }
  bool delete_key(const std::string& k) override { return inner_.delete_key(k); }
  int64_t num_keys() override { return inner_.num_keys(); }
  void append(const std::string& k, const std::string& v) override { inner_.append(k, v); }
  std::vector<std::string> multi_get(const std::vector<std::string>& k, Deadline d) override {
    return sliced(d, [&](Deadline s) { return inner_.multi_get(k, s); });
  }
  void multi_set(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    inner_.multi_set(k, v);
  }

 private:
  template <class F>
  auto sliced(Deadline d, F&& f) -> decltype(f(d)) {
    for (;;) {
      const Deadline slice = earliest(deadline_after(Millis{250}), d);
      try {
        return f(slice);
      } catch (const StoreError& e) {
        if (e.error_class() != ErrorClass::timed_out || slice >= d) throw;
      }
      if (gone_())
        throw StoreError(ErrorClass::stalled,
                         fmt::format("rank {} stopped answering (liveness watch)", peer_));
    }
  }
  Store& inner_;
  std::function<bool()> gone_;
  int peer_;
};

void record_not_run(RunContext& ctx, const std::vector<std::string>& names, const std::string& why,
                    const std::map<std::string, std::string>& skipped = {}) {
  for (const auto& n : names) {
    auto it = skipped.find(n);
    ctx.saw(results::PairwiseNotRunSeen{n, it == skipped.end() ? why : it->second,
                                        it != skipped.end()});
  }
}

// Rank 0: the summaries of the ranks present (its own first), until all came, a rank stopped,
// the window passed without an arrival, or twice the window passed.
std::vector<RankSummary> collect_summaries(const RunContext& ctx, const StoreSession& s,
                                           Store& store, const Liveness& live, RankSummary mine,
                                           const std::map<int, std::string>& hosts) {
  std::vector<RankSummary> got{std::move(mine)};
  std::vector<int> pending;
  for (const auto& id : s.join.present)
    if (id.rank != ctx.world.rank) pending.push_back(id.rank);
  const auto window = summary_window(ctx);
  const Deadline hard = earliest(Clock::now() + window * 2, ctx.steps_deadline);
  auto last = Clock::now();
  while (!pending.empty()) {
    bool progressed = false;
    const auto stopped = live.stopped_ranks();
    for (auto it = pending.begin(); it != pending.end();) {
      const int r = *it;
      if (std::find(stopped.begin(), stopped.end(), r) != stopped.end()) {
        it = pending.erase(it);
        continue;
      }
      const std::string key = fmt::format("summary/{}", r);
      bool fetched = false;
      try {
        if (store.check({key})) {
          auto text = store.get(key, earliest(deadline_after(Millis{1000}), hard));
          auto parsed = parse_bounded_json(text, kMaxSmallJsonBytes);
          if (parsed.ok())
            if (auto sum = rank_summary_from_json(parsed.value); sum && sum->rank == r) {
              if (auto h = hosts.find(r); h != hosts.end()) sum->host = h->second;
              got.push_back(std::move(*sum));
            }
          fetched = true;  // unreadable: left out, like one that never came
        }
      } catch (const StoreError&) {
      }
      if (fetched) {
        progressed = true;
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    const auto now = Clock::now();
    if (progressed) last = now;
    if (pending.empty() || now >= hard || now - last >= window) break;
    if (!progressed) std::this_thread::sleep_for(Millis{20});
  }
  if (!pending.empty())
    log_warn(
        fmt::format("pairwise: no summary from rank {} within {:.0f} s: left out of the rounds",
                    fmt::join(pending, ", "), std::chrono::duration<double>(window).count()));
  return got;
}

// Everyone but rank 0: what rank 0 posts under `key` ("the plan", "the second pass": `what`),
// read by `read` (nullopt: unreadable), or nullopt with `why` when rank 0 stopped, the store
// failed, or `until` passed first.
template <class Read>
auto wait_rank0_post(Store& store, const Liveness& live, const std::string& key,
                     const std::string& what, Deadline until, Read read, std::string& why)
    -> decltype(read(nlohmann::json())) {
  const auto t0 = Clock::now();
  while (Clock::now() < until) {
    if (live.rank0_stopped()) {
      why = "rank 0 stopped answering before it posted " + what;
      return std::nullopt;
    }
    try {
      auto text = store.get(key, earliest(deadline_after(Millis{1000}), until));
      auto parsed = parse_bounded_json(text, kMaxSmallJsonBytes);
      auto value = parsed.ok() ? read(parsed.value) : std::nullopt;
      if (!value) why = "rank 0's " + what.substr(what.find(' ') + 1) + " could not be read";
      return value;
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) {
        why = fmt::format("the store failed while waiting for {}: {}", what, e.what());
        return std::nullopt;
      }
    }
  }
  why = fmt::format("no {} from rank 0 within {:.1f} s", what.substr(what.find(' ') + 1),
                    seconds_since(t0));
  return std::nullopt;
}

// Everyone but rank 0: the plan, or nullopt with `why`.
std::optional<PairwisePlan> wait_plan(const RunContext& ctx, Store& store, const Liveness& live,
                                      std::string& why) {
  const auto window = summary_window(ctx);
  const Deadline until = earliest(Clock::now() + ms(ctx.o.op_timeout_s) + window * 2 + Millis{5000},
                                  ctx.steps_deadline);
  return wait_rank0_post(store, live, "plan", "the plan", until,
                         [](const nlohmann::json& j) { return pairwise_plan_from_json(j); }, why);
}

}  // namespace

results::PairSample measure_pair(const PairTask& t) {
  results::PairSample out;
  out.round = t.round;
  out.peer = t.peer;
  if (auto h = t.hosts.find(t.peer); h != t.hosts.end()) out.peer_host = h->second;
  out.iters = std::max(1, t.iters);
  const std::size_t esize = transports::dtype_size(t.dtype);
  const std::size_t count = std::max<std::size_t>(1, static_cast<std::size_t>(t.bytes) / esize);
  const std::size_t nbytes = count * esize;
  out.bytes = static_cast<std::int64_t>(nbytes);
  const auto* backend = transports::find_backend(t.transport);
  if (!backend || !backend->make) {
    out.error_kind = results::kPairUnavailable;
    out.error = fmt::format("unavailable: {}",
                            backend ? backend->why_missing : "no transport of that name");
    return out;
  }
  transports::TransportContext c;
  c.rank = t.self < t.peer ? 0 : 1;
  c.world_size = 2;
  auto host_of = [&](int r) {
    auto h = t.hosts.find(r);
    return h == t.hosts.end() ? std::string() : h->second;
  };
  c.hosts[c.rank] = host_of(t.self);
  c.hosts[1 - c.rank] = host_of(t.peer);
  c.ranks_on_host = transports::ranks_on_host(t.hosts, t.self);
  c.local_address = t.local_address;
  c.store = t.store;
  c.options = t.options;
  c.world_ranks = {std::min(t.self, t.peer), std::max(t.self, t.peer)};  // c.rank's order
  std::unique_ptr<transports::Transport> tr;
  try {
    tr = backend->make();
    tr->open(c, t.deadline);
    struct Buffer {
      transports::Transport& tr;
      void* p;
      Buffer(transports::Transport& x, std::size_t n) : tr(x), p(x.allocate(n)) {}
      ~Buffer() { tr.release(p); }
    };
    Buffer send(*tr, nbytes), recv(*tr, nbytes), tiny_in(*tr, 4), tiny_out(*tr, 4);
    std::vector<unsigned char> host(nbytes);
    float one = 1.0f;
    tr->copy_in(tiny_in.p, &one, 4);
    transports::fill_input(host.data(), count, t.dtype, c.rank);
    tr->copy_in(send.p, host.data(), nbytes);
    std::memset(host.data(), 0xFF, nbytes);  // stale data must not pass
    tr->copy_in(recv.p, host.data(), nbytes);
    auto op_deadline = [&] { return earliest(Clock::now() + t.op_timeout, t.deadline); };
    // The warm-up is the data check.
    tr->allreduce(send.p, recv.p, count, t.dtype, ReduceOp::sum, op_deadline());
    tr->copy_out(host.data(), recv.p, nbytes);
    const auto wrong = transports::count_wrong(host.data(), count, t.dtype, 2);
    // A one-element collective lines the pair up before the clock starts.
    tr->allreduce(tiny_in.p, tiny_out.p, 1, DType::float32, ReduceOp::sum, op_deadline());
    // Each all-reduce timed on its own, the median kept (results::PairSample::time_us).
    std::vector<double> each;
    for (int i = 0; i < std::max(1, out.iters); ++i)
      each.push_back(tr->timed_allreduce(send.p, recv.p, count, t.dtype, ReduceOp::sum, 1,
                                         t.deadline, op_deadline));
    const double us = results::median(std::move(each));
    out.time_us = us;
    out.busbw_gbps = transports::allreduce_bandwidth(nbytes, us, 2).busbw_gbps;
    if (auto ls = tr->link_stats()) {
      out.retrans = ls->tx_retrans;
      out.segs_out = ls->tx_segs_out;
      out.rtt_us = ls->tx_rtt_us;
    }
    if (wrong > 0) {
      out.error_kind = "wrong_data";
      out.error = fmt::format("wrong data: {} of {} elements", wrong, count);
    }
  } catch (const TransportError& e) {
    out.error_kind = transports::to_string(e.kind());
    out.error = fmt::format("{}: {}", out.error_kind, e.what());
  } catch (const StoreError& e) {
    out.error_kind = "store";
    out.error = fmt::format("store: {}", e.what());
  } catch (const std::exception& e) {
    out.error_kind = "other";
    out.error = fmt::format("other: {}", e.what());
  }
  if (!out.error.empty()) {
    out.time_us = std::numeric_limits<double>::quiet_NaN();
    out.busbw_gbps = std::numeric_limits<double>::quiet_NaN();
  }
  if (tr) {
    try {
      tr->close();
    } catch (const std::exception&) {
    }
  }
  return out;
}

namespace {
// Every joined rank's host, this rank's as its world has it.
std::map<int, std::string> rank_hosts(const RunContext& ctx, const StoreSession& s) {
  std::map<int, std::string> hosts;
  for (const auto& id : s.join.present) hosts[id.rank] = id.host;
  hosts[ctx.world.rank] = ctx.world.hostname;
  return hosts;
}
}  // namespace

void pairwise_summaries_step(RunContext& ctx, const StoreSession& s, const Liveness& live,
                             PairwiseState& state) {
  // Whether this step runs at all (--pairwise=never, no transport, the deadline passed, the store
  // stopped) and whether the rounds run after it are results/judging/next_step.h's.
  const auto names = ctx.requested_transports();
  const int me = ctx.world.rank;
  log_set_phase("pairwise");
  const auto hosts = rank_hosts(ctx, s);
  PrefixStore store("pairwise", *s.store);

  // How this rank's transports ended, judged from its records (never read back from the
  // verdict); on rank 0 also what the decision reads besides the summaries.
  std::vector<results::StepRecord> records;
  {
    std::lock_guard lock(ctx.record.mu);
    records = ctx.record.judged;
  }
  auto ended = results::summarize_transports(records, me, ctx.world.hostname);
  const RankSummary& mine = ended.summary;
  const bool ran = ended.ran;
  auto& rows = ended.rows;
  if (me != 0) {
    try {
      store.set(fmt::format("summary/{}", me),
                to_json(mine).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } catch (const StoreError& e) {
      state.why_none = fmt::format("this rank's summary could not be posted: {}", e.what());
    }
    return;
  }
  results::PairwiseGatheredSeen seen;
  auto& g = seen.gathered;
  g.gathered = true;
  g.transports_ran = ran;
  if (!ran) {
    g.summaries = {mine};
    ctx.saw(std::move(seen));
    return;
  }
  g.summaries = collect_summaries(ctx, s, store, live, mine, hosts);
  g.rows = std::move(rows);
  g.profile = ctx.profile;
  g.stopped = live.stopped_ranks();
  // What a backend cannot do is its own declaration (transports/registry.h).
  for (const auto& n : names)
    if (const auto* b = transports::find_backend(n); b && !b->no_pairs.empty())
      g.cannot_pair[n] = b->no_pairs;
  ctx.saw(std::move(seen));
}

namespace {

// The second pass needs hosts to meet a suspect with: two healthy ones besides it.
constexpr std::size_t kSecondPassMinHosts = 3;

// What every round of either pass shares.
struct RoundsInput {
  RunContext& ctx;
  const StoreSession& s;
  Liveness& live;
  Store& store;  // "pairwise/"
  const std::map<int, std::string>& hosts;
  const std::map<std::string, std::string>& options;
  DType dtype;
  std::int64_t bytes;
  int iters;
};

// This rank's pairs of one transport's `rounds`, appended to `run`: round k (numbered
// first_round + k in the samples) ends at slice_start + (k+1) x round_len, never past `end`.
// `tag` keeps the passes' store keys apart ("" the first rounds, "s" the second pass);
// `second` (the second pass) marks each sample with the suspect it was measured for, or as a
// named link measured again. Returns the rounds not started for want of time.
int run_rounds(const RoundsInput& in, const std::string& name, const std::string& tag,
               int first_round, const std::vector<transports::PairRound>& rounds,
               Deadline slice_start, Clock::duration round_len, Deadline end,
               const results::SecondPass* second, results::PairwiseRun& run) {
  const int me = in.ctx.world.rank;
  int late = 0;
  for (size_t k = 0; k < rounds.size(); ++k) {
    // Test-only (NCCLSMOKE_TEST_PAUSE_AT=pairwise): stop at the second round's start, so a test
    // can freeze or kill a rank between pairs (harness/run/transport_phase.h test_pause_point).
    if (k == 1 && tag.empty()) test_pause_point("pairwise", me);
    const int peer = transports::partner_in(rounds[k], me);
    if (peer < 0) {
      if (tag.empty()) ++run.sat_out;  // in the second pass most ranks sit out by design
      continue;
    }
    const std::string pair_prefix =
        fmt::format("{}/{}{}/{}-{}", name, tag, k, std::min(me, peer), std::max(me, peer));
    const Deadline round_end = earliest(slice_start + round_len * static_cast<long>(k + 1), end);
    if (round_end - Clock::now() < kMinRoundShare) {
      // Too late for this round: say so in the pair's keys, so the partner stops waiting.
      ++late;
      try {
        in.store.set(fmt::format("{}/late/{}", pair_prefix, me), "1");
      } catch (const StoreError&) {
      }
      continue;
    }
    // A partner the watch saw die or freeze would only be waited for: its death is named
    // (PEER_LOST / PEER_STALLED), and a pair with it says nothing about a link.
    auto partner_stopped = [&in, peer] {
      const auto stopped = in.live.stopped_ranks();
      return std::find(stopped.begin(), stopped.end(), peer) != stopped.end();
    };
    const std::string partner_late_key = fmt::format("{}/late/{}", pair_prefix, peer);
    auto partner_late = [&in, &partner_late_key] {
      try {
        return in.store.check({partner_late_key});
      } catch (const StoreError&) {
        return false;
      }
    };
    if (partner_stopped()) {
      ++run.partner_stopped;
      continue;
    }
    PartnerGuard guarded(
        in.store, [&] { return partner_stopped() || partner_late(); }, peer);
    PrefixStore pair_store(pair_prefix, guarded);
    PairTask task;
    task.transport = name;
    task.round = first_round + static_cast<int>(k);
    task.self = me;
    task.peer = peer;
    task.hosts = in.hosts;
    task.local_address = in.s.self.local_address;
    task.store = &pair_store;
    task.options = in.options;
    task.bytes = in.bytes;
    task.iters = in.iters;
    task.dtype = in.dtype;
    task.op_timeout = ms(in.ctx.o.op_timeout_s);
    task.deadline = round_end;
    auto sample = measure_pair(task);
    if (!sample.error.empty()) {
      // Neither a dead partner (the watch names it) nor one that had no time left says
      // anything about the link.
      if (partner_stopped()) {
        ++run.partner_stopped;
        continue;
      }
      if (partner_late()) {
        ++run.partner_late;
        continue;
      }
    }
    if (second) {
      const auto& stand_ins = second->suspect_of_rank;
      if (second->rechecks.count({std::min(me, peer), std::max(me, peer)}))
        sample.recheck = true;
      else if (auto sus = stand_ins.find(me); sus != stand_ins.end())
        sample.suspect_host = sus->second;
      else if (auto other = stand_ins.find(peer); other != stand_ins.end())
        sample.suspect_host = other->second;
    }
    log_debug(fmt::format(
        "{} {}round {} with rank {}: {}", results::pairwise_phase_name(name),
        tag.empty() ? "" : "second pass ", task.round, peer,
        sample.error.empty() ? fmt::format("{:.0f} us", sample.time_us) : sample.error));
    run.samples.push_back(std::move(sample));
  }
  return late;
}

// Rank 0: waits until each of `ranks` but itself has posted `prefix`<rank>, the watch saw it stop,
// or `until` passes. Returns the ranks that posted.
std::vector<int> wait_for_posts(Store& store, const Liveness& live, const std::vector<int>& ranks,
                                int me, const std::string& prefix, Deadline until) {
  std::vector<int> waiting, posted;
  for (int r : ranks)
    if (r != me) waiting.push_back(r);
  for (;;) {
    // One request while all have posted (the usual case); rank by rank only while some have not.
    std::vector<std::string> keys;
    for (int r : waiting) keys.push_back(prefix + std::to_string(r));
    try {
      if (!keys.empty() && store.check(keys)) {
        posted.insert(posted.end(), waiting.begin(), waiting.end());
        waiting.clear();
      }
    } catch (const StoreError&) {
    }
    const auto stopped = live.stopped_ranks();
    std::vector<int> still;
    for (int r : waiting) {
      bool has = false;
      try {
        has = store.check({prefix + std::to_string(r)});
      } catch (const StoreError&) {
      }
      if (has)
        posted.push_back(r);
      else if (std::find(stopped.begin(), stopped.end(), r) == stopped.end())
        still.push_back(r);
    }
    waiting = std::move(still);
    if (waiting.empty() || Clock::now() >= until) break;
    std::this_thread::sleep_for(Millis{50});
  }
  if (!waiting.empty())
    log_debug(fmt::format("pairwise: no '{}' from rank {}", prefix, fmt::join(waiting, ", ")));
  std::sort(posted.begin(), posted.end());
  return posted;
}

// A rank's first-round samples, per transport: {"<transport>": [sample...]}.
nlohmann::json samples_json(const std::vector<results::PairwiseRun>& runs) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& run : runs) {
    nlohmann::json observed = nlohmann::json::object();
    results::write_pair_samples(observed, run.samples);
    out[run.transport] = std::move(observed[results::kPairwiseKey]);
  }
  return out;
}

// Rank 0: every transport's second pass, from the first-round samples of the ranks that posted
// them (its own from `runs`).
SecondPasses plan_second_passes(const RoundsInput& in, const PairwisePlan& plan,
                                const std::vector<results::PairwiseRun>& runs,
                                const std::vector<int>& posted) {
  std::map<std::string, std::vector<results::LinkEvidence>> links;
  auto add = [&](int rank, const std::string& transport,
                 const std::vector<results::PairSample>& samples) {
    auto h = in.hosts.find(rank);
    if (h == in.hosts.end()) return;
    for (auto& l : results::pair_links(transport, rank, h->second, samples, in.hosts))
      links[transport].push_back(std::move(l));
  };
  for (const auto& run : runs) add(in.ctx.world.rank, run.transport, run.samples);
  for (int r : posted) {
    try {
      auto parsed = parse_bounded_json(
          in.store.get(fmt::format("first/{}", r), deadline_after(Millis{2000})), kMaxSmallJsonBytes);
      if (!parsed.ok() || !parsed.value.is_object()) continue;
      for (const auto& [transport, arr] : parsed.value.items()) {
        results::TransportIdentity id;
        id.observed = {{results::kPairwiseKey, arr}};
        add(r, transport, results::pair_samples_of(id));
      }
    } catch (const StoreError& e) {
      log_debug(fmt::format("pairwise: rank {}'s first rounds could not be read: {}", r, e.what()));
    }
  }
  std::map<int, std::string> host_of;
  for (int r : plan.participants)
    if (auto h = in.hosts.find(r); h != in.hosts.end()) host_of[r] = h->second;
  SecondPasses out;
  for (const auto& t : plan.transports) out[t] = results::plan_second_pass(links[t], host_of);
  return out;
}

// Everyone but rank 0: the second pass rank 0 posted, or nullopt with `why`.
std::optional<SecondPasses> wait_second_passes(const RoundsInput& in, const PairwisePlan& plan,
                                               Deadline until, std::string& why) {
  return wait_rank0_post(
      in.store, in.live, "second", "the second pass", until,
      [&plan](const nlohmann::json& j) { return second_passes_from_json(j, plan.participants); },
      why);
}

// The second pass (results::plan_second_pass): every participant posts its first rounds'
// samples, rank 0 plans from them and posts the plan, and the ranks it pairs measure from
// `first_end` to `budget_end`, each transport an equal slice, its rounds at fixed points.
void run_second_pass(const RoundsInput& in, const PairwisePlan& plan,
                     std::vector<results::PairwiseRun>& runs, Deadline first_end,
                     Deadline budget_end) {
  const int me = in.ctx.world.rank;
  log_set_phase("pairwise");
  const auto plan_t0 = Clock::now();
  std::optional<SecondPasses> passes;
  std::string why;
  try {
    in.store.set(fmt::format("first/{}", me),
                 samples_json(runs).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } catch (const StoreError& e) {
    why = fmt::format("this rank's first rounds could not be posted: {}", e.what());
  }
  if (me == 0) {
    const auto posted = wait_for_posts(in.store, in.live, plan.participants, me, "first/",
                                       earliest(first_end + kDoneGrace, in.ctx.steps_deadline));
    passes = plan_second_passes(in, plan, runs, posted);
    // Rank 0 holds its plan to the check every other rank applies to what it reads, so that no
    // plan runs here that the others refused (rank 0 would wait out every round alone).
    const auto posted_form = to_json(*passes);
    if (!second_passes_from_json(posted_form, plan.participants)) {
      log_warn(fmt::format("pairwise: the second pass planned is not well formed, and is not run "
                           "(a bug; the plan: {})",
                           posted_form.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
      passes = SecondPasses{};
    }
    for (const auto& [t, sp] : *passes)
      log_line(sp.rounds.empty() ? LogLevel::debug : LogLevel::info,
               sp.rounds.empty()
                   ? fmt::format("pairwise: {}: no second pass: {}", t, sp.why_none)
                   : fmt::format("pairwise: {}: second pass: {} rounds; suspects met again: {}; "
                                 "links measured again: {}",
                                 t, sp.rounds.size(),
                                 sp.suspects.empty() ? "none (" + sp.why_no_partners + ")"
                                                     : fmt::format("{}", fmt::join(sp.suspects, ", ")),
                                 sp.rechecks.size()));
    try {
      in.store.set("second", to_json(*passes).dump(-1, ' ', false,
                                                    nlohmann::json::error_handler_t::replace));
    } catch (const StoreError& e) {
      log_warn(fmt::format("pairwise: the second pass could not be posted: {}", e.what()));
    }
  } else if (why.empty()) {
    passes = wait_second_passes(
        in, plan, earliest(first_end + kDoneGrace + Millis{5000}, in.ctx.steps_deadline), why);
  }
  const double plan_s = seconds_since(plan_t0);
  for (auto& run : runs) run.second_plan_s = plan_s;
  if (!passes) {
    log_debug(fmt::format("pairwise: no second pass: {}", why));
    for (auto& run : runs) run.second_why_none = why;
    return;
  }
  const auto slice = std::max(Clock::duration::zero(), budget_end - first_end) /
                     static_cast<long>(std::max<size_t>(1, runs.size()));
  for (size_t ti = 0; ti < runs.size(); ++ti) {
    auto& run = runs[ti];
    auto sp = passes->find(run.transport);
    if (sp == passes->end()) continue;
    run.second_suspects = sp->second.suspects;
    run.second_rounds = static_cast<int>(sp->second.rounds.size());
    run.second_rechecks = static_cast<int>(sp->second.rechecks.size());
    run.second_why_none = sp->second.why_none;
    if (sp->second.rounds.empty()) continue;
    std::vector<transports::PairRound> rounds;
    for (const auto& pairs : sp->second.rounds) {
      transports::PairRound r;
      r.pairs = pairs;
      rounds.push_back(std::move(r));
      if (transports::partner_in(rounds.back(), me) >= 0) ++run.second_pairs_here;
    }
    log_set_phase(results::pairwise_phase_name(run.transport));
    const auto t0 = Clock::now();
    run.second_late += run_rounds(in, run.transport, "s", run.rounds_total, rounds,
                                  first_end + slice * static_cast<long>(ti),
                                  slice / static_cast<long>(rounds.size()), budget_end,
                                  &sp->second, run);
    run.second_duration_s = seconds_since(t0);
    run.duration_s += run.second_duration_s;
  }
}

}  // namespace

void pairwise_rounds_step(RunContext& ctx, const StoreSession& s, Liveness& live,
                          const std::optional<results::PairwiseDecision>& decided,
                          const PairwiseState& state) {
  const auto settings = pairwise_settings(ctx.o);
  const auto names = ctx.requested_transports();
  const int me = ctx.world.rank;
  log_set_phase("pairwise");
  const auto hosts = rank_hosts(ctx, s);
  PrefixStore store("pairwise", *s.store);

  std::optional<PairwisePlan> plan;
  std::string why_none = state.why_none;
  if (me == 0 && decided) {
    PairwisePlan p = pairwise_plan(*decided, settings);
    log_line(p.run ? LogLevel::info : LogLevel::debug,
             fmt::format("pairwise: {}: {}",
                         p.run ? "rounds over " + std::to_string(p.participants.size()) + " ranks"
                               : "no rounds",
                         p.reason));
    try {
      store.set("plan", to_json(p).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } catch (const StoreError& e) {
      log_warn(fmt::format("pairwise: the plan could not be posted: {}", e.what()));
    }
    plan = std::move(p);
  } else if (me != 0 && why_none.empty()) {
    plan = wait_plan(ctx, store, live, why_none);
  } else if (why_none.empty()) {
    why_none = "rank 0 made no plan";
  }
  if (!plan) {
    log_warn(fmt::format("pairwise: no pairwise rounds: {}", why_none));
    record_not_run(ctx, names, "no plan: " + why_none);
    return;
  }
  const bool part = std::binary_search(plan->participants.begin(), plan->participants.end(), me);
  if (!plan->run || !part) {
    record_not_run(ctx, names,
                   plan->run ? "this rank was left out (its summary did not reach rank 0 in time)"
                             : plan->reason,
                   plan->skipped);
    return;
  }

  // The rounds, on one clock every rank shares: the budget counts from the plan, each transport
  // has an equal slice of it and each of its rounds ends at a fixed point of that slice (round k
  // at slice start + (k+1) x slice / rounds). A round that starts early keeps the time the earlier
  // ones left over, and both ends of a pair hold the same deadline even when one of them comes
  // late from a slow round (equal shares of "what is left" would differ, and the early one would
  // give up just before the late one arrives: a false failure). Where the participants span three
  // hosts or more, the first rounds have two thirds of the budget and the second pass the rest.
  log_info(phase_start_line("pairwise",
                            fmt::format("{} ranks, {}; reason: {}", plan->participants.size(),
                                        fmt::join(plan->transports, ", "), plan->reason)));
  const Deadline budget_start = Clock::now();
  const Clock::duration budget = ms(std::max(plan->budget_s, 0.001));
  const Deadline budget_end = earliest(budget_start + budget, ctx.steps_deadline);
  std::set<std::string> participant_hosts;
  for (int r : plan->participants)
    if (auto h = hosts.find(r); h != hosts.end()) participant_hosts.insert(h->second);
  const bool second_pass = participant_hosts.size() >= kSecondPassMinHosts;
  const Clock::duration first_budget = second_pass ? budget * 2 / 3 : budget;
  const Deadline first_end = earliest(budget_start + first_budget, budget_end);
  const auto schedule = transports::pair_rounds(plan->participants, plan->schedule);
  DType dtype = DType::float32;
  transports::parse_dtype(ctx.o.dtype, dtype);
  const auto options = backend_options_for_run(ctx.o, me, ctx.world.local_rank);
  for (const auto& [t, why] : plan->skipped)
    ctx.saw(results::PairwiseNotRunSeen{t, why, true});
  const RoundsInput in{ctx, s, live, store, hosts, options, dtype, plan->bytes, plan->iters};
  const auto slice = first_budget / static_cast<long>(std::max<size_t>(1, plan->transports.size()));
  std::vector<results::PairwiseRun> runs;
  for (size_t ti = 0; ti < plan->transports.size(); ++ti) {
    const std::string& name = plan->transports[ti];
    const auto t0 = Clock::now();
    log_set_phase(results::pairwise_phase_name(name));
    results::PairwiseRun run;
    run.transport = name;
    run.rank = me;
    run.rounds_total = static_cast<int>(schedule.size());
    const auto late = run_rounds(in, name, "", 0, schedule, budget_start + slice * static_cast<long>(ti),
                                 slice / static_cast<long>(std::max<size_t>(1, schedule.size())),
                                 first_end, nullptr, run);
    run.rounds_late += late;
    run.duration_s = seconds_since(t0);
    runs.push_back(std::move(run));
  }
  if (second_pass) run_second_pass(in, *plan, runs, first_end, budget_end);
  // The phases and the samples in this rank's identity rows are judging's.
  for (auto& run : runs) ctx.saw(results::PairwiseRunSeen{*plan, std::move(run)});
  ctx.judge_pending();

  // Rank 0 gathers next: wait for the others to finish their rounds, so none is still measuring
  // (and named late) when it starts. A rank the watch saw stop is not waited for.
  try {
    store.set(fmt::format("done/{}", me), "1");
    if (me == 0)
      wait_for_posts(store, live, plan->participants, me, "done/",
                     earliest(std::max(Clock::now(), budget_end) + kDoneGrace, ctx.steps_deadline));
  } catch (const StoreError& e) {
    log_debug(fmt::format("pairwise: not every rank said it was done: {}", e.what()));
  }
}

}  // namespace ncclsmoke::harness
