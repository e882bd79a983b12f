#include "transports/transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ncclsmoke::transports {

std::size_t dtype_size(DType d) { return d == DType::float32 ? 4 : 2; }


bool parse_dtype(const std::string& s, DType& out) {
  if (s == "float32" || s == "float" || s == "f32") out = DType::float32;
  else if (s == "bfloat16" || s == "bf16") out = DType::bfloat16;
  else return false;
  return true;
}

double Transport::timed_allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                                  ReduceOp op, int iters, Deadline /*deadline*/,
                                  const std::function<Deadline()>& op_deadline) {
  iters = std::max(1, iters);
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) allreduce(send, recv, count, dtype, op, op_deadline());
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
}

void* Transport::allocate(std::size_t bytes) {
  // 64-byte alignment keeps the vectorised reductions on whole cache lines.
  void* p = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p) throw TransportError(ErrorKind::other, "out of host memory allocating " +
                                                     std::to_string(bytes) + " bytes");
  return p;
}

void Transport::release(void* buffer) { std::free(buffer); }

void Transport::copy_in(void* buffer, const void* host, std::size_t bytes) {
  std::memcpy(buffer, host, bytes);
}

void Transport::copy_out(void* host, const void* buffer, std::size_t bytes) {
  std::memcpy(host, buffer, bytes);
}

}  // namespace ncclsmoke::transports
