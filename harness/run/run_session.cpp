#include "harness/run/run_session.h"
#include "harness/world/launchers.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "harness/common/command.h"  // kExitVerdictNotWritten
#include "harness/common/progress.h"
#include "harness/common/summary_tables.h"
#include "harness/run/gather.h"
#include "harness/run/mesh_step.h"
#include "harness/run/pairwise_plan.h"  // pairwise_settings
#include "harness/run/pairwise_step.h"
#include "harness/run/set_aside.h"  // write_suspects_file
#include "harness/run/transports_step.h"
#include "harness/run/world_step.h"
#include "rendezvous/net.h"
#include "results/judging/judge_run.h"
#include "results/judging/next_step.h"
#include "results/report/summary.h"
#include "results/verdict/ordering.h"

namespace ncclsmoke::harness {

namespace {

// Set by SIGTERM/SIGINT; the watchdog turns it into a verdict (async-signal-safe: the handler
// only stores).
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

int RunSession::run() {
  // SIGTERM/SIGINT (a Job's activeDeadlineSeconds, a deleted pod) still end in a verdict: the
  // watchdog sees the flag and writes what this rank knows, with a RUN_TERMINATED finding.
  if (hooks_.handle_signals) {
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGINT, on_stop_signal);
  }
  std::atomic<bool> finished{false};
  std::thread watchdog([&] { watch(finished); });
  int code = run_steps();
  finished = true;
  watchdog.join();
  if (const int by_watchdog = watchdog_code_; by_watchdog >= 0) return by_watchdog;
  return code;
}

int RunSession::run_steps() {
  // --out-dir is created (with parents) so a pod's emptyDir path or a fresh directory works; a
  // failure shows when the verdict is written, which names the path.
  if (!ctx_.o.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(ctx_.o.out_dir, ec);
  }
  // Each step measures and records what it saw; which one runs next, and the phases of the steps
  // passed over, are results::next_step's, over the records and the present moment.
  for (;;) {
    if (watchdog_code_ >= 0) return watchdog_code_;
    const auto next = results::next_step(ctx_.judged_so_far(), moment());
    ctx_.took(next);
    if (next.step == results::Step::finish) {
      if (!next.reason.empty()) log_debug(fmt::format("run: to the verdict: {}", next.reason));
      return finish();
    }
    run_step(next);
    // The step recorded what it saw; what it means (findings, the phase's status, what next_step
    // reads) is judging's, decided here as the step returns.
    ctx_.judge_pending();
  }
}

void RunSession::run_step(const results::NextStep& next) {
  switch (next.step) {
    case results::Step::world:
      if (world_step(ctx_))
        ctx_.saw(results::AskedSeen{ctx_.requested_transports(), pairwise_settings(ctx_.o)});
      return;
    case results::Step::rendezvous:
      rendezvous_step(ctx_, store_);
      return;
    case results::Step::mesh:
      if (ctx_.o.hold_after_join_s > 0) std::this_thread::sleep_for(ms(ctx_.o.hold_after_join_s));
      // The liveness watch runs from here on, so a rank frozen or killed during the mesh probe is
      // named (PEER_STALLED / PEER_LOST) and the pairs it failed are its consequences.
      if (live_.fits_before_mesh(store_.join))
        live_.start(*store_.store, store_.join, store_.self.local_address);
      mesh_ran_ = true;
      mesh_step(ctx_, store_, live_, mesh_);
      return;
    case results::Step::transports:
      transports_phase(ctx_, store_, live_);
      return;
    case results::Step::pairwise:  // harness/run/pairwise_step.h
      pairwise_summaries_step(ctx_, store_, live_, pairwise_);
      return;
    case results::Step::pairwise_rounds:  // rank 0: with the plan next_step decided
      pairwise_rounds_step(ctx_, store_, live_, next.pairwise_plan, pairwise_);
      return;
    case results::Step::finish:
      return;
  }
}

results::RunMoment RunSession::moment() const {
  results::RunMoment now;
  now.live.stopped = live_.stopped_ranks();
  now.live.rank0_stopped = live_.rank0_stopped();
  now.live.store_frozen = store_.frozen;
  now.steps_left_s = std::chrono::duration<double>(ctx_.steps_deadline - Clock::now()).count();
  return now;
}

// A rank that reached the store and stops before the mesh (its own error at the join) says so in
// the mesh's keys (rendezvous/mesh.h publish_left_mesh): the ranks that go on neither wait for its
// address nor leave it to the mesh deadline. Nobody reads the keys when the others stop too.
void RunSession::say_left_before_mesh() {
  if (mesh_ran_ || !store_.store || !ctx_.have_world || ctx_.world.rank == 0) return;
  std::string why = "it stopped before the mesh";
  {
    std::lock_guard lock(ctx_.record.mu);
    for (const auto& f : ctx_.record.verdict.findings)
      if (f.severity == results::Severity::error) {
        why = std::string(f.code.str()) + ": " + f.message;
        break;
      }
  }
  try {
    rendezvous::publish_left_mesh(*store_.store, ctx_.world.rank, why);
  } catch (const rendezvous::StoreError& e) {
    log_debug(fmt::format("mesh: could not say this rank left ({})", e.what()));
  }
}

// The network devices' second reading: the interface that holds this rank's address (the one it
// reached the store from) and every RDMA port, against the world step's reading.
void RunSession::read_nics_at_end() {
  if (!ctx_.have_world || !ctx_.nic_start.read) return;
  std::vector<std::string> interfaces;
  if (!store_.self.interface.empty()) interfaces.push_back(store_.self.interface);
  auto end = node::read_nic_snapshot(ctx_.nic_start.root, &interfaces);
  ctx_.saw(results::NicsSeen{node::nic_facts(ctx_.nic_start, end, interfaces), ctx_.self()});
}

// What the judge needs beyond the record (called with RunRecord::mu held: the allowed order).
results::LocalFacts RunSession::local_facts() const {
  results::LocalFacts facts;
  facts.watch_lost = live_.lost_ranks();
  facts.rank0_hosts_store = !ctx_.world.external_store;
  facts.duration_s = rendezvous::seconds_since(ctx_.start);
  facts.tampered = store_.tampered->snapshot();
  facts.rank = ctx_.world.rank;
  facts.host = ctx_.world.hostname;
  if (!ctx_.world.store_host.empty())
    facts.store = rendezvous::join_host_port(ctx_.world.store_host,
                                             static_cast<uint16_t>(ctx_.world.store_port));
  return facts;
}

int RunSession::finish() {
  if (watchdog_code_ >= 0) return watchdog_code_;  // its verdict is the run's
  read_nics_at_end();
  ctx_.judge_pending();  // what the liveness watch saw since the last step
  say_left_before_mesh();
  results::Verdict local;
  {
    std::lock_guard lock(ctx_.record.mu);
    auto& v = ctx_.record.verdict;
    results::judge_local(v, local_facts());
    local = v;
  }
  ctx_.write(ctx_.local_path(), local);

  results::Verdict shown = local;
  if (ctx_.have_world && ctx_.world.rank == 0 && store_.store)
    shown = gather_global(ctx_, store_, mesh_, live_, local);
  else if (store_.store)
    post_local(ctx_, store_, live_, local);
  else if (ctx_.have_world && ctx_.world.rank == 0)
    // Stopped before there was a store (a bad --profiles, a port it cannot serve): nothing to
    // gather, and a config error must still leave verdict.json saying so.
    shown = write_own_view_as_global(local);
  // A clean goodbye: peers must not read this rank's exit as a death.
  live_.stop();
  if (store_.server) store_.server->stop();
  if (log_is_json()) log_verdict_json(shown);
  print_run_summary(shown, ctx_.o.table_format, ctx_.o.quiet);  // harness/common/summary_tables.h
  return ctx_.exit_code(shown);
}

// With --log-format json every line of the process is one JSON object (a container's stdout and
// stderr end in one log stream): the summary's headline and each warning or error finding, with
// its code, are log lines instead of the human summary on stdout (verdict.json holds the rest).
void RunSession::log_verdict_json(const results::Verdict& shown) const {
  log_set_phase("verdict");
  const std::string summary = results::human_summary(shown);
  log_line(shown.exit_code == 0 ? LogLevel::info : LogLevel::error,
           summary.substr(0, summary.find('\n')));
  for (const auto& f : shown.findings) {
    if (f.severity != results::Severity::error && f.severity != results::Severity::warning)
      continue;
    log_finding(f.severity == results::Severity::error ? LogLevel::error : LogLevel::warn,
                std::string(f.code.str()), f.message);
  }
}

results::Verdict RunSession::write_own_view_as_global(const results::Verdict& v) {
  results::WorldRoster roster;
  roster.world_size = ctx_.world.world_size;
  roster.duration_s = rendezvous::seconds_since(ctx_.start);
  auto global = results::judge_world({v}, roster, nullptr);
  ctx_.write(ctx_.global_path(), global);
  // A run that stopped before the gather (a config error, the watchdog) still names its
  // suspects for the next run's --exclude-file, as the gathered one does.
  write_suspects_file(ctx_, global);
  return global;
}

// The backstop: the steps stop at steps_deadline and write the verdict by run_deadline; if
// something still runs kWatchdogGrace past --timeout (or on a signal), write what we know and leave.
void RunSession::watch(const std::atomic<bool>& finished) {
  auto hard = ctx_.run_deadline + kWatchdogGrace;
  auto stop_signal = [&] { return hooks_.handle_signals ? int(g_stop_signal) : 0; };
  while (!finished && Clock::now() < hard && stop_signal() == 0)
    std::this_thread::sleep_for(Millis{50});
  if (finished) return;
  // mpirun SIGTERMs every survivor at once: say goodbye before anything else, so the others do
  // not name this rank lost while they write their own verdicts. (Not holding record.mu: the
  // watch's callbacks take it.)
  live_.stop();
  results::Verdict v;
  std::vector<results::Phase> ended;
  {
    std::lock_guard lock(ctx_.record.mu);
    // What was seen and not judged yet, then the ending itself (its rule names the last phase).
    ended = ctx_.judge_pending_locked();
    if (int sig = stop_signal())
      ctx_.record.pending.push_back({results::RunTerminatedSeen{ctx_.self(),
                                                                sig == SIGTERM ? "SIGTERM" : "SIGINT",
                                                                rendezvous::seconds_since(ctx_.start),
                                                                termination_of(ctx_.world.source)},
                                     {}, 0, {}});
    else
      ctx_.record.pending.push_back({results::RunTimeoutSeen{ctx_.self(), ctx_.o.timeout_s}, {}, 0, {}});
    ctx_.judge_pending_locked();
    auto& rv = ctx_.record.verdict;
    results::judge_local(rv, local_facts());
    v = rv;
  }
  for (const auto& p : ended) ctx_.log_phase_end(p);
  // The stuck phase, said on stderr too (the verdict's last finding is this one).
  if (!v.findings.empty())
    log_error(fmt::format("run: {}: {} (last phase finished: {})", v.findings.back().code,
                          v.findings.back().message,
                          v.phases.empty() ? std::string("none") : v.phases.back().name));
  ctx_.write(ctx_.local_path(), v);
  // Rank 0 cannot gather any more, but what it knows (a peer already named lost, the phases so
  // far) is the world's verdict for whoever reads verdict.json.
  if (ctx_.have_world && ctx_.world.rank == 0) v = write_own_view_as_global(v);
  if (log_is_json()) log_verdict_json(v);
  print_run_summary(v, ctx_.o.table_format, ctx_.o.quiet);
  const int code = ctx_.exit_code(v);  // the judged verdict's, or kExitVerdictNotWritten
  if (!hooks_.exit) std::_Exit(code);
  watchdog_code_ = code;
  hooks_.exit(code);
}

}  // namespace ncclsmoke::harness
