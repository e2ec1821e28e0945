// Work scheduling of the Hopper kernel: its work items (block_m query rows of one (batch, head), and a
// range of their K/V tiles) and which CTA takes which. Two policies:
//  - PersistentSchedule: one CTA per SM takes whole items in turn, in the order of wgmma_order.hpp.
//  - SplitSchedule: fewer items than SMs; each item's tiles are split among the CTAs of a cluster, one
//    item per cluster, and the CTAs merge their partial results (wgmma_merge.cuh).
#pragma once

#include "kernels/kernel_params.hpp"
#include "kernels/sequence.cuh"
#include "kernels/wgmma/fast_div.hpp"
#include "kernels/wgmma/wgmma_geometry.hpp"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/wgmma_config.hpp"
#include "kernels/wgmma/wgmma_order.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// The table's derived sizes as constants device code can read (its constexpr functions are host functions).
template <int kIndex>
struct Shape {
  static constexpr int kBlockM = kConfigs[kIndex].block_m();
  static constexpr int kThreads = kConfigs[kIndex].threads();
};

// One work item: block_m query rows of one (batch, head), and the K/V tiles t0 .. t0 + n_tiles - 1 it
// runs over (causal: none past the last row's diagonal). Rows and keys count from the start of the
// item's sequence (sequence.cuh), whose first rows in the packed tensors are q_start and k_start (0 when
// padded); an item past its sequence's end (packed batches, whose grid follows the longest) has no tile
// and stores no row.
struct Work {
  int q0, head, batch, t0, n_tiles;
  int kv_head;        // head's K/V head (grouped-query heads)
  int q_start, k_start;
  int len_q, len_k;   // the sequence's queries and keys
  int causal_offset;  // with a causal mask, query i sees key j <= i + causal_offset
  static constexpr int kFields = 11;
};
static_assert(Work::kFields * 4 <= TileConfig::kWorkSlotBytes, "a Work's fields fit its shared-memory slot");

// TMA coordinates of a sequence's rows: its batch entry of a padded tensor, or (packed) rows start ..
// of the single one.
__device__ __forceinline__ int q_map_batch(const KernelParams& p, const Work& w) { return p.cu_seqlens_q != nullptr ? 0 : w.batch; }
__device__ __forceinline__ int k_map_batch(const KernelParams& p, const Work& w) { return p.cu_seqlens_k != nullptr ? 0 : w.batch; }

// Query block qb of flattened head bh, with all the tiles its rows see.
template <int kIndex>
__device__ __forceinline__ Work whole_item(const KernelParams& p, const Geometry& g, BlockOfHead at) {
  constexpr int BM = Shape<kIndex>::kBlockM, BN = kConfigs[kIndex].block_n;
  Work w;
  w.q0 = at.qb * BM;
  const QuotRem bh = g.heads_q.divmod(at.bh);
  w.batch = bh.quot;
  w.head = bh.rem;
  w.kv_head = g.kv_group.div(w.head);
  // FP8 rows serve padded batches of the call's lengths only (supports()): no per-sequence arithmetic in
  // their producer's few registers (8 bytes spilled with it).
  const Sequence seq = kConfigs[kIndex].fp8 ? padded_sequence(p) : sequence_of(p, w.batch);
  w.q_start = seq.q_start;
  w.k_start = seq.k_start;
  w.len_q = seq.len_q;
  w.len_k = seq.len_k;
  w.causal_offset = seq.causal_offset;
  w.t0 = 0;
  int keys = w.q0 < w.len_q ? w.len_k : 0;
  if (p.causal) keys = min(keys, max(0, min(w.q0 + BM, w.len_q) + w.causal_offset));
  w.n_tiles = (keys + BN - 1) / BN;
  return w;
}

// CTA b of the grid takes items b, b + gridDim.x, ... of item_order (wgmma_order.hpp), gridDim.x being
// no larger than the item count.
template <int kIndex>
struct PersistentSchedule {
  static constexpr bool kOneItem = false;  // CTAs may take several items
  static __device__ __forceinline__ int items(const Geometry& g) {
    const QuotRem r = g.grid.divmod(g.items);
    return r.quot + (static_cast<int>(blockIdx.x) < r.rem ? 1 : 0);
  }
  static __device__ __forceinline__ Work item(const KernelParams& p, const Geometry& g, int iter) {
    const int index = iter * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x);
    return whole_item<kIndex>(p, g, g.order(index));
  }
};

// Cluster c (CTAs c*n .. c*n + n - 1, n the cluster size) takes item c; its CTA of rank r the r-th of n
// near-equal runs of the item's tiles (some may be empty, causal rows near the top).
template <int kIndex>
struct SplitSchedule {
  static constexpr bool kOneItem = true;
  static __device__ __forceinline__ int items(const Geometry&) { return 1; }
  static __device__ __forceinline__ Work item(const KernelParams& p, const Geometry& g, int) {
    const int n = static_cast<int>(cluster_size()), r = static_cast<int>(cluster_rank());
    const QuotRem at = g.q_blocks.divmod(static_cast<int>(blockIdx.x) / n);
    Work w = whole_item<kIndex>(p, g, {at.rem, at.quot});
    const int tiles = w.n_tiles;
    w.t0 = r * tiles / n;
    w.n_tiles = (r + 1) * tiles / n - w.t0;
    return w;
  }
};

}  // namespace evosdpa::detail::wgmma_sm90
