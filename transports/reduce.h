#pragma once
// Element-wise sum kernels shared by the host backends (socket ring, fabric ring). Written so the
// compiler vectorises them (restrict pointers, simple loops; bfloat16 widened to float32, summed,
// rounded to nearest-even), and benchmarked in bench/.
#include <cstddef>
#include <cstdint>

#include "transports/transport.h"

namespace ncclsmoke::transports {

// dst[i] += src[i] for `count` elements of `dtype`.
void reduce_sum(void* dst, const void* src, std::size_t count, DType dtype);

// bfloat16 <-> float32 (round to nearest even; NaN stays NaN).
float bf16_to_float(uint16_t v);
uint16_t float_to_bf16(float f);

}  // namespace ncclsmoke::transports
