// An accumulator of 64 x N floats (a warpgroup's wgmma result) as the A fragments of a following
// register-A wgmma: P for O += P.V in the forward, P^T and dS^T for dV and dK in the backward.
#pragma once

#include "kernels/device_math.cuh"
#include "kernels/mma_fp8/mma_fp8_primitives.cuh"
#include "kernels/rtc_std.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// P as the A operand of O += P.V: k-step kk (keys 16kk..16kk+15) is the accumulator elements
// 8kk..8kk+7 paired in order, the same fragment layout, so no data moves between threads.
// E4M3 (k32 steps): fragment register j holds 4 keys of one row, the row g (j even) or g + 8 (j odd)
// of the accumulators and keys 16 (j / 2) + {2q, 2q + 1, 8 + 2q, 9 + 2q} of the step, in that order:
// accumulator elements 16kk + 8 (j / 2) + {0, 1, 4, 5} (+ 2 for odd j), no data moves between
// threads. The k-position 4q + i of each 16-key group thus holds key 2q + (i & 1) + 8 (i >> 1), the
// order transpose_v writes V^T's keys in.
template <typename T, int kBlockN>
constexpr int kPSteps = sizeof(T) == 1 ? kBlockN / 32 : kBlockN / 16;  // k-steps of O += P.V
template <typename T, int kBlockN>
__device__ __forceinline__ void to_fragments(const float (&s)[kBlockN / 2], uint32_t (&a)[kPSteps<T, kBlockN>][4]) {
  if constexpr (sizeof(T) == 1) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 32; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int b = 16 * kk + 8 * (j >> 1) + 2 * (j & 1);
        a[kk][j] = mma_fp8::pack_e4m3(s[b], s[b + 1], s[b + 4], s[b + 5]);
      }
  } else {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[kk][j] = pack2<T>(s[8 * kk + 2 * j], s[8 * kk + 2 * j + 1]);
  }
}

}  // namespace evosdpa::detail::wgmma_sm90
