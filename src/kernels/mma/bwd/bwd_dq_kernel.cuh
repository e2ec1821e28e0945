// mma_sm80's backward, dQ in DETERMINISTIC mode: one block owns block_m queries of one (batch, head),
// 16 per warp, and streams every K/V tile they see past them, double-buffered by cp.async:
//   S = Q K^T,  P = exp2(S scale log2(e) - lse log2(e)),  dP = dO V^T,  dS = P (dP - D),  dQ += dS K,
// dQ in fp32 registers summed in key order, so every run gives the same bits; stored once times the
// scale. It recomputes S and dP, which the dK/dV kernel also forms: the price of no atomics.
#pragma once

#include "kernels/rtc_std.hpp"

#include "kernels/backward_params.hpp"
#include "kernels/mma/bwd/bwd_config.hpp"
#include "kernels/mma/bwd/bwd_dkdv_kernel.cuh"
#include "kernels/mma/bwd/bwd_gemm.cuh"
#include "kernels/mma/bwd/bwd_workspace.hpp"
#include "kernels/mma/mma_tiles.cuh"

namespace evosdpa::detail::mma_sm80 {

// Two blocks per SM where shared memory allows (sm_80, sm_90): 4 warps alone leave the tensor pipe idle.
template <typename T, int kIndex>
__global__ void __launch_bounds__(BwdKernel<kIndex>::kDqKernelThreads, 2)
    bwd_dq_kernel(const BackwardParams bp, const BwdWorkspace ws) {
  constexpr int D = BwdKernel<kIndex>::kD;
  constexpr int BM = BwdKernel<kIndex>::kDqKernelBM;
  constexpr int BN = BwdKernel<kIndex>::kDqKernelBN;
  constexpr int kThreads = BwdKernel<kIndex>::kDqKernelThreads;
  constexpr uint32_t kKVTileBytes = BN * D * 2;
  const KernelParams& p = bp.fwd;

  extern __shared__ __align__(128) char smem[];
  const uint32_t sQ = smem_addr(smem);
  const uint32_t sDo = sQ + BM * D * 2;
  const uint32_t sK0 = sDo + BM * D * 2;
  const uint32_t sV0 = sK0 + 2 * kKVTileBytes;

  const BlockCoords bc = block_coords(p, BM);
  const int q0 = bc.q_block * BM;
  const int h_kv = bc.h / p.kv_group;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t row0 = (static_cast<int64_t>(bc.b) * p.heads_q + bc.h) * p.seqlen_q;

  const T* k_head = static_cast<const T*>(p.k) + bc.b * p.k_batch_stride + h_kv * p.k_head_stride;
  const T* v_head = static_cast<const T*>(p.v) + bc.b * p.v_batch_stride + h_kv * p.v_head_stride;
  int kv_end = p.seqlen_k;
  if (p.causal) kv_end = max(0, min(kv_end, min(q0 + BM, p.seqlen_q) - 1 + p.causal_offset + 1));
  const int num_kv_tiles = (kv_end + BN - 1) / BN;

  // This thread's two query rows: their lse (log2 domain) and D. Rows past the end take 0: their Q and
  // dO rows are zero, so dS = 0 there.
  float lse[2], delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = q0 + warp * 16 + (lane >> 2) + 8 * r;
    lse[r] = q < p.seqlen_q ? p.lse[row0 + q] * kLog2e : 0.f;
    delta[r] = q < p.seqlen_q ? ws.delta[row0 + q] : 0.f;
  }

  float dq[D / 8][4] = {};
  const auto load_kv = [&](int tile) {
    const int64_t key0 = static_cast<int64_t>(tile) * BN;
    load_tile<BN, D, kThreads>(sK0 + (tile & 1) * kKVTileBytes, k_head + key0 * p.k_seq_stride, p.k_seq_stride,
                               p.seqlen_k - tile * BN, tid);
    load_tile<BN, D, kThreads>(sV0 + (tile & 1) * kKVTileBytes, v_head + key0 * p.v_seq_stride, p.v_seq_stride,
                               p.seqlen_k - tile * BN, tid);
  };
  if (num_kv_tiles > 0) {
    load_tile<BM, D, kThreads>(sQ,
                               static_cast<const T*>(p.q) + bc.b * p.q_batch_stride + bc.h * p.q_head_stride +
                                   static_cast<int64_t>(q0) * p.q_seq_stride,
                               p.q_seq_stride, p.seqlen_q - q0, tid);
    load_tile<BM, D, kThreads>(sDo,
                               static_cast<const T*>(bp.dout) + bc.b * bp.dout_batch_stride +
                                   bc.h * bp.dout_head_stride + static_cast<int64_t>(q0) * bp.dout_seq_stride,
                               bp.dout_seq_stride, p.seqlen_q - q0, tid);
    load_kv(0);
  }
  cp_async_commit();

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int key0 = j * BN;
    cp_async_wait<0>();
    __syncthreads();  // tile j visible; every warp is past tile j-1, whose buffers take tile j+1
    if (j + 1 < num_kv_tiles) load_kv(j + 1);
    cp_async_commit();
    const uint32_t sK = sK0 + (j & 1) * kKVTileBytes, sV = sV0 + (j & 1) * kKVTileBytes;

    float s[BN / 8][4], ds[BN / 8][4];  // S then P; dP then dS
    gemm_abt_pair<T, D, BN>(s, sQ, sK, ds, sDo, sV, warp * 16, lane);
    const bool needs_mask = key0 + BN > p.seqlen_k || (p.causal && key0 + BN - 1 > q0 + p.causal_offset);
#pragma unroll
    for (int n = 0; n < BN / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = fast_exp2(s[n][e] * p.scale_log2 - lse[e >> 1]);
        if (needs_mask) {
          const int query = q0 + warp * 16 + (lane >> 2) + (e >> 1) * 8;
          const int key = key0 + n * 8 + 2 * (lane & 3) + (e & 1);
          s[n][e] = key < p.seqlen_k && (!p.causal || key <= query + p.causal_offset) ? x : 0.f;
        } else {
          s[n][e] = x;
        }
      }
#pragma unroll
    for (int n = 0; n < BN / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) ds[n][e] = s[n][e] * (ds[n][e] - delta[e >> 1]);
    gemm_rab<T, D, BN>(dq, ds, sK, lane);
  }
  cp_async_wait<0>();

  store_rect<T>(static_cast<T*>(bp.dq) + bc.b * bp.dq_batch_stride + bc.h * bp.dq_head_stride +
                    static_cast<int64_t>(q0) * bp.dq_seq_stride,
                bp.dq_seq_stride, reinterpret_cast<const float(&)[1][D / 8][4]>(dq), p.scale, warp * 16, 0,
                p.seqlen_q - q0, lane);
}

}  // namespace evosdpa::detail::mma_sm80
