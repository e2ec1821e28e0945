// Launch of one (dtype, tile-table row) instantiation of the sm_80 tensor-core kernel. Included by the
// explicit instantiation files in inst/, one per (dtype, head_dim), to keep each compile small.
#pragma once

#include <cuda_runtime.h>

#include "kernels/mma/mma_kernel.cuh"

namespace evosdpa::detail::mma_sm80 {

// Blocks in the grid: one per block_m query rows of each (batch, head), in 64 bits (the int factors'
// product is not an int). supports() (mma_family.cpp) keeps it <= 2^31-1.
inline int64_t grid_blocks(const KernelParams& p, int block_m) {
  const int64_t q_blocks = (static_cast<int64_t>(p.seqlen_q) + block_m - 1) / block_m;
  return q_blocks * p.batch * p.heads_q;
}

template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream) {
  constexpr TileConfig cfg = Kernel<T, kIndex>::kCfg;
  constexpr int smem = cfg.smem_bytes(sizeof(T));
  const auto run = [&](auto* kernel) {
    // Above 48 KiB a block needs the opt-in; the call is cheap and not a stream operation, so it is safe
    // during graph capture and is simply repeated per launch (per device, as the attribute requires).
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    const dim3 grid(static_cast<unsigned>(grid_blocks(p, cfg.block_m())));
    kernel<<<grid, cfg.threads(), smem, stream>>>(p);
    return cudaGetLastError();
  };
  // Score modifiers (supports(): a score-modifier row), an instantiation per combination.
  if (has_score_mods(p)) {
    if constexpr (kScoreModRow<kIndex>) {
      if (!score_mods_instantiated(p)) return cudaErrorInvalidValue;
      return with_score_mods(p, [&](auto mods) { return run(attention_kernel<T, kIndex, decltype(mods)>); });
    } else {
      return cudaErrorInvalidValue;
    }
  }
  return run(attention_kernel<T, kIndex>);
}

// The family's image probe (KernelFamily::probe_image) on this instantiation: cudaFuncGetAttributes
// fails with cudaErrorInvalidDeviceFunction / cudaErrorNoKernelImageForDevice when the build holds no
// code the current device can run.
template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, attention_kernel<T, kIndex>);
}

}  // namespace evosdpa::detail::mma_sm80
