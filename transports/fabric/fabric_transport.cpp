#include "transports/fabric/fabric_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
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
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "transports/fabric/efa_counters.h"
#include "transports/reduce.h"

namespace ncclsmoke::transports {
namespace {

using nlohmann::json;
using rendezvous::expired;

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
  return std::string(fi_strerror(e)) + " (" + std::to_string(rc < 0 ? rc : -rc) + ")";
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

std::size_t parse_size(const std::string& text, std::size_t fallback) {
  if (text.empty()) return fallback;
  try {
    std::size_t pos = 0;
    double v = std::stod(text, &pos);
    std::string unit = text.substr(pos);
    double mult = 1;
    if (unit == "k" || unit == "K" || unit == "KiB")
      mult = 1024;
    else if (unit == "m" || unit == "M" || unit == "MiB")
      mult = 1024 * 1024;
    else if (!unit.empty())
      return fallback;
    return v > 0 ? static_cast<std::size_t>(v * mult) : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}

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

// Segment i of n over `count` elements: lengths differ by at most one, some may be empty.
struct Segment {
  std::size_t off = 0, len = 0;
};

Segment segment(std::size_t count, int n, int i) {
  std::size_t base = count / n, rem = count % n, ui = static_cast<std::size_t>(i);
  return {ui * base + std::min(ui, rem), base + (ui < rem ? 1 : 0)};
}

class FabricTransport final : public Transport {
 public:
  ~FabricTransport() override { teardown(); }

  std::string name() const override { return "fabric"; }
  void open(const TransportContext& ctx, Deadline deadline) override;
  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 Deadline deadline) override;
  json identify() override;
  void close() override { teardown(); }

 private:
  std::string who() const {
    return "fabric[" + (provider_.empty() ? requested_ : provider_) + "] rank " +
           std::to_string(ctx_.rank) + " (" + ctx_.host_of(ctx_.rank) + ")";
  }
  std::string peer_desc(int r) const {
    std::string s = "rank " + std::to_string(r) + " (" + ctx_.host_of(r);
    auto it = peer_addr_text_.find(r);
    if (it != peer_addr_text_.end() && !it->second.empty()) s += ", " + it->second;
    return s + ")";
  }
  fi_info* base_hints() const;
  std::string available_providers() const;
  fi_info* choose(fi_info* list) const;
  void exchange_addresses(Deadline deadline);
  void handshake(Deadline deadline);
  std::string straddr(const void* addr) const;

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
  std::string local_addr_text_;
  std::map<int, std::string> peer_addr_text_;
  std::map<int, std::vector<unsigned char>> peer_addr_raw_;
  uint64_t max_msg_size_ = 0;
  bool mr_local_ = false;
  std::size_t chunk_bytes_ = 1 << 20;
  std::size_t window_ = 4;
  int left_ = 0, right_ = 0;

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
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
};

// ---------------------------------------------------------------------------------------------
// open

fi_info* FabricTransport::base_hints() const {
  fi_info* hints = fi_allocinfo();
  if (!hints) throw TransportError(ErrorKind::init_failed, who() + ": fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // What we can cope with; providers clear the bits they do not need (tcp/udp/shm need none).
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  return hints;
}

std::string FabricTransport::available_providers() const {
  fi_info* hints = base_hints();
  fi_info* list = nullptr;
  int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list);
  fi_freeinfo(hints);
  if (rc != 0 || !list) return "none (" + fi_text(rc) + ")";
  std::vector<std::pair<std::string, std::set<std::string>>> provs;
  for (fi_info* i = list; i; i = i->next) {
    std::string p = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
    std::string d = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "?";
    auto it = std::find_if(provs.begin(), provs.end(), [&](auto& e) { return e.first == p; });
    if (it == provs.end())
      provs.push_back({p, {d}});
    else
      it->second.insert(d);
  }
  fi_freeinfo(list);
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
    throw TransportError(ErrorKind::init_failed, who() + ": provider '" + requested_ +
                                                     "' has no domain '" + want +
                                                     "' for FI_EP_RDM; it offers: " + seen);
  }
  if (!ctx_.local_address.empty())
    for (fi_info* i = list; i; i = i->next)
      if (src_ip(i) == ctx_.local_address) return i;
  return list;
}

std::string FabricTransport::straddr(const void* addr) const {
  char buf[256] = {};
  std::size_t len = sizeof buf;
  if (!av_ || !fi_av_straddr(av_, addr, buf, &len)) return "";
  return buf;
}

void FabricTransport::open(const TransportContext& ctx, Deadline deadline) {
  ctx_ = ctx;
  requested_ = ctx.option("fabric.provider", "tcp");
  if (requested_.empty()) requested_ = "tcp";
  if (!ctx.store && ctx.world_size > 1)
    throw TransportError(ErrorKind::init_failed, who() + ": no store to exchange addresses");
  chunk_bytes_ = parse_size(ctx.option("fabric.chunk_bytes"), chunk_bytes_);
  window_ = std::clamp<std::size_t>(parse_size(ctx.option("fabric.window"), window_), 1, 256);
  counters_root_ = ctx.option("fabric.hw_counters_root", "/sys/class/infiniband");
  left_ = (ctx.rank - 1 + ctx.world_size) % ctx.world_size;
  right_ = (ctx.rank + 1) % ctx.world_size;
  if (ctx.world_size > static_cast<int>(kStepMask / 2))
    throw TransportError(
        ErrorKind::init_failed,
        who() + ": world size " + std::to_string(ctx.world_size) + " exceeds the ring's tag space");

  fi_info* hints = base_hints();
  hints->fabric_attr->prov_name = strdup(requested_.c_str());
  fi_info* list = nullptr;
  int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list);
  fi_freeinfo(hints);
  if (rc == -FI_ENODATA || (rc == 0 && !list)) {
    throw TransportError(ErrorKind::unavailable,
                         "libfabric has no provider '" + requested_ +
                             "' for FI_EP_RDM on this host (" + ctx.host_of(ctx.rank) + ", rank " +
                             std::to_string(ctx.rank) + "): fi_getinfo: " + fi_text(rc) +
                             "; available: " + available_providers());
  }
  if (rc != 0)
    throw TransportError(ErrorKind::init_failed, who() + ": fi_getinfo(provider '" + requested_ +
                                                     "') failed: " + fi_text(rc));
  try {
    info_ = fi_dupinfo(choose(list));
  } catch (...) {
    fi_freeinfo(list);
    throw;
  }
  fi_freeinfo(list);
  if (!info_) throw TransportError(ErrorKind::init_failed, who() + ": fi_dupinfo failed");

  provider_ = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : requested_;
  fabric_name_ = info_->fabric_attr->name ? info_->fabric_attr->name : "";
  domain_name_ = info_->domain_attr->name ? info_->domain_attr->name : "";
  provider_version_ = std::to_string(FI_MAJOR(info_->fabric_attr->prov_version)) + "." +
                      std::to_string(FI_MINOR(info_->fabric_attr->prov_version));
  max_msg_size_ = info_->ep_attr->max_msg_size;
  mr_local_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;

  auto check = [&](long r, const char* call) {
    if (r != 0)
      throw TransportError(ErrorKind::init_failed, who() + ": " + call + " failed on fabric '" +
                                                       fabric_name_ + "' domain '" + domain_name_ +
                                                       "': " + fi_text(r));
  };
  check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = std::max<std::size_t>(4 * window_ + 16, 128);
  cq_attr.wait_obj = FI_WAIT_NONE;
  check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 4;
  check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
  check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
  check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
  check(fi_enable(ep_), "fi_enable");

  ops_.resize(2 * window_ + 4);
  free_ops_.clear();
  for (auto& op : ops_) free_ops_.push_back(&op);

  counters_on_ =
      ctx.option("fabric.hw_counters", "auto") == "always" ||
      (ctx.option("fabric.hw_counters", "auto") == "auto" && provider_.rfind("efa", 0) == 0);
  if (counters_on_) counters_at_open_ = read_hw_counters(counters_root_);

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
          if (fi_cq_read(cq_, e, 8) == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            fi_cq_readerr(cq_, &err, 0);
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
    throw TransportError(ErrorKind::init_failed, who() + ": fi_getname failed: " + fi_text(rc));
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
                           who() + ": no fabric address from rank " + std::to_string(peer) + " (" +
                               ctx_.host_of(peer) + ") after " +
                               seconds_text(rendezvous::seconds_since(start)) + ": " + e.what(),
                           peer);
    }
    std::vector<unsigned char> addr;
    if (!from_hex(hex, addr) || addr.empty())
      throw TransportError(ErrorKind::init_failed,
                           who() + ": rank " + std::to_string(peer) + " (" + ctx_.host_of(peer) +
                               ") published a malformed fabric address '" + hex.substr(0, 80) + "'",
                           peer);
    fi_addr_t fa = FI_ADDR_UNSPEC;
    int n = fi_av_insert(av_, addr.data(), 1, &fa, 0, nullptr);
    peer_addr_text_[peer] = straddr(addr.data());
    peer_addr_raw_[peer] = addr;
    if (n != 1)
      throw TransportError(ErrorKind::init_failed,
                           who() + ": fi_av_insert of " + peer_desc(peer) + "'s address failed: " +
                               (n < 0 ? fi_text(n) : std::string("0 addresses inserted")),
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
  fid_mr* mr_in = nullptr;
  fid_mr* mr_out = nullptr;
  void* d_in = nullptr;
  void* d_out = nullptr;
  if (mr_local_) {
    if (int r = fi_mr_reg(domain_, &in, sizeof in, FI_RECV, 0, 1, 0, &mr_in, nullptr); r == 0)
      d_in = fi_mr_desc(mr_in);
    if (int r = fi_mr_reg(domain_, &out, sizeof out, FI_SEND, 0, 2, 0, &mr_out, nullptr); r == 0)
      d_out = fi_mr_desc(mr_out);
  }
  auto cleanup = [&] {
    if (mr_in) fi_close(&mr_in->fid);
    if (mr_out) fi_close(&mr_out->fid);
  };
  try {
    long rc;
    while ((rc = fi_trecv(ep_, &in, sizeof in, d_in, FI_ADDR_UNSPEC, tag, 0, rop)) == -FI_EAGAIN) {
      if (expired(deadline)) break;
      fi_cq_read(cq_, nullptr, 0);
    }
    if (rc) post_error("fi_trecv (handshake)", rc, left_);
    while ((rc = fi_tsend(ep_, &out, sizeof out, d_out, right_addr_, tag, sop)) == -FI_EAGAIN) {
      if (expired(deadline)) break;
      fi_cq_read(cq_, nullptr, 0);
    }
    if (rc) post_error("fi_tsend (handshake)", rc, right_);
    int pending = 2, idle = 0;
    while (pending > 0) {
      fi_cq_tagged_entry e[4];
      ssize_t n = fi_cq_read(cq_, e, 4);
      if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) release(static_cast<Op*>(e[i].op_context));
        pending -= static_cast<int>(n);
        idle = 0;
        continue;
      }
      if (n == -FI_EAVAIL) throw_cq_error("the open() handshake");
      if (n != -FI_EAGAIN)
        throw TransportError(ErrorKind::init_failed, who() + ": fi_cq_read failed: " + fi_text(n));
      if (expired(deadline)) {
        bool recv_pending = rop->active;
        int peer = recv_pending ? left_ : right_;
        throw TransportError(ErrorKind::timeout,
                             who() + ": fabric handshake " +
                                 (recv_pending ? "got no message from " : "send to ") +
                                 peer_desc(peer) + (recv_pending ? "" : " did not complete") +
                                 " after " + seconds_text(rendezvous::seconds_since(start)) +
                                 " (provider " + provider_ + ", domain " + domain_name_ + ")",
                             peer);
      }
      idle_wait(idle);
    }
    if (in != static_cast<uint32_t>(left_))
      throw TransportError(ErrorKind::init_failed,
                           who() + ": handshake expected rank " + std::to_string(left_) +
                               " but got " + std::to_string(in),
                           left_);
  } catch (...) {
    abort_inflight();
    cleanup();
    throw;
  }
  cleanup();
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
  throw TransportError(
      ErrorKind::other,
      who() + ": " + what + " to/from " + peer_desc(peer) + " failed: " + fi_text(rc), peer);
}

void FabricTransport::throw_cq_error(const char* phase) {
  fi_cq_err_entry e{};
  char buf[256] = {};
  ssize_t r = fi_cq_readerr(cq_, &e, 0);
  if (r < 0)
    throw TransportError(ErrorKind::other, who() + ": fi_cq_readerr failed: " + fi_text(r));
  const char* prov = fi_cq_strerror(cq_, e.prov_errno, e.err_data, buf, sizeof buf);
  auto* op = static_cast<Op*>(e.op_context);
  bool is_send = op && op->kind == Op::send;
  int peer = is_send ? right_ : left_;
  release(op);
  std::string text = who() + ": " + (is_send ? "send to " : "receive from ") + peer_desc(peer) +
                     " failed during " + phase + ": " + fi_strerror(e.err) + " (" +
                     std::to_string(e.err) + ")" +
                     (prov && *prov ? std::string("; provider: ") + prov : std::string());
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
    ssize_t n = fi_cq_read(cq_, e, 8);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) release(static_cast<Op*>(e[i].op_context));
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) > 0) release(static_cast<Op*>(err.op_context));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  if (broken_.empty()) broken_ = "a previous collective failed";
  teardown();
}

void FabricTransport::teardown() {
  stop_progress_thread();
  if (ep_) fi_close(&ep_->fid), ep_ = nullptr;
  if (av_) fi_close(&av_->fid), av_ = nullptr;
  if (cq_) fi_close(&cq_->fid), cq_ = nullptr;
  if (domain_) fi_close(&domain_->fid), domain_ = nullptr;
  if (fabric_) fi_close(&fabric_->fid), fabric_ = nullptr;
  if (info_) fi_freeinfo(info_), info_ = nullptr;
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
  socklen_t len = ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return "";
  if (ss.ss_family == AF_INET6 && it->second.size() < sizeof(sockaddr_in6)) return "";
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  std::string verdict;
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  int err = rc == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    if (::poll(&pfd, 1, 200) == 1) {
      socklen_t sl = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl);
    }
  }
  if (err == ECONNREFUSED)
    verdict = "its fabric address " + peer_addr_text_.at(peer) +
              " now refuses TCP connections: its process exited or closed the endpoint (after a "
              "failure of its own?)";
  ::close(fd);
  return verdict;
}

// ---------------------------------------------------------------------------------------------
// the ring

// Registers the buffers of one collective for providers that need FI_MR_LOCAL.
struct LocalRegs {
  fid_domain* domain = nullptr;
  std::vector<fid_mr*> mrs;
  ~LocalRegs() {
    for (auto* m : mrs) fi_close(&m->fid);
  }
  void* reg(const void* buf, std::size_t len, uint64_t access, const std::string& who) {
    if (!domain || !buf || len == 0) return nullptr;
    fid_mr* mr = nullptr;
    int rc = fi_mr_reg(domain, buf, len, access, 0, 100 + mrs.size(), 0, &mr, nullptr);
    if (rc != 0)
      throw TransportError(ErrorKind::other, who + ": fi_mr_reg of " + std::to_string(len) +
                                                 " bytes failed: " + fi_text(rc));
    mrs.push_back(mr);
    return fi_mr_desc(mr);
  }
};

void FabricTransport::allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                                ReduceOp /*op*/, Deadline deadline) {
  std::lock_guard collective(mu_);
  if (!broken_.empty())
    throw TransportError(
        ErrorKind::other,
        who() + ": the fabric endpoint was closed after an earlier failure (" + broken_ + ")");
  if (!ep_ && ctx_.world_size > 1)
    throw TransportError(ErrorKind::other, who() + ": allreduce before open()");
  const std::size_t es = dtype_size(dtype);
  const int n = ctx_.world_size, rank = ctx_.rank;
  auto* out = static_cast<unsigned char*>(recv);
  const auto* in = static_cast<const unsigned char*>(send);
  const bool in_place = send == recv;
  if (n == 1 || count == 0) {
    if (!in_place && count) std::memcpy(out, in, count * es);
    return;
  }
  const uint64_t seq = ++seq_;
  auto start = Clock::now();

  // Chunk size: the configured bytes, within the provider's max message size.
  std::size_t chunk_elems = std::max<std::size_t>(1, chunk_bytes_ / es);
  if (max_msg_size_ >= es) chunk_elems = std::min<std::size_t>(chunk_elems, max_msg_size_ / es);
  std::size_t biggest = segment(count, n, 0).len;
  chunk_elems = std::max(chunk_elems, (biggest + kChunkMask - 1) / kChunkMask);

  // Steps 0..n-2 reduce-scatter, n-1..2n-3 all-gather. Step t receives segment recv_seg(t) from
  // the left and sends segment send_seg(t) to the right, where send_seg(t) == recv_seg(t-1): chunk
  // c of step t may leave once chunk c of step t-1 has arrived (and been reduced).
  const int steps = 2 * (n - 1);
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  auto recv_seg = [&](int t) { return t < n - 1 ? mod(rank - t - 1) : mod(rank - (t - (n - 1))); };
  auto send_seg = [&](int t) { return t == 0 ? rank : recv_seg(t - 1); };
  auto nchunks = [&](int seg) {
    return (segment(count, n, seg).len + chunk_elems - 1) / chunk_elems;
  };
  struct Item {
    int step;
    std::size_t chunk, off, len;  // elements
  };
  std::vector<Item> recv_items, send_items;
  std::vector<std::size_t> recv_base(steps + 1);
  for (int t = 0; t < steps; ++t) {
    recv_base[t] = recv_items.size();
    for (int pass = 0; pass < 2; ++pass) {
      int seg = pass == 0 ? recv_seg(t) : send_seg(t);
      Segment s = segment(count, n, seg);
      for (std::size_t c = 0; c < nchunks(seg); ++c) {
        std::size_t off = s.off + c * chunk_elems;
        Item it{t, c, off, std::min(chunk_elems, s.off + s.len - off)};
        (pass == 0 ? recv_items : send_items).push_back(it);
      }
    }
  }
  recv_base[steps] = recv_items.size();
  std::vector<char> recv_done(recv_items.size(), 0);

  const std::size_t slot_bytes = chunk_elems * es;
  if (in_place && staging_.size() < window_ * slot_bytes) staging_.assign(window_ * slot_bytes, 0);
  std::vector<int> free_slots;
  if (in_place)
    for (int s = static_cast<int>(window_) - 1; s >= 0; --s) free_slots.push_back(s);

  try {
    LocalRegs regs;
    void *d_in = nullptr, *d_out = nullptr, *d_stage = nullptr;
    if (mr_local_) {
      regs.domain = domain_;
      d_out = regs.reg(out, count * es, FI_SEND | FI_RECV, who());
      d_in = in_place ? d_out : regs.reg(in, count * es, FI_SEND, who());
      if (in_place) d_stage = regs.reg(staging_.data(), staging_.size(), FI_RECV, who());
    }

    std::size_t next_recv = 0, next_send = 0, recvs_done = 0, sends_done = 0;
    std::size_t recvs_inflight = 0, sends_inflight = 0;
    int idle = 0;
    auto phase = [&](int t) { return t < n - 1 ? "reduce-scatter" : "all-gather"; };

    while (recvs_done < recv_items.size() || sends_done < send_items.size()) {
      bool progressed = false;
      // Receives are pre-posted in order, up to `window` ahead.
      while (recvs_inflight < window_ && next_recv < recv_items.size()) {
        const Item& it = recv_items[next_recv];
        bool staged = in_place && it.step < n - 1;
        int slot = -1;
        if (staged) {
          if (free_slots.empty()) break;
          slot = free_slots.back();
        }
        Op* op = take_op();
        if (!op) break;
        op->kind = Op::recv;
        op->item = next_recv;
        op->slot = slot;
        void* dst = staged ? staging_.data() + slot * slot_bytes : out + it.off * es;
        long rc = fi_trecv(ep_, dst, it.len * es, staged ? d_stage : d_out, FI_ADDR_UNSPEC,
                           make_tag(seq, it.step, it.chunk), 0, op);
        if (rc == -FI_EAGAIN) {
          release(op);
          break;
        }
        if (rc) post_error("fi_trecv", rc, left_);
        if (staged) free_slots.pop_back();
        ++next_recv, ++recvs_inflight, progressed = true;
      }
      // Sends go in order as their data becomes final.
      while (sends_inflight < window_ && next_send < send_items.size()) {
        const Item& it = send_items[next_send];
        if (it.step > 0 && !recv_done[recv_base[it.step - 1] + it.chunk]) break;
        Op* op = take_op();
        if (!op) break;
        op->kind = Op::send;
        op->item = next_send;
        const unsigned char* src = (it.step == 0 ? in : out) + it.off * es;
        long rc = fi_tsend(ep_, src, it.len * es, it.step == 0 ? d_in : d_out, right_addr_,
                           make_tag(seq, it.step, it.chunk), op);
        if (rc == -FI_EAGAIN) {
          release(op);
          break;
        }
        if (rc) post_error("fi_tsend", rc, right_);
        ++next_send, ++sends_inflight, progressed = true;
      }

      fi_cq_tagged_entry entries[16];
      ssize_t got = fi_cq_read(cq_, entries, 16);
      if (got > 0) {
        progressed = true;
        for (ssize_t i = 0; i < got; ++i) {
          auto* op = static_cast<Op*>(entries[i].op_context);
          if (op->kind == Op::send) {
            --sends_inflight, ++sends_done;
          } else {
            const Item& it = recv_items[op->item];
            if (entries[i].len != it.len * es)
              throw TransportError(
                  ErrorKind::other,
                  who() + ": " + peer_desc(left_) + " sent " + std::to_string(entries[i].len) +
                      " bytes for chunk " + std::to_string(it.chunk) + " of step " +
                      std::to_string(it.step) + ", expected " + std::to_string(it.len * es) +
                      ": do all ranks call all-reduce with the same count and dtype?",
                  left_);
            if (it.step < n - 1) {
              unsigned char* dst = out + it.off * es;
              if (op->slot >= 0) {
                reduce_sum(dst, staging_.data() + op->slot * slot_bytes, it.len, dtype);
                free_slots.push_back(op->slot);
              } else {
                reduce_sum(dst, in + it.off * es, it.len, dtype);
              }
            }
            recv_done[op->item] = 1;
            --recvs_inflight, ++recvs_done;
          }
          release(op);
        }
      } else if (got == -FI_EAVAIL) {
        throw_cq_error("all-reduce");
      } else if (got != -FI_EAGAIN) {
        throw TransportError(ErrorKind::other, who() + ": fi_cq_read failed: " + fi_text(got));
      }

      if (progressed) {
        idle = 0;
        continue;
      }
      if (expired(deadline)) {
        bool waiting_recv = recvs_done < recv_items.size();
        int peer = waiting_recv ? left_ : right_;
        std::string where;
        if (waiting_recv) {
          std::size_t k = 0;
          while (k < recv_done.size() && recv_done[k]) ++k;
          const Item& it = recv_items[k];
          where = "chunk " + std::to_string(it.chunk) + " of step " + std::to_string(it.step + 1) +
                  "/" + std::to_string(steps) + " (" + phase(it.step) + ")";
        }
        std::string msg =
            who() + ": all-reduce #" + std::to_string(seq) + " of " + std::to_string(count) + " " +
            to_string(dtype) + " timed out after " + seconds_text(rendezvous::seconds_since(start)) +
            (waiting_recv ? " waiting for " + peer_desc(peer) + " to send " + where
                          : " waiting for sends to " + peer_desc(peer) + " to complete") +
            "; " + std::to_string(recvs_done) + "/" + std::to_string(recv_items.size()) +
            " chunks received, " + std::to_string(sends_done) + "/" +
            std::to_string(send_items.size()) + " sent";
        std::string gone = probe_gone(peer);
        if (!gone.empty())
          throw TransportError(ErrorKind::peer_lost,
                               msg + "; lost rank " + std::to_string(peer) + ": " + gone, peer);
        throw TransportError(ErrorKind::timeout, msg, peer);
      }
      idle_wait(idle);
    }
  } catch (const TransportError& e) {
    broken_ = e.what();
    abort_inflight();
    throw;
  } catch (...) {
    broken_ = "unexpected failure";
    abort_inflight();
    throw;
  }
}

// ---------------------------------------------------------------------------------------------

json FabricTransport::identify() {
  uint32_t v = fi_version();
  json id = {
      {"provider", provider_},
      {"fabric", fabric_name_},
      {"domain", domain_name_},
      {"provider_version", provider_version_},
      {"libfabric_version", std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v))},
      {"requested_provider", requested_},
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
  if (!broken_.empty()) id["closed_after_error"] = broken_;
  if (counters_on_) {
    id["hw_counters_root"] = counters_root_;
    id["hw_counters"] = counter_deltas(counters_at_open_, read_hw_counters(counters_root_));
  }
  return id;
}

}  // namespace

std::unique_ptr<Transport> make_fabric_transport() { return std::make_unique<FabricTransport>(); }

}  // namespace ncclsmoke::transports
