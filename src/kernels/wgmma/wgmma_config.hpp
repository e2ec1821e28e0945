// Tile configuration of the Hopper family (wgmma + TMA + warp specialisation). Plain C++ so that host-side
// supports() reads the same table the kernels are compiled from.
#pragma once

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail::wgmma_sm90 {

struct TileConfig {
  int head_dim;  // D: columns of Q, K, V and O; stored as D/64 blocks of 64 columns (one 128-byte
                 // swizzle atom per row), the widest box a 128B-swizzled TMA load takes
  int block_n;   // keys per K/V tile: the N of S = Q.K^T (one m64nNk16 wgmma per 16 columns of D)
  int stages;    // depth of the K/V ring the producer fills ahead of the consumers

  static constexpr int kConsumers = 2;           // consumer warpgroups, 64 query rows each (wgmma M = 64)
  static constexpr int kBlockM = 64 * kConsumers;  // query rows per CTA
  static constexpr int kThreads = 128 * (1 + kConsumers);  // one producer warpgroup issuing TMA
  static constexpr int kElemBytes = 2;           // fp16 / bf16

  constexpr int d_blocks() const { return head_dim / 64; }
  constexpr int q_bytes() const { return kBlockM * head_dim * kElemBytes; }
  constexpr int kv_tile_bytes() const { return block_n * head_dim * kElemBytes; }
  // Q, then the K ring, then the V ring (every tile a multiple of 1024 bytes, the swizzle's period),
  // then the mbarriers (Q full, the rings' full and empty, Q empty); plus 1024 bytes to align the base.
  constexpr int barrier_offset() const { return q_bytes() + 2 * stages * kv_tile_bytes(); }
  constexpr int smem_bytes() const { return 1024 + barrier_offset() + 8 * (2 + 4 * stages); }
};

// One row per head_dim. 128-key tiles: S is m64n128 (64 f32 registers per thread), O m64nD.
inline constexpr TileConfig kConfigs[] = {
    {64, 128, 2},
    {128, 128, 2},
};
inline constexpr int kConfigCount = sizeof(kConfigs) / sizeof(kConfigs[0]);

constexpr int config_index(int head_dim) {
  for (int i = 0; i < kConfigCount; ++i)
    if (kConfigs[i].head_dim == head_dim) return i;
  return -1;
}

constexpr bool valid(const TileConfig& c) {
  return c.head_dim % 64 == 0 && c.head_dim >= 64 && c.head_dim <= 256 &&  // whole 64-column blocks; O <= 128 regs
         c.block_n % 16 == 0 && c.block_n >= 16 && c.block_n <= 256 &&    // wgmma N and TMA box rows <= 256
         c.stages >= 2 &&
         c.kv_tile_bytes() % 1024 == 0 && c.q_bytes() % 1024 == 0 &&     // tiles stay 1024-byte aligned
         c.smem_bytes() <= 227 * 1024;                                     // sm_90's per-block opt-in limit
}

constexpr bool all_valid() {
  for (const TileConfig& c : kConfigs)
    if (!valid(c)) return false;
  return true;
}
static_assert(all_valid(), "invalid wgmma_sm90 tile configuration");
// Token indices are int in the kernel (TMA coordinates are signed 32-bit): key0 + block_n and
// q0 + kBlockM must stay below 2^31 for any length validation admits.
static_assert(EVOSDPA_MAX_SEQLEN + 256 + TileConfig::kBlockM < 2147483647LL, "int token arithmetic overflows");

}  // namespace evosdpa::detail::wgmma_sm90
