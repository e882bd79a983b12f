#pragma once
// The ring all-reduce schedule, as plain data, shared by every backend that runs a ring (socket,
// fabric). The backend moves bytes to the next rank and from the previous one; this says which
// bytes, when, and whether they are summed or copied. Like gloo's ring algorithms over its pairs:
// the algorithm knows nothing of sockets or libfabric, the backends nothing of ring arithmetic.
//
// Over n ranks the buffer is cut into n segments (segment i is count/n elements, the first
// count%n one more; some may be empty). Steps 0..n-2 are the reduce-scatter: at step t rank r
// sends segment (r-t) to the next rank and receives segment (r-t-1) from the previous one, summing
// it into its own copy. Steps n-1..2n-3 are the all-gather: segments that are final are passed
// on and land in place. The segment sent at step t is the one received at step t-1, so a backend
// may forward chunk k of step t as soon as chunk k of step t-1 has arrived (and been reduced):
// that per-chunk dependency is what lets the socket engine pipeline and the fabric engine keep a
// window of operations in flight.
//
// Each segment is cut into chunks of `chunk_elems` elements (the last one shorter). Chunk k of a
// step is the same index on the sending and the receiving rank, so backends can tag or order
// messages by (step, chunk). Everything here is in elements; a backend multiplies by the dtype's
// size. Reduction itself lives in transports/reduce.h.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace ncclsmoke::transports {

// A range of elements.
struct RingSpan {
  std::size_t off = 0, len = 0;
};

// Segment i of a ring over `count` elements and `n` ranks.
RingSpan ring_segment(std::size_t count, int n, int i);

// One chunk a rank sends or receives: the step, its index within the step's segment, the segment,
// its elements, and whether the receiver sums it into place (reduce-scatter) or copies it.
struct RingChunk {
  int step = 0;
  std::size_t index = 0;
  int segment = 0;
  RingSpan span;
  bool reduce = false;
};

class RingSchedule {
 public:
  // chunk_elems < 1 is taken as 1.
  RingSchedule(int rank, int world_size, std::size_t count, std::size_t chunk_elems);

  int rank() const { return r_; }
  int world_size() const { return n_; }
  int next() const { return (r_ + 1) % n_; }
  int prev() const { return (r_ + n_ - 1) % n_; }
  std::size_t count() const { return count_; }
  std::size_t chunk_elems() const { return chunk_; }

  // 2(n-1) steps; 0 for a world of one.
  int steps() const { return 2 * (n_ - 1); }
  bool reduces(int t) const { return t < n_ - 1; }
  const char* phase(int t) const { return reduces(t) ? "reduce-scatter" : "all-gather"; }
  int send_segment(int t) const { return reduces(t) ? mod(r_ - t) : mod(r_ + 1 - (t - (n_ - 1))); }
  int recv_segment(int t) const { return reduces(t) ? mod(r_ - t - 1) : mod(r_ - (t - (n_ - 1))); }

  RingSpan segment(int seg) const { return seg_[static_cast<std::size_t>(seg)]; }
  std::size_t chunks(int seg) const { return (segment(seg).len + chunk_ - 1) / chunk_; }
  RingSpan chunk(int seg, std::size_t k) const {
    RingSpan s = segment(seg);
    return {s.off + k * chunk_, std::min(chunk_, s.len - k * chunk_)};
  }
  std::size_t send_chunks(int t) const { return chunks(send_segment(t)); }
  std::size_t recv_chunks(int t) const { return chunks(recv_segment(t)); }

  // Every chunk this rank sends (receives), step by step and within a step in chunk order.
  std::vector<RingChunk> sends() const;
  std::vector<RingChunk> recvs() const;

 private:
  int mod(int x) const { return ((x % n_) + n_) % n_; }
  int r_, n_;
  std::size_t count_, chunk_;
  std::vector<RingSpan> seg_;
};

}  // namespace ncclsmoke::transports
