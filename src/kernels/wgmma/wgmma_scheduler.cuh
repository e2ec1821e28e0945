// Work scheduling of the Hopper kernel: the persistent grid's work items (block_m query rows of one
// (batch, head)) and the order CTAs take them in.
#pragma once

#include "kernels/kernel_params.hpp"
#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_order.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// The table's derived sizes as constants device code can read (its constexpr functions are host functions).
template <int kIndex>
struct Shape {
  static constexpr int kBlockM = kConfigs[kIndex].block_m();
  static constexpr int kThreads = kConfigs[kIndex].threads();
};

// One work item: block_m query rows of one (batch, head), and how many K/V tiles its rows see (causal:
// up to the last row's diagonal).
struct Work {
  int q0, head, batch, n_tiles;
};

// The number of work items; CTA b of the persistent grid takes items b, b + gridDim.x, ... of
// item_order (wgmma_order.hpp), gridDim.x being no larger than the count.
template <int kIndex>
__device__ __forceinline__ int work_count(const KernelParams& p) {
  constexpr int BM = Shape<kIndex>::kBlockM;
  return (p.seqlen_q + BM - 1) / BM * p.batch * p.heads_q;
}

template <int kIndex>
__device__ __forceinline__ Work work_at(const KernelParams& p, int index) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  constexpr int BM = Shape<kIndex>::kBlockM;
  const BlockOfHead at =
      item_order(index, (p.seqlen_q + BM - 1) / BM, p.batch * p.heads_q, static_cast<int>(gridDim.x), p.causal != 0);
  Work w;
  w.q0 = at.qb * BM;
  w.head = at.bh % p.heads_q;
  w.batch = at.bh / p.heads_q;
  int keys = p.seqlen_k;
  if (p.causal) keys = min(keys, max(0, min(w.q0 + BM, p.seqlen_q) + p.causal_offset));
  w.n_tiles = (keys + kCfg.block_n - 1) / kCfg.block_n;
  return w;
}

// How many items CTA blockIdx.x takes, and its iter-th.
template <int kIndex>
__device__ __forceinline__ int items_of_cta(const KernelParams& p) {
  const int count = work_count<kIndex>(p), g = gridDim.x;
  return count / g + (static_cast<int>(blockIdx.x) < count % g ? 1 : 0);
}
template <int kIndex>
__device__ __forceinline__ Work cta_item(const KernelParams& p, int iter) {
  return work_at<kIndex>(p, iter * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x));
}

}  // namespace evosdpa::detail::wgmma_sm90
