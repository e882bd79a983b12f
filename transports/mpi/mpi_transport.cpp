#include "transports/mpi/mpi_transport.h"

// The C API only: without these, <mpi.h> pulls in the deprecated C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "transports/mpi/mpi_observe.h"
#include "transports/reduce.h"

extern char** environ;

namespace ncclsmoke::transports {
namespace {

using nlohmann::json;
using rendezvous::remaining;
using rendezvous::seconds_since;

// Every MPI call of this process runs on one thread, the one that called MPI_Init_thread (so
// MPI_THREAD_FUNNELED is enough), and the caller waits for it with its deadline. MPI_Allreduce
// cannot be cancelled, so a collective that does not return leaves that thread blocked: the caller
// gets TransportError(timeout) and the process makes no further MPI calls (not even MPI_Finalize).
// Blocking MPI_Allreduce on this thread, rather than MPI_Iallreduce + MPI_Test polling, keeps
// Open MPI's tuned algorithms: libnbc's Iallreduce measured 1.7x slower at 64 MiB, 2 ranks.
class MpiThread {
 public:
  static MpiThread& get() {
    static MpiThread* t = new MpiThread();  // never destroyed: it may be blocked in MPI at exit
    return *t;
  }

  // Runs `fn` on the MPI thread. True when it finished before `deadline` (its exception is
  // rethrown here); false when it did not: the thread is then stuck in `what` for good.
  bool run(const char* what, const std::function<void()>& fn, Deadline deadline) {
    std::lock_guard<std::mutex> call(call_mu_);
    std::unique_lock<std::mutex> l(mu_);
    if (stuck_) return false;
    auto job = std::make_shared<Job>();
    job->fn = fn;
    pending_ = job;
    cv_.notify_all();
    if (!cv_.wait_until(l, deadline, [&] { return job->done; })) {
      stuck_ = true;
      stuck_in_ = what;
      return false;
    }
    if (job->error) std::rethrow_exception(job->error);
    return true;
  }

  bool stuck() {
    std::lock_guard<std::mutex> l(mu_);
    return stuck_;
  }
  std::string stuck_in() {
    std::lock_guard<std::mutex> l(mu_);
    return stuck_in_;
  }
  // Marks MPI unusable without a blocked thread (an MPI_Iallreduce left pending).
  void poison(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    if (!stuck_) stuck_in_ = what;
    stuck_ = true;
  }

 private:
  struct Job {
    std::function<void()> fn;
    bool done = false;
    std::exception_ptr error;
  };

  MpiThread() { std::thread([this] { loop(); }).detach(); }

  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return pending_ != nullptr; });
      auto job = std::move(pending_);
      pending_.reset();
      l.unlock();
      try {
        job->fn();
      } catch (...) {
        job->error = std::current_exception();
      }
      l.lock();
      job->done = true;
      cv_.notify_all();
    }
  }

  std::mutex call_mu_;  // one caller at a time
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<Job> pending_;
  bool stuck_ = false;
  std::string stuck_in_;
};

// Process-wide MPI state; touched only on the MPI thread (or by the caller after run() returned).
struct MpiState {
  bool initialised_by_us = false;
  bool finalize_registered = false;
  int provided = -1;
  MPI_Op bf16_sum = MPI_OP_NULL;
  bool freeze_hook_tried = false;
  bool freeze_hook = false;  // opal_progress_register found and our callback registered
  std::set<unsigned long> sockets_before_init;  // to tell MPI's TCP connections from others
};
MpiState& state() {
  static MpiState* s = new MpiState();
  return *s;
}

std::string mpi_error_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(rc);
  int cls = 0;
  MPI_Error_class(rc, &cls);
  return std::string(buf, len) + " (MPI error class " + std::to_string(cls) + ")";
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
  }
  return "unknown";
}

std::string launcher_variable() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return v;
  return "";
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

int finalize_timeout_s() {
  const char* v = std::getenv("NCCLSMOKE_MPI_FINALIZE_TIMEOUT_S");
  int s = v ? std::atoi(v) : 0;
  return s > 0 ? s : 60;
}

// atexit: MPI_Finalize exactly once, only if we initialised, only if no MPI call is stuck, and
// bounded (it waits for every rank to finalise).
void finalize_at_exit() {
  auto& t = MpiThread::get();
  if (t.stuck()) {
    std::fprintf(stderr,
                 "ncclsmoke: mpi: not calling MPI_Finalize: %s timed out and was abandoned in this "
                 "process; "
                 "mpirun will report that this rank exited without finalizing\n",
                 t.stuck_in().c_str());
    return;
  }
  int timeout = finalize_timeout_s();
  auto start = Clock::now();
  bool ok = false;
  try {
    ok = t.run("MPI_Finalize", [] {
      int fin = 0;
      MPI_Finalized(&fin);
      if (!fin) MPI_Finalize();
    }, Clock::now() + std::chrono::seconds(timeout));
  } catch (...) {
  }
  if (!ok)
    std::fprintf(stderr, "ncclsmoke: mpi: MPI_Finalize did not return within %d s (waited %.1f s); "
                 "exiting without it\n", timeout, seconds_since(start));
}

void bf16_sum_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_sum(inout, in, static_cast<std::size_t>(*len), DType::bfloat16);
}

constexpr std::size_t kMaxChunk = std::size_t{1} << 30;  // MPI counts are int
constexpr int kTimedOut = -1;  // not an MPI error code (those are >= 0)

// Stopping a timed-out MPI_Allreduce. Open MPI makes progress only inside MPI calls, by looping on
// opal_progress(), which runs registered callbacks with no lock held. Ours parks the MPI thread
// there for good once asked, so a collective completing late cannot write into buffers the caller
// has already freed. opal_progress_register is an exported libopen-pal symbol, looked up with
// dlsym; without it (another MPI) allreduce falls back to MPI_Iallreduce + MPI_Test polling, which
// stops progressing when the polling stops.
std::atomic<int> g_freeze{0};  // 0 running, 1 asked to stop, 2 stopped

int freeze_callback() {
  if (g_freeze.load(std::memory_order_relaxed) != 0) {
    g_freeze.store(2);
    for (;;) pause();
  }
  return 0;
}

bool register_freeze_hook() {
  using Register = int (*)(int (*)());
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "opal_progress_register"));
  return reg && reg(&freeze_callback) == 0;  // OPAL_SUCCESS
}

// After a blocking collective timed out: parks the MPI thread; true once it is parked.
bool freeze_mpi_thread(Millis wait) {
  g_freeze.store(1);
  auto until = Clock::now() + wait;
  while (g_freeze.load() != 2 && Clock::now() < until)
    std::this_thread::sleep_for(Millis(1));
  return g_freeze.load() == 2;
}

class MpiTransport final : public Transport {
 public:
  ~MpiTransport() override { close(); }

  std::string name() const override { return "mpi"; }

  void open(const TransportContext& ctx, Deadline deadline) override {
    rank_ = ctx.rank;
    world_ = ctx.world_size;
    host_ = ctx.host_of(ctx.rank);
    auto start = Clock::now();
    if (launcher_variable().empty())
      throw TransportError(ErrorKind::unavailable,
                           who() + ": not started by mpirun (no OMPI_COMM_WORLD_SIZE, PMIX_RANK or "
                               "PMI_RANK in the environment): launch with mpirun ... ncclsmoke run "
                               "--transports mpi");
    std::string mode = ctx.option("mpi.collective", "allreduce");
    if (mode != "allreduce" && mode != "iallreduce")
      throw TransportError(ErrorKind::init_failed,
                           who() + ": mpi.collective is \"" + mode +
                               "\"; expected allreduce (blocking MPI_Allreduce, the default) or "
                               "iallreduce (MPI_Iallreduce + MPI_Test polling)");
    auto& t = MpiThread::get();
    if (t.stuck()) throw unusable("open");

    struct Out {
      std::string error;
      ErrorKind kind = ErrorKind::init_failed;
      int size = -1, rank = -1;
      std::string proc;
      MPI_Comm comm = MPI_COMM_NULL;
    };
    auto out = std::make_shared<Out>();
    auto step = std::make_shared<std::atomic<const char*>>("MPI_Init_thread");
    int want_rank = rank_, want_size = world_;
    auto job = [out, step, want_rank, want_size] {
      auto& st = state();
      int init = 0, fin = 0;
      MPI_Initialized(&init);
      MPI_Finalized(&fin);
      if (fin) {
        out->error = "MPI was already finalised in this process";
        return;
      }
      if (!init) {
        st.sockets_before_init = mpi_observe::own_socket_inodes();
        int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &st.provided);
        if (rc != MPI_SUCCESS) {
          out->error = "MPI_Init_thread failed: " + mpi_error_text(rc);
          return;
        }
        st.initialised_by_us = true;
      } else if (!st.initialised_by_us) {
        MPI_Query_thread(&st.provided);
        if (st.provided < MPI_THREAD_SERIALIZED) {
          out->error = std::string("MPI was initialised elsewhere in this process with thread "
                                   "level ") + thread_level_name(st.provided) +
                       "; the mpi transport calls MPI from its own thread and needs serialized";
          return;
        }
      }
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      MPI_Comm_size(MPI_COMM_WORLD, &out->size);
      MPI_Comm_rank(MPI_COMM_WORLD, &out->rank);
      char proc[MPI_MAX_PROCESSOR_NAME] = {};
      int plen = 0;
      MPI_Get_processor_name(proc, &plen);
      out->proc.assign(proc, plen);
      if (out->size != want_size || out->rank != want_rank) return;  // the caller explains
      *step = "MPI_Comm_dup";
      int rc = MPI_Comm_dup(MPI_COMM_WORLD, &out->comm);
      if (rc != MPI_SUCCESS) {
        out->error = "MPI_Comm_dup(MPI_COMM_WORLD) failed: " + mpi_error_text(rc);
        return;
      }
      MPI_Comm_set_errhandler(out->comm, MPI_ERRORS_RETURN);
      if (!st.freeze_hook_tried) {
        st.freeze_hook_tried = true;
        st.freeze_hook = register_freeze_hook();
      }
      if (st.bf16_sum == MPI_OP_NULL) {
        rc = MPI_Op_create(&bf16_sum_fn, 1, &st.bf16_sum);
        if (rc != MPI_SUCCESS) st.bf16_sum = MPI_OP_NULL;  // bfloat16 then reports unavailable
      }
    };
    bool done = t.run("MPI_Init_thread / MPI_Comm_dup", job, deadline);
    // state() is the MPI thread's while a job runs: read it only when the job finished.
    if (done && state().initialised_by_us && !state().finalize_registered) {
      state().finalize_registered = true;
      std::atexit(finalize_at_exit);
    }
    if (!done)
      throw TransportError(
          ErrorKind::timeout,
          who() + ": " + std::string(step->load()) + " did not return within the open deadline " +
              "(waited " + rendezvous::seconds_text(seconds_since(start)) + "): MPI_Init and MPI_Comm_dup wait for every rank of the " +
              "mpirun job, so some rank has not opened the mpi transport (or is stuck); this " +
              "process makes no further MPI calls");
    if (!out->error.empty())
      throw TransportError(out->kind, who() + ": " + out->error + " (after " + rendezvous::seconds_text(seconds_since(start)) + ")");
    if (out->size != world_ || out->rank != rank_) {
      std::string which = out->size != world_ ? "world size" : "rank";
      throw TransportError(
          ErrorKind::init_failed,
          who() + ": " + which + " mismatch: the harness has rank " + std::to_string(rank_) +
              " of " + std::to_string(world_) + " but MPI_COMM_WORLD has rank " +
              std::to_string(out->rank) + " of " + std::to_string(out->size) + " on " + out->proc +
              " (launch every rank with the same mpirun, -np equal to the harness world size)");
    }
    comm_ = out->comm;
    proc_ = out->proc;
    use_blocking_ = mode == "allreduce" && state().freeze_hook;
    collective_ = use_blocking_ ? "MPI_Allreduce" : "MPI_Iallreduce + MPI_Test";
    if (mode == "allreduce" && !use_blocking_)
      collective_ += " (opal_progress_register not found: a timed-out MPI_Allreduce could not be "
                     "stopped)";
  }

  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp,
                 Deadline deadline) override {
    if (comm_ == MPI_COMM_NULL)
      throw TransportError(ErrorKind::other, who() + ": allreduce before a successful open()");
    auto& t = MpiThread::get();
    if (t.stuck()) throw unusable("MPI_Allreduce");
    std::size_t bytes = count * dtype_size(dtype);
    std::string what = std::string(use_blocking_ ? "MPI_Allreduce" : "MPI_Iallreduce") + " of " +
                       std::to_string(bytes) + " bytes (" +
                       std::to_string(count) + " " + to_string(dtype) + ")";
    if (rendezvous::expired(deadline))
      throw TransportError(ErrorKind::timeout, who() + ": deadline passed before " + what);
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    if (dtype == DType::bfloat16) {
      if (state().bf16_sum == MPI_OP_NULL)
        throw TransportError(ErrorKind::unavailable,
                             who() + ": MPI_Op_create failed, so bfloat16 sums are unavailable");
      type = MPI_UINT16_T;  // raw bfloat16 bits, summed by bf16_sum_fn
      op = state().bf16_sum;
    }
    auto start = Clock::now();
    auto budget = remaining(deadline);
    MPI_Comm comm = comm_;
    bool in_place = send == recv;
    std::size_t esize = dtype_size(dtype);
    bool blocking = use_blocking_;
    // The job may outlive this frame (timeout): it captures only values and a shared cell.
    auto rc_cell = std::make_shared<std::atomic<int>>(MPI_SUCCESS);
    auto job = [rc_cell, comm, send, recv, count, type, op, in_place, esize, blocking, deadline] {
      int r = MPI_SUCCESS;
      for (std::size_t off = 0; off < count && r == MPI_SUCCESS; off += kMaxChunk) {
        int n = static_cast<int>(std::min(kMaxChunk, count - off));
        auto* dst = static_cast<char*>(recv) + off * esize;
        const void* src = in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + off * esize;
        if (blocking) {
          r = MPI_Allreduce(src, dst, n, type, op, comm);
          continue;
        }
        MPI_Request req = MPI_REQUEST_NULL;
        r = MPI_Iallreduce(src, dst, n, type, op, comm, &req);
        int done = 0;
        while (r == MPI_SUCCESS && !done) {
          r = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
          if (!done && Clock::now() >= deadline) {
            r = kTimedOut;  // the request stays pending: no further MPI calls
            break;
          }
        }
      }
      rc_cell->store(r);
    };
    // The non-blocking job watches the deadline itself; the grace lets it say so first.
    Deadline wait_until = blocking ? deadline : deadline + std::chrono::seconds(2);
    const char* call = blocking ? "MPI_Allreduce" : "MPI_Iallreduce";
    bool finished = t.run(call, job, wait_until);
    int rc = finished ? rc_cell->load() : kTimedOut;
    if (rc == kTimedOut) {
      std::string after;
      if (finished) {
        t.poison(call);
        after = "the pending request was left unprogressed";
      } else if (!blocking || !state().freeze_hook) {
        after = "the MPI thread is blocked in MPI";
      } else if (freeze_mpi_thread(Millis(2000))) {
        after = "the MPI thread was parked in Open MPI's progress loop, so nothing lands late in "
                "the caller's buffers";
      } else {
        after = "the MPI thread could not be parked within 2 s";
      }
      throw TransportError(
          ErrorKind::timeout,
          who() + ": " + what + " did not complete within its deadline (" +
              std::to_string(budget.count()) + " ms, waited " + rendezvous::seconds_text(seconds_since(start)) +
              "): a peer is slow, stopped or lost (under mpirun a rank that dies normally ends "
              "the whole job); an MPI collective cannot be cancelled: " + after +
              ", and this process makes no further MPI calls");
    }
    if (rc != MPI_SUCCESS)
      throw TransportError(ErrorKind::other,
                           who() + ": " + what + " failed after " + rendezvous::seconds_text(seconds_since(start)) + ": " +
                               mpi_error_text(rc));
  }

  json identify() override {
    json id = json::object();
    auto& t = MpiThread::get();
    if (t.stuck()) {
      id["state"] = "unusable: " + t.stuck_in() + " timed out and was abandoned; no MPI call was made";
      return id;
    }
    auto out = std::make_shared<json>(json::object());
    bool opened = comm_ != MPI_COMM_NULL;
    auto job = [out, opened] {
      json& j = *out;
      char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int len = 0;
      MPI_Get_library_version(lib, &len);
      std::string text(lib, static_cast<std::size_t>(std::max(len, 0)));
      while (!text.empty() && text.back() == '\0') text.pop_back();  // len counts the NUL
      auto nl = text.find('\n');
      j["library"] = text.substr(0, nl);
      int major = 0, minor = 0;
      MPI_Get_version(&major, &minor);
      j["mpi_version"] = std::to_string(major) + "." + std::to_string(minor);
      if (!opened) return;
      j["thread_level"] = thread_level_name(state().provided);
      identify_selection(j);
    };
    try {
      if (!t.run("identify", job, Clock::now() + std::chrono::seconds(10)))
        id["state"] = "unusable: identify's MPI calls did not return within 10 s";
    } catch (const std::exception& e) {
      id["error"] = e.what();
    }
    for (auto& [k, v] : out->items()) id[k] = v;
    if (opened) {
      id["host"] = proc_;
      id["rank"] = rank_;
      id["world_size"] = world_;
      id["collective"] = collective_;
      id["local_size"] = std::atoi(env_or("OMPI_COMM_WORLD_LOCAL_SIZE", "0").c_str());
      id["observed"] = observe();
      id["how"] =
          "requested: the pml/btl/mtl MCA values in effect (mpirun --mca, OMPI_MCA_*, "
          "openmpi-mca-params.conf), read via MPI_T; selected: components whose MPI_T control "
          "variables survive MPI_Init (Open MPI closes the ones it did not select; for btl, the "
          "ones that initialised); observed: established TCP connections of this process that did "
          "not exist before MPI_Init, minus the launcher's (PMIx/ORTE ports): btl tcp or "
          "libfabric tcp, unless the process opened other connections since; and the btl vader "
          "shared-memory segments mapped (its own plus one per local peer it reached)";
    }
    return id;
  }

  void close() override {
    if (comm_ == MPI_COMM_NULL) return;
    auto& t = MpiThread::get();
    MPI_Comm comm = comm_;
    comm_ = MPI_COMM_NULL;
    if (t.stuck()) return;
    try {
      t.run("MPI_Comm_free", [comm]() mutable { MPI_Comm_free(&comm); },
            Clock::now() + std::chrono::seconds(10));
    } catch (...) {
    }
  }

 private:
  // On the MPI thread: pml/btl/mtl requested and selected, from MPI_T.
  static void identify_selection(json& j) {
    int provided = 0;
    std::map<std::string, std::string> requested;
    mpi_observe::Survivors survivors;
    bool mpit = MPI_T_init_thread(MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS;
    if (mpit) {
      int n = 0;
      MPI_T_cvar_get_num(&n);
      for (int i = 0; i < n && i < 100000; ++i) {
        char name[256] = {}, desc[8] = {};
        int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
        MPI_Datatype dt;
        MPI_T_enum et;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &dt, &et, desc, &desc_len, &bind,
                                &scope) != MPI_SUCCESS)
          continue;  // deregistered: its component was closed
        std::string nm = name;
        mpi_observe::add_survivor(survivors, nm);
        // Only the frameworks' own selection strings are read: their storage lives in libmpi.
        // (Reading a closed component's variable crashes Open MPI 4.1: its storage is unmapped.)
        if ((nm == "pml" || nm == "btl" || nm == "mtl") && dt == MPI_CHAR &&
            bind == MPI_T_BIND_NO_OBJECT) {
          MPI_T_cvar_handle h;
          int cnt = 0;
          if (MPI_T_cvar_handle_alloc(i, nullptr, &h, &cnt) == MPI_SUCCESS) {
            std::vector<char> buf(4096, '\0');
            if (cnt >= 0 && cnt < static_cast<int>(buf.size()) &&
                MPI_T_cvar_read(h, buf.data()) == MPI_SUCCESS)
              requested[nm] = buf.data();
            MPI_T_cvar_handle_free(&h);
          }
        }
      }
      MPI_T_finalize();
    }
    auto req = [&](const std::string& fw) -> json {
      auto it = requested.find(fw);
      if (it != requested.end()) return it->second;
      const char* e = std::getenv(("OMPI_MCA_" + fw).c_str());
      return e ? json(e) : json("unknown");
    };
    auto list = [&](const std::string& fw) {
      json a = json::array();
      for (auto& c : survivors[fw]) a.push_back(c);
      return a;
    };
    json pml = {{"requested", req("pml")}};
    std::string pml_sel;
    if (!mpit) {
      pml["selected"] = "unknown";
    } else if (survivors["pml"].size() == 1) {
      pml_sel = *survivors["pml"].begin();
      pml["selected"] = pml_sel;
    } else {
      pml["selected"] = "unknown";
      pml["candidates"] = list("pml");
    }
    json mtl = {{"requested", req("mtl")}};
    if (pml_sel == "cm") {
      mtl["selected"] = survivors["mtl"].size() == 1 ? json(*survivors["mtl"].begin())
                                                     : json("unknown");
      if (survivors["mtl"].size() != 1) mtl["candidates"] = list("mtl");
    } else if (!pml_sel.empty()) {
      mtl["selected"] = nullptr;
      mtl["note"] = "not used: pml " + pml_sel + " carries point-to-point traffic over btls";
    } else {
      mtl["selected"] = "unknown";
    }
    json btl = {{"requested", req("btl")}, {"selected", mpit ? list("btl") : json("unknown")}};
    if (pml_sel == "cm") btl["note"] = "initialised but not used by pml cm (the mtl carries it)";
    j["pml"] = pml;
    j["btl"] = btl;
    j["mtl"] = mtl;
    if (!mpit) j["mpi_t"] = "MPI_T_init_thread failed: selection unknown";
  }

  // This process's TCP connections opened since MPI_Init (minus the launcher's) and vader
  // segments: what actually carried bytes so far. Not an MPI call, so not on the MPI thread.
  json observe() const {
    json o = json::object();
    auto ports = mpi_observe::launcher_ports(environ);
    const auto& before = state().sockets_before_init;
    json conns = json::array();
    int n = 0;
    for (auto& c : mpi_observe::own_tcp_connections()) {
      if (before.count(c.inode) || ports.count(c.remote_port)) continue;
      if (++n > 64) break;
      conns.push_back(c.local + " -> " + c.remote);
    }
    o["tcp_connections"] = conns;
    o["vader_segments_mapped"] = mpi_observe::vader_segments_mapped();
    return o;
  }

  TransportError unusable(const std::string& op) {
    return TransportError(ErrorKind::other,
                          who() + ": cannot " + op + ": MPI is unusable in this process because " +
                              MpiThread::get().stuck_in() + " timed out earlier and was abandoned");
  }

  std::string who() const { return "mpi: rank " + std::to_string(rank_) + " (" + host_ + ")"; }

  int rank_ = 0;
  int world_ = 1;
  std::string host_;
  std::string proc_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool use_blocking_ = true;
  std::string collective_ = "MPI_Allreduce";
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport() { return std::make_unique<MpiTransport>(); }

}  // namespace ncclsmoke::transports
