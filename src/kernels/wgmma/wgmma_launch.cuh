// Launch of one (dtype, tile-table row) instantiation of the Hopper kernel: the four TMA tensor maps are
// encoded on the host for this call and passed by value (__grid_constant__), so nothing is allocated and
// the call can be captured in a CUDA graph. Included by the explicit instantiation files in inst/.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "kernels/wgmma/tma_map.hpp"
#include "kernels/wgmma/wgmma_kernel.cuh"

namespace evosdpa::detail::wgmma_sm90 {

// Work items: block_m query rows of one (batch, head), in 64 bits; supports() keeps them <= 2^31-1.
inline int64_t work_items(const KernelParams& p, int block_m) {
  return (static_cast<int64_t>(p.seqlen_q) + block_m - 1) / block_m * p.batch * p.heads_q;
}

template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, cudaStream_t stream) {
  constexpr TileConfig cfg = kConfigs[kIndex];
  const CUtensorMapDataType dtype =
      std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const int heads_kv = p.heads_q / p.kv_group;
  CUtensorMap tq, tk, tv, to;
  cudaError_t err = encode_tensor_map(
      tq, {p.q, p.batch, p.heads_q, p.seqlen_q, cfg.head_dim, p.q_batch_stride, p.q_head_stride, p.q_seq_stride},
      dtype, cfg.block_m());
  // O is stored by each consumer warpgroup: boxes of its 64 rows.
  if (err == cudaSuccess)
    err = encode_tensor_map(
        to, {p.o, p.batch, p.heads_q, p.seqlen_q, cfg.head_dim, p.o_batch_stride, p.o_head_stride, p.o_seq_stride},
        dtype, 64);
  if (err != cudaSuccess) return err;
  if (p.seqlen_k > 0) {
    err = encode_tensor_map(
        tk, {p.k, p.batch, heads_kv, p.seqlen_k, cfg.head_dim, p.k_batch_stride, p.k_head_stride, p.k_seq_stride},
        dtype, cfg.block_n);
    if (err == cudaSuccess)
      err = encode_tensor_map(
          tv, {p.v, p.batch, heads_kv, p.seqlen_k, cfg.head_dim, p.v_batch_stride, p.v_head_stride, p.v_seq_stride},
          dtype, cfg.block_n);
    if (err != cudaSuccess) return err;
  } else {
    tk = tv = tq;  // no key tile is loaded when seqlen_k = 0 (a map of an empty tensor cannot be encoded)
  }
  constexpr int smem = cfg.smem_bytes();
  err = cudaFuncSetAttribute(attention_kernel<T, kIndex>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  // One CTA per SM fits (shared memory and registers); the grid is persistent, at most one CTA per SM.
  int device = 0, sms = 0;
  if (err == cudaSuccess) err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  const int64_t grid = std::min<int64_t>(work_items(p, cfg.block_m()), sms);
  attention_kernel<T, kIndex><<<static_cast<unsigned>(grid), cfg.threads(), smem, stream>>>(tq, tk, tv, to, p);
  return cudaGetLastError();
}

// KernelFamily::probe_image on this instantiation (see mma_launch.cuh).
template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, attention_kernel<T, kIndex>);
}

}  // namespace evosdpa::detail::wgmma_sm90
