#pragma once
// The Transport contract every backend implements (gloo's shape: a few nouns, one folder per
// backend). The sweep driver (sweep.h) owns sizes, timing, the data check and bandwidth; a
// backend only connects and all-reduces. Backends never decide pass/fail: they measure, and
// throw TransportError with a kind the harness names as a finding.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "rendezvous/deadline.h"
#include "rendezvous/store.h"

namespace ncclsmoke::transports {

using rendezvous::Clock;
using rendezvous::Deadline;
using rendezvous::Millis;

enum class DType { float32, bfloat16 };
std::size_t dtype_size(DType d);
const char* to_string(DType d);
bool parse_dtype(const std::string& s, DType& out);

enum class ReduceOp { sum };

enum class ErrorKind {
  unavailable,  // cannot run here (no library, no device, no provider): the phase is skipped
  init_failed,  // should run here but failed to initialise (plugin, NIC, address exchange)
  timeout,      // a collective or the connection set-up exceeded its deadline
  peer_lost,    // a peer closed or reset the connection mid-collective
  other,
};
const char* to_string(ErrorKind k);

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

// What a backend gets to connect: who we are, who the others are, and a store to exchange
// addresses (already prefixed for this transport, so backends choose their own key names).
struct TransportContext {
  int rank = 0;
  int world_size = 1;
  std::map<int, std::string> hosts;  // rank -> host name, for error messages
  std::string local_address;         // the address this rank used to reach the store
  rendezvous::Store* store = nullptr;
  // Backend options from the command line, by name (e.g. "socket.ifname", "fabric.provider").
  std::map<std::string, std::string> options;
  // Optional "blame the root" hook (harness/transport_phase.h): a backend says whom it now waits
  // on (waiting_on = that rank, what = "recv from" / "send to"; -1 = not waiting any more). Called
  // on the collective's own thread when the wait changes, not per byte; cheap and thread-safe.
  std::function<void(int waiting_on, const std::string& what)> set_wait_state;

  std::string option(const std::string& key, const std::string& fallback = "") const {
    auto it = options.find(key);
    return it == options.end() ? fallback : it->second;
  }
  std::string host_of(int r) const {
    auto it = hosts.find(r);
    return it == hosts.end() ? "rank " + std::to_string(r) : it->second;
  }
};

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
