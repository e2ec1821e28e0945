// The sm_89+ instructions of the FP8 family beyond mma_sm80's (whose cp.async and ldmatrix wrappers it
// uses): mma.sync m16n8k32 with E4M3 operands, the float -> E4M3 conversion, the byte permute.
#pragma once

#include "kernels/rtc_std.hpp"

namespace evosdpa::detail::mma_fp8 {

// c[16x8] += a[16x32] * b[32x8], E4M3 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_16x8x32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four floats to E4M3 (round to nearest even, saturating to +-448), x0 in the lowest byte.
__device__ __forceinline__ uint32_t pack_e4m3(float x0, float x1, float x2, float x3) {
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));  // the first source is the upper byte
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Bytes of {b, a} (a: 0-3, b: 4-7) picked by the selector's nibbles, lowest first.
template <uint32_t kSelector>
__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "n"(kSelector));
  return d;
}

}  // namespace evosdpa::detail::mma_fp8
