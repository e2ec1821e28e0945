// Shared-memory layout of the Hopper kernel and its mbarriers.
#pragma once

#include "kernels/rtc_std.hpp"
#include "kernels/wgmma/wgmma_config.hpp"

namespace evosdpa::detail::wgmma_sm90 {

// The Q ring, the K ring, the V ring (each tile D/64 blocks of [rows x 64 columns], 1024-byte
// aligned; FP8: one block of 128 columns), with FP8 the transposed V ring and the O buffers, then the
// mbarriers, the Work of each Q buffer's item, the CTA's plan and (split_keys rows) the partial results
// the consumers hand over; a split item's partial rows go over the rings at the end.
template <int kIndex>
struct Smem {
  static constexpr TileConfig kCfg = kConfigs[kIndex];
  // The table's sizes as constants device code can read (its constexpr functions are host functions).
  static constexpr int kQBytes = kCfg.q_bytes();
  static constexpr int kTileBytes = kCfg.kv_tile_bytes();
  static constexpr int kBarriers = kCfg.barrier_offset();
  static constexpr int kWork = kCfg.work_offset();
  static constexpr int kHandoff = kCfg.handoff_offset();
  static constexpr int kHandoffFloats = kCfg.handoff_floats();
  static constexpr int kBlockM = kCfg.block_m();
  static constexpr int kPartialRow = kCfg.partial_row_bytes();
  static constexpr int kDBlocks = kCfg.d_blocks();
  static constexpr int kBlockCols = kCfg.block_cols();  // elements per block row
  static constexpr int kRowBytes = kCfg.row_bytes();    // bytes per block row: the swizzle span
  static constexpr int kVt = kCfg.vt_offset();
  static constexpr int kVtTileBytes = kCfg.vt_tile_bytes();
  static constexpr int kOStage = kCfg.o_stage_offset();
  static constexpr int kOStageBytes = kCfg.o_stage_bytes();
  static constexpr int kMaskStage = kCfg.mask_stage_offset();
  static constexpr int kMaskBars = kCfg.mask_bar_offset();
  uint32_t base;
  __device__ uint32_t q(int buffer) const { return base + buffer * kQBytes; }
  __device__ uint32_t k(int stage) const { return q(TileConfig::kQBuffers) + stage * kTileBytes; }
  __device__ uint32_t v(int stage) const { return k(kCfg.stages) + stage * kTileBytes; }
  __device__ uint32_t q_full(int buffer) const { return base + kBarriers + 8 * buffer; }
  __device__ uint32_t q_empty(int buffer) const { return q_full(TileConfig::kQBuffers + buffer); }
  __device__ uint32_t k_full(int stage) const { return q_full(2 * TileConfig::kQBuffers + stage); }
  __device__ uint32_t v_full(int stage) const { return k_full(kCfg.stages + stage); }
  __device__ uint32_t k_empty(int stage) const { return k_full(2 * kCfg.stages + stage); }
  __device__ uint32_t v_empty(int stage) const { return k_full(3 * kCfg.stages + stage); }
  __device__ uint32_t merge_full() const { return k_full(4 * kCfg.stages); }  // a split item's partials are in
  // FP8: V^T of stage s ([D rows][128 bytes of keys, block_n of them used], K-major, 128B-swizzled),
  // written by the transposing warps once the TMA load of V into v(s) has landed; its barriers; consumer
  // c's buffer of O.
  __device__ uint32_t vt(int stage) const { return base + kVt + stage * kVtTileBytes; }
  __device__ uint32_t vt_full(int stage) const { return merge_full() + 8 + 8 * stage; }
  __device__ uint32_t vt_empty(int stage) const { return vt_full(kCfg.stages + stage); }
  __device__ uint32_t o_stage(int consumer) const { return base + kOStage + consumer * kOStageBytes; }
  // The B operand of O += P.V for stage s and the barriers the consumers wait on and release: V itself
  // (N-major) for 16-bit inputs, its transpose for FP8.
  __device__ uint32_t pv_tile(int stage) const { return kCfg.fp8 ? vt(stage) : v(stage); }
  __device__ uint32_t pv_full(int stage) const { return kCfg.fp8 ? vt_full(stage) : v_full(stage); }
  __device__ uint32_t pv_empty(int stage) const { return kCfg.fp8 ? vt_empty(stage) : v_empty(stage); }
  // A mask tensor's tile (wgmma_mask.cuh): `bytes` per consumer warpgroup; the mbarriers its loads complete
  // on and its reads arrive on.
  __device__ uint32_t mask_stage(int consumer, int bytes) const { return base + kMaskStage + consumer * bytes; }
  __device__ uint32_t mask_full(int consumer) const { return base + kMaskBars + 8 * consumer; }
  __device__ uint32_t mask_empty(int consumer) const { return mask_full(TileConfig::kMaskBarriers / 2 + consumer); }
  // Field f (Work's, in write_work's order) of the Work of the item whose Q is in `buffer`.
  __device__ uint32_t work(int buffer, int f) const { return base + kWork + TileConfig::kWorkSlotBytes * buffer + 4 * f; }
  // The CTA's plan (plan_cta): its item count (f = 0) and its last item with tiles (f = 1); with
  // DynamicSchedule where its last item was found (f = 2, 3: the Cursor).
  __device__ uint32_t plan(int f) const { return work(TileConfig::kQBuffers, f); }
  // A split item's partial rows (TileConfig::partial_row_bytes): row `row` of the CTA's, staged; row `row`
  // of those it receives (slot s's slice from row s * slice).
  __device__ uint32_t staged(int row) const { return base + row * kPartialRow; }
  __device__ uint32_t received(int row) const { return base + (kBlockM + row) * kPartialRow; }
  // split_keys: float f of thread t's hand-over in slot h (one per consumer but the storer; a warp's 32
  // floats are consecutive).
  __device__ uint32_t handoff(int h, int f, int t) const {
    return base + kHandoff + 4 * ((h * kHandoffFloats + f) * 128 + t);
  }
};

}  // namespace evosdpa::detail::wgmma_sm90
