#include "harness/run/liveness.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "rendezvous/net.h"

namespace ncclsmoke::harness {

using namespace ncclsmoke::rendezvous;

void Liveness::start(Store& store, const JoinResult& join, const std::string& local_address) {
  started_ = true;
  PeerWatchOptions po;
  po.rank = ctx_.world.rank;
  for (const auto& id : join.present) {
    po.ranks.push_back(id.rank);
    po.hosts[id.rank] = id.host;
  }
  po.bind_address = ctx_.o.mesh_bind.empty() ? local_address : ctx_.o.mesh_bind;
  po.advertise_address = po.bind_address;
  // The mesh's listener is closed by now: the watch listens in the same allowed range (checked
  // at the door; not given: 0/0, ephemeral).
  if (!ctx_.o.mesh_port_range.empty())
    parse_port_range(ctx_.o.mesh_port_range, po.port_min, po.port_max);
  po.full_threshold = ctx_.o.mesh_threshold;
  po.random_peers = ctx_.o.mesh_random_peers;
  po.deadline =
      earliest(Clock::now() + ms(std::max(2.0, ctx_.o.pair_timeout_s)), ctx_.steps_deadline);
  po.on_silent = [this](const SilentPeer& s) { on_silent(s); };
  po.on_resumed = [this](const SilentPeer& s) { on_resumed(s); };
  try {
    auto w = PeerWatch::start(store, po, [this](const LostPeer& lost) { on_lost(lost); });
    std::lock_guard lock(watch_mu_);
    watch_ = std::move(w);
  } catch (const std::exception& e) {
    log_warn(fmt::format("ncclsmoke: rank {}: warning: no liveness watch: {}", ctx_.world.rank,
                         e.what()));
  }
}

void Liveness::stop() {
  std::lock_guard lock(watch_mu_);
  if (watch_) watch_->stop();
}

bool Liveness::fits_before_mesh(const JoinResult& join) const {
  if (ctx_.requested_transports().empty()) return false;
  if (ctx_.o.mesh_port_range.empty()) return true;
  uint16_t lo = 0, hi = 0;
  parse_port_range(ctx_.o.mesh_port_range, lo, hi);
  std::size_t here = 0;
  for (const auto& id : join.present) here += id.host == ctx_.world.hostname;
  return static_cast<std::size_t>(hi - lo + 1) >= 2 * std::max<std::size_t>(here, 1);
}

void Liveness::set_wait_state(const WaitState& w) {
  std::lock_guard lock(watch_mu_);
  if (watch_) watch_->set_wait_state(w);
}

std::string Liveness::store_unusable() const {
  if (ctx_.world.external_store) return "";
  std::lock_guard lock(watch_mu_);
  if (!watch_) return "";
  for (const auto& l : watch_->lost())
    if (l.rank == 0) return "rank 0, which serves the store, died (liveness watch)";
  for (const auto& q : watch_->silent())
    if (q.rank == 0) return "rank 0, which serves the store, is frozen (liveness watch)";
  return "";
}

bool Liveness::rank0_stopped() const {
  std::lock_guard lock(watch_mu_);
  if (!watch_) return false;
  for (const auto& l : watch_->lost())
    if (l.rank == 0) return true;
  for (const auto& s : watch_->silent())
    if (s.rank == 0) return true;
  return false;
}

std::set<int> Liveness::lost_ranks() const {
  std::set<int> out;
  std::lock_guard lock(watch_mu_);
  if (watch_)
    for (const auto& l : watch_->lost()) out.insert(l.rank);
  return out;
}

std::vector<int> Liveness::stopped_ranks() const {
  std::vector<int> out;
  std::lock_guard lock(watch_mu_);
  if (watch_) {
    for (const auto& l : watch_->lost()) out.push_back(l.rank);
    // A frozen rank's verdict will not come either (it cannot post while stopped).
    for (const auto& q : watch_->silent()) out.push_back(q.rank);
  }
  return out;
}

std::set<int> Liveness::watched_ranks(SilentAre silent) const {
  std::set<int> out;
  std::lock_guard lock(watch_mu_);
  if (!watch_) return out;
  for (int r : watch_->watched()) out.insert(r);
  for (const auto& l : watch_->lost()) out.erase(l.rank);
  if (silent == SilentAre::kept) return out;
  for (const auto& q : watch_->silent())
    if (silent == SilentAre::left_out || q.retransmits <= 0) out.erase(q.rank);
  return out;
}

std::set<int> Liveness::alive_ranks() const { return watched_ranks(SilentAre::left_out); }
std::set<int> Liveness::not_lost_ranks() const { return watched_ranks(SilentAre::kept); }
// Frozen ones are left out; those behind a lossy path stay.
std::set<int> Liveness::reachable_ranks() const { return watched_ranks(SilentAre::kept_if_lossy); }

std::vector<int> Liveness::stopped_ranks_for_mesh(const MeshResult& m) const {
  std::set<int> suspects(m.silent_ranks.begin(), m.silent_ranks.end());
  for (const auto& f : m.failures)
    if (f.error_class == ErrorClass::stalled || f.error_class == ErrorClass::reset ||
        f.error_class == ErrorClass::refused) {
      suspects.insert(f.from);
      suspects.insert(f.to);
    }
  if (!m.summary_received && ctx_.world.rank != 0) suspects.insert(0);
  suspects.erase(ctx_.world.rank);
  auto wait_until = earliest(deadline_after(Millis{3500}), ctx_.steps_deadline);
  for (;;) {
    auto got = stopped_ranks();
    std::sort(got.begin(), got.end());
    got.erase(std::unique(got.begin(), got.end()), got.end());
    bool all = std::all_of(suspects.begin(), suspects.end(),
                           [&](int r) { return std::binary_search(got.begin(), got.end(), r); });
    bool watching = [&] {
      std::lock_guard lock(watch_mu_);
      return watch_ != nullptr;
    }();
    if (all || !watching || expired(wait_until)) return got;
    std::this_thread::sleep_for(Millis{50});
  }
}

void Liveness::settle(const std::vector<results::TransportFacts>& outcomes) const {
  using Kind = results::TransportFailureKind;
  const bool waited_on_peer = std::any_of(outcomes.begin(), outcomes.end(), [](const auto& o) {
    return o.error && o.error->source == results::TransportFailureFacts::Source::transport &&
           (o.error->kind == Kind::timeout || o.error->kind == Kind::peer_lost ||
            o.error->kind == Kind::init_failed);
  });
  if (!waited_on_peer) return;
  auto until = earliest(deadline_after(Millis{1000}), ctx_.steps_deadline);
  while (!expired(until)) {
    {
      std::lock_guard lock(watch_mu_);
      if (!watch_ || !watch_->lost().empty() || !watch_->silent().empty()) return;
    }
    std::this_thread::sleep_for(Millis{20});
  }
}

std::optional<results::WaitChainEvidence> Liveness::wait_chain(
    const std::map<int, std::string>& hosts) const {
  std::map<int, WaitState> states;
  std::set<int> stopped;
  {
    std::lock_guard lock(watch_mu_);
    if (!watch_) return std::nullopt;
    states = watch_->peer_wait_states();
    for (const auto& l : watch_->lost()) stopped.insert(l.rank);
    for (const auto& s : watch_->silent()) stopped.insert(s.rank);
  }
  if (states.empty()) return std::nullopt;
  auto now = Clock::now();
  results::WaitChainEvidence e;
  for (const auto& [r, w] : states)
    e.wait_states[std::to_string(r)] = {
        {"phase", w.phase},
        {"what", w.what},
        {"waiting_on", w.waiting_on},
        {"waited_s",
         w.waiting_on < 0 ? 0.0 : std::chrono::duration<double>(now - w.since).count()}};
  const WaitChain chain = follow_wait_chain(ctx_.world.rank, states, stopped);
  e.chain = chain;
  e.reaches_stopped = chain.root && stopped.count(*chain.root);
  if (chain.path.size() > 1) e.text = wait_chain_text(chain, states, hosts, now);
  return e;
}

// The callbacks run on the watch thread: they only record, under RunRecord::mu, and return.
void Liveness::on_lost(const LostPeer& lost) {
  ctx_.saw(results::PeerLostSeen{lost, ctx_.self()});
}

void Liveness::on_silent(const SilentPeer& s) {
  ctx_.saw(results::PeerSilentSeen{s, ctx_.world.rank});
}

void Liveness::on_resumed(const SilentPeer& s) {
  ctx_.saw(results::PeerResumedSeen{s});
}

}  // namespace ncclsmoke::harness
