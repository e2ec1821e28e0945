// Work scheduling of the Hopper kernel: its work items (block_m query rows of one (batch, head), and a
// range of their K/V tiles) and which CTA takes which. Three policies:
//  - PersistentSchedule: one CTA per SM takes whole items in turn, in the order of wgmma_order.hpp.
//  - DynamicSchedule: one CTA per SM claims whole items one at a time from a counter (sequences of
//    their own lengths, whose items differ in length).
//  - SplitSchedule: fewer items than SMs; each item's tiles are split among the CTAs of a cluster, one
//    item per cluster, and the CTAs merge their partial results (wgmma_merge.cuh).
#pragma once

#include "kernels/kernel_params.hpp"
#include "kernels/score_mods.cuh"
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
  static constexpr int kItemFields = 6;  // q0 .. kv_head, the item's own; the rest are its sequence's
  // The end of a CTA's items (DynamicSchedule): no rows, so that its Q "load" completes at once.
  static __device__ __forceinline__ Work end() { return {0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0}; }
  __device__ __forceinline__ bool is_end() const { return n_tiles < 0; }
};
static_assert(Work::kFields * 4 <= TileConfig::kWorkSlotBytes, "a Work's fields fit its shared-memory slot");

// TMA coordinates of a sequence's rows: its batch entry of a padded tensor, or (packed) rows start ..
// of the single one. Seqs: the kernel's sequence policy (sequence.cuh).
template <typename Seqs>
__device__ __forceinline__ int q_map_batch(const KernelParams& p, const Work& w) {
  return Seqs::kOwn && p.cu_seqlens_q != nullptr ? 0 : w.batch;
}
template <typename Seqs>
__device__ __forceinline__ int k_map_batch(const KernelParams& p, const Work& w) {
  return Seqs::kOwn && p.cu_seqlens_k != nullptr ? 0 : w.batch;
}

// Query block qb of flattened head bh, with all the tiles its rows see: from the one holding its first
// row's first key (Mods::kWindow; else from 0) to the one holding its last row's last key; its sequence
// as the policy Seqs reads it (sequence.cuh).
template <int kIndex, typename Mods, typename Seqs>
__device__ __forceinline__ Work whole_item(const KernelParams& p, const Geometry& g, BlockOfHead at) {
  constexpr int BM = Shape<kIndex>::kBlockM, BN = kConfigs[kIndex].block_n;
  Work w;
  w.q0 = at.qb * BM;
  const QuotRem bh = g.heads_q.divmod(at.bh);
  w.batch = bh.quot;
  w.head = bh.rem;
  w.kv_head = g.kv_group.div(w.head);
  const Sequence seq = Seqs::of(p, w.batch);
  w.q_start = seq.q_start;
  w.k_start = seq.k_start;
  w.len_q = seq.len_q;
  w.len_k = seq.len_k;
  w.causal_offset = seq.causal_offset;
  w.t0 = 0;
  int keys = w.q0 < w.len_q ? w.len_k : 0;
  if (p.causal) keys = min(keys, max(0, min(w.q0 + BM, w.len_q) + w.causal_offset));
  if constexpr (Mods::kWindow) {
    keys = min(keys, max(0, min(w.q0 + BM, w.len_q) + w.causal_offset + p.window_right));
    w.t0 = first_key<Mods>(p, w.q0 + w.causal_offset) / BN;
  }
  w.n_tiles = max(0, (keys + BN - 1) / BN - w.t0);
  return w;
}

// CTA b of the grid takes items b, b + gridDim.x, ... of item_order (wgmma_order.hpp), gridDim.x being
// no larger than the item count. Mods: the kernel's score modifiers (score_mods.cuh), which decide the
// items' tiles; S: where it reads its sequences (CallSequences or OwnSequences, sequence.cuh).
template <int kIndex, typename M, typename S>
struct PersistentSchedule {
  using Mods = M;
  using Seqs = S;
  static constexpr bool kOneItem = false;  // CTAs may take several items
  static constexpr bool kDynamic = false;  // each CTA's items are known from the start
  static __device__ __forceinline__ int items(const Geometry& g) {
    const QuotRem r = g.grid.divmod(g.items);
    return r.quot + (static_cast<int>(blockIdx.x) < r.rem ? 1 : 0);
  }
  static __device__ __forceinline__ Work item(const KernelParams& p, const Geometry& g, int iter) {
    const int index = iter * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x);
    return whole_item<kIndex, Mods, Seqs>(p, g, g.order(index));
  }
};

// Cluster c (CTAs c*n .. c*n + n - 1, n the cluster size) takes item c; its CTA of rank r the r-th of n
// near-equal runs of the item's tiles (some may be empty, causal rows near the top).
template <int kIndex, typename M>
struct SplitSchedule {
  using Mods = M;
  using Seqs = OwnSequences;
  static_assert(!M::kWindow, "a split item's runs start at tile 0 (score modifiers run unsplit: score_mod_row)");
  static constexpr bool kOneItem = true;
  static constexpr bool kDynamic = false;
  static __device__ __forceinline__ int items(const Geometry&) { return 1; }
  static __device__ __forceinline__ Work item(const KernelParams& p, const Geometry& g, int) {
    const int n = static_cast<int>(cluster_size()), r = static_cast<int>(cluster_rank());
    const QuotRem at = g.q_blocks.divmod(static_cast<int>(blockIdx.x) / n);
    Work w = whole_item<kIndex, Mods, Seqs>(p, g, {at.rem, at.quot});
    const int tiles = w.n_tiles;
    w.t0 = r * tiles / n;
    w.n_tiles = (r + 1) * tiles / n - w.t0;
    return w;
  }
};

// Calls whose sequences have lengths of their own (cu_seqlens, seqused_k) with a workspace: items
// differ in length (a query block's keys are its sequence's), so a fixed deal leaves the CTA with the
// longest items last; here each CTA takes its first item, blockIdx.x, and then claims the next from a
// counter in the workspace (zeroed by the launch) at the start of each item, so the CTAs end within
// about one item of each other. Claimed in this order, the longest items go first: sequence by sequence, each sequence's heads in sections (Geometry::section: with a causal
// mask as many heads as have their K and V in L2 together, so that the items running side by side
// share them; without, one head), each section's query blocks from the last (with a causal mask the
// longest) to the first, all its heads' block j before block j - 1. A model of the H100 runs (tile
// counts per item, 132 CTAs, the varlen benchmark's shapes) put the fixed deal at 0.54-0.99 of dense's
// rate with mixed lengths and this order at 0.85-1.03, with equal ones 1.00-1.03 (a head's blocks in
// turn instead: 0.96-0.98 causal, measured 0.90-0.94). Only blocks that hold rows of their sequence are
// numbered: with packed queries the producer walks the sequences' offsets, resuming from where its
// previous item was found (its indices only grow). A CTA's items end with Work::end().
struct Cursor {
  int b = 0;     // the sequence the last item was found in
  int base = 0;  // items before it
};

template <int kIndex, typename M>
struct DynamicSchedule {
  using Mods = M;
  using Seqs = OwnSequences;  // the counter serves sequences of their own lengths
  static constexpr bool kOneItem = false;
  static constexpr bool kDynamic = true;
  static_assert(!kConfigs[kIndex].split_keys && !kConfigs[kIndex].fp8,
                "rows of one item per CTA and FP8 rows (padded calls only) keep the fixed deal");

  // The index of the CTA's next item: past the first round of the grid, in claim order. Unsigned: every
  // CTA's last claim passes the item count, which itself may come close to 2^31.
  static __device__ __forceinline__ unsigned claim(const KernelParams& p) {
    return gridDim.x + atomicAdd(static_cast<unsigned*>(p.workspace), 1u);
  }

  // Item `index` (cursor: where the previous index was found, updated), or Work::end() past the last.
  static __device__ __forceinline__ Work locate(const KernelParams& p, const Geometry& g, Cursor& cursor,
                                                unsigned index) {
    constexpr int BM = Shape<kIndex>::kBlockM;
    if (p.cu_seqlens_q == nullptr) {  // every sequence has the call's query blocks
      if (index >= static_cast<unsigned>(g.items)) return Work::end();
      const QuotRem at = g.sequence_items.divmod(static_cast<int>(index));
      const QuotRem in = g.section_items.divmod(at.rem);
      return in_section(p, g, at.quot, g.q_blocks.divisor(), in.quot, in.rem);
    }
    int blocks = 0;
    for (;; ++cursor.b) {
      if (cursor.b >= p.batch) return Work::end();
      int start = 0, len = 0;
      packed_rows(p.cu_seqlens_q, cursor.b, p.total_q, p.seqlen_q, start, len);
      blocks = (len + BM - 1) / BM;
      if (index < static_cast<unsigned>(cursor.base + blocks * p.heads_q)) break;
      cursor.base += blocks * p.heads_q;  // at most the grid's q_blocks * batch * heads_q < 2^31
    }
    const int r = static_cast<int>(index) - cursor.base, per_section = blocks * g.section.divisor();
    const int sec = r / per_section;
    return in_section(p, g, cursor.b, blocks, sec, r - sec * per_section);
  }

  // Item r of section `sec` of sequence b, whose heads have `blocks` query blocks: block rank r / S
  // (the last block first) of the section's head r % S.
  static __device__ __forceinline__ Work in_section(const KernelParams& p, const Geometry& g, int b, int blocks,
                                                    int sec, int r) {
    const QuotRem bh = g.section.divmod(r);
    return whole_item<kIndex, Mods, Seqs>(p, g, {blocks - 1 - bh.quot, b * p.heads_q + sec * g.section.divisor() + bh.rem});
  }
};

// How many of the item's tiles (from t0 on) a warpgroup's 64 rows need: none if they all lie past the
// sequence's end (the last item's padding), else those up to its last row's last key (causal diagonal,
// window) or all. Tiles before its first row's window are computed and masked: at most 64 keys' worth.
template <typename Mods>
__device__ __forceinline__ int warpgroup_tiles(const KernelParams& p, const Work& w, int row0, int block_n) {
  if (row0 >= w.len_q) return 0;
  int keys = w.len_k;
  if (p.causal) keys = min(keys, max(0, min(row0 + 64, w.len_q) + w.causal_offset));
  if constexpr (Mods::kWindow) keys = min(keys, max(0, min(row0 + 64, w.len_q) + w.causal_offset + p.window_right));
  return max(0, min(w.n_tiles, (keys + block_n - 1) / block_n - w.t0));
}

}  // namespace evosdpa::detail::wgmma_sm90
