#include "harness/run/rendezvous_step.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <random>

#include "harness/common/env.h"
#include "harness/common/progress.h"
#include "harness/run/set_aside.h"
#include "harness/run/transport_phase.h"  // test_pause_point
#include "node/sysfs.h"
#include "rendezvous/net.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/signed_store.h"  // verify_store_value
#include "rendezvous/store_owner.h"
#include "results/judging/facts_rendezvous.h"

namespace ncclsmoke::harness {

using namespace ncclsmoke::rendezvous;

namespace {

std::string random_token() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  return fmt::format("{:016x}", dist(rd));
}

std::string loopback_host(const RunOptions& o) {
  // The server listens dual-stack unless --store-bind says otherwise; follow an explicit bind.
  if (!o.store_bind.empty() && o.store_bind != "0.0.0.0" && o.store_bind != "::") return o.store_bind;
  return o.store_bind == "::" ? "::1" : "127.0.0.1";
}

// Who holds MASTER_PORT when rank 0 cannot bind it: an ncclsmoke store names its job; anything
// else stays "another process". Bounded (1 s), never throws.
std::string port_holder(const RunContext& ctx) {
  try {
    TcpStoreOptions opt;
    opt.host = loopback_host(ctx.o);
    opt.port = ctx.world.master_port;
    opt.dialect = wire::Dialect::modern;
    opt.op_timeout = Millis{1000};
    auto probe = TcpStore::connect(opt, deadline_after(Millis{1000}));
    PrefixStore raw("ncclsmoke", *probe);
    if (!raw.check({"owner"})) return "";
    auto owner = StoreOwner::from_json(raw.get("owner", deadline_after(Millis{1000})));
    if (!owner) return "";
    return fmt::format("ncclsmoke job {} (world size {}, pid {})",
                       owner->job_id.empty() ? std::string("(no job id)") : owner->job_id,
                       owner->world_size, owner->pid);
  } catch (const std::exception&) {
    return "";
  }
}

// NCCLSMOKE_STORE_MAX_KEYS / NCCLSMOKE_STORE_MAX_CONNECTIONS: rank 0's store with a smaller
// --max-keys / --max-connections (tests fill it without a million keys). A bad value is said and
// ignored.
void store_limit_knob(const char* name, std::size_t& into) {
  auto text = env(name);
  if (!text) return;
  std::size_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v == 0) {
    log_warn(fmt::format("{}={} is not a positive whole number; ignored (the store keeps {})",
                         name, *text, into));
    return;
  }
  into = v;
}

bool start_server(RunContext& ctx, StoreSession& s, Clock::time_point t0) {
  TcpStoreServerOptions so;
  so.host = ctx.o.store_bind;
  so.port = ctx.world.master_port;
  // Idle strangers cannot take the ranks' room (tcp_server.h, "Connections").
  so.reserved_connections = static_cast<std::size_t>(std::max(0, ctx.world.world_size));
  // Room for the reserve (at most half of max_connections) to hold every rank, and for each
  // rank's reconnect while its old connection is still counted: at 16,384 ranks the default
  // was one slot a rank, and rank 0's own reconnect found the store full.
  so.max_connections = std::max(so.max_connections, 2 * so.reserved_connections + 1024);
  store_limit_knob("NCCLSMOKE_STORE_MAX_KEYS", so.max_stored_keys);
  store_limit_knob("NCCLSMOKE_STORE_MAX_CONNECTIONS", so.max_connections);
  so.log = [](const std::string& line) { log_warn(fmt::format("store: {}", line)); };
  // With a job token only a signed claim makes a connection the job's (the store's reserve).
  if (!ctx.job_token.empty())
    so.claim_is_genuine = [token = ctx.job_token](const std::string& key, const std::string& value) {
      // torch's clients send "/" + key; the signature covers the key without it.
      std::string k = !key.empty() && key.front() == '/' ? key.substr(1) : key;
      return verify_store_value(token, k, value).has_value();
    };
  try {
    s.server = TcpStoreServer::start(so);
    return true;
  } catch (const StoreError& e) {
    ctx.end_step("rendezvous",
                 results::StorePortSeen{.rank0 = RankRef{0, ctx.world.hostname},
                                        .job_id = ctx.world.job_id,
                                        .port = ctx.world.master_port,
                                        .error = e.what(),
                                        .holder = port_holder(ctx)},
                 t0, e.what());
    return false;
  }
}

// The verdict's spelling of a negotiated era (same text as rendezvous' to_string(StoreEra)).
results::ServerEra verdict_era(StoreEra era) {
  switch (era) {
    case StoreEra::torch_legacy: return results::ServerEra::torch_le_2_0;
    case StoreEra::validate_no_ping: return results::ServerEra::torch_2_1_to_2_4;
    case StoreEra::validate_ping: return results::ServerEra::torch_ge_2_5;
  }
  return results::ServerEra::unknown;
}

void record_store_info(RunContext& ctx, const StoreSession& s) {
  results::StoreInfo info;
  info.host = ctx.world.store_host;
  info.port = ctx.world.store_port;
  info.hosted_by = !ctx.world.external_store              ? results::StoreHostedBy::rank0
                   : ctx.world.store_source == "--store" ? results::StoreHostedBy::external
                                                         : results::StoreHostedBy::torchelastic_agent;
  info.dialect = s.client->options().dialect == wire::Dialect::legacy
                     ? results::StoreDialect::legacy
                     : results::StoreDialect::modern;
  info.era = results::ServerEra::ncclsmoke;  // told the dialect, not negotiated
  if (auto n = s.client->negotiation()) info.era = verdict_era(n->era);
  info.key_prefix = fmt::format("ncclsmoke/{}/", ctx.job_namespace());
  info.authenticated = !ctx.job_token.empty();
  ctx.saw(results::StoreInfoSeen{std::move(info)});
}

Identity self_identity(const RunContext& ctx, const StoreSession& s) {
  const auto& w = ctx.world;
  const auto& rep = s.client->connect_report();
  Identity self;
  self.rank = w.rank;
  self.world_size = w.world_size;
  self.host = w.hostname;
  self.node = w.node_name;
  self.pid = static_cast<int>(::getpid());
  self.token = random_token();
  if (w.rank == 0) {
    self.local_address = route_source_address(w.master_addr, w.master_port);
    if (self.local_address.empty()) self.local_address = host_part(rep.local_address);
  } else {
    self.local_address = host_part(rep.local_address);
  }
  self.interface = rep.local_interface;
  if (w.rank == 0 || self.interface.empty()) {
    sockaddr_storage ss{};
    if (fill_sockaddr(self.local_address, ss))
      self.interface = interface_of(reinterpret_cast<sockaddr*>(&ss));
  }
  self.link_speed_mbps = rendezvous::interface_speed_mbps(
      self.interface, ctx.nic_start.root.empty() ? node::kSysfsDefault : ctx.nic_start.root);
  return self;
}

// A store rank 0 hosts belongs to its job: rank 0 claims it, the others make sure the store they
// reached is their own job's before joining. One that reached another job's store (two jobs on
// one MASTER_PORT) says so and stops; it never touched that job's keys.
bool meet_own_job(RunContext& ctx, StoreSession& s, Deadline deadline, Clock::time_point t0) {
  const auto& w = ctx.world;
  if (w.external_store) return true;
  StoreOwner me;
  me.job_id = w.job_id;
  me.world_size = w.world_size;
  me.host = w.hostname;
  me.pid = static_cast<int>(::getpid());
  me.key_prefix = fmt::format("ncclsmoke/{}/", ctx.job_namespace());
  if (w.rank == 0) {
    claim_store(*s.raw_store, me);
    return true;
  }
  auto met = wait_for_own_job(*s.raw_store, *s.store, "join/world_size", me.job_id, deadline);
  if (!met.other_owner) return true;  // ours, or nobody yet: the join reports who is missing
  const auto& other = *met.other_owner;
  results::ForeignStore fs;
  fs.self = ctx.self();
  fs.this_job = me.job_id;
  fs.job_id_source = w.job_id_source;
  fs.store = join_host_port(w.store_host, w.store_port);
  fs.port = w.store_port;
  fs.waited_s = seconds_since(t0);
  fs.other_job = other.job_id;
  fs.other_world_size = other.world_size;
  fs.other_host = other.host;
  fs.other_pid = other.pid;
  ctx.end_step("rendezvous", fs, t0,
                 fmt::format("the store belongs to job {}",
                             other.job_id.empty() ? std::string("(none)") : other.job_id));
  return false;
}

// Every rank's verdict carries rank 0's run id, so the local views of one run can be found
// together (the history and the CronJob key on it).
void adopt_run_id(RunContext& ctx, StoreSession& s, Deadline deadline) {
  if (ctx.world.rank == 0) {
    s.store->set("run/id", ctx.run_id);
    return;
  }
  std::string id;
  try {
    id = s.store->get("run/id", deadline);
  } catch (const StoreError& e) {
    if (e.error_class() != ErrorClass::timed_out) throw;
    return;  // rank 0 never got this far: the join reports it
  }
  ctx.run_id = id;
  ctx.saw(results::RunIdSeen{std::move(id)});
}

// The roster once per node when the launcher said which process of its node this is (local
// rank 0 leads); with no local rank every rank reads the store. The path is the run's and the
// host's (a restart or another job on the node has another).
RosterCopy roster_copy_for(const RunContext& ctx) {
  const auto& w = ctx.world;
  auto source = w.sources_by_field.find("local_rank");
  if (source == w.sources_by_field.end() || source->second == "default") return {};
  return RosterCopy::for_host(ctx.job_namespace(), ctx.run_id, w.hostname, w.local_rank == 0,
                              ms(grown_with_world(2.0, w.world_size)));
}

// A store operation that timed out on a connection that was made: a store that still answers a
// fresh 1 s probe was only slow to get the key (timed_out stays); one that accepts but does not
// answer is frozen (SIGSTOP, swap) and the error becomes stalled (RENDEZVOUS_STALLED, not
// "lost"). Bounded (about 1 s).
StoreError stalled_if_silent(const RunContext& ctx, StoreSession& s, const StoreError& e) {
  if (e.error_class() != ErrorClass::timed_out) return e;
  try {
    TcpStoreOptions opt;
    opt.host = store_dial_host(ctx);
    opt.port = ctx.world.store_port;
    opt.dialect = s.client ? s.client->options().dialect : wire::Dialect::modern;
    opt.op_timeout = Millis{1000};
    auto probe = TcpStore::connect(opt, deadline_after(Millis{1000}));
    probe->check({"owner"});
    return e;
  } catch (const StoreError& probe_error) {
    // Refused / reset: nothing listens any more, the store is gone (lost), not frozen.
    if (probe_error.error_class() != ErrorClass::timed_out &&
        probe_error.error_class() != ErrorClass::stalled)
      return e;
    s.frozen = true;
    return StoreError(ErrorClass::stalled,
                      fmt::format("{}; a fresh connection's probe got no answer within 1 s either "
                                  "({})",
                                  e.what(), probe_error.what()));
  }
}

// What a store served apart from the job (`store serve`) says it refused (kStoreFullKey), read
// over a fresh connection (the one that was refused is gone; a store full of connections still
// lets a few read). Bounded (about 1 s); nothing when it cannot tell, or when it is no ncclsmoke
// store (a torch agent's store has no such key).
std::vector<StoreFullHit> external_store_full(const RunContext& ctx, const StoreSession& s) {
  try {
    TcpStoreOptions opt;
    opt.host = store_dial_host(ctx);
    opt.port = ctx.world.store_port;
    // The dialect the rank's own connection found, else found the same way.
    opt.dialect = s.client ? s.client->options().dialect : wire::Dialect::modern;
    opt.negotiate = !s.client;
    opt.op_timeout = Millis{1000};
    auto deadline = deadline_after(Millis{1000});
    auto probe = TcpStore::connect(opt, deadline);
    if (!probe->check({kStoreFullKey})) return {};
    auto hits = parse_store_full_status(probe->get(kStoreFullKey, deadline));
    return hits ? *hits : std::vector<StoreFullHit>{};
  } catch (const std::exception&) {
    return {};
  }
}

// The store refused someone at a store-wide limit: say so, it is the cause behind a lost store
// or missing ranks. Rank 0's own store says it in-process; a store served apart (`store serve`)
// through its status key, read when the store failed this rank or (rank 0) ranks went missing.
void note_store_full(RunContext& ctx, const StoreSession& s, bool failed = true) {
  std::vector<StoreFullHit> hits;
  if (s.server) hits = s.server->stats().full;
  else if (ctx.world.external_store && failed) hits = external_store_full(ctx, s);
  for (const auto& hit : hits)
    ctx.saw(results::StoreFull{.rank0 = ctx.self(),
                                                .limit = hit.limit,
                                                .flag = hit.flag,
                                                .value = hit.value,
                                                .in_use = hit.in_use,
                                                .refusals = hit.refusals,
                                                .job_refusals = hit.job_refusals,
                                                .job_unharmed = !failed,
                                                .last_peer = hit.last_peer,
                                                .external_store = s.server ? std::string()
                                                                           : rendezvous::join_host_port(ctx.world.store_host, ctx.world.store_port)});
}

void record_ranks(RunContext& ctx, const JoinResult& join) {
  results::RosterSeen roster;
  for (const auto& id : join.present)
    roster.present.push_back({.rank = id.rank,
                              .host = id.host,
                              .node = id.node,
                              .pid = id.pid,
                              .local_address = id.local_address,
                              .interface = id.interface,
                              .detail = {},
                              .link_speed_mbps = id.link_speed_mbps});
  roster.missing = join.missing;
  ctx.saw(std::move(roster));
}

}  // namespace

std::string store_dial_host(const RunContext& ctx) {
  return ctx.hosts_store() ? loopback_host(ctx.o) : ctx.world.store_host;
}

void rendezvous_step(RunContext& ctx, StoreSession& s) {
  const auto& w = ctx.world;
  auto t0 = Clock::now();
  log_set_phase("rendezvous");
  log_info(phase_start_line(
      "rendezvous", ctx.hosts_store()
                        ? fmt::format("serving the store on port {}", w.master_port)
                        : "store at " + join_host_port(w.store_host, w.store_port)));
  if (ctx.hosts_store() && !start_server(ctx, s, t0)) return;

  // Rank 0 reaches its own store over loopback: a firewall rule against the master port must
  // only show on the other ranks, as it does in a cluster. A store someone else hosts (torch's
  // elastic agent, --store) is reached like any rank would, in whatever dialect it speaks.
  TcpStoreOptions opt;
  opt.host = store_dial_host(ctx);
  opt.port = w.store_port;
  opt.dialect = wire::Dialect::modern;
  opt.negotiate = w.external_store;
  opt.op_timeout = ms(grown_with_world(std::max(5.0, ctx.o.mesh_timeout_s), w.world_size));
  auto connect_deadline = earliest(ctx.start + ms(ctx.o.connect_timeout_s), ctx.steps_deadline);
  try {
    s.client = TcpStore::connect(opt, connect_deadline);
  } catch (const StoreError& e) {
    note_store_full(ctx, s);
    ctx.end_step("rendezvous",
                 results::StoreConnectSeen{e.failure(), probe_context(w), seconds_since(t0)},
                 t0, e.what());
    return;
  }
  // TcpStore -> SignedStore (the job token; below the prefixes, so it signs the full key) ->
  // PrefixStore("ncclsmoke") -> PrefixStore(job namespace). The owner note stays unsigned.
  s.raw_store = std::make_shared<PrefixStore>("ncclsmoke", *s.client);
  auto signed_store = std::make_shared<SignedStore>(*s.client, ctx.job_token, s.tampered);
  s.store = std::make_shared<PrefixStore>(
      ctx.job_namespace(), std::make_shared<PrefixStore>("ncclsmoke", signed_store));
  record_store_info(ctx, s);
  test_pause_point("rendezvous", w.rank);  // test-only (NCCLSMOKE_TEST_PAUSE_AT)
  s.self = self_identity(ctx, s);

  auto join_deadline = earliest(ctx.start + ms(ctx.o.join_timeout_s), ctx.steps_deadline);
  try {
    if (!meet_own_job(ctx, s, join_deadline, t0)) return;
    adopt_run_id(ctx, s, join_deadline);
    JoinWatch jw;  // rank 0: a line every 5 s while ranks are missing
    jw.on_progress = [&ctx](const JoinProgress& p) {
      // The join deadline is --join-timeout from the start, cut by --timeout.
      log_info(join_wait_line(p, seconds_since(ctx.start),
                              std::min(ctx.o.join_timeout_s, ctx.o.timeout_s)));
    };
    s.roster_copy = roster_copy_for(ctx);
    s.join = join_world(*s.store, s.self, join_deadline, Millis{2000}, jw, &s.roster_copy);
  } catch (const StoreError& e) {
    note_store_full(ctx, s);
    ctx.end_step("rendezvous",
                 results::StoreLostSeen{stalled_if_silent(ctx, s, e).failure(),
                                        probe_context(w), "the join barrier"},
                 t0, e.what());
    return;
  }
  if (w.rank != 0 && s.join.roster_received && !s.roster_copy.path().empty())
    log_debug(s.roster_copy.read_the_copy()
                  ? fmt::format("rendezvous: the roster from this node's leader's copy ({})",
                                s.roster_copy.path().string())
                  : std::string("rendezvous: the roster from the store"));
  record_ranks(ctx, s.join);
  note_store_full(ctx, s, !s.join.missing.empty());
  // The phase line and table carry the duration; judging reads the join as facts/join.h has it.
  ctx.end_step("rendezvous", results::JoinSeen{s.join, probe_context(w), ctx.o.join_timeout_s}, t0,
                fmt::format("{}/{} ranks joined", s.join.present.size(), w.world_size));
  // A rank on a host set aside (--exclude-hosts / --exclude-file): HOST_EXCLUDED (harness/run/set_aside.h);
  // the check needs the roster. Whether the mesh runs is results::next_step's.
  if (s.join.roster_received && !s.join.master_world_size && !s.join.rank_taken_by)
    set_aside_step(ctx, s.join);
}

}  // namespace ncclsmoke::harness
