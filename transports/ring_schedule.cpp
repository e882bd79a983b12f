#include "transports/ring_schedule.h"

#include <stdexcept>
#include <string>

namespace ncclsmoke::transports {

RingSpan ring_segment(std::size_t count, int n, int i) {
  std::size_t base = count / n, rem = count % n, idx = static_cast<std::size_t>(i);
  return {idx * base + std::min(idx, rem), base + (idx < rem ? 1 : 0)};
}

RingSchedule::RingSchedule(int rank, int world_size, std::size_t count, std::size_t chunk_elems)
    : r_(rank), n_(world_size), count_(count), chunk_(std::max<std::size_t>(1, chunk_elems)) {
  if (n_ < 1 || r_ < 0 || r_ >= n_)
    throw std::invalid_argument("ring schedule: rank " + std::to_string(rank) +
                                " outside a world of " + std::to_string(world_size));
  seg_.reserve(static_cast<std::size_t>(n_));
  for (int i = 0; i < n_; ++i) seg_.push_back(ring_segment(count, n_, i));
}

namespace {

std::vector<RingChunk> walk(const RingSchedule& s, bool sending) {
  std::vector<RingChunk> out;
  for (int t = 0; t < s.steps(); ++t) {
    int seg = sending ? s.send_segment(t) : s.recv_segment(t);
    for (std::size_t k = 0; k < s.chunks(seg); ++k)
      out.push_back({t, k, seg, s.chunk(seg, k), s.reduces(t)});
  }
  return out;
}

}  // namespace

std::vector<RingChunk> RingSchedule::sends() const { return walk(*this, true); }
std::vector<RingChunk> RingSchedule::recvs() const { return walk(*this, false); }

}  // namespace ncclsmoke::transports
