#include "transports/nccl/nccl_transport.h"

#include "transports/nccl/nccl_log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "node/sysfs.h"
#include "rendezvous/store_error.h"
#include "rendezvous/rank_ref.h"
#include "transports/nccl/nccl_api.h"

namespace ncclsmoke::transports {

namespace {

using namespace nccl;  // NOLINT: the NCCL/CUDA names read as in their documentation
using rendezvous::earliest;
using rendezvous::expired;
using rendezvous::seconds_since;

std::string env_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v ? std::string(v) : fallback;
}

using rendezvous::seconds_text;

// CUDA version codes: 13000 -> "13.0".
std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string short_hostname() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  std::string s(h);
  auto dot = s.find('.');
  return dot == std::string::npos ? s : s.substr(0, dot);
}

// NCCL_DEBUG_FILE as NCCL expands it (FACTS.md: path.%h.%p gives one log per rank; its debug.cc):
// %h the host name up to the first dot, %p the pid, %% one %, any other %X kept as it is ("%r"
// included). `rank` >= 0 also replaces our own "%r" (the nccl.debug_file option); a user's
// NCCL_DEBUG_FILE is expanded with rank -1, exactly as NCCL will.
std::string expand_debug_path(const std::string& tmpl, int rank) {
  std::string out;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '%' || i + 1 >= tmpl.size()) {
      out += tmpl[i];
      continue;
    }
    char c = tmpl[++i];
    if (c == 'h') out += short_hostname();
    else if (c == 'p') out += std::to_string(getpid());
    else if (c == '%') out += '%';
    else if (c == 'r' && rank >= 0) out += std::to_string(rank);
    else { out += '%'; out += c; }
  }
  return out;
}

// A literal path as an NCCL_DEBUG_FILE value: every % doubled, so NCCL opens exactly `path`.
std::string escape_debug_path(const std::string& path) {
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

// NCCL's errors do not name the rank that went away (its text may name an address): a peer_lost
// from this transport carries peer -1 and says so, instead of pointing at a rank.
constexpr const char* kPeerUnknown =
    " (a peer or its connection went away; NCCL does not say which rank: see its text above and "
    "the other ranks' findings)";

bool parse_int(const std::string& s, int& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 20) return false;
  out = static_cast<int>(v);
  return true;
}

class NcclTransportImpl final : public NcclTransport {
 public:
  ~NcclTransportImpl() override { close(); }

  std::string name() const override { return "nccl"; }
  std::string debug_file_path() const override { return debug_file_; }

  void open(const TransportContext& ctx, Deadline deadline) override {
    auto start = Clock::now();
    rank_ = ctx.rank;
    world_ = ctx.world_size;
    host_ = ctx.host_of(ctx.rank);
    where_ = rendezvous::rank_text(rank_, host_);
    healthy_ = true;  // a transport object may be opened again after close()
    failure_.clear();
    read_options(ctx);
    load_and_pick_device(ctx);
    prepare_environment();

    // Unique id: rank 0 creates it, everyone else reads it from the store. Every rank bumps
    // "opens" once per open(), so a second open on the same store (pin, then observe) uses a
    // fresh key instead of a stale id: round g leaves the counter in ((g-1)W, gW].
    std::string id_key = "unique_id";
    if (ctx.store) {
      int64_t v = 0;
      try {
        v = ctx.store->add("opens", 1);
      } catch (const rendezvous::StoreError& e) {
        throw TransportError(ErrorKind::init_failed, where_ + ": store unusable: " + e.what());
      }
      int64_t round = (v - 1) / std::max(1, world_) + 1;
      if (round > 1) id_key += "/" + std::to_string(round);
    }
    ncclUniqueId id{};
    if (rank_ == 0) {
      ncclResult_t r = api_->ncclGetUniqueId(&id);
      if (r != ncclSuccess)
        throw TransportError(ErrorKind::init_failed,
                             where_ + ": ncclGetUniqueId failed: " + api_->nccl_error(r) + ": " +
                                 last_error(nullptr),
                             -1, evidence(last_error(nullptr)));
      if (ctx.store) ctx.store->set(id_key, std::string(id.internal, sizeof id.internal));
    } else {
      if (!ctx.store)
        throw TransportError(ErrorKind::init_failed, where_ + ": no store to get NCCL's unique id");
      std::string v;
      try {
        v = ctx.store->get(id_key, deadline);
      } catch (const rendezvous::StoreError& e) {
        bool late = e.error_class() == rendezvous::ErrorClass::timed_out || expired(deadline);
        throw TransportError(late ? ErrorKind::timeout : ErrorKind::init_failed,
                             where_ + ": NCCL unique id from rank 0 (" + ctx.host_of(0) +
                                 ") not received after " + seconds_text(seconds_since(start)) +
                                 ": " + e.what(),
                             0);
      }
      if (v.size() != sizeof id.internal)
        throw TransportError(ErrorKind::init_failed,
                             where_ + ": NCCL unique id from rank 0 (" + ctx.host_of(0) + ") has " +
                                 std::to_string(v.size()) + " bytes, expected 128",
                             0);
      std::memcpy(id.internal, v.data(), sizeof id.internal);
    }

    // Non-blocking init, polled against the deadline.
    ncclConfig_t config = make_config();
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t r = api_->ncclCommInitRankConfig(&comm, world_, id, rank_, &config);
    ncclResult_t state = r;
    if (r == ncclSuccess || r == ncclInProgress) {
      state = ncclInProgress;
      while (true) {
        ncclResult_t q = api_->ncclCommGetAsyncError(comm, &state);
        if (q != ncclSuccess) state = q;
        if (state != ncclInProgress) break;
        if (expired(deadline)) {
          if (comm) api_->ncclCommAbort(comm);
          throw TransportError(ErrorKind::timeout,
                               where_ + ": NCCL communicator of " + std::to_string(world_) +
                                   " ranks not ready after " + seconds_text(seconds_since(start)) +
                                   " on GPU " + std::to_string(gpu_) + " (a rank missing, or the "
                                   "network unreachable); communicator aborted",
                               -1, evidence(""));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (state != ncclSuccess) {
      std::string last = last_error(comm);
      if (comm) api_->ncclCommAbort(comm);
      std::string msg = where_ + ": NCCL init failed after " + seconds_text(seconds_since(start)) +
                        ": " + api_->nccl_error(state) + ": " + (last.empty() ? "(no detail)" : last);
      if (policy_ == "pin") msg += "\n  hint: " + pin_hint();
      throw TransportError(ErrorKind::init_failed, msg, -1, evidence(last));
    }
    comm_ = comm;

    cudaError_t e = api_->cudaStreamCreateWithFlags(&stream_, kCudaStreamNonBlocking);
    if (e == cudaSuccess) e = api_->cudaEventCreate(&ev_start_);
    if (e == cudaSuccess) e = api_->cudaEventCreate(&ev_stop_);
    if (e != cudaSuccess) {
      close();
      throw TransportError(ErrorKind::init_failed,
                           where_ + ": creating a CUDA stream/events on GPU " +
                               std::to_string(gpu_) + ": " + api_->cuda_error(e));
    }
  }

  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 Deadline deadline) override {
    auto start = Clock::now();
    check_usable();
    enqueue(send, recv, count, dtype, op, deadline, start);
    wait_done([&] { return api_->cudaStreamQuery(stream_); }, deadline, start,
              "all-reduce of " + std::to_string(count) + " " + to_string(dtype));
  }

  double timed_allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                         int iters, Deadline deadline,
                         const std::function<Deadline()>& op_deadline) override {
    auto start = Clock::now();
    check_usable();
    iters = std::max(1, iters);
    // The batch gets one collective's budget per iteration, within the sweep's deadline.
    auto per_op = op_deadline() - Clock::now();
    Deadline batch = earliest(deadline, start + per_op * iters);
    cudaError_t e = api_->cudaEventRecord(ev_start_, stream_);
    if (e != cudaSuccess) cuda_fail("cudaEventRecord", e);
    for (int i = 0; i < iters; ++i) enqueue(send, recv, count, dtype, op, batch, start);
    e = api_->cudaEventRecord(ev_stop_, stream_);
    if (e != cudaSuccess) cuda_fail("cudaEventRecord", e);
    wait_done([&] { return api_->cudaEventQuery(ev_stop_); }, batch, start,
              std::to_string(iters) + " timed all-reduces of " + std::to_string(count) + " " +
                  to_string(dtype));
    float ms = 0;
    e = api_->cudaEventElapsedTime(&ms, ev_start_, ev_stop_);
    if (e != cudaSuccess) cuda_fail("cudaEventElapsedTime", e);
    return double(ms) * 1000.0 / iters;
  }

  void* allocate(std::size_t bytes) override {
    check_usable();
    void* p = nullptr;
    cudaError_t e = api_->cudaMalloc(&p, std::max<std::size_t>(bytes, 1));
    if (e != cudaSuccess)
      throw TransportError(ErrorKind::other, where_ + ": cudaMalloc of " + std::to_string(bytes) +
                                                 " bytes on GPU " + std::to_string(gpu_) + ": " +
                                                 api_->cuda_error(e));
    return p;
  }

  void release(void* buffer) override {
    if (api_ && buffer) api_->cudaFree(buffer);
  }

  void copy_in(void* buffer, const void* host, std::size_t bytes) override {
    check_loaded();
    cudaError_t e = api_->cudaMemcpy(buffer, host, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) cuda_fail("cudaMemcpy host to device", e);
    // From pageable memory cudaMemcpy may return before the DMA into the device buffer is done,
    // and the collectives run on a non-blocking stream that does not wait for the legacy default
    // stream: without this, NCCL could read a half-filled buffer and the data check would blame
    // the network.
    e = api_->cudaDeviceSynchronize();
    if (e != cudaSuccess) cuda_fail("cudaDeviceSynchronize after the host-to-device copy", e);
  }

  void copy_out(void* host, const void* buffer, std::size_t bytes) override {
    check_loaded();
    cudaError_t e = api_->cudaMemcpy(host, buffer, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) cuda_fail("cudaMemcpy device to host", e);
  }

  nlohmann::json identify() override {
    nlohmann::json j = nlohmann::json::object();
    j["nccl_version"] = nccl_version_ ? nlohmann::json(nccl_version_string(nccl_version_)) : nullptr;
    j["nccl_version_code"] = nccl_version_ ? nlohmann::json(nccl_version_) : nullptr;
    j["cuda_runtime"] = runtime_version_ ? nlohmann::json(cuda_version_string(runtime_version_)) : nullptr;
    j["cuda_driver"] = driver_version_ ? nlohmann::json(cuda_version_string(driver_version_)) : nullptr;
    j["gpu"] = gpu_;
    j["gpu_source"] = gpu_source_.empty() ? nlohmann::json(nullptr) : nlohmann::json(gpu_source_);
    j["pci_bus_id"] = pci_bus_id_.empty() ? nlohmann::json(nullptr) : nlohmann::json(pci_bus_id_);
    j["libraries"] = api_ ? nlohmann::json{{"cudart", api_->cudart_path}, {"nccl", api_->nccl_path}}
                          : nlohmann::json(nullptr);
    j["debug_file"] = debug_file_.empty() ? nlohmann::json(nullptr) : nlohmann::json(debug_file_);
    j["debug_file_source"] =
        debug_source_.empty() ? nlohmann::json(nullptr) : nlohmann::json(debug_source_);
    j["net_requested"] = net_.empty() ? nlohmann::json(nullptr) : nlohmann::json(net_);
    j["policy"] = net_.empty() ? nlohmann::json(nullptr) : nlohmann::json(policy_);
    std::string env_net = env_or("NCCL_NET");
    j["env_nccl_net"] = env_net.empty() ? nlohmann::json(nullptr) : nlohmann::json(env_net);
    j["synthetic"] = synthetic_;
    j["env_set"] = env_set_;
    // What carried the bytes, as NCCL's own log tells it (the judging step compares it with
    // "expected"); null when no log was written (the user's NCCL_DEBUG_FILE may be elsewhere).
    j["expected"] = net_.empty() ? nlohmann::json(nullptr)
                                 : nlohmann::json{{"network", net_}, {"policy", policy_}};
    if (!debug_file_.empty()) {
      auto seen = read_nccl_log(debug_file_);
      j["nccl_log"] = seen.found ? seen.to_json() : nlohmann::json(nullptr);
      j["network"] = seen.network.empty() ? nlohmann::json(nullptr) : nlohmann::json(seen.network);
      j["gdr"] = seen.gdr;
      // What the device NCCL's network bytes crossed (or bypassed) can carry: judging compares
      // the bus bandwidth with it (BELOW_LINE_RATE), as for the fabric transport.
      if (auto rate = nccl_port_rate(seen, read_port_rates(node::rdma_class_dir(node::sysfs_root(
                                            env_or("NCCLSMOKE_SYSFS_ROOT")))))) {
        j["port_rate_gbps"] = rate->gbps;
        j["port_rate_port"] = rate->port;
        j["port_rate_carried"] = rate->carried;
      }
    } else {
      j["nccl_log"] = nullptr;
    }
    return j;
  }

  // The contract's typed network report (transport.h): the network asked for (--nccl-net,
  // policy) and what NCCL's own log says carried the bytes (null when no log was read).
  std::optional<NetworkReport> network_report() override {
    NetworkReport r;
    r.expected = net_.empty() ? nlohmann::json(nullptr)
                              : nlohmann::json{{"network", net_}, {"policy", policy_}};
    if (!debug_file_.empty()) {
      auto seen = read_nccl_log(debug_file_);
      if (seen.found) r.observed = seen.to_json();
    }
    return r;
  }

  void close() override {
    if (api_ && comm_) {
      ncclComm_t comm = comm_;
      comm_ = nullptr;
      if (healthy_) {
        // Finalize flushes outstanding work; bounded, since a vanished peer can stall it.
        ncclResult_t state = api_->ncclCommFinalize(comm);
        auto until = Clock::now() + std::chrono::seconds(10);
        while (state == ncclInProgress && Clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          if (api_->ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInternalError;
        }
        if (state == ncclSuccess) api_->ncclCommDestroy(comm);
        else api_->ncclCommAbort(comm);
      } else {
        api_->ncclCommAbort(comm);
      }
    }
    if (api_) {
      if (ev_start_) api_->cudaEventDestroy(ev_start_);
      if (ev_stop_) api_->cudaEventDestroy(ev_stop_);
      if (stream_) api_->cudaStreamDestroy(stream_);
    }
    ev_start_ = ev_stop_ = nullptr;
    stream_ = nullptr;
    healthy_ = false;
  }

 private:
  // Declared in nccl_options.cpp, with the one default of each (nccl.policy: observe).
  void read_options(const TransportContext& ctx) {
    std::optional<std::int64_t> gpu;
    try {
      ctx.options.validate("nccl");
      cudart_opt_ = ctx.options.get_string("nccl.cudart");
      nccl_opt_ = ctx.options.get_string("nccl.lib");
      synthetic_ = ctx.options.get_bool("nccl.share_gpu");
      net_ = ctx.options.get_string("nccl.net");
      policy_ = ctx.options.get_string("nccl.policy");
      debug_opt_ = ctx.options.get_string("nccl.debug_file");
      gpu = ctx.options.find_int("nccl.gpu");
    } catch (const OptionError& e) {
      throw TransportError(ErrorKind::other, where_ + ": " + e.what());
    }
    if (gpu) {
      gpu_ = static_cast<int>(*gpu);
      gpu_source_ = "nccl.gpu";
      return;
    }
    std::string g;
    if (!synthetic_) { g = env_or("LOCAL_RANK"); gpu_source_ = "LOCAL_RANK"; }
    if (g.empty()) { g = "0"; gpu_source_ = "default"; }
    if (!parse_int(g, gpu_))
      throw TransportError(ErrorKind::other,
                           where_ + ": GPU index \"" + g + "\" (from " + gpu_source_ + ") is not a number");
  }

  // Loads the libraries and checks for a device. When no runtime was pinned and the first one
  // found is newer than the driver (cudaErrorInsufficientDriver), the older candidates are tried.
  void load_and_pick_device(const TransportContext& ctx) {
    (void)ctx;
    std::string why;
    auto api = NcclApi::load(cudart_opt_, nccl_opt_, why);
    if (!api)
      throw TransportError(ErrorKind::unavailable,
                           where_ + ": NCCL transport unavailable (CUDA runtime / NCCL not loadable): " + why);
    int count = 0;
    cudaError_t e = api->cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver && cudart_opt_.empty()) {
      auto cands = NcclApi::cudart_candidates("");
      bool after = false;
      for (const auto& c : cands) {
        if (c == api->cudart_path) { after = true; continue; }
        if (!after) continue;
        std::string w;
        auto other = NcclApi::load(c, api->nccl_path, w);
        if (!other) continue;
        int n = 0;
        if (other->cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
          api = other;
          e = cudaSuccess;
          count = n;
          break;
        }
      }
    }
    api_ = api;
    int v = 0;
    if (api_->cudaRuntimeGetVersion(&v) == cudaSuccess) runtime_version_ = v;
    v = 0;
    if (api_->cudaDriverGetVersion(&v) == cudaSuccess) driver_version_ = v;
    v = 0;
    if (api_->ncclGetVersion(&v) == ncclSuccess) nccl_version_ = v;
    if (e != cudaSuccess || count == 0)
      throw TransportError(ErrorKind::unavailable,
                           where_ + ": no CUDA device: " +
                               (e != cudaSuccess ? api_->cuda_error(e) : std::string("0 devices")) +
                               " (runtime " + api_->cudart_path + " " +
                               cuda_version_string(runtime_version_) + ", driver " +
                               (driver_version_ ? cuda_version_string(driver_version_) : "none") + ")");
    if (gpu_ >= count)
      throw TransportError(ErrorKind::init_failed,
                           where_ + ": GPU " + std::to_string(gpu_) + " (from " + gpu_source_ +
                               ") does not exist: " + std::to_string(count) +
                               " visible device(s); more ranks than GPUs needs nccl.share_gpu=1");
    e = api_->cudaSetDevice(gpu_);
    if (e != cudaSuccess)
      throw TransportError(ErrorKind::init_failed, where_ + ": cudaSetDevice(" + std::to_string(gpu_) +
                                                       "): " + api_->cuda_error(e));
    char bus[64] = {};
    if (api_->cudaDeviceGetPCIBusId(bus, sizeof bus, gpu_) == cudaSuccess) pci_bus_id_ = bus;
  }

  void set_env(const char* name, const std::string& value) {
    setenv(name, value.c_str(), 1);
    env_set_[name] = value;
  }

  // Everything NCCL reads from the environment is set before its first call that initialises.
  void prepare_environment() {
    std::string user_file = env_or("NCCL_DEBUG_FILE");
    if (!user_file.empty()) {
      debug_file_ = expand_debug_path(user_file, -1);
      debug_source_ = "user";
    } else if (!debug_opt_.empty()) {
      // Already this rank's path (the harness passes OUT_DIR/nccl-debug.rank<N>.log): used as
      // given, so the rank is not named twice.
      debug_file_ = expand_debug_path(debug_opt_, rank_);
      debug_source_ = "ncclsmoke";
      ::unlink(debug_file_.c_str());  // NCCL appends nothing stale to our parse
      set_env("NCCL_DEBUG", "INFO");
      set_env("NCCL_DEBUG_SUBSYS", "INIT,NET");
      set_env("NCCL_DEBUG_FILE", escape_debug_path(debug_file_));
    }
    if (!net_.empty() && policy_ == "pin") set_env("NCCL_NET", net_);
    if (synthetic_) {
      if (nccl_version_ < nccl_version_code(2, 30, 0)) {
        set_env("NCCL_HOSTID", "ncclsmoke-synthetic-" + std::to_string(rank_));
      } else {
        set_env("NCCL_MULTI_RANK_GPU_ENABLE", "1");
        set_env("NCCL_P2P_DISABLE", "1");
        set_env("NCCL_SHM_DISABLE", "1");
      }
    }
  }

  std::string pin_hint() const {
    std::string plugin = "the NCCL net plugin for \"" + net_ + "\"";
    if (net_.find("Libfabric") != std::string::npos || net_.find("OFI") != std::string::npos)
      plugin = "aws-ofi-nccl (libnccl-net.so / libnccl-net-ofi.so)";
    else if (net_ != "IB" && net_ != "Socket")
      plugin += " (libnccl-net.so or libnccl-net-<name>.so, or NCCL_NET_PLUGIN)";
    std::string ld = env_or("LD_LIBRARY_PATH", "(unset)");
    return "NCCL_NET=" + net_ + " was pinned (policy pin): " +
           (net_ == "IB" ? std::string("IB needs an RDMA device and libibverbs")
                         : net_ == "Socket" ? std::string("check NCCL_SOCKET_IFNAME")
                                            : "install " + plugin + " and put its directory on "
                                              "LD_LIBRARY_PATH") +
           "; LD_LIBRARY_PATH=" + ld;
  }

  nlohmann::json evidence(const std::string& last) const {
    return {{"nccl_last_error", last},
            {"nccl_version", nccl_version_ ? nccl_version_string(nccl_version_) : ""},
            {"net_requested", net_},
            {"policy", policy_},
            {"gpu", gpu_},
            {"debug_file", debug_file_}};
  }

  std::string last_error(ncclComm_t comm) const {
    const char* s = api_ ? api_->ncclGetLastError(comm) : nullptr;
    return s ? std::string(s) : std::string();
  }

  void check_loaded() const {
    if (!api_)
      throw TransportError(ErrorKind::other, where_ + ": NCCL transport used before open()");
  }

  void check_usable() const {
    check_loaded();
    if (!comm_ || !healthy_)
      throw TransportError(ErrorKind::other,
                           where_ + ": NCCL communicator is closed" +
                               (failure_.empty() ? std::string() : " after an earlier error: " + failure_));
  }

  [[noreturn]] void cuda_fail(const char* what, cudaError_t e) {
    throw TransportError(ErrorKind::other, where_ + ": " + what + " on GPU " + std::to_string(gpu_) +
                                               ": " + api_->cuda_error(e));
  }

  [[noreturn]] void abort_with(ErrorKind kind, const std::string& msg, const std::string& last) {
    healthy_ = false;
    failure_ = msg;
    if (comm_) {
      api_->ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    throw TransportError(kind, msg, -1, evidence(last));
  }

  // Throws when NCCL reports an asynchronous error on the communicator.
  void check_async(const std::string& what, Clock::time_point start) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = api_->ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess || state == ncclInProgress) return;
    std::string last = last_error(comm_);
    bool lost = state == ncclRemoteError || state == ncclSystemError;
    abort_with(lost ? ErrorKind::peer_lost : ErrorKind::other,
               where_ + ": " + what + " failed after " + seconds_text(seconds_since(start)) + ": " +
                   api_->nccl_error(state) + ": " + (last.empty() ? "(no detail)" : last) +
                   (lost ? kPeerUnknown : ""),
               last);
  }

  void enqueue(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp /*op*/,
               Deadline deadline, Clock::time_point start) {
    ncclDataType_t t = dtype == DType::float32 ? ncclFloat32 : ncclBfloat16;
    ncclResult_t r = api_->ncclAllReduce(send, recv, count, t, ncclSum, comm_, stream_);
    std::string what = "ncclAllReduce of " + std::to_string(count) + " " + to_string(dtype);
    if (r == ncclInProgress) {
      // A non-blocking communicator returns ncclInProgress for every collective (NCCL 2.28) and
      // is usually ready again within microseconds; it may also still be connecting. So: poll
      // with a yield for up to kEnqueueSpin, then sleep 100 us between polls; wait before the
      // next NCCL call either way.
      constexpr auto kEnqueueSpin = std::chrono::microseconds(20);
      ncclResult_t state = ncclInProgress;
      auto spin_until = Clock::now() + kEnqueueSpin;
      while (true) {
        if (api_->ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
        if (state != ncclInProgress) break;
        if (expired(deadline))
          abort_with(ErrorKind::timeout,
                     where_ + ": " + what + " not enqueued after " + seconds_text(seconds_since(start)) +
                         " on GPU " + std::to_string(gpu_) + "; communicator aborted",
                     "");
        if (Clock::now() < spin_until) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      r = state;
    }
    if (r != ncclSuccess) {
      std::string last = last_error(comm_);
      bool lost = r == ncclRemoteError || r == ncclSystemError;
      abort_with(lost ? ErrorKind::peer_lost : ErrorKind::other,
                 where_ + ": " + what + ": " + api_->nccl_error(r) + ": " +
                     (last.empty() ? "(no detail)" : last) + (lost ? kPeerUnknown : ""),
                 last);
    }
  }

  // Polls `query` (cudaStreamQuery / cudaEventQuery) and NCCL's async error until done. Spins
  // briefly (small collectives finish in microseconds), then sleeps up to 1 ms between polls.
  template <typename Query>
  void wait_done(Query query, Deadline deadline, Clock::time_point start, const std::string& what) {
    auto spin_until = Clock::now() + std::chrono::milliseconds(2);
    auto nap = std::chrono::microseconds(20);
    for (int i = 0;; ++i) {
      cudaError_t q = query();
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) {
        std::string msg = where_ + ": " + what + " on GPU " + std::to_string(gpu_) +
                          ": CUDA error " + api_->cuda_error(q);
        check_async(what, start);  // NCCL's text is the better one when it has it
        abort_with(ErrorKind::other, msg, last_error(comm_));
      }
      if (i % 16 == 0) check_async(what, start);
      if (expired(deadline))
        abort_with(ErrorKind::timeout,
                   where_ + ": " + what + " did not complete after " +
                       seconds_text(seconds_since(start)) + " on GPU " + std::to_string(gpu_) +
                       " (a peer stalled or the network stopped); communicator aborted",
                   last_error(comm_));
      if (Clock::now() < spin_until) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(1000));
      }
    }
  }

  std::optional<nccl::NcclApi> api_;
  int rank_ = 0, world_ = 1;
  std::string host_, where_ = "rank ?";
  std::string cudart_opt_, nccl_opt_, net_, policy_ = "observe", debug_opt_, gpu_source_;
  bool synthetic_ = false;
  int gpu_ = 0;
  std::string pci_bus_id_;
  int runtime_version_ = 0, driver_version_ = 0, nccl_version_ = 0;
  std::string debug_file_, debug_source_;
  nlohmann::json env_set_ = nlohmann::json::object();
  ncclComm_t comm_ = nullptr;
  bool healthy_ = true;
  std::string failure_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ev_start_ = nullptr, ev_stop_ = nullptr;
};

}  // namespace

std::unique_ptr<Transport> make_nccl_transport() { return std::make_unique<NcclTransportImpl>(); }

std::string nccl_debug_file_path(const Transport& t) {
  auto* n = dynamic_cast<const NcclTransport*>(&t);
  return n ? n->debug_file_path() : std::string();
}

}  // namespace ncclsmoke::transports
