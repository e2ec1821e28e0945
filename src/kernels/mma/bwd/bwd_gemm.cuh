// The warp-level GEMMs of mma_sm80's backward pass, on the forward's swizzled tiles (mma_tiles.cuh):
// each warp owns a rectangle of a product. Accumulators are in the mma.sync m16n8k16 C layout (thread
// element (n, e): row lane/4 + 8 (e >= 2), column 8n + 2 (lane % 4) + (e & 1)).
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/mma/mma_primitives.cuh"
#include "kernels/mma/mma_tiles.cuh"

namespace evosdpa::detail::mma_sm80 {

// Operands from swizzled shared tiles of 16-bit elements with kChunks 16-byte chunks per row, for the
// dK/dV kernel's warp rectangles. A (M x K) fragment of the 16 rows from m0, k-step at k0: kTrans false
// reads a tile stored [m][k], true one stored [k][m] (P and dS read as P^T and dS^T).
template <int kChunks, bool kTrans>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], uint32_t tile, int m0, int k0, int lane) {
  if constexpr (!kTrans)
    ldmatrix_x4(a, tile + swizzle<kChunks>(m0 + (lane & 7) + ((lane >> 3) & 1) * 8, k0 / 8 + (lane >> 4)));
  else
    ldmatrix_x4_trans(a, tile + swizzle<kChunks>(k0 + (lane & 7) + ((lane >> 4) & 1) * 8, m0 / 8 + ((lane >> 3) & 1)));
}

// B (K x N) fragments of the 16 columns from n0 (two n-tiles: b[0], b[1] and b[2], b[3]), k-step at k0:
// kTrans false reads a tile stored [n][k] (K and V for S and dP), true one stored [k][n].
template <int kChunks, bool kTrans>
__device__ __forceinline__ void load_b(uint32_t (&b)[4], uint32_t tile, int n0, int k0, int lane) {
  if constexpr (!kTrans)
    ldmatrix_x4(b, tile + swizzle<kChunks>(n0 + (lane & 7) + (lane >> 4) * 8, k0 / 8 + ((lane >> 3) & 1)));
  else
    ldmatrix_x4_trans(b, tile + swizzle<kChunks>(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 / 8 + (lane >> 4)));
}

// How a warp GEMM reads its operands: chunks per row and orientation of A's and B's tiles.
template <int kAChunks, bool kATrans, int kBChunks, bool kBTrans>
struct Operands {
  static constexpr int kAC = kAChunks, kBC = kBChunks;
  static constexpr bool kAT = kATrans, kBT = kBTrans;
};

// C1 += A1 B1 and C2 += A2 B2 over K, on the warp's rectangle of MT 16-row m-tiles from m0 by NT
// 8-column n-tiles from n0, both products reading their tiles the same way (Ops). Two independent
// products in one loop keep twice the mma chains in flight (v10.2: the "wait" stall halved). Each
// B fragment feeds MT mma: the rectangle's height is what brings shared-memory reads per mma down.
// kUnroll: k-steps unrolled (the config's sdp_unroll, kv_unroll).
template <typename T, typename Ops, int MT, int NT, int K, int kUnroll>
__device__ __forceinline__ void warp_gemm_pair(float (&c1)[MT][NT][4], uint32_t a1, uint32_t b1, float (&c2)[MT][NT][4],
                                               uint32_t a2, uint32_t b2, int m0, int n0, int lane) {
  static_assert(NT % 2 == 0 && K % 16 == 0, "n-tiles in pairs, whole k-steps");
#pragma unroll kUnroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t fa1[MT][4], fa2[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      load_a<Ops::kAC, Ops::kAT>(fa1[mt], a1, m0 + 16 * mt, k0, lane);
      load_a<Ops::kAC, Ops::kAT>(fa2[mt], a2, m0 + 16 * mt, k0, lane);
    }
#pragma unroll
    for (int nn = 0; nn < NT / 2; ++nn) {
      uint32_t fb1[4], fb2[4];
      load_b<Ops::kBC, Ops::kBT>(fb1, b1, n0 + 16 * nn, k0, lane);
      load_b<Ops::kBC, Ops::kBT>(fb2, b2, n0 + 16 * nn, k0, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16x8x16<T>(c1[mt][2 * nn], fa1[mt], fb1[0], fb1[1]);
        mma_16x8x16<T>(c2[mt][2 * nn], fa2[mt], fb2[0], fb2[1]);
        mma_16x8x16<T>(c1[mt][2 * nn + 1], fa1[mt], fb1[2], fb1[3]);
        mma_16x8x16<T>(c2[mt][2 * nn + 1], fa2[mt], fb2[2], fb2[3]);
      }
    }
  }
}

// C += A B alone (dQ += dS K). kUnroll: k-steps unrolled (the config's dq_unroll).
template <typename T, typename Ops, int MT, int NT, int K, int kUnroll>
__device__ __forceinline__ void warp_gemm(float (&c)[MT][NT][4], uint32_t a, uint32_t b, int m0, int n0, int lane) {
  static_assert(NT % 2 == 0 && K % 16 == 0, "n-tiles in pairs, whole k-steps");
#pragma unroll kUnroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t fa[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) load_a<Ops::kAC, Ops::kAT>(fa[mt], a, m0 + 16 * mt, k0, lane);
#pragma unroll
    for (int nn = 0; nn < NT / 2; ++nn) {
      uint32_t fb[4];
      load_b<Ops::kBC, Ops::kBT>(fb, b, n0 + 16 * nn, k0, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16x8x16<T>(c[mt][2 * nn], fa[mt], fb[0], fb[1]);
        mma_16x8x16<T>(c[mt][2 * nn + 1], fa[mt], fb[2], fb[3]);
      }
    }
  }
}

}  // namespace evosdpa::detail::mma_sm80
