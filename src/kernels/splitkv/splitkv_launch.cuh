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
    // On sm_90 the merge is a programmatic dependent launch (splitkv_kernel.cuh: allow_dependent_launch):
    // its blocks are scheduled while the kernel's last blocks run instead of after the kernel has drained.
    cudaLaunchAttribute overlap{};
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    int device = 0, major = 0;
    if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
    if ((err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)) != cudaSuccess) return err;
    if (major >= 9) {
      merge.attrs = &overlap;
      merge.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&merge, merge_kernel<T, K::kD>, p);
  }
  return cudaGetLastError();
}

template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, splitkv_kernel<T, kIndex>);
}

}  // namespace evosdpa::detail::splitkv
