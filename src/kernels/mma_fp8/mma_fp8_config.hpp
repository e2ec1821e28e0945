// Tile configuration of the FP8 (E4M3) tensor-core family for sm_89 and sm_90 (mma.sync m16n8k32 e4m3,
// ldmatrix, cp.async): Ada's only FP8 tensor-core path, and the Hopper fallback where wgmma cannot run.
// Plain C++ so that host-side selection reads the same table the kernels are compiled from.
#pragma once

#include "kernels/rtc_std.hpp"

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail::mma_fp8 {

struct TileConfig {
  int head_dim;           // D: bytes per row of Q, K and V (E4M3: one byte per element)
  int warps;              // warps per block
  int m_tiles;            // 16-row mma tiles of queries per warp; each K/V fragment feeds m_tiles mmas
  int block_n;            // keys per K/V tile (a multiple of 32: the mma's k of P.V)
  int min_blocks_per_sm;  // __launch_bounds__ occupancy hint

  constexpr int threads() const { return warps * 32; }
  constexpr int warp_rows() const { return 16 * m_tiles; }
  constexpr int block_m() const { return warps * warp_rows(); }
  // The Q tile and double-buffered K and V tiles, one byte per element.
  constexpr int smem_bytes() const { return block_m() * head_dim + 2 * 2 * block_n * head_dim; }
};

// Not timed yet (no GPU in the session that wrote it): the largest tiles that ptxas (sm_90, two blocks
// per SM, 255 registers at most) compiled without spills: D=64 one m-tile per warp, 64-key tiles (214
// registers; two m-tiles spilled 16 bytes); D=128 one m-tile, 32-key tiles (236; 64-key tiles spilled
// 72 bytes). To be timed and tuned on an L4/H100 (evosdpa-tune).
inline constexpr TileConfig kConfigs[] = {
    {64, 4, 1, 64, 2},
    {128, 4, 1, 32, 2},
};
inline constexpr int kConfigCount = sizeof(kConfigs) / sizeof(kConfigs[0]);

// The row for a head_dim; -1 if none.
constexpr int config_index(int head_dim) {
  for (int i = 0; i < kConfigCount; ++i)
    if (kConfigs[i].head_dim == head_dim) return i;
  return -1;
}

constexpr bool valid(const TileConfig& c) {
  return (c.head_dim == 64 || c.head_dim == 128) &&  // 4 or 8 16-byte chunks per row (the swizzle's cases)
         c.block_n % 32 == 0 &&                        // k-steps of 32 keys in P.V
         c.warps >= 1 && c.warps <= 16 && c.m_tiles >= 1 && c.m_tiles <= 4 &&
         (c.block_m() * c.head_dim / 16) % c.threads() == 0 &&  // Q copied in whole 16-byte rounds
         (c.block_n * c.head_dim / 16) % c.threads() == 0 &&    // likewise each K/V tile
         (c.threads() / (c.head_dim / 16)) % 8 == 0 &&          // rows per copy round: the swizzle's period
         c.min_blocks_per_sm >= 1 && c.smem_bytes() <= 99 * 1024;  // sm_89's per-block limit
}

constexpr bool all_valid() {
  for (const TileConfig& c : kConfigs)
    if (!valid(c)) return false;
  return true;
}
static_assert(all_valid(), "invalid mma_fp8 tile configuration");
static_assert(config_index(64) >= 0 && config_index(128) >= 0, "64 and 128 need a row");

}  // namespace evosdpa::detail::mma_fp8
