#include "transports/fabric/fabric_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "rendezvous/connect.h"
#include "rendezvous/net.h"
#include "rendezvous/rank_ref.h"
#include "transports/fabric/efa_counters.h"
#include "transports/fabric/fi_handle.h"
#include "transports/fabric/fi_lib.h"
#include "transports/reduce.h"
#include "transports/ring_schedule.h"

namespace ncclsmoke::transports {
namespace {

using nlohmann::json;
using rendezvous::expired;
using rendezvous::RankRef;
using fabric::FiHandle;
using fabric::FiInfo;

constexpr uint32_t kApiVersion = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// Tag = sequence (20 bits) | step (14 bits) | chunk (26 bits): a message can only match the
// receive posted for the same collective, ring step and chunk, so a late message from an aborted
// collective never lands in the next one. The top 4 bits stay clear (some providers reserve them).
constexpr int kChunkBits = 26, kStepBits = 14, kSeqBits = 20;
constexpr uint64_t kChunkMask = (1ull << kChunkBits) - 1;
constexpr uint64_t kStepMask = (1ull << kStepBits) - 1;
constexpr uint64_t kSeqMask = (1ull << kSeqBits) - 1;
constexpr uint64_t kHandshakeStep = kStepMask;  // reserved for open()'s ring handshake

uint64_t make_tag(uint64_t seq, uint64_t step, uint64_t chunk) {
  return ((seq & kSeqMask) << (kStepBits + kChunkBits)) | ((step & kStepMask) << kChunkBits) |
         (chunk & kChunkMask);
}

std::string fi_text(long rc) {
  int e = static_cast<int>(rc < 0 ? -rc : rc);
  return fmt::format("{} ({})", fabric::loaded_fi_lib().strerror(e), rc < 0 ? rc : -rc);
}

std::string to_hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

bool from_hex(const std::string& s, std::vector<unsigned char>& out) {
  if (s.size() % 2) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.resize(s.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = nib(s[2 * i]), lo = nib(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

using rendezvous::seconds_text;

// The IP address a sockaddr-format fi_info will bind, as text ("" for other formats).
std::string src_ip(const fi_info* info) {
  if (!info->src_addr) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  auto* sa = static_cast<const sockaddr*>(info->src_addr);
  if (sa->sa_family == AF_INET && info->src_addrlen >= sizeof(sockaddr_in))
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6 && info->src_addrlen >= sizeof(sockaddr_in6))
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

// Every operation posted to the endpoint carries one of these as its context. fi_context2 comes
// first so providers that ask for FI_CONTEXT / FI_CONTEXT2 mode may use it as scratch space.
struct Op {
  fi_context2 scratch;
  enum Kind { send, recv } kind = send;
  std::size_t item = 0;  // index into the collective's send or receive items
  int slot = -1;         // staging slot (in-place reduce-scatter receives)
  bool active = false;
};

// Registers the buffers of one collective for providers that need FI_MR_LOCAL; the
// registrations close with it.
struct LocalRegs {
  fid_domain* domain = nullptr;
  std::vector<FiHandle<fid_mr>> mrs;
  void* reg(const void* buf, std::size_t len, uint64_t access, const std::string& who) {
    if (!domain || !buf || len == 0) return nullptr;
    FiHandle<fid_mr> mr;
    int rc = fi_mr_reg(domain, buf, len, access, 0, 100 + mrs.size(), 0, mr.out(), nullptr);
    if (rc != 0)
      throw TransportError(ErrorKind::other, fmt::format("{}: fi_mr_reg of {} bytes failed: {}",
                                                         who, len, fi_text(rc)));
    void* desc = fi_mr_desc(mr.get());
    mrs.push_back(std::move(mr));
    return desc;
  }
};

// One collective while it runs: the shared ring schedule's chunks (transports/ring_schedule.h)
// and how far posting and completion got. Receive i of step t is recvs[recv_base[t] + chunk].
struct Collective {
  Collective(RingSchedule s, uint64_t sq, const void* send, void* recv, DType dt)
      : schedule(std::move(s)), recvs(schedule.recvs()), sends(schedule.sends()),
        recv_done(recvs.size(), 0), seq(sq), dtype(dt), es(dtype_size(dt)),
        in(static_cast<const unsigned char*>(send)), out(static_cast<unsigned char*>(recv)),
        in_place(send == recv), start(Clock::now()) {
    recv_base.push_back(0);
    for (int t = 0; t < schedule.steps(); ++t)
      recv_base.push_back(recv_base.back() + schedule.recv_chunks(t));
  }
  bool done() const { return recvs_done == recvs.size() && sends_done == sends.size(); }

  RingSchedule schedule;
  std::vector<RingChunk> recvs, sends;
  std::vector<std::size_t> recv_base;
  std::vector<char> recv_done;
  uint64_t seq;
  DType dtype;
  std::size_t es;
  const unsigned char* in;
  unsigned char* out;
  bool in_place;
  Clock::time_point start;
  std::size_t slot_bytes = 0;   // one staging slot (in-place reduce-scatter receives)
  std::vector<int> free_slots;
  void *d_in = nullptr, *d_out = nullptr, *d_stage = nullptr;  // FI_MR_LOCAL descriptors
  std::size_t next_recv = 0, next_send = 0, recvs_done = 0, sends_done = 0;
  std::size_t recvs_inflight = 0, sends_inflight = 0;
};

class FabricTransport final : public Transport {
 public:
  ~FabricTransport() override { teardown(); }

  std::string name() const override { return "fabric"; }
  void open(const TransportContext& ctx, Deadline deadline) override;
  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 Deadline deadline) override;
  json identify() override;
  std::optional<LinkStats> link_stats() const override;
  void close() override { teardown(); }

 private:
  // "rank 1 (host node-b)" (rendezvous/rank_ref.h); just "rank 1" when the host is unknown.
  std::string rank_desc(int r) const {
    auto it = ctx_.hosts.find(r);
    std::string_view host = it == ctx_.hosts.end() ? std::string_view{} : it->second;
    return fmt::format("{}", RankRef{r, host});
  }
  std::string who() const {
    return fmt::format("fabric[{}] {}", provider_.empty() ? requested_ : provider_,
                       rank_desc(ctx_.rank));
  }
  std::string peer_desc(int r) const {
    auto it = peer_addr_text_.find(r);
    if (it == peer_addr_text_.end() || it->second.empty()) return rank_desc(r);
    return fmt::format("{} at {}", rank_desc(r), it->second);
  }
  fi_info* base_hints() const;
  std::string available_providers() const;
  fi_info* choose(fi_info* list) const;
  void exchange_addresses(Deadline deadline);
  void handshake(Deadline deadline);
  std::string straddr(const void* addr) const;

  // The ring, in named steps (see "the ring" below).
  void check_usable() const;
  Collective plan(const void* send, void* recv, std::size_t count, DType dtype);
  LocalRegs register_buffers(Collective& c);
  bool post_recvs(Collective& c);
  bool post_sends(Collective& c);
  bool complete(Collective& c);
  void reduce_received(Collective& c, const Op& op, std::size_t bytes);
  TransportError timeout_error(const Collective& c) const;
  void fail_collective(const std::string& why);

  Op* take_op();
  void release(Op* op);
  void post_error(const char* what, long rc, int peer);
  [[noreturn]] void throw_cq_error(const char* phase);
  void abort_inflight();
  void teardown();
  void idle_wait(int& idle);
  std::string probe_gone(int peer) const;
  void start_progress_thread();
  void stop_progress_thread();

  TransportContext ctx_;
  std::string requested_, provider_, fabric_name_, domain_name_, provider_version_;
  // Where the provider asked for came from: "--fabric-provider", or "default" (none was asked
  // for: the declared default, tcp); shown as a warning on the summary (harness/common/summary_tables.h).
  std::string requested_from_;
  std::string local_addr_text_;
  std::map<int, std::string> peer_addr_text_;
  std::map<int, std::vector<unsigned char>> peer_addr_raw_;
  uint64_t max_msg_size_ = 0;
  bool mr_local_ = false;
  std::size_t chunk_bytes_ = 1 << 20;
  std::size_t window_ = 4;
  int left_ = 0, right_ = 0;

  // Owned libfabric objects (fi_handle.h); teardown() closes them endpoint first.
  const fabric::FiLib* lib_ = nullptr;  // set by open(); libfabric stays loaded once opened
  FiInfo info_;
  FiHandle<fid_fabric> fabric_;
  FiHandle<fid_domain> domain_;
  FiHandle<fid_cq> cq_;
  FiHandle<fid_av> av_;
  FiHandle<fid_ep> ep_;
  fi_addr_t left_addr_ = FI_ADDR_UNSPEC, right_addr_ = FI_ADDR_UNSPEC;

  // Between collectives a background thread keeps driving the provider's progress engine:
  // manual-progress providers (udp;ofi_rxd, tcp;ofi_rxm rendezvous) acknowledge a message only
  // when the receiver progresses, so a rank that returned from its last collective would
  // otherwise leave its left neighbour's final send uncompleted until the deadline.
  std::mutex mu_;  // held by every collective; the progress thread only try_locks it
  std::thread progress_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;

  std::vector<Op> ops_;
  std::vector<Op*> free_ops_;
  std::vector<unsigned char> staging_;
  uint64_t seq_ = 0;
  std::string broken_;  // why the endpoint was torn down mid-run; "" while usable

  bool counters_on_ = false;
  std::string counters_root_;
  CounterSnapshot counters_at_open_;
  bool device_own_ = true;  // no other rank of the run shares this rank's host (and devices)

  // Where this rank waited on its ring links over the transport's life (LinkStats): idle with
  // every send it may post in flight is waiting on the next rank or the path to it; idle with a
  // send held back for data not yet received is waiting on the previous rank.
  double send_blocked_s_ = 0, recv_wait_s_ = 0;
  std::int64_t bytes_sent_ = 0, bytes_received_ = 0;
};

// ---------------------------------------------------------------------------------------------
// open

fi_info* FabricTransport::base_hints() const {
  fi_info* hints = lib_->dupinfo(nullptr);  // fi_allocinfo()
  if (!hints)
    throw TransportError(ErrorKind::init_failed, fmt::format("{}: fi_allocinfo failed", who()));
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // What we can cope with; providers clear the bits they do not need (tcp/udp/shm need none).
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  return hints;
}

std::string FabricTransport::available_providers() const {
  FiInfo hints(base_hints());
  fi_info* raw = nullptr;
  int rc = lib_->getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &raw);
  FiInfo list(raw);
  if (rc != 0 || !list) return fmt::format("none ({})", fi_text(rc));
  std::vector<std::pair<std::string, std::set<std::string>>> provs;
  for (fi_info* i = list.get(); i; i = i->next) {
    std::string p = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
    std::string d = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "?";
    auto it = std::find_if(provs.begin(), provs.end(), [&](auto& e) { return e.first == p; });
    if (it == provs.end())
      provs.push_back({p, {d}});
    else
      it->second.insert(d);
  }
  std::string out;
  for (auto& [p, doms] : provs) {
    if (!out.empty()) out += ", ";
    out += p + " (";
    bool first = true;
    for (auto& d : doms) out += (first ? "" : " ") + d, first = false;
    out += ")";
  }
  return out;
}

// Option fabric.domain picks a domain by name; otherwise the domain bound to the address this rank
// used to reach the store (so a namespace host uses its own interface), else the first returned.
fi_info* FabricTransport::choose(fi_info* list) const {
  std::string want = ctx_.option("fabric.domain");
  if (!want.empty()) {
    std::set<std::string> domains;
    for (fi_info* i = list; i; i = i->next) {
      if (i->domain_attr->name && want == i->domain_attr->name) return i;
      if (i->domain_attr->name) domains.insert(i->domain_attr->name);
    }
    std::string seen;
    for (const auto& d : domains) seen += (seen.empty() ? "" : ", ") + d;
    throw TransportError(
        ErrorKind::init_failed,
        fmt::format("{}: provider '{}' has no domain '{}' for FI_EP_RDM; it offers: {}", who(),
                    requested_, want, seen));
  }
  if (!ctx_.local_address.empty())
    for (fi_info* i = list; i; i = i->next)
      if (src_ip(i) == ctx_.local_address) return i;
  return list;
}

std::string FabricTransport::straddr(const void* addr) const {
  char buf[256] = {};
  std::size_t len = sizeof buf;
  if (!av_ || !fi_av_straddr(av_.get(), addr, buf, &len)) return "";
  return buf;
}

void FabricTransport::open(const TransportContext& ctx, Deadline deadline) {
  ctx_ = ctx;
  // Declared in fabric_options.cpp (checked at the door; again here for a context a test built).
  try {
    ctx.options.validate("fabric");
    requested_ = ctx.options.get_string("fabric.provider");
    chunk_bytes_ = static_cast<std::size_t>(ctx.options.get_size("fabric.chunk_bytes"));
    window_ = static_cast<std::size_t>(ctx.options.get_int("fabric.window"));
    counters_root_ = ctx.options.get_string("fabric.hw_counters_root");
  } catch (const OptionError& e) {
    throw TransportError(ErrorKind::init_failed, who() + ": " + e.what());
  }
  requested_from_ = ctx.options.given("fabric.provider") ? "--fabric-provider" : "default";
  if (requested_.empty()) requested_ = "tcp";
  if (!ctx.store && ctx.world_size > 1)
    throw TransportError(ErrorKind::init_failed, who() + ": no store to exchange addresses");
  left_ = (ctx.rank - 1 + ctx.world_size) % ctx.world_size;
  right_ = (ctx.rank + 1) % ctx.world_size;
  if (ctx.world_size > static_cast<int>(kStepMask / 2))
    throw TransportError(
        ErrorKind::init_failed,
        fmt::format("{}: world size {} exceeds the ring's tag space", who(), ctx.world_size));

  std::string load_why;
  lib_ = fabric::fi_lib(load_why);
  if (!lib_)
    throw TransportError(ErrorKind::unavailable,
                         fmt::format("libfabric is not usable on {}: {}", rank_desc(ctx.rank), load_why));

  FiInfo hints(base_hints());
  hints->fabric_attr->prov_name = strdup(requested_.c_str());
  fi_info* raw = nullptr;
  int rc = lib_->getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &raw);
  FiInfo list(raw);
  hints.reset();
  if (rc == -FI_ENODATA || (rc == 0 && !list)) {
    // FI_PROVIDER in the environment (the gpu-efa overlay sets it) filters what libfabric offers
    // at all: name it, or "available: none" reads as a broken install.
    const char* filter = std::getenv("FI_PROVIDER");
    std::string why = filter && *filter
                          ? fmt::format("; FI_PROVIDER={} in the environment limits libfabric to "
                                        "those providers (unset it, or ask for one of them with "
                                        "--fabric-provider)",
                                        filter)
                          : "";
    throw TransportError(ErrorKind::unavailable,
                         fmt::format("libfabric has no provider '{}' for FI_EP_RDM on {}: "
                                     "fi_getinfo: {}; available: {}{}",
                                     requested_, rank_desc(ctx.rank), fi_text(rc),
                                     available_providers(), why));
  }
  if (rc != 0)
    throw TransportError(
        ErrorKind::init_failed,
        fmt::format("{}: fi_getinfo(provider '{}') failed: {}", who(), requested_, fi_text(rc)));
  info_.reset(lib_->dupinfo(choose(list.get())));
  list.reset();
  if (!info_)
    throw TransportError(ErrorKind::init_failed, fmt::format("{}: fi_dupinfo failed", who()));

  provider_ = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : requested_;
  fabric_name_ = info_->fabric_attr->name ? info_->fabric_attr->name : "";
  domain_name_ = info_->domain_attr->name ? info_->domain_attr->name : "";
  provider_version_ = std::to_string(FI_MAJOR(info_->fabric_attr->prov_version)) + "." +
                      std::to_string(FI_MINOR(info_->fabric_attr->prov_version));
  max_msg_size_ = info_->ep_attr->max_msg_size;
  mr_local_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;

  auto check = [&](long r, const char* call) {
    if (r != 0)
      throw TransportError(ErrorKind::init_failed,
                           fmt::format("{}: {} failed on fabric '{}' domain '{}': {}", who(), call,
                                       fabric_name_, domain_name_, fi_text(r)));
  };
  check(lib_->fabric(info_->fabric_attr, fabric_.out(), nullptr), "fi_fabric");
  check(fi_domain(fabric_.get(), info_.get(), domain_.out(), nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = std::max<std::size_t>(4 * window_ + 16, 128);
  cq_attr.wait_obj = FI_WAIT_NONE;
  check(fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr), "fi_cq_open");
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 4;
  check(fi_av_open(domain_.get(), &av_attr, av_.out(), nullptr), "fi_av_open");
  check(fi_endpoint(domain_.get(), info_.get(), ep_.out(), nullptr), "fi_endpoint");
  check(fi_ep_bind(ep_.get(), &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check(fi_ep_bind(ep_.get(), &av_->fid, 0), "fi_ep_bind(av)");
  check(fi_enable(ep_.get()), "fi_enable");

  ops_.resize(2 * window_ + 4);
  free_ops_.clear();
  for (auto& op : ops_) free_ops_.push_back(&op);

  const std::string hw_counters = ctx.options.get_string("fabric.hw_counters");  // validated above
  counters_on_ =
      hw_counters == "always" || (hw_counters == "auto" && provider_.rfind("efa", 0) == 0);
  if (counters_on_) counters_at_open_ = read_hw_counters(counters_root_);
  device_own_ = ctx.ranks_on_host <= 1;

  if (ctx.world_size > 1) {
    exchange_addresses(deadline);
    handshake(deadline);
    start_progress_thread();
  }
}

void FabricTransport::start_progress_thread() {
  stop_ = false;
  progress_ = std::thread([this] {
    std::unique_lock stop_lock(stop_mu_);
    while (!stop_) {
      stop_lock.unlock();
      {
        std::unique_lock lk(mu_, std::try_to_lock);
        if (lk.owns_lock() && cq_) {
          // No operation is in flight between collectives, so anything read here is stale.
          fi_cq_tagged_entry e[8];
          if (fi_cq_read(cq_.get(), e, 8) == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            fi_cq_readerr(cq_.get(), &err, 0);
          }
        }
      }
      stop_lock.lock();
      stop_cv_.wait_for(stop_lock, std::chrono::milliseconds(1), [this] { return stop_; });
    }
  });
}

void FabricTransport::stop_progress_thread() {
  if (!progress_.joinable()) return;
  {
    std::lock_guard lk(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  progress_.join();
}

void FabricTransport::exchange_addresses(Deadline deadline) {
  auto start = Clock::now();
  std::vector<unsigned char> name(64);
  std::size_t len = name.size();
  int rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_->fid, name.data(), &len);
  }
  if (rc != 0)
    throw TransportError(ErrorKind::init_failed,
                         fmt::format("{}: fi_getname failed: {}", who(), fi_text(rc)));
  name.resize(len);
  local_addr_text_ = straddr(name.data());
  ctx_.store->set("addr/" + std::to_string(ctx_.rank), to_hex(name.data(), name.size()));

  std::vector<int> peers{left_};
  if (right_ != left_) peers.push_back(right_);
  for (int peer : peers) {
    std::string hex;
    try {
      hex = ctx_.store->get("addr/" + std::to_string(peer), deadline);
    } catch (const rendezvous::StoreError& e) {
      throw TransportError(ErrorKind::timeout,
                           fmt::format("{}: no fabric address from {} after {}: {}", who(),
                                       rank_desc(peer),
                                       seconds_text(rendezvous::seconds_since(start)), e.what()),
                           peer);
    }
    std::vector<unsigned char> addr;
    if (!from_hex(hex, addr) || addr.empty())
      throw TransportError(ErrorKind::init_failed,
                           fmt::format("{}: {} published a malformed fabric address '{}'", who(),
                                       rank_desc(peer), hex.substr(0, 80)),
                           peer);
    fi_addr_t fa = FI_ADDR_UNSPEC;
    int n = fi_av_insert(av_.get(), addr.data(), 1, &fa, 0, nullptr);
    peer_addr_text_[peer] = straddr(addr.data());
    peer_addr_raw_[peer] = addr;
    if (n != 1)
      throw TransportError(ErrorKind::init_failed,
                           fmt::format("{}: fi_av_insert of {}'s address failed: {}", who(),
                                       peer_desc(peer),
                                       n < 0 ? fi_text(n) : std::string("0 addresses inserted")),
                           peer);
    if (peer == left_) left_addr_ = fa;
    if (peer == right_) right_addr_ = fa;
  }
}

// One tiny message around the ring before open() returns: the fabric demonstrably carries data
// between every neighbour pair (and connection-oriented providers set their connections up now).
void FabricTransport::handshake(Deadline deadline) {
  auto start = Clock::now();
  uint32_t out = static_cast<uint32_t>(ctx_.rank), in = 0xFFFFFFFFu;
  uint64_t tag = make_tag(0, kHandshakeStep, 0);
  Op* rop = take_op();
  rop->kind = Op::recv;
  Op* sop = take_op();
  sop->kind = Op::send;
  try {
    // Closed when the try block ends, before abort_inflight() may close their domain.
    FiHandle<fid_mr> mr_in, mr_out;
    void* d_in = nullptr;
    void* d_out = nullptr;
    if (mr_local_) {
      if (fi_mr_reg(domain_.get(), &in, sizeof in, FI_RECV, 0, 1, 0, mr_in.out(), nullptr) == 0)
        d_in = fi_mr_desc(mr_in.get());
      if (fi_mr_reg(domain_.get(), &out, sizeof out, FI_SEND, 0, 2, 0, mr_out.out(), nullptr) == 0)
        d_out = fi_mr_desc(mr_out.get());
    }
    long rc;
    while ((rc = fi_trecv(ep_.get(), &in, sizeof in, d_in, FI_ADDR_UNSPEC, tag, 0, rop)) ==
           -FI_EAGAIN) {
      if (expired(deadline)) break;
      fi_cq_read(cq_.get(), nullptr, 0);
    }
    if (rc) post_error("fi_trecv (handshake)", rc, left_);
    while ((rc = fi_tsend(ep_.get(), &out, sizeof out, d_out, right_addr_, tag, sop)) ==
           -FI_EAGAIN) {
      if (expired(deadline)) break;
      fi_cq_read(cq_.get(), nullptr, 0);
    }
    if (rc) post_error("fi_tsend (handshake)", rc, right_);
    int pending = 2, idle = 0;
    while (pending > 0) {
      fi_cq_tagged_entry e[4];
      ssize_t n = fi_cq_read(cq_.get(), e, 4);
      if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) release(static_cast<Op*>(e[i].op_context));
        pending -= static_cast<int>(n);
        idle = 0;
        continue;
      }
      if (n == -FI_EAVAIL) throw_cq_error("the open() handshake");
      if (n != -FI_EAGAIN)
        throw TransportError(ErrorKind::init_failed,
                             fmt::format("{}: fi_cq_read failed: {}", who(), fi_text(n)));
      if (expired(deadline)) {
        bool recv_pending = rop->active;
        int peer = recv_pending ? left_ : right_;
        throw TransportError(
            ErrorKind::timeout,
            fmt::format("{}: fabric handshake {} {}{} after {} (provider {}, domain {})", who(),
                        recv_pending ? "got no message from" : "send to", peer_desc(peer),
                        recv_pending ? "" : " did not complete",
                        seconds_text(rendezvous::seconds_since(start)), provider_, domain_name_),
            peer);
      }
      idle_wait(idle);
    }
    if (in != static_cast<uint32_t>(left_))
      throw TransportError(
          ErrorKind::init_failed,
          fmt::format("{}: handshake expected rank {} but got {}", who(), left_, in), left_);
  } catch (...) {
    abort_inflight();
    throw;
  }
}

// ---------------------------------------------------------------------------------------------
// operations, completions, errors

Op* FabricTransport::take_op() {
  if (free_ops_.empty()) return nullptr;
  Op* op = free_ops_.back();
  free_ops_.pop_back();
  *op = Op{};
  op->active = true;
  return op;
}

void FabricTransport::release(Op* op) {
  if (!op || !op->active) return;
  op->active = false;
  free_ops_.push_back(op);
}

void FabricTransport::post_error(const char* what, long rc, int peer) {
  throw TransportError(ErrorKind::other,
                       fmt::format("{}: {} to/from {} failed: {}", who(), what, peer_desc(peer),
                                   fi_text(rc)),
                       peer);
}

void FabricTransport::throw_cq_error(const char* phase) {
  fi_cq_err_entry e{};
  char buf[256] = {};
  ssize_t r = fi_cq_readerr(cq_.get(), &e, 0);
  if (r < 0)
    throw TransportError(ErrorKind::other,
                         fmt::format("{}: fi_cq_readerr failed: {}", who(), fi_text(r)));
  const char* prov = fi_cq_strerror(cq_.get(), e.prov_errno, e.err_data, buf, sizeof buf);
  auto* op = static_cast<Op*>(e.op_context);
  bool is_send = op && op->kind == Op::send;
  int peer = is_send ? right_ : left_;
  release(op);
  std::string text =
      fmt::format("{}: {} {} failed during {}: {} ({}){}", who(),
                  is_send ? "send to" : "receive from", peer_desc(peer), phase, lib_->strerror(e.err),
                  e.err, prov && *prov ? fmt::format("; provider: {}", prov) : std::string());
  if (e.err == FI_ETRUNC)
    throw TransportError(ErrorKind::other,
                         text +
                             " — the message was larger than expected: do all ranks call "
                             "all-reduce with the same count and dtype?",
                         peer);
  throw TransportError(ErrorKind::peer_lost, text, peer);
}

// Cancels posted receives and tears the endpoint down: after a failed collective the provider
// must not write into the caller's buffers any more, and a closed endpoint is the only guarantee.
void FabricTransport::abort_inflight() {
  if (!ep_) return;
  bool any = false;
  for (auto& op : ops_)
    if (op.active && op.kind == Op::recv) {
      fi_cancel(&ep_->fid, &op);
      any = true;
    }
  // Wait (briefly) for the cancellations to be reported; closing the endpoint settles the rest.
  auto until = Clock::now() + Millis(any ? 100 : 0);
  auto recvs_active = [&] {
    return std::any_of(ops_.begin(), ops_.end(),
                       [](const Op& o) { return o.active && o.kind == Op::recv; });
  };
  while (Clock::now() < until && recvs_active()) {
    fi_cq_tagged_entry e[8];
    ssize_t n = fi_cq_read(cq_.get(), e, 8);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) release(static_cast<Op*>(e[i].op_context));
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_.get(), &err, 0) > 0) release(static_cast<Op*>(err.op_context));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  if (broken_.empty()) broken_ = "a previous collective failed";
  teardown();
}

void FabricTransport::teardown() {
  stop_progress_thread();
  // Endpoint first, then what it was bound to, then the domain and the fabric.
  ep_.reset();
  av_.reset();
  cq_.reset();
  domain_.reset();
  fabric_.reset();
  info_.reset();
  for (auto& op : ops_) op.active = false;
  free_ops_.clear();
}

// Manual-progress providers move data only inside fi_cq_read, so spin briefly, then yield, then
// nap for a few microseconds; the 2-core test machines need the yield.
void FabricTransport::idle_wait(int& idle) {
  ++idle;
  if (idle < 32) return;
  if (idle < 256) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// When a collective times out over the tcp provider, the peer's fabric address is a listening TCP
// socket (ofi_rxm's connection manager). A refused connection there means the peer's process is
// gone or has closed its endpoint (a neighbour that timed out first closes its own), which turns
// "timeout" into "peer_lost" with evidence. Only used once the collective has
// already failed, so a live peer is never disturbed during a run. Returns "" when inconclusive.
std::string FabricTransport::probe_gone(int peer) const {
  if (provider_.rfind("tcp", 0) != 0 && provider_.rfind("sockets", 0) != 0) return "";
  auto it = peer_addr_raw_.find(peer);
  if (it == peer_addr_raw_.end() || it->second.size() < sizeof(sockaddr_in)) return "";
  sockaddr_storage ss{};
  std::memcpy(&ss, it->second.data(), std::min(it->second.size(), sizeof ss));
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return "";
  if (ss.ss_family == AF_INET6 && it->second.size() < sizeof(sockaddr_in6)) return "";
  const socklen_t len = ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  // The shared classified connect (rendezvous/connect.h), bounded to 200 ms: only a refusal is
  // evidence; connected, dropped or unreachable stays inconclusive.
  std::string host;
  uint16_t port = 0;
  if (!rendezvous::split_host_port(rendezvous::format_address(reinterpret_cast<sockaddr*>(&ss), len),
                                   host, port))
    return "";
  auto c = rendezvous::try_connect_tcp(host, port, rendezvous::deadline_after(rendezvous::Millis{200}));
  if (c.ok()) {
    ::close(c.fd);
    return "";
  }
  if (c.error_class != rendezvous::ErrorClass::refused) return "";
  return fmt::format(
      "its fabric address {} now refuses TCP connections: its process exited or closed the "
      "endpoint (after a failure of its own?)",
      peer_addr_text_.at(peer));
}

// ---------------------------------------------------------------------------------------------
// the ring

// The schedule is the shared one (transports/ring_schedule.h); this backend posts it as a window
// of tagged operations. Receives are pre-posted in schedule order, up to `window` ahead; a send
// leaves, in order, once the receive it forwards (same chunk, previous step) has completed and
// been reduced. One collective is: plan, register, then post / complete until done or timed out.
void FabricTransport::allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                                ReduceOp /*op*/, Deadline deadline) {
  std::lock_guard collective(mu_);
  check_usable();
  if (ctx_.world_size == 1 || count == 0) {
    if (send != recv && count) std::memcpy(recv, send, count * dtype_size(dtype));
    return;
  }
  Collective c = plan(send, recv, count, dtype);
  try {
    LocalRegs regs = register_buffers(c);
    Clock::time_point idle_since{};
    bool idle_on_send = false;
    for (int idle = 0; !c.done();) {
      bool progressed = post_recvs(c);
      progressed |= post_sends(c);
      progressed |= complete(c);
      if (progressed) {
        if (idle > 0)
          (idle_on_send ? send_blocked_s_ : recv_wait_s_) += rendezvous::seconds_since(idle_since);
        idle = 0;
        continue;
      }
      if (expired(deadline)) throw timeout_error(c);
      if (idle == 0) {
        idle_since = Clock::now();
        idle_on_send = c.sends_inflight > 0 &&
                       (c.sends_inflight >= window_ || c.next_send == c.sends.size());
      }
      idle_wait(idle);
    }
  } catch (const TransportError& e) {
    fail_collective(e.what());
    throw;
  } catch (...) {
    fail_collective("unexpected failure");
    throw;
  }
}

void FabricTransport::check_usable() const {
  if (!broken_.empty())
    throw TransportError(
        ErrorKind::other,
        fmt::format("{}: the fabric endpoint was closed after an earlier failure ({})", who(),
                    broken_));
  if (!ep_ && ctx_.world_size > 1)
    throw TransportError(ErrorKind::other, fmt::format("{}: allreduce before open()", who()));
}

// Chunk size: the configured bytes, within the provider's max message size, and large enough
// that a segment's chunk index fits the tag's chunk bits.
Collective FabricTransport::plan(const void* send, void* recv, std::size_t count, DType dtype) {
  const std::size_t es = dtype_size(dtype);
  std::size_t chunk_elems = std::max<std::size_t>(1, chunk_bytes_ / es);
  if (max_msg_size_ >= es) chunk_elems = std::min<std::size_t>(chunk_elems, max_msg_size_ / es);
  std::size_t biggest = ring_segment(count, ctx_.world_size, 0).len;
  chunk_elems = std::max(chunk_elems, (biggest + kChunkMask - 1) / kChunkMask);
  Collective c(RingSchedule(ctx_.rank, ctx_.world_size, count, chunk_elems), ++seq_, send, recv,
               dtype);
  c.slot_bytes = chunk_elems * es;
  if (c.in_place) {
    if (staging_.size() < window_ * c.slot_bytes) staging_.assign(window_ * c.slot_bytes, 0);
    for (int s = static_cast<int>(window_) - 1; s >= 0; --s) c.free_slots.push_back(s);
  }
  return c;
}

LocalRegs FabricTransport::register_buffers(Collective& c) {
  LocalRegs regs;
  if (!mr_local_) return regs;
  const std::size_t bytes = c.schedule.count() * c.es;
  regs.domain = domain_.get();
  c.d_out = regs.reg(c.out, bytes, FI_SEND | FI_RECV, who());
  c.d_in = c.in_place ? c.d_out : regs.reg(c.in, bytes, FI_SEND, who());
  if (c.in_place) c.d_stage = regs.reg(staging_.data(), staging_.size(), FI_RECV, who());
  return regs;
}

// Pre-posts receives in schedule order while the window, a staging slot (in-place
// reduce-scatter) and an operation context are free. True when any was posted.
bool FabricTransport::post_recvs(Collective& c) {
  bool posted = false;
  while (c.recvs_inflight < window_ && c.next_recv < c.recvs.size()) {
    const RingChunk& it = c.recvs[c.next_recv];
    const bool staged = c.in_place && it.reduce;
    int slot = -1;
    if (staged) {
      if (c.free_slots.empty()) break;
      slot = c.free_slots.back();
    }
    Op* op = take_op();
    if (!op) break;
    op->kind = Op::recv;
    op->item = c.next_recv;
    op->slot = slot;
    void* dst = staged ? staging_.data() + slot * c.slot_bytes : c.out + it.span.off * c.es;
    long rc = fi_trecv(ep_.get(), dst, it.span.len * c.es, staged ? c.d_stage : c.d_out,
                       FI_ADDR_UNSPEC, make_tag(c.seq, it.step, it.index), 0, op);
    if (rc == -FI_EAGAIN) {
      release(op);
      break;
    }
    if (rc) post_error("fi_trecv", rc, left_);
    if (staged) c.free_slots.pop_back();
    ++c.next_recv, ++c.recvs_inflight, posted = true;
  }
  return posted;
}

// Sends in schedule order while each one's data is final. True when any was posted.
bool FabricTransport::post_sends(Collective& c) {
  bool posted = false;
  while (c.sends_inflight < window_ && c.next_send < c.sends.size()) {
    const RingChunk& it = c.sends[c.next_send];
    if (it.step > 0 && !c.recv_done[c.recv_base[it.step - 1] + it.index]) break;
    Op* op = take_op();
    if (!op) break;
    op->kind = Op::send;
    op->item = c.next_send;
    const unsigned char* src = (it.step == 0 ? c.in : c.out) + it.span.off * c.es;
    long rc = fi_tsend(ep_.get(), src, it.span.len * c.es, it.step == 0 ? c.d_in : c.d_out,
                       right_addr_, make_tag(c.seq, it.step, it.index), op);
    if (rc == -FI_EAGAIN) {
      release(op);
      break;
    }
    if (rc) post_error("fi_tsend", rc, right_);
    ++c.next_send, ++c.sends_inflight, posted = true;
  }
  return posted;
}

// Reads the completion queue once (this also drives manual-progress providers). True when
// anything completed.
bool FabricTransport::complete(Collective& c) {
  fi_cq_tagged_entry entries[16];
  ssize_t got = fi_cq_read(cq_.get(), entries, 16);
  if (got == -FI_EAGAIN) return false;
  if (got == -FI_EAVAIL) throw_cq_error("all-reduce");
  if (got <= 0)
    throw TransportError(ErrorKind::other,
                         fmt::format("{}: fi_cq_read failed: {}", who(), fi_text(got)));
  for (ssize_t i = 0; i < got; ++i) {
    auto* op = static_cast<Op*>(entries[i].op_context);
    if (op->kind == Op::send) {
      --c.sends_inflight, ++c.sends_done;
      bytes_sent_ += static_cast<std::int64_t>(c.sends[op->item].span.len * c.es);
    } else {
      reduce_received(c, *op, entries[i].len);
      bytes_received_ += static_cast<std::int64_t>(entries[i].len);
    }
    release(op);
  }
  return true;
}

// A receive completed: check its size, sum it into place during the reduce-scatter (from the
// staging slot in-place, else with the caller's input), and free its slot.
void FabricTransport::reduce_received(Collective& c, const Op& op, std::size_t bytes) {
  const RingChunk& it = c.recvs[op.item];
  if (bytes != it.span.len * c.es)
    throw TransportError(
        ErrorKind::other,
        fmt::format("{}: {} sent {} bytes for chunk {} of step {}, expected {}: do all ranks call "
                    "all-reduce with the same count and dtype?",
                    who(), peer_desc(left_), bytes, it.index, it.step, it.span.len * c.es),
        left_);
  if (it.reduce) {
    unsigned char* dst = c.out + it.span.off * c.es;
    if (op.slot >= 0) {
      reduce_sum(dst, staging_.data() + op.slot * c.slot_bytes, it.span.len, c.dtype);
      c.free_slots.push_back(op.slot);
    } else {
      reduce_sum(dst, c.in + it.span.off * c.es, it.span.len, c.dtype);
    }
  }
  c.recv_done[op.item] = 1;
  --c.recvs_inflight, ++c.recvs_done;
}

// The deadline passed: name whom this rank waited on and for which chunk, and turn the timeout
// into peer_lost when the peer's address shows its process is gone (probe_gone).
TransportError FabricTransport::timeout_error(const Collective& c) const {
  const bool waiting_recv = c.recvs_done < c.recvs.size();
  const int peer = waiting_recv ? left_ : right_;
  std::string waiting;
  if (waiting_recv) {
    auto k = static_cast<std::size_t>(
        std::find(c.recv_done.begin(), c.recv_done.end(), 0) - c.recv_done.begin());
    const RingChunk& it = c.recvs[k];
    waiting = fmt::format("waiting for {} to send chunk {} of step {}/{} ({})", peer_desc(peer),
                          it.index, it.step + 1, c.schedule.steps(), c.schedule.phase(it.step));
  } else {
    waiting = fmt::format("waiting for sends to {} to complete", peer_desc(peer));
  }
  std::string msg = fmt::format(
      "{}: all-reduce #{} of {} {} timed out after {} {}; {}/{} chunks received, {}/{} sent", who(),
      c.seq, c.schedule.count(), to_string(c.dtype),
      seconds_text(rendezvous::seconds_since(c.start)), waiting, c.recvs_done, c.recvs.size(),
      c.sends_done, c.sends.size());
  std::string gone = probe_gone(peer);
  if (!gone.empty())
    return TransportError(ErrorKind::peer_lost,
                          fmt::format("{}; lost {}: {}", msg, rank_desc(peer), gone), peer);
  return TransportError(ErrorKind::timeout, msg, peer);
}

// A failed collective closes the endpoint (abort_inflight): the provider must not write into the
// caller's buffers after we return.
void FabricTransport::fail_collective(const std::string& why) {
  broken_ = why;
  abort_inflight();
}

// ---------------------------------------------------------------------------------------------

json FabricTransport::identify() {
  json id = {
      {"provider", provider_},
      {"fabric", fabric_name_},
      {"domain", domain_name_},
      {"provider_version", provider_version_},
      {"requested_provider", requested_},
      {"requested_provider_from", requested_from_},
      {"endpoint_type", "FI_EP_RDM"},
      {"address", local_addr_text_},
      {"max_msg_size", max_msg_size_},
      {"mr_local", mr_local_},
      {"chunk_bytes", chunk_bytes_},
      {"window", window_},
  };
  if (ctx_.world_size > 1) {
    id["left"] = {
        {"rank", left_}, {"host", ctx_.host_of(left_)}, {"address", peer_addr_text_[left_]}};
    id["right"] = {
        {"rank", right_}, {"host", ctx_.host_of(right_)}, {"address", peer_addr_text_[right_]}};
  }
  if (lib_) {
    uint32_t v = lib_->version();
    id["libfabric_version"] = std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
  }
  if (!broken_.empty()) id["closed_after_error"] = broken_;
  if (counters_on_) {
    id["hw_counters_root"] = counters_root_;
    id["hw_counters"] = counter_deltas(counters_at_open_, read_hw_counters(counters_root_));
    // What the device could carry: judging compares the bus bandwidth with it (BELOW_LINE_RATE).
    if (auto rate = run_port_rate(read_port_rates(counters_root_), id["hw_counters"])) {
      id["port_rate_gbps"] = rate->gbps;
      id["port_rate_port"] = rate->port;
      id["port_rate_carried"] = rate->carried;
    }
  }
  return id;
}

// The typed link stats (transport.h). The retransmits are the device's (efa_counters.h
// device_retransmits), and speak for the link to the next rank only when this rank has the
// host's devices to itself: in the ring it sends to no one else, and in a pairwise round it has
// one peer. Otherwise (several ranks a host, or no such counters) they stay unknown.
std::optional<LinkStats> FabricTransport::link_stats() const {
  if (ctx_.world_size <= 1) return std::nullopt;
  LinkStats ls;
  ls.next_rank = right_;
  ls.send_blocked_s = send_blocked_s_;
  ls.bytes_sent = bytes_sent_;
  ls.prev_rank = left_;
  ls.recv_wait_s = recv_wait_s_;
  ls.bytes_received = bytes_received_;
  if (counters_on_ && device_own_)
    if (auto r = device_retransmits(counter_deltas(counters_at_open_, read_hw_counters(counters_root_)))) {
      ls.tx_retrans = r->retrans_pkts;
      ls.tx_segs_out = r->tx_pkts;
    }
  return ls;
}

}  // namespace

std::unique_ptr<Transport> make_fabric_transport() { return std::make_unique<FabricTransport>(); }

}  // namespace ncclsmoke::transports
