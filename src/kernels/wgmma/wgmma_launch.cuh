// Launch of one (dtype, tile-table row) instantiation of the Hopper kernel: the four TMA tensor maps are
// encoded on the host for this call and passed by value (__grid_constant__), so nothing is allocated and
// the call can be captured in a CUDA graph. Included by the explicit instantiation files in inst/.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "kernels/wgmma/tma_map.hpp"
#include "kernels/wgmma/wgmma_kernel.cuh"

namespace evosdpa::detail::wgmma_sm90 {

// Whether row kIndex's plain kernel (no score modifiers, the persistent grid) is compiled with
// CallSequences (sequence.cuh) for calls without sequences of their own. FP8 rows serve only those
// (supports()): that kernel alone. split_keys rows, whose grids are under one wave and whose time is
// mostly the CTA's start: both it and an OwnSequences kernel; with sequence_of's loads and per-item
// fields the first TMA load waited on a chain of constant and global loads (the plan's first K tile
// ~265 cycles later, perf-log v13.7; SASS of the fp16 D=64 row: 188 instructions before the first
// UTMALDG against 134, 61 LDC against 22). The other rows: OwnSequences alone (a kernel of the call's
// lengths was no faster on grids of many items, perf-log v12, for four more kernels per row).
template <int kIndex>
inline constexpr bool kCallSequences = kConfigs[kIndex].fp8 || kConfigs[kIndex].split_keys;

// Work items: block_m query rows of one (batch, head), in 64 bits; supports() keeps them <= 2^31-1.
inline int64_t work_items(const KernelParams& p, int block_m) {
  return (static_cast<int64_t>(p.seqlen_q) + block_m - 1) / block_m * p.batch * p.heads_q;
}

// A launch of `grid` CTAs in clusters of `splits` (the attribute is the caller's, pointed to).
inline cudaLaunchConfig_t cluster_launch(cudaLaunchAttribute& cluster, int splits, int64_t grid, int threads,
                                         int smem, cudaStream_t stream) {
  cluster = {};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim = {static_cast<unsigned>(splits), 1, 1};
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  return config;
}

// How many clusters of `splits` CTAs of this instantiation's split kernel the device runs at once, asked
// once per (device, cluster size): the answer does not change, and a call should not pay for it.
template <typename T, int kIndex>
cudaError_t cluster_capacity(int device, int splits, int* fit) {
  constexpr TileConfig cfg = kConfigs[kIndex];
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices][4];  // per log2(splits): clusters + 1; 0: not asked yet
  std::atomic<int>* slot = device < kDevices ? &known[device][Choice::log2_of(splits)] : nullptr;
  if (slot != nullptr && slot->load(std::memory_order_relaxed) > 0) {
    *fit = slot->load(std::memory_order_relaxed) - 1;
    return cudaSuccess;
  }
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = cluster_launch(cluster, splits, splits, cfg.threads(), cfg.smem_bytes(), nullptr);
  const cudaError_t err = cudaOccupancyMaxActiveClusters(
      fit, attention_kernel<T, kIndex, SplitSchedule<kIndex, NoMods>, MergeEpilogue<T, kIndex>>, &config);
  if (err == cudaSuccess && slot != nullptr) slot->store(*fit + 1, std::memory_order_relaxed);
  return err;
}

// `splits` > 1: each item's K/V tiles over a cluster of that many CTAs (fewer if the clusters would not
// all run at once; 1 falls back to the persistent grid).
template <typename T, int kIndex>
cudaError_t launch(const KernelParams& p, int splits, cudaStream_t stream) {
  constexpr TileConfig cfg = kConfigs[kIndex];
  static_assert(cfg.fp8 == (sizeof(T) == 1), "FP8 rows take E4M3 inputs, the others 16-bit ones");
  const CUtensorMapDataType dtype = cfg.fp8                     ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                    : std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  // O: the inputs' type, or o_dtype with FP8 inputs.
  const CUtensorMapDataType o_dtype = !cfg.fp8 ? dtype
                                      : p.o_dtype == EVOSDPA_DTYPE_BFLOAT16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const int heads_kv = p.heads_q / p.kv_group;
  // Packed sequences are one batch entry of total rows, which the kernel addresses from each sequence's
  // first row (q_map_batch, k_map_batch).
  const bool packed_q = p.cu_seqlens_q != nullptr, packed_k = p.cu_seqlens_k != nullptr;
  const int64_t q_batches = packed_q ? 1 : p.batch, q_rows = packed_q ? p.total_q : p.seqlen_q;
  const int64_t k_batches = packed_k ? 1 : p.batch, k_rows = packed_k ? p.total_k : p.seqlen_k;
  CUtensorMap tq, tk, tv, to;
  cudaError_t err = encode_tensor_map(
      tq, {p.q, q_batches, p.heads_q, q_rows, p.head_dim, p.q_batch_stride, p.q_head_stride, p.q_seq_stride},
      dtype, cfg.block_m(), cfg.row_bytes());
  // O is stored by each consumer warpgroup: boxes of its 64 rows (packed rows are copied by the threads).
  if (err == cudaSuccess)
    err = encode_tensor_map(
        to, {p.o, q_batches, p.heads_q, q_rows, p.head_dim, p.o_batch_stride, p.o_head_stride, p.o_seq_stride},
        o_dtype, 64);
  if (err != cudaSuccess) return err;
  if (k_rows > 0) {
    err = encode_tensor_map(
        tk, {p.k, k_batches, heads_kv, k_rows, p.head_dim, p.k_batch_stride, p.k_head_stride, p.k_seq_stride},
        dtype, cfg.block_n, cfg.row_bytes());
    if (err == cudaSuccess)
      err = encode_tensor_map(
          tv, {p.v, k_batches, heads_kv, k_rows, p.head_dim, p.v_batch_stride, p.v_head_stride, p.v_seq_stride},
          dtype, cfg.block_n, cfg.row_bytes());
    if (err != cudaSuccess) return err;
  } else {
    tk = tv = tq;  // no key tile is loaded without keys (a map of an empty tensor cannot be encoded)
  }
  // A mask tensor's map (wgmma_mask.cuh): [batch|1, heads_q|1, seqlen_q|1, seqlen_k], a broadcast
  // dimension (stride 0) of size 1, boxes of 64 rows (a consumer warpgroup's) by 128 bytes, or of the one row
  // of a key mask; a parameter of the mask kernels only (MaskMap).
  MaskMap<true> tmask{tq};  // (never read without a mask)
  if (p.mask != nullptr && p.seqlen_q > 0 && p.seqlen_k > 0) {
    const bool bytes = p.mask_type == EVOSDPA_MASK_BOOL;
    err = encode_tensor_map(tmask.map,
                            {p.mask, p.mask_batch_stride != 0 ? p.batch : 1, p.mask_head_stride != 0 ? p.heads_q : 1,
                             p.mask_seq_stride != 0 ? p.seqlen_q : 1, p.seqlen_k, p.mask_batch_stride,
                             p.mask_head_stride, p.mask_seq_stride},
                            bytes ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : dtype, p.mask_seq_stride != 0 ? 64 : 1);
    if (err != cudaSuccess) return err;
  }
  constexpr int smem = cfg.smem_bytes();
  int device = 0, sms = 0;
  err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  const int64_t items = work_items(p, cfg.block_m());
  if constexpr (!cfg.fp8) {  // FP8 rows are not split over clusters
    if (splits > 1) {
      auto* kernel = attention_kernel<T, kIndex, SplitSchedule<kIndex, NoMods>, MergeEpilogue<T, kIndex>>;
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (err != cudaSuccess) return err;
      // Clusters wait for a GPC with `splits` free SMs: fewer splits when the clusters would not all fit
      // at once (the part's GPCs decide that, not only its SM count).
      for (; splits > 1; splits /= 2) {
        int fit = 0;
        err = cluster_capacity<T, kIndex>(device, splits, &fit);
        if (err != cudaSuccess) return err;
        if (items <= fit) break;
      }
      if (splits > 1) {
        cudaLaunchAttribute cluster;
        const cudaLaunchConfig_t config = cluster_launch(cluster, splits, items * splits, cfg.threads(), smem, stream);
        const Geometry geo = Geometry::of(p, cfg.block_m(), static_cast<int>(items * splits));
        err = cudaLaunchKernelEx(&config, kernel, tq, tk, tv, to, MaskMap<false>{}, p, geo);
        return err == cudaSuccess ? cudaGetLastError() : err;
      }
    }
  }
  // One CTA per SM fits (shared memory and registers); the grid is persistent, at most one CTA per SM.
  // A split_keys row takes one item per CTA (its consumers hand over through one shared-memory area).
  const int64_t grid = cfg.split_keys ? items : std::min<int64_t>(items, sms);
  const Geometry geo = Geometry::of(p, cfg.block_m(), static_cast<int>(grid), cfg.elem_bytes());
  // mask_elem: bytes per element of the mask tensor the kernel stages (wgmma_mask.cuh), 0 without one;
  // mask: its map for the mask kernels, MaskMap<false> for the others.
  const auto run = [&](auto* kernel, auto mask, int mask_elem) {
    const int bytes = cfg.smem_bytes(mask_elem);
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) return e;
    kernel<<<static_cast<unsigned>(grid), cfg.threads(), bytes, stream>>>(tq, tk, tv, to, mask, p, geo);
    return cudaGetLastError();
  };
  // Score modifiers (supports(): the hand-made rows of a row split, unsplit, without the counter) on the
  // persistent grid, an instantiation per combination.
  if (has_score_mods(p)) {
    if constexpr (kScoreModRow<kIndex>) {
      if (!score_mods_instantiated(p)) return cudaErrorInvalidValue;
      return with_score_mods(p, [&](auto mods) {
        constexpr MaskKind kMask = decltype(mods)::kMask;
        auto* kernel = attention_kernel<T, kIndex, PersistentSchedule<kIndex, decltype(mods), OwnSequences>,
                                        StoreEpilogue<T, kIndex, OwnSequences>>;
        if constexpr (kMask != MaskKind::kNone)
          return run(kernel, tmask, kMaskElemBytes<kMask>);
        else
          return run(kernel, MaskMap<false>{}, 0);
      });
    } else {
      return cudaErrorInvalidValue;  // never a row without them: the result would ignore them
    }
  }
  if constexpr (!cfg.split_keys && !cfg.fp8) {
    // The workspace (supports(): sequences of their own lengths) holds DynamicSchedule's counter. A
    // memset, not a kernel's own zeroing: no CTA could tell when the others had seen the old count. A
    // stream operation like the kernel, so the call stays capturable.
    if (p.workspace != nullptr) {
      err = cudaMemsetAsync(p.workspace, 0, sizeof(unsigned), stream);
      if (err != cudaSuccess) return err;
      return run(attention_kernel<T, kIndex, DynamicSchedule<kIndex, NoMods>, StoreEpilogue<T, kIndex, OwnSequences>>,
                 MaskMap<false>{}, 0);
    }
  }
  const auto plain = [&](auto seqs) {
    using Seqs = decltype(seqs);
    return run(attention_kernel<T, kIndex, PersistentSchedule<kIndex, NoMods, Seqs>, StoreEpilogue<T, kIndex, Seqs>>,
               MaskMap<false>{}, 0);
  };
  if constexpr (kCallSequences<kIndex>)
    if (!own_sequences(p)) return plain(CallSequences{});
  if constexpr (kConfigs[kIndex].fp8)
    return cudaErrorInvalidValue;  // never: FP8 rows serve padded calls only (supports())
  else
    return plain(OwnSequences{});
}

// KernelFamily::probe_image on this instantiation (see mma_launch.cuh).
template <typename T, int kIndex>
cudaError_t kernel_attributes(cudaFuncAttributes* attr) {
  using Seqs = std::conditional_t<kConfigs[kIndex].fp8, CallSequences, OwnSequences>;
  return cudaFuncGetAttributes(attr, attention_kernel<T, kIndex, PersistentSchedule<kIndex, NoMods, Seqs>, StoreEpilogue<T, kIndex, Seqs>>);
}

}  // namespace evosdpa::detail::wgmma_sm90
