#include "rendezvous/mesh.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <future>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "rendezvous/bounded_json.h"
#include "rendezvous/connect.h"
#include "rendezvous/rank_ref.h"
#include "rendezvous/socket_io.h"
#include "rendezvous/store_util.h"

namespace ncclsmoke::rendezvous {
namespace {

using nlohmann::json;

// 8-byte hello both ways: "NSMK" + uint32 rank, so a dial that reaches the wrong process (a stale
// address, a port reused by something else) is not counted as a working path.
constexpr char kHelloMagic[4] = {'N', 'S', 'M', 'K'};

std::string mesh_hello(int rank) {
  std::string h(kHelloMagic, 4);
  uint32_t r = static_cast<uint32_t>(rank);
  h.append(reinterpret_cast<const char*>(&r), 4);
  return h;
}

// Answers each dial with our hello. One thread serves every connection with poll(), so a slow or
// stopped dialler cannot hold the others up (under load hundreds of dials arrive at once). The
// same thread answers the path-MTU datagrams (mtu_probe.h) on a UDP socket of the same address
// and port; without one (the address is not numeric, the UDP port is taken) peers' MTU probes of
// this rank go unanswered, which they count as not checked.
class Listener {
 public:
  Listener(const MeshOptions& opt, int rank) : rank_(rank) {
    auto l = listen_in_range(opt.bind_address, opt.port_min, opt.port_max, 4096,
                             "mesh: rank " + std::to_string(rank));
    fd_ = l.fd;
    port_ = l.port;
    if (opt.mtu_probe) {
      udp_ = open_mtu_echo(opt.bind_address, port_);
      if (udp_ >= 0) interface_mtu_ = interface_mtu_of(opt.bind_address);
    }
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_ < 0) {
      int err = errno;
      ::close(fd_);
      if (udp_ >= 0) ::close(udp_);
      throw StoreError(ErrorClass::other, "mesh: rank " + std::to_string(rank) +
                                              " cannot create an eventfd: " + std::strerror(err));
    }
    thread_ = std::thread([this] { serve(); });
  }

  ~Listener() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_, &one, sizeof one);
    if (thread_.joinable()) thread_.join();
    ::close(wake_);
    if (fd_ >= 0) ::close(fd_);
    if (udp_ >= 0) ::close(udp_);
  }

  uint16_t port() const { return port_; }

 private:
  struct Conn {
    int fd;
    std::string in;
    Deadline until;
  };
  static constexpr std::size_t kMaxConns = 4096;  // beyond it new dials wait in the backlog
  static constexpr Millis kHelloTimeout{1000};    // a dialler's hello must arrive within this

  void serve() {
    std::vector<Conn> conns;
    std::vector<pollfd> p;
    for (;;) {
      p.assign({{wake_, POLLIN, 0}, {fd_, static_cast<short>(conns.size() < kMaxConns ? POLLIN : 0), 0}});
      Millis wait{-1};
      for (const auto& c : conns) {
        p.push_back({c.fd, POLLIN, 0});
        Millis left = remaining(c.until) + Millis{1};
        if (wait.count() < 0 || left < wait) wait = left;
      }
      if (udp_ >= 0) p.push_back({udp_, POLLIN, 0});  // last: the connections keep 2..
      int n = ::poll(p.data(), p.size(), static_cast<int>(wait.count()));
      if (n < 0 && errno != EINTR) break;
      if (n > 0 && p[0].revents) break;  // stop
      if (n > 0 && udp_ >= 0 && p.back().revents) answer_mtu_probes(udp_, rank_, interface_mtu_);
      // Connections first (their indexes in p are 2..), then new ones.
      std::vector<Conn> keep;
      keep.reserve(conns.size());
      for (std::size_t i = 0; i < conns.size(); ++i) {
        Conn& c = conns[i];
        bool done = false;
        if (n > 0 && p[i + 2].revents) {
          char buf[8];
          ssize_t got = ::recv(c.fd, buf, 8 - c.in.size(), MSG_DONTWAIT);
          if (got > 0) {
            c.in.append(buf, static_cast<std::size_t>(got));
            if (c.in.size() == 8) {
              // A fresh socket's send buffer always holds 8 bytes: this never blocks.
              if (c.in.compare(0, 4, kHelloMagic, 4) == 0) {
                std::string h = mesh_hello(rank_);
                [[maybe_unused]] auto sent = ::send(c.fd, h.data(), h.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
              }
              done = true;
            }
          } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
            done = true;
          }
        }
        if (!done && expired(c.until)) done = true;
        if (done) ::close(c.fd);
        else keep.push_back(std::move(c));
      }
      conns.swap(keep);
      if (n > 0 && (p[1].revents & POLLIN)) {
        while (conns.size() < kMaxConns) {
          int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (c < 0) break;
          conns.push_back({c, {}, deadline_after(kHelloTimeout)});
        }
      }
    }
    for (auto& c : conns) ::close(c.fd);
  }

  int rank_;
  int fd_ = -1;
  int wake_ = -1;
  int udp_ = -1;           // the MTU echo; -1 none
  int interface_mtu_ = 0;  // the MTU of the interface that carries our address (0 unknown)
  uint16_t port_ = 0;
  std::thread thread_;
};

enum class PairOutcome { passed, blocked, untested };

struct PairResult {
  PairOutcome outcome = PairOutcome::passed;
  PairFailure failure;  // when blocked (or untested: what cut it short, for the log)
  MtuProbeResult mtu;   // when passed: the path-MTU probe (skipped when not run)
};

// Dials `peer` at `addr` and checks its hello before `deadline`; nullopt when the right rank
// answered, else the failure (class: what try_connect_tcp saw, stalled when the connection was made
// but no hello came back, protocol for a wrong answer).
std::optional<PairFailure> dial_hello(int self, int peer, const std::string& addr,
                                      Deadline deadline) {
  auto start = Clock::now();
  PairFailure f;
  f.from = self;
  f.to = peer;
  f.to_address = addr;
  const RankRef me{self, {}}, them{peer, {}};
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(addr, host, port)) {
    f.error_class = ErrorClass::protocol;
    f.message = fmt::format("{} published a malformed address '{}'", them, addr);
    return f;
  }
  Backoff quick;
  quick.initial = Millis{50};
  quick.max = Millis{300};
  // The net layer's classified connect; its class is the pair's (refused, timed_out, dns ...).
  ConnectOutcome conn = try_connect_tcp(host, port, deadline, quick);
  if (!conn.ok()) {
    f.error_class = conn.error_class;
    f.message = fmt::format("{} -> {}: {}", me, them, conn.error);
    f.waited_s = seconds_since(start);
    return f;
  }
  std::string reply;
  bool sent = send_all(conn.fd, mesh_hello(self), deadline);
  bool ok = sent && recv_exact(conn.fd, 8, reply, deadline).empty();
  ::close(conn.fd);
  uint32_t their = 0;
  if (ok && reply.compare(0, 4, kHelloMagic, 4) == 0) {
    std::memcpy(&their, reply.data() + 4, 4);
    if (static_cast<int>(their) == peer) return std::nullopt;
    f.error_class = ErrorClass::protocol;
    f.message = fmt::format("{} connected to {} but rank {} answered instead of {}", me, addr,
                            their, them);
  } else if (ok) {
    f.error_class = ErrorClass::protocol;
    f.message = fmt::format("{} connected to {} ({}) but the answer was not an ncclsmoke mesh "
                            "handshake",
                            me, addr, them);
  } else {
    f.error_class = ErrorClass::stalled;
    f.message = fmt::format("{} connected to {} ({}) but no mesh handshake came back within {}: "
                            "the connection was accepted, the process did not answer",
                            me, addr, them, seconds_text_fine(seconds_since(start)));
  }
  f.waited_s = seconds_since(start);
  return f;
}

// One pair under its own timeout and the phase deadline. A failure is listed only when it is
// an answer (failure_is_an_answer); one the phase deadline cut short is untested. A pair that
// timed out on its full pair timeout is dialled once more when the phase deadline leaves another
// full pair timeout: a DROP rule fails again, a peer that was only starved of CPU (hundreds of
// ranks on a few cores) answers. Without that much time left the first, full timeout stands.
PairResult probe_pair(int self, int peer, const std::string& addr, const MeshOptions& opt) {
  PairResult r;
  auto start = Clock::now();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (expired(opt.deadline)) break;
    auto own = deadline_after(opt.pair_timeout);
    bool cut = opt.deadline < own;
    auto f = dial_hello(self, peer, addr, earliest(own, opt.deadline));
    if (!f) {
      r.outcome = PairOutcome::passed;
      return r;
    }
    bool timeout_class = !failure_is_an_answer(f->error_class, true);
    if (attempt == 1) {
      r.failure.message += "; dialled again: " + f->message;
      break;
    }
    r.failure = std::move(*f);
    if (!failure_is_an_answer(r.failure.error_class, cut)) {
      r.outcome = PairOutcome::untested;  // the phase deadline, not the pair, ran out
      return r;
    }
    r.outcome = PairOutcome::blocked;
    if (!timeout_class) return r;  // refused / reset / wrong rank: an answer, no second try
    // A second try the phase deadline would cut short tells nothing new: the first stands.
    if (remaining(opt.deadline) < opt.pair_timeout) break;
  }
  if (r.failure.from < 0) {
    r.outcome = PairOutcome::untested;  // never dialled: the phase deadline had passed
    return r;
  }
  r.failure.waited_s = seconds_since(start);
  return r;
}

json failure_to_json(const PairFailure& f) {
  return {{"from", f.from},       {"to", f.to},           {"to_address", f.to_address},
          {"class", to_string(f.error_class)}, {"message", f.message}, {"waited_s", f.waited_s}};
}

json mtu_path_to_json(const MtuPath& m) {
  return {{"from", m.from},           {"to", m.to},
          {"to_address", m.to_address}, {"interface", m.interface},
          {"local_mtu", m.local_mtu}, {"peer_mtu", m.peer_mtu},
          {"probed_mtu", m.probed_mtu}, {"path_mtu", m.path_mtu}};
}

MtuPath mtu_path_from_json(const json& j) {
  MtuPath m;
  if (!j.is_object()) return m;
  m.from = j.value("from", -1);
  m.to = j.value("to", -1);
  m.to_address = j.value("to_address", "");
  m.interface = j.value("interface", "");
  m.local_mtu = j.value("local_mtu", 0);
  m.peer_mtu = j.value("peer_mtu", 0);
  m.probed_mtu = j.value("probed_mtu", 0);
  m.path_mtu = j.value("path_mtu", 0);
  return m;
}

constexpr std::size_t kMaxListedBlackHoles = 256;  // per rank's result; the total is counted

// The MTU part of a result or of mesh/done.
json mtu_to_json(const MeshResult& r) {
  json holes = json::array();
  for (const auto& m : r.mtu_black_holes) holes.push_back(mtu_path_to_json(m));
  return {{"checked", r.mtu_paths_checked},
          {"unchecked", r.mtu_paths_unchecked},
          {"values", r.mtu_values},
          {"black_holes", holes},
          {"black_holes_total", r.mtu_black_holes_total}};
}

void add_unique(std::vector<int>& to, const std::vector<int>& from) {
  for (int v : from)
    if (std::find(to.begin(), to.end(), v) == to.end()) to.push_back(v);
  std::sort(to.begin(), to.end());
}

// Adds one result's (or mesh/done's) MTU part to `r`; malformed parts add nothing.
void add_mtu_from_json(const json& j, MeshResult& r) {
  if (!j.is_object()) return;
  try {
    r.mtu_paths_checked += j.value("checked", std::size_t{0});
    r.mtu_paths_unchecked += j.value("unchecked", std::size_t{0});
    add_unique(r.mtu_values, j.value("values", std::vector<int>{}));
    std::size_t listed = 0;
    for (const auto& h : j.value("black_holes", json::array())) {
      auto m = mtu_path_from_json(h);
      if (m.from < 0 || m.to < 0) continue;
      r.mtu_black_holes.push_back(std::move(m));
      ++listed;
    }
    r.mtu_black_holes_total += std::max(listed, j.value("black_holes_total", std::size_t{0}));
  } catch (const json::exception&) {
    // A malformed MTU part: what was read so far stands; the pairs' own results are unaffected.
  }
}

PairFailure failure_from_json(const json& j) {
  PairFailure f;
  f.from = j.value("from", -1);
  f.to = j.value("to", -1);
  f.to_address = j.value("to_address", "");
  f.message = j.value("message", "");
  f.waited_s = j.value("waited_s", 0.0);
  std::string cls = j.value("class", "other");
  for (auto c : {ErrorClass::dns, ErrorClass::refused, ErrorClass::timed_out, ErrorClass::stalled,
                 ErrorClass::unreachable, ErrorClass::reset, ErrorClass::protocol})
    if (cls == to_string(c)) f.error_class = c;
  return f;
}

std::string key_of(const char* what, int rank) {
  return std::string("mesh/") + what + "/" + std::to_string(rank);
}

constexpr std::string_view kLeftAddress = "!left: ";
bool left_address(const std::string& addr) { return addr.rfind(kLeftAddress, 0) == 0; }

// Rank 0: every rank's result (until deadline + done_grace), then the ranks whose result never
// came sorted into lost (never listened, or its listener gives no handshake now) and unfinished
// (its listener answers: it was still probing), then mesh/done for everyone.
void collect(Store& store, const MeshOptions& opt, MeshResult& result) {
  std::vector<int> ranks = opt.ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back(key_of("result", r));
  // Results until the phase deadline; a rank still without one then gets more time only when it
  // has begun (published its address): one that has not even begun by the deadline is waited for
  // a quarter of the grace more, not the whole grace (a rank killed after the join must not hold
  // every survivor's verdict back; a rank that has begun may still be probing).
  std::vector<bool> present;
  auto texts = get_present(store, keys, opt.deadline, present);

  std::vector<PairFailure> all;
  MeshResult mtu;  // the MTU parts of every result
  std::size_t tested = 0, untested = 0, lost_pairs = 0;
  std::vector<std::pair<int, int>> untested_pairs;  // (from, to), sorted out once lost is known
  bool hit = false;
  std::vector<int> left;  // ranks that said they left before their probe
  auto take = [&](int from, const std::string& text) {
    auto j = parse_bounded_or_discarded(text, kMaxStorePostJsonBytes);
    if (j.is_discarded() || !j.is_object()) return false;
    if (j.contains("left")) {
      left.push_back(from);
      return true;
    }
    tested += j.value("tested", std::size_t{0});
    for (int to : j.value("untested_to", std::vector<int>{})) untested_pairs.emplace_back(from, to);
    hit = hit || j.value("deadline_hit", false);
    for (const auto& f : j.value("failures", json::array())) all.push_back(failure_from_json(f));
    add_mtu_from_json(j.value("mtu", json()), mtu);
    return true;
  };
  std::vector<int> missing;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (!present[i] || !take(ranks[i], texts[i])) missing.push_back(ranks[i]);

  std::vector<int> silent, unfinished;
  if (!missing.empty()) {
    hit = true;  // the phase deadline came before these ranks' results
    std::vector<std::string> addr_keys;
    for (int r : missing) addr_keys.push_back(key_of("addr", r));
    // Who had begun by the phase deadline, then who begins within a quarter of the grace. A world
    // still starting (some began after the deadline: a short deadline, a loaded machine) is slow,
    // not dead, so the rest get the whole grace; when nobody began late, the missing ones are
    // taken as gone at the quarter (a rank killed after the join must not hold the survivors back).
    std::vector<bool> listening;
    auto count = [](const std::vector<bool>& v) { return std::count(v.begin(), v.end(), true); };
    get_present(store, addr_keys, opt.deadline, listening);
    const auto began_by_deadline = count(listening);
    auto addrs = get_present(store, addr_keys, opt.deadline + opt.done_grace / 4, listening);
    const auto began = count(listening);
    if (began > began_by_deadline && began < static_cast<long>(addr_keys.size()))
      addrs = get_present(store, addr_keys, opt.deadline + opt.done_grace, listening);
    std::vector<int> begun;
    std::vector<std::string> begun_addrs, late_keys;
    for (std::size_t i = 0; i < missing.size(); ++i) {
      if (!listening[i]) {
        // Never began the probe: lost, unless the liveness watch has it connected and answering
        // (a rank still starting on a loaded machine under a short deadline is not dead).
        (opt.seen_alive && opt.seen_alive(missing[i]) ? unfinished : silent).push_back(missing[i]);
        continue;
      }
      begun.push_back(missing[i]);
      begun_addrs.push_back(addrs[i]);
      late_keys.push_back(key_of("result", missing[i]));
    }
    std::vector<bool> late_present;
    auto late = get_present(store, late_keys, opt.deadline + opt.done_grace, late_present);
    std::vector<std::pair<int, std::string>> to_dial;
    for (std::size_t i = 0; i < begun.size(); ++i)
      if (!late_present[i] || !take(begun[i], late[i])) to_dial.emplace_back(begun[i], begun_addrs[i]);
    // Still no result: lost when its listener gives no handshake now, else still probing.
    constexpr std::size_t kBatch = 64;  // liveness dials in flight at once
    Millis dial_budget = std::min(opt.pair_timeout, Millis{1000});
    for (std::size_t b = 0; b < to_dial.size(); b += kBatch) {
      std::vector<std::pair<int, std::future<bool>>> dials;
      for (std::size_t i = b; i < std::min(to_dial.size(), b + kBatch); ++i) {
        auto [r, addr] = to_dial[i];
        dials.emplace_back(r, std::async(std::launch::async, [&, r = r, addr = addr] {
                             return !dial_hello(opt.rank, r, addr, deadline_after(dial_budget));
                           }));
      }
      for (auto& [r, alive] : dials)
        (alive.get() || (opt.seen_alive && opt.seen_alive(r)) ? unfinished : silent).push_back(r);
    }
    // A rank whose listener gave no handshake may have posted its result and closed it while it
    // was dialled (a loaded machine, a short deadline): read those results once more.
    if (!silent.empty()) {
      std::vector<std::string> keys;
      for (int r : silent) keys.push_back(key_of("result", r));
      std::vector<bool> now_present;
      auto now = get_present(store, keys, deadline_after(Millis{200}), now_present);
      std::vector<int> still_silent;
      for (std::size_t i = 0; i < silent.size(); ++i)
        if (!now_present[i] || !take(silent[i], now[i])) still_silent.push_back(silent[i]);
      silent = std::move(still_silent);
    }
    // What the ranks without a result would have dialled is not tested.
    for (int r : silent)
      lost_pairs += mesh_peers(r, ranks, opt.full_mesh_threshold, opt.random_peers).size();
    for (int r : unfinished)
      untested += mesh_peers(r, ranks, opt.full_mesh_threshold, opt.random_peers).size();
    std::sort(unfinished.begin(), unfinished.end());
  }
  // A rank that left dialled no one: its would-be pairs are lost, like a silent rank's.
  for (int r : left) {
    silent.push_back(r);
    lost_pairs += mesh_peers(r, ranks, opt.full_mesh_threshold, opt.random_peers).size();
  }
  std::sort(silent.begin(), silent.end());
  auto is_lost = [&](int r) { return std::binary_search(silent.begin(), silent.end(), r); };
  for (auto [from, to] : untested_pairs) ++(is_lost(from) || is_lost(to) ? lost_pairs : untested);
  // Pairs from or to a lost rank are explained by its loss (PEER_LOST), not by the network.
  std::vector<PairFailure> blocked;
  for (auto& f : all) {
    if (!is_lost(f.from) && !is_lost(f.to)) {
      blocked.push_back(std::move(f));
      continue;
    }
    if (tested) --tested;
    ++lost_pairs;
  }

  // An MTU black hole from or to a lost rank is its loss (it died between two datagrams).
  std::erase_if(mtu.mtu_black_holes, [&](const MtuPath& m) {
    bool gone = is_lost(m.from) || is_lost(m.to);
    if (gone && mtu.mtu_black_holes_total) --mtu.mtu_black_holes_total;
    return gone;
  });

  json done{{"tested", tested},   {"untested", untested}, {"lost_pairs", lost_pairs},
            {"deadline_hit", hit},
            {"silent", silent},   {"unfinished", unfinished}, {"failures", json::array()},
            {"mtu", mtu_to_json(mtu)}};
  for (const auto& f : blocked) done["failures"].push_back(failure_to_json(f));
  store.set("mesh/done", done.dump());
  result.failures = std::move(blocked);
  result.silent_ranks = std::move(silent);
  std::sort(left.begin(), left.end());
  result.left_ranks = std::move(left);
  result.unfinished_ranks = std::move(unfinished);
  result.pairs_tested = tested;
  result.pairs_untested = untested;
  result.pairs_lost = lost_pairs;
  result.deadline_hit = hit;
  result.mtu_black_holes = std::move(mtu.mtu_black_holes);
  result.mtu_black_holes_total = mtu.mtu_black_holes_total;
  result.mtu_paths_checked = mtu.mtu_paths_checked;
  result.mtu_paths_unchecked = mtu.mtu_paths_unchecked;
  result.mtu_values = std::move(mtu.mtu_values);
  result.summary_received = true;
}

}  // namespace

std::vector<int> mesh_peers_at(const std::vector<int>& sorted, std::size_t at,
                               std::size_t threshold, std::size_t random_peers) {
  std::vector<int> out;
  if (at >= sorted.size()) return out;
  const int rank = sorted[at];
  const std::size_t n = sorted.size();
  if (n <= threshold) {
    for (int r : sorted)
      if (r != rank) out.push_back(r);
    return out;
  }
  const std::size_t next = (at + 1) % n, prev = (at + n - 1) % n;
  std::vector<std::size_t> chosen{next, prev};
  // The random peers: indices drawn from the rank's own seed, anything but itself, its ring
  // neighbours and those already drawn. Drawing (not shuffling the world) keeps a rank's choice
  // O(random_peers): watch_peers makes it for every rank, on every rank, and a shuffle of 16,384
  // ranks each time was minutes of CPU.
  std::mt19937 rng(static_cast<uint32_t>(rank) * 2654435761u + 17u);
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  const std::size_t excluded = 1 + (next != at) + (prev != at && prev != next);
  const std::size_t want = std::min(random_peers, n - excluded);
  while (chosen.size() < 2 + want) {
    const std::size_t j = pick(rng);
    if (j == at || std::find(chosen.begin(), chosen.end(), j) != chosen.end()) continue;
    chosen.push_back(j);
  }
  for (std::size_t j : chosen)
    if (j != at) out.push_back(sorted[j]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> mesh_peers(int rank, const std::vector<int>& ranks, std::size_t threshold,
                            std::size_t random_peers) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  auto me = std::lower_bound(sorted.begin(), sorted.end(), rank);
  if (me == sorted.end() || *me != rank) return {};
  return mesh_peers_at(sorted, static_cast<std::size_t>(me - sorted.begin()), threshold,
                       random_peers);
}

std::vector<int> set_aside_stopped_ranks(MeshResult& m, const std::vector<int>& stopped) {
  auto is_stopped = [&](int r) { return std::find(stopped.begin(), stopped.end(), r) != stopped.end(); };
  std::vector<int> involved;
  auto note = [&](int r) {
    if (is_stopped(r) && std::find(involved.begin(), involved.end(), r) == involved.end())
      involved.push_back(r);
  };
  std::vector<PairFailure> keep;
  for (auto& f : m.failures) {
    if (!is_stopped(f.from) && !is_stopped(f.to)) {
      keep.push_back(std::move(f));
      continue;
    }
    note(f.from);
    note(f.to);
    if (m.pairs_tested) --m.pairs_tested;
    ++m.pairs_lost;
  }
  m.failures = std::move(keep);
  std::erase_if(m.mtu_black_holes, [&](const MtuPath& p) {
    if (!is_stopped(p.from) && !is_stopped(p.to)) return false;
    note(p.from);
    note(p.to);
    if (m.mtu_black_holes_total) --m.mtu_black_holes_total;
    return true;
  });
  for (auto* list : {&m.silent_ranks, &m.unfinished_ranks}) {
    for (int r : *list) note(r);
    list->erase(std::remove_if(list->begin(), list->end(), is_stopped), list->end());
  }
  std::sort(involved.begin(), involved.end());
  return involved;
}

bool failure_is_an_answer(ErrorClass cls, bool cut_by_phase_deadline) {
  switch (cls) {
    case ErrorClass::timed_out:
    case ErrorClass::stalled:
    case ErrorClass::other:  // e.g. a socket() error: only an answer when it had its whole time
      return !cut_by_phase_deadline;
    default:
      return true;
  }
}

void publish_left_mesh(Store& store, int rank, const std::string& why) {
  const std::string text = why.substr(0, 400);
  store.set(key_of("addr", rank), std::string(kLeftAddress) + text);
  store.set(key_of("result", rank), json{{"left", text}}.dump());
}

MeshResult run_mesh_probe(Store& store, const MeshOptions& opt) {
  auto start = Clock::now();
  MeshResult result;
  result.budget_s = std::max(0.0, std::chrono::duration<double>(opt.deadline - start).count());
  Listener listener(opt, opt.rank);
  std::string advertise = opt.advertise_address.empty() ? opt.bind_address : opt.advertise_address;
  if (advertise.empty()) advertise = "127.0.0.1";
  result.listen_address = join_host_port(advertise, listener.port());
  store.set(key_of("addr", opt.rank), result.listen_address);
  if (opt.after_publish) opt.after_publish();

  result.peers = mesh_peers(opt.rank, opt.ranks, opt.full_mesh_threshold, opt.random_peers);
  const bool mtu_on = opt.mtu_probe && is_numeric_address(advertise);
  // Addresses first, under a deadline that leaves time to dial: a peer that died after joining
  // never publishes, and must not eat the whole probe's budget. With a budget shorter than one
  // pair timeout, half of it goes to the addresses.
  auto addr_deadline = std::max(opt.deadline - opt.pair_timeout - Millis{500},
                                start + (opt.deadline - start) / 2);
  addr_deadline = std::max(Clock::now(), std::min(addr_deadline, opt.deadline));
  std::vector<std::string> keys;
  for (int peer : result.peers) keys.push_back(key_of("addr", peer));
  std::vector<bool> present;
  auto addrs = get_present(store, keys, addr_deadline, present);

  std::vector<std::pair<int, std::future<PairResult>>> probes;
  std::vector<int> untested_to;
  for (std::size_t i = 0; i < result.peers.size(); ++i) {
    int peer = result.peers[i];
    if (present[i] && left_address(addrs[i])) {
      untested_to.push_back(peer);  // it left before its probe: rank 0 counts the pair lost
      continue;
    }
    if (!present[i]) {
      untested_to.push_back(peer);  // no address yet: not tested (rank 0 decides if it is lost)
      result.deadline_hit = true;
      continue;
    }
    probes.emplace_back(peer, std::async(std::launch::async, [&, peer, addr = addrs[i]] {
                          auto t = Clock::now();
                          PairResult r = probe_pair(opt.rank, peer, addr, opt);
                          if (r.outcome != PairOutcome::passed || !mtu_on) return r;
                          // The path MTU, in this pair's own thread (pairs in parallel), under
                          // one pair timeout and the phase deadline.
                          std::string host;
                          uint16_t port = 0;
                          if (!split_host_port(addr, host, port) ||
                              same_host_path(advertise, host))
                            return r;
                          auto hello = std::chrono::duration_cast<Millis>(Clock::now() - t);
                          r.mtu = probe_path_mtu(opt.rank, peer, advertise, host, port, hello,
                                                 earliest(deadline_after(opt.pair_timeout),
                                                          opt.deadline));
                          return r;
                        }));
  }
  json mine{{"failures", json::array()}};
  std::size_t tested = 0;
  for (auto& [peer, p] : probes) {
    auto r = p.get();
    if (r.outcome == PairOutcome::untested) {
      untested_to.push_back(peer);
      result.deadline_hit = true;
      continue;
    }
    ++tested;
    if (r.outcome == PairOutcome::blocked) {
      mine["failures"].push_back(failure_to_json(r.failure));
      result.failures.push_back(r.failure);
    }
    switch (r.mtu.outcome) {
      case MtuOutcome::skipped: break;
      case MtuOutcome::no_answer:
      case MtuOutcome::cut: ++result.mtu_paths_unchecked; break;
      case MtuOutcome::black_hole:
        ++result.mtu_black_holes_total;
        if (result.mtu_black_holes.size() < kMaxListedBlackHoles)
          result.mtu_black_holes.push_back(r.mtu.path);
        [[fallthrough]];
      case MtuOutcome::passed:
      case MtuOutcome::learned:
        ++result.mtu_paths_checked;
        add_unique(result.mtu_values, {r.mtu.path.probed_mtu});
        break;
    }
  }
  result.pairs_tested = tested;
  result.pairs_untested = untested_to.size();
  mine["tested"] = tested;
  mine["untested_to"] = untested_to;
  mine["deadline_hit"] = result.deadline_hit;
  mine["mtu"] = mtu_to_json(result);
  store.set(key_of("result", opt.rank), mine.dump());

  if (opt.rank == 0) {
    collect(store, opt, result);
  } else {
    try {
      auto j = parse_bounded_or_discarded(store.get("mesh/done", opt.deadline + 2 * opt.done_grace),
                                          kMaxStorePostJsonBytes);
      if (!j.is_discarded()) {
        result.summary_received = true;
        result.pairs_tested = j.value("tested", std::size_t{0});
        result.pairs_untested = j.value("untested", std::size_t{0});
        result.pairs_lost = j.value("lost_pairs", std::size_t{0});
        result.deadline_hit = j.value("deadline_hit", false);
        result.silent_ranks = j.value("silent", std::vector<int>{});
        result.unfinished_ranks = j.value("unfinished", std::vector<int>{});
        result.failures.clear();
        for (const auto& f : j.value("failures", json::array()))
          result.failures.push_back(failure_from_json(f));
        MeshResult all;  // everyone's MTU part replaces ours, as the failures do
        add_mtu_from_json(j.value("mtu", json()), all);
        result.mtu_black_holes = std::move(all.mtu_black_holes);
        result.mtu_black_holes_total = all.mtu_black_holes_total;
        result.mtu_paths_checked = all.mtu_paths_checked;
        result.mtu_paths_unchecked = all.mtu_paths_unchecked;
        result.mtu_values = std::move(all.mtu_values);
      }
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) throw;
    }
  }
  result.duration_s = seconds_since(start);
  return result;
}

}  // namespace ncclsmoke::rendezvous
