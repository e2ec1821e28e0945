// The warp-level GEMMs of mma_sm80's backward pass, on the forward's swizzled tiles (mma_tiles.cuh).
// Each warp owns 16 rows of an A operand; accumulators are in the mma.sync m16n8k16 C layout (thread
// element (n, e): row lane/4 + 8 (e >= 2), column 8n + 2 (lane % 4) + (e & 1)).
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/mma/mma_kernel.cuh"

namespace evosdpa::detail::mma_sm80 {

// C[16 x D] += A[16 x K] . B[K rows of tile sB][D], A from accumulator registers (rounded to T): dV += P^T dO,
// dK += dS^T Q, dQ += dS K. The forward's P.V.
template <typename T, int D, int K>
__device__ __forceinline__ void gemm_rab(float (&c)[D / 8][4], const float (&a)[K / 8][4], uint32_t sB, int lane) {
  mma_pv<T, D, K, 1>(reinterpret_cast<float(&)[1][D / 8][4]>(c), reinterpret_cast<const float(&)[1][K / 8][4]>(a),
                     sB, lane);
}

// C1[16 x N] = A1 B1^T and C2[16 x N] = A2 B2^T in one loop over D: A rows a_row0 .. a_row0 + 15 of
// tiles sA1 and sA2, B the N rows of tiles sB1 and sB2, all tiles [rows][D]: S^T = K Q^T with
// dP^T = V dO^T, or S = Q K^T with dP = dO V^T. Interleaved, their mma chains hide each other's latency: alone, each warp's
// accumulator chains stalled on the previous mma ("wait", 2 cycles per issue; ncu, H100, D = 128).
template <typename T, int D, int N>
__device__ __forceinline__ void gemm_abt_pair(float (&c1)[N / 8][4], uint32_t sA1, uint32_t sB1, float (&c2)[N / 8][4],
                                              uint32_t sA2, uint32_t sB2, int a_row0, int lane) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) c1[n][e] = c2[n][e] = 0.f;
#pragma unroll 1
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a1[4], a2[4];
    load_q_fragment<D / 8>(a1, sA1, a_row0, lane, kk);
    load_q_fragment<D / 8>(a2, sA2, a_row0, lane, kk);
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      // Matrices: rows +0..7 dims lo, rows +0..7 dims hi, rows +8..15 dims lo, rows +8..15 dims hi.
      const uint32_t at = swizzle<D / 8>(nn * 16 + (lane & 7) + (lane >> 4) * 8, 2 * kk + ((lane >> 3) & 1));
      uint32_t b1[4], b2[4];
      ldmatrix_x4(b1, sB1 + at);
      ldmatrix_x4(b2, sB2 + at);
      mma_16x8x16<T>(c1[2 * nn], a1, b1[0], b1[1]);
      mma_16x8x16<T>(c2[2 * nn], a2, b2[0], b2[1]);
      mma_16x8x16<T>(c1[2 * nn + 1], a1, b1[2], b1[3]);
      mma_16x8x16<T>(c2[2 * nn + 1], a2, b2[2], b2[3]);
    }
  }
}

// Two independent gemm_rab in one loop, dV += P^T dO and dK += dS^T Q, for the same reason.
template <typename T, int D, int K>
__device__ __forceinline__ void gemm_rab_pair(float (&c1)[D / 8][4], const float (&a1)[K / 8][4], uint32_t sB1,
                                              float (&c2)[D / 8][4], const float (&a2)[K / 8][4], uint32_t sB2,
                                              int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t f1[4], f2[4];
    f1[0] = pack2<T>(a1[2 * kk][0], a1[2 * kk][1]);
    f1[1] = pack2<T>(a1[2 * kk][2], a1[2 * kk][3]);
    f1[2] = pack2<T>(a1[2 * kk + 1][0], a1[2 * kk + 1][1]);
    f1[3] = pack2<T>(a1[2 * kk + 1][2], a1[2 * kk + 1][3]);
    f2[0] = pack2<T>(a2[2 * kk][0], a2[2 * kk][1]);
    f2[1] = pack2<T>(a2[2 * kk][2], a2[2 * kk][3]);
    f2[2] = pack2<T>(a2[2 * kk + 1][0], a2[2 * kk + 1][1]);
    f2[3] = pack2<T>(a2[2 * kk + 1][2], a2[2 * kk + 1][3]);
#pragma unroll
    for (int dd = 0; dd < D / 16; ++dd) {
      // Transposed matrices: rows +0..7 dims lo, rows +8..15 dims lo, rows +0..7 dims hi, rows +8..15 hi.
      const uint32_t at = swizzle<D / 8>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * dd + (lane >> 4));
      uint32_t b1[4], b2[4];
      ldmatrix_x4_trans(b1, sB1 + at);
      ldmatrix_x4_trans(b2, sB2 + at);
      mma_16x8x16<T>(c1[2 * dd], f1, b1[0], b1[1]);
      mma_16x8x16<T>(c2[2 * dd], f2, b2[0], b2[1]);
      mma_16x8x16<T>(c1[2 * dd + 1], f1, b1[2], b1[3]);
      mma_16x8x16<T>(c2[2 * dd + 1], f2, b2[2], b2[3]);
    }
  }
}

}  // namespace evosdpa::detail::mma_sm80
