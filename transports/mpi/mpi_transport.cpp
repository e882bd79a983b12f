#include "transports/mpi/mpi_transport.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "transports/mpi/mpi_wire.h"
#include "rendezvous/bounded_json.h"
#include "rendezvous/rank_ref.h"
#include "rendezvous/store_error.h"

extern char** environ;

namespace ncclsmoke::transports {
namespace {

using nlohmann::json;
using rendezvous::remaining;
using rendezvous::seconds_since;
using rendezvous::seconds_text;
using rendezvous::StoreError;
using namespace mpi_wire;

std::string launcher_variable() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return v;
  return "";
}

int finalize_timeout_s() {
  const char* v = std::getenv("NCCLSMOKE_MPI_FINALIZE_TIMEOUT_S");
  int s = v ? std::atoi(v) : 0;
  return s > 0 ? s : 60;
}

int dup_high(int fd) {  // above the child's fixed fds, close-on-exec
  int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return h;
}

// The rank's one MPI child process (MPI is initialised once per process, as before): spawned by
// the first open(), shared by later transports, finalised at exit. Every wait on it is bounded.
class Child {
 public:
  static Child& get() {
    static Child* c = new Child();  // never destroyed: at exit only the atexit hook runs
    return *c;
  }

  bool started() const { return pid_ > 0; }
  bool dead() const { return !dead_reason_.empty(); }
  const std::string& dead_reason() const { return dead_reason_; }

  // The MPI world a world instance (no TransportContext::world_ranks) opened in this process,
  // which the pairwise rounds' instances form their communicators in; else why not.
  struct World {
    bool opened = false;
    std::string proc;          // MPI_Get_processor_name
    bool bf16 = false;         // MPI_Op_create worked
    std::string open_error;    // the last world open's failure, while none succeeded
  };
  World& world() { return world_; }

  // Starts the child; throws init_failed naming the system call that failed.
  void spawn(const std::string& who, Deadline deadline) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      throw TransportError(ErrorKind::init_failed, who + ": socketpair: " + std::strerror(errno));
    int page_fd = memfd_create("ncclsmoke-mpi-control", MFD_CLOEXEC);
    if (page_fd < 0 || ftruncate(page_fd, sizeof(ControlPage)) != 0)
      throw TransportError(ErrorKind::init_failed, who + ": memfd_create: " + std::strerror(errno));
    void* page = mmap(nullptr, sizeof(ControlPage), PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0);
    if (page == MAP_FAILED)
      throw TransportError(ErrorKind::init_failed, who + ": mmap: " + std::strerror(errno));
    page_ = new (page) ControlPage();
    int err[2];
    if (pipe2(err, O_CLOEXEC) != 0)
      throw TransportError(ErrorKind::init_failed, who + ": pipe2: " + std::strerror(errno));
    int child_sock = dup_high(sv[1]), child_page = dup_high(page_fd), err_w = dup_high(err[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, child_sock, kChildSocketFd);
    posix_spawn_file_actions_adddup2(&fa, child_page, kChildControlFd);
    posix_spawn_file_actions_adddup2(&fa, err_w, 2);
    std::string ppid = std::to_string(getpid());
    char* argv[] = {const_cast<char*>("ncclsmoke-mpi"), const_cast<char*>(kChildArg),
                    ppid.data(), nullptr};
    pid_t pid = -1;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(child_sock);
    ::close(child_page);
    ::close(err_w);
    if (rc != 0)
      throw TransportError(ErrorKind::init_failed,
                           who + ": cannot start the MPI child process (/proc/self/exe " +
                               kChildArg + "): " + std::strerror(rc));
    pid_ = pid;
    sock_ = sv[0];
    std::thread([this, fd = err[0]] { pump_stderr(fd); }).detach();
    std::atexit(finalize_at_exit);
    // The child says "ready" once it serves requests: an executable without the __mpi-child
    // dispatch in its main() runs something else and never does.
    json hello;
    int r = recv_msg(sock_, hello, std::min(deadline, Clock::now() + std::chrono::seconds(30)));
    if (r > 0 && hello.value("event", "") == "ready") return;
    if (r == 0) {
      abandon("starting the MPI child process");
    } else if (!reap(Millis(2000))) {
      kill(pid_, SIGKILL);
      reap(Millis(2000));
    }
    dead_reason_ = "the MPI child process did not start";
    std::this_thread::sleep_for(Millis(50));
    auto tail = stderr_tail();
    std::string how = !death_.reaped ? "did not answer" : death_.exited
                          ? "exit status " + std::to_string(death_.code)
                          : "killed by signal " + std::to_string(death_.code);
    throw TransportError(ErrorKind::init_failed,
                         who + ": the MPI child process (/proc/self/exe " + kChildArg + " " +
                             ppid + ") did not start serving (" + how +
                             "): this executable's main() must hand `" + kChildArg +
                             "` to transports::mpi_child_main (see mpi_transport.h)",
                         -1, json{{"child_stderr_tail", tail}});
  }

  // Sends `req` (with `fd`) and returns the child's answer before `deadline`. When the answer
  // does not come: with `progress` set, each collective the child completes (control page)
  // pushes the wait `progress` further; otherwise the child is abandoned and TransportError
  // (timeout) thrown with `timeout_text`. The child's death is classified (classify_death).
  json request(const json& req, Deadline deadline, const std::string& what, bool during_init,
               const std::string& who, const std::function<std::string()>& timeout_text,
               int fd = -1, Millis progress = Millis(0)) {
    throw_if_dead(who, what);
    std::lock_guard<std::mutex> l(mu_);
    if (!send_msg(sock_, req, fd)) return died(what, during_init, who);
    uint64_t seen = page_->iterations_done.load(std::memory_order_acquire);
    auto last_progress = Clock::now();
    for (;;) {
      Deadline until = deadline;
      if (progress.count() > 0) until = std::min(deadline, last_progress + progress);
      json resp;
      int r = recv_msg(sock_, resp, std::min(until, Clock::now() + Millis(200)));
      if (r > 0 && resp.value("event", "") == "abort") {
        death_.reported_abort = true;
        death_.abort_message = resp.value("message", "");
        if (resp.contains("help")) death_.help = resp["help"].get<std::vector<std::string>>();
        return died(what, during_init, who);
      }
      if (r > 0) return resp;
      if (r < 0) return died(what, during_init, who);
      uint64_t now_done = page_->iterations_done.load(std::memory_order_acquire);
      if (progress.count() > 0 && now_done != seen) {
        seen = now_done;
        last_progress = Clock::now();
        continue;  // a collective completed: the per-collective wait starts again
      }
      if (Clock::now() >= until) {
        abandon(what);
        throw TransportError(ErrorKind::timeout, timeout_text());
      }
    }
  }

  // Ends the child after a call missed its deadline: SIGUSR1 makes it leave PMIx cleanly (the
  // job goes on), SIGKILL after 2 s. Its late writes cannot reach the caller's buffers.
  void abandon(const std::string& what) {
    if (pid_ <= 0 || dead()) return;
    kill(pid_, SIGUSR1);
    if (!reap(Millis(2000))) {
      kill(pid_, SIGKILL);
      reap(Millis(2000));
    }
    dead_reason_ = what + " timed out and its MPI child process was abandoned";
  }

  // The first caller after the child's death gets the classified error (unless a call that
  // swallows errors saw it first: see keep_death_for_next_caller); later ones "unusable".
  void throw_if_dead(const std::string& who, const std::string& what) {
    if (!dead()) return;
    if (death_error_ && !death_seen_) {
      death_seen_ = true;
      throw *death_error_;
    }
    throw unusable(who, what);
  }
  void keep_death_for_next_caller() { death_seen_ = false; }

  // Notices a child that ended between requests (killed, crashed) without asking it anything:
  // then dead(), with how it ended. For a caller that must know before it makes a peer wait.
  void notice_exit() {
    if (pid_ <= 0 || dead() || death_.reaped) return;
    std::lock_guard<std::mutex> l(mu_);  // not while a request is in flight
    if (!reap(Millis(0))) return;
    dead_reason_ = std::string("the MPI child process ended between calls (") +
                   (!death_.reaped ? std::string("gone")
                    : death_.exited ? "exit status " + std::to_string(death_.code)
                                    : "killed by signal " + std::to_string(death_.code)) +
                   ")";
  }

  std::vector<std::string> stderr_tail() {
    std::lock_guard<std::mutex> l(tail_mu_);
    return {tail_.begin(), tail_.end()};
  }
  pid_t pid() const { return pid_; }

 private:
  [[noreturn]] json died(const std::string& what, bool during_init, const std::string& who) {
    // The report (if any) came first; now wait for the exit (the guard finalises PMIx first).
    death_.during_init = during_init;
    std::string call = what;
    if (during_init) call = page_->in_mpi_init.load() ? "MPI_Init_thread" : "MPI_Comm_dup";
    if (!death_.reaped && !reap(Millis(5000))) {
      kill(pid_, SIGKILL);
      reap(Millis(2000));
    }
    std::this_thread::sleep_for(Millis(50));  // let the stderr pump drain the last lines
    death_.stderr_tail = stderr_tail();
    auto v = classify_death(death_, call);
    dead_reason_ = call + " failed and the MPI child process ended" +
                   (death_.reported_abort ? " (Open MPI aborted)" : "");
    json ev = {{"mpi_child_pid", pid_},
               {"mpi_child_exit", death_.reaped ? (death_.exited ? "exit " : "signal ") +
                                                      std::to_string(death_.code)
                                                : "not reaped"},
               {"open_mpi_abort_reported", death_.reported_abort},
               {"child_stderr_tail", death_.stderr_tail}};
    if (!death_.help.empty()) ev["open_mpi_help"] = death_.help;
    death_error_ = std::make_shared<TransportError>(static_cast<ErrorKind>(v.kind),
                                                    who + ": " + v.reason, -1, ev);
    death_seen_ = true;
    throw *death_error_;
  }

  TransportError unusable(const std::string& who, const std::string& what) {
    return TransportError(ErrorKind::other, who + ": " + what +
                                                " refused: MPI is unusable in this process because " +
                                                dead_reason_);
  }

  bool reap(Millis wait) {
    auto until = Clock::now() + wait;
    for (;;) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        death_.reaped = true;
        death_.exited = WIFEXITED(st);
        death_.code = WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st);
        return true;
      }
      if (r < 0 || Clock::now() >= until) return r < 0 && errno == ECHILD;
      std::this_thread::sleep_for(Millis(10));
    }
  }

  // Forwards the child's stderr to ours and keeps its last 40 lines for the evidence.
  void pump_stderr(int fd) {
    char buf[4096];
    std::string partial;
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      (void)!write(2, buf, static_cast<std::size_t>(n));
      partial.append(buf, static_cast<std::size_t>(n));
      std::size_t nl;
      std::lock_guard<std::mutex> l(tail_mu_);
      while ((nl = partial.find('\n')) != std::string::npos) {
        tail_.push_back(partial.substr(0, nl));
        partial.erase(0, nl + 1);
        if (tail_.size() > 40) tail_.pop_front();
      }
    }
    ::close(fd);
  }

  // atexit: the child calls MPI_Finalize (it waits for every rank), bounded by
  // NCCLSMOKE_MPI_FINALIZE_TIMEOUT_S; then it is abandoned.
  static void finalize_at_exit() {
    auto& c = get();
    if (c.pid_ <= 0) return;
    if (c.dead()) {
      std::fprintf(stderr, "ncclsmoke: mpi: not finalising MPI: %s\n", c.dead_reason_.c_str());
      return;
    }
    int timeout = finalize_timeout_s();
    auto start = Clock::now();
    bool ok = false;
    try {
      json resp = c.request({{"op", "finalize"}}, Clock::now() + std::chrono::seconds(timeout),
                            "MPI_Finalize", false, "mpi",
                            [] { return std::string("MPI_Finalize timed out"); });
      ok = resp.value("ok", false);
      if (ok) c.reap(Millis(5000));
    } catch (...) {
    }
    if (!ok)
      std::fprintf(stderr, "ncclsmoke: mpi: MPI_Finalize did not return within %d s (waited %.1f "
                   "s); exiting without it\n", timeout, seconds_since(start));
  }

  std::mutex mu_;  // one request at a time
  World world_;
  pid_t pid_ = -1;
  int sock_ = -1;
  ControlPage* page_ = nullptr;
  ChildDeath death_;
  std::shared_ptr<TransportError> death_error_;
  bool death_seen_ = false;
  std::string dead_reason_;
  std::mutex tail_mu_;
  std::deque<std::string> tail_;
};

std::atomic<int64_t> next_map_id{1};  // buffer ids in the (shared) child
std::atomic<int64_t> next_open_id{1};  // communicator ids in the (shared) child
// MPI_Comm_create_group tags this process picks as a pair's lower rank: never the same twice
// between two processes, so a creation can only match its own pair's.
std::atomic<int> next_pair_tag{0};
constexpr int kPairTagSpan = 30000;  // below MPI_TAG_UB's guaranteed 32767

// The pair's keys in its store (harness/run/pairwise_step.h: "pairwise/mpi/<round>/<a>-<b>/"):
// each rank's "mpi/info/<rank>" ({"ready", "why", "world_ranks", "tag"}), the arrival counter
// "mpi/arrived" and the one decision "mpi/decision" ("go" / "off"), settled by compare_set.
constexpr const char* kPairArrived = "mpi/arrived";
constexpr const char* kPairDecision = "mpi/decision";
std::string pair_info_key(int rank) { return "mpi/info/" + std::to_string(rank); }

class MpiTransport final : public Transport {
 public:
  ~MpiTransport() override {
    close();
    for (auto& [base, m] : maps_) munmap(base, m.bytes);
  }

  std::string name() const override { return "mpi"; }

  void open(const TransportContext& ctx, Deadline deadline) override {
    rank_ = ctx.rank;
    world_ = ctx.world_size;
    host_ = ctx.host_of(ctx.rank);
    world_ranks_ = ctx.world_ranks;
    if (!world_ranks_.empty()) return open_pair(ctx, deadline);
    try {
      open_world(ctx, deadline);
    } catch (const TransportError& e) {
      auto& w = Child::get().world();
      if (!w.opened) w.open_error = e.what();
      throw;
    }
  }

 private:
  void open_world(const TransportContext& ctx, Deadline deadline) {
    auto start = Clock::now();
    if (launcher_variable().empty())
      throw TransportError(ErrorKind::unavailable,
                           who() + ": not started by mpirun (no OMPI_COMM_WORLD_SIZE, PMIX_RANK or "
                               "PMI_RANK in the environment): launch with mpirun ... ncclsmoke run "
                               "--transports mpi");
    std::string mode;  // declared in mpi_options.cpp: allreduce | iallreduce
    try {
      ctx.options.validate("mpi");
      mode = ctx.options.get_string("mpi.collective");
    } catch (const OptionError& e) {
      throw TransportError(ErrorKind::init_failed, who() + ": " + e.what());
    }
    auto& c = Child::get();
    if (!c.started()) c.spawn(who(), deadline);
    int64_t id = next_open_id++;
    json resp = c.request(
        {{"op", "open"}, {"id", id}, {"rank", rank_}, {"size", world_}}, deadline,
        "MPI_Init_thread / MPI_Comm_dup", true, who(), [&] {
          return who() + ": MPI_Init_thread did not return within the open deadline (waited " +
                 seconds_text(seconds_since(start)) +
                 "): MPI_Init and MPI_Comm_dup wait for every rank of the mpirun job, so some rank "
                 "has not opened the mpi transport (or is stuck); its MPI child process was "
                 "abandoned and this process makes no further MPI calls";
        });
    if (resp.contains("unavailable"))  // libmpi could not be loaded in the child
      throw TransportError(ErrorKind::unavailable, who() + ": " + resp.value("unavailable", ""));
    if (resp.contains("error")) throw open_failed(resp, "", start);
    int size = resp.value("size", -1), rank = resp.value("rank", -1);
    if (size != world_ || rank != rank_) {
      std::string which = size != world_ ? "world size" : "rank";
      throw TransportError(
          ErrorKind::init_failed,
          who() + ": " + which + " mismatch: the harness has rank " + std::to_string(rank_) +
              " of " + std::to_string(world_) + " but MPI_COMM_WORLD has rank " +
              std::to_string(rank) + " of " + std::to_string(size) + " on " +
              resp.value("proc", "?") +
              " (launch every rank with the same mpirun, -np equal to the harness world size)");
    }
    id_ = id;
    proc_ = resp.value("proc", "");
    bf16_ = resp.value("bf16", false);
    blocking_ = mode == "allreduce";
    collective_ = blocking_ ? "MPI_Allreduce" : "MPI_Iallreduce + MPI_Test";
    auto& w = c.world();
    w.opened = true;
    w.proc = proc_;
    w.bf16 = bf16_;
    w.open_error.clear();
  }

  // Why this process cannot take part in a pair's communicator, "" when it can. Such a pair is
  // unavailable (on both sides): it never ran, so it says nothing about the link between them.
  static std::string pair_unready() {
    if (launcher_variable().empty())
      return "not started by mpirun (no OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK in the "
             "environment)";
    auto& c = Child::get();
    if (!c.started())
      return "MPI was not opened in this process (transport:mpi did not run here): a pair's "
             "communicator is made inside the MPI world transport:mpi opened, and a pair never "
             "starts MPI itself (MPI_Init waits for every rank of the mpirun job)";
    c.notice_exit();
    if (c.dead()) return "MPI is unusable in this process because " + c.dead_reason();
    auto& w = c.world();
    if (!w.opened)
      return "transport:mpi's open did not succeed in this process, so there is no MPI world to "
             "make a pair's communicator in" +
             (w.open_error.empty() ? std::string() : " (" + w.open_error + ")");
    return "";
  }

  // The pairwise rounds' instance (TransportContext::world_ranks): a communicator of these world
  // ranks made with MPI_Comm_create_group inside the MPI world that transport:mpi opened in this
  // process (collective over the pair only, so disjoint pairs form theirs at once). Before any MPI
  // call the pair agrees through its store: each rank posts whether it can take part (a rank
  // whose MPI is unusable says why, and its partner fails at once with that reason), the last to
  // arrive settles "go" and one that waited in vain settles "off" (compare_set: exactly one of the
  // two wins), so a partner that never comes ends in a timeout with no MPI call pending and this
  // process's MPI still usable. Only a partner that agreed and then did not create its side (it
  // stopped in between) leaves MPI_Comm_create_group waiting: bounded by `deadline`, the child is
  // abandoned past it, as for any MPI call that does not return.
  void open_pair(const TransportContext& ctx, Deadline deadline) {
    auto start = Clock::now();
    const auto& wr = world_ranks_;
    if (static_cast<int>(wr.size()) != world_ || world_ < 2 || rank_ < 0 || rank_ >= world_)
      throw TransportError(ErrorKind::init_failed,
                           who() + ": world_ranks " + json(wr).dump() + " do not match rank " +
                               std::to_string(rank_) + " of " + std::to_string(world_));
    auto peer_text = [&](int r) {
      return rendezvous::rank_text(wr[static_cast<std::size_t>(r)], ctx.host_of(r));
    };
    std::string mode;
    try {
      ctx.options.validate("mpi");
      mode = ctx.options.get_string("mpi.collective");
    } catch (const OptionError& e) {
      throw TransportError(ErrorKind::init_failed, who() + ": " + e.what());
    }
    std::string unready = pair_unready();
    rendezvous::Store* store = ctx.store;
    if (!store)
      throw TransportError(unready.empty() ? ErrorKind::init_failed : ErrorKind::unavailable,
                           who() + ": cannot form the pair's communicator: " +
                               (unready.empty() ? "a pair's instance needs the pair's store to "
                                                  "agree on its communicator"
                                                : unready));
    auto store_failed = [&](const std::string& doing, const StoreError& e) {
      return TransportError(
          e.error_class() == rendezvous::ErrorClass::timed_out ? ErrorKind::timeout
                                                               : ErrorKind::init_failed,
          who() + ": " + doing + " through the pair's store failed after " +
              seconds_text(seconds_since(start)) + ": " + e.what());
    };

    int tag = rank_ == 0 ? next_pair_tag++ % kPairTagSpan : -1;
    json info = {{"ready", unready.empty()}, {"world_ranks", wr}};
    if (!unready.empty()) info["why"] = unready;
    if (tag >= 0) info["tag"] = tag;
    try {
      store->set(pair_info_key(rank_), info.dump());
    } catch (const StoreError& e) {
      throw store_failed("posting this rank's state", e);
    }
    if (!unready.empty()) {
      try {
        store->compare_set(kPairDecision, "", "off");  // the partner stops waiting now
      } catch (const StoreError&) {
      }
      throw TransportError(ErrorKind::unavailable,
                           who() + ": cannot form the pair's communicator with " +
                               others_text(peer_text) + ": " + unready);
    }

    // Arrive; the last settles "go", one that waits in vain "off".
    // The wait for the others ends a little before the deadline (a quarter of what is left, at
    // most 1 s), so a "go" leaves MPI_Comm_create_group time to complete.
    const Millis left = std::max(Millis(0), remaining(deadline));
    const Deadline wait_until = deadline - std::min(Millis(1000), Millis(left.count() / 4));
    std::string decision;
    bool waited_in_vain = false;
    std::string wait_error;
    try {
      int64_t n = store->add(kPairArrived, 1);
      if (n >= world_) {
        decision = store->compare_set(kPairDecision, "", "go");
      } else {
        try {
          decision = store->get(kPairDecision, wait_until);
        } catch (const StoreError& e) {
          waited_in_vain = true;
          wait_error = e.what();
          decision = store->compare_set(kPairDecision, "", "off");
          // The partner's "go" just now still holds; a partner the liveness watch saw stop does
          // not create its side.
          if (decision == "go" && e.error_class() != rendezvous::ErrorClass::timed_out)
            decision = "off";
        }
      }
    } catch (const StoreError& e) {
      throw store_failed("agreeing on the pair", e);
    }

    // The others' states: posted before they arrived.
    std::map<int, json> others;
    for (int r = 0; r < world_; ++r) {
      if (r == rank_) continue;
      try {
        if (decision != "go" && !store->check({pair_info_key(r)})) continue;
        auto text = store->get(pair_info_key(r), Clock::now() + Millis(2000));
        auto parsed = rendezvous::parse_bounded_or_discarded(text, 64 * 1024);
        if (parsed.is_object()) others[r] = parsed;
      } catch (const StoreError& e) {
        if (decision == "go") throw store_failed("reading the partner's state", e);
      }
    }
    for (const auto& [r, j] : others) {
      if (j.value("ready", false)) continue;
      try {
        store->compare_set(kPairDecision, "", "off");
      } catch (const StoreError&) {
      }
      throw TransportError(ErrorKind::unavailable,
                           who() + ": cannot form the pair's communicator: its partner " +
                               peer_text(r) + " cannot take part: " + j.value("why", "?"),
                           r);
    }
    if (decision != "go") {
      std::vector<int> missing;
      for (int r = 0; r < world_; ++r)
        if (r != rank_ && !others.count(r)) missing.push_back(r);
      int peer = missing.empty() ? -1 : missing.front();
      std::string whom = missing.empty() ? others_text(peer_text) : peer_text(peer);
      throw TransportError(
          ErrorKind::timeout,
          who() + ": pair set-up timed out after " + seconds_text(seconds_since(start)) + ": " +
              (waited_in_vain ? whom + " did not arrive" +
                                    (wait_error.empty() ? "" : " (" + wait_error + ")")
                              : whom + " had given up waiting for this rank") +
              "; no MPI call was made (this process's MPI stays usable)",
          peer);
    }
    for (const auto& [r, j] : others)
      if (j.value("world_ranks", json()) != json(wr))
        throw TransportError(ErrorKind::init_failed,
                             who() + ": the pair disagrees on its ranks: this rank has " +
                                 json(wr).dump() + ", " + peer_text(r) + " has " +
                                 j.value("world_ranks", json()).dump(),
                             r);
    if (rank_ != 0) tag = others.count(0) ? others[0].value("tag", -1) : -1;
    if (tag < 0)
      throw TransportError(ErrorKind::init_failed,
                           who() + ": " + peer_text(0) + " posted no MPI_Comm_create_group tag", 0);

    auto& c = Child::get();
    int64_t id = next_open_id++;
    std::string what = "MPI_Comm_create_group with " + others_text(peer_text);
    json resp = c.request(
        {{"op", "pair"}, {"id", id}, {"ranks", wr}, {"rank", rank_}, {"tag", tag}}, deadline, what,
        false, who(), [&] {
          return who() + ": " + what + " did not return within the open deadline (waited " +
                 seconds_text(seconds_since(start)) +
                 "): the pair agreed through the store, but the partner did not create its side "
                 "(it stopped or is stuck); an MPI call cannot be cancelled, so this rank's MPI "
                 "child process was abandoned and this process makes no further MPI calls";
        });
    if (resp.contains("error")) throw open_failed(resp, what + ": ", start);
    id_ = id;
    proc_ = c.world().proc;
    bf16_ = c.world().bf16;
    blocking_ = mode == "allreduce";
    collective_ = blocking_ ? "MPI_Allreduce" : "MPI_Iallreduce + MPI_Test";
  }

  // "world rank 3 (host b)" / "world ranks ... ": the instance's other members.
  std::string others_text(const std::function<std::string(int)>& peer_text) const {
    std::string out;
    for (int r = 0; r < world_; ++r)
      if (r != rank_) out += (out.empty() ? "" : ", ") + peer_text(r);
    return out;
  }

 public:
  // Shared memory (memfd) mapped in both processes: the collective runs on these bytes directly.
  void* allocate(std::size_t bytes) override {
    std::size_t n = std::max<std::size_t>(bytes, 1);
    int fd = memfd_create("ncclsmoke-mpi-buffer", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(n)) != 0) {
      if (fd >= 0) ::close(fd);
      throw TransportError(ErrorKind::other, who() + ": memfd for " + std::to_string(bytes) +
                                                 " bytes: " + std::strerror(errno));
    }
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw TransportError(ErrorKind::other, who() + ": mmap of " + std::to_string(bytes) +
                                                 " bytes: " + std::strerror(errno));
    }
    int64_t map_id = next_map_id++;
    try {
      Child::get().request({{"op", "map"}, {"map", map_id}, {"bytes", n}},
                           Clock::now() + std::chrono::seconds(10), "mapping a shared buffer",
                           false, who(), [&] { return who() + ": mapping a buffer timed out"; },
                           fd);
    } catch (...) {
      ::close(fd);
      munmap(p, n);
      throw;
    }
    ::close(fd);
    maps_[static_cast<char*>(p)] = {map_id, n};
    return p;
  }

  void release(void* buffer) override {
    auto it = maps_.find(static_cast<char*>(buffer));
    if (it == maps_.end()) return;
    auto& c = Child::get();
    if (!c.dead()) {
      try {
        c.request({{"op", "unmap"}, {"map", it->second.id}},
                  Clock::now() + std::chrono::seconds(10), "unmapping a shared buffer", false,
                  who(), [&] { return who() + ": unmapping a buffer timed out"; });
      } catch (...) {
        c.keep_death_for_next_caller();  // release() cannot throw: the next call reports it
      }
    }
    munmap(it->first, it->second.bytes);
    maps_.erase(it);
  }

  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp,
                 Deadline deadline) override {
    run(send, recv, count, dtype, 1, deadline, Millis(0), nullptr);
  }

  // The child times the loop itself, so the figures carry no parent <-> child latency.
  double timed_allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp,
                         int iters, Deadline deadline,
                         const std::function<Deadline()>& op_deadline) override {
    Millis per_op = std::max(Millis(1), remaining(op_deadline()));
    double us = 0;
    run(send, recv, count, dtype, std::max(1, iters), deadline, per_op, &us);
    return us;
  }

  json identify() override {
    json id = json::object();
    auto& c = Child::get();
    if (c.dead()) {
      id["state"] = "unusable: " + c.dead_reason() + "; no MPI call was made";
      return id;
    }
    bool opened = id_ != 0;
    if (!c.started() || !opened) {
      // Before open: what the library says before MPI_Init, asked in this process.
      id = library_identity();
      if (!opened) return id;
    }
    try {
      json resp = c.request({{"op", "identify"}, {"opened", opened}},
                            Clock::now() + std::chrono::seconds(10), "identify", false, who(),
                            [&] { return who() + ": identify's MPI calls did not return in 10 s"; });
      for (auto& [k, v] : resp.items()) id[k] = v;
    } catch (const TransportError& e) {
      id["state"] = std::string("unusable: ") + e.what();
      return id;
    }
    if (opened) {
      id["host"] = proc_;
      id["rank"] = rank_;
      id["world_size"] = world_;
      if (!world_ranks_.empty()) id["world_ranks"] = world_ranks_;
      id["collective"] = collective_;
      id["process"] = "MPI runs in a child process of the rank (pid " + std::to_string(c.pid()) +
                      "), on buffers shared with it";
      const char* ls = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
      id["local_size"] = ls ? std::atoi(ls) : 0;
      id["how"] =
          "requested: the pml/btl/mtl MCA values in effect (mpirun --mca, OMPI_MCA_*, "
          "openmpi-mca-params.conf), read via MPI_T; selected: components whose MPI_T control "
          "variables survive MPI_Init (Open MPI closes the ones it did not select; for btl, the "
          "ones that initialised); observed: established TCP connections of the MPI process that "
          "did not exist before MPI_Init, minus the launcher's (PMIx/ORTE ports): btl tcp or "
          "libfabric tcp; and the btl vader shared-memory segments mapped (its own plus one per "
          "local peer it reached)";
    }
    return id;
  }

  void close() override {
    if (id_ == 0) return;
    int64_t id = id_;
    id_ = 0;
    auto& c = Child::get();
    if (c.dead()) return;
    try {
      c.request({{"op", "close"}, {"id", id}}, Clock::now() + std::chrono::seconds(10),
                "MPI_Comm_free", false, who(), [&] { return who() + ": MPI_Comm_free timed out"; });
    } catch (...) {
      c.keep_death_for_next_caller();
    }
  }

 private:
  struct Map {
    int64_t id = 0;
    std::size_t bytes = 0;
  };

  // {map, off} of [p, p + bytes) inside a shared buffer, or null json.
  json ref(const void* p, std::size_t bytes) const {
    auto* cp = static_cast<const char*>(p);
    auto it = maps_.upper_bound(const_cast<char*>(cp));
    if (it == maps_.begin()) return nullptr;
    --it;
    std::size_t off = static_cast<std::size_t>(cp - it->first);
    if (off > it->second.bytes || bytes > it->second.bytes - off) return nullptr;
    return {{"map", it->second.id}, {"off", off}};
  }

  void run(const void* send, void* recv, std::size_t count, DType dtype, int iters,
           Deadline deadline, Millis per_op, double* us_out) {
    if (id_ == 0)
      throw TransportError(ErrorKind::other, who() + ": allreduce before a successful open()");
    auto& c = Child::get();
    std::size_t bytes = count * dtype_size(dtype);
    std::string what = std::string(blocking_ ? "MPI_Allreduce" : "MPI_Iallreduce") + " of " +
                       std::to_string(bytes) + " bytes (" + std::to_string(count) + " " +
                       to_string(dtype) + ")";
    c.throw_if_dead(who(), what);
    if (rendezvous::expired(deadline))
      throw TransportError(ErrorKind::timeout, who() + ": deadline passed before " + what);
    if (dtype == DType::bfloat16 && !bf16_)
      throw TransportError(ErrorKind::unavailable,
                           who() + ": MPI_Op_create failed, so bfloat16 sums are unavailable");
    // The sweep passes only allocate()d buffers; other callers' memory goes through a scratch
    // shared buffer (copied in and out around the collective).
    json sref = ref(send, bytes), rref = ref(recv, bytes);
    bool scratch = sref.is_null() || rref.is_null();
    std::size_t half = (bytes + 63) / 64 * 64;
    if (scratch) {
      if (scratch_bytes_ < 2 * half) {
        if (scratch_) release(scratch_);
        scratch_ = nullptr;
        scratch_ = static_cast<char*>(allocate(2 * half));
        scratch_bytes_ = 2 * half;
      }
      std::memcpy(scratch_, send, bytes);
      sref = ref(scratch_, bytes);
      rref = send == recv ? sref : ref(scratch_ + half, bytes);
    }
    json req = {{"op", us_out ? "timed" : "allreduce"},
                {"id", id_},
                {"send", sref},
                {"recv", rref},
                {"count", count},
                {"dtype", dtype == DType::bfloat16 ? 1 : 0},
                {"blocking", blocking_},
                {"iters", iters},
                {"op_budget_ms", per_op.count()},
                {"budget_ms", remaining(deadline).count()}};
    auto start = Clock::now();
    auto budget = remaining(deadline);
    // The non-blocking child watches the deadline itself; the grace lets it say so first.
    Deadline wait_until = blocking_ ? deadline : deadline + std::chrono::seconds(2);
    Millis progress = per_op.count() > 0 ? per_op + (blocking_ ? Millis(0) : Millis(2000)) : Millis(0);
    auto timeout_text = [&] {
      return who() + ": " + what + " did not complete within its deadline (" +
             std::to_string((per_op.count() > 0 ? per_op : budget).count()) + " ms, waited " +
             seconds_text(seconds_since(start)) +
             "): a peer is slow, stopped or lost (under mpirun a rank that dies normally ends the "
             "whole job); an MPI collective cannot be cancelled, so this rank's MPI child process "
             "was abandoned (it left PMIx and exited, so nothing lands late in the caller's "
             "buffers), and this process makes no further MPI calls";
    };
    json resp = c.request(req, wait_until, what, false, who(), timeout_text, -1, progress);
    if (resp.value("timeout", false)) {
      c.abandon(what);
      throw TransportError(ErrorKind::timeout, timeout_text());
    }
    if (resp.contains("unavailable"))
      throw TransportError(ErrorKind::unavailable, who() + ": " + resp.value("unavailable", ""));
    if (resp.contains("error"))
      throw TransportError(ErrorKind::other,
                           who() + ": " + what + " failed after " +
                               seconds_text(seconds_since(start)) + ": " +
                               resp.value("error", "") + open_mpi_said(resp),
                           -1, error_evidence(resp));
    if (scratch) std::memcpy(recv, send == recv ? scratch_ : scratch_ + half, bytes);
    if (us_out) *us_out = resp.value("us", 0.0);
  }

  // An error the child's MPI call returned: Open MPI's help texts so far, and its stderr.
  static std::string open_mpi_said(const json& resp) {
    if (!resp.contains("help")) return "";
    auto help = resp["help"].get<std::vector<std::string>>();
    std::string summary = help_summary(help);
    return summary.empty() ? "" : "; Open MPI said: " + summary;
  }
  static json error_evidence(const json& resp) {
    json ev = {{"child_stderr_tail", Child::get().stderr_tail()}};
    if (resp.contains("help")) ev["open_mpi_help"] = resp["help"];
    return ev;
  }

  // The child's MPI call failed while opening (the world's MPI_Init, a pair's
  // MPI_Comm_create_group): init_failed in Open MPI's own words, with its evidence.
  TransportError open_failed(const json& resp, const std::string& what,
                             Clock::time_point start) const {
    return TransportError(ErrorKind::init_failed,
                          who() + ": " + what + resp.value("error", "") + " (after " +
                              seconds_text(seconds_since(start)) + ")" + open_mpi_said(resp),
                          -1, error_evidence(resp));
  }

  // Named by its rank in the run's world (a pair's instance has its own ranks 0 and 1).
  std::string who() const {
    int r = world_ranks_.empty() || rank_ < 0 || rank_ >= static_cast<int>(world_ranks_.size())
                ? rank_
                : world_ranks_[static_cast<std::size_t>(rank_)];
    return "mpi: " + rendezvous::rank_text(r, host_);
  }

  int rank_ = 0;
  std::vector<int> world_ranks_;  // TransportContext::world_ranks: empty for the world instance
  int world_ = 1;
  std::string host_;
  std::string proc_;
  int64_t id_ = 0;  // this transport's communicator in the child; 0 when not open
  bool bf16_ = false;
  bool blocking_ = true;
  std::string collective_ = "MPI_Allreduce";
  std::map<char*, Map> maps_;
  char* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport() { return std::make_unique<MpiTransport>(); }

}  // namespace ncclsmoke::transports
