// The warp-level GEMMs of mma_sm80's backward pass, on the forward's swizzled tiles (mma_tiles.cuh).
// Each warp owns 16 rows of an A operand; accumulators are in the mma.sync m16n8k16 C layout (thread
// element (n, e): row lane/4 + 8 (e >= 2), column 8n + 2 (lane % 4) + (e & 1)).
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/mma/mma_kernel.cuh"

namespace evosdpa::detail::mma_sm80 {

// C[16 x N] = A[16 rows from a_row0 of tile sA] . B[N rows of tile sB]^T, both tiles [rows][D]: S = Q K^T
// and its kin (S^T = K Q^T, dP = dO V^T, dP^T = V dO^T). The forward's Q.K^T with A read from shared memory.
template <typename T, int D, int N>
__device__ __forceinline__ void gemm_abt(float (&c)[N / 8][4], uint32_t sA, int a_row0, uint32_t sB, int lane) {
  const uint32_t unused[1][D / 16][4] = {};  // A fragments in registers: not used with kQInRegs = false
  mma_qk<T, D, N, 1, false>(reinterpret_cast<float(&)[1][N / 8][4]>(c), unused, sA, sB, a_row0, lane);
}

// C[16 x D] += A[16 x K] . B[K rows of tile sB][D], A from accumulator registers (rounded to T): dV += P^T dO,
// dK += dS^T Q, dQ += dS K. The forward's P.V.
template <typename T, int D, int K>
__device__ __forceinline__ void gemm_rab(float (&c)[D / 8][4], const float (&a)[K / 8][4], uint32_t sB, int lane) {
  mma_pv<T, D, K, 1>(reinterpret_cast<float(&)[1][D / 8][4]>(c), reinterpret_cast<const float(&)[1][K / 8][4]>(a),
                     sB, lane);
}

}  // namespace evosdpa::detail::mma_sm80
