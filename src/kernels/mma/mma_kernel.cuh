// Fused attention forward on sm_80+ tensor cores (FlashAttention-2 scheme).
//
// One block computes `block_m` query rows of one (batch, head). Each warp owns 16 * m_tiles of those
// rows and streams every K/V tile past them: S = Q K^T (mma.sync), online softmax on S in fp32 registers
// (running row max m and row sum l), O += P V with P taken straight from the S accumulators. O is
// divided by l once at the end. K and V tiles are double-buffered in shared memory by cp.async, so the
// copies for the next tile overlap the math on this one, with one barrier per tile.
//
// Shared-memory tiles hold rows of D 16-bit elements in swizzled 16-byte chunks (mma_tiles.cuh), so
// ldmatrix, cp.async and the O staging stores are free of bank conflicts without padding.
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/kernel_params.hpp"
#include "kernels/mma/mma_config.hpp"
#include "kernels/mma/mma_mask.cuh"
#include "kernels/mma/mma_primitives.cuh"
#include "kernels/mma/mma_softmax.cuh"
#include "kernels/mma/mma_tiles.cuh"
#include "kernels/score_mods.cuh"
#include "kernels/sequence.cuh"

namespace evosdpa::detail::mma_sm80 {

// S[MT][16 x BN] = Q[MT][16 x D] K_tile^T for this warp's rows, fp32. Each K fragment feeds MT mmas.
template <typename T, int D, int BN, int MT, bool kQInRegs>
__device__ __forceinline__ void mma_qk(float (&s)[MT][BN / 8][4], const uint32_t (&q_frag)[MT][D / 16][4],
                                       uint32_t sQ, uint32_t sK, int warp_row0, int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
  // With Q in shared memory nothing in this loop indexes a register array by kk, so it is not unrolled;
  // unrolling it let ptxas hoist the loads of every k-step and spill.
#pragma unroll(kQInRegs ? D / 16 : 1)
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (kQInRegs) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[mt][i] = q_frag[mt][kk][i];
      } else {
        load_q_fragment<D / 8>(a[mt], sQ, warp_row0 + 16 * mt, lane, kk);
      }
    }
#pragma unroll
    for (int nn = 0; nn < BN / 16; ++nn) {
      // Matrices: keys +0..7 dims lo, keys +0..7 dims hi, keys +8..15 dims lo, keys +8..15 dims hi.
      const int key = nn * 16 + (lane & 7) + (lane >> 4) * 8;
      const int chunk = 2 * kk + ((lane >> 3) & 1);
      uint32_t b[4];
      ldmatrix_x4(b, sK + swizzle<D / 8>(key, chunk));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16x8x16<T>(s[mt][2 * nn], a[mt], b[0], b[1]);
        mma_16x8x16<T>(s[mt][2 * nn + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// O[MT][16 x D] += P[MT][16 x BN] V_tile[BN x D]; P is the softmax numerator left in the S registers,
// whose accumulator layout is exactly the A-operand layout of the next mma once packed to 16 bits.
template <typename T, int D, int BN, int MT>
__device__ __forceinline__ void mma_pv(float (&o)[MT][D / 8][4], const float (&p)[MT][BN / 8][4], uint32_t sV,
                                       int lane) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      a[mt][0] = pack2<T>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
      a[mt][1] = pack2<T>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
      a[mt][2] = pack2<T>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
      a[mt][3] = pack2<T>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dd = 0; dd < D / 16; ++dd) {
      // Transposed matrices: keys +0..7 dims lo, keys +8..15 dims lo, keys +0..7 dims hi, keys +8..15 hi.
      const int key = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      const int chunk = 2 * dd + (lane >> 4);
      uint32_t b[4];
      ldmatrix_x4_trans(b, sV + swizzle<D / 8>(key, chunk));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16x8x16<T>(o[mt][2 * dd], a[mt], b[0], b[1]);
        mma_16x8x16<T>(o[mt][2 * dd + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Normalise one m-tile of O by its row sums, stage it through the same rows of the (now unused) Q tile,
// and write it with 16-byte coalesced stores; write the log-sum-exp. Rows past seqlen_q are not written.
template <typename T, int D>
__device__ __forceinline__ void store_output(float (&o)[D / 8][4], const float (&m)[2], float (&l)[2],
                                             char* smem_q, const KernelParams& p, T* o_tile, float* lse_rows,
                                             int q0, int row0, int lane) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const float inv[2] = {l[0] > 0.f ? 1.f / l[0] : 0.f, l[1] > 0.f ? 1.f / l[1] : 0.f};

  __syncwarp();  // every lane of this warp is done reading these Q rows
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + (lane >> 2) + r * 8;
      const uint32_t off = swizzle<kChunks>(row, n) + 4 * (lane & 3);
      *reinterpret_cast<uint32_t*>(smem_q + off) = pack2<T>(o[n][2 * r] * inv[r], o[n][2 * r + 1] * inv[r]);
    }
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < 16 * kChunks / 32; ++i) {
    const int c = lane + i * 32;
    const int row = c / kChunks;
    const int chunk = c % kChunks;
    if (q0 + row0 + row < p.seqlen_q) {
      const uint4 v = *reinterpret_cast<const uint4*>(smem_q + swizzle<kChunks>(row0 + row, chunk));
      *reinterpret_cast<uint4*>(o_tile + (row0 + row) * p.o_seq_stride + chunk * 8) = v;
    }
  }
  if (lse_rows != nullptr && (lane & 3) == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = q0 + row0 + (lane >> 2) + r * 8;
      if (row < p.seqlen_q)
        lse_rows[row] = l[r] > 0.f ? m[r] * 0.69314718055994531f + __logf(l[r]) : -INFINITY;
    }
  }
}

// Compile-time view of one kConfigs row.
template <typename T, int kIndex>
struct Kernel {
  static_assert(sizeof(T) == kElemBytes, "the kernel body handles 16-bit elements only");
  static constexpr TileConfig kCfg = kConfigs[kIndex];
  static constexpr int kD = kCfg.head_dim;
  static constexpr int kThreads = kCfg.threads();
  static constexpr int kBM = kCfg.block_m();
  static constexpr int kBN = kCfg.block_n;
  static constexpr int kMT = kCfg.m_tiles;
  static constexpr int kWarpRows = kCfg.warp_rows();
  static constexpr bool kQInRegs = kCfg.q_in_registers;
};

// Mods: the score modifiers (score_mods.cuh: a sliding window, a softcap, ALiBi, a mask tensor),
// compile-time features; NoMods compiles none of their code.
template <typename T, int kIndex, typename Mods = NoMods>
__global__ void __launch_bounds__(Kernel<T, kIndex>::kThreads, Kernel<T, kIndex>::kCfg.min_blocks_per_sm)
    attention_kernel(const KernelParams params) {
  using K = Kernel<T, kIndex>;
  constexpr int D = K::kD;
  constexpr int kBM = K::kBM;
  constexpr int kBN = K::kBN;
  constexpr int kMT = K::kMT;
  constexpr int kThreads = K::kThreads;

  extern __shared__ __align__(128) char smem[];
  const uint32_t sQ = smem_addr(smem);
  const uint32_t sK0 = sQ + kBM * D * 2;
  const uint32_t sV0 = sK0 + 2 * kBN * D * 2;
  constexpr uint32_t kKVTileBytes = kBN * D * 2;

  const BlockCoords bc = block_coords(params, kBM);
  const int q0 = bc.q_block * kBM;
  // The block's sequence (sequence.cuh): the rest of the kernel sees its queries, keys and diagonal as
  // seqlen_q, seqlen_k and causal_offset. Blocks past a shorter sequence's end (packed batches, whose grid
  // follows the longest) have no row to compute.
  const Sequence seq = sequence_of(params, bc.b);
  if (q0 >= seq.len_q) return;
  KernelParams p = params;
  p.seqlen_q = seq.len_q;
  p.seqlen_k = seq.len_k;
  p.causal_offset = seq.causal_offset;
  const int h_kv = bc.h / p.kv_group;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int warp_row0 = warp * K::kWarpRows;

  const T* q_tile = static_cast<const T*>(p.q) + bc.b * p.q_batch_stride + bc.h * p.q_head_stride +
                    (static_cast<int64_t>(seq.q_start) + q0) * p.q_seq_stride;
  const T* k_head = static_cast<const T*>(p.k) + bc.b * p.k_batch_stride + h_kv * p.k_head_stride +
                    static_cast<int64_t>(seq.k_start) * p.k_seq_stride;
  const T* v_head = static_cast<const T*>(p.v) + bc.b * p.v_batch_stride + h_kv * p.v_head_stride +
                    static_cast<int64_t>(seq.k_start) * p.v_seq_stride;

  // Keys this block can see: all of them, or up to the causal diagonal of its last valid row; with a
  // window, from its first row's first key to its last row's last (tiles outside are never loaded).
  int kv_end = p.seqlen_k, first_tile = 0;
  if constexpr (Mods::kWindow) {
    const int last_row = min(q0 + kBM, p.seqlen_q) - 1;
    kv_end = max(0, last_key<Mods>(p, p.seqlen_k, last_row + p.causal_offset) + 1);
    first_tile = first_key<Mods>(p, q0 + p.causal_offset) / kBN;
  } else if (p.causal) {
    const int last_row = min(q0 + kBM, p.seqlen_q) - 1;
    kv_end = max(0, min(kv_end, last_row + p.causal_offset + 1));
  }
  const int num_kv_tiles = (kv_end + kBN - 1) / kBN;
  // ALiBi's slope for the block's head, in the log2 domain (0 without).
  const float alibi_log2 =
      Mods::kAlibi ? -p.alibi_slopes[bc.b * p.alibi_batch_stride + bc.h] * 1.4426950408889634f : 0.f;

  float o[kMT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

  auto load_k = [&](int tile) {
    load_tile<kBN, D, kThreads>(sK0 + (tile & 1) * kKVTileBytes,
                                k_head + static_cast<int64_t>(tile) * kBN * p.k_seq_stride, p.k_seq_stride,
                                p.seqlen_k - tile * kBN, tid);
  };
  auto load_v = [&](int tile) {
    load_tile<kBN, D, kThreads>(sV0 + (tile & 1) * kKVTileBytes,
                                v_head + static_cast<int64_t>(tile) * kBN * p.v_seq_stride, p.v_seq_stride,
                                p.seqlen_k - tile * kBN, tid);
  };

  if (first_tile < num_kv_tiles) {
    // Copy groups, in order: {Q, K0}, {V0}, then one {K(j+1), V(j+1)} per tile (empty past the end). At
    // the top of iteration j the newest group holds tile j, so "wait for all" is exactly what the tile
    // needs, and the copies issued next have a whole tile of math to land behind. One barrier per tile.
    load_tile<kBM, D, kThreads>(sQ, q_tile, p.q_seq_stride, p.seqlen_q - q0, tid);
    load_k(first_tile);
    cp_async_commit();
    load_v(first_tile);
    cp_async_commit();

    uint32_t q_frag[kMT][D / 16][4];
    if constexpr (K::kQInRegs) {
      cp_async_wait<1>();
      __syncthreads();  // Q and K0 visible
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) load_q_fragment<D / 8>(q_frag[mt][kk], sQ, warp_row0 + 16 * mt, lane, kk);
    }

    for (int j = first_tile; j < num_kv_tiles; ++j) {
      const int key0 = j * kBN;
      cp_async_wait<0>();
      // Tile j's K and V visible to all; every warp is past tile j-1, so its buffers are free for the
      // copies of tile j+1.
      __syncthreads();
      if (j + 1 < num_kv_tiles) {
        load_k(j + 1);
        load_v(j + 1);
      }
      cp_async_commit();

      // A mask tensor's elements of the tile, read before Q.K^T (their latency under the mma).
      MaskFragment<T, kBN, Mods::kMask> tensor[kMT];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) tensor[mt].load(p, bc.b, bc.h, q0 + warp_row0 + 16 * mt, key0, lane);
      float s[kMT][kBN / 8][4];
      mma_qk<T, D, kBN, kMT, K::kQInRegs>(s, q_frag, sQ, sK0 + (j & 1) * kKVTileBytes, warp_row0, lane);

      // Decided per block, not per warp: the condition stays in uniform registers (a per-warp row bound
      // was one register too many at 255 and spilled); warps wholly below the diagonal of a diagonal
      // tile just mask nothing.
      bool needs_mask = key0 + kBN > p.seqlen_k || (p.causal && key0 + kBN - 1 > q0 + p.causal_offset);
      if constexpr (Mods::kWindow)  // a window edge crosses the tile for some row of the block
        needs_mask = needs_mask || key0 + kBN - 1 > q0 + p.causal_offset + p.window_right ||
                     key0 < q0 + kBM - 1 + p.causal_offset - p.window_left;
      const auto scale = [&p] { return p.scale_log2; };
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const int row0 = q0 + warp_row0 + 16 * mt;
        if constexpr (Mods::kWindow || Mods::kSoftcap || Mods::kAlibi || Mods::kMask != MaskKind::kNone) {
          if (needs_mask)
            scale_and_mask_mods<kBN, true, Mods>(s[mt], p, alibi_log2, tensor[mt], row0, key0, lane);
          else
            scale_and_mask_mods<kBN, false, Mods>(s[mt], p, alibi_log2, tensor[mt], row0, key0, lane);
        } else if (needs_mask) {
          scale_and_mask<kBN, true>(s[mt], p, scale, row0, key0, lane);
        } else {
          scale_and_mask<kBN, false>(s[mt], p, scale, row0, key0, lane);
        }
        rescale<kBN, D, 0>(s[mt], o[mt], m[mt], l[mt]);
      }
      mma_pv<T, D, kBN, kMT>(o, s, sV0 + (j & 1) * kKVTileBytes, lane);
    }
    cp_async_wait<0>();
  }
  __syncthreads();  // Q tile reads (and any in-flight copies into it) are over before it stages O
  // Output addresses are derived here, not before the K/V loop: kept live across it they were spilled.
  const BlockCoords out = block_coords(params, kBM);
  const int64_t out_start = sequence_of(params, out.b).q_start;
  T* o_tile = static_cast<T*>(p.o) + out.b * p.o_batch_stride + out.h * p.o_head_stride +
              (out_start + static_cast<int64_t>(out.q_block) * kBM) * p.o_seq_stride;
  float* lse_rows =
      p.lse != nullptr ? p.lse + out.b * p.lse_batch_stride + out.h * p.lse_head_stride + out_start : nullptr;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
    store_output<T, D>(o[mt], m[mt], l[mt], smem, p, o_tile, lse_rows, out.q_block * kBM,
                       (threadIdx.x / 32) * K::kWarpRows + 16 * mt, threadIdx.x % 32);
}

}  // namespace evosdpa::detail::mma_sm80
