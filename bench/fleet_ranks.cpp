// Simulated ranks for bench/fleet_sim.py: ranks FIRST..LAST of a world of N, beside one real rank 0
// (`ncclsmoke run --rank 0 --transports none`), each a thread that speaks the run's protocol
// through the project's own store client and join:
//   connect -> read run/id -> join (join_world's store operations; the roster once per simulated
//   host, through the run's own RosterCopy: the host's first rank leads) -> mesh: post a result
//   without probing,
//   and answer rank 0's dials (NSMK hello) for the ranks rank 0 dials -> wait for mesh/done ->
//   post the local verdict (verdict/<r>).
// The verdict posted is a real local verdict (--template, a rank's verdict.rankN.json from a real
// run: identities with link stats, node facts, env) rewritten for the simulated rank, its host
// and the run, and posted as post_local posts it (without the transport rows); --finding ranks add a finding of their own (GPU_XID or NIC_ERRORS).
// Every text is built before the first connection, so the run itself costs the machine only
// what a rank's protocol costs.
//
// What it prints, one JSON line on stdout at the end:
//   {"ranks":K,"joined":J,"posted":P,"refused":[r...],"errors":{"r":"what"...},
//    "last_join_unix_ns":T,"post_bytes":B,"findings":[r...],"roster_bytes":R,
//    "roster_copies":C}   (C: ranks that took their host leader's copy of the roster)
// "refused": ranks whose verdict post failed (the store refused or dropped it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/join.h"
#include "rendezvous/mesh.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/tcp_client.h"
#include "results/judging/classify.h"
#include "results/verdict/finding_codes.h"
#include "results/verdict/verdict.h"

namespace {

using namespace ncclsmoke;
using rendezvous::Clock;
using rendezvous::Millis;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string job_id;
  int world = 0;
  int first = 1;
  int last = 0;
  int ranks_per_host = 8;
  bool roster_from_store = false;  // every rank reads the roster from the store (no RosterCopy)
  std::string rank0_host;  // rank 0's host name, as it joined
  std::string template_path;
  std::vector<int> findings;
  std::vector<int> never_join;
  std::vector<int> stop_after_mesh;
  double join_timeout_s = 120;
  double mesh_timeout_s = 60;
  std::size_t stack_kib = 256;
};

std::string host_of(int rank, int per_host) { return "sim-" + std::to_string(rank / per_host); }

// The rank's verdict text: the template rewritten for `rank`, with a finding of its own when
// `with_finding`. The run id is filled in at post time (the same for every rank: a placeholder
// replaced once).
constexpr const char* kRunIdMark = "@@RUN_ID@@";

std::string verdict_text(const results::Verdict& tmpl, const Options& o, int rank,
                         bool with_finding) {
  results::Verdict v = tmpl;
  const std::string host = host_of(rank, o.ranks_per_host);
  v.reporting_rank = rank;
  v.run_id = kRunIdMark;
  v.world.size = o.world;
  v.world.master_addr = o.host;
  v.world.master_port = o.port;
  v.world.job_id = o.job_id;
  v.ranks.clear();
  results::RankInfo me;
  me.rank = rank;
  me.host = host;
  me.node = host;
  me.pid = 100000 + rank;
  me.local_address = "127.0.0.1";
  me.interface = "lo";
  v.ranks.push_back(me);
  v.transports.clear();  // as post_local posts a view (harness/run/gather.cpp)
  // The template's link figures name its own ring neighbours: each simulated rank's name its
  // ring's (rank - 1 and rank + 1, on their hosts), as a rank of this world would.
  const int prev = (rank + o.world - 1) % o.world, next = (rank + 1) % o.world;
  auto point = [&](nlohmann::json& end, int peer) {
    if (!end.is_object()) return;
    end["rank"] = peer;
    end["host"] = peer == 0 ? o.rank0_host : host_of(peer, o.ranks_per_host);
  };
  for (auto& id : v.identities) {
    if (id.rank >= 0) id.rank = rank;
    auto& obs = id.observed;
    if (!obs.is_object()) continue;
    if (obs.contains("rank")) obs["rank"] = rank;
    if (obs.contains("world_size")) obs["world_size"] = o.world;
    if (auto ls = obs.find("link_stats"); ls != obs.end() && ls->is_object()) {
      if (ls->contains("from_prev")) point((*ls)["from_prev"], prev);
      if (ls->contains("to_next")) point((*ls)["to_next"], next);
    }
    if (auto ps = obs.find("peers"); ps != obs.end() && ps->is_object()) {
      if (ps->contains("recv_from")) point((*ps)["recv_from"], prev);
      if (ps->contains("send_to")) point((*ps)["send_to"], next);
    }
  }
  v.findings.clear();
  if (with_finding) {
    if (rank % 2)
      v.findings.push_back(results::make_finding(
          results::Code::GPU_XID, "GPU 3 on " + host + " reported Xid 79 (fell off the bus)",
          {rank}, {host}));
    else
      v.findings.push_back(results::make_finding(
          results::Code::NIC_ERRORS, "eth1 on " + host + " counted 1,204 receive errors",
          {rank}, {host}));
  }
  results::apply_verdict(v);
  return results::to_json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Answers rank 0's mesh hello for `rank` ("NSMK" + u32 dialler, answered "NSMK" + u32 rank) until
// `stop`; one connection at a time is enough (rank 0 dials each peer at most twice).
class HelloListener {
 public:
  HelloListener(int rank, std::atomic<bool>& stop) : rank_(rank), stop_(stop) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 64) != 0)
      throw std::runtime_error("rank " + std::to_string(rank) + ": cannot listen for the mesh");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HelloListener() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void serve() {
    while (!stop_) {
      timeval tv{0, 200000};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        return;
      }
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char hello[8];
      if (::recv(c, hello, sizeof hello, MSG_WAITALL) == 8 && std::memcmp(hello, "NSMK", 4) == 0) {
        char reply[8] = {'N', 'S', 'M', 'K'};
        uint32_t r = static_cast<uint32_t>(rank_);
        std::memcpy(reply + 4, &r, 4);  // the probe's byte order: native (little-endian here)
        (void)::send(c, reply, sizeof reply, MSG_NOSIGNAL);
      }
      ::close(c);
    }
  }
  int rank_;
  std::atomic<bool>& stop_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

struct Outcome {
  std::mutex mu;
  int joined = 0, posted = 0;
  std::vector<int> refused;
  std::map<int, std::string> errors;
  std::atomic<int64_t> last_join_ns{0};
  uint64_t post_bytes = 0;
  std::size_t roster_bytes = 0;
  int roster_copies = 0;
};

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct RankJob {
  const Options* o;
  int rank;
  bool stop_after_mesh;
  std::string* text;
  HelloListener* listener;  // non-null for the ranks rank 0 dials
  Outcome* out;
};

void run_rank(RankJob& j) {
  const Options& o = *j.o;
  const int r = j.rank;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(j.out->mu);
    j.out->errors[r] = what;
  };
  try {
    rendezvous::TcpStoreOptions so;
    so.host = o.host;
    so.port = static_cast<uint16_t>(o.port);
    so.op_timeout = Millis{static_cast<int64_t>(std::max(o.join_timeout_s, o.mesh_timeout_s) * 1000)};
    const auto start = Clock::now();
    auto client = rendezvous::TcpStore::connect(so, start + Millis{30000});
    rendezvous::PrefixStore job("ncclsmoke/" + o.job_id + "/0", *client);
    const auto join_deadline = start + Millis{static_cast<int64_t>(o.join_timeout_s * 1000)};
    const std::string run_id = job.get("run/id", join_deadline);
    rendezvous::Identity id;
    id.rank = r;
    id.world_size = o.world;
    id.host = host_of(r, o.ranks_per_host);
    id.node = id.host;
    id.pid = 100000 + r;
    id.local_address = "127.0.0.1";
    id.interface = "lo";
    char token[17];
    std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(0x5133ull << 32 | r));
    id.token = token;
    // The join's store operations, in join_world's order (rendezvous/join.cpp), with the roster
    // read but not turned into identities: on one machine every simulated rank's O(N) parse adds
    // up to O(N^2) of CPU that a cluster spreads over N machines, and would starve rank 0 here.
    // Rank 0 sends each rank the whole roster all the same.
    const std::string rank_text = std::to_string(r);
    const int local_rank = r % o.ranks_per_host;
    auto copy = o.roster_from_store
                    ? rendezvous::RosterCopy()
                    : rendezvous::RosterCopy::for_host(
                          o.job_id + "/0", run_id, id.host, local_rank == 0,
                          Millis{2000 + 1000 * (o.world / 1024)});  // grown_with_world(2 s)
    job.set("join/arrived/" + rank_text, id.token);
    copy.announce();
    if (job.get("join/world_size", join_deadline) != std::to_string(o.world))
      return fail("rank 0 announced another world size");
    const std::string mine = id.to_json();
    if (job.compare_set("join/rank/" + rank_text, "", mine) != mine)
      return fail("its rank was taken");
    job.set("join/here/" + rank_text, id.token);
    job.add("join/count", 1);
    {
      // Held no longer than it is looked at: 16,383 rosters kept alive at once were 1.5 GB of
      // fresh pages for this machine to zero, each a cost of its own rank's machine in a cluster.
      std::string roster = copy.read(job, "join/roster", join_deadline + Millis{5000});
      int64_t now = unix_ns(), prev = j.out->last_join_ns.load();
      while (now > prev && !j.out->last_join_ns.compare_exchange_weak(prev, now)) {
      }
      if (roster.find("\"present_runs\"") == std::string::npos) return fail("no roster");
      std::lock_guard lock(j.out->mu);
      j.out->roster_bytes = std::max(j.out->roster_bytes, roster.size());
      j.out->roster_copies += copy.read_the_copy();
    }
    {
      std::lock_guard lock(j.out->mu);
      ++j.out->joined;
    }
    const auto mesh_deadline = Clock::now() + Millis{static_cast<int64_t>(o.mesh_timeout_s * 1000)};
    if (j.listener) job.set("mesh/addr/" + std::to_string(r), j.listener->address());
    job.set("mesh/result/" + std::to_string(r),
            R"({"tested":0,"failures":[],"untested_to":[],"deadline_hit":false})");
    if (j.stop_after_mesh) return;  // stops mid-run: no verdict, its connection closes
    (void)job.get("mesh/done", mesh_deadline);
    std::string text = std::move(*j.text);
    text.replace(text.find(kRunIdMark), std::strlen(kRunIdMark), run_id);
    try {
      job.set("verdict/" + std::to_string(r), text);
      std::lock_guard lock(j.out->mu);
      ++j.out->posted;
      j.out->post_bytes += text.size();
    } catch (const std::exception& e) {
      std::lock_guard lock(j.out->mu);
      j.out->refused.push_back(r);
      j.out->errors[r] = std::string("post: ") + e.what();
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

void* rank_thread(void* arg) {
  run_rank(*static_cast<RankJob*>(arg));
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Simulated ranks for bench/fleet_sim.py (beside one real rank 0)"};
  app.add_option("--host", o.host, "rank 0's store address");
  app.add_option("--port", o.port, "rank 0's store port")->required();
  app.add_option("--job-id", o.job_id, "the job id rank 0 was given (--job-id)")->required();
  app.add_option("--world", o.world, "the world size")->required();
  app.add_option("--first", o.first, "the first simulated rank");
  app.add_option("--last", o.last, "the last simulated rank")->required();
  app.add_option("--ranks-per-host", o.ranks_per_host, "simulated ranks per host name");
  app.add_flag("--roster-from-store", o.roster_from_store,
               "every rank reads the roster from the store, none from its host leader's copy");
  app.add_option("--rank0-host", o.rank0_host, "rank 0's host name (the ring's links to it)")
      ->required();
  app.add_option("--template", o.template_path, "a real local verdict to post (rewritten)")
      ->required();
  app.add_option("--finding", o.findings, "ranks that post a finding of their own")->delimiter(',');
  app.add_option("--never-join", o.never_join, "ranks that never connect")->delimiter(',');
  app.add_option("--stop-after-mesh", o.stop_after_mesh,
                 "ranks that stop after their mesh result (no verdict)")
      ->delimiter(',');
  app.add_option("--join-timeout", o.join_timeout_s, "seconds");
  app.add_option("--mesh-timeout", o.mesh_timeout_s, "seconds");
  app.add_option("--stack-kib", o.stack_kib, "each rank thread's stack");
  CLI11_PARSE(app, argc, argv);

  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  std::ifstream in(o.template_path);
  std::stringstream buf;
  buf << in.rdbuf();
  const results::Verdict tmpl = results::verdict_from_text(buf.str());

  const std::set<int> findings(o.findings.begin(), o.findings.end());
  const std::set<int> never(o.never_join.begin(), o.never_join.end());
  const std::set<int> stops(o.stop_after_mesh.begin(), o.stop_after_mesh.end());
  // Rank 0 dials among the ranks that joined (--never-join lists every absent rank, not only
  // this helper's).
  std::vector<int> all;
  for (int r = 0; r < o.world; ++r)
    if (!never.count(r)) all.push_back(r);
  const auto dialled = rendezvous::mesh_peers(0, all, 64, 4);

  Outcome out;
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<HelloListener>> listeners;
  std::vector<std::string> texts(o.last - o.first + 1);
  std::vector<RankJob> jobs;
  jobs.reserve(texts.size());
  for (int r = o.first; r <= o.last; ++r) {
    if (never.count(r)) continue;
    HelloListener* l = nullptr;
    if (std::find(dialled.begin(), dialled.end(), r) != dialled.end()) {
      listeners.push_back(std::make_unique<HelloListener>(r, stop));
      l = listeners.back().get();
    }
    texts[r - o.first] = verdict_text(tmpl, o, r, findings.count(r) > 0);
    jobs.push_back({&o, r, stops.count(r) > 0, &texts[r - o.first], l, &out});
  }
  std::fprintf(stderr, "fleet_ranks %d..%d: %zu ranks ready (%zu answer rank 0's mesh dial)\n",
               o.first, o.last, jobs.size(), listeners.size());
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, o.stack_kib * 1024);
  std::vector<pthread_t> threads;
  for (auto& j : jobs) {
    pthread_t t;
    if (pthread_create(&t, &attr, rank_thread, &j) != 0) {
      std::lock_guard lock(out.mu);
      out.errors[j.rank] = "cannot start its thread";
      continue;
    }
    threads.push_back(t);
  }
  for (auto t : threads) pthread_join(t, nullptr);
  stop = true;
  listeners.clear();

  nlohmann::json report;
  report["ranks"] = jobs.size();
  report["joined"] = out.joined;
  report["posted"] = out.posted;
  report["refused"] = out.refused;
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [r, e] : out.errors) errors[std::to_string(r)] = e;
  report["errors"] = errors;
  report["last_join_unix_ns"] = out.last_join_ns.load();
  report["post_bytes"] = out.post_bytes;
  report["roster_bytes"] = out.roster_bytes;
  report["roster_copies"] = out.roster_copies;
  report["findings"] = o.findings;
  std::printf("%s\n", report.dump().c_str());
  return 0;
}
