#include "harness/run/gather.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "harness/actions/slurm_drain.h"
#include "harness/common/progress.h"
#include "harness/run/set_aside.h"
#include "harness/run/transport_phase.h"
#include "rendezvous/net.h"
#include "rendezvous/store_util.h"
#include "results/history/history.h"
#include "results/judging/judge_run.h"
#include "results/verdict/alike.h"

namespace ncclsmoke::harness {

using namespace ncclsmoke::rendezvous;

namespace {

// Verdicts read in one MULTI_GET (typical posts are tens of KB: about 2 MB a reply).
constexpr std::size_t kGatherBatch = 64;

// --history: the global verdict goes into the run history too. A history that cannot be written
// costs nothing else: the verdict file is already on disk, and the error names the file.
void record_history(const RunContext& ctx, const results::Verdict& global) {
  if (ctx.o.history_path.empty()) return;
  try {
    results::History h(ctx.o.history_path, true);
    h.add(global, "run");
  } catch (const std::exception& e) {
    // An error line: --history asked for it, and --quiet must still say it did not happen.
    log_error(fmt::format("ncclsmoke: rank 0: run {} not recorded in history {}: {} (the verdict "
                          "is in {}; import it later with `ncclsmoke history import`)",
                          global.run_id, results::redact_history_url(ctx.o.history_path),
                          e.what(), ctx.global_path()));
  }
}

// Whether this rank's own watch found rank 0 frozen (PEER_STALLED, still an error: it never
// answered again) or dead (the watch's PEER_LOST). A loss only the mesh or a transport inferred
// does not count: rank 0 may be alive and gathering.
bool names_rank_zero_gone(const results::Verdict& local) {
  using results::Code;
  return std::any_of(local.findings.begin(), local.findings.end(), [](const results::Finding& f) {
    const bool watched = f.code == Code::PEER_STALLED ||
                         (f.code == Code::PEER_LOST &&
                          f.origin == results::FindingOrigin::liveness_watch);
    return watched && f.severity == results::Severity::error && f.ranks == std::vector<int>{0};
  });
}

}  // namespace

results::Verdict posted_view(const results::Verdict& local) {
  results::Verdict view = local;
  view.transports.clear();
  return view;
}

void post_local(const RunContext& ctx, const StoreSession& s, const Liveness& live,
                const results::Verdict& local) {
  if (s.frozen) return;              // a post would only wait out its timeout
  if (live.rank0_stopped()) return;  // rank 0 (the store) is gone or frozen: our file says so
  // Our own verdict already says rank 0 died or froze, though the watch may not say so yet (it
  // saw it first, then the store went quiet): the post would wait out the store's timeout.
  if (names_rank_zero_gone(local)) return;
  try {
    s.store->set(fmt::format("verdict/{}", ctx.world.rank),
                 results::to_json(posted_view(local))
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } catch (const StoreError&) {
    // Rank 0 is gone; our local verdict on disk already says so.
    return;
  }
  if (ctx.exit_code(local) == 0) return;
  // A failing rank stays until rank 0 has written the world's verdict: its non-zero exit is what
  // makes mpirun (and torchrun's agent, for the ranks of its node) kill the job's other
  // processes, rank 0 among them, mid-gather. Bounded by the run's deadline, and over as soon as
  // the watch sees rank 0 stop.
  const Deadline until = ctx.run_deadline;
  while (Clock::now() < until && !live.rank0_stopped()) {
    try {
      s.store->wait({std::string(kVerdictWrittenKey)}, earliest(deadline_after(Millis{250}), until));
      return;
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) return;  // the store (rank 0) went away
    }
  }
}

results::Verdict gather_global(RunContext& ctx, const StoreSession& s, const MeshResult& mesh,
                               const Liveness& live, const results::Verdict& local) {
  test_pause_point("gather", ctx.world.rank);  // test-only (NCCLSMOKE_TEST_PAUSE_AT)
  std::vector<results::Verdict> views{local};
  // A rank is late only when no verdict at all has arrived for `window`: rank 0 looks at every
  // pending rank in turn, without blocking on one. Waiting on each rank in join order with one
  // shared window named healthy ranks lost at 1024 ranks on 2 CPUs: rank 0 sat on rank 2's key
  // while a thousand others posted, and its own parsing ate the window. It stops within the
  // run's verdict reserve, leaving its last fifth for the merge and the write, so the world's
  // verdict is on disk by --timeout.
  const auto window = ms(std::max(5.0, ctx.o.pair_timeout_s * 2));
  const Deadline hard_stop = ctx.steps_deadline + (ctx.run_deadline - ctx.steps_deadline) * 4 / 5;
  std::map<int, results::Verdict> got;
  std::map<int, std::pair<std::string, std::string>> unreadable;  // rank -> (key, problem)
  std::vector<const Identity*> pending, late;
  std::vector<int> taken_for_dead;  // ranks rank 0 took for dead whose verdict came anyway
  for (const auto& id : s.join.present)
    if (id.rank != 0) pending.push_back(&id);
  auto last_arrival = Clock::now();
  const auto gather_start = last_arrival;
  while (!pending.empty()) {
    bool progressed = false;
    // A rank the mesh probe found silent, or the watch saw die, is dead: its verdict will not
    // come, and waiting for it only delays the global verdict (the kill -9 scenario). Even so it
    // may have stopped on its own error and posted its verdict before leaving: it is looked at
    // once. A rank that said it left before its mesh probe (a WORLD_SIZE of its own, a port range
    // too small) is not dead: it posts its verdict as it stops, so it gets the window like any
    // rank, even once its silence makes the watch call it stopped. The watch is asked each round:
    // a rank may die while the others are being gathered.
    const auto stopped = live.stopped_ranks();
    const std::set<int> lost(stopped.begin(), stopped.end()),
        silent(mesh.silent_ranks.begin(), mesh.silent_ranks.end()),
        left(mesh.left_ranks.begin(), mesh.left_ranks.end());
    // Pending ranks in batches: one CHECK of a batch, halved down to the absent ones, and one
    // MULTI_GET of those present (store_util.h get_present), instead of a CHECK and a GET a
    // rank: two round trips for 64 posts that are all in, not 128. A batch whose
    // read fails (a reply past the store's output limit: 64 posts near their 8 MiB cap) is read a
    // rank at a time.
    std::vector<const Identity*> still;
    for (std::size_t at = 0; at < pending.size(); at += kGatherBatch) {
      const std::size_t end = std::min(pending.size(), at + kGatherBatch);
      std::vector<std::string> keys;
      for (std::size_t i = at; i < end; ++i) keys.push_back(fmt::format("verdict/{}", pending[i]->rank));
      std::vector<bool> present;
      std::vector<std::string> texts;
      bool batch_read = false;
      try {
        texts = get_present(*s.store, keys, Clock::now(), present);
        batch_read = true;
      } catch (const std::exception&) {
      }
      for (std::size_t i = at; i < end; ++i) {
        const auto& id = *pending[i];
        const bool known_dead =
            !left.count(id.rank) && (silent.count(id.rank) || lost.count(id.rank));
        const std::string& key = keys[i - at];
        std::optional<std::string> text;
        if (batch_read) {
          if (present[i - at]) text = std::move(texts[i - at]);
        } else {
          try {
            if (s.store->check({key}))
              text = s.store->get(key, earliest(deadline_after(Millis{1000}), hard_stop));
          } catch (const std::exception&) {
          }
        }
        const bool fetched = text.has_value();
        if (fetched) {
          // The one-pass reader first (what the schema surely accepts); anything unusual takes
          // the bounded, validating path, which names the problem: a post too big, too deep or
          // not a verdict is that rank's answer (a finding naming it), never a crash.
          try {
            auto v = results::verdict_from_text(*text, kMaxVerdictJsonBytes);
            // Every rank reports the same exchanged sweep figures; rank 0's copy is the world's
            // (a post from this version carries none).
            v.transports.clear();
            got.emplace(id.rank, std::move(v));
          } catch (const results::VerdictFormatError& e) {
            unreadable[id.rank] = {key, e.what()};
            log_error(fmt::format("ncclsmoke: rank 0: the verdict posted for {} cannot be read: {}",
                                  RankRef{id.rank, id.host}, e.what()));
          }
        }
        if (fetched && known_dead) taken_for_dead.push_back(id.rank);
        if (fetched || known_dead) {
          if (!fetched) late.push_back(&id);
          progressed = progressed || fetched;
        } else {
          still.push_back(&id);
        }
      }
    }
    pending = std::move(still);
    const auto now = Clock::now();
    if (progressed) last_arrival = now;
    if (pending.empty() || now >= hard_stop || now - last_arrival >= window) break;
    if (!progressed) std::this_thread::sleep_for(Millis{20});
  }
  late.insert(late.end(), pending.begin(), pending.end());
  results::WorldRoster roster;
  for (const auto& id : s.join.present) {
    roster.joined.push_back({id.rank, id.host, id.local_address, id.world_size});
    auto it = got.find(id.rank);
    if (it == got.end()) continue;
    views.push_back(std::move(it->second));
    roster.posted_as.push_back(id.rank);
  }
  roster.world_size = ctx.world.world_size;
  roster.taken_for_dead = std::move(taken_for_dead);
  roster.duration_s = seconds_since(ctx.start);
  roster.gathered_s = seconds_since(gather_start);
  const auto alive = live.alive_ranks();
  for (const auto* id : late)
    roster.unreported.push_back({id->rank, id->host, alive.count(id->rank) > 0});
  for (const auto& id : s.join.present)
    if (auto bad = unreadable.find(id.rank); bad != unreadable.end())
      roster.unreadable.push_back({id.rank, id.host, bad->second.first, bad->second.second});
  roster.tampered = s.tampered->snapshot();
  roster.reporting_host = ctx.world.hostname;
  roster.store = join_host_port(ctx.world.store_host, static_cast<uint16_t>(ctx.world.store_port));
  auto tj = Clock::now();
  log_set_phase("judge");
  log_info(phase_start_line("judge", ctx.profile ? fmt::format("profile {}", ctx.o.profile)
                                                 : std::string("no profile")));
  auto global = results::judge_world(std::move(views), roster, ctx.profile);
  log_info(phase_end_line("judge", "done", seconds_since(tj),
                          fmt::format("{} findings", global.findings.size())));
  // --slurm-drain: drain the suspects of a failing run, resume ncclsmoke's drains after a pass;
  // the verdict's "slurm-drain" phase says what was done (harness/actions/slurm_drain.h).
  if (ctx.o.slurm_drain)
    slurm_set_aside({ctx.environment, ctx.o.slurm_drain_budget, ctx.run_deadline}, global);
  auto tw = Clock::now();
  log_set_phase("write");
  log_info(phase_start_line("write", ctx.global_path()));
  // The file (and the history) hold the healthy majority of a fleet-size world summarised
  // (results/verdict/alike.h); the summary printed below is drawn from every rank's detail.
  const auto as_written = results::summarise_alike(global);
  ctx.write(ctx.global_path(), as_written);
  log_info(phase_end_line("write", ctx.write_failed ? "fail" : "done", seconds_since(tw),
                          fmt::format("verdict {} (exit {})", global.verdict, ctx.exit_code(global))));
  write_suspects_file(ctx, global);  // OUT/suspects.txt, for --exclude-file (harness/run/set_aside.h)
  try {
    s.store->set(std::string(kVerdictWrittenKey), global.run_id);  // failing ranks may leave now
  } catch (const StoreError&) {
  }
  record_history(ctx, as_written);
  return global;
}

}  // namespace ncclsmoke::harness
