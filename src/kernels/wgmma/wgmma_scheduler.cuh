// Work scheduling of the Hopper kernel: the persistent grid's work items (block_m query rows of one
// (batch, head)) and the order CTAs take them in.
#pragma once

#include <cstdint>

#include "kernels/kernel_params.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

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

// The grid is persistent: CTA b takes work items b, b + gridDim.x, ... of this order.
template <int kIndex>
__device__ __forceinline__ int work_count(const KernelParams& p) {
  constexpr int BM = Shape<kIndex>::kBlockM;
  return (p.seqlen_q + BM - 1) / BM * p.batch * p.heads_q;
}

// K and V of this many bytes (a section of heads) are meant to stay in L2 while their items run: half
// the H100's 50 MB (FlashAttention-3's scheduler uses 32 MB).
constexpr long long kL2SectionBytes = 24ll << 20;

template <int kIndex>
__device__ __forceinline__ Work work_at(const KernelParams& p, int index) {
  constexpr TileConfig kCfg = kConfigs[kIndex];
  constexpr int BM = Shape<kIndex>::kBlockM;
  const int q_blocks = (p.seqlen_q + BM - 1) / BM;
  const int heads = p.batch * p.heads_q;
  int qb, bh;
  if (p.causal) {
    // The longest query blocks (the last ones) first, so that the work does not end on them; heads in
    // sections whose K and V fit in L2 together, so that a section's query blocks, which run at
    // different times, read K and V from L2 rather than DRAM (at B=32 H=16 L=512 D=128, heads one after
    // another, K and V came from DRAM 2.5 times over and the kernel was memory-bound).
    const long long kv_bytes = 2ll * p.seqlen_k * kCfg.head_dim * TileConfig::kElemBytes;
    const long long fit = kL2SectionBytes * p.kv_group / max(kv_bytes, 1ll);
    const int section_heads = static_cast<int>(min(static_cast<long long>(heads), max(fit, 1ll)));
    const int per_section = section_heads * q_blocks;
    const int section = index / per_section, within = index % per_section;
    const int width = min(section_heads, heads - section * section_heads);  // the last section may be narrower
    qb = q_blocks - 1 - within / width;
    bh = section * section_heads + within % width;
  } else {  // the query blocks of one head side by side: they read the same K and V through L2
    qb = index % q_blocks;
    bh = index / q_blocks;
  }
  Work w;
  w.q0 = qb * BM;
  w.head = bh % p.heads_q;
  w.batch = bh / p.heads_q;
  int keys = p.seqlen_k;
  if (p.causal) keys = min(keys, max(0, min(w.q0 + BM, p.seqlen_q) + p.causal_offset));
  w.n_tiles = (keys + kCfg.block_n - 1) / kCfg.block_n;
  return w;
}

// The CTA's items: item `iter` is blockIdx.x + iter * gridDim.x of work_at's order (the launch keeps the
// grid no larger than the item count).
template <int kIndex>
__device__ __forceinline__ int items_of_cta(const KernelParams& p) {
  const int64_t count = work_count<kIndex>(p);  // up to 2^31 - 1: the sum below needs 64 bits
  return static_cast<int>((count - blockIdx.x + gridDim.x - 1) / gridDim.x);
}
template <int kIndex>
__device__ __forceinline__ Work cta_item(const KernelParams& p, int iter) {
  return work_at<kIndex>(p, static_cast<int>(blockIdx.x) + iter * static_cast<int>(gridDim.x));
}

}  // namespace evosdpa::detail::wgmma_sm90
