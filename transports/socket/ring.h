#pragma once
// The ring all-reduce engine of the socket transport: it walks the shared schedule
// (transports/ring_schedule.h: reduce-scatter then all-gather over n segments) on already
// connected sockets: `to_next[c]` carries bytes to rank (r+1)%n, `from_prev[c]` brings them from
// (r-1+n)%n. This file only moves and sums bytes; which bytes go when is the schedule's.
//
// Pipelining. Every step's segment is cut into chunks; chunk k rides connection k % nconn, so
// each connection carries its own ordered stream of chunks, step after step. Sending chunk k of
// step t+1 needs only chunk k of step t to be received (and reduced): the dependency is tracked
// per byte, so a chunk is forwarded while it is still arriving. One thread drives everything
// with non-blocking sockets and one poll(): each turn it does one recv and one send per
// connection and reduces the bytes a recv brought while they are hot in cache. Out-of-place,
// reduce-scatter bytes land directly in `recv` and are summed with `send` there (no copy of the
// input first); in-place they land in a per-connection staging chunk and are summed into place.
// All-gather bytes always land in place. Every collective opens each stream with a 24-byte
// header (sequence number, count, dtype), so ranks that disagree on the call fail loudly
// instead of mixing data.
//
// Every wait is a poll bounded by the deadline. Failures are RingFailure values naming the side
// (next or prev), the connection and what happened; the transport turns them into messages.
//
// Link accounting (RingStats). In a ring every rank's collective time is about the same (the ring
// moves at the speed of its slowest link), so per-rank times cannot point at a slow link; where
// each rank waits can. Every poll's wait is charged to one side: to the next rank when some
// connection to it holds bytes ready to send that it would not take (EAGAIN), else to the
// previous rank when bytes from it are still due. The rank behind a slow egress shows by far the
// largest send-blocked time, its next neighbour a large receive wait. Cost: one clock read per
// poll wake-up (the pre-poll read already exists for the timeout).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "transports/ring_schedule.h"
#include "transports/transport.h"

namespace ncclsmoke::transports::sock {

struct RingLinks {
  std::vector<int> to_next;    // non-blocking, one per connection
  std::vector<int> from_prev;  // same count
};

struct RingConfig {
  int rank = 0;
  int world_size = 1;
  std::size_t chunk_bytes = 1 << 20;
  // A partly arrived chunk is forwarded once this many bytes are ready (or the chunk is whole).
  std::size_t min_send_bytes = 64 * 1024;
  // Optional: told whom each poll waits on when that changes (the next rank with "send to" when
  // its sockets refuse ready bytes, else the previous one with "recv from"), and -1 once the
  // collective is done. A failed collective leaves the last wait in place: it is what timed out.
  const std::function<void(int waiting_on, const std::string& what)>* on_wait = nullptr;
};

enum class RingFault {
  timeout,   // the deadline passed
  closed,    // the peer closed its end (EOF) or reset it
  io_error,  // another socket error (errno set)
  protocol,  // the peer sent a header that disagrees with ours, or bytes it should not
};

struct RingProgress {
  uint64_t received = 0, to_receive = 0;  // from the previous rank, this collective
  uint64_t sent = 0, to_send = 0;         // to the next rank
};

class RingFailure : public std::runtime_error {
 public:
  RingFailure(RingFault f, bool next, int c, int err, const std::string& what, RingProgress p)
      : std::runtime_error(what), fault(f), next_side(next), conn(c), sys_errno(err), progress(p) {}
  RingFault fault;
  bool next_side;  // the connection to the next rank (true) or from the previous one (false)
  int conn;
  int sys_errno;
  RingProgress progress;
};

// Accumulated over every run() of one RingAllreduce, failed ones included (bytes as far as
// they got).
struct RingStats {
  Clock::duration send_blocked{};  // waiting with ready bytes the next rank's sockets refused
  Clock::duration recv_wait{};     // waiting with nothing to do but receive from the previous rank
  uint64_t bytes_sent = 0;         // payload bytes (all-reduce headers not counted)
  uint64_t bytes_received = 0;
  uint64_t collectives = 0;        // runs that completed
};

class RingAllreduce {
 public:
  // recv[i] = sum over ranks of send[i]; send == recv is in-place. Returns once every byte was
  // sent and received, or throws RingFailure.
  void run(const RingLinks& links, const RingConfig& cfg, const void* send, void* recv,
           std::size_t count, DType dtype, uint64_t seq, Deadline deadline);

  const RingStats& stats() const { return stats_; }

 private:
  std::vector<unsigned char> staging_;  // in-place reduce-scatter: one chunk per connection
  RingStats stats_;
};

// Segment i of a ring over `count` elements and `n` ranks: {offset, length} in elements (the
// shared schedule's transports::ring_segment, kept in this shape for existing callers).
inline std::pair<std::size_t, std::size_t> ring_segment(std::size_t count, int n, int i) {
  RingSpan s = transports::ring_segment(count, n, i);
  return {s.off, s.len};
}

}  // namespace ncclsmoke::transports::sock
