// Launch of one (dtype, tile-table row) instantiation of the sm_80 tensor-core kernel. Included by the
// explicit instantiation files in inst/, one per (dtype, head_dim), to keep each compile small.
#pragma once

#include <cuda_runtime.h>

#include "kernels/mma/mma_kernel.cuh"

namespace evosdpa::detail::mma_sm80 {

// Blocks in the grid: one per block_m query rows of each (batch, head). Selection keeps it <= 2^31-1.
inline long long grid_blocks(const KernelParams& p, int block_m) {
  const long long q_blocks = (p.seqlen_q + block_m - 1) / block_m;
  return q_blocks * p.batch * p.heads_q;
}

template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream) {
  constexpr TileConfig cfg = Kernel<T, kIndex>::kCfg;
  constexpr int smem = cfg.smem_bytes();
  // Above 48 KiB a block needs the opt-in; the call is cheap and not a stream operation, so it is safe
  // during graph capture and is simply repeated per launch (per device, as the attribute requires).
  cudaError_t err = cudaFuncSetAttribute(attention_kernel<T, kIndex>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(grid_blocks(p, cfg.block_m())));
  attention_kernel<T, kIndex><<<grid, cfg.threads(), smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace evosdpa::detail::mma_sm80
