// `ncclsmoke run`: one process per rank. world -> rendezvous (store join) -> mesh -> verdict.
// Every phase has its own deadline and the run has one; a watchdog writes a RUN_TIMEOUT verdict
// and exits if anything overstays, so no rank can hang past --timeout.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "harness/cli_util.h"
#include "harness/log.h"
#include "harness/progress.h"
#include "harness/commands.h"
#include "harness/probe_findings.h"
#include "harness/run_options.h"
#include "harness/transport_phase.h"
#include "harness/world.h"
#include "ncclsmoke/version.h"
#include "rendezvous/connect.h"
#include "rendezvous/join.h"
#include "rendezvous/mesh.h"
#include "rendezvous/peer_watch.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/store_owner.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "results/classify.h"
#include "results/env_allowlist.h"
#include "results/finding_codes.h"
#include "results/history.h"
#include "results/judge.h"
#include "results/merge.h"
#include "results/profile.h"
#include "results/summary.h"
#include "results/verdict.h"
#include "results/write.h"

namespace ncclsmoke::harness {
namespace {

using namespace ncclsmoke::rendezvous;
namespace fs = std::filesystem;

// Flags are checked at the door (run_options.cpp); this stays defined for any other caller: a
// non-finite or non-positive value is no time at all, a huge one is capped.
Millis ms(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0) return Millis(0);
  return Millis(static_cast<long long>(std::min(seconds, kMaxSeconds) * 1000));
}


// Set by SIGTERM/SIGINT; the run's watchdog thread turns it into a verdict (async-signal-safe:
// the handler only stores).
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

std::string random_token() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(dist(rd)));
  return buf;
}

// The address this host uses to reach `host`: a connected UDP socket sends nothing, but the
// kernel picks the route and the source address.
std::string route_source_address(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return "";
  std::string out;
  for (addrinfo* ai = res; ai && out.empty(); ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        std::string hp = format_address(reinterpret_cast<sockaddr*>(&ss), len);
        std::string h;
        uint16_t p;
        if (split_host_port(hp, h, p)) out = h;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

std::string host_part(const std::string& host_port) {
  std::string h;
  uint16_t p;
  return split_host_port(host_port, h, p) ? h : host_port;
}

// Whether a finding with `code` already names `rank` (one finding per dead or frozen rank).
bool names_rank(const std::vector<results::Finding>& findings, const std::string& code, int rank) {
  return std::any_of(findings.begin(), findings.end(), [&](const results::Finding& f) {
    return f.code == code && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end();
  });
}

class RunSession {
 public:
  explicit RunSession(RunOptions o, std::string log_env)
      : o_(std::move(o)), log_env_(std::move(log_env)), start_(Clock::now()) {
    run_deadline_ = start_ + ms(o_.timeout_s);
    verdict_ = results::new_verdict(-1);
    verdict_.env = results::allowlisted_env();
    verdict_.versions["ncclsmoke"] = kVersion;
  }

  int run() {
    // SIGTERM/SIGINT (a Job's activeDeadlineSeconds, a deleted pod) still end in a verdict: the
    // watchdog sees the flag and writes what this rank knows, with a RUN_TERMINATED finding.
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGINT, on_stop_signal);
    std::atomic<bool> finished{false};
    std::thread watchdog([&] { watch(finished); });
    int code = run_phases();
    finished = true;
    watchdog.join();
    return code;
  }

 private:
  // ---- phases --------------------------------------------------------------------------------

  int run_phases() {
    // --out-dir is created (with parents) so a pod's emptyDir path or a fresh directory works; a
    // failure shows when the verdict is written, which names the path.
    if (!o_.out_dir.empty()) {
      std::error_code ec;
      fs::create_directories(o_.out_dir, ec);
    }
    if (!discover()) return finish();
    if (!rendezvous()) return finish();
    if (o_.hold_after_join_s > 0) std::this_thread::sleep_for(ms(o_.hold_after_join_s));
    // The liveness watch runs from here on, so a rank frozen or killed during the mesh probe is
    // named (PEER_STALLED / PEER_LOST) and the pairs it failed are its consequences.
    if (watch_fits_before_mesh()) start_peer_watch();
    bool mesh_ok = mesh();
    transports_phase(mesh_ok);
    return finish();
  }

  bool discover() {
    auto t0 = Clock::now();
    auto wr = discover_world(o_.world, process_environment());
    for (const auto& c : wr.findings) {
      auto f = config_finding(c);
      f.hosts.push_back(local_hostname());
      add(std::move(f));
    }
    if (!wr.world) {
      end_phase("world", "fail", t0, "invalid configuration");
      return false;
    }
    world_ = *wr.world;
    have_world_ = true;
    log_level_ = run_log_level(world_.rank, o_.quiet, o_.verbose, log_env_);
    log_for_rank(world_.rank, log_level_);
    log_info(phase_start_line("world"));
    {
      std::lock_guard lock(mu_);
      verdict_.reporting_rank = world_.rank;
      verdict_.world.size = world_.world_size;
      verdict_.world.master_addr = world_.master_addr;
      verdict_.world.master_port = world_.master_port;
      verdict_.world.source = world_.source;
      verdict_.world.job_id = world_.job_id;
      verdict_.world.job_id_source = world_.job_id_source;
      verdict_.world.restart_count = world_.restart_count;
      verdict_.world.sources = world_.sources_by_field;
    }
    if (!load_profile()) {
      end_phase("world", "fail", t0, "invalid profile");
      return false;
    }
    gate_sweep_from_profile();
    end_phase("world", "pass", t0, describe(world_));
    return true;
  }

  // --gate without sweep flags: measure exactly the gate size the profile's bands use for this
  // world size (when the requested transports' bands agree on one), so the gate is one quick
  // size and never inconclusive for a size mismatch.
  void gate_sweep_from_profile() {
    if (!o_.gate || o_.sweep_explicit || !profile_) return;
    std::set<std::int64_t> sizes;
    std::stringstream list(o_.transports);
    for (std::string t; std::getline(list, t, ',');) {
      const auto* te = results::find_transport(*profile_, t);
      const auto* band = te ? results::find_band(*te, world_.world_size) : nullptr;
      if (band) sizes.insert(band->gate_bytes);
    }
    if (sizes.size() != 1) return;
    o_.min_bytes = o_.max_bytes = o_.gate_bytes = std::to_string(*sizes.begin());
  }

  // The profile is read before touching the network, so a typo in the ConfigMap fails fast and
  // names the field, on every rank.
  bool load_profile() {
    if (o_.profile.empty()) return true;
    auto bad = [&](const std::string& message, const std::string& fix) {
      add(results::Finding{"CONFIG_INVALID", "error", "config", {world_.rank}, {world_.hostname},
                           message, fix,
                           nlohmann::json{{"variable", "--profiles"}, {"value", o_.profiles_file}}});
      return false;
    };
    try {
      profiles_ = results::load_profiles_file(o_.profiles_file);
    } catch (const std::exception& e) {
      return bad("cannot use --profiles " + o_.profiles_file + ": " + e.what(),
                 "Fix the profiles file (see results/profiles.example.yaml).");
    }
    profile_ = results::find_profile(profiles_, o_.profile);
    if (!profile_) {
      std::string names;
      for (const auto& p : profiles_) names += (names.empty() ? "" : ", ") + p.name;
      return bad("--profile " + o_.profile + " is not in " + o_.profiles_file,
                 "Pick one of: " + names);
    }
    return true;
  }

  // The run's namespace in the store: ncclsmoke/<job>/<restart>/..., so nothing collides with
  // torch's agent keys, a training job sharing the store, another job on the same port, or an
  // earlier attempt of this one under torchrun.
  std::string job_namespace() const {
    return (world_.job_id.empty() ? std::string("local") : world_.job_id) + "/" +
           std::to_string(world_.restart_count);
  }

  bool hosts_store() const { return world_.rank == 0 && !world_.external_store; }

  bool rendezvous() {
    auto t0 = Clock::now();
    log_info(phase_start_line("rendezvous", hosts_store() ? "serving the store on port " +
                                                              std::to_string(world_.master_port)
                                                        : "store at " + world_.store_host + ":" +
                                                              std::to_string(world_.store_port)));
    if (hosts_store() && !start_server(t0)) return false;

    // Rank 0 reaches its own store over loopback: a firewall rule against the master port must
    // only show on the other ranks, as it does in a cluster. A store someone else hosts (torch's
    // elastic agent, --store) is reached like any rank would, in whatever dialect it speaks.
    TcpStoreOptions opt;
    opt.host = hosts_store() ? loopback_host() : world_.store_host;
    opt.port = world_.store_port;
    opt.dialect = wire::Dialect::modern;
    opt.negotiate = world_.external_store;
    opt.op_timeout = ms(std::max(5.0, o_.mesh_timeout_s));
    auto connect_deadline = earliest(start_ + ms(o_.connect_timeout_s), run_deadline_);
    try {
      client_ = TcpStore::connect(opt, connect_deadline);
    } catch (const StoreError& e) {
      add(connect_finding(e, world_, seconds_since(t0)));
      end_phase("rendezvous", "fail", t0, e.what());
      return false;
    }
    raw_store_ = std::make_shared<PrefixStore>("ncclsmoke", *client_);
    store_ = std::make_shared<PrefixStore>(job_namespace(), raw_store_);
    record_store_info();
    test_pause_point("rendezvous", world_.rank);  // test-only (NCCLSMOKE_TEST_PAUSE_AT)

    const auto& rep = client_->connect_report();
    Identity self;
    self.rank = world_.rank;
    self.world_size = world_.world_size;
    self.host = world_.hostname;
    self.node = world_.node_name;
    self.pid = static_cast<int>(::getpid());
    self.token = random_token();
    if (world_.rank == 0) {
      self.local_address = route_source_address(world_.master_addr, world_.master_port);
      if (self.local_address.empty()) self.local_address = host_part(rep.local_address);
    } else {
      self.local_address = host_part(rep.local_address);
    }
    self.interface = rep.local_interface;
    if (world_.rank == 0 || self.interface.empty()) {
      sockaddr_storage ss{};
      if (fill_sockaddr(self.local_address, ss)) self.interface = interface_of(reinterpret_cast<sockaddr*>(&ss));
    }
    self_ = self;

    auto join_deadline = earliest(start_ + ms(o_.join_timeout_s), run_deadline_);
    try {
      if (!meet_own_job(join_deadline, t0)) return false;
      adopt_run_id(join_deadline);
      JoinWatch jw;  // rank 0: a line every 5 s while ranks are missing
      jw.on_progress = [this](const JoinProgress& p) {
        // The join deadline is --join-timeout from the start, cut by --timeout.
        log_info(join_wait_line(p, seconds_since(start_),
                                std::min(o_.join_timeout_s, o_.timeout_s)));
      };
      join_ = join_world(*store_, self, join_deadline, Millis{2000}, jw);
    } catch (const StoreError& e) {
      add(lost_finding(stalled_if_silent(e), world_, "the join barrier"));
      end_phase("rendezvous", "fail", t0, e.what());
      return false;
    }
    record_ranks();
    for (auto& f : join_findings(join_, world_, o_.join_timeout_s)) add(std::move(f));
    bool ok = join_.complete() && join_.roster_received;
    end_phase("rendezvous", ok ? "pass" : "fail", t0,
              std::to_string(join_.present.size()) + "/" + std::to_string(world_.world_size) +
                  " ranks joined");  // the phase line and table carry the duration
    // Missing ranks don't stop the others: the mesh among those present is still worth knowing.
    return join_.roster_received && !join_.master_world_size && !join_.rank_taken_by;
  }

  bool mesh() {
    auto t0 = Clock::now();
    log_info(phase_start_line("mesh", std::to_string(join_.present.size()) + " ranks"));
    MeshOptions m;
    m.rank = world_.rank;
    for (const auto& id : join_.present) m.ranks.push_back(id.rank);
    m.bind_address = o_.mesh_bind.empty() ? self_.local_address : o_.mesh_bind;
    m.advertise_address = m.bind_address;
    parse_port_range(o_.mesh_port_range, m.port_min, m.port_max);
    m.full_mesh_threshold = o_.mesh_threshold;
    m.random_peers = o_.mesh_random_peers;
    m.pair_timeout = ms(o_.pair_timeout_s);
    m.deadline = earliest(Clock::now() + ms(o_.mesh_timeout_s), run_deadline_);
    m.after_publish = [this] { test_pause_point("mesh", world_.rank); };
    try {
      mesh_ = run_mesh_probe(*store_, m);
    } catch (const StoreError& e) {
      if (e.error_class() == ErrorClass::invalid || e.error_class() == ErrorClass::other) {
        add(results::Finding{"MESH_BLOCKED", "error", "mesh", {world_.rank}, {world_.hostname},
                             std::string("rank ") + std::to_string(world_.rank) +
                                 " could not run the mesh probe: " + e.what(),
                             "Check --mesh-bind / --mesh-port-range on this host.", nullptr});
      } else {
        add(lost_finding(e, world_, "the mesh probe"));
      }
      end_phase("mesh", "fail", t0, e.what());
      return false;
    }
    std::map<int, std::string> hosts;
    for (const auto& id : join_.present) hosts[id.rank] = id.host;
    // A probe the deadline cut short is inconclusive (pairs not tested), not failed; the
    // transports still run then, under their own deadlines.
    // Pairs that failed because one end froze or died are that rank's consequence, not a network
    // verdict: the watch's own PEER_STALLED / PEER_LOST names it (rendezvous/mesh.h).
    MeshResult seen = mesh_;
    auto stopped = stopped_ranks_for_mesh(seen);
    auto aside = set_aside_stopped_ranks(seen, stopped);
    MeshJudgement judged = judge_mesh(seen, world_, hosts);
    for (int r : seen.silent_ranks) mark_rank(r, "lost", "stopped answering after joining");
    for (auto& f : judged.findings) add(std::move(f));
    if (!stopped.empty()) {
      std::string who;
      for (int r : stopped) who += (who.empty() ? "rank " : ", ") + std::to_string(r);
      judged.status = "fail";
      judged.detail += "; " + who + " stopped answering (liveness watch)" +
                       (aside.empty() ? "" : ": its pairs are not tested");
      std::lock_guard lock(mu_);
      demote_consequences();
    }
    end_phase("mesh", judged.status, t0, judged.detail);
    return judged.status != "fail";
  }

  std::vector<std::string> requested_transports() const {
    std::vector<std::string> out;
    std::stringstream ss(o_.transports);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty() && item != "none") out.push_back(item);
    return out;
  }

  // Collectives need every rank and every path: with a rank missing or a pair blocked they would
  // only hang, so the transports are then listed as not run (which keeps the verdict from pass).
  void transports_phase(bool mesh_ok) {
    auto names = requested_transports();
    if (names.empty()) return;
    bool ready = mesh_ok && join_.complete() && join_.roster_received &&
                 static_cast<int>(join_.present.size()) == world_.world_size;
    if (!ready) {
      std::lock_guard lock(mu_);
      for (const auto& n : names) {
        results::Phase p;
        p.name = "transport:" + n;
        p.status = "not_run";
        p.detail = "not every rank joined and reached every other";
        verdict_.phases.push_back(p);
      }
      return;
    }
    TransportPhaseOptions to;
    to.transports = names;
    parse_size(o_.min_bytes, to.sweep.min_bytes);
    parse_size(o_.max_bytes, to.sweep.max_bytes);
    parse_size(o_.gate_bytes, to.sweep.gate_bytes);
    if (to.sweep.max_bytes < to.sweep.min_bytes) to.sweep.max_bytes = to.sweep.min_bytes;
    to.sweep.factor = o_.factor;
    to.sweep.iters = o_.iters;
    to.sweep.warmup_iters = o_.warmup_iters;
    transports::parse_dtype(o_.dtype, to.sweep.dtype);
    to.sweep.check = !o_.no_check;
    to.sweep.op_timeout = ms(o_.op_timeout_s);
    to.timeout_s = o_.transport_timeout_s;
    if (!o_.socket_ifname.empty()) to.backend_options["socket.ifname"] = o_.socket_ifname;
    if (o_.socket_nconn > 0) to.backend_options["socket.nconn"] = std::to_string(o_.socket_nconn);
    if (!o_.socket_chunk.empty()) {
      std::size_t b = 0;
      parse_size(o_.socket_chunk, b);
      to.backend_options["socket.chunk"] = std::to_string(b);
    }
    to.backend_options["fabric.provider"] = o_.fabric_provider;
    if (!o_.nccl_net.empty()) to.backend_options["nccl.net"] = o_.nccl_net;
    to.backend_options["nccl.policy"] = o_.nccl_policy;
    if (o_.nccl_share_gpu) to.backend_options["nccl.share_gpu"] = "1";
    // One GPU per rank by local rank, unless a device is named or the ranks share one on purpose.
    to.backend_options["nccl.gpu"] =
        std::to_string(o_.gpu >= 0 ? o_.gpu : (o_.nccl_share_gpu ? 0 : world_.local_rank));
    if (!o_.nccl_lib.empty()) to.backend_options["nccl.lib"] = o_.nccl_lib;
    if (!o_.cudart_lib.empty()) to.backend_options["nccl.cudart"] = o_.cudart_lib;
    to.backend_options["nccl.debug_file"] =
        (fs::path(o_.out_dir) / ("nccl-debug.rank" + std::to_string(world_.rank) + ".log")).string();
    if (!o_.fabric_hw_counters_root.empty())
      to.backend_options["fabric.hw_counters_root"] = o_.fabric_hw_counters_root;

    if (!watch_started_) start_peer_watch();
    TransportPhaseInput in;
    in.rank = world_.rank;
    in.world_size = world_.world_size;
    in.host = world_.hostname;
    for (const auto& id : join_.present) in.hosts[id.rank] = id.host;
    in.local_address = self_.local_address;
    in.store = store_.get();
    // Each size as it is measured, nccl-tests' table (harness/progress.h).
    to.sweep.on_start = [shown = to.sweep](const transports::SweepProgress& p) {
      if (!log_enabled(LogLevel::info)) return;
      std::string lines = phase_start_line("transport:" + p.transport,
                                           "open; sweep of " + std::to_string(p.sizes) + " sizes");
      for (const auto& h : sweep_header_lines(p, shown)) lines += "\n" + h;
      log_info(lines);
    };
    to.sweep.on_size = [](const transports::SweepProgress& p) { log_info(sweep_row_line(p)); };
    log_info(phase_start_line("transports", o_.transports));
    in.set_wait_state = [this](const WaitState& w) {
      std::lock_guard lock(watch_mu_);
      if (watch_) watch_->set_wait_state(w);
    };
    in.store_unusable = [this]() -> std::string {
      if (world_.external_store) return "";
      std::lock_guard lock(watch_mu_);
      if (!watch_) return "";
      for (const auto& l : watch_->lost())
        if (l.rank == 0) return "rank 0, which serves the store, died (liveness watch)";
      for (const auto& q : watch_->silent())
        if (q.rank == 0) return "rank 0, which serves the store, is frozen (liveness watch)";
      return "";
    };
    auto out = run_transports(in, to);
    settle_watch(out.findings);
    attach_wait_chains(out.findings);
    for (const auto& p : out.phases)
      log_line(p.status == "fail" ? LogLevel::error
               : p.status == "pass" || p.status == "skipped" ? LogLevel::info
                                                              : LogLevel::warn,
               phase_end_line(p.name, p.status, p.duration_s, p.detail));
    std::lock_guard lock(mu_);
    for (auto& p : out.phases) verdict_.phases.push_back(std::move(p));
    for (auto& r : out.rows) verdict_.transports.push_back(std::move(r));
    for (auto& i : out.identities) verdict_.identities.push_back(std::move(i));
    for (auto& f : out.findings) verdict_.findings.push_back(std::move(f));
    demote_consequences();
  }

  // Blame the root, not the neighbour: once the liveness watch knows a rank is frozen
  // (PEER_STALLED) or dead (its PEER_LOST), the timeouts and lost connections the transports then
  // saw among the others follow from it. They stay in the verdict as information, pointing at
  // that rank, and blame no one. Call with mu_ held.
  void demote_consequences() {
    std::vector<int> stalled;
    for (const auto& f : verdict_.findings) {
      bool from_watch = f.code == "PEER_LOST" && f.evidence.is_object() &&
                        f.evidence.value("source", "") == "liveness watch";
      if ((f.code == "PEER_STALLED" || from_watch) && f.severity == "error")
        stalled.insert(stalled.end(), f.ranks.begin(), f.ranks.end());
    }
    if (stalled.empty()) return;
    std::string who;
    for (int r : stalled) who += (who.empty() ? "rank " : ", ") + std::to_string(r);
    for (auto& f : verdict_.findings) {
      bool about_stalled = std::any_of(f.ranks.begin(), f.ranks.end(), [&](int r) {
        return std::find(stalled.begin(), stalled.end(), r) != stalled.end();
      });
      // A store finding (lost, stalled) is about rank 0 when rank 0 hosts the store.
      if ((f.code == "RENDEZVOUS_LOST" || f.code == "RENDEZVOUS_STALLED") && !world_.external_store &&
          std::find(stalled.begin(), stalled.end(), 0) != stalled.end())
        about_stalled = true;
      bool consequence = f.code == "PEER_LOST" || f.code == "TRANSPORT_TIMEOUT" ||
                         ((f.code == "RENDEZVOUS_LOST" || f.code == "RENDEZVOUS_STALLED") &&
                          about_stalled) ||
                         (f.code == "TRANSPORT_INIT_FAILED" && about_stalled);
      if (f.code == "PEER_STALLED" || !consequence || f.severity != "error") continue;
      bool watch_saw_it_die = f.code == "PEER_LOST" && f.evidence.is_object() &&
                              f.evidence.value("source", "") == "liveness watch";
      // It also died: that stays. A mesh guess "stopped answering" about a rank the watch saw
      // frozen (alive, silent) is a consequence of PEER_STALLED.
      bool frozen_not_dead = f.code == "PEER_LOST" && !watch_saw_it_die &&
                             std::all_of(f.ranks.begin(), f.ranks.end(), [&](int r) {
                               return names_rank(verdict_.findings, "PEER_STALLED", r) &&
                                      !watch_lost_locked(r);
                             });
      if (f.code == "PEER_LOST" && about_stalled && !frozen_not_dead) continue;
      f.severity = "info";
      f.message = "a consequence of " + who + " stopping (frozen or dead): " + f.message;
      if (!f.evidence.is_object()) f.evidence = nlohmann::json::object();
      f.evidence["consequence_of"] = stalled;
    }
  }

  // A rank that dies mid-run (kill -9, OOM) closes its sockets; the watch sees the EOF at once
  // and the finding lands in this rank's verdict before anything else happens, so even a verdict
  // written on the launcher's SIGTERM a second later (mpirun, a deleted pod) names the dead rank.
  void start_peer_watch() {
    watch_started_ = true;
    PeerWatchOptions po;
    po.rank = world_.rank;
    for (const auto& id : join_.present) {
      po.ranks.push_back(id.rank);
      po.hosts[id.rank] = id.host;
    }
    po.bind_address = o_.mesh_bind.empty() ? self_.local_address : o_.mesh_bind;
    po.advertise_address = po.bind_address;
    // The mesh's listener is closed by now: the watch listens in the same allowed range.
    parse_port_range(o_.mesh_port_range, po.port_min, po.port_max);
    po.full_threshold = o_.mesh_threshold;
    po.random_peers = o_.mesh_random_peers;
    po.deadline = earliest(Clock::now() + ms(std::max(2.0, o_.pair_timeout_s)), run_deadline_);
    // A frozen rank (SIGSTOP, swap) keeps its sockets open: only the missing heartbeats show it.
    po.on_silent = [this](const SilentPeer& s) { on_peer_silent(s); };
    po.on_resumed = [this](const SilentPeer& s) { on_peer_resumed(s); };
    try {
      auto w = PeerWatch::start(*store_, po, [this](const LostPeer& lost) { on_peer_lost(lost); });
      std::lock_guard lock(watch_mu_);
      watch_ = std::move(w);
    } catch (const std::exception& e) {
      // Without the watch a dead peer is still found by the collectives, only later.
      log_warn("ncclsmoke: rank " + std::to_string(world_.rank) + ": warning: no liveness watch: " +
               e.what());
    }
  }

  // The watch starts before the mesh only when transports will need it anyway (with
  // --transports none there is none, as before: a rendezvous + mesh run at scale, launch -n 1024,
  // does not pay for one). It needs its own port next to the mesh's: with a --mesh-port-range too
  // small for two per rank on this host it starts after the mesh instead (the mesh's port first).
  bool watch_fits_before_mesh() const {
    if (requested_transports().empty()) return false;
    if (o_.mesh_port_range.empty()) return true;
    uint16_t lo = 0, hi = 0;
    parse_port_range(o_.mesh_port_range, lo, hi);
    std::size_t here = 0;
    for (const auto& id : join_.present) here += id.host == world_.hostname;
    return static_cast<std::size_t>(hi - lo + 1) >= 2 * std::max<std::size_t>(here, 1);
  }

  // Ranks the watch judges frozen or dead when the mesh ends. A pair that failed "accepted, no
  // handshake" (stalled) or a rank the mesh lost may be a frozen peer the watch has not judged
  // yet (it needs silence_timeout): then wait for it, at most that long.
  std::vector<int> stopped_ranks_for_mesh(const MeshResult& m) {
    std::set<int> suspects(m.silent_ranks.begin(), m.silent_ranks.end());
    for (const auto& f : m.failures)
      if (f.error_class == ErrorClass::stalled || f.error_class == ErrorClass::reset ||
          f.error_class == ErrorClass::refused) {
        suspects.insert(f.from);
        suspects.insert(f.to);
      }
    if (!m.summary_received && world_.rank != 0) suspects.insert(0);
    suspects.erase(world_.rank);
    auto known = [&] {
      std::vector<int> out;
      std::lock_guard lock(watch_mu_);
      if (!watch_) return out;
      for (const auto& l : watch_->lost()) out.push_back(l.rank);
      for (const auto& s : watch_->silent()) out.push_back(s.rank);
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return out;
    };
    auto wait_until = earliest(deadline_after(Millis{3500}), run_deadline_);
    for (;;) {
      auto got = known();
      bool all = std::all_of(suspects.begin(), suspects.end(), [&](int r) {
        return std::binary_search(got.begin(), got.end(), r);
      });
      bool watching = [&] {
        std::lock_guard lock(watch_mu_);
        return watch_ != nullptr;
      }();
      if (all || !watching || expired(wait_until)) return got;
      std::this_thread::sleep_for(Millis{50});
    }
  }

  // Whether the watch saw `rank` die. Call with mu_ held (takes watch_mu_, never the reverse).
  bool watch_lost_locked(int rank) {
    std::lock_guard lock(watch_mu_);
    if (!watch_) return false;
    for (const auto& l : watch_->lost())
      if (l.rank == rank) return true;
    return false;
  }

  // A ring fails within microseconds of a neighbour's own failure, sooner than the watch thread
  // reads the EOF of the rank that died first: after a transport error, give the watch up to 1 s
  // to name a lost (or frozen) rank before the errors are judged, so a neighbour that closed
  // only because of it is not blamed. Nothing is waited when the watch already knows one.
  void settle_watch(const std::vector<results::Finding>& findings) {
    bool failed = std::any_of(findings.begin(), findings.end(), [](const results::Finding& f) {
      return f.severity == "error" && (f.code == "PEER_LOST" || f.code == "TRANSPORT_TIMEOUT" ||
                                       f.code == "TRANSPORT_INIT_FAILED");
    });
    if (!failed) return;
    auto until = earliest(deadline_after(Millis{1000}), run_deadline_);
    while (!expired(until)) {
      {
        std::lock_guard lock(watch_mu_);
        if (!watch_ || !watch_->lost().empty() || !watch_->silent().empty()) return;
      }
      std::this_thread::sleep_for(Millis{20});
    }
  }

  // Blame the root: each transport finding that is about waiting (a timeout, a lost peer) gets
  // this rank's wait state, every peer's the watch heard, and the chain they form ("3 waits on
  // 2, 2 on 1, 1 on 0") with its root; the summary finding of the root gets who waited on it.
  void attach_wait_chains(std::vector<results::Finding>& findings) {
    std::map<int, WaitState> states;
    std::set<int> stopped;
    {
      std::lock_guard lock(watch_mu_);
      if (!watch_) return;
      states = watch_->peer_wait_states();
      for (const auto& l : watch_->lost()) stopped.insert(l.rank);
      for (const auto& s : watch_->silent()) stopped.insert(s.rank);
    }
    if (states.empty()) return;
    auto now = Clock::now();
    nlohmann::json all = nlohmann::json::object();
    for (const auto& [r, w] : states)
      all[std::to_string(r)] = {{"phase", w.phase}, {"what", w.what}, {"waiting_on", w.waiting_on},
                                {"waited_s", w.waiting_on < 0 ? 0.0 : std::chrono::duration<double>(now - w.since).count()}};
    auto chain = follow_wait_chain(world_.rank, states, stopped);
    std::map<int, std::string> hosts;
    for (const auto& id : join_.present) hosts[id.rank] = id.host;
    bool reaches_stopped = chain.root && stopped.count(*chain.root);
    for (auto& f : findings) {
      // A timeout is what a chain explains; a lost connection names its peer itself, so only a
      // chain that runs on to a frozen or dead rank adds to it.
      if (f.code != "TRANSPORT_TIMEOUT" && !(f.code == "PEER_LOST" && reaches_stopped)) continue;
      if (!f.evidence.is_object()) f.evidence = nlohmann::json::object();
      f.evidence["wait_states"] = all;
      f.evidence["wait_chain"] = {{"path", chain.path},
                                  {"root", chain.root ? *chain.root : -1},
                                  {"root_reason", chain.root_reason},
                                  {"cycle", chain.cycle}};
      if (chain.path.size() > 1) f.message += "; wait chain: " + wait_chain_text(chain, states, hosts, now);
    }
  }

  void on_peer_lost(const LostPeer& lost) {
    std::lock_guard lock(mu_);
    if (!names_rank(verdict_.findings, "PEER_LOST", lost.rank)) {
      auto f = results::make_finding(
          "PEER_LOST",
          "rank " + std::to_string(lost.rank) + " (host " + lost.host + ") " + lost.how +
              " mid-run, seen by rank " + std::to_string(world_.rank) + " (host " +
              world_.hostname + ") " + seconds_text_fine(lost.after_s) +
              " after the liveness watch started: the process died (killed, crashed, OOM) or its host "
              "went away",
          {lost.rank}, {lost.host});
      f.layer = "run";
      f.evidence = nlohmann::json{{"source", "liveness watch"}, {"how", lost.how},
                                  {"after_s", lost.after_s}};
      verdict_.findings.push_back(std::move(f));
    }
    for (auto& ri : verdict_.ranks)
      if (ri.rank == lost.rank) {
        ri.status = "lost";
        ri.detail = "died mid-run (" + lost.how + ")";
      }
  }

  // The callbacks run on the watch thread: they only record, under mu_, and return.
  void on_peer_silent(const SilentPeer& s) {
    std::lock_guard lock(mu_);
    if (names_rank(verdict_.findings, "PEER_STALLED", s.rank)) return;
    auto f = results::make_finding(
        "PEER_STALLED",
        "rank " + std::to_string(s.rank) + " (host " + s.host + ") stopped answering for " +
            seconds_text_fine(s.silent_for_s) +
            " (not even the liveness heartbeat) while its connections stayed open, seen by rank " +
            std::to_string(s.seen_by < 0 ? world_.rank : s.seen_by) + ": frozen (SIGSTOP, a "
            "debugger), swapping or starved",
        {s.rank}, {s.host});
    f.evidence = nlohmann::json{{"silent_for_s", s.silent_for_s}, {"seen_by", s.seen_by},
                                {"how", s.how}};
    verdict_.findings.push_back(std::move(f));
    for (auto& ri : verdict_.ranks)
      if (ri.rank == s.rank && ri.status == "joined") {
        ri.status = "failed";
        ri.detail = "stopped answering (frozen or starved)";
      }
  }

  // It came back: the stall is still worth reading, but it did not end the run.
  void on_peer_resumed(const SilentPeer& s) {
    std::lock_guard lock(mu_);
    for (auto& f : verdict_.findings)
      if (f.code == "PEER_STALLED" && f.ranks == std::vector<int>{s.rank} && f.severity == "error") {
        f.severity = "warning";
        f.message = "rank " + std::to_string(s.rank) + " (host " + s.host +
                    ") was unresponsive for " + seconds_text_fine(s.silent_for_s) +
                    " (no liveness heartbeat), then answered again: frozen for a while, swapping "
                    "or starved";
      }
    for (auto& ri : verdict_.ranks)
      if (ri.rank == s.rank && ri.status == "failed" && ri.detail.rfind("stopped answering", 0) == 0) {
        ri.status = "joined";
        ri.detail.clear();
      }
  }

  // A clean goodbye, so peers do not read this rank's exit as a death. Never called holding mu_:
  // the watch's callback takes it.
  void stop_peer_watch() {
    std::lock_guard lock(watch_mu_);
    if (watch_) watch_->stop();
  }

  // Ranks the watch saw die or freeze: their verdicts will not come.
  std::vector<int> watch_lost() {
    std::vector<int> out;
    std::lock_guard lock(watch_mu_);
    if (watch_) {
      for (const auto& l : watch_->lost()) out.push_back(l.rank);
      // A frozen rank's verdict will not come either (it cannot post while stopped).
      for (const auto& q : watch_->silent()) out.push_back(q.rank);
    }
    return out;
  }

  // ---- verdict ---------------------------------------------------------------------------------

  int finish() {
    results::Verdict local;
    {
      std::lock_guard lock(mu_);
      // A phase that never ran is listed as such: fail closed, a missing phase is never a pass.
      for (const char* name : {"world", "rendezvous", "mesh"}) {
        bool seen = std::any_of(verdict_.phases.begin(), verdict_.phases.end(),
                                [&](const results::Phase& p) { return p.name == name; });
        if (!seen) {
          results::Phase p;
          p.name = name;
          p.status = "not_run";
          p.detail = "an earlier phase failed";
          verdict_.phases.push_back(p);
        }
      }
      demote_consequences();  // whatever phase stopped: a frozen/dead rank's effects are info
      verdict_.duration_s = seconds_since(start_);
      results::apply_verdict(verdict_);
      local = verdict_;
    }
    write(local_path(), local);

    results::Verdict shown = local;
    if (have_world_ && world_.rank == 0 && store_) shown = gather_global(local);
    else if (store_) post_local(local);
    // A clean goodbye: peers must not read this rank's exit as a death.
    stop_peer_watch();
    if (server_) server_->stop();
    if (!o_.quiet) std::cout << results::human_summary(shown) << transport_table(shown) << std::flush;
    return exit_code(shown);
  }

  void post_local(const results::Verdict& local) {
    if (store_frozen_) return;  // a post would only wait out its timeout
    {
      std::lock_guard lock(watch_mu_);
      if (watch_) {
        for (const auto& l : watch_->lost())
          if (l.rank == 0) return;  // rank 0 (the store) is gone: our file already says so
        for (const auto& s : watch_->silent())
          if (s.rank == 0) return;  // frozen: a post would only wait out its timeout
      }
    }
    try {
      store_->set("verdict/" + std::to_string(world_.rank),
                  results::to_json(local).dump(-1, ' ', false,
                                               nlohmann::json::error_handler_t::replace));
    } catch (const StoreError&) {
      // Rank 0 is gone; our local verdict on disk already says so.
    }
  }

  // Rank 0 collects every present rank's local verdict, merges them into the global one, and
  // writes it. A rank whose verdict never comes is named as lost.
  results::Verdict gather_global(const results::Verdict& local) {
    std::vector<results::Verdict> views{local};
    // A rank is late only when no verdict at all has arrived for `window`: rank 0 looks at every
    // pending rank in turn, without blocking on one. Waiting on each rank in join order with one
    // shared window named healthy ranks lost at 1024 ranks on 2 CPUs: rank 0 sat on rank 2's
    // key while a thousand others posted, and its own parsing ate the window. Never past the
    // run's own deadline.
    const auto window = ms(std::max(5.0, o_.pair_timeout_s * 2));
    const Deadline hard_stop = run_deadline_ + Millis{2000};
    std::map<int, results::Verdict> got;
    std::vector<const rendezvous::Identity*> pending, late;
    for (const auto& id : join_.present)
      if (id.rank != 0) pending.push_back(&id);
    auto last_arrival = Clock::now();
    while (!pending.empty()) {
      bool progressed = false;
      // A rank the mesh probe found silent, or the watch saw die, is dead: its verdict will not
      // come, and waiting for it only delays the global verdict (the kill -9 scenario). Even so
      // it may have stopped on its own error (a WORLD_SIZE of its own, a port range too small)
      // and posted its verdict before leaving: it is looked at once. The watch is asked each
      // round: a rank may die while the others are being gathered.
      const auto lost = watch_lost();
      for (auto it = pending.begin(); it != pending.end();) {
        const auto& id = **it;
        const bool known_dead =
            std::find(mesh_.silent_ranks.begin(), mesh_.silent_ranks.end(), id.rank) !=
                mesh_.silent_ranks.end() ||
            std::find(lost.begin(), lost.end(), id.rank) != lost.end();
        const std::string key = "verdict/" + std::to_string(id.rank);
        bool fetched = false;
        try {
          if (store_->check({key})) {
            auto text = store_->get(key, earliest(deadline_after(Millis{1000}), hard_stop));
            // The one-pass reader first (what the schema surely accepts); anything unusual takes
            // the full, validating path, which names the problem.
            auto fast = results::verdict_from_text_fast(text);
            auto v = fast ? std::move(*fast)
                          : results::verdict_from_json(nlohmann::json::parse(text));
            // Every rank reports the same exchanged sweep figures; rank 0's copy is the world's.
            v.transports.clear();
            if (known_dead) explained_by_itself(views.front(), v, id.rank);
            got.emplace(id.rank, std::move(v));
            fetched = true;
          }
        } catch (const std::exception&) {
        }
        if (fetched || known_dead) {
          if (!fetched) late.push_back(&id);
          progressed = progressed || fetched;
          it = pending.erase(it);
        } else {
          ++it;
        }
      }
      const auto now = Clock::now();
      if (progressed) last_arrival = now;
      if (pending.empty() || now >= hard_stop || now - last_arrival >= window) break;
      if (!progressed) std::this_thread::sleep_for(Millis{20});
    }
    late.insert(late.end(), pending.begin(), pending.end());
    for (const auto& id : join_.present) {
      auto it = got.find(id.rank);
      if (it != got.end()) views.push_back(std::move(it->second));
    }
    for (const auto* idp : late) {
      const auto& id = *idp;
      // Named in rank 0's own view, so the merge knows why this rank's view is absent.
      auto& mine = views.front();
      if (!names_rank(mine.findings, "PEER_LOST", id.rank) &&
          !names_rank(mine.findings, "PEER_STALLED", id.rank))
        mine.findings.push_back(results::Finding{
            "PEER_LOST", "error", "run", {id.rank}, {id.host},
            "rank " + std::to_string(id.rank) + " (host " + id.host +
                ") joined but never reported its verdict",
            "The process died or hung after joining: check that pod's status, exit code and "
            "log.",
            nullptr});
      for (auto& ri : mine.ranks)
        if (ri.rank == id.rank && ri.status == "joined") ri.status = "lost";
    }
    results::MergeOptions mo;
    mo.reporting_rank = 0;
    mo.world_size = world_.world_size;
    auto global = results::merge_rank_verdicts(views, mo);
    global.duration_s = seconds_since(start_);
    // Measurement done; now judge it against the profile's identities and baselines.
    if (profile_) {
      auto tj = Clock::now();
      auto before = global.findings.size();
      log_info(phase_start_line("judge", "profile " + o_.profile));
      results::add_judged_findings(global.findings, results::judge(global, profile_));
      log_info(phase_end_line("judge", "done", seconds_since(tj),
                              std::to_string(global.findings.size() - before) + " findings added"));
      global.baseline = results::baseline_record(profile_, global);
    }
    results::apply_verdict(global);
    auto tw = Clock::now();
    log_info(phase_start_line("write", global_path()));
    write(global_path(), global);
    log_info(phase_end_line("write", write_failed_ ? "fail" : "done", seconds_since(tw),
                            "verdict " + global.verdict + " (exit " +
                                std::to_string(exit_code(global)) + ")"));
    record_history(global);
    return global;
  }

  // A rank rank 0 took for dead posted a verdict whose own error names itself: that error is the
  // cause, and the rank reads "failed" with its own code (the merge drops the PEER_LOST guesses
  // about it, results/merge.cpp).
  static void explained_by_itself(results::Verdict& mine, const results::Verdict& theirs,
                                  int rank) {
    auto cause = std::find_if(theirs.findings.begin(), theirs.findings.end(), [&](const auto& f) {
      return f.severity == "error" && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end();
    });
    if (cause == theirs.findings.end()) return;
    for (auto& ri : mine.ranks)
      if (ri.rank == rank) {
        ri.status = "failed";
        ri.detail = "stopped on its own error: " + cause->code;
      }
  }

  // --history: the global verdict goes into the run history too. A history that cannot be written
  // costs nothing else: the verdict file is already on disk, and the error names the file.
  void record_history(const results::Verdict& global) {
    if (o_.history_path.empty()) return;
    try {
      results::History h(o_.history_path, true);
      h.add(global, "run");
    } catch (const std::exception& e) {
      // An error line: --history asked for it, and --quiet must still say it did not happen.
      log_error("ncclsmoke: rank 0: run " + global.run_id + " not recorded in history " +
                results::redact_history_url(o_.history_path) + ": " + e.what() + " (the verdict is in " + global_path() +
                "; import it later with `ncclsmoke history import`)");
    }
  }

  // ---- helpers ---------------------------------------------------------------------------------

  void record_store_info() {
    results::StoreInfo info;
    info.host = world_.store_host;
    info.port = world_.store_port;
    info.hosted_by = !world_.external_store ? "rank 0"
                     : world_.store_source == "--store" ? "external (--store)"
                                                        : "torchelastic agent";
    info.dialect = wire::to_string(client_->options().dialect);
    if (auto n = client_->negotiation())
      info.era = to_string(n->era);
    else
      info.era = "ncclsmoke";
    info.key_prefix = "ncclsmoke/" + job_namespace() + "/";
    std::lock_guard lock(mu_);
    verdict_.world.store = info;
  }

  // A store rank 0 hosts belongs to its job: rank 0 claims it, the others make sure the store
  // they reached is their own job's before joining. One that reached another job's store (two
  // jobs on one MASTER_PORT) says so and stops; it never touched that job's keys.
  bool meet_own_job(Deadline deadline, Clock::time_point t0) {
    if (world_.external_store) return true;
    rendezvous::StoreOwner me;
    me.job_id = world_.job_id;
    me.world_size = world_.world_size;
    me.host = world_.hostname;
    me.pid = static_cast<int>(::getpid());
    me.key_prefix = "ncclsmoke/" + job_namespace() + "/";
    if (world_.rank == 0) {
      rendezvous::claim_store(*raw_store_, me);
      return true;
    }
    auto met = rendezvous::wait_for_own_job(*raw_store_, *store_, "join/world_size", me.job_id,
                                            deadline);
    if (!met.other_owner) return true;  // ours, or nobody yet: the join reports who is missing
    const auto& other = *met.other_owner;
    auto job_text = [](const std::string& id) { return id.empty() ? std::string("(none)") : id; };
    auto f = results::make_finding(
        "STORE_FOREIGN_JOB",
        "rank " + std::to_string(world_.rank) + " (host " + world_.hostname + ") of job " +
            job_text(me.job_id) +
            (world_.job_id_source.empty() ? "" : " (from " + world_.job_id_source + ")") +
            " reached the store at " + world_.store_host + ":" + std::to_string(world_.store_port) +
            " after " + seconds_text(seconds_since(t0)) + ", but it belongs to job " +
            job_text(other.job_id) + " (world size " + std::to_string(other.world_size) +
            ", rank 0 on host " + other.host + ", pid " + std::to_string(other.pid) +
            "); this rank did not join it",
        {world_.rank}, {world_.hostname},
        {{"port", std::to_string(world_.store_port)},
         {"this_job", job_text(me.job_id)},
         {"other_job", job_text(other.job_id)}});
    f.evidence = nlohmann::json{{"store", world_.store_host + ":" + std::to_string(world_.store_port)},
                                {"this_job", me.job_id},
                                {"other_job", other.job_id},
                                {"other_world_size", other.world_size},
                                {"other_host", other.host}};
    add(std::move(f));
    end_phase("rendezvous", "fail", t0, "the store belongs to job " + job_text(other.job_id));
    return false;
  }

  // A store operation that timed out on a connection that was made: a store that still answers a
  // fresh 1 s probe was only slow to get the key (timed_out stays); one that accepts but does
  // not answer is frozen (SIGSTOP, swap) and the error becomes stalled (RENDEZVOUS_STALLED, not
  // "lost"). Bounded (about 1 s).
  StoreError stalled_if_silent(const StoreError& e) {
    if (e.error_class() != ErrorClass::timed_out) return e;
    try {
      TcpStoreOptions opt;
      opt.host = hosts_store() ? loopback_host() : world_.store_host;
      opt.port = world_.store_port;
      opt.dialect = client_ ? client_->options().dialect : wire::Dialect::modern;
      opt.op_timeout = Millis{1000};
      auto probe = TcpStore::connect(opt, deadline_after(Millis{1000}));
      probe->check({"owner"});
      return e;
    } catch (const StoreError& probe_error) {
      // Refused / reset: nothing listens any more, the store is gone (lost), not frozen.
      if (probe_error.error_class() != ErrorClass::timed_out &&
          probe_error.error_class() != ErrorClass::stalled)
        return e;
      store_frozen_ = true;
      return StoreError(ErrorClass::stalled,
                        std::string(e.what()) + "; a fresh connection's probe got no answer within "
                        "1 s either (" + probe_error.what() + ")");
    }
  }

  // Who holds MASTER_PORT when rank 0 cannot bind it: an ncclsmoke store names its job; anything
  // else stays "another process". Bounded (1 s), never throws.
  std::string port_holder() const {
    try {
      TcpStoreOptions opt;
      opt.host = loopback_host();
      opt.port = world_.master_port;
      opt.dialect = wire::Dialect::modern;
      opt.op_timeout = Millis{1000};
      auto probe = TcpStore::connect(opt, deadline_after(Millis{1000}));
      PrefixStore raw("ncclsmoke", *probe);
      if (!raw.check({"owner"})) return "";
      auto owner = rendezvous::StoreOwner::from_json(raw.get("owner", deadline_after(Millis{1000})));
      if (!owner) return "";
      return "ncclsmoke job " + (owner->job_id.empty() ? std::string("(no job id)") : owner->job_id) +
             " (world size " + std::to_string(owner->world_size) + ", pid " +
             std::to_string(owner->pid) + ")";
    } catch (const std::exception&) {
      return "";
    }
  }

  // Every rank's verdict carries rank 0's run id, so the local views of one run can be found
  // together (the history and the CronJob key on it).
  void adopt_run_id(Deadline deadline) {
    std::string id;
    {
      std::lock_guard lock(mu_);
      id = verdict_.run_id;
    }
    if (world_.rank == 0) {
      store_->set("run/id", id);
      return;
    }
    try {
      id = store_->get("run/id", deadline);
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) throw;
      return;  // rank 0 never got this far: the join reports it
    }
    std::lock_guard lock(mu_);
    verdict_.run_id = id;
  }

  bool start_server(Clock::time_point t0) {
    TcpStoreServerOptions so;
    so.host = o_.store_bind;
    so.port = world_.master_port;
    so.log = [this](const std::string& line) {
      log_warn("store: " + line);
    };
    try {
      server_ = TcpStoreServer::start(so);
      return true;
    } catch (const StoreError& e) {
      std::string holder = port_holder();
      auto f = results::Finding{
          "CONFIG_INVALID", "error", "config", {0}, {world_.hostname},
          "rank 0 (host " + world_.hostname + ") of job " +
              (world_.job_id.empty() ? std::string("(none)") : world_.job_id) +
              " cannot serve the store on port " + std::to_string(world_.master_port) + ": " +
              e.what() + (holder.empty() ? "" : "; the port is held by " + holder),
          holder.empty()
              ? "Another process holds MASTER_PORT on rank 0's host (a previous run, another "
                "job's store, torchrun's agent store without TORCHELASTIC_USE_AGENT_STORE?): pick "
                "a free MASTER_PORT or stop that process."
              : "Two jobs use one MASTER_PORT on this host: give each job its own (under Slurm, "
                "leave MASTER_PORT unset and ncclsmoke derives one from SLURM_JOB_ID).",
          nlohmann::json{{"variable", "MASTER_PORT"}, {"value", std::to_string(world_.master_port)}}};
      add(std::move(f));
      end_phase("rendezvous", "fail", t0, e.what());
      return false;
    }
  }

  std::string loopback_host() const {
    // The server listens dual-stack unless --store-bind says otherwise; follow an explicit bind.
    if (!o_.store_bind.empty() && o_.store_bind != "0.0.0.0" && o_.store_bind != "::")
      return o_.store_bind;
    return o_.store_bind == "::" ? "::1" : "127.0.0.1";
  }

  static bool fill_sockaddr(const std::string& ip, sockaddr_storage& ss) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
      ss.ss_family = AF_INET;
      return true;
    }
    if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
      ss.ss_family = AF_INET6;
      return true;
    }
    return false;
  }

  static void parse_port_range(const std::string& text, uint16_t& lo, uint16_t& hi) {
    lo = hi = 0;
    if (text.empty()) return;
    auto dash = text.find('-');
    lo = static_cast<uint16_t>(std::stoi(text.substr(0, dash)));
    hi = dash == std::string::npos ? lo : static_cast<uint16_t>(std::stoi(text.substr(dash + 1)));
  }

  void record_ranks() {
    std::lock_guard lock(mu_);
    verdict_.ranks.clear();
    for (const auto& id : join_.present) {
      results::RankInfo ri;
      ri.rank = id.rank;
      ri.host = id.host;
      ri.node = id.node;
      ri.pid = id.pid;
      ri.local_address = id.local_address;
      ri.interface = id.interface;
      verdict_.ranks.push_back(ri);
    }
    for (int r : join_.missing) {
      results::RankInfo ri;
      ri.rank = r;
      ri.status = "missing";
      ri.detail = "never joined";
      verdict_.ranks.push_back(ri);
    }
    std::sort(verdict_.ranks.begin(), verdict_.ranks.end(),
              [](const auto& a, const auto& b) { return a.rank < b.rank; });
  }

  void mark_rank(int rank, const std::string& status, const std::string& detail) {
    std::lock_guard lock(mu_);
    for (auto& ri : verdict_.ranks)
      if (ri.rank == rank) {
        ri.status = status;
        ri.detail = detail;
      }
  }

  void add(results::Finding f) {
    std::lock_guard lock(mu_);
    verdict_.findings.push_back(std::move(f));
  }

  void end_phase(const std::string& name, const std::string& status, Clock::time_point t0,
                 const std::string& detail) {
    results::Phase p;
    p.name = name;
    p.status = status;
    p.duration_s = seconds_since(t0);
    p.detail = detail;
    log_line(status == "fail" ? LogLevel::error : status == "pass" ? LogLevel::info : LogLevel::warn,
             phase_end_line(name, status, p.duration_s, detail));
    std::lock_guard lock(mu_);
    verdict_.phases.push_back(p);
  }

  std::string local_path() const {
    std::string name = have_world_ ? "verdict.rank" + std::to_string(world_.rank) + ".json"
                                   : "verdict.invalid-config." + std::to_string(::getpid()) + ".json";
    return (fs::path(o_.out_dir) / name).string();
  }
  std::string global_path() const {
    return o_.json_path.empty() ? (fs::path(o_.out_dir) / "verdict.json").string() : o_.json_path;
  }

  // A verdict that cannot be written is loud: stderr names the path and the error, and the exit
  // code is kExitVerdictNotWritten whatever the verdict said (never a silent pass).
  void write(const std::string& path, const results::Verdict& v) {
    try {
      results::write_json_atomically(path, results::to_json(v));
    } catch (const std::exception& e) {
      log_error("ncclsmoke: rank " + std::to_string(world_.rank) + " (host " + world_.hostname +
                "): error: the " + v.scope + " verdict (" + v.verdict + ") was NOT written to " +
                path + ": " + e.what() + " (exit " + std::to_string(kExitVerdictNotWritten) +
                "; free space or fix --out-dir/--json and run again)");
      write_failed_ = true;
    }
  }

  int exit_code(const results::Verdict& shown) const {
    return write_failed_ ? kExitVerdictNotWritten : shown.exit_code;
  }

  // Past the run deadline (+ a grace for the verdict itself), write what we know and leave.
  void watch(std::atomic<bool>& finished) {
    auto hard = run_deadline_ + Millis{3000};
    while (!finished && Clock::now() < hard && g_stop_signal == 0)
      std::this_thread::sleep_for(Millis{50});
    if (finished) return;
    // mpirun SIGTERMs every survivor at once: say goodbye before anything else, so the others do
    // not name this rank lost while they write their own verdicts.
    stop_peer_watch();
    results::Verdict v;
    if (int sig = g_stop_signal) {
      std::lock_guard lock(mu_);
      std::string phase = verdict_.phases.empty() ? "none" : verdict_.phases.back().name;
      verdict_.findings.push_back(results::make_finding(
          "RUN_TERMINATED",
          "rank " + std::to_string(world_.rank) + " (host " + world_.hostname + ") was stopped by " +
              (sig == SIGTERM ? std::string("SIGTERM") : std::string("SIGINT")) + " after " +
              seconds_text(seconds_since(start_)) + "; last phase finished: " + phase,
          {world_.rank}, {world_.hostname}));
      verdict_.duration_s = seconds_since(start_);
      results::apply_verdict(verdict_);
      v = verdict_;
    } else {
      std::lock_guard lock(mu_);
      verdict_.findings.push_back(results::Finding{
          "RUN_TIMEOUT", "error", "run", {world_.rank}, {world_.hostname},
          "rank " + std::to_string(world_.rank) + " (host " + world_.hostname +
              ") did not finish within --timeout " + std::to_string(o_.timeout_s) + "s",
          "A phase hung past its own deadline: the phases table shows the last one that "
          "finished; raise --timeout only if the phase deadlines need it.",
          nullptr});
      verdict_.duration_s = seconds_since(start_);
      results::apply_verdict(verdict_);
      v = verdict_;
    }
    // The stuck phase, said on stderr too (the verdict's last finding is this one).
    if (!v.findings.empty())
      log_error("run: " + v.findings.back().code + ": " + v.findings.back().message +
                " (last phase finished: " + (v.phases.empty() ? "none" : v.phases.back().name) +
                ")");
    write(local_path(), v);
    // Rank 0 cannot gather any more, but what it knows (a peer already named lost, the phases so
    // far) is the world's verdict for whoever reads verdict.json.
    if (have_world_ && world_.rank == 0) {
      results::MergeOptions mo;
      mo.reporting_rank = 0;
      mo.world_size = world_.world_size;
      auto global = results::merge_rank_verdicts({v}, mo);
      global.duration_s = seconds_since(start_);
      results::apply_verdict(global);
      write(global_path(), global);
      v = global;
    }
    if (!o_.quiet) std::cout << results::human_summary(v) << std::flush;
    std::_Exit(write_failed_ ? kExitVerdictNotWritten : results::exit_code_for(v.verdict));
  }

  RunOptions o_;
  // Set before the rank is known (env checked by run_smoke); used once it is.
  LogLevel log_level_ = LogLevel::warn;
  std::string log_env_;  // NCCLSMOKE_LOG_LEVEL as given ("" unset)
  Clock::time_point start_;
  Deadline run_deadline_;
  std::mutex mu_;
  results::Verdict verdict_;
  World world_;
  bool have_world_ = false;
  std::vector<results::Profile> profiles_;
  const results::Profile* profile_ = nullptr;
  Identity self_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStore> client_;
  std::shared_ptr<Store> raw_store_;  // "ncclsmoke/": the owner key
  std::shared_ptr<Store> store_;      // "ncclsmoke/<job>/<restart>/": every key of this run
  std::atomic<bool> write_failed_{false};
  std::mutex watch_mu_;  // watch_ is set by the run thread and stopped by the watchdog too
  std::unique_ptr<PeerWatch> watch_;
  bool watch_started_ = false;  // run thread only
  std::atomic<bool> store_frozen_{false};  // a probe found the store accepting but silent
  JoinResult join_;
  MeshResult mesh_;
};

}  // namespace

int run_smoke(const RunOptions& options) {
  // NCCLSMOKE_LOG_LEVEL is checked at the door like a flag: a typo is a usage error naming it.
  const char* env = std::getenv(kLogLevelEnv);
  std::string log_env = env ? env : "";
  if (!log_env.empty() && !parse_log_level(log_env)) {
    log_error(std::string("ncclsmoke: error: ") + kLogLevelEnv + "='" + log_env +
              "' is not a log level (accepted: " + kLogLevelNames + ")");
    return kExitUsage;
  }
  // Until the rank is known: run lines marked "rank ?", warnings and errors only.
  log_for_rank(-1, run_log_level(-1, options.quiet, false, log_env));
  return RunSession(options, log_env).run();
}

void register_run_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<RunOptions>();
  auto* run = app.add_subcommand(
      "run", "Run one rank of the smoke test: rendezvous, mesh probe, verdict");
  add_run_options(*run, *options, true);
  run->callback([options, &action] { action = [options] { return run_smoke(*options); }; });
}

}  // namespace ncclsmoke::harness
