// Tile configuration of mma_sm80's backward pass (FlashAttention-2's algorithm on mma.sync m16n8k16).
// Plain C++ so that host-side support checks (shared memory, grid size, workspace) read the table the
// kernels are compiled from.
#pragma once

#include "kernels/rtc_std.hpp"

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail::mma_sm80 {

// Threads per block of the elementwise passes (bwd_prepass.cuh), D / 8 per query row.
inline constexpr int kPrepassThreads = 128;

struct BwdConfig {
  int head_dim;           // D
  int warps;              // warps per block; each owns 16 rows: keys in the dK/dV kernel, queries in the dQ one
  int block_m;            // dQ kernel: the block's queries (16 per warp)
  int block_n;            // dK/dV kernel: the block's keys (16 per warp); dQ kernel: keys per streamed tile
  int tile_m;             // dK/dV kernel: queries per tile streamed past the block's keys
  int min_blocks_per_sm;  // __launch_bounds__ occupancy hint

  constexpr int threads() const { return warps * 32; }
  // dK/dV kernel: K and V tiles; double-buffered Q and dO tiles, lse and D; the dS^T tile the dQ atomics
  // read (FAST mode; allocated in both so one instantiation serves both).
  constexpr int dkdv_smem_bytes(int elem_bytes) const {
    return (2 * block_n * head_dim + 2 * 2 * tile_m * head_dim + block_n * tile_m) * elem_bytes + 2 * 2 * tile_m * 4;
  }
  // dQ kernel: the block's Q and dO tiles; double-buffered K and V tiles.
  constexpr int dq_smem_bytes(int elem_bytes) const {
    return (2 * block_m * head_dim + 2 * 2 * block_n * head_dim) * elem_bytes;
  }
};

// One row per head dim, 4 warps, 64 x 64 blocks: the first correct version; its speed against
// FlashAttention-2 is in docs/perf-log.md. D = 128 streams query tiles of 32: with 64 its dK/dV kernel
// needed 255 registers and spilled 28 bytes (ptxas, sm_90; dK and dV alone hold 128 fp32 registers per
// thread), and its 105 KiB of shared memory were over sm_86/sm_89's 99 KiB per block.
inline constexpr BwdConfig kBwdConfigs[] = {
    {64, 4, 64, 64, 64, 2},
    {128, 4, 64, 64, 32, 2},
};
inline constexpr int kBwdConfigCount = sizeof(kBwdConfigs) / sizeof(kBwdConfigs[0]);

// Compile-time view of one row, for the kernels (a constexpr member function of a host struct is not
// callable from device code).
template <int kIndex>
struct BwdKernel {
  static constexpr BwdConfig kCfg = kBwdConfigs[kIndex];
  static constexpr int kD = kCfg.head_dim;
  static constexpr int kBM = kCfg.block_m;
  static constexpr int kBN = kCfg.block_n;
  static constexpr int kTM = kCfg.tile_m;
  static constexpr int kThreads = kCfg.threads();
  static constexpr int kMinBlocks = kCfg.min_blocks_per_sm;
};

constexpr int bwd_config_index(int head_dim) {
  for (int i = 0; i < kBwdConfigCount; ++i)
    if (kBwdConfigs[i].head_dim == head_dim) return i;
  return -1;
}

constexpr bool bwd_valid(const BwdConfig& c) {
  return c.head_dim % 16 == 0 && c.block_n == 16 * c.warps && c.block_m == 16 * c.warps &&
         // the dS^T tile's rows of tile_m 16-bit elements: 4 or 8+ chunks (the swizzle); the dQ atomics
         // split the warps over its 16-row groups and D's columns
         (c.tile_m == 32 || c.tile_m % 64 == 0) && c.tile_m <= c.block_n && c.warps % (c.tile_m / 16) == 0 &&
         (c.head_dim / (c.warps / (c.tile_m / 16))) % 16 == 0 &&
         // load_tile: each thread copies one chunk column of rows a multiple of 8 apart, in whole rounds
         c.threads() % (c.head_dim / 8) == 0 && (c.threads() / (c.head_dim / 8)) % 8 == 0 &&
         c.block_m % (c.threads() / (c.head_dim / 8)) == 0 && c.block_n % (c.threads() / (c.head_dim / 8)) == 0 &&
         c.tile_m % (c.threads() / (c.head_dim / 8)) == 0 &&
         c.threads() >= c.tile_m &&  // one thread per query row loads lse and D
         c.min_blocks_per_sm >= 1 &&
         // within sm_86/sm_89's 99 KiB per block, so every device of the family runs it
         c.dkdv_smem_bytes(2) <= 99 * 1024 && c.dq_smem_bytes(2) <= 99 * 1024;
}

constexpr bool bwd_all_valid() {
  for (const BwdConfig& c : kBwdConfigs)
    if (!bwd_valid(c)) return false;
  return bwd_config_index(64) >= 0 && bwd_config_index(128) >= 0;
}
static_assert(bwd_all_valid(), "invalid mma_sm80 backward configuration");

// Token indices are ints: seqlen + block - 1 must fit.
static_assert(EVOSDPA_MAX_SEQLEN + 256 <= INT32_MAX, "EVOSDPA_MAX_SEQLEN plus a tile overflows int indices");

}  // namespace evosdpa::detail::mma_sm80
