// The MPI child process (see mpi_transport.h): the only process of a rank that calls MPI. It is
// started by the rank's mpi transport as `<same binary> __mpi-child <parent pid>` with the rank's
// environment (so PMIx registers it as that rank), fd 3 = its end of the socketpair and fd 4 = the
// control page. It serves the parent's requests one at a time on its main thread, which is also
// the thread that called MPI_Init_thread (FUNNELED). Deadlines are the parent's: it abandons a
// call that does not return by sending SIGUSR1, which a dedicated thread turns into a clean PMIx
// exit, or SIGKILL. Requests: open (MPI_Init_thread once, then a duplicate of MPI_COMM_WORLD per
// world instance), pair (a pairwise instance's communicator: MPI_Comm_create_group), map /
// unmap (shared buffers), allreduce / timed, identify, close (MPI_Comm_free), finalize.
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "transports/mpi/abort_guard.h"
#include "transports/mpi/mpi_lib.h"
#include "transports/mpi/mpi_observe.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_wire.h"
#include "transports/reduce.h"

extern char** environ;

namespace ncclsmoke::transports {
namespace {

using nlohmann::json;
using namespace mpi_wire;

int g_sock = -1;
ControlPage* g_page = nullptr;

// Open MPI, loaded by the first open (do_open); every other request comes after a successful one.
const mpi_lib::MpiLib* g_lib = nullptr;
const mpi_lib::MpiLib& mpi() { return *g_lib; }

struct Mapping {
  char* base = nullptr;
  std::size_t bytes = 0;
};
std::map<int64_t, Mapping> g_maps;

struct State {
  bool initialised = false;
  int provided = -1;
  // The handles below hold MPI_OP_NULL / MPI_COMM_NULL from the load of libmpi on (do_open).
  MPI_Op bf16_sum = nullptr;
  std::set<unsigned long> sockets_before_init;
  std::map<int64_t, MPI_Comm> comms;  // by open id
  // A second duplicate of MPI_COMM_WORLD, made with the first world open (every rank makes it
  // there, at the same point), from which the pairwise rounds' 2-rank communicators are created
  // (do_pair): collectives of the world instances and of the pairs never share a context.
  MPI_Comm pair_base = nullptr;
} g;

std::string mpi_error_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (mpi().MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(rc);
  int cls = 0;
  mpi().MPI_Error_class(rc, &cls);
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

void bf16_sum_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_sum(inout, in, static_cast<std::size_t>(*len), DType::bfloat16);
}

constexpr std::size_t kMaxChunk = std::size_t{1} << 30;  // MPI counts are int
constexpr int kTimedOut = -1;                             // not an MPI error code (those are >= 0)

// SIGUSR1 from the parent: a call was abandoned. Leave PMIx cleanly so mpirun neither aborts the
// job nor reports a rank that "exited without calling finalize" (the rank process is fine).
void abandon_watcher() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  int sig = 0;
  if (sigwait(&set, &sig) != 0) return;
  std::fprintf(stderr, "ncclsmoke: mpi child %d: abandoned by the rank process; leaving PMIx\n",
               getpid());
  if (g.initialised) abort_guard::finalize_pmix();
  _exit(kExitAbandoned);
}

json do_open(const json& req) {
  int want_rank = req.value("rank", -1), want_size = req.value("size", -1);
  if (!g_lib) {
    std::string why;
    g_lib = mpi_lib::process_mpi_lib(why);
    if (!g_lib) return {{"unavailable", "Open MPI is not usable on this node: " + why}};
    g.bf16_sum = mpi().op_null;
    g.pair_base = mpi().comm_null;
  }
  if (!g.initialised) {
    g.sockets_before_init = mpi_observe::own_socket_inodes();
    g_page->in_mpi_init.store(1);
    int rc = mpi().MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &g.provided);
    g_page->in_mpi_init.store(0);
    if (rc != MPI_SUCCESS) return {{"error", "MPI_Init_thread failed: " + mpi_error_text(rc)}};
    g.initialised = true;
    mpi().MPI_Comm_set_errhandler(mpi().comm_world, mpi().errors_return);
    if (mpi().MPI_Op_create(&bf16_sum_fn, 1, &g.bf16_sum) != MPI_SUCCESS) g.bf16_sum = mpi().op_null;
  }
  json out;
  int size = -1, rank = -1;
  mpi().MPI_Comm_size(mpi().comm_world, &size);
  mpi().MPI_Comm_rank(mpi().comm_world, &rank);
  char proc[MPI_MAX_PROCESSOR_NAME] = {};
  int plen = 0;
  mpi().MPI_Get_processor_name(proc, &plen);
  out["size"] = size;
  out["rank"] = rank;
  out["proc"] = std::string(proc, plen);
  out["bf16"] = g.bf16_sum != mpi().op_null;
  if (size != want_size || rank != want_rank) return out;  // the parent explains
  MPI_Comm comm = mpi().comm_null;
  int rc = mpi().MPI_Comm_dup(mpi().comm_world, &comm);
  if (rc != MPI_SUCCESS) {
    out["error"] = "MPI_Comm_dup(MPI_COMM_WORLD) failed: " + mpi_error_text(rc);
    return out;
  }
  mpi().MPI_Comm_set_errhandler(comm, mpi().errors_return);
  if (g.pair_base == mpi().comm_null) {
    rc = mpi().MPI_Comm_dup(mpi().comm_world, &g.pair_base);
    if (rc != MPI_SUCCESS) {
      g.pair_base = mpi().comm_null;
      mpi().MPI_Comm_free(&comm);
      out["error"] = "MPI_Comm_dup(MPI_COMM_WORLD) for the pairwise rounds failed: " +
                     mpi_error_text(rc);
      return out;
    }
    mpi().MPI_Comm_set_errhandler(g.pair_base, mpi().errors_return);
  }
  g.comms[req.value("id", int64_t{0})] = comm;
  out["ok"] = true;
  return out;
}

// A 2-rank (n-rank) communicator of the world ranks `ranks`, in that order, for one pair of the
// pairwise rounds: MPI_Comm_create_group is collective over those ranks only, so disjoint pairs
// form theirs at once, whatever the other ranks do; `tag` (the lower rank's, through the pair's
// store) tells concurrent creations apart. It blocks until every member calls it: the parent
// bounds it with the open deadline (and abandons this process past it).
json do_pair(const json& req) {
  if (!g.initialised || g.pair_base == mpi().comm_null)
    return {{"error", "no MPI world in this process (transport:mpi's open did not succeed)"}};
  std::vector<int> ranks;
  for (const auto& r : req.value("ranks", json::array())) ranks.push_back(r.get<int>());
  int want_rank = req.value("rank", -1), tag = req.value("tag", -1);
  int world = 0, ub_flag = 0;
  int* ub = nullptr;
  mpi().MPI_Comm_size(g.pair_base, &world);
  mpi().MPI_Comm_get_attr(mpi().comm_world, MPI_TAG_UB, &ub, &ub_flag);
  int tag_ub = ub_flag && ub ? *ub : 32767;
  if (ranks.size() < 2 || want_rank < 0 || want_rank >= static_cast<int>(ranks.size()))
    return {{"error", "bad pair request: ranks " + req.value("ranks", json::array()).dump() +
                          ", rank " + std::to_string(want_rank)}};
  for (int r : ranks)
    if (r < 0 || r >= world)
      return {{"error", "world rank " + std::to_string(r) + " is outside MPI_COMM_WORLD (size " +
                            std::to_string(world) + ")"}};
  if (tag < 0 || tag > tag_ub)
    return {{"error", "tag " + std::to_string(tag) + " outside [0, MPI_TAG_UB " +
                          std::to_string(tag_ub) + "]"}};
  MPI_Group world_group = mpi().group_null, pair_group = mpi().group_null;
  int rc = mpi().MPI_Comm_group(g.pair_base, &world_group);
  if (rc == MPI_SUCCESS)
    rc = mpi().MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &pair_group);
  if (world_group != mpi().group_null) mpi().MPI_Group_free(&world_group);
  if (rc != MPI_SUCCESS) return {{"error", "MPI_Group_incl failed: " + mpi_error_text(rc)}};
  MPI_Comm comm = mpi().comm_null;
  rc = mpi().MPI_Comm_create_group(g.pair_base, pair_group, tag, &comm);
  mpi().MPI_Group_free(&pair_group);
  if (rc != MPI_SUCCESS)
    return {{"error", "MPI_Comm_create_group failed: " + mpi_error_text(rc)}};
  if (comm == mpi().comm_null)
    return {{"error", "MPI_Comm_create_group returned MPI_COMM_NULL (this rank not in the group)"}};
  mpi().MPI_Comm_set_errhandler(comm, mpi().errors_return);
  int size = -1, rank = -1;
  mpi().MPI_Comm_size(comm, &size);
  mpi().MPI_Comm_rank(comm, &rank);
  json out = {{"size", size}, {"rank", rank}};
  if (size != static_cast<int>(ranks.size()) || rank != want_rank) {
    mpi().MPI_Comm_free(&comm);
    out["error"] = "the pair's communicator has rank " + std::to_string(rank) + " of " +
                   std::to_string(size) + ", expected rank " + std::to_string(want_rank) + " of " +
                   std::to_string(ranks.size());
    return out;
  }
  g.comms[req.value("id", int64_t{0})] = comm;
  out["ok"] = true;
  return out;
}

// A buffer reference {map id, offset} -> pointer in this process (nullptr if out of range).
char* resolve(const json& ref, std::size_t bytes) {
  auto it = g_maps.find(ref.value("map", int64_t{-1}));
  if (it == g_maps.end()) return nullptr;
  std::size_t off = ref.value("off", std::size_t{0});
  if (off > it->second.bytes || bytes > it->second.bytes - off) return nullptr;
  return it->second.base + off;
}

// One all-reduce (chunks of at most 2^30 elements). Returns an MPI code or kTimedOut.
int allreduce_once(MPI_Comm comm, const char* send, char* recv, std::size_t count,
                   MPI_Datatype type, MPI_Op op, std::size_t esize, bool blocking,
                   Clock::time_point deadline) {
  int r = MPI_SUCCESS;
  for (std::size_t off = 0; off < count && r == MPI_SUCCESS; off += kMaxChunk) {
    int n = static_cast<int>(std::min(kMaxChunk, count - off));
    char* dst = recv + off * esize;
    const void* src = send == recv ? MPI_IN_PLACE : send + off * esize;
    if (blocking) {
      r = mpi().MPI_Allreduce(src, dst, n, type, op, comm);
      continue;
    }
    MPI_Request req = mpi().request_null;
    r = mpi().MPI_Iallreduce(src, dst, n, type, op, comm, &req);
    int done = 0;
    while (r == MPI_SUCCESS && !done) {
      r = mpi().MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done && Clock::now() >= deadline) return kTimedOut;  // left pending: parent abandons us
    }
  }
  return r;
}

json do_allreduce(const json& req, bool timed) {
  auto cit = g.comms.find(req.value("id", int64_t{0}));
  if (cit == g.comms.end()) return {{"error", "no communicator for this open"}};
  std::size_t count = req.value("count", std::size_t{0});
  DType dtype = req.value("dtype", 0) == 1 ? DType::bfloat16 : DType::float32;
  std::size_t esize = dtype_size(dtype), bytes = count * esize;
  const char* send = resolve(req["send"], bytes);
  char* recv = resolve(req["recv"], bytes);
  if (!send || !recv) return {{"error", "buffer reference outside the shared mappings"}};
  MPI_Datatype type = mpi().type_float;
  MPI_Op op = mpi().op_sum;
  if (dtype == DType::bfloat16) {
    if (g.bf16_sum == mpi().op_null) return {{"unavailable", "MPI_Op_create failed"}};
    type = mpi().type_uint16;
    op = g.bf16_sum;
  }
  bool blocking = req.value("blocking", true);
  int iters = timed ? std::max(1, req.value("iters", 1)) : 1;
  Millis op_budget(req.value("op_budget_ms", int64_t{10000}));
  auto overall = Clock::now() + Millis(req.value("budget_ms", int64_t{10000}));
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    auto d = timed ? std::min(overall, Clock::now() + op_budget) : overall;
    int rc = allreduce_once(cit->second, send, recv, count, type, op, esize, blocking, d);
    if (rc == kTimedOut) return {{"timeout", true}, {"done", i}};
    if (rc != MPI_SUCCESS) return {{"error", mpi_error_text(rc)}, {"done", i}};
    g_page->iterations_done.fetch_add(1, std::memory_order_release);
  }
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
  return {{"ok", true}, {"us", us}};
}

// pml/btl/mtl requested and selected, from MPI_T (see mpi_observe.h).
void identify_selection(json& j) {
  int provided = 0;
  std::map<std::string, std::string> requested;
  mpi_observe::Survivors survivors;
  bool mpit = mpi().MPI_T_init_thread(MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS;
  if (mpit) {
    int n = 0;
    mpi().MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n && i < 100000; ++i) {
      char name[256] = {}, desc[8] = {};
      int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
      MPI_Datatype dt;
      MPI_T_enum et;
      if (mpi().MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &dt, &et, desc, &desc_len, &bind,
                              &scope) != MPI_SUCCESS)
        continue;  // deregistered: its component was closed
      std::string nm = name;
      mpi_observe::add_survivor(survivors, nm);
      // Only the frameworks' own selection strings are read: their storage lives in libmpi.
      // (Reading a closed component's variable crashes Open MPI 4.1: its storage is unmapped.)
      if ((nm == "pml" || nm == "btl" || nm == "mtl") && dt == mpi().type_char &&
          bind == MPI_T_BIND_NO_OBJECT) {
        MPI_T_cvar_handle h;
        int cnt = 0;
        if (mpi().MPI_T_cvar_handle_alloc(i, nullptr, &h, &cnt) == MPI_SUCCESS) {
          std::vector<char> buf(4096, '\0');
          if (cnt >= 0 && cnt < static_cast<int>(buf.size()) &&
              mpi().MPI_T_cvar_read(h, buf.data()) == MPI_SUCCESS)
            requested[nm] = buf.data();
          mpi().MPI_T_cvar_handle_free(&h);
        }
      }
    }
    mpi().MPI_T_finalize();
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
    mtl["selected"] =
        survivors["mtl"].size() == 1 ? json(*survivors["mtl"].begin()) : json("unknown");
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

// This process's TCP connections opened since MPI_Init (minus the launcher's) and vader segments.
json observe() {
  json o = json::object();
  auto ports = mpi_observe::launcher_ports(environ);
  json conns = json::array();
  int n = 0;
  for (auto& c : mpi_observe::own_tcp_connections()) {
    if (g.sockets_before_init.count(c.inode) || ports.count(c.remote_port)) continue;
    if (++n > 64) break;
    conns.push_back(c.local + " -> " + c.remote);
  }
  o["tcp_connections"] = conns;
  o["vader_segments_mapped"] = mpi_observe::vader_segments_mapped();
  return o;
}

json do_identify(const json& req) {
  json j = mpi_wire::library_identity();
  if (!req.value("opened", false) || !g.initialised) return j;
  j["thread_level"] = thread_level_name(g.provided);
  j["mpi_process_pid"] = getpid();
  identify_selection(j);
  j["observed"] = observe();
  return j;
}

json handle(const json& req, int fd, bool& quit) {
  std::string op = req.value("op", "");
  if (op == "open") return do_open(req);
  if (op == "pair") return do_pair(req);
  if (op == "allreduce") return do_allreduce(req, false);
  if (op == "timed") return do_allreduce(req, true);
  if (op == "identify") return do_identify(req);
  if (op == "map") {
    std::size_t bytes = req.value("bytes", std::size_t{0});
    void* p = fd >= 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0) ::close(fd);
    if (p == MAP_FAILED) return {{"error", "mmap of a shared buffer failed: " + std::string(std::strerror(errno))}};
    g_maps[req.value("map", int64_t{-1})] = {static_cast<char*>(p), bytes};
    return {{"ok", true}};
  }
  if (op == "unmap") {
    auto it = g_maps.find(req.value("map", int64_t{-1}));
    if (it != g_maps.end()) {
      munmap(it->second.base, it->second.bytes);
      g_maps.erase(it);
    }
    return {{"ok", true}};
  }
  if (op == "close") {
    auto it = g.comms.find(req.value("id", int64_t{0}));
    if (it != g.comms.end()) {
      mpi().MPI_Comm_free(&it->second);
      g.comms.erase(it);
    }
    return {{"ok", true}};
  }
  if (op == "finalize") {
    quit = true;
    for (auto& [id, c] : g.comms) mpi().MPI_Comm_free(&c);
    g.comms.clear();
    if (g_lib && g.pair_base != mpi().comm_null) mpi().MPI_Comm_free(&g.pair_base);
    int fin = 0;
    if (g.initialised) mpi().MPI_Finalized(&fin);
    if (g.initialised && !fin) mpi().MPI_Finalize();
    return {{"ok", true}};
  }
  return {{"error", "unknown request \"" + op + "\""}};
}

}  // namespace

namespace mpi_wire {
json library_identity() {
  json j = json::object();
  std::string why;
  const mpi_lib::MpiLib* lib = mpi_lib::process_mpi_lib(why);
  if (!lib) {
    j["library"] = "not loaded: " + why;
    return j;
  }
  char text_buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  lib->MPI_Get_library_version(text_buf, &len);
  std::string text(text_buf, static_cast<std::size_t>(std::max(len, 0)));
  while (!text.empty() && text.back() == '\0') text.pop_back();  // len counts the NUL
  j["library"] = text.substr(0, text.find('\n'));
  int major = 0, minor = 0;
  lib->MPI_Get_version(&major, &minor);
  j["mpi_version"] = std::to_string(major) + "." + std::to_string(minor);
  return j;
}
}  // namespace mpi_wire

int mpi_child_main(int argc, char** argv) {
  // Dies with the rank process; refuses to run if that already happened.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc < 3 || getppid() != std::atoi(argv[2])) return kExitProtocol;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before MPI starts its threads: only ours waits
  std::thread(abandon_watcher).detach();
  g_sock = kChildSocketFd;
  void* page = mmap(nullptr, sizeof(ControlPage), PROT_READ | PROT_WRITE, MAP_SHARED,
                    kChildControlFd, 0);
  if (page == MAP_FAILED) return kExitProtocol;
  g_page = static_cast<ControlPage*>(page);
  abort_guard::arm(g_sock);
  if (!send_msg(g_sock, {{"event", "ready"}, {"pid", getpid()}})) return kExitProtocol;
  for (;;) {
    json req;
    int fd = -1;
    int r = recv_msg(g_sock, req, Clock::now() + std::chrono::hours(24 * 365), &fd);
    if (r < 0) break;  // the rank process closed the channel
    if (r == 0) continue;
    bool quit = false;
    json resp;
    try {
      resp = handle(req, fd, quit);
    } catch (const std::exception& e) {
      resp = {{"error", std::string("mpi child: ") + e.what()}};
    }
    // An MPI error returned (not aborted): Open MPI's help texts usually say why.
    if (resp.contains("error")) {
      auto help = abort_guard::help_texts();
      if (!help.empty()) resp["help"] = help;
    }
    if (!send_msg(g_sock, resp)) break;
    if (quit) return 0;
  }
  // Parent gone without finalize: leave PMIx cleanly if MPI was initialised.
  if (g.initialised) {
    int fin = 0;
    mpi().MPI_Finalized(&fin);
    if (!fin) abort_guard::finalize_pmix();
  }
  return kExitProtocol;
}

}  // namespace ncclsmoke::transports
