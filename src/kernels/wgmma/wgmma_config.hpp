// Tile configuration of the Hopper family (wgmma + TMA + warp specialisation). Plain C++ so that host-side
// supports() reads the same table the kernels are compiled from.
#pragma once

#include "evosdpa/evosdpa.h"

namespace evosdpa::detail::wgmma_sm90 {

struct TileConfig {
  int head_dim;       // D: columns of Q, K, V and O; stored as D/64 blocks of 64 columns (one 128-byte
                      // swizzle atom per row), the widest box a 128B-swizzled TMA load takes
  int block_n;        // keys per K/V tile: the N of S = Q.K^T (one m64nNk16 wgmma per 16 columns of D)
  int stages;         // depth of the K/V ring the producer fills ahead of the consumers
  int consumers;      // consumer warpgroups, 64 query rows each (wgmma M = 64), taking turns at the
                      // tensor cores; 3 where the softmax is as long as the GEMMs (D = 64)
  int producer_regs;  // registers per thread after setmaxnreg: the producer warpgroup gives its share
  int consumer_regs;  //   to the consumers (the register file holds 64K)

  static constexpr int kElemBytes = 2;  // fp16 / bf16
  // Q tiles in shared memory: the next item's Q loads while this one runs, and this one's buffer holds
  // its O on the way out (the epilogue's TMA store).
  static constexpr int kQBuffers = 2;

  constexpr int block_m() const { return 64 * consumers; }       // query rows per work item
  constexpr int threads() const { return 128 * (1 + consumers); }  // one producer warpgroup issuing TMA
  constexpr int d_blocks() const { return head_dim / 64; }
  constexpr int q_bytes() const { return block_m() * head_dim * kElemBytes; }
  constexpr int kv_tile_bytes() const { return block_n * head_dim * kElemBytes; }
  // The Q ring, then the K ring, then the V ring (every tile a multiple of 1024 bytes, the swizzle's
  // period), then the mbarriers (each ring's full and empty ones); plus 1024 bytes to align the base.
  constexpr int barrier_offset() const { return kQBuffers * q_bytes() + 2 * stages * kv_tile_bytes(); }
  constexpr int smem_bytes() const { return 1024 + barrier_offset() + 8 * (2 * kQBuffers + 4 * stages); }
};

// One row per head_dim (measured on an H100, fa3 grid, docs/perf-log.md v8.3):
//  - D = 64: three consumers (192 rows): per 128-key tile a warpgroup's GEMMs take about as long as its
//    softmax (16K exponentials), so a third warpgroup keeps the tensor cores busy (FlashAttention-3's
//    choice for this head size): non-causal D = 64 went from 0.79-0.90x cuDNN to 0.85-1.07x.
//  - D = 128: 128-key tiles. A 176-key row (FlashAttention-3's non-causal choice) was 6% faster than
//    this one with direct stores of O, and 5-9% slower once O went out through TMA.
// Registers: 2 consumers x 240 + 24, 3 x 160 + 32 (x 128 threads <= 64K).
inline constexpr TileConfig kConfigs[] = {
    {64, 128, 2, 3, 32, 160},
    {128, 128, 2, 2, 24, 240},
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
         c.stages >= 2 && c.consumers >= 2 && c.consumers <= 3 &&          // pingpong needs two; 4 x 128 threads max
         c.producer_regs >= 24 && c.consumer_regs <= 256 &&                 // setmaxnreg's range
         c.producer_regs % 8 == 0 && c.consumer_regs % 8 == 0 &&            // setmaxnreg's granularity
         128 * (c.producer_regs + c.consumers * c.consumer_regs) <= 65536 &&  // the register file
         c.kv_tile_bytes() % 1024 == 0 && c.q_bytes() % 1024 == 0 &&       // tiles stay 1024-byte aligned
         c.smem_bytes() <= 227 * 1024;                                       // sm_90's per-block opt-in limit
}

constexpr bool all_valid() {
  for (const TileConfig& c : kConfigs)
    if (!valid(c)) return false;
  return true;
}
static_assert(all_valid(), "invalid wgmma_sm90 tile configuration");
// Token indices are int in the kernel (TMA coordinates are signed 32-bit): key0 + block_n and
// q0 + block_m (each <= 256) must stay below 2^31 for any length validation admits.
static_assert(EVOSDPA_MAX_SEQLEN + 256 + 256 < 2147483647LL, "int token arithmetic overflows");

}  // namespace evosdpa::detail::wgmma_sm90
