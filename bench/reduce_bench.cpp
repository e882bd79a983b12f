// Google Benchmark of the element-wise sum kernels the host rings use (transports/reduce.h),
// next to a plain scalar loop the compiler is told not to vectorise, so the speedup of the
// shipped kernel is visible in one run: compare BM_reduce_sum/<dtype>/<bytes> with
// BM_scalar_sum/<dtype>/<bytes>. bytes/s counts message bytes (one `src` buffer) per call: each
// call reads 2x and writes 1x that many bytes. A check at start-up verifies both give the same
// result, so the comparison is between equivalent code.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transports/reduce.h"

namespace {

using ncclsmoke::transports::DType;
using ncclsmoke::transports::dtype_size;
using ncclsmoke::transports::reduce_sum;

// The baseline: the obvious loops, kept scalar (no auto-vectorisation, no target clones).
__attribute__((noinline, optimize("no-tree-vectorize", "no-tree-loop-vectorize",
                                  "no-tree-slp-vectorize")))
void scalar_sum_f32(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}

__attribute__((noinline, optimize("no-tree-vectorize", "no-tree-loop-vectorize",
                                  "no-tree-slp-vectorize")))
void scalar_sum_bf16(uint16_t* dst, const uint16_t* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t a = static_cast<uint32_t>(dst[i]) << 16, b = static_cast<uint32_t>(src[i]) << 16;
    float fa, fb;
    std::memcpy(&fa, &a, 4);
    std::memcpy(&fb, &b, 4);
    float s = fa + fb;
    uint32_t u;
    std::memcpy(&u, &s, 4);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) {
      dst[i] = static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN
    } else {
      dst[i] = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
  }
}

void scalar_sum(void* dst, const void* src, std::size_t count, DType dtype) {
  if (dtype == DType::float32) {
    scalar_sum_f32(static_cast<float*>(dst), static_cast<const float*>(src), count);
  } else {
    scalar_sum_bf16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count);
  }
}

// Inputs that stay finite and normal however many times they are added (no denormal slow path):
// float32 1.0 + 0.25*(i%4); bfloat16 the same values' bit patterns.
std::vector<unsigned char> make_buffer(std::size_t count, DType dtype, float scale) {
  std::vector<unsigned char> b(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    float v = scale * (1.0f + 0.25f * static_cast<float>(i % 4));
    if (dtype == DType::float32) {
      std::memcpy(b.data() + i * 4, &v, 4);
    } else {
      uint16_t h = ncclsmoke::transports::float_to_bf16(v);
      std::memcpy(b.data() + i * 2, &h, 2);
    }
  }
  return b;
}

template <void (*Sum)(void*, const void*, std::size_t, DType)>
void run(benchmark::State& state, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t count = bytes / dtype_size(dtype);
  auto dst = make_buffer(count, dtype, 1.0f);
  const auto src = make_buffer(count, dtype, 0.5f);
  for (auto _ : state) {
    Sum(dst.data(), src.data(), count, dtype);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void BM_reduce_sum_f32(benchmark::State& s) { run<reduce_sum>(s, DType::float32); }
void BM_scalar_sum_f32(benchmark::State& s) { run<scalar_sum>(s, DType::float32); }
void BM_reduce_sum_bf16(benchmark::State& s) { run<reduce_sum>(s, DType::bfloat16); }
void BM_scalar_sum_bf16(benchmark::State& s) { run<scalar_sum>(s, DType::bfloat16); }

#define SIZES Arg(4 << 10)->Arg(256 << 10)->Arg(4 << 20)
BENCHMARK(BM_reduce_sum_f32)->Name("BM_reduce_sum/float32")->SIZES;
BENCHMARK(BM_scalar_sum_f32)->Name("BM_scalar_sum/float32")->SIZES;
BENCHMARK(BM_reduce_sum_bf16)->Name("BM_reduce_sum/bfloat16")->SIZES;
BENCHMARK(BM_scalar_sum_bf16)->Name("BM_scalar_sum/bfloat16")->SIZES;

// Same inputs through both implementations, a few rounds (so rounding and saturation are
// exercised), then byte-compare: a baseline that computed something else would prove nothing.
bool same_results() {
  for (DType d : {DType::float32, DType::bfloat16}) {
    const std::size_t count = 4099;  // odd tail
    auto a = make_buffer(count, d, 1.0f), b = a;
    const auto src = make_buffer(count, d, 0.75f);
    for (int k = 0; k < 7; ++k) {
      reduce_sum(a.data(), src.data(), count, d);
      scalar_sum(b.data(), src.data(), count, d);
    }
    if (a != b) {
      std::fprintf(stderr, "reduce_bench: reduce_sum and the scalar loop differ for %s\n",
                   ncclsmoke::transports::to_string(d));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!same_results()) return 1;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
