// Launch of one (dtype, row) instantiation of the split-KV kernel and, with num_splits > 1, its merge.
// Included by the explicit instantiation files in inst/, one per (dtype, head dim).
#pragma once

#include <cuda_runtime.h>

#include "kernels/splitkv/splitkv_kernel.cuh"

namespace evosdpa::detail::splitkv {

template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream) {
  using K = Kernel<T, kIndex>;
  constexpr int smem = K::kCfg.smem_bytes(sizeof(T));
  // Above 48 KiB a block needs the opt-in; cheap, not a stream operation (safe during graph capture).
  cudaError_t err = cudaFuncSetAttribute(splitkv_kernel<T, kIndex>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  // supports() (splitkv_family.cpp) keeps the grid within 2^31-1 blocks.
  const long long blocks = base_blocks(p.batch, p.heads_q / p.kv_group, p.seqlen_q, p.kv_group) * p.num_splits;
  splitkv_kernel<T, kIndex><<<static_cast<unsigned>(blocks), K::kThreads, smem, stream>>>(p);
  if (p.num_splits > 1) {
    const long long rows = static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q;
    merge_kernel<T, K::kD><<<static_cast<unsigned>((rows + 3) / 4), 128, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, splitkv_kernel<T, kIndex>);
}

}  // namespace evosdpa::detail::splitkv
