// Launch of wgmma_sm90's backward for one (dtype, tile row): mma_sm80's pre-pass (D, zeroed dQ sums where
// the kernel does not store them, turn counters), the wgmma kernel (dK, dV, dQ's sums), mma_sm80's
// conversion of the sums to dQ. The five TMA maps (Q, K, V, dO, the dQ sums) are encoded per call and
// passed by value, so nothing is allocated.
// Included by the instantiation files in inst/, one per (dtype, row).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/mma/bwd/bwd_prepass.cuh"
#include "kernels/wgmma/bwd/wgmma_bwd_kernel.cuh"
#include "kernels/wgmma/tma_map.hpp"

namespace evosdpa::detail::wgmma_sm90 {

template <typename T, int kIndex>
cudaError_t launch_backward(const BackwardParams& bp, cudaStream_t stream) {
  constexpr BwdTile cfg = kBwdTiles[kIndex];
  constexpr int D = cfg.head_dim;
  const KernelParams& p = bp.fwd;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  // DETERMINISTIC mode: a tile's first key block stores its dQ sums (bwd_write_dq), so the pre-pass zeroes
  // only those of tiles no block sees. Zeroing them all wrote 4 bytes per dQ element: B32 H16 L512 D128
  // 591 -> 541 us without it, B4 H16 L4096 D128 2,949 -> 2,894 (H200, docs/perf-log.md v14.1).
  const mma_sm80::BwdWorkspace ws = mma_sm80::bwd_workspace(bp.workspace, rows, D, !bp.fast, cfg.tile_m, !bp.fast);

  mma_sm80::launch_prepass<T, D>(bp, ws, stream);

  const int64_t k_blocks = (static_cast<int64_t>(p.seqlen_k) + cfg.block_n - 1) / cfg.block_n * p.batch * bp.heads_kv;
  if (k_blocks > 0) {
    const CUtensorMapDataType dtype =
        std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    CUtensorMap tq, tk, tv, tdo, tdq;
    cudaError_t err = encode_tensor_map(
        tk, {p.k, p.batch, bp.heads_kv, p.seqlen_k, D, p.k_batch_stride, p.k_head_stride, p.k_seq_stride}, dtype,
        cfg.block_n);
    if (err == cudaSuccess)
      err = encode_tensor_map(
          tv, {p.v, p.batch, bp.heads_kv, p.seqlen_k, D, p.v_batch_stride, p.v_head_stride, p.v_seq_stride}, dtype,
          cfg.block_n);
    if (rows > 0) {
      if (err == cudaSuccess)
        err = encode_tensor_map(
            tq, {p.q, p.batch, p.heads_q, p.seqlen_q, D, p.q_batch_stride, p.q_head_stride, p.q_seq_stride}, dtype,
            cfg.tile_m);
      if (err == cudaSuccess)
        err = encode_tensor_map(tdo,
                                {bp.dout, p.batch, p.heads_q, p.seqlen_q, D, bp.dout_batch_stride,
                                 bp.dout_head_stride, bp.dout_seq_stride},
                                dtype, cfg.tile_m);
      // The float32 dQ sums, [batch, heads_q, seqlen_q, D] contiguous (bwd_workspace.hpp): the writer's
      // reduce-adds, boxes of 32 columns by a tile's rows, rows past seqlen_q skipped.
      if (err == cudaSuccess)
        err = encode_tensor_map(tdq,
                                {ws.dq_accum, p.batch, p.heads_q, p.seqlen_q, D, static_cast<int64_t>(p.heads_q) * p.seqlen_q * D,
                                 static_cast<int64_t>(p.seqlen_q) * D, D},
                                CU_TENSOR_MAP_DATA_TYPE_FLOAT32, cfg.tile_m);
    } else {
      tq = tdo = tdq = tk;  // no query tile is loaded or added without queries (a map of an empty tensor
                            // cannot be encoded); the blocks store zero dK and dV
    }
    if (err != cudaSuccess) return err;
    constexpr int smem = cfg.smem_bytes();
    const auto run = [&](auto* kernel) {
      cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (e != cudaSuccess) return e;
      kernel<<<static_cast<unsigned>(k_blocks), cfg.threads(), smem, stream>>>(tq, tk, tv, tdo, tdq, bp, ws);
      return cudaGetLastError();
    };
    err = bp.fast ? run(bwd_kernel<T, kIndex, false>) : run(bwd_kernel<T, kIndex, true>);
    if (err != cudaSuccess) return err;
  }
  mma_sm80::launch_dq_convert<T, D>(bp, ws, stream);
  return cudaGetLastError();
}

}  // namespace evosdpa::detail::wgmma_sm90
