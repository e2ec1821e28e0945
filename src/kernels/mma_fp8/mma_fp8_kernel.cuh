// Fused attention forward with FP8 (E4M3) inputs on sm_89+ tensor cores: mma_sm80's scheme (one block
// per block_m query rows of one (batch, head), K/V tiles double-buffered by cp.async, online softmax in
// fp32 registers) with mma.sync m16n8k32 e4m3 for both GEMMs.
//
// Dequantisation: S = (Q8 K8^T) * q_descale * k_descale * scale, folded into the one log2-domain scale
// of the scores; O = (P8 V8) * v_descale / l at the end.
// P for the P.V GEMM is 2^(S - m + 8) (at most 256, inside E4M3's 448) rounded to E4M3; the row sums l
// come from the unrounded fp32 P (the accuracy contract's FP8 baseline, src/host/cpu_reference.hpp).
//
// Fragments (q = lane % 4, g = lane / 4; docs/fp8-design.md):
// - Q (A) and K (B) load with plain ldmatrix: an 8x8 b16 matrix is 8 rows of 16 bytes, which gives
//   thread t the 4 bytes of row t/4 at byte 4(t%4), the E4M3 fragment's layout.
// - P (A of P.V) stays in the thread: a 32-key step's keys are taken in the order the S accumulators
//   hold them (register k 4q..4q+3 = keys 2q, 2q+1, 8+2q, 9+2q; k + 16 = those keys + 16).
// - V (B of P.V) in that key order: ldmatrix.trans of keys 0-7, 8-15, 16-23, 24-31 of a 16-column
//   chunk gives (columns 2g, 2g+1) x (keys 2q, 2q+1) per matrix; two byte permutes per register pair
//   make the 4-key groups of column 2g (0x6420) and of column 2g+1 (0x7531). Each 16-column chunk so
//   takes two mmas, its even and its odd columns, and thread t ends up holding columns 4q..4q+3 of the
//   chunk: even mma c0, odd c0, even c1, odd c1 (rows g; c2, c3: rows g + 8).
//
// Shared-memory rows are D bytes in 16-byte chunks, swizzled as mma_sm80's (mma_tiles.cuh), whose tile
// copies, online softmax and block order this kernel shares.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/rtc_std.hpp"

#include "kernels/device_math.cuh"
#include "kernels/kernel_params.hpp"
#include "kernels/mma/mma_primitives.cuh"
#include "kernels/mma/mma_softmax.cuh"
#include "kernels/mma/mma_tiles.cuh"
#include "kernels/mma_fp8/mma_fp8_config.hpp"
#include "kernels/mma_fp8/mma_fp8_primitives.cuh"

namespace evosdpa::detail::mma_fp8 {

using mma_sm80::cp_async_16;
using mma_sm80::cp_async_commit;
using mma_sm80::cp_async_wait;
using mma_sm80::ldmatrix_x4;
using mma_sm80::ldmatrix_x4_trans;
using mma_sm80::load_q_fragment;
using mma_sm80::load_tile;
using mma_sm80::rescale;
using mma_sm80::scale_and_mask;
using mma_sm80::swizzle;

// log2 of the largest P fed to the P.V GEMM (see the file comment).
constexpr int kLog2Offset = 8;

// S[MT][16 x BN] = Q K_tile^T (unscaled), fp32.
template <int D, int BN, int MT>
__device__ __forceinline__ void mma_qk(float (&s)[MT][BN / 8][4], const uint32_t (&q)[MT][D / 32][4], uint32_t sK,
                                       int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk)
#pragma unroll
    for (int nn = 0; nn < BN / 16; ++nn) {
      // Matrices: keys +0..7 chunk 2kk, keys +0..7 chunk 2kk+1, keys +8..15 chunk 2kk, keys +8..15 2kk+1.
      const int key = nn * 16 + (lane & 7) + (lane >> 4) * 8;
      uint32_t b[4];
      ldmatrix_x4(b, sK + swizzle<D / 16>(key, 2 * kk + ((lane >> 3) & 1)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16x8x32(s[mt][2 * nn], q[mt][kk], b[0], b[1]);
        mma_16x8x32(s[mt][2 * nn + 1], q[mt][kk], b[2], b[3]);
      }
    }
}

// O[MT][16 x D] += P8[MT][16 x BN] V8_tile[BN x D] (see the file comment for both fragment orders).
template <int D, int BN, int MT>
__device__ __forceinline__ void mma_pv(float (&o)[MT][D / 8][4], const float (&p)[MT][BN / 8][4], uint32_t sV,
                                       int lane) {
#pragma unroll
  for (int kk = 0; kk < BN / 32; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const float(&t)[BN / 8][4] = p[mt];
      a[mt][0] = pack_e4m3(t[4 * kk][0], t[4 * kk][1], t[4 * kk + 1][0], t[4 * kk + 1][1]);
      a[mt][1] = pack_e4m3(t[4 * kk][2], t[4 * kk][3], t[4 * kk + 1][2], t[4 * kk + 1][3]);
      a[mt][2] = pack_e4m3(t[4 * kk + 2][0], t[4 * kk + 2][1], t[4 * kk + 3][0], t[4 * kk + 3][1]);
      a[mt][3] = pack_e4m3(t[4 * kk + 2][2], t[4 * kk + 2][3], t[4 * kk + 3][2], t[4 * kk + 3][3]);
    }
#pragma unroll
    for (int dd = 0; dd < D / 16; ++dd) {
      uint32_t r[4];  // matrix i: keys 32kk + 8i .. + 7 of chunk dd, transposed
      ldmatrix_x4_trans(r, sV + swizzle<D / 16>(kk * 32 + lane, dd));
      const uint32_t even0 = byte_perm<0x6420>(r[0], r[1]), even1 = byte_perm<0x6420>(r[2], r[3]);
      const uint32_t odd0 = byte_perm<0x7531>(r[0], r[1]), odd1 = byte_perm<0x7531>(r[2], r[3]);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16x8x32(o[mt][2 * dd], a[mt], even0, even1);
        mma_16x8x32(o[mt][2 * dd + 1], a[mt], odd0, odd1);
      }
    }
  }
}

// O of one m-tile, times v_descale / l, written straight from the registers: per 16-column chunk and row
// the thread holds 4 consecutive columns (8 bytes); the log-sum-exp of the real scores. Rows past
// seqlen_q are not written.
template <typename TO, int D>
__device__ __forceinline__ void store_output(const float (&o)[D / 8][4], const float (&m)[2], float (&l)[2],
                                             float v_descale, const KernelParams& p, TO* o_tile, float* lse_rows,
                                             int q0, int row0, int lane) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + (lane >> 2) + 8 * r;
    if (q0 + row >= p.seqlen_q) continue;
    const float f = l[r] > 0.f ? v_descale / l[r] : 0.f;
    TO* out = o_tile + static_cast<int64_t>(row) * p.o_seq_stride + 4 * (lane & 3);
#pragma unroll
    for (int dd = 0; dd < D / 16; ++dd) {
      const float(&even)[4] = o[2 * dd];
      const float(&odd)[4] = o[2 * dd + 1];
      *reinterpret_cast<uint2*>(out + 16 * dd) =
          make_uint2(pack2<TO>(even[2 * r] * f, odd[2 * r] * f), pack2<TO>(even[2 * r + 1] * f, odd[2 * r + 1] * f));
    }
    if (lse_rows != nullptr && (lane & 3) == 0)
      lse_rows[q0 + row] = l[r] > 0.f ? (m[r] - kLog2Offset + __log2f(l[r])) * 0.69314718055994531f : -INFINITY;
  }
}

template <typename TO, int kIndex>
struct Kernel {
  static constexpr TileConfig kCfg = kConfigs[kIndex];
  static constexpr int kD = kCfg.head_dim, kThreads = kCfg.threads(), kBM = kCfg.block_m(), kBN = kCfg.block_n;
  static constexpr int kMT = kCfg.m_tiles, kWarpRows = kCfg.warp_rows();
};

// TO: O's element type (__half or __nv_bfloat16). The body is compiled for sm_89 and newer only (the
// family refuses older devices, whose builds get an empty kernel).
template <typename TO, int kIndex>
__global__ void __launch_bounds__(Kernel<TO, kIndex>::kThreads, Kernel<TO, kIndex>::kCfg.min_blocks_per_sm)
    attention_kernel(const KernelParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  using K = Kernel<TO, kIndex>;
  constexpr int D = K::kD, kBM = K::kBM, kBN = K::kBN, kMT = K::kMT, kThreads = K::kThreads;
  constexpr uint32_t kKVTileBytes = kBN * D;

  extern __shared__ __align__(128) char smem[];
  const uint32_t sQ = smem_addr(smem);
  const uint32_t sK0 = sQ + kBM * D;
  const uint32_t sV0 = sK0 + 2 * kKVTileBytes;

  const mma_sm80::BlockCoords bc = mma_sm80::block_coords(p, kBM);
  const int q0 = bc.q_block * kBM;
  const int h_kv = bc.h / p.kv_group;
  const int tid = threadIdx.x, lane = tid % 32, warp_row0 = (tid / 32) * K::kWarpRows;

  const int64_t at = bc.b * p.descale_batch_stride + h_kv * p.descale_head_stride;
  const float qk_scale = p.scale_log2 * p.q_descale[at] * p.k_descale[at];
  const float v_descale = p.v_descale[at];

  const uint8_t* q_tile = static_cast<const uint8_t*>(p.q) + bc.b * p.q_batch_stride + bc.h * p.q_head_stride +
                          static_cast<int64_t>(q0) * p.q_seq_stride;
  const uint8_t* k_head = static_cast<const uint8_t*>(p.k) + bc.b * p.k_batch_stride + h_kv * p.k_head_stride;
  const uint8_t* v_head = static_cast<const uint8_t*>(p.v) + bc.b * p.v_batch_stride + h_kv * p.v_head_stride;

  int kv_end = p.seqlen_k;
  if (p.causal) kv_end = max(0, min(kv_end, min(q0 + kBM, p.seqlen_q) - 1 + p.causal_offset + 1));
  const int num_kv_tiles = (kv_end + kBN - 1) / kBN;

  float o[kMT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

  const auto load_kv = [&](const uint8_t* head, int64_t stride, uint32_t buffer, int tile) {
    load_tile<kBN, D, kThreads>(buffer + (tile & 1) * kKVTileBytes, head + static_cast<int64_t>(tile) * kBN * stride,
                                stride, p.seqlen_k - tile * kBN, tid);
  };

  if (num_kv_tiles > 0) {
    // Copy groups: {Q, K0}, {V0}, then one {K(j+1), V(j+1)} per tile; one barrier per tile (mma_sm80's).
    load_tile<kBM, D, kThreads>(sQ, q_tile, p.q_seq_stride, p.seqlen_q - q0, tid);
    load_kv(k_head, p.k_seq_stride, sK0, 0);
    cp_async_commit();
    load_kv(v_head, p.v_seq_stride, sV0, 0);
    cp_async_commit();

    cp_async_wait<1>();
    __syncthreads();  // Q and K0 visible
    uint32_t q_frag[kMT][D / 32][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk) load_q_fragment<D / 16>(q_frag[mt][kk], sQ, warp_row0 + 16 * mt, lane, kk);

    for (int j = 0; j < num_kv_tiles; ++j) {
      const int key0 = j * kBN;
      cp_async_wait<0>();
      __syncthreads();  // tile j visible; every warp is past tile j-1, whose buffers take tile j+1
      if (j + 1 < num_kv_tiles) {
        load_kv(k_head, p.k_seq_stride, sK0, j + 1);
        load_kv(v_head, p.v_seq_stride, sV0, j + 1);
      }
      cp_async_commit();

      float s[kMT][kBN / 8][4];
      mma_qk<D, kBN, kMT>(s, q_frag, sK0 + (j & 1) * kKVTileBytes, lane);
      const bool needs_mask = key0 + kBN > p.seqlen_k || (p.causal && key0 + kBN - 1 > q0 + p.causal_offset);
      const auto scale = [qk_scale] { return qk_scale; };
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const int row0 = q0 + warp_row0 + 16 * mt;
        if (needs_mask)
          scale_and_mask<kBN, true>(s[mt], p, scale, row0, key0, lane);
        else
          scale_and_mask<kBN, false>(s[mt], p, scale, row0, key0, lane);
        rescale<kBN, D, kLog2Offset>(s[mt], o[mt], m[mt], l[mt]);
      }
      mma_pv<D, kBN, kMT>(o, s, sV0 + (j & 1) * kKVTileBytes, lane);
    }
    cp_async_wait<0>();
  }

  TO* o_tile = static_cast<TO*>(p.o) + bc.b * p.o_batch_stride + bc.h * p.o_head_stride +
               static_cast<int64_t>(q0) * p.o_seq_stride;
  float* lse_rows =
      p.lse != nullptr ? p.lse + (static_cast<int64_t>(bc.b) * p.heads_q + bc.h) * p.seqlen_q : nullptr;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
    store_output<TO, D>(o[mt], m[mt], l[mt], v_descale, p, o_tile, lse_rows, q0, warp_row0 + 16 * mt, lane);
#endif
}

}  // namespace evosdpa::detail::mma_fp8
