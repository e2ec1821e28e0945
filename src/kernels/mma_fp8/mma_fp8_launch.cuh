// Launch of one (output type, tile-table row) instantiation of the FP8 kernel. Included by the explicit
// instantiation files in inst/.
#pragma once

#include <cuda_runtime.h>

#include "kernels/mma_fp8/mma_fp8_kernel.cuh"

namespace evosdpa::detail::mma_fp8 {

template <typename TO, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream) {
  constexpr TileConfig cfg = kConfigs[kIndex];
  constexpr int smem = cfg.smem_bytes();
  cudaError_t err = cudaFuncSetAttribute(attention_kernel<TO, kIndex>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const int64_t blocks = (static_cast<int64_t>(p.seqlen_q) + cfg.block_m() - 1) / cfg.block_m() * p.batch * p.heads_q;
  attention_kernel<TO, kIndex><<<static_cast<unsigned>(blocks), cfg.threads(), smem, stream>>>(p);
  return cudaGetLastError();
}

template <typename TO, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, attention_kernel<TO, kIndex>);
}

}  // namespace evosdpa::detail::mma_fp8
