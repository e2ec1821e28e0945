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
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    const long long rows = static_cast<long long>(p.batch) * p.heads_q * p.seqlen_q;
    cudaLaunchConfig_t merge{};
    merge.gridDim = dim3(static_cast<unsigned>((rows + 3) / 4));
    merge.blockDim = dim3(128);
    merge.stream = stream;
    // A programmatic dependent launch (splitkv_kernel.cuh: allow_dependent_launch) where the merge's
    // image waits for the kernel: its PTX targets sm_90 or later (an sm_80 build JIT-compiled for an
    // H100 has no wait, and would read the parts before they are written). Its blocks are then
    // scheduled while the kernel's last blocks run instead of after the kernel has drained.
    cudaFuncAttributes image{};
    if ((err = cudaFuncGetAttributes(&image, merge_kernel<T, kIndex>)) != cudaSuccess) return err;
    cudaLaunchAttribute overlap{};
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    if (image.ptxVersion >= 90) {
      merge.attrs = &overlap;
      merge.numAttrs = 1;
    }
    err = cudaLaunchKernelEx(&merge, merge_kernel<T, kIndex>, p);
    if (err != cudaSuccess) (void)cudaGetLastError();  // reported here, not again by the next call
    return err;
  }
  return cudaGetLastError();
}

template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, splitkv_kernel<T, kIndex>);
}

}  // namespace evosdpa::detail::splitkv
