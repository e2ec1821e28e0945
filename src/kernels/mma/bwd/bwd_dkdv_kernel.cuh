// mma_sm80's backward, dK and dV (FlashAttention-2's algorithm). One block owns block_n keys of one
// (batch, K/V head), 16 per warp, and streams past them every tile of tile_m queries that sees them, of every query
// head of the group (so grouped-query sums need no second pass), double-buffered by cp.async:
//   S^T = K Q^T,  P^T = exp2(S^T scale log2(e) - lse log2(e)),  dV += P^T dO,
//   dP^T = V dO^T,  dS^T = P^T (dP^T - D),  dK += dS^T Q,
// with dK and dV in fp32 registers for the whole loop, stored once (dK times the scale).
// kAtomicDq (FAST mode): the block also adds its share of dQ = dS K to the float32 sums in the workspace,
// through a dS^T tile in shared memory; otherwise bwd_dq_kernel.cuh computes dQ in a pass of its own.
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/backward_params.hpp"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_gemm.cuh"
#include "kernels/mma/bwd/bwd_workspace.hpp"
#include "kernels/mma/mma_tiles.cuh"

namespace evosdpa::detail::mma_sm80 {

inline constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory layout of the dK/dV kernel (bytes from the dynamic smem base).
template <int D, int TM, int BN>
struct DkdvSmem {
  static constexpr uint32_t kK = 0;
  static constexpr uint32_t kV = kK + BN * D * 2;
  static constexpr uint32_t kQ = kV + BN * D * 2;        // two buffers of TM x D
  static constexpr uint32_t kDo = kQ + 2 * TM * D * 2;   // two buffers of TM x D
  static constexpr uint32_t kDs = kDo + 2 * TM * D * 2;  // BN x TM, dS^T
  static constexpr uint32_t kLse = kDs + BN * TM * 2;    // two buffers of TM floats (log2 domain)
  static constexpr uint32_t kDelta = kLse + 2 * TM * 4;  // two buffers of TM floats
  static constexpr uint32_t kBytes = kDelta + 2 * TM * 4;
};

// Adds one 16 x 8 accumulator fragment (rows row0 .. row0 + 15 of the warp as `row`, columns col0 ..
// col0 + 7) to float32 sums of row length `ld`. On sm_90, lane pairs swap halves so that each lane holds
// four adjacent columns of one row and adds them with one red.global.add.v4.f32 (PTX 8.1, sm_90+): a
// quarter of the atomic operations, which dominated FAST mode (D = 128, L = 4096 on an H100: 5.6 ms
// against 4.2 ms for the DETERMINISTIC mode's two passes).
__device__ __forceinline__ void add_dq_fragment(float* sums, int ld, int valid_rows, int row, int col0,
                                                const float (&c)[4], int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Even lanes of a pair keep row `row` and take the odd lane's two columns of it; odd lanes keep row
  // `row + 8` and take the even lane's two columns of that row.
  const bool odd = lane & 1;
  const float send0 = odd ? c[0] : c[2], send1 = odd ? c[1] : c[3];
  const float got0 = __shfl_xor_sync(0xffffffffu, send0, 1), got1 = __shfl_xor_sync(0xffffffffu, send1, 1);
  const int r = row + (odd ? 8 : 0);
  const int col = col0 + 4 * ((lane & 3) >> 1);
  const float4 v = odd ? make_float4(got0, got1, c[2], c[3]) : make_float4(c[0], c[1], got0, got1);
  if (r < valid_rows)
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(sums + r * ld + col), "f"(v.x), "f"(v.y),
                 "f"(v.z), "f"(v.w)
                 : "memory");
#else
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int r = row + (e >> 1) * 8;
    if (r < valid_rows) atomicAdd(sums + r * ld + col0 + 2 * (lane & 3) + (e & 1), c[e]);
  }
#endif
}

// FAST mode: dQ[TM x D] += dS[TM x BN] . K[BN x D], added to the float32 sums. The warps split the
// tile's 16-row groups and, when there are more warps than groups, D's columns. dS^T is in shared
// memory ([key][query], swizzled rows of TM elements); the warp's A fragments are read transposed, once,
// and its sums go out one 16-column slice at a time to keep registers free.
template <typename T, int D, int TM, int BN, int kWarps>
__device__ __forceinline__ void add_dq(float* dq_rows, int valid_rows, uint32_t sDs, uint32_t sK, int warp, int lane) {
  constexpr int kRowGroups = TM / 16;
  constexpr int kCols = D / (kWarps / kRowGroups);
  const int row0 = (warp % kRowGroups) * 16, col0 = (warp / kRowGroups) * kCols;
  uint32_t a[BN / 16][4];
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const int key = kk * 16 + (lane & 7) + ((lane >> 4) & 1) * 8;
    ldmatrix_x4_trans(a[kk], sDs + swizzle<TM / 8>(key, row0 / 8 + ((lane >> 3) & 1)));
  }
  const int row = row0 + (lane >> 2);
#pragma unroll
  for (int dd = col0 / 16; dd < (col0 + kCols) / 16; ++dd) {
    float c[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const int key = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      uint32_t b[4];
      ldmatrix_x4_trans(b, sK + swizzle<D / 8>(key, 2 * dd + (lane >> 4)));
      mma_16x8x16<T>(c[0], a[kk], b[0], b[1]);
      mma_16x8x16<T>(c[1], a[kk], b[2], b[3]);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) add_dq_fragment(dq_rows, D, valid_rows, row, dd * 16 + j * 8, c[j], lane);
  }
}

// Rows [row0, row0 + 16) of a [rows][D] output in T from this warp's accumulators times `scale`; rows at
// or past `valid_rows` are not written.
template <typename T, int D>
__device__ __forceinline__ void store_rows(T* out, int64_t seq_stride, const float (&c)[D / 8][4], float scale,
                                           int row0, int valid_rows, int lane) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + (lane >> 2) + r * 8;
    if (row >= valid_rows) continue;
    T* dst = out + row * seq_stride + 2 * (lane & 3);
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<uint32_t*>(dst + n * 8) = pack2<T>(c[n][2 * r] * scale, c[n][2 * r + 1] * scale);
  }
}

template <typename T, int kIndex, bool kAtomicDq>
__global__ void __launch_bounds__(BwdKernel<kIndex>::kThreads, BwdKernel<kIndex>::kMinBlocks)
    bwd_dkdv_kernel(const BackwardParams bp, const BwdWorkspace ws) {
  constexpr int D = BwdKernel<kIndex>::kD;
  constexpr int TM = BwdKernel<kIndex>::kTM;
  constexpr int BN = BwdKernel<kIndex>::kBN;
  constexpr int kThreads = BwdKernel<kIndex>::kThreads;
  using L = DkdvSmem<D, TM, BN>;
  constexpr uint32_t kQTileBytes = TM * D * 2;
  const KernelParams& p = bp.fwd;

  extern __shared__ __align__(128) char smem[];
  const uint32_t base = smem_addr(smem);
  float* const s_lse = reinterpret_cast<float*>(smem + L::kLse);
  float* const s_delta = reinterpret_cast<float*>(smem + L::kDelta);

  const int num_k_blocks = (p.seqlen_k + BN - 1) / BN;
  const int bh = blockIdx.x / num_k_blocks;
  const int b = bh / bp.heads_kv, h_kv = bh % bp.heads_kv;
  const int k0 = (blockIdx.x % num_k_blocks) * BN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  load_tile<BN, D, kThreads>(base + L::kK,
                             static_cast<const T*>(p.k) + b * p.k_batch_stride + h_kv * p.k_head_stride +
                                 static_cast<int64_t>(k0) * p.k_seq_stride,
                             p.k_seq_stride, p.seqlen_k - k0, tid);
  load_tile<BN, D, kThreads>(base + L::kV,
                             static_cast<const T*>(p.v) + b * p.v_batch_stride + h_kv * p.v_head_stride +
                                 static_cast<int64_t>(k0) * p.v_seq_stride,
                             p.v_seq_stride, p.seqlen_k - k0, tid);

  // Query tiles that see a key of this block: from the one holding query k0 - causal_offset (causal),
  // for each query head of the group. Tile t is (head h_kv * kv_group + t / tiles, query tile first + t % tiles).
  const int first = p.causal ? max(0, k0 - p.causal_offset) / TM : 0;
  const int tiles = max(0, (p.seqlen_q + TM - 1) / TM - first);
  const int total = tiles * p.kv_group;
  const auto tile_head = [&](int t) { return h_kv * p.kv_group + t / tiles; };
  const auto tile_q0 = [&](int t) { return (first + t % tiles) * TM; };

  const auto load_queries = [&](int t) {
    const int h = tile_head(t), q0 = tile_q0(t), buf = t & 1;
    load_tile<TM, D, kThreads>(base + L::kQ + buf * kQTileBytes,
                               static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride +
                                   static_cast<int64_t>(q0) * p.q_seq_stride,
                               p.q_seq_stride, p.seqlen_q - q0, tid);
    load_tile<TM, D, kThreads>(base + L::kDo + buf * kQTileBytes,
                               static_cast<const T*>(bp.dout) + b * bp.dout_batch_stride + h * bp.dout_head_stride +
                                   static_cast<int64_t>(q0) * bp.dout_seq_stride,
                               bp.dout_seq_stride, p.seqlen_q - q0, tid);
    // lse and D by plain loads: a head's rows of these float arrays need not start 16-byte aligned. Rows
    // past the end get 0: their Q and dO rows are zero, so P = 1, dP = 0 and dS = 0 add nothing.
    if (tid < TM) {
      const int64_t row = (static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + q0 + tid;
      const bool valid = q0 + tid < p.seqlen_q;
      s_lse[buf * TM + tid] = valid ? p.lse[row] * kLog2e : 0.f;
      s_delta[buf * TM + tid] = valid ? ws.delta[row] : 0.f;
    }
  };

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  if (total > 0) load_queries(0);
  cp_async_commit();  // K, V, and query tile 0

  for (int t = 0; t < total; ++t) {
    cp_async_wait<0>();
    // Tile t visible to all; every warp is past tile t-1, so its buffers (and the dS^T tile) are free.
    __syncthreads();
    if (t + 1 < total) load_queries(t + 1);
    cp_async_commit();
    const int buf = t & 1, q0 = tile_q0(t);
    const uint32_t sQ = base + L::kQ + buf * kQTileBytes, sDo = base + L::kDo + buf * kQTileBytes;

    float s[TM / 8][4], ds[TM / 8][4];  // S^T then P^T; dP^T then dS^T
    gemm_abt_pair<T, D, TM>(s, base + L::kK, sQ, ds, base + L::kV, sDo, warp * 16, lane);
    // Keys past the end must be masked: their zero K rows give S = 0, and exp2(-lse) can overflow.
    const bool needs_mask = k0 + BN > p.seqlen_k || (p.causal && k0 + BN - 1 > q0 + p.causal_offset);
    const int key_row = k0 + warp * 16 + (lane >> 2);
#pragma unroll
    for (int n = 0; n < TM / 8; ++n) {
      const int col = n * 8 + 2 * (lane & 3);
      const float2 lse = *reinterpret_cast<const float2*>(s_lse + buf * TM + col);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = fast_exp2(s[n][e] * p.scale_log2 - ((e & 1) ? lse.y : lse.x));
        if (needs_mask) {
          const int key = key_row + (e >> 1) * 8, query = q0 + col + (e & 1);
          // Selected, not computed from -inf: a row that sees no key has lse = -inf.
          s[n][e] = key < p.seqlen_k && (!p.causal || key <= query + p.causal_offset) ? x : 0.f;
        } else {
          s[n][e] = x;
        }
      }
    }
#pragma unroll
    for (int n = 0; n < TM / 8; ++n) {
      const float2 delta = *reinterpret_cast<const float2*>(s_delta + buf * TM + n * 8 + 2 * (lane & 3));
#pragma unroll
      for (int e = 0; e < 4; ++e) ds[n][e] = s[n][e] * (ds[n][e] - ((e & 1) ? delta.y : delta.x));
    }
    gemm_rab_pair<T, D, TM>(dv, s, sDo, dk, ds, sQ, lane);

    if constexpr (kAtomicDq) {
      const int row = warp * 16 + (lane >> 2);
#pragma unroll
      for (int n = 0; n < TM / 8; ++n)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          *reinterpret_cast<uint32_t*>(smem + L::kDs + swizzle<TM / 8>(row + 8 * r, n) + 4 * (lane & 3)) =
              pack2<T>(ds[n][2 * r], ds[n][2 * r + 1]);
      __syncthreads();  // the whole dS^T tile written
      const int h = tile_head(t);
      add_dq<T, D, TM, BN, kThreads / 32>(ws.dq_accum + ((static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + q0) * D,
                           p.seqlen_q - q0, base + L::kDs, base + L::kK, warp, lane);
    }
  }
  cp_async_wait<0>();

  const int valid = p.seqlen_k - k0;
  store_rows<T, D>(static_cast<T*>(bp.dk) + b * bp.dk_batch_stride + h_kv * bp.dk_head_stride +
                       static_cast<int64_t>(k0) * bp.dk_seq_stride,
                   bp.dk_seq_stride, dk, p.scale, warp * 16, valid, lane);
  store_rows<T, D>(static_cast<T*>(bp.dv) + b * bp.dv_batch_stride + h_kv * bp.dv_head_stride +
                       static_cast<int64_t>(k0) * bp.dv_seq_stride,
                   bp.dv_seq_stride, dv, 1.f, warp * 16, valid, lane);
}

}  // namespace evosdpa::detail::mma_sm80
