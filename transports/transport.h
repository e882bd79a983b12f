#pragma once
// The Transport contract every backend implements (gloo's shape: a few nouns, one folder per
// backend). The sweep driver (sweep.h) owns sizes, timing, the data check and bandwidth; a
// backend only connects and all-reduces. Backends never decide pass/fail: they measure, and
// throw TransportError with a kind the harness names as a finding.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "facts/transport.h"
#include "rendezvous/deadline.h"
#include "rendezvous/store.h"
#include "transports/options.h"

namespace ncclsmoke::transports {

using rendezvous::Clock;
using rendezvous::Deadline;
using rendezvous::Millis;

using facts::DType;  // facts/transport.h, with its spelling
std::size_t dtype_size(DType d);
bool parse_dtype(const std::string& s, DType& out);

enum class ReduceOp { sum };

// The kinds and their spelling are facts/transport.h's: judging reads the same type.
using facts::ErrorKind;
using facts::to_string;

class TransportError : public std::runtime_error {
 public:
  TransportError(ErrorKind kind, const std::string& message, int peer = -1,
                 nlohmann::json evidence = nullptr)
      : std::runtime_error(message), kind_(kind), peer_(peer), evidence_(std::move(evidence)) {}
  ErrorKind kind() const { return kind_; }
  int peer() const { return peer_; }  // the rank involved, -1 if none
  const nlohmann::json& evidence() const { return evidence_; }

 private:
  ErrorKind kind_;
  int peer_;
  nlohmann::json evidence_;
};

// Backend-neutral observations a backend may report beside identify() (typed, so the judging
// step reads no backend's private JSON). The harness writes them into the run's identity rows
// under documented keys (results/judging/transport_rules.h owns the layout).
// LinkStats: where this rank waited on its ring links over the transport's life. The rank behind
// a slow egress has by far the largest send_blocked_s (STRAGGLER); -1 ranks: no such link.
using facts::LinkStats;  // facts/transport.h: judging reads the same type
// NetworkReport: the network the backend was asked to use and what carried the bytes.
using facts::NetworkReport;

// What a backend gets to connect: who we are, who the others are, and a store to exchange
// addresses (already prefixed for this transport, so backends choose their own key names).
struct TransportContext {
  int rank = 0;
  int world_size = 1;
  std::map<int, std::string> hosts;  // rank -> host name, for error messages
  std::string local_address;         // the address this rank used to reach the store
  rendezvous::Store* store = nullptr;
  // Backend options from the command line by key (e.g. "socket.ifname", "fabric.provider"), as
  // declared in the backend's folder (options.h): read them typed, ctx.options.get_size(...).
  BackendOptions options;
  // Optional "blame the root" hook (harness/run/transport_phase.h): a backend says whom it now waits
  // on (waiting_on = that rank, what = "recv from" / "send to"; -1 = not waiting any more). Called
  // on the collective's own thread when the wait changes, not per byte; cheap and thread-safe.
  std::function<void(int waiting_on, const std::string& what)> set_wait_state;
  // This instance's ranks in the run's world, in the instance's rank order (world_ranks[rank] is
  // this rank's world rank; size world_size); empty: the instance is the whole world. Set for the
  // pairwise rounds' 2-rank instances (harness/run/pairwise_step.h measure_pair: {lower, higher}). A
  // backend that rendezvouses through `store` needs nothing else and ignores it; one whose
  // library owns the world (mpi: MPI_COMM_WORLD, from mpirun) forms the instance inside it.
  std::vector<int> world_ranks;
  // How many of the run's ranks are on this rank's host (1: it has the host's devices to itself),
  // so a backend knows whether a device-wide counter speaks for this rank's links alone.
  int ranks_on_host = 1;

  // The given text unchecked, else `fallback` (prefer the typed getters of `options`).
  std::string option(const std::string& key, const std::string& fallback = "") const {
    return options.raw(key, fallback);
  }
  std::string host_of(int r) const {
    auto it = hosts.find(r);
    return it == hosts.end() ? "rank " + std::to_string(r) : it->second;
  }
};

// How many ranks of `hosts` (rank -> host) share `rank`'s host, `rank` included; 1 when its host
// is unknown.
inline int ranks_on_host(const std::map<int, std::string>& hosts, int rank) {
  auto mine = hosts.find(rank);
  if (mine == hosts.end() || mine->second.empty()) return 1;
  int n = 0;
  for (const auto& [r, h] : hosts) n += h == mine->second;
  return n;
}

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  // Connects to every peer it needs before `deadline`.
  virtual void open(const TransportContext& ctx, Deadline deadline) = 0;
  // recv[i] = sum over ranks of send[i]. send == recv is the in-place form. Every rank calls it
  // with the same count and dtype. Returns before `deadline` or throws TransportError(timeout).
  virtual void allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                         ReduceOp op, Deadline deadline) = 0;
  // What actually carried the bytes: interface, addresses, provider, counters... (an object).
  virtual nlohmann::json identify() = 0;
  // Typed observations (above), asked for after identify(); nullopt: the backend has none.
  virtual std::optional<LinkStats> link_stats() const { return std::nullopt; }
  virtual std::optional<NetworkReport> network_report() { return std::nullopt; }

  // Runs `iters` back-to-back collectives and returns the mean microseconds per collective. The
  // default times them on the host clock; a device backend overrides it to time on its stream
  // (CUDA events) so launch and synchronisation overheads don't count as transfer time.
  virtual double timed_allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                                 ReduceOp op, int iters, Deadline deadline,
                                 const std::function<Deadline()>& op_deadline);

  // The memory collectives run on. Host backends keep these defaults (host memory, memcpy); a
  // device backend (NCCL) allocates device memory and copies through it, so the sweep's data
  // check fills and verifies on the host whatever the backend. Valid after open().
  virtual void* allocate(std::size_t bytes);
  virtual void release(void* buffer);
  virtual void copy_in(void* buffer, const void* host, std::size_t bytes);
  virtual void copy_out(void* host, const void* buffer, std::size_t bytes);
  // Releases connections; called once, also after errors.
  virtual void close() {}
};

}  // namespace ncclsmoke::transports
