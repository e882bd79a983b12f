#include "transports/reduce.h"

#include <cstring>

namespace ncclsmoke::transports {
namespace {

__attribute__((target_clones("avx512f", "avx2", "default")))
void sum_f32(float* __restrict dst, const float* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Widen, add, narrow. The integer form keeps the loop branch-free so it vectorises.
__attribute__((target_clones("avx512f", "avx2", "default")))
void sum_bf16(uint16_t* __restrict dst, const uint16_t* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t a = static_cast<uint32_t>(dst[i]) << 16, b = static_cast<uint32_t>(src[i]) << 16;
    float fa, fb;
    std::memcpy(&fa, &a, 4);
    std::memcpy(&fb, &b, 4);
    float s = fa + fb;
    uint32_t u;
    std::memcpy(&u, &s, 4);
    uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
    // NaN must stay NaN (rounding could carry it into infinity).
    uint32_t is_nan = ((u & 0x7F800000u) == 0x7F800000u) & ((u & 0x007FFFFFu) != 0);
    dst[i] = static_cast<uint16_t>(is_nan ? (u >> 16) | 0x40u : rounded >> 16);
  }
}

}  // namespace

void reduce_sum(void* dst, const void* src, std::size_t count, DType dtype) {
  switch (dtype) {
    case DType::float32:
      sum_f32(static_cast<float*>(dst), static_cast<const float*>(src), count);
      break;
    case DType::bfloat16:
      sum_bf16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count);
      break;
  }
}

float bf16_to_float(uint16_t v) {
  uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace ncclsmoke::transports
