#pragma once
// One rank's `ncclsmoke run`: the sequencer (world -> rendezvous -> mesh -> transports ->
// pairwise -> the verdict; which step runs next is results::next_step's, results/judging/
// next_step.h, over the step records and the present moment) plus the watchdog. Every step has
// its own deadline and the run has one (--timeout); past it (+ 3 s for the verdict itself), or on SIGTERM/SIGINT, the watchdog writes what this
// rank knows (RUN_TIMEOUT / RUN_TERMINATED) and exits, so no rank hangs past --timeout.
//
// The steps live in their own files (world_step, rendezvous_step, mesh_step, transports_step,
// gather; liveness for the peer watch); the rules they apply in results/judging/. The watchdog
// and the steps share RunContext::record under its one mutex (harness/run/run_context.h).
#include <atomic>
#include <functional>
#include <string>

#include "harness/run/liveness.h"
#include "harness/run/pairwise_step.h"
#include "harness/run/rendezvous_step.h"
#include "harness/run/run_context.h"
#include "harness/run/run_options.h"
#include "rendezvous/mesh.h"
#include "results/judging/judge_run.h"
#include "results/judging/next_step.h"

namespace ncclsmoke::harness {

// What a process-wide run and an in-process one (N ranks as threads of one test) do differently.
// The defaults are the process's: its environment, its signals, and _Exit from the watchdog.
struct RunHooks {
  // The launcher's variables the world is discovered from.
  Environment environment = process_environment();
  // SIGTERM/SIGINT end the run in a RUN_TERMINATED verdict. Off in-process: the handlers are the
  // process's, shared by every rank of it.
  bool handle_signals = true;
  // How the watchdog ends a run whose steps overran --timeout, after it wrote the verdict: empty
  // is std::_Exit(code). Otherwise it is called with the code and the watchdog returns; the
  // steps end at their own deadlines, write nothing more, and run() returns that code.
  std::function<void(int code)> exit;
};

class RunSession {
 public:
  RunSession(RunOptions o, std::string log_env, RunHooks hooks = {})
      : ctx_(std::move(o), std::move(log_env)), hooks_(std::move(hooks)) {
    ctx_.environment = std::move(hooks_.environment);  // RunContext keeps it for the steps
  }
  int run();  // the exit code

 private:
  int run_steps();
  void run_step(const results::NextStep& next);
  // What the liveness watch says and the time left, sampled before each decision.
  results::RunMoment moment() const;
  int finish();                               // this rank's verdict, then the world's on rank 0
  // Rank 0 with no gather to run (stopped before the store, or by the watchdog): its own view as
  // the world's verdict, written to verdict.json, so the CronJob still publishes why.
  results::Verdict write_own_view_as_global(const results::Verdict& v);
  void log_verdict_json(const results::Verdict& shown) const;
  results::LocalFacts local_facts() const;
  void read_nics_at_end();
  void say_left_before_mesh();
  void watch(const std::atomic<bool>& done);  // the watchdog thread; may _Exit

  RunContext ctx_;
  RunHooks hooks_;
  // Set by the watchdog when it ended the run through hooks_.exit: the code it wrote. The steps
  // stop at the next decision and finish() writes nothing over the watchdog's verdict.
  std::atomic<int> watchdog_code_{-1};
  Liveness live_{ctx_};
  StoreSession store_;
  rendezvous::MeshResult mesh_;
  bool mesh_ran_ = false;  // the mesh step began (say_left_before_mesh)
  PairwiseState pairwise_;
};

}  // namespace ncclsmoke::harness
